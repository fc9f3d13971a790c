// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA READ requester (SPEC §5 "Requester", "Requester
//! receive"): a QP's send queue of READs, each cut into segments that are
//! set up on the chip, requested with a READ_REQ, received (mostly by the
//! chip alone) and completed.
//!
//! The rooms:
//!
//! - here: the requester ([`Requester`], posting with
//!   [`Requester::post_read`], completions with [`Requester::poll`]) and
//!   the per-segment state kept beside each flow record; `queue`: the
//!   send queue and the window of segments the responder must still hold;
//! - [`send`](Requester::send_requests): the send engine, which sets up
//!   the next segment (SYNC check, hardware flow, RcvArray entries, IB
//!   PSNs) and sends its READ_REQ;
//! - [`recv`](Requester::receive_read_resp): the READ_RESPs the chip hands
//!   to software, software PSN checking after a flow sequence error, RC
//!   ACKs and NAKs, and completing segments;
//! - [`recover`](Requester::flush_requests): restarts (after a sequence
//!   error, the retry timer, a PSN NAK), releasing completed segments'
//!   TIDs once their generation is left, and flushing the QP.
//!
//! The engine takes what it uses: `&mut Requester`, the [`Connection`],
//! and the QP's flags, flow state and `s_lock` token ([`QpLocked`]). The
//! QP-level entry points that take the `s_lock` guard are in
//! [`crate::qp`].
//!
//! A segment's life, on its ring slot: set up and requested (its flow
//! record holds its pages, TIDs, flow PSNs and IB PSNs); its packets are
//! placed by the chip and recorded here, from the packet
//! software sees and from the chip's flow register; once all are placed
//! and the stream serving it has ended it completes and *holds* its TIDs
//! until the QP's flow leaves its generation; then the TIDs are released
//! and a READ whose segments are all released completes.
//!
//! Deviations from the driver, on purpose:
//!
//! - Software records which packets of a segment the chip placed (the
//!   flow register shows the in-sequence ones), and a segment completes
//!   when all are placed: a restart keeps what was placed.
//! - Software PSN checking follows the chip's flow register when the
//!   chip delivers a packet it took in sequence (the driver left the
//!   expected PSN where the episode started, so a later episode in the
//!   same generation compared against a stale PSN).
//! - A restart asked for while segments were still in flight finds none
//!   in flight when it runs: nothing is sent.
//! - The flow is released whenever nothing is in flight, not only at SYNC
//!   points and when no TID READ is outstanding, to free held TIDs; a
//!   request whose segments all completed is reported once its TIDs are
//!   released.
//! - The SYNC check counts a segment's packets as its pages (the most it
//!   can take), not `seg_len / pmtu`: with an 8 KiB MTU over scattered
//!   4 KiB pages a segment takes one packet per page, and the driver's
//!   estimate could run the sequence past 2047.
//! - TID entries of LEN 0 (an unpaired filler) are not sent: they name no
//!   buffer, take no packet, and the responder refuses any entry of LEN 0.
//!
//! # Locking
//!
//! Every method runs under the QP's `s_lock` (`&mut Requester` is part of
//! the QP's guarded state, [`QpLocked`] carries its token); the ones that
//! take a [`QpLocked`] take `exp_lock` through `tid-flow`.

mod queue;
mod recover;
mod recv;
mod send;

use alloc::vec::Vec;
use arrayvec::ArrayVec;
use hfi1_hal::Psn;
use hfi1_hal::consts::{MAX_FLOWS, MAX_READ_SEGS_PER_REQ, PAGE_SIZE};
use hfi1_hal::services::Scheduler;
use tid_flow::{FlowPlatform, QpLocked, RcvCtxt, Sge, TidRequest};

pub use recv::{AckVerdict, ChipFlow, KdethError, RespVerdict};

use queue::{AckWindow, SendQueue};

use crate::rc::{Completion, Connection, EngineError, SQ_SIZE, WcStatus, counters};

/// One RDMA READ work request as posted.
#[derive(Debug, Clone, Copy)]
pub struct ReadWr<'a> {
    /// The caller's id, returned in the completion.
    pub wr_id: u64,
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// The local buffer: page-aligned, page-multiple elements (in the sim
    /// the addresses are physical).
    pub sges: &'a [Sge],
}

/// What the requester keeps of one segment beside its flow record, on the
/// same ring slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Segment {
    /// Which packets the chip has placed (bit `i`: the segment's packet
    /// `i`).
    placed: u64,
    /// The segment's last packet was placed in the current stream (the
    /// responder has finished streaming it).
    tail_seen: bool,
    /// Completed; its TIDs wait for the flow to leave its generation.
    held: bool,
}

impl Segment {
    /// Packet `pkt` of a segment of `npkts` was placed.
    fn place(&mut self, pkt: u32, npkts: u32) {
        if pkt < 64 {
            self.placed |= 1 << pkt;
        }
        if pkt.wrapping_add(1) == npkts {
            self.tail_seen = true;
        }
    }

    /// The first `n` packets of a segment of `npkts` were placed in
    /// sequence.
    fn place_first(&mut self, n: u32, npkts: u32) {
        self.placed |= full_mask(n);
        if n == npkts {
            self.tail_seen = true;
        }
    }

    /// Every packet placed, and the stream that is serving the segment has
    /// ended: no packet of it can still be on its way from the responder
    /// once its TIDs are reused.
    fn is_complete(&self, npkts: u32) -> bool {
        let full = full_mask(npkts);
        self.placed & full == full && self.tail_seen
    }
}

/// Bits of a segment of `npkts` packets.
fn full_mask(npkts: u32) -> u64 {
    if npkts >= 64 {
        u64::MAX
    } else {
        (1u64 << npkts) - 1
    }
}

/// The flow-ring slots from `from` up to, not including, `to`.
fn ring_slots(from: u16, to: u16) -> impl Iterator<Item = u16> {
    core::iter::successors(Some(from), |&k| Some(tid_flow::ring_next(k)))
        .take_while(move |&k| k != to)
}

/// One posted READ. Kernel: `struct rvt_swqe` with its
/// `tid_rdma_request`.
struct WorkRequest<P: FlowPlatform> {
    wr_id: u64,
    remote_addr: u64,
    rkey: u32,
    length: u32,
    sges: Vec<Sge>,
    tid: TidRequest<P>,
    total_segs: u32,
    /// Segments sent (the next to send). Kernel: `req->cur_seg`.
    cur_seg: u32,
    /// Segments completed. Kernel: `req->comp_seg`.
    comp_seg: u32,
    /// Its first segment was set up.
    started: bool,
    /// Per ring slot, what the segment on it has received.
    segs: [Segment; MAX_FLOWS],
}

impl<P: FlowPlatform> WorkRequest<P> {
    /// Every segment sent and completed, and every TID released.
    fn done(&self) -> bool {
        self.comp_seg >= self.total_segs
            && self.cur_seg >= self.total_segs
            && self.tid.in_flight() == 0
    }

    /// The segment on ring slot `k`.
    fn seg(&self, k: u16) -> Segment {
        self.segs.get(usize::from(k)).copied().unwrap_or_default()
    }

    /// The oldest ring slot whose segment is in flight (the held prefix
    /// from `clear_tail` skipped).
    fn first_live(&self) -> u16 {
        ring_slots(self.tid.clear_tail, self.tid.flow_idx)
            .find(|&k| !self.seg(k).held)
            .unwrap_or(self.tid.flow_idx)
    }

    /// Bytes of segment `seg`.
    fn seg_bytes(&self, seg: u32) -> u32 {
        let start = u64::from(seg) * u64::from(self.tid.seg_len);
        let left = u64::from(self.length).saturating_sub(start);
        u32::try_from(left.min(u64::from(self.tid.seg_len))).unwrap_or(0)
    }
}

counters! {
    /// What the requester counted.
    pub struct ReqStats {
        /// READ requests started.
        pub requests,
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
        /// READ_REQ packets sent.
        pub read_reqs,
        /// READ_RESPs delivered to software that matched no segment end.
        pub resp_dropped,
        /// READ_RESPs the chip flagged with a KDETH error.
        pub kdeth_errors,
        /// NAKs received.
        pub naks,
        /// Setups refused for memory (DMA mapping, flow records).
        pub no_memory,
        /// READ_REQs sent again after a restart.
        pub retransmits,
        /// Restarts (in-flight segments requested again).
        pub restarts,
        /// Retry-timer expiries that found segments outstanding.
        pub timeouts,
        /// READ_RESPs of a stale generation (dropped by the chip's check).
        pub stale_dropped,
        /// READ_RESPs with a TID error (dropped).
        pub tid_dropped,
        /// READ_RESPs with a flow sequence error (placed by the chip, counted
        /// by software).
        pub seq_errors,
        /// READ_RESPs whose IB PSN and flow PSN named no segment in flight,
        /// or whose IB PSN was outside `[s_last_psn, s_psn]`.
        pub psn_dropped,
        /// Restarts asked for by a flow sequence error (at most one per error
        /// episode).
        pub seq_restarts,
        /// Sequence-error READ_RESPs that software PSN checking dropped: ahead
        /// of or behind the next expected flow PSN, or the first one of an
        /// episode.
        pub sw_dropped,
        /// Sequence-error READ_RESPs of a segment that already completed (a
        /// late copy): dropped.
        pub late_dropped,
        /// Sequence-error READ_RESPs that named no segment at all: the QP lost
        /// track of its requests and went to the error state.
        pub flow_not_found,
    }
}

/// The requester side of a QP.
///
/// # Locking
///
/// Part of the QP's state under its `s_lock` ([`crate::qp::TidQp`]).
pub struct Requester<P: FlowPlatform> {
    sq: SendQueue<P>,
    /// The next IB PSN to hand out. Kernel: `req->s_next_psn` /
    /// `qp->s_psn`.
    next_psn: Psn,
    /// The last IB PSN acknowledged. Kernel: `qp->s_last_psn`.
    last_psn: Psn,
    /// Segments requested and not yet completed. Kernel:
    /// `qpriv->pending_tid_r_segs` and `qp->s_num_rd_atomic` (every read
    /// here is a TID READ segment, so the two count the same).
    in_flight: u32,
    window: AckWindow,
    /// READs started and completed. Kernel: `qpriv->tid_r_reqs`,
    /// `qpriv->tid_r_comp`.
    reads_started: u64,
    reads_done: u64,
    /// The next segment waits for a SYNC point: everything in flight
    /// completes, then the flow moves to a fresh generation.
    sync_pending: bool,
    /// A restart was asked for; the send engine runs it first.
    restart_pending: bool,
    /// Software PSN checking: the next flow PSN expected, set from the
    /// chip's flow register at the first sequence error of an episode.
    /// Live only while the QP's flow stays in that generation (moving the
    /// flow, as a restart, SYNC or release does, ends the episode, as
    /// reprogramming the flow clears `TID_FLOW_SW_PSN` in the driver).
    /// Kernel: `TID_FLOW_SW_PSN` + `flow_state.r_next_psn`.
    sw_psn: Option<hfi1_hal::FlowPsn>,
    /// A restart was asked for in this error episode; no other until a
    /// packet shows it took effect. Kernel: `RVT_R_RDMAR_SEQ`.
    rdmar_seq: bool,
    completions: ArrayVec<Completion, SQ_SIZE>,
    /// What happened so far.
    pub stats: ReqStats,
}

impl<P: FlowPlatform> core::fmt::Debug for Requester<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Requester {{ head {} cur {} tail {} in flight {} sync {} restart {} reqs {}/{}",
            self.sq.head,
            self.sq.cur,
            self.sq.tail,
            self.in_flight,
            self.sync_pending,
            self.restart_pending,
            self.reads_done,
            self.reads_started
        )?;
        for (_, w) in self.sq.iter() {
            let held = (0u16..)
                .zip(&w.segs)
                .fold(0u8, |m, (k, s)| if s.held { m | 1 << k } else { m });
            write!(
                f,
                " | wqe {}: segs {}/{}/{} ring {}..{} idx {} held {:#04x}",
                w.wr_id,
                w.comp_seg,
                w.cur_seg,
                w.total_segs,
                w.tid.clear_tail,
                w.tid.setup_head,
                w.tid.flow_idx,
                held
            )?;
        }
        f.write_str(" }")
    }
}

impl<P: FlowPlatform> Requester<P> {
    /// An idle requester whose first IB PSN is `psn`.
    pub fn new(psn: Psn) -> Self {
        Self {
            sq: SendQueue::new(),
            next_psn: psn,
            last_psn: psn.sub(1),
            in_flight: 0,
            window: AckWindow::default(),
            reads_started: 0,
            reads_done: 0,
            sync_pending: false,
            restart_pending: false,
            sw_psn: None,
            rdmar_seq: false,
            completions: ArrayVec::new(),
            stats: ReqStats::default(),
        }
    }

    /// Work requests posted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.sq.len()
    }

    /// True if another work request fits in the send queue.
    pub fn can_post(&self) -> bool {
        (self.outstanding() as usize) < SQ_SIZE
    }

    /// Segments requested and not yet completed.
    /// Kernel: `qpriv->pending_tid_r_segs`.
    pub fn pending_segments(&self) -> u32 {
        self.in_flight
    }

    /// The next IB PSN to hand out. Kernel: `qp->s_psn`.
    pub fn next_psn(&self) -> Psn {
        self.next_psn
    }

    /// The last IB PSN acknowledged. Kernel: `qp->s_last_psn`.
    pub fn last_psn(&self) -> Psn {
        self.last_psn
    }

    /// Takes the oldest completion. Kernel: `ib_poll_cq()`.
    pub fn poll(&mut self) -> Option<Completion> {
        if self.completions.is_empty() {
            None
        } else {
            Some(self.completions.remove(0))
        }
    }

    /// Posts an RDMA READ (every READ here is a TID READ: the caller's
    /// buffers are page aligned) and schedules the send engine.
    /// Kernel: `rvt_post_send()` + the setup in `setup_tid_rdma_wqe()`
    /// (`seg_len = min(remote max_len, length)`, `n_flows = remote
    /// max_read`).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`&mut self`).
    ///
    /// # Errors
    ///
    /// [`EngineError::QueueFull`], [`EngineError::BadSgl`] (empty,
    /// unaligned, or longer than 4 GiB - 1), [`EngineError::NoMemory`].
    pub fn post_read(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        conn: &Connection,
        wr: &ReadWr<'_>,
    ) -> Result<(), EngineError> {
        if !self.can_post() {
            return Err(EngineError::QueueFull);
        }
        let page = u64::from(PAGE_SIZE);
        let aligned = |s: &Sge| s.length != 0 && s.vaddr % page == 0 && s.length % PAGE_SIZE == 0;
        let total = wr
            .sges
            .iter()
            .try_fold(0u64, |t, s| aligned(s).then(|| t + u64::from(s.length)))
            .ok_or(EngineError::BadSgl)?;
        let length = u32::try_from(total).map_err(|_| EngineError::BadSgl)?;
        if length == 0 {
            return Err(EngineError::BadSgl);
        }
        let mut sges = Vec::new();
        sges.try_reserve_exact(wr.sges.len())
            .map_err(|_| EngineError::NoMemory)?;
        sges.extend_from_slice(wr.sges);
        let seg_len = conn.remote.max_len.min(length).max(PAGE_SIZE);
        let n_flows = u16::from(conn.remote.max_read).clamp(1, MAX_READ_SEGS_PER_REQ as u16);
        self.sq.push(WorkRequest {
            wr_id: wr.wr_id,
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            length,
            sges,
            tid: TidRequest::new(seg_len, n_flows, conn.pmtu),
            total_segs: length.div_ceil(seg_len),
            cur_seg: 0,
            comp_seg: 0,
            started: false,
            segs: [Segment::default(); MAX_FLOWS],
        });
        rcd.sched.schedule_send(qp);
        Ok(())
    }

    /// Moves finished requests at the head of the send queue to the
    /// completion queue and frees their flow records.
    /// Kernel: `do_rc_completion()` + `__trdma_clean_swqe()`.
    fn retire(&mut self) {
        while !self.completions.is_full() {
            let Some(mut w) = self.sq.pop_done() else {
                break;
            };
            // The ring is empty once every segment completed.
            let _ = w.tid.clean_swqe();
            // Room was checked above.
            let _ = self.completions.try_push(Completion {
                wr_id: w.wr_id,
                length: w.length,
                status: WcStatus::Success,
            });
        }
    }
}

/// Lending a [`QpLocked`] to one call while keeping it.
pub trait Reborrow<'t> {
    /// The same borrows, for a shorter time.
    fn reborrow(&mut self) -> QpLocked<'_, 't>;
}

impl<'t> Reborrow<'t> for QpLocked<'_, 't> {
    fn reborrow(&mut self) -> QpLocked<'_, 't> {
        QpLocked {
            flags: &mut *self.flags,
            flow: &mut *self.flow,
            token: &mut *self.token,
        }
    }
}
