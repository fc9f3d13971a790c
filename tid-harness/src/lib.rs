// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two-node harness of the TID RDMA READ engines: what tid-sim, the
//! fuzz targets, the engine tests and the kernel's in-module READ test
//! run the engines on.
//!
//! - [`world`]: [`TwoNodes`], a requester node and a responder node with
//!   the five actions a fabric schedules (run the requesters, deliver to
//!   the responders, run the responders, deliver to the requesters, fire
//!   the retry timers), matched and checked completions, and
//!   [`TwoNodes::leaks`] / [`TwoNodes::teardown`]. Generic over the
//!   platform ([`Node`]), so the kernel runs it on its own locks.
//! - [`doubles`]: the responder's memory regions (counted references,
//!   misuse counted), the data pattern behind them, the packet outbox and
//!   the destination page allocator.
//! - [`chip`]: a READ_RESP through the software chip's expected receive
//!   and into the requester.
//! - [`platform`]: platforms on the software chip ([`sim_platform!`],
//!   and with feature `std` the ready `SoftPlatform` with the lock-order
//!   checker).
//! - `fuzz` (feature `std`): the READ state-machine fuzz targets' input
//!   interpreter.
//!
//! Without `std` the crate is `no_std` + `alloc`; the harness collections
//! allocate infallibly (it runs only in tests and the self-test module).
//!
//! # Locking
//!
//! Every [`TwoNodes`] action takes the root token (no lock held), then one
//! QP's `s_lock` at a time and the requester context's `exp_lock` inside
//! it; [`chip::receive_read_resp`] needs the QP's `s_lock` held.
#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::panic, clippy::indexing_slicing))]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod chip;
pub mod doubles;
#[cfg(feature = "std")]
pub mod fuzz;
pub mod platform;
pub mod world;

pub use world::{Node, Setup, TwoNodes};
