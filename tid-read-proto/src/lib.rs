// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA READ on top of `tid-flow`: the packets, the connection's
//! parameters, and the requester and responder engines (SPEC §3 and §5
//! "tid-read-proto").
//!
//! Three layers, each using only the ones below it:
//!
//! 1. **Packets and parameters**, pure functions and plain values:
//!    [`wire`] (the bytes of every header, the ICRC, ERF records),
//!    [`packet`] (framing and parsing whole packets), [`read_req`] and
//!    [`read_resp`] (what those two packets mean: built from a segment,
//!    validated, streamed), [`opfn`] and [`qualify`] (what the two sides
//!    agree on and which READs become TID READs).
//! 2. **The engines**, over one QP's state: [`requester`] and
//!    [`responder`], on the shared types of [`rc`] (connection,
//!    completions, errors, the sink and memory-region traits the caller
//!    provides). They take the parts they use and know nothing of how a
//!    QP keeps them.
//! 3. **The QP**: [`qp`] holds both engines' state ([`qp::TidQp`]) and
//!    the entry points that take the QP's `s_lock` guard, as the driver
//!    enters them.
//!
//! The engines are tested on the software platform, doubles and two-node
//! world of the `tid-harness` crate.
//!
//! # Locking
//!
//! Layer 1 takes and needs no lock. The engines run under the QP's
//! `s_lock` and take `exp_lock` only through `tid-flow`; [`qp`]'s table
//! says which entry point needs and takes what.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::panic, clippy::indexing_slicing))]

extern crate alloc;

pub mod opfn;
pub mod packet;
pub mod qp;
pub mod qualify;
pub mod qualify_write;
pub mod rc;
pub mod read_req;
pub mod read_resp;
pub mod requester;
pub mod responder;
pub mod wire;
