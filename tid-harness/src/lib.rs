// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two-node harness of the TID RDMA READ and WRITE engines: what
//! tid-sim, the fuzz targets, the engine tests and the kernel's in-module
//! test run the engines on.
//!
//! - [`world`]: [`TwoNodes`], a requester node and a responder node, each
//!   with its receive context on a software chip, and the actions a
//!   fabric schedules (run the requesters' first and second legs, deliver
//!   to the responders, run the responders' first and second legs,
//!   deliver to the requesters, fire the retry, RNR and TID retry
//!   timers), READs and WRITEs matched and checked byte for byte, and
//!   [`TwoNodes::leaks`] / [`TwoNodes::teardown`]. Generic over the
//!   platform ([`Node`]), so the kernel runs it on its own locks.
//! - [`doubles`]: the responder's memory regions (counted references,
//!   misuse counted; remote-writable ones over scattered pages), the data
//!   pattern behind them, the packet outbox and the page allocator.
//! - [`chip`]: a READ_RESP (into the requester) or a WRITE_DATA (into the
//!   WRITE responder) through the software chip's expected receive.
//! - [`platform`]: platforms on the software chip ([`sim_platform!`],
//!   and with feature `std` the ready `SoftPlatform` with the lock-order
//!   checker).
//! - `fuzz` (feature `std`): the READ state-machine fuzz targets' input
//!   interpreter.
//!
//! Without `std` the crate is `no_std` + `alloc`; the harness collections
//! allocate infallibly (it runs only in tests and the self-test module).
//!
//! # Example
//!
//! One requester QP reads 1 MiB of scattered pages from its peer; the
//! caller plays the fabric, carrying every packet over in order, and the
//! completion comes back checked against the source (feature `std`):
//!
#![cfg_attr(feature = "std", doc = "```")]
#![cfg_attr(not(feature = "std"), doc = "```ignore")]
//! use hfi1_hal::Psn;
//! use hfi1_hal::lock_order::LockToken;
//! use tid_harness::platform::SoftPlatform;
//! use tid_harness::{Setup, TwoNodes};
//!
//! let mut nodes = TwoNodes::<SoftPlatform>::new(Setup {
//!     qps: 1,
//!     groups: 16,
//!     pmtu: 4096,
//!     first_psn: Psn::new(0x10),
//!     region_len: 1 << 20,
//!     ..Setup::default()
//! })
//! .unwrap();
//! let mut root = LockToken::root();
//! let pages = nodes.pages.scattered(256);
//! nodes.post(0, pages, &mut root).unwrap();
//!
//! let mut done = Vec::new();
//! while done.is_empty() {
//!     nodes.run_requesters(&mut root); // READ_REQs out
//!     while let Some(p) = nodes.to_responders.pop() {
//!         nodes.deliver_to_responder(&p, &mut root);
//!     }
//!     nodes.run_responders(64, &mut root); // READ_RESPs out
//!     while let Some(p) = nodes.to_requesters.pop() {
//!         done.extend(nodes.deliver_to_requester(&p, &mut root).done);
//!     }
//! }
//! let data = done[0].data.unwrap();
//! assert_eq!((data.verified, data.mismatched), (1 << 20, 0));
//! // Nothing is left held: TIDs, flows, references, mappings.
//! assert!(nodes.teardown(&mut root).leaks.iter().all(|(_, n)| n == 0));
//! ```
//!
//! # Locking
//!
//! Every [`TwoNodes`] action takes the root token (no lock held), then one
//! QP's locks at a time: its `r_lock` for a WRITE delivery to the
//! responder, its `s_lock`, and the node's context's `exp_lock` inside
//! it; [`chip::receive_read_resp`] needs the QP's `s_lock` held,
//! [`chip::receive_write_data`] its `r_lock`.
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

/// The software chip's platform macro, from `tid-flow` (its one
/// definition), here so the harness's users name one crate.
pub use tid_flow::sim_platform;
pub use world::{Node, Setup, TwoNodes};
