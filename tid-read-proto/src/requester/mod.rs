// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The RDMA READ requester (SPEC §5 "Requester", "Requester receive"): a
//! QP's send queue of READs, each a TID RDMA READ (cut into segments that
//! are set up on the chip, requested with a READ_REQ and received mostly
//! by the chip alone) or, when it does not qualify, a plain RDMA READ
//! (one request, responses copied from the eager buffer), driven by the RC
//! layer of [`crate::rc`] as `rc.c` drives them.
//!
//! The rooms:
//!
//! - here: the requester ([`Requester`]) and polling;
//! - `post`: posting ([`Requester::post_read`], qualification, the
//!   kernel's rule for a QP in the error state);
//! - `wqe`: what a posted READ and its segments keep;
//! - [`send`](Requester::send_requests): the send engine (`hfi1_make_rc_req()`):
//!   the interlock, the plain READ request, the TID READ segments (SYNC
//!   point, hardware flow, RcvArray, READ_REQ), and the two restart states;
//! - [`recv`](Requester::receive_read_resp): a TID READ_RESP the chip
//!   hands to software (`hfi1_rc_rcv_tid_rdma_read_resp()`) and the KDETH
//!   error path (`handle_read_kdeth_eflags()`);
//! - [`ack`](Requester::receive_ack): ACKs, NAKs and plain READ responses
//!   (`rc_rcv_resp()`, `do_rc_ack()`);
//! - `recover`: `hfi1_restart_rc()`, `reset_psn()`, the timers, the error
//!   state, the flush, and the RcvArray quarantine.
//!
//! The same send queue carries RDMA WRITEs (TID and plain); their posting,
//! packets and receive paths are [`crate::write::requester`]'s, entered
//! from the send engine and `do_rc_ack()` here where `rc.c` enters them.
//!
//! Deviations from Linux 6.1, each kept for a hole a test shows (the
//! test named; `tests/regress_rc.rs`, `tests/regress_recovery.rs`), each
//! failing with the 6.1 rule put back:
//!
//! - **Late copies.** A segment's TIDs are released at its last packet as
//!   in 6.1 (unprogrammed and unmapped), but the freed RcvArray entries
//!   are kept out of reuse until the QP's flow leaves the generation the
//!   segment used (or the pipeline drains and the flow moves to a fresh
//!   generation): the chip places a sequence-error packet whenever its TID
//!   is valid, so in 6.1 a late copy of a completed segment is written
//!   into whatever request got those entries next
//!   (`late_copy_of_a_completed_segment_never_lands_in_a_reused_tid`).
//! - **Retry exhausted with several TID READs set up.** Every TID READ's
//!   TIDs and the flow are released (6.1 releases only the oldest's, and
//!   the flush frees the others' flow records with their RcvArray entries
//!   still programmed and their pages mapped;
//!   `exhausted_budget_releases_every_reads_tids`).
//! - **The error state leaves the TID wait queues** (6.1 leaves them only
//!   at reset, so an errored QP at the head of the RcvArray queue blocks
//!   every QP behind it): [`crate::qp`]'s entry points unwind the wait
//!   (`errored_qp_leaves_the_rcvarray_queue_and_wakes_the_next`).
//! - **Counters after a restart.** A segment is counted in
//!   `pending_tid_r_segs` and `s_num_rd_atomic` while its READ_REQ is
//!   outstanding, and only such a segment's completion uncounts it: in 6.1
//!   the restart zeroes the counters, and a last packet of the old stream
//!   arriving before its segment was requested again wraps the 8-bit
//!   `s_num_rd_atomic`, parking the QP in `RVT_S_WAIT_RDMAR` for good
//!   (`late_last_packet_after_a_restart_does_not_wrap_the_read_count`).
//! - **An ACK for a TID READ segment at or past the send cursor** moves
//!   the cursor past it, as 6.1 does for every other operation (6.1 then
//!   re-sends the READ from its start with `comp_seg` reset, naming the
//!   next segment's TIDs with the first one's address;
//!   `ack_for_a_tid_segment_moves_the_send_cursor_past_it`); a restart at
//!   exactly the next segment's first PSN, past every segment set up,
//!   goes on with that segment (6.1: `IB_WC_LOC_QP_OP_ERR`;
//!   `restart_past_every_set_up_segment_goes_on_with_the_next`). Any other
//!   restart that finds no segment completes the oldest READ
//!   `LOC_QP_OP_ERR` and errors the QP (6.1 completes the READ being
//!   restarted, possibly not the oldest, and leaves the QP running).
//! - **A restart re-walking a queued segment's pages** resumes the walk
//!   after the pages it found (6.1 walks them again for the next segment;
//!   `resend_resumes_the_walk_after_a_queued_segments_pages`), and a
//!   segment set up before is sent again as itself, its own remote bytes.
//! - **A response for a later READ** than the oldest unfinished one asks
//!   for the restart `do_rc_ack()` asks for, without first releasing that
//!   segment's TIDs and counting it done (6.1 does both, then re-requests
//!   the segment into released TIDs). The first sequence error of an
//!   episode then keeps such a segment's expected PSN when the chip's flow
//!   has taken all of it (6.1 reads the chip's register always).
//! - **A last packet whose AETH is not an ACK** (a forged packet) acts as
//!   the NAK it carries and keeps its segment (6.1 frees the TIDs first;
//!   `last_packet_with_a_nak_aeth_keeps_its_segment`).
//! - **An expiry restarts from the oldest TID READ's oldest unfinished
//!   segment** when a PSN NAK's implicit acknowledgement passed it (6.1
//!   restarts from `s_last_psn + 1`; with software PSN checking on, that
//!   segment is never asked for again and the budget runs out;
//!   `expiry_restarts_from_a_segment_a_psn_nak_passed`).
//! - **IB PSNs are given when a READ starts**, not when it is posted: a
//!   TID READ takes one PSN per response packet, a count known exactly
//!   only once each segment is programmed (the pairing of its page sets
//!   into TID entries decides it; 6.1's `rvt_div_round_up_mtu()` is
//!   exact when every entry but the last is a whole number of MTUs,
//!   which is what `tid-alloc` programs). Until the last segment is set
//!   up the READ's `lpsn` is the upper bound of one PSN per page. Nothing
//!   looks at the PSNs of a READ that has not started, so the PSN space
//!   is ordered as the kernel's.
//! - **Reserved AETH classes and ignored NAK codes keep the retry timer
//!   running** (6.1's `bail_stop` stops it, and with the segment's last
//!   response lost nothing arms it again: a forged packet hangs the QP;
//!   `reserved_aeth_code_does_not_stop_the_retry_timer`).
//! - **A later READ's response during a restart keeps the retry timer
//!   running** (6.1's `set_restart_qp()` does nothing while
//!   `RVT_R_RDMAR_SEQ` is set and `bail_stop` stops the timer: if the
//!   restarted READ's responses are lost or dropped once more, nothing
//!   arms it again and the QP hangs; `tid-harness`'s `fuzz_regressions`,
//!   `requester_rx/a-later-response-during-a-restart-keeps-the-timer`).
//! - **An ACK that stops a running RNR timer schedules the send engine**
//!   (6.1 clears `RVT_S_WAIT_RNR` and wakes nothing: a forged RNR NAK on a
//!   response hangs the QP;
//!   `ack_stopping_an_rnr_wait_schedules_the_send_engine`).
//! - **No completion is lost:** a READ keeps its send-queue slot until
//!   its completion is polled, so a full completion queue refuses the
//!   post (`full_completion_queue_loses_no_completion`).
//! - TID entries of LEN 0 (an unpaired filler) are not sent: they name no
//!   buffer, take no packet, and the responder refuses any entry of LEN 0.
//!
//! The engine takes what it uses through an [`Env`]: the receive context,
//! the QP reference, the QP's flags, flow state and `s_lock` token
//! ([`QpLocked`]), the [`Connection`] and the QP's [`QpState`]. The
//! QP-level entry points that take the `s_lock` guard are in [`crate::qp`].
//!
//! # Locking
//!
//! Every method runs under the QP's `s_lock` (`&mut Requester` is part of
//! the QP's guarded state, [`Env`] carries its token); the ones that
//! take an [`Env`] take `exp_lock` through `tid-flow`. The kernel holds
//! `r_lock` as well on the receive and timer paths; here every path that
//! changes QP state runs whole under `s_lock`.

pub(crate) mod ack;
mod post;
mod recover;
mod recv;
pub(crate) mod send;
pub(crate) mod wqe;

use alloc::vec::Vec;
use hfi1_hal::Psn;
use hfi1_hal::services::Scheduler;
use tid_flow::{FlowPlatform, QpLocked, RcvCtxt, Retired};

pub use ack::AckVerdict;
pub use post::ReadWr;
pub use recv::{KdethError, RespVerdict};

use wqe::Wqe;

use crate::rc::retry::{Budgets, Timer};
use crate::rc::sq::SendQueue;
use crate::rc::{Completion, Connection, QpState, counters};

/// What the engine borrows from the QP for one call: the receive context,
/// the QP reference, the QP's flags, flow state and `s_lock` token, the
/// connection, and the QP's state (shared with the responder).
///
/// # Locking
///
/// Exists only while the QP's `s_lock` is held (`locked` carries its
/// token).
#[derive(Debug)]
pub struct Env<'a, 't, P: FlowPlatform> {
    /// The requester's receive context.
    pub rcd: &'a RcvCtxt<P>,
    /// The QP.
    pub qp: &'a P::Ref,
    /// Flags, flow state and the `s_lock` token, for `tid-flow`.
    pub locked: QpLocked<'a, 't>,
    /// The connection.
    pub conn: &'a Connection,
    /// The QP's state.
    pub state: &'a mut QpState,
}

impl<'t, P: FlowPlatform> Env<'_, 't, P> {
    /// The flow-engine borrows, for one call.
    pub fn locked(&mut self) -> QpLocked<'_, 't> {
        self.locked.again()
    }

    /// Schedules the QP's send engine. Kernel: `hfi1_schedule_send()`.
    pub(crate) fn schedule(&self) {
        self.rcd.sched.schedule_send(self.qp);
    }
}

/// Which packet the send engine builds next. Kernel: `qp->s_state` as
/// `hfi1_make_rc_req()` switches on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum SendState {
    /// Start (or start again) the WQE at `s_cur` (`OP(SEND_LAST)`, and
    /// `OP(RDMA_READ_REQUEST)` after a plain READ was sent: the switch's
    /// default case).
    #[default]
    Start,
    /// Request the rest of a plain READ from `s_psn` (a restart in its
    /// middle). Kernel: `OP(RDMA_READ_RESPONSE_MIDDLE)`.
    PlainRest,
    /// Restart a TID READ at the segment holding `s_psn`. Kernel:
    /// `TID_OP(READ_RESP)`.
    TidRestart,
    /// Send the WRITE_REQ of a TID WRITE again for the segments from
    /// `s_psn` on. Kernel: `TID_OP(WRITE_RESP)` in `hfi1_make_rc_req()`.
    TidWriteRest,
    /// Send the plain RDMA WRITE at `s_cur` from its packet at `s_psn`.
    /// Kernel: `OP(RDMA_WRITE_FIRST)` / `OP(RDMA_WRITE_MIDDLE)`.
    PlainWrite,
    /// Send the next segment of the TID READ at `s_cur`. Kernel:
    /// `TID_OP(READ_REQ)`.
    TidNext,
}

/// The requester's QP flags. Kernel: bits of `qp->s_flags`,
/// `qp->r_flags`, `qpriv->s_flags`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    /// Waiting for an ACK after a restart sent one packet.
    /// Kernel: `RVT_S_WAIT_ACK`.
    pub(crate) wait_ack: bool,
    /// The next packet is the only one before an ACK. Kernel:
    /// `RVT_S_SEND_ONE`.
    pub(crate) send_one: bool,
    /// Waiting for a read to finish (`s_num_rd_atomic` at its limit).
    /// Kernel: `RVT_S_WAIT_RDMAR`.
    pub(crate) wait_rdmar: bool,
    /// A restart after a sequence error is under way: accept only the
    /// response it asked for. Kernel: `RVT_R_RDMAR_SEQ`.
    pub(crate) rdmar_seq: bool,
    /// Software PSN checking of the oldest segment. Kernel:
    /// `HFI1_R_TID_SW_PSN`.
    pub(crate) sw_psn: bool,
    /// A WQE waits behind the one before it. Kernel:
    /// `HFI1_S_TID_WAIT_INTERLCK`.
    pub(crate) interlock: bool,
}

/// Where the copy of a plain READ's responses stands. Kernel:
/// `qp->s_rdma_read_sge`, `qp->s_rdma_read_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadCopy {
    /// Bytes of the READ already copied (where the next response goes).
    offset: u32,
    /// Bytes left. Kernel: `s_rdma_read_len`.
    left: u32,
}

counters! {
    /// What the requester counted.
    pub struct ReqStats {
        /// READs started as TID READs.
        pub requests,
        /// READs started as plain RDMA READs.
        pub plain_reads,
        /// READs posted that did not qualify as TID READs (or whose flow
        /// records could not be allocated).
        pub not_qualified,
        /// Segments set up and requested.
        pub segments,
        /// Segments completed.
        pub segments_done,
        /// Setups that had to wait for RcvArray space.
        pub tid_waits,
        /// Setups that had to wait for a hardware flow.
        pub flow_waits,
        /// SYNC points passed (flow cleared to move to a new generation).
        pub syncs,
        /// Flow moves to a fresh generation when the pipeline drained, to
        /// release quarantined RcvArray entries.
        pub drain_regenerations,
        /// READ_REQ and RDMA READ request packets sent.
        pub read_reqs,
        /// READ_RESPs and READ responses delivered to software and dropped.
        pub resp_dropped,
        /// READ_RESPs the chip flagged with a KDETH error.
        pub kdeth_errors,
        /// NAKs received (every class but ACK).
        pub naks,
        /// RNR NAKs received.
        pub rnr_naks,
        /// Setups refused for memory (DMA mapping, flow records).
        pub no_memory,
        /// Request packets sent again after a restart.
        pub retransmits,
        /// Restarts (`hfi1_restart_rc()` calls that spent a retry).
        pub restarts,
        /// Retry-timer expiries that found the timer running.
        pub timeouts,
        /// READ_RESPs of a stale generation (dropped by the chip's check).
        pub stale_dropped,
        /// READ_RESPs with a TID error (dropped).
        pub tid_dropped,
        /// READ_RESPs with a flow sequence error.
        pub seq_errors,
        /// READ_RESPs dropped by the IB PSN check `[s_last_psn, s_psn]`.
        pub psn_dropped,
        /// Restarts asked for by a flow sequence error.
        pub seq_restarts,
        /// Sequence-error READ_RESPs that software PSN checking dropped.
        pub sw_dropped,
        /// ACKs, NAKs and READ responses outside `(s_last_psn, s_next_psn)`
        /// or not the one a restart waits for (dropped).
        pub ack_dropped,
        /// READ_RESPs that matched no READ: the QP went to the error state.
        pub no_request,
        /// Completions in error (any status but success).
        pub errors,
        /// Flow records or quarantined entries whose release was refused
        /// (a release missed before: a bug the sim's tests would show).
        pub clean_refused,
    }
}

/// The requester side of a QP.
///
/// # Locking
///
/// Part of the QP's state under its `s_lock` ([`crate::qp::TidQp`]).
pub struct Requester<P: FlowPlatform> {
    pub(crate) sq: SendQueue<Wqe<P>>,
    /// One past the last IB PSN handed out. Kernel: `qp->s_next_psn`.
    pub(crate) next_psn: Psn,
    /// The send cursor. Kernel: `qp->s_psn`.
    pub(crate) psn: Psn,
    /// The last IB PSN acknowledged. Kernel: `qp->s_last_psn`.
    pub(crate) last_psn: Psn,
    pub(crate) s_state: SendState,
    pub(crate) flags: Flags,
    pub(crate) budgets: Budgets,
    /// The RC retry timer. Kernel: `qp->s_timer` with `RVT_S_TIMER`.
    pub(crate) retry_timer: Timer,
    /// The RNR timer. Kernel: `qp->s_rnr_timer` with `RVT_S_WAIT_RNR`.
    pub(crate) rnr_timer: Timer,
    /// Reads outstanding: plain READs and TID READ segments requested and
    /// not completed. Kernel: `qp->s_num_rd_atomic`.
    pub(crate) num_rd_atomic: u32,
    /// TID READ segments requested and not completed. Kernel:
    /// `qpriv->pending_tid_r_segs`.
    pub(crate) pending_tid_r_segs: u32,
    /// TID READs posted and completed. Kernel: `qpriv->tid_r_reqs`,
    /// `qpriv->tid_r_comp`.
    pub(crate) tid_r_reqs: u64,
    pub(crate) tid_r_comp: u64,
    read_copy: Option<ReadCopy>,
    /// A request packet went out in this send-engine step, with the timer
    /// shift of its kind.
    pub(crate) arm_on_send: Option<u8>,
    /// RcvArray entries of completed segments, kept out of reuse until the
    /// flow leaves their generation.
    pub(crate) quarantine: Vec<Retired>,
    /// The TID WRITE requester's state.
    pub(crate) write: crate::write::requester::WriteState,
    /// What happened so far.
    pub stats: ReqStats,
}

impl<P: FlowPlatform> core::fmt::Debug for Requester<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Requester {{ acked {} cur {} tail {} head {} s_psn {:#x} s_next_psn {:#x} \
             s_last_psn {:#x} {:?} {:?} retries {} rd_atomic {} tid segs {} reqs {}/{} \
             timer {:?} rnr {:?} w_resp {} quarantine {}",
            self.sq.acked,
            self.sq.cur,
            self.sq.tail,
            self.sq.head(),
            self.psn.get(),
            self.next_psn.get(),
            self.last_psn.get(),
            self.s_state,
            self.flags,
            self.budgets.retries_left(),
            self.num_rd_atomic,
            self.pending_tid_r_segs,
            self.tid_r_comp,
            self.tid_r_reqs,
            self.retry_timer.armed(),
            self.rnr_timer.armed(),
            self.write.pending_tid_w_resp,
            self.quarantine.len(),
        )?;
        for (i, w, st) in self.sq.iter() {
            write!(
                f,
                " | wqe {} @{i} {:#x}..={:#x}",
                w.wr_id,
                w.psn.get(),
                w.lpsn.get()
            )?;
            if let Some(t) = &w.tid {
                write!(
                    f,
                    " tid {:?} segs {}/{}/{} ack_pending {} ring {}..{} idx {}",
                    t.state,
                    t.comp_seg,
                    t.cur_seg,
                    t.total_segs,
                    t.ack_pending,
                    t.req.clear_tail,
                    t.req.setup_head,
                    t.req.flow_idx
                )?;
            }
            if let Some(s) = st {
                write!(f, " {}", s.name())?;
            }
        }
        f.write_str(" }")
    }
}

impl<P: FlowPlatform> Requester<P> {
    /// An idle requester whose first IB PSN is `psn`, with the retry
    /// budgets of `conn`.
    pub fn new(conn: &Connection, psn: Psn) -> Self {
        Self {
            sq: SendQueue::new(),
            next_psn: psn,
            psn,
            last_psn: psn.sub(1),
            s_state: SendState::Start,
            flags: Flags::default(),
            budgets: Budgets::new(conn.retry_cnt, conn.rnr_retry),
            retry_timer: Timer::default(),
            rnr_timer: Timer::default(),
            num_rd_atomic: 0,
            pending_tid_r_segs: 0,
            tid_r_reqs: 0,
            tid_r_comp: 0,
            read_copy: None,
            arm_on_send: None,
            quarantine: Vec::new(),
            write: crate::write::requester::WriteState {
                s_retry: conn.retry_cnt,
                ..Default::default()
            },
            stats: ReqStats::default(),
        }
    }

    /// Work requests posted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.sq.outstanding()
    }

    /// True if another work request fits in the send queue (completions
    /// not yet polled hold their slots).
    pub fn can_post(&self) -> bool {
        self.sq.can_post()
    }

    /// TID READ segments requested and not yet completed.
    /// Kernel: `qpriv->pending_tid_r_segs`.
    pub fn pending_segments(&self) -> u32 {
        self.pending_tid_r_segs
    }

    /// Reads outstanding (plain READs and TID READ segments).
    /// Kernel: `qp->s_num_rd_atomic`.
    pub fn reads_outstanding(&self) -> u32 {
        self.num_rd_atomic
    }

    /// One past the last IB PSN handed out. Kernel: `qp->s_next_psn`.
    pub fn next_psn(&self) -> Psn {
        self.next_psn
    }

    /// The send cursor. Kernel: `qp->s_psn`.
    pub fn send_psn(&self) -> Psn {
        self.psn
    }

    /// The last IB PSN acknowledged. Kernel: `qp->s_last_psn`.
    pub fn last_psn(&self) -> Psn {
        self.last_psn
    }

    /// Restarts left before the next one exhausts the retry budget.
    /// Kernel: `qp->s_retry`.
    pub fn retries_left(&self) -> u8 {
        self.budgets.retries_left()
    }

    /// The retry timer. Kernel: `qp->s_timer`.
    pub fn retry_timer(&self) -> Timer {
        self.retry_timer
    }

    /// The RNR timer. Kernel: `qp->s_rnr_timer`.
    pub fn rnr_timer(&self) -> Timer {
        self.rnr_timer
    }

    /// RcvArray entries kept out of reuse by completed segments.
    pub fn quarantined_entries(&self) -> u32 {
        self.quarantine.iter().map(Retired::entries).sum()
    }

    /// Takes the oldest completion. Kernel: `ib_poll_cq()`.
    pub fn poll(&mut self) -> Option<Completion> {
        self.sq.poll().map(|(w, status)| Completion {
            wr_id: w.wr_id,
            length: w.length,
            status,
        })
    }
}
