// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA READ: wire formats, OPFN, qualification, READ_RESP building and
//! READ_REQ validation (SPEC §3 and §5 "tid-read-proto").
//!
//! Modules:
//!
//! - [`wire`]: zero-copy views and `Repr`s of every header a TID RDMA READ
//!   packet carries (9B LRH, BTH, KDETH, RETH, AETH, the READ_REQ and
//!   READ_RESP headers, the TID-entry payload), the invariant CRC, whole
//!   9B frames, and the ERF record (plus pcap headers) that wraps one packet
//!   in a capture file;
//! - [`opfn`]: the 64-bit TID parameter word exchanged by OPFN and the
//!   negotiation steps (request, reply, response, error);
//! - [`qualify`]: which RDMA READ work requests become TID RDMA READs, and
//!   their segment and PSN arithmetic, and the send-queue interlock;
//! - [`read_resp`]: the responder's per-packet READ_RESP builder with a
//!   rewindable cursor, and the requester's READ_REQ builder;
//! - [`read_req`]: validation of a received READ_REQ at the responder, with
//!   typed NAK codes;
//! - [`rc`]: the minimal RC layer a TID READ needs (send queue, ack queue,
//!   PSNs, the QP's protocol state [`rc::TidQp`]);
//! - [`requester`] and [`responder`]: the READ engines, over `tid-flow`
//!   (hardware flows, segments) and the QP's `s_lock`;
//! - [`packet`]: whole packets the engines build and parse.
//!
//! The engines are tested on the software platform and doubles of the
//! `tid-harness` crate.
//!
//! The modules above [`rc`] are pure functions or plain values over their
//! inputs: no lock is taken or needed. The engines run under the QP's
//! `s_lock` and take `exp_lock` only through `tid-flow`.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

extern crate alloc;

pub mod opfn;
pub mod packet;
pub mod qualify;
pub mod qualify_write;
pub mod rc;
pub mod read_req;
pub mod read_resp;
pub mod requester;
pub mod responder;
pub mod wire;
