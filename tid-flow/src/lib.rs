// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Hardware flows and generations, the per-request flow ring, segment setup
//! and teardown, and the receive context that owns `exp_lock` (SPEC §4,
//! §5 "tid-flow").
//!
//! - [`RcvCtxt`]: one receive context. Its `exp_lock` guards [`ExpState`]:
//!   the chip, the flow bitmap and generations ([`HwFlows`]), the TID
//!   groups (`tid_alloc::TidGroups`) and both wait queues
//!   (`qp_wait::WaitQueues`).
//! - [`setup_hw_flow`] / [`clear_hw_flow`]: a QP's hardware flow, kept in
//!   its [`QpFlowState`].
//! - [`TidRequest`]: one request's ring of eight [`FlowRecord`]s
//!   (`setup_head`, `clear_tail`, `flow_idx`), allocated lazily
//!   ([`TidRequest::alloc_flows`]) and freed by
//!   [`TidRequest::free_flow_records`]; [`setup_segment`], [`clear_segment`],
//!   [`clear_all_segments`], [`TidRequest::find_flow_ib`].
//!
//! A [`FlowRecord`] exposes what the protocol needs: page sets, TID
//! entries, packet count, flow index, generation, first/last flow
//! sequence and next expected flow PSN ([`SegmentPsns`]), the IB PSN range
//! (the protocol fills it), and the packet/offset cursors.
//!
// The links only where the feature builds what they name.
#![cfg_attr(
    feature = "sim-chip",
    doc = "With feature `sim`, [`sim`] offers a ready platform (software chip,
counted QP references, FIFO scheduler, identity DMA, lock-order
checker); with feature `sim-chip` alone (`no_std`), [`sim_platform!`]
defines a platform on the software chip with the lock, DMA map, memory
and device counters of its user's choosing."
)]
#![cfg_attr(
    not(feature = "sim-chip"),
    doc = "With feature `sim`, `sim` offers a ready platform (software chip,
counted QP references, FIFO scheduler, identity DMA, lock-order
checker); with feature `sim-chip` alone (`no_std`), `sim_platform!`
defines a platform on the software chip with the lock, DMA map, memory
and device counters of its user's choosing."
)]
//!
//! # Example
//!
//! Allocate and program one 256 KiB segment of 64 scattered pages on the
//! software chip, look at what the requester would send, and clear it
//! (feature `sim`):
//!
#![cfg_attr(feature = "sim", doc = "```")]
#![cfg_attr(not(feature = "sim"), doc = "```ignore")]
//! use hfi1_hal::lock_order::LockToken;
//! use hfi1_hal::services::AllocContext;
//! use tid_flow::sim::{new_ctxt, new_qp};
//! use tid_flow::{QpLocked, Sge, TidRequest, clear_segment, setup_segment, setup_hw_flow};
//!
//! // A receive context of 16 TID groups (128 RcvArray entries), one QP.
//! let rcd = new_ctxt(1, 0, 16, 4, 7).unwrap();
//! let qp = new_qp(0x10, 0, 0);
//! let mut root = LockToken::root();
//! let mut req = TidRequest::new(256 << 10, 6, 4096);
//! req.alloc_flows(&rcd.mem, AllocContext::MaySleep).unwrap();
//!
//! // 64 pages, no two of them contiguous.
//! let sges: Vec<Sge> = (0..64)
//!     .map(|i| Sge { vaddr: 0x10_0000 + 2 * i * 4096, length: 4096 })
//!     .collect();
//!
//! // The driver enters with the QP's s_lock held; exp_lock is taken inside.
//! let mut g = qp.s_lock.lock(&mut root);
//! setup_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g)).unwrap();
//! setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges).unwrap();
//! let f = req.flow(0).unwrap();
//! assert_eq!(f.pagesets.len(), 64); // one RcvArray entry per page
//! assert_eq!(f.npkts, 64); // one READ_RESP per page at a 4 KiB MTU
//! assert!(!f.tid_entries.is_empty() && f.is_programmed());
//! clear_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g)).unwrap();
//! assert!(req.flow(0).is_none_or(|f| !f.is_programmed()));
//! ```
//!
//! # Locking
//!
//! | state | lock | how it is reached |
//! |---|---|---|
//! | [`ExpState`] (chip, [`HwFlows`], TID groups, wait queues, queue membership and counters) | the context's `exp_lock` | only through [`RcvCtxt::exp_lock`]'s guard |
//! | a QP's flags, [`QpFlowState`] and its [`TidRequest`]s | the QP's `s_lock` | through the QP's guard, lent as [`QpLocked`] |
//!
//! The driver calls these with the QP's `s_lock` already held
//! (`__must_hold(&qp->s_lock)`): a [`QpLocked`] borrowed from a guard made
//! over the held lock (`Lock::assume_held`, as `kmod-glue` and the sim's
//! `with_s_lock_held` do) is as good as one from a guard that took it; the
//! engine never takes a QP's `s_lock` on a caller's behalf.
//!
//! | function | needs | takes |
//! |---|---|---|
//! | [`setup_hw_flow`], [`clear_hw_flow`], [`regenerate_hw_flow`] | the QP's `s_lock` ([`QpLocked`]) | `exp_lock` |
//! | [`setup_segment`], [`clear_segment`], [`clear_all_segments`], [`retire_segment`], [`release_retired`] | the QP's `s_lock` ([`QpLocked`], `&mut TidRequest`) | `exp_lock` |
//! | [`TidRequest::alloc_flows`], [`TidRequest::free_flow_records`], [`TidRequest::find_flow_ib`] | the QP's `s_lock` (`&mut`/`&` of the request) | nothing |
//! | [`HwFlows`] methods | `exp_lock` (`&mut HwFlows` from the guard) | nothing |
//! | [`resync_hw_flow`], [`wait_position`] | the QP's `s_lock` ([`QpLocked`]) | `exp_lock` |
//! | the WRITE requester's ring steps ([`TidRequest::push_remote`], [`TidRequest::sent_remote`], [`TidRequest::acked_remote`], ...) | the QP's `s_lock` (`&mut` of the request) | nothing |
//! | `qp_wait::flush_wait` (QP reset/destroy) | the QP's `s_lock` guard | `exp_lock` (pass [`RcvCtxt::exp_lock`]) |
//! | `qp_wait::trigger_resume` (the trigger work) | nothing (root token) | the QP's `s_lock`, alone |
//!
//! `exp_lock` is always taken with the QP's `s_lock` token
//! ([`QpLocked::token`]); the guard borrows it, so nothing can take
//! another `s_lock` under `exp_lock`, and the type check rejects an
//! `s_lock` taken from the exp_lock's token
//! ([`hfi1_hal::lock_order`]).
//!
//! **Why the wake-up is deferred.** Whatever releases flows or RcvArray
//! space reads the head of the matching queue under `exp_lock` and gets a
//! `qp_wait::Wakeup` holding a reference to it. Waking another QP means
//! reading its flags under *its* `s_lock`, which may not be taken under
//! `exp_lock` (order) nor while holding our own `s_lock` (two s_locks).
//! So the wake-up is acted on only after `exp_lock` is released (it
//! needs the s_lock token back): our own QP is triggered directly, any
//! other gets its trigger work queued, which later takes that QP's
//! `s_lock` alone.
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

#[cfg(feature = "sim-chip")]
extern crate alloc;

mod ctxt;
pub mod flows;
pub mod remote;
mod resync;
pub mod retire;
pub mod segment;
pub mod setup;
#[cfg(feature = "sim-chip")]
pub mod sim;

pub use ctxt::{
    Context, CtxtParts, ExpGuard, ExpParts, ExpState, ExpStore, FlowPlatform, QpLocked, RcvCtxt,
    clear_hw_flow, clear_hw_flow_with, regenerate_hw_flow, regenerate_hw_flow_with, setup_hw_flow,
    setup_hw_flow_with,
};
pub use flows::{FlowStore, HwFlows, NoFreeFlow, QpFlow, QpFlowState};
pub use remote::RemoteSegment;
pub use resync::{resync_hw_flow, resync_hw_flow_with, wait_position, wait_position_with};
pub use retire::{Retired, release_retired, retire_segment};
pub use segment::{
    FlowRecord, FlowRing, SegmentPsns, Sge, SgeCursor, SgeWalk, TidRequest, clear_all_segments,
    clear_segment, ring_count, ring_indices, ring_next, ring_space, setup_segment,
};
pub use setup::{
    FlowRingStore, FlowSetup, PageWalk, SegmentRecord, clear_all_segments_with, clear_segment_with,
    setup_segment_with,
};

/// Errors of this crate. `kmod-glue` maps them to errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// No flow or RcvArray space (or others wait ahead): the QP is queued
    /// and will be woken. Kernel: `-EAGAIN`.
    #[error("resources busy: queued for a wake-up")]
    Again,
    /// DMA mapping or flow-record allocation failed. Kernel: `-ENOMEM`.
    #[error("out of memory")]
    NoMemory,
    /// The flow ring is full (or at `n_flows`) for a setup, or empty for a
    /// clear; or the segment has no pages. Kernel: `-EINVAL`.
    #[error("flow ring state does not allow this")]
    Invalid,
    /// The request's flow records are not allocated.
    #[error("request has no flow records")]
    NoFlowRecords,
    /// The request still has segments set up.
    #[error("request still has segments set up")]
    Busy,
    /// A page-set or TID-group error other than "no space".
    #[error("TID allocation: {0}")]
    Alloc(tid_alloc::AllocError),
    /// A wait-queue error (a QP slot outside the context's table).
    #[error("wait queue: {0}")]
    Wait(qp_wait::WaitError),
}

impl From<tid_alloc::AllocError> for FlowError {
    fn from(e: tid_alloc::AllocError) -> Self {
        match e {
            tid_alloc::AllocError::NoSpace => Self::Again,
            e => Self::Alloc(e),
        }
    }
}

impl From<qp_wait::WaitError> for FlowError {
    fn from(e: qp_wait::WaitError) -> Self {
        Self::Wait(e)
    }
}
