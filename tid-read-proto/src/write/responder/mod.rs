// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA WRITE responder: a WRITE_REQ into the ack queue, the
//! receiver's TIDs allocated segment by segment (or the QP queued and the
//! request RNR-NAKed), one WRITE_RESP per segment, the data placed by the
//! chip, and the TID ACK.
//!
//! The rooms: here the state ([`WriteResponder`], one [`WriteEntry`]
//! per ack-queue slot); `req`: `hfi1_rc_rcv_tid_rdma_write_req()`;
//! `alloc`: `hfi1_tid_write_alloc_resources()` and the RNR NAK;
//! `resp`: `hfi1_build_tid_rdma_write_resp()` and the WRITE half of
//! `make_rc_ack()`; `dup`: the TID WRITE half of `tid_rdma_rcv_error()`;
//! `data`: `hfi1_rc_rcv_tid_rdma_write_data()`; `eflags`: the WRITE half
//! of `hfi1_handle_kdeth_eflags()`; `ack`: `make_tid_rdma_ack()` /
//! `hfi1_build_tid_rdma_write_ack()`; `resync`:
//! `hfi1_rc_rcv_tid_rdma_resync()`; `teardown`: the WRITE half of
//! `hfi1_qp_kern_exp_rcv_clear_all()` and the reap timer's expiry
//! (`hfi1_tid_timeout()`).
//!
//! WRITE entries share the READ responder's ack queue
//! ([`crate::responder::Responder`]): a WRITE_REQ takes a slot there
//! (PSNs, region reference, `sent`), and its request state lives in the
//! same slot here. The queue's pointers move as 6.1 moves them:
//! `s_tail_ack_queue` passes a WRITE entry once its last WRITE_RESP is
//! built, `s_acked_ack_queue` only when its WRITE_DATA_LAST arrives, and
//! the entry keeps its region reference until then.
//!
//! Deviations from 6.1, on purpose:
//!
//! - A WRITE_REQ with a bad R_Key is NAKed (remote access error) under the
//!   READ responder's NAK rule, as a TID READ_REQ is here; 6.1 errors the
//!   QP and sends nothing (`tests/write_responder.rs`:
//!   `bad_rkey_write_req_is_naked_as_a_remote_access_error`).
//! - A received segment's RcvArray entries are held until the QP's flow
//!   leaves their generation; 6.1 reuses them at once (`held`).
//! - A duplicate WRITE_REQ that ends an RNR episode RNR-NAKs again when
//!   TIDs are still short (`dup`); a sequence error after the chip
//!   silently placed a NAKed resend ends the NAK episode (`eflags`); a
//!   RESYNC ACK reports the oldest receiving segment's last in-order PSN
//!   (`resync`).
//! - A RESYNC renumbers the allocated segments of every TID WRITE entry
//!   from `r_tid_tail` to the newest, not only up to the send pointer: a
//!   duplicate that rewound that pointer made 6.1 leave a later WRITE's
//!   segment in the old generation, and a later RESYNC put another
//!   WRITE's data into its buffer (`resync`).
//! - A RESYNC naming the flow's current generation is ignored once
//!   WRITE_DATA of that generation has come in order, placed by the chip
//!   or seen by software (a copy the fabric held back, not a resend after
//!   a lost ACK);
//!   6.1 takes it and numbers the segments left onto sequences the
//!   requester had already used (`resync`, `stale_resyncs`).
//! - A duplicate WRITE_REQ's rewind keeps the segment it names within the
//!   allocated, unreceived ones and moves the resend position and the
//!   count of responses sent together (`dup`); 6.1 could leave them apart
//!   and then answer from flow records of received segments.
//! - A request's flow records are allocated when its WRITE_REQ is accepted
//!   (atomically, on the receive path), not for all 25 ack-queue slots at
//!   QP creation; if that allocation fails the QP errors with a remote
//!   operational error. They are freed at teardown.
//! - WRITE_DATA that finds no TID WRITE entry at `r_tid_tail`, or no
//!   segment in flight there, is dropped and counted (6.1 indexes the ack
//!   queue with whatever `r_tid_tail` holds).
//! - The RNR NAK's queue position is taken on the queue the QP waits on
//!   (`tid_flow::wait_position`), not on the queue the failed step would
//!   have used.
//! - A RESYNC ACK names the first segment not acknowledged, not the last
//!   one acknowledged, which 6.1's own requester drops as stale (`ack`'s
//!   module doc).
//! - A duplicate WRITE_REQ that finds a TID READ entry (or none) is
//!   dropped; 6.1 handles it by the entry's opcode.
//!
//! Kept as 6.1 runs it, though it stops a QP: a copy of a WRITE_REQ
//! already scheduled moves the send pointer forward to its own entry,
//! past entries not answered yet, which then never get a WRITE_RESP
//! (counted as `send_pointer_skips`; `dup`).
//!
//! # Locking
//!
//! | function | needs | takes |
//! |---|---|---|
//! | `qp::receive_write_req`, `qp::receive_write_data`, `qp::receive_write_data_error`, `qp::receive_resync`, `qp::reap_timeout` | the QP's `r_lock` (token) | the QP's `s_lock`, then `exp_lock` through `tid-flow` |
//! | `qp::send_write_responses` | nothing (root token) | the QP's `s_lock`, then `exp_lock` |
//! | `qp::send_tid_ack` | nothing (root token) | the QP's `s_lock` |
//! | `qp::flush_write_responder` | the QP's `s_lock` (guard) | `exp_lock` |
//!
//! Only a path holding `r_lock` can make a [`RecvPath`], and only
//! [`AllocCtx::Intr`] (which needs one) may schedule an RNR NAK: 6.1's
//! `lockdep_assert_held(&qp->r_lock)` in `send_rnr_nak` as a type.

mod ack;
mod alloc;
mod data;
mod dup;
mod eflags;
mod held;
mod req;
mod resp;
mod resync;
mod teardown;

pub use alloc::{AllocCtx, RecvPath};
pub use data::DataVerdict;
pub use req::WriteReqVerdict;
pub(crate) use resp::respond;
pub use resync::ResyncVerdict;

use ::alloc::vec::Vec;

use hfi1_hal::flags::TidFlags;
use hfi1_hal::{FlowPsn, Psn};
use tid_flow::{FlowPlatform, QpLocked, RcvCtxt, Retired, TidRequest};

use super::TidReqState;
use crate::rc::retry::Timer;
use crate::rc::{ACK_QUEUE_SIZE, Connection, QpState, counters};
use crate::responder::Responder;

counters! {
    /// What the WRITE responder counted.
    pub struct WriteRespStats {
        /// WRITE_REQs accepted into the ack queue.
        pub accepted,
        /// RNR-NAKed requests brought back by their resent WRITE_REQ.
        pub revived,
        /// WRITE_REQs refused (the QP errors).
        pub refused,
        /// WRITE_REQs behind `r_psn` that repeated a TID WRITE entry.
        pub duplicates,
        /// WRITE_REQs behind `r_psn` that repeated none, dropped.
        pub duplicates_dropped,
        /// Segments whose TIDs were programmed.
        pub segments_allocated,
        /// RNR NAKs scheduled.
        pub rnr_scheduled,
        /// RNR NAKs sent.
        pub rnr_sent,
        /// WRITE_RESPs sent.
        pub write_resps,
        /// Segments whose last packet arrived.
        pub segments_received,
        /// Requests whose WRITE_DATA_LAST arrived.
        pub requests_received,
        /// TID ACKs sent (NAKs included).
        pub tid_acks,
        /// TID NAKs among them.
        pub tid_naks,
        /// Packets dropped (QP in error, nothing to receive them).
        pub dropped,
        /// Setups that failed with an error other than "wait".
        pub setup_errors,
        /// RESYNCs that moved the flow to a new generation.
        pub resyncs,
        /// RESYNCs ignored (a generation out of place, or an ACK still
        /// owed).
        pub resyncs_ignored,
        /// RESYNC ACKs sent.
        pub resync_acks,
        /// Copies of a RESYNC already taken, ignored because data of the
        /// generation it names has come (a deviation from 6.1, see
        /// `receive_resync`).
        pub stale_resyncs,
        /// WRITE_DATA the chip delivered with a flow sequence error.
        pub seq_errors,
        /// WRITE_DATA the chip delivered with a generation error.
        pub gen_errors,
        /// Reap timer expiries that errored the QP.
        pub reap_expiries,
        /// Flows moved to a fresh generation to give held TIDs back.
        pub regenerations,
        /// Duplicate WRITE_REQs that moved the send pointer forward, past
        /// entries not answered yet: a copy of a request already
        /// scheduled (between the send pointer and the head) still "re-
        /// processes" from its own entry. Those entries get no WRITE_RESP
        /// until a later duplicate moves the pointer back, as in 6.1.
        pub send_pointer_skips,
    }
}

/// Where an RNR NAK of the WRITE responder stands. Kernel:
/// `qpriv->rnr_nak_state` (`TID_RNR_NAK_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RnrNakState {
    /// None owed. Kernel: `TID_RNR_NAK_INIT`.
    #[default]
    Init,
    /// Scheduled: the first leg sends it at the segment boundary.
    /// Kernel: `TID_RNR_NAK_SEND`.
    Send,
    /// Sent; waiting for the resent WRITE_REQ. Kernel: `TID_RNR_NAK_SENT`.
    Sent,
}

/// One ack-queue slot's TID WRITE request. Kernel: the `tid_rdma_request`
/// in `hfi1_ack_priv`.
///
/// # Locking
///
/// The QP's `s_lock`.
pub struct WriteEntry<P: FlowPlatform> {
    /// The local flow ring (programmed TIDs) and the page walk over the
    /// region from the write's address.
    pub req: TidRequest<P>,
    /// Kernel: `req->state`.
    pub state: TidReqState,
    /// Bytes of the request. Kernel: `req->total_len`.
    pub total_len: u32,
    /// Segments of it. Kernel: `req->total_segs`.
    pub total_segs: u32,
    /// Segments allocated. Kernel: `req->alloc_seg`.
    pub alloc_seg: u32,
    /// WRITE_RESPs sent. Kernel: `req->cur_seg`.
    pub cur_seg: u32,
    /// Segments whose data arrived. Kernel: `req->comp_seg`.
    pub comp_seg: u32,
    /// Segments acknowledged. Kernel: `req->ack_seg`.
    pub ack_seg: u32,
}

impl<P: FlowPlatform> core::fmt::Debug for WriteEntry<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WriteEntry")
            .field("req", &self.req)
            .field("state", &self.state)
            .field("segs", &(self.total_segs, self.alloc_seg, self.cur_seg))
            .field("done", &(self.comp_seg, self.ack_seg))
            .finish()
    }
}

impl<P: FlowPlatform> WriteEntry<P> {
    fn new() -> Self {
        Self {
            req: TidRequest::new(0, 0, 0),
            state: TidReqState::Inactive,
            total_len: 0,
            total_segs: 0,
            alloc_seg: 0,
            cur_seg: 0,
            comp_seg: 0,
            ack_seg: 0,
        }
    }
}

/// The WRITE responder side of a QP. Kernel: the responder fields of
/// `hfi1_qp_priv`.
///
/// # Locking
///
/// Part of [`crate::qp::TidQp`], under the QP's `s_lock`.
pub struct WriteResponder<P: FlowPlatform> {
    entries: [WriteEntry<P>; ACK_QUEUE_SIZE],
    /// One past the newest TID WRITE entry. Kernel: `r_tid_head`.
    r_tid_head: usize,
    /// The entry receiving data (`None`: never set). Kernel: `r_tid_tail`.
    r_tid_tail: Option<usize>,
    /// The entry the next TID ACK names. Kernel: `r_tid_ack`.
    r_tid_ack: Option<usize>,
    /// The entry being allocated. Kernel: `r_tid_alloc`.
    r_tid_alloc: usize,
    /// Segments allocated whose data is not complete. Kernel:
    /// `alloc_w_segs`.
    alloc_w_segs: u32,
    /// WRITE_RESPs sent whose data is not complete. Kernel:
    /// `pending_tid_w_segs`.
    pending_tid_w_segs: u32,
    /// Allocation stopped at the end of the generation. Kernel: `sync_pt`.
    sync_pt: bool,
    rnr_nak_state: RnrNakState,
    /// The RNR NAK scheduled, as the first leg sends it: AETH syndrome
    /// and PSN (the episode's NAK state is the responder's `nak_state`).
    /// Kernel: `qp->s_nak_state`, `qp->s_ack_psn`.
    rnr_nak: Option<(u8, Psn)>,
    /// A TID NAK owed for this error episode, and its PSN. Kernel:
    /// `qpriv->s_nak_state`, `qpriv->s_nak_psn`.
    tid_nak: Option<FlowPsn>,
    /// The next KDETH PSN expected. Kernel: `r_next_psn_kdeth`.
    r_next_psn_kdeth: FlowPsn,
    /// The last KDETH PSN received before a RESYNC, kept for a RESYNC
    /// right after it. Kernel: `r_next_psn_kdeth_save`.
    r_next_psn_kdeth_save: FlowPsn,
    /// A RESYNC ACK is owed. Kernel: `qpriv->resync`.
    resync: bool,
    /// The generation of the last WRITE_DATA that came in order. Not in
    /// 6.1 (see `receive_resync`).
    data_generation: Option<hfi1_hal::Generation>,
    /// What the owed RESYNC ACK reports as received: the last PSN the
    /// oldest receiving segment got in order (see `resync`).
    resync_report: Option<FlowPsn>,
    /// `r_next_psn_kdeth_save` holds what a RESYNC ACK reported (not its
    /// initial 0).
    save_valid: bool,
    /// `ACK_PENDING`, `R_TID_RSC_TIMER`, `R_TID_SW_PSN`. Kernel:
    /// `qpriv->s_flags`.
    flags: TidFlags,
    /// The reap timer. Kernel: `qpriv->s_tid_timer`.
    reap: Timer,
    /// Received segments' RcvArray entries, held until the flow leaves
    /// their generation (see `held`).
    held: Vec<Retired>,
    /// What happened so far.
    pub stats: WriteRespStats,
}

impl<P: FlowPlatform> core::fmt::Debug for WriteResponder<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WriteResponder")
            .field("r_tid", &(self.r_tid_head, self.r_tid_tail, self.r_tid_ack))
            .field("r_tid_alloc", &self.r_tid_alloc)
            .field("alloc_w_segs", &self.alloc_w_segs)
            .field("pending_tid_w_segs", &self.pending_tid_w_segs)
            .field("rnr", &(self.rnr_nak_state, self.rnr_nak))
            .field("flags", &self.flags)
            .field("held", &self.held.len())
            .field("sync_pt", &self.sync_pt)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<P: FlowPlatform> Default for WriteResponder<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: FlowPlatform> WriteResponder<P> {
    /// An idle WRITE responder.
    pub fn new() -> Self {
        Self {
            entries: core::array::from_fn(|_| WriteEntry::new()),
            r_tid_head: 0,
            r_tid_tail: None,
            r_tid_ack: None,
            r_tid_alloc: 0,
            alloc_w_segs: 0,
            pending_tid_w_segs: 0,
            sync_pt: false,
            rnr_nak_state: RnrNakState::Init,
            rnr_nak: None,
            tid_nak: None,
            r_next_psn_kdeth: FlowPsn::default(),
            r_next_psn_kdeth_save: FlowPsn::default(),
            resync: false,
            data_generation: None,
            resync_report: None,
            save_valid: false,
            flags: TidFlags::empty(),
            reap: Timer::default(),
            held: Vec::new(),
            stats: WriteRespStats::default(),
        }
    }

    /// The request in ack-queue slot `i`.
    pub fn entry(&self, i: usize) -> Option<&WriteEntry<P>> {
        self.entries.get(i)
    }

    /// Segments allocated whose data is not complete. Kernel:
    /// `alloc_w_segs`.
    pub fn alloc_w_segs(&self) -> u32 {
        self.alloc_w_segs
    }

    /// WRITE_RESPs sent whose data is not complete. Kernel:
    /// `pending_tid_w_segs`.
    pub fn pending_tid_w_segs(&self) -> u32 {
        self.pending_tid_w_segs
    }

    /// Where the RNR NAK stands.
    pub fn rnr_nak_state(&self) -> RnrNakState {
        self.rnr_nak_state
    }

    /// True if a TID ACK is owed (the second leg must run). Kernel:
    /// `RVT_S_ACK_PENDING` in `qpriv->s_flags`.
    pub fn ack_pending(&self) -> bool {
        self.flags.contains(TidFlags::ACK_PENDING)
    }

    /// The reap timer (armed while WRITE_RESPs wait for their data).
    pub fn reap_timer(&self) -> Timer {
        self.reap
    }

    /// RcvArray entries of received segments held until the flow leaves
    /// their generation.
    pub fn held_entries(&self) -> u32 {
        self.held.iter().map(Retired::entries).sum()
    }

    /// Segments programmed now, over every entry.
    pub fn segments_held(&self) -> u32 {
        self.entries
            .iter()
            .map(|e| u32::from(e.req.in_flight()))
            .sum()
    }
}

/// The reap timer's duration for the peer's OPFN `timeout`:
/// `((4096 << timeout) / 1000 << 3) × 7` µs. Kernel: the
/// `tid_rdma.local.timeout` computation behind `hfi1_add_tid_reap_timer()`.
pub const fn reap_ns(timeout: u8) -> u64 {
    let shift = if timeout > 40 { 40 } else { timeout as u32 };
    (((4096u64 << shift) / 1000) << 3) * 7 * 1000
}

/// Everything the WRITE responder's paths work on, lent out of a locked
/// QP.
///
/// # Locking
///
/// Exists only while the QP's `s_lock` is held (`locked` carries its
/// token).
pub(crate) struct Env<'a, 't, P: FlowPlatform> {
    pub(crate) rcd: &'a RcvCtxt<P>,
    pub(crate) qp: &'a P::Ref,
    pub(crate) locked: QpLocked<'a, 't>,
    pub(crate) conn: &'a Connection,
    pub(crate) state: &'a mut QpState,
    pub(crate) rsp: &'a mut Responder,
    pub(crate) w: &'a mut WriteResponder<P>,
}
