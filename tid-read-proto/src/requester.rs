// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA READ requester: posting READs, the send engine that sets
//! up segments and sends READ_REQs, and the receive path of the segments'
//! last READ_RESPs (SPEC §5 "Requester", "Requester receive").
//!
//! Per segment the send engine ([`send_engine`], kernel
//! `hfi1_build_tid_rdma_read_req()`):
//!
//! 1. **SYNC check.** If the QP's flow has no room left in its generation
//!    for the segment (`flow PSN + packets > 2047`), the request is at a
//!    SYNC point: it waits until every segment sent completed, then the
//!    hardware flow is cleared (it moves to a fresh generation).
//! 2. **Flow.** [`tid_flow::setup_hw_flow`]; if it has to wait, the QP is
//!    queued on the flow queue and woken later.
//! 3. **Segment.** [`tid_flow::exp_rcv_setup`]: pages, page sets, DMA
//!    mapping, RcvArray entries; waiting queues the QP on the RcvArray
//!    queue; a full flow ring (all `n_flows` segments in flight) just waits
//!    for a response to reschedule the QP.
//! 4. **READ_REQ.** The segment gets its IB PSN range (one PSN per
//!    response packet) and its READ_REQ goes out with the TID entries.
//!
//! The receive path ([`rcv_read_resp`], kernel
//! `hfi1_rc_rcv_tid_rdma_read_resp()`) normally sees only a segment's last
//! packet (the chip placed the others and suppressed their headers); with
//! errors it sees more. It finds the segment by the packet's `verbs_psn`
//! and flow PSN, records which packets the chip has placed (and which the
//! flow register has moved past), and completes a segment once all its
//! packets are placed and the stream serving it has ended. The RC layer
//! acknowledges it; the hardware flow is released whenever nothing is in
//! flight (which covers SYNC points and "no TID READ outstanding").
//!
//! Errors (SPEC §5, issue 5):
//!
//! - every READ_RESP delivered to software first passes the IB PSN range
//!   check `[s_last_psn, s_psn]` under the QP's `s_lock`;
//! - a stale generation or a TID error: the packet is dropped (the chip
//!   did not place it);
//! - a flow sequence error: the QP switches to software PSN checking from
//!   the chip's next expected flow PSN and asks for one restart per error
//!   episode (the `rdmar_seq` mark); packets ahead of the expected PSN are
//!   dropped, packets behind it are dropped and clear the mark, the
//!   expected one advances it and, if last, completes its segment;
//!   packets of later segments never advance them; a sequence error whose
//!   flow PSN names no segment of the QP means it lost track: the oldest
//!   request completes in error, the rest are flushed, everything is
//!   released;
//! - a restart (after a sequence error, the retry timer ([`timeout`]) or a
//!   PSN NAK ([`rcv_ack`])) starts from the oldest segment in flight: its
//!   and every later segment's cursors are rewound to their start, with
//!   the same flow PSNs and generation, and their READ_REQs go out again;
//!   the responder streams them again;
//! - completed segments keep their TIDs until the flow leaves their
//!   generation (`release_held`): the chip places sequence-error packets
//!   (the TID is valid), so a late copy must never find a TID that was
//!   handed to another request;
//! - any NAK other than a PSN error flushes the QP (every request completes
//!   in error, everything is released).
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

use alloc::vec::Vec;
use arrayvec::ArrayVec;
use hfi1_hal::consts::{
    MAX_FLOWS, MAX_PAGESETS, MAX_READ_SEGS_PER_REQ, MAX_TID_FLOW_PSN, PAGE_SIZE,
};
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::{AllocContext, Scheduler};
use hfi1_hal::{FlowPsn, Psn, TidEntry};
use qp_wait::{SGuard, SendState};
use tid_flow::{
    FlowError, FlowPlatform, QpLocked, RcvCtxt, Sge, TidRequest, clear_hw_flow, exp_rcv_clear,
    exp_rcv_clear_all, setup_hw_flow,
};

use crate::packet;
use crate::rc::{Completion, EngineError, PacketSink, SQ_SIZE, TidQp, WcStatus};
use crate::read_resp::{ReadReqFlow, build_read_req};
use crate::wire::{aeth, read_resp};

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

/// One posted READ. Kernel: `struct rvt_swqe` with its
/// `tid_rdma_request`.
struct Wqe<P: FlowPlatform> {
    wr_id: u64,
    remote_addr: u64,
    rkey: u32,
    length: u32,
    sges: Vec<Sge>,
    tid: TidRequest<P>,
    total_segs: u32,
    cur_seg: u32,
    comp_seg: u32,
    started: bool,
    /// Per ring slot: which packets of the segment the chip has placed
    /// (bit i = the segment's packet i).
    placed: [u64; MAX_FLOWS],
    /// Per ring slot: the segment's last packet was placed in the
    /// current generation (so the responder has finished streaming it).
    tail_seen: [bool; MAX_FLOWS],
    /// Per ring slot: the segment completed and its TIDs wait for the
    /// flow to leave its generation (see [`release_held`]).
    held: [bool; MAX_FLOWS],
}

impl<P: FlowPlatform> Wqe<P> {
    fn done(&self) -> bool {
        self.comp_seg >= self.total_segs
            && self.cur_seg >= self.total_segs
            && self.tid.in_flight() == 0
    }

    /// The oldest ring slot whose segment is in flight (held slots, a
    /// prefix from `clear_tail`, skipped).
    fn first_live(&self) -> u16 {
        let mut k = self.tid.clear_tail;
        while k != self.tid.flow_idx && self.held.get(usize::from(k)).copied().unwrap_or(false) {
            k = tid_flow::ring_next(k);
        }
        k
    }

    /// Bytes of segment `seg`.
    fn seg_bytes(&self, seg: u32) -> u32 {
        let start = u64::from(seg) * u64::from(self.tid.seg_len);
        let left = u64::from(self.length).saturating_sub(start);
        u32::try_from(left.min(u64::from(self.tid.seg_len))).unwrap_or(0)
    }
}

/// What the requester counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReqStats {
    /// READ requests started.
    pub requests: u64,
    /// Segments set up and requested.
    pub segments: u64,
    /// Segments completed.
    pub segments_done: u64,
    /// Setups that had to wait for RcvArray space.
    pub tid_waits: u64,
    /// Setups that had to wait for a hardware flow.
    pub flow_waits: u64,
    /// SYNC points passed (flow cleared to move to a new generation).
    pub syncs: u64,
    /// READ_REQ packets sent.
    pub read_reqs: u64,
    /// READ_RESPs delivered to software that matched no segment end.
    pub resp_dropped: u64,
    /// READ_RESPs the chip flagged with a KDETH error.
    pub kdeth_errors: u64,
    /// NAKs received.
    pub naks: u64,
    /// Setups refused for memory (DMA mapping, flow records).
    pub no_memory: u64,
    /// READ_REQs sent again after a restart.
    pub retransmits: u64,
    /// Restarts (in-flight segments re-armed in a new generation and
    /// requested again).
    pub restarts: u64,
    /// Retry-timer expiries that found segments outstanding.
    pub timeouts: u64,
    /// READ_RESPs of a stale generation (dropped by the chip's check).
    pub stale_dropped: u64,
    /// READ_RESPs with a TID error (dropped).
    pub tid_dropped: u64,
    /// READ_RESPs with a flow sequence error (placed by the chip, counted
    /// by software).
    pub seq_errors: u64,
    /// READ_RESPs whose IB PSN and flow PSN named no segment in flight,
    /// or whose IB PSN was outside `[s_last_psn, s_psn]`.
    pub psn_dropped: u64,
    /// Restarts asked for by a flow sequence error (at most one per error
    /// episode).
    pub seq_restarts: u64,
    /// Sequence-error READ_RESPs that software PSN checking dropped: ahead
    /// of or behind the next expected flow PSN, or the first one of an
    /// episode.
    pub sw_dropped: u64,
    /// Sequence-error READ_RESPs of a segment that already completed (a
    /// late copy): dropped.
    pub late_dropped: u64,
    /// Sequence-error READ_RESPs that named no segment at all: the QP lost
    /// track of its requests and went to the error state.
    pub flow_not_found: u64,
}

impl core::ops::AddAssign for ReqStats {
    /// Adds another QP's counts (a node's totals).
    fn add_assign(&mut self, o: Self) {
        self.requests += o.requests;
        self.segments += o.segments;
        self.segments_done += o.segments_done;
        self.tid_waits += o.tid_waits;
        self.flow_waits += o.flow_waits;
        self.syncs += o.syncs;
        self.read_reqs += o.read_reqs;
        self.resp_dropped += o.resp_dropped;
        self.kdeth_errors += o.kdeth_errors;
        self.naks += o.naks;
        self.no_memory += o.no_memory;
        self.retransmits += o.retransmits;
        self.restarts += o.restarts;
        self.timeouts += o.timeouts;
        self.stale_dropped += o.stale_dropped;
        self.tid_dropped += o.tid_dropped;
        self.seq_errors += o.seq_errors;
        self.psn_dropped += o.psn_dropped;
        self.seq_restarts += o.seq_restarts;
        self.sw_dropped += o.sw_dropped;
        self.late_dropped += o.late_dropped;
        self.flow_not_found += o.flow_not_found;
    }
}

/// The requester side of a QP.
///
/// # Locking
///
/// Part of [`TidQp`], under the QP's `s_lock`.
pub struct Requester<P: FlowPlatform> {
    sq: [Option<Wqe<P>>; SQ_SIZE],
    head: u32,
    cur: u32,
    tail: u32,
    /// The next IB PSN to hand out. Kernel: `req->s_next_psn` /
    /// `qp->s_psn`.
    pub s_next_psn: Psn,
    /// The last IB PSN acknowledged. Kernel: `qp->s_last_psn`.
    pub s_last_psn: Psn,
    pending_segs: u32,
    num_rd_atomic: u32,
    /// The segments the responder's ack queue must still hold, oldest
    /// first, as (last IB PSN, completed). Segments complete out of order
    /// across requests, but the responder's ring of `MAX_RD_ATOMIC + 1`
    /// entries holds everything from the oldest unfinished one to the
    /// newest: a new segment waits while this window is full, so the ring
    /// never wraps over an entry a restart still needs. (Gating on the
    /// in-flight count alone let a QP whose early segment waited for a
    /// restart send 16 more, and the re-sent READ_REQ then found its entry
    /// overwritten: stuck for good. Found by the `read_pair` fuzzer.)
    window: ArrayVec<(Psn, bool), { crate::rc::MAX_RD_ATOMIC as usize }>,
    tid_r_reqs: u64,
    tid_r_comp: u64,
    sync_pending: bool,
    restart_pending: bool,
    /// Software PSN checking: the next flow PSN expected, set from the
    /// chip's flow register at the first sequence error of an episode.
    /// Live only while the QP's flow stays in that generation (moving the
    /// flow, as a restart, SYNC or release does, ends the episode, as
    /// reprogramming the flow clears `TID_FLOW_SW_PSN` in the driver).
    /// Kernel: `TID_FLOW_SW_PSN` + `flow_state.r_next_psn`.
    sw_psn: Option<FlowPsn>,
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
            "Requester {{ head {} cur {} tail {} pending {} rd {} sync {} restart {} reqs {}/{}",
            self.head,
            self.cur,
            self.tail,
            self.pending_segs,
            self.num_rd_atomic,
            self.sync_pending,
            self.restart_pending,
            self.tid_r_comp,
            self.tid_r_reqs
        )?;
        let mut i = self.head;
        while i != self.tail {
            if let Some(w) = self.sq.get(Self::slot(i)).and_then(Option::as_ref) {
                let held: u8 = w
                    .held
                    .iter()
                    .enumerate()
                    .fold(0, |m, (k, h)| if *h { m | 1 << k } else { m });
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
            i = i.wrapping_add(1);
        }
        f.write_str(" }")
    }
}

impl<P: FlowPlatform> Requester<P> {
    /// An idle requester whose first IB PSN is `psn`.
    pub fn new(psn: Psn) -> Self {
        Self {
            sq: core::array::from_fn(|_| None),
            head: 0,
            cur: 0,
            tail: 0,
            s_next_psn: psn,
            s_last_psn: psn.sub(1),
            pending_segs: 0,
            num_rd_atomic: 0,
            window: ArrayVec::new_const(),
            tid_r_reqs: 0,
            tid_r_comp: 0,
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
        self.tail.wrapping_sub(self.head)
    }

    /// True if another work request fits in the send queue.
    pub fn can_post(&self) -> bool {
        (self.outstanding() as usize) < SQ_SIZE
    }

    /// Segments requested and not yet completed.
    /// Kernel: `qpriv->pending_tid_r_segs`.
    pub fn pending_segments(&self) -> u32 {
        self.pending_segs
    }

    /// Takes the oldest completion. Kernel: `ib_poll_cq()`.
    pub fn poll(&mut self) -> Option<Completion> {
        if self.completions.is_empty() {
            None
        } else {
            Some(self.completions.remove(0))
        }
    }

    fn slot(i: u32) -> usize {
        i as usize % SQ_SIZE
    }

    /// The posted requests with their send-queue slots (slots outside
    /// `head..tail` are empty: retiring and flushing take them).
    fn wqes(&self) -> impl Iterator<Item = (usize, &Wqe<P>)> {
        self.sq
            .iter()
            .enumerate()
            .filter_map(|(s, w)| w.as_ref().map(|w| (s, w)))
    }

    /// The posted requests, mutably, in no particular order.
    fn wqes_mut(&mut self) -> impl Iterator<Item = &mut Wqe<P>> {
        self.sq.iter_mut().filter_map(Option::as_mut)
    }

    /// Moves finished requests at the head of the send queue to the
    /// completion queue and frees their flow records.
    /// Kernel: `do_rc_completion()` + `__trdma_clean_swqe()`.
    fn retire(&mut self) {
        while self.head != self.cur && !self.completions.is_full() {
            let s = Self::slot(self.head);
            let done = self
                .sq
                .get(s)
                .and_then(Option::as_ref)
                .is_some_and(Wqe::done);
            if !done {
                break;
            }
            if let Some(mut w) = self.sq.get_mut(s).and_then(Option::take) {
                // The ring is empty once every segment completed.
                let _ = w.tid.clean_swqe();
                self.completions.push(Completion {
                    wr_id: w.wr_id,
                    length: w.length,
                    status: WcStatus::Success,
                });
            }
            self.head = self.head.wrapping_add(1);
        }
    }
}

/// Posts an RDMA READ (every READ here is a TID READ: the caller's
/// buffers are page aligned) and schedules the send engine.
/// Kernel: `rvt_post_send()` + `hfi1_tid_rdma_wqe_interlock()` setup in
/// `setup_tid_rdma_wqe()` (`seg_len = min(remote max_len, length)`,
/// `n_flows = remote max_read`).
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
///
/// # Errors
///
/// [`EngineError::QueueFull`], [`EngineError::BadSgl`] (empty, unaligned,
/// or longer than 4 GiB - 1), [`EngineError::NoMemory`].
pub fn post_read<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    wr: &ReadWr<'_>,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let ext = &mut g.ext;
    let req = &mut ext.req;
    if !req.can_post() {
        return Err(EngineError::QueueFull);
    }
    let page = u64::from(PAGE_SIZE);
    let mut total: u64 = 0;
    for s in wr.sges {
        if s.length == 0 || s.vaddr % page != 0 || u64::from(s.length) % page != 0 {
            return Err(EngineError::BadSgl);
        }
        total += u64::from(s.length);
    }
    let length = u32::try_from(total).map_err(|_| EngineError::BadSgl)?;
    if length == 0 {
        return Err(EngineError::BadSgl);
    }
    let mut sges = Vec::new();
    sges.try_reserve_exact(wr.sges.len())
        .map_err(|_| EngineError::NoMemory)?;
    sges.extend_from_slice(wr.sges);
    let seg_len = ext.conn.remote.max_len.min(length).max(PAGE_SIZE);
    let total_segs = length.div_ceil(seg_len);
    let n_flows = u16::from(ext.conn.remote.max_read).clamp(1, MAX_READ_SEGS_PER_REQ as u16);
    let tid = TidRequest::new(seg_len, n_flows, ext.conn.pmtu);
    let s = Requester::<P>::slot(req.tail);
    if let Some(slot) = req.sq.get_mut(s) {
        *slot = Some(Wqe {
            wr_id: wr.wr_id,
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            length,
            sges,
            tid,
            total_segs,
            cur_seg: 0,
            comp_seg: 0,
            started: false,
            placed: [0; MAX_FLOWS],
            tail_seen: [false; MAX_FLOWS],
            held: [false; MAX_FLOWS],
        });
    }
    req.tail = req.tail.wrapping_add(1);
    rcd.sched.schedule_send(qp);
    Ok(())
}

/// The requester's send engine: takes the QP's `s_lock` and sends every
/// READ_REQ it can. Kernel: `hfi1_do_send()` → `hfi1_make_rc_req()` →
/// `hfi1_build_tid_rdma_read_req()`.
///
/// # Locking
///
/// Runs with no lock held (`root`); takes the QP's `s_lock`, and
/// `exp_lock` inside it through `tid-flow`.
///
/// # Errors
///
/// A flow-engine error other than "wait" or a packet that could not be
/// built: the QP stops sending (a bug the sim's tests would show).
pub fn send_engine<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    sink: &mut impl PacketSink,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let mut g = qp.s_lock.lock(root);
    make_req(rcd, qp, &mut g, sink)
}

/// Lends the parts of a locked QP the flow engine needs.
macro_rules! locked {
    ($flags:expr, $flow:expr, $token:expr) => {
        QpLocked {
            flags: &mut *$flags,
            flow: &mut *$flow,
            token: &mut *$token,
        }
    };
}

/// The body of [`send_engine`], with the `s_lock` already held.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow`.
///
/// # Errors
///
/// As [`send_engine`].
pub fn make_req<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    sink: &mut impl PacketSink,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let (state, token) = g.parts();
    let SendState { flags, ext } = state;
    let TidQp {
        flow, conn, req, ..
    } = ext;
    if req.restart_pending && !restart_flows(rcd, qp, locked!(flags, flow, token), req)? {
        return Ok(());
    }
    release_held(rcd, qp, locked!(flags, flow, token), req)?;
    loop {
        if req.cur == req.tail {
            break;
        }
        let slot = Requester::<P>::slot(req.cur);
        let Some(wqe) = req.sq.get_mut(slot).and_then(Option::as_mut) else {
            break;
        };
        if wqe.cur_seg >= wqe.total_segs {
            req.cur = req.cur.wrapping_add(1);
            continue;
        }
        if req.num_rd_atomic >= conn.max_rd_atomic.min(crate::rc::MAX_RD_ATOMIC) {
            break;
        }
        let fresh = wqe.tid.flow_idx == wqe.tid.setup_head;
        let limit = conn.max_rd_atomic.min(crate::rc::MAX_RD_ATOMIC) as usize;
        if fresh && req.window.len() >= limit {
            break;
        }
        if fresh {
            // A new segment. SYNC check first.
            let worst = wqe.seg_bytes(wqe.cur_seg).div_ceil(PAGE_SIZE);
            if flow.index.is_some() && flow.psn.wrapping_add(worst) > MAX_TID_FLOW_PSN - 1 {
                req.sync_pending = true;
            }
            if req.sync_pending {
                if req.pending_segs > 0 {
                    break;
                }
                // A SYNC point: the flow moves to a fresh generation. It
                // keeps its slot (the segment is about to need it).
                if !tid_flow::regenerate_hw_flow(rcd, locked!(flags, flow, token)) {
                    clear_hw_flow(rcd, qp, locked!(flags, flow, token));
                }
                req.sync_pending = false;
                req.stats.syncs += 1;
                release_held(rcd, qp, locked!(flags, flow, token), req)?;
                // The queue may have moved (a request retired).
                continue;
            }
            match setup_hw_flow(rcd, qp, locked!(flags, flow, token)) {
                Ok(()) => {}
                Err(FlowError::Again) => {
                    req.stats.flow_waits += 1;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
            if let Err(e) = wqe.tid.alloc_flows(&rcd.mem, AllocContext::Atomic) {
                req.stats.no_memory += 1;
                return Err(e.into());
            }
            let head = wqe.tid.setup_head;
            match tid_flow::exp_rcv_setup(
                rcd,
                &mut wqe.tid,
                qp,
                locked!(flags, flow, token),
                &wqe.sges,
            ) {
                Ok(()) => {}
                Err(FlowError::Again) => {
                    req.stats.tid_waits += 1;
                    break;
                }
                // Ring full: a response will reschedule the QP.
                Err(FlowError::Invalid) => break,
                Err(FlowError::NoMemory) => {
                    req.stats.no_memory += 1;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
            if !wqe.started {
                wqe.started = true;
                req.tid_r_reqs += 1;
                req.stats.requests += 1;
            }
            let Some(rec) = wqe.tid.flow_mut(head) else {
                return Err(EngineError::Flow(FlowError::NoFlowRecords));
            };
            let npkts = rec.npkts.max(1);
            if let Some(b) = wqe.placed.get_mut(usize::from(head)) {
                *b = 0;
            }
            if let Some(t) = wqe.tail_seen.get_mut(usize::from(head)) {
                *t = false;
            }
            if let Some(h) = wqe.held.get_mut(usize::from(head)) {
                *h = false;
            }
            rec.psns.ib_spsn = req.s_next_psn;
            rec.psns.ib_lpsn = req.s_next_psn.add(npkts - 1);
            req.s_next_psn = req.s_next_psn.add(npkts);
        }
        // Build and send the READ_REQ of the segment at flow_idx.
        let idx = wqe.tid.flow_idx;
        let Some(rec) = wqe.tid.flow(idx) else {
            return Err(EngineError::Flow(FlowError::NoFlowRecords));
        };
        let Some(hw_flow) = rec.idx else {
            return Err(EngineError::Flow(FlowError::Invalid));
        };
        let seg_lpsn = rec.psns.ib_lpsn;
        let entries: ArrayVec<TidEntry, MAX_PAGESETS> = rec
            .tid_entries
            .iter()
            .copied()
            .filter(|e| !e.is_empty())
            .collect();
        let f = ReadReqFlow {
            entries: &entries,
            generation: rec.psns.generation,
            spsn: rec.psns.spsn,
            pkt: 0,
            sent: 0,
            ib_spsn: rec.psns.ib_spsn,
            flow: hw_flow,
            local_qp: conn.local.qp,
            ctxt: conn.local.qp.to_le_bytes()[0],
            remote_qp: conn.remote.qp,
            remote_jkey: conn.remote.jkey,
            remote_verbs_qp: conn.remote_verbs_qpn,
            remote_addr: wqe.remote_addr,
            rkey: wqe.rkey,
            cur_seg: wqe.cur_seg,
            seg_len: wqe.tid.seg_len,
            len: rec.length,
        };
        let built = build_read_req(&f);
        let n = packet::build_read_req(sink.buffer(), conn.path, &built)?;
        sink.send(n);
        req.stats.read_reqs += 1;
        if fresh {
            req.stats.segments += 1;
            // Room was checked above, before anything was set up.
            let _ = req.window.try_push((seg_lpsn, false));
        } else {
            req.stats.retransmits += 1;
        }
        wqe.tid.flow_idx = tid_flow::ring_next(idx);
        wqe.cur_seg += 1;
        req.pending_segs += 1;
        req.num_rd_atomic += 1;
        if wqe.cur_seg >= wqe.total_segs {
            req.cur = req.cur.wrapping_add(1);
        }
    }
    Ok(())
}

/// Releases the TIDs of completed segments once the QP's flow has left
/// the generation they were received in, oldest first, and retires the
/// requests that are then done. Kernel: the `hfi1_kern_exp_rcv_clear()`
/// of `hfi1_rc_rcv_tid_rdma_read_resp()`, moved later.
///
/// Why later: the chip places a packet whose sequence is behind its flow
/// (a duplicate, a stale copy, a straggler) as long as the TID is valid.
/// Once a segment's TIDs are handed to another request such a packet of
/// the old segment would overwrite the new owner's data. While the flow
/// keeps the generation the old segment was received in, its TIDs stay
/// with it; after the flow moves on, any late packet of it fails the
/// generation check and is dropped unplaced. The flow moves on whenever
/// nothing is in flight (and at SYNC points and restarts), so held TIDs
/// come back as soon as the QP's pipeline drains.
///
/// # Locking
///
/// The QP's `s_lock` held (`ql`, `req`); takes `exp_lock` through
/// `tid-flow`.
fn release_held<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    ql: QpLocked<'_, '_>,
    req: &mut Requester<P>,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let QpLocked { flags, flow, token } = ql;
    let mut first_err = None;
    let mut i = req.head;
    while i != req.tail {
        let s = Requester::<P>::slot(i);
        if let Some(w) = req.sq.get_mut(s).and_then(Option::as_mut) {
            loop {
                let k = w.tid.clear_tail;
                if k == w.tid.flow_idx || !w.held.get(usize::from(k)).copied().unwrap_or(false) {
                    break;
                }
                let gen_now = flow.index.map(|_| flow.generation);
                let seg_gen = w.tid.flow(k).map(|r| r.psns.generation);
                if gen_now.is_some() && gen_now == seg_gen {
                    break;
                }
                if let Some(h) = w.held.get_mut(usize::from(k)) {
                    *h = false;
                }
                if let Err(e) = exp_rcv_clear(rcd, &mut w.tid, qp, locked!(flags, flow, token)) {
                    first_err.get_or_insert(e);
                    break;
                }
            }
        }
        i = i.wrapping_add(1);
    }
    req.retire();
    match first_err {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Restarts from the oldest segment in flight (SPEC §5 "Restart"): its
/// IB PSN is the restart point; that segment's and every later segment's
/// packet and offset cursors are rewound to their start and the send
/// queue is rewound so their READ_REQs go out again (the responder
/// treats each as a duplicate and streams it again).
/// Kernel: `restart_tid_rdma_read_req()` → `hfi1_restart_rc()` →
/// `hfi1_tid_rdma_restart_req()`.
///
/// The segments keep their flow PSNs and generation, as in the driver:
/// the chip's flow register still waits for the first packet it missed,
/// so the repeated stream brings it back in sequence, and what comes
/// before is behind it (dropped by software PSN checking). Only if the
/// QP no longer holds the flow its segments were set up in (it cannot
/// while segments are in flight; kept as a fallback) are they re-armed
/// in a fresh generation. Returns false if that fallback had to wait for
/// a hardware flow (the QP is queued and the restart stays pending).
///
/// # Locking
///
/// The QP's `s_lock` held (`ql`, `req`); takes `exp_lock` through
/// `tid-flow`.
fn restart_flows<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    ql: QpLocked<'_, '_>,
    req: &mut Requester<P>,
) -> Result<bool, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let QpLocked { flags, flow, token } = ql;
    if req.pending_segs == 0 {
        // Everything completed since the restart was asked for.
        req.restart_pending = false;
        return Ok(true);
    }
    let same_gen = flow.index.is_some()
        && req.wqes().all(|(_, w)| {
            ring_slots(w.first_live(), w.tid.flow_idx).all(|k| {
                w.tid
                    .flow(k)
                    .is_some_and(|r| r.idx == flow.index && r.psns.generation == flow.generation)
            })
        });
    if !same_gen {
        // Keep the flow slot (a QP holding TIDs must not wait for a flow
        // held by QPs waiting for its TIDs): only the generation moves.
        if !tid_flow::regenerate_hw_flow(rcd, locked!(flags, flow, token)) {
            match setup_hw_flow(rcd, qp, locked!(flags, flow, token)) {
                Ok(()) => {}
                Err(FlowError::Again) => {
                    req.stats.flow_waits += 1;
                    return Ok(false);
                }
                Err(e) => return Err(e.into()),
            }
        }
        release_held(rcd, qp, locked!(flags, flow, token), req)?;
        req.sync_pending = false;
    }
    let mut first = None;
    let mut i = req.head;
    while i != req.tail {
        let s = Requester::<P>::slot(i);
        if let Some(w) = req.sq.get_mut(s).and_then(Option::as_mut) {
            let live = w.first_live();
            let sent = tid_flow::ring_count(w.tid.flow_idx, live);
            let mut k = live;
            while k != w.tid.flow_idx {
                if let Some(rec) = w.tid.flow_mut(k) {
                    if !same_gen {
                        let spsn = flow.psn;
                        rec.idx = flow.index;
                        rec.psns.generation = flow.generation;
                        rec.psns.spsn = spsn;
                        rec.psns.lpsn = spsn.wrapping_add(rec.npkts).wrapping_sub(1);
                        rec.psns.r_next_psn = FlowPsn::new(flow.generation, spsn);
                        flow.psn = flow.psn.wrapping_add(rec.npkts);
                    }
                    // Rewind to the segment's start (the responder only
                    // accepts a repeated READ_REQ from the start).
                    rec.pkt = 0;
                    rec.tid_idx = 0;
                    rec.tid_offset = 0;
                    rec.sent = 0;
                }
                // What the chip placed stays placed: the TIDs and the
                // bytes are the same. A segment not yet complete now waits
                // for the end of its repeated stream.
                let full = w.tid.flow(k).map_or(0, |r| full_mask(r.npkts));
                let placed = w.placed.get(usize::from(k)).copied().unwrap_or(0);
                if placed & full != full {
                    if let Some(t) = w.tail_seen.get_mut(usize::from(k)) {
                        *t = false;
                    }
                }
                k = tid_flow::ring_next(k);
            }
            if sent > 0 {
                w.tid.flow_idx = live;
                w.cur_seg = w.cur_seg.saturating_sub(u32::from(sent));
                req.pending_segs = req.pending_segs.saturating_sub(u32::from(sent));
                req.num_rd_atomic = req.num_rd_atomic.saturating_sub(u32::from(sent));
                if first.is_none() {
                    first = Some(i);
                }
            }
        }
        i = i.wrapping_add(1);
    }
    if let Some(f) = first {
        // The send queue resumes at the oldest request with a segment to
        // send again (never later than where it stood).
        if f.wrapping_sub(req.head) < req.cur.wrapping_sub(req.head) {
            req.cur = f;
        }
    }
    req.restart_pending = false;
    if !same_gen {
        // The flow left the generation of the error episode: its packets
        // now fail the generation check, and a new sequence error is a
        // new episode.
        req.rdmar_seq = false;
        req.sw_psn = None;
    }
    req.stats.restarts += 1;
    Ok(true)
}

/// An error the chip reported with a delivered KDETH packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KdethError {
    /// TID, control bits or offset name no programmed buffer.
    Tid,
    /// Flow sequence ahead or behind.
    FlowSeq,
    /// Stale generation.
    FlowGen,
}

/// The chip's view of the flow a packet was checked against, read from
/// the flow table after the packet (a register read, no lock in the
/// driver). Kernel: `read_r_next_psn()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChipFlow {
    /// The hardware flow.
    pub flow: hfi1_hal::FlowIndex,
    /// Its next expected flow PSN.
    pub next: hfi1_hal::FlowPsn,
}

/// What the receive path did with a READ_RESP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespVerdict {
    /// It completed at least one segment.
    Completed,
    /// It was placed (or counted) but completed nothing yet.
    Counted,
    /// Dropped: a stale generation, a TID error, or no segment in flight
    /// holds its PSNs.
    Dropped,
}

/// The flow-ring slots from `from` up to, not including, `to`.
fn ring_slots(from: u16, to: u16) -> impl Iterator<Item = u16> {
    core::iter::successors(Some(from), |&k| Some(tid_flow::ring_next(k)))
        .take_while(move |&k| k != to)
}

/// Bits of a segment of `npkts` packets.
fn full_mask(npkts: u32) -> u64 {
    if npkts >= 64 {
        u64::MAX
    } else {
        (1u64 << npkts) - 1
    }
}

/// What software PSN checking made of a sequence-error READ_RESP.
enum SwCheck {
    /// Dropped: the first of an episode, ahead, behind, or a late copy of
    /// a completed segment.
    Dropped,
    /// The next expected packet: recorded as placed.
    Accepted,
    /// It names no segment the QP has: the QP lost track.
    NotFound,
}

/// Where a flow PSN lies among the QP's segments.
enum Located {
    /// In a segment in flight: request slot, ring slot, packet index.
    Live(usize, u16, u32),
    /// In a segment that completed and still holds its TIDs.
    Held,
    /// Nowhere.
    Nowhere,
}

/// Finds the segment whose flow PSN range holds `psn`, among every
/// request's segments in flight and completed segments still holding
/// their TIDs (the generation is part of the comparison).
/// Kernel: `find_flow()`.
fn locate<P: FlowPlatform>(req: &Requester<P>, psn: FlowPsn) -> Located {
    for (s, w) in req.wqes() {
        for k in ring_slots(w.tid.clear_tail, w.tid.flow_idx) {
            let Some(rec) = w.tid.flow(k) else { continue };
            let ps = rec.psns;
            let off = psn.seq().wrapping_sub(ps.spsn);
            if ps.generation == psn.generation() && psn.seq() >= ps.spsn && off < rec.npkts {
                let held = w.held.get(usize::from(k)).copied().unwrap_or(false);
                return if held {
                    Located::Held
                } else {
                    Located::Live(s, k, off)
                };
            }
        }
    }
    Located::Nowhere
}

/// Software PSN checking of a READ_RESP the chip flagged with a flow
/// sequence error (SPEC §5 "Errors from the chip"). Kernel: the
/// `RHF_RTE_EXPECTED_FLOW_SEQ_ERR` case of `handle_read_kdeth_eflags()`.
///
/// The first sequence error of an episode switches the QP to software
/// checking from the chip's next expected flow PSN (`chip`, read from the
/// flow register), counts what the register shows was placed in order,
/// asks for one restart and drops the packet. After that a packet ahead of
/// the expected PSN is dropped (asking for a restart if none is pending in
/// this episode); one behind it is dropped and shows that the restart took
/// effect (the restart mark clears); the expected one is recorded as
/// placed and advances the expected PSN, and if it is its segment's last
/// packet the segment is complete. Only the packet's own segment is ever
/// touched: packets of later segments never advance their flows (SPEC §7).
///
/// # Locking
///
/// The QP's `s_lock` held (`req`, `flow_gen`).
fn sw_psn_check<P: FlowPlatform>(
    req: &mut Requester<P>,
    flow_gen: Option<hfi1_hal::Generation>,
    psn: FlowPsn,
    chip: Option<ChipFlow>,
) -> SwCheck {
    let (s, k, off) = match locate(req, psn) {
        Located::Live(s, k, off) => (s, k, off),
        Located::Held => {
            req.stats.late_dropped += 1;
            return SwCheck::Dropped;
        }
        Located::Nowhere => return SwCheck::NotFound,
    };
    let active = req
        .sw_psn
        .filter(|r| flow_gen.is_some_and(|g| g == r.generation()));
    let Some(expected) = active else {
        // First sequence error of an episode: start software checking
        // where the chip stands, keep what it placed in order so far.
        let from_chip = chip
            .map(|c| c.next)
            .filter(|n| n.generation() == psn.generation());
        let start = from_chip.unwrap_or(psn);
        if from_chip.is_some() {
            mark_in_order(req, chip);
        }
        req.sw_psn = Some(start);
        req.stats.sw_dropped += 1;
        ask_restart(req);
        return SwCheck::Dropped;
    };
    if psn.seq() > expected.seq() {
        req.stats.sw_dropped += 1;
        ask_restart(req);
        return SwCheck::Dropped;
    }
    if psn.seq() < expected.seq() {
        req.stats.sw_dropped += 1;
        req.rdmar_seq = false;
        return SwCheck::Dropped;
    }
    req.sw_psn = Some(expected.next_seq());
    let Some(w) = req.sq.get_mut(s).and_then(Option::as_mut) else {
        return SwCheck::NotFound;
    };
    let npkts = w.tid.flow(k).map_or(0, |r| r.npkts);
    if let Some(b) = w.placed.get_mut(usize::from(k)) {
        if off < 64 {
            *b |= 1 << off;
        }
    }
    if off.wrapping_add(1) == npkts {
        if let Some(t) = w.tail_seen.get_mut(usize::from(k)) {
            *t = true;
        }
        req.rdmar_seq = false;
    }
    SwCheck::Accepted
}

/// Asks for a restart unless one was asked for in this error episode.
/// Kernel: `restart_tid_rdma_read_req()` guarded by `RVT_R_RDMAR_SEQ`.
fn ask_restart<P: FlowPlatform>(req: &mut Requester<P>) {
    if !req.rdmar_seq && req.pending_segs > 0 {
        req.rdmar_seq = true;
        req.restart_pending = true;
        req.stats.seq_restarts += 1;
    }
}

/// Records as placed every packet of a segment in flight that the chip's
/// flow register has moved past in the segment's generation: those
/// arrived in sequence and were placed without being delivered.
fn mark_in_order<P: FlowPlatform>(req: &mut Requester<P>, chip: Option<ChipFlow>) {
    let Some(c) = chip else { return };
    for w in req.wqes_mut() {
        for k in ring_slots(w.first_live(), w.tid.flow_idx) {
            let Some(rec) = w.tid.flow(k) else { break };
            let ps = rec.psns;
            if rec.idx == Some(c.flow) && c.next.generation() == ps.generation {
                let n = c.next.seq().saturating_sub(ps.spsn).min(rec.npkts);
                if let Some(b) = w.placed.get_mut(usize::from(k)) {
                    *b |= full_mask(n);
                }
                if n == rec.npkts {
                    if let Some(t) = w.tail_seen.get_mut(usize::from(k)) {
                        *t = true;
                    }
                }
            }
        }
    }
}

/// Receives a READ_RESP the chip delivered to software: with header
/// suppression a segment's last packet, or any packet the chip flagged.
/// Kernel: `hfi1_rc_rcv_tid_rdma_read_resp()` and
/// `handle_read_kdeth_eflags()`.
///
/// First, with the QP's `s_lock` held, a packet whose IB PSN
/// (`verbs_psn`) lies outside `[s_last_psn, s_psn]` is dropped (a stale
/// packet of a segment that completed, or garbage). Then:
///
/// - a stale generation or a TID error: dropped (the chip did not place
///   it);
/// - a flow sequence error: software PSN checking (`sw_psn_check`): one
///   restart per error episode, packets ahead or behind the expected flow
///   PSN dropped, the expected one advances it; a packet naming no segment
///   at all means the QP lost track: the oldest request completes in
///   error ([`WcStatus::LocalQpOpError`]), the others are flushed, and
///   every TID, flow and record is released;
/// - no error: the chip placed it in sequence. Software records which
///   packets of each segment in flight were placed: this one (its IB PSN
///   and flow PSN must name the same packet of a segment) and every
///   sequence the chip's flow register (`chip`) has moved past.
///
/// A segment completes once all its packets are placed and the stream
/// serving it has ended: its TIDs are held until the flow leaves the
/// generation (`release_held`), the RC layer acknowledges, and the
/// hardware flow is released once nothing is in flight.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`): the IB PSN checks of the error path run
/// under it (SPEC §7); without the guard the call does not compile:
///
/// ```compile_fail
/// # use tid_read_proto::requester::{rcv_read_resp, KdethError};
/// # fn f<P>(rcd: &tid_flow::RcvCtxt<P>, qp: &P::Ref,
/// #        hdr: &tid_read_proto::wire::read_resp::Repr, psn: hfi1_hal::FlowPsn)
/// # where P: tid_flow::FlowPlatform<Ext = tid_read_proto::rc::TidQp<P>> {
/// // No s_lock taken: there is no guard to pass.
/// rcv_read_resp(rcd, qp, psn, hdr, Some(KdethError::FlowSeq), None);
/// # }
/// ```
///
/// # Errors
///
/// A flow-engine error while releasing a segment.
pub fn rcv_read_resp<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    bth_psn: hfi1_hal::FlowPsn,
    hdr: &read_resp::Repr,
    error: Option<KdethError>,
    chip: Option<ChipFlow>,
) -> Result<RespVerdict, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let ipsn = hdr.verbs_psn;
    {
        let req = &mut g.ext.req;
        if !ipsn.within(req.s_last_psn, req.s_next_psn.sub(1)) {
            req.stats.psn_dropped += 1;
            req.stats.resp_dropped += 1;
            if error.is_some() {
                req.stats.kdeth_errors += 1;
            }
            if error.is_none() {
                // Taken in sequence by the chip all the same: what its
                // register shows placed stays placed.
                let (state, token) = g.parts();
                let SendState { flags, ext } = state;
                let TidQp { flow, req, .. } = ext;
                mark_in_order(req, chip);
                complete_placed(rcd, qp, locked!(flags, flow, token), req)?;
            }
            return Ok(RespVerdict::Dropped);
        }
        match error {
            Some(KdethError::FlowGen) => {
                req.stats.stale_dropped += 1;
                req.stats.kdeth_errors += 1;
                return Ok(RespVerdict::Dropped);
            }
            Some(KdethError::Tid) => {
                req.stats.tid_dropped += 1;
                req.stats.kdeth_errors += 1;
                return Ok(RespVerdict::Dropped);
            }
            Some(KdethError::FlowSeq) => {
                req.stats.seq_errors += 1;
                req.stats.kdeth_errors += 1;
            }
            None => {}
        }
    }
    if error == Some(KdethError::FlowSeq) {
        let flow_gen = g.ext.flow.index.map(|_| g.ext.flow.generation);
        let req = &mut g.ext.req;
        let asked = req.stats.seq_restarts;
        match sw_psn_check(req, flow_gen, bth_psn, chip) {
            SwCheck::Dropped => {
                if req.stats.seq_restarts != asked {
                    rcd.sched.schedule_send(qp);
                }
                // The packet is dropped, but the chip's register may show
                // a segment fully placed in sequence whose last packet
                // software never saw (a copy taken in sequence but
                // dropped by the IB PSN check): complete it, or its
                // repeated streams, all behind the chip, never would. (A
                // sequence error does not move the register: this packet
                // advances nothing.)
                let (state, token) = g.parts();
                let SendState { flags, ext } = state;
                let TidQp { flow, req, .. } = ext;
                mark_in_order(req, chip);
                complete_placed(rcd, qp, locked!(flags, flow, token), req)?;
                return Ok(RespVerdict::Dropped);
            }
            SwCheck::Accepted => {}
            SwCheck::NotFound => {
                req.stats.flow_not_found += 1;
                flush_with(rcd, qp, g, WcStatus::LocalQpOpError, WcStatus::Flushed);
                return Ok(RespVerdict::Dropped);
            }
        }
    }
    let (state, token) = g.parts();
    let SendState { flags, ext } = state;
    let TidQp { flow, req, .. } = ext;
    if error.is_none() {
        let mut hit = false;
        'found: for w in req.wqes_mut() {
            for k in ring_slots(w.first_live(), w.tid.flow_idx) {
                let Some(rec) = w.tid.flow(k) else { break };
                let ps = rec.psns;
                if !ipsn.within(ps.ib_spsn, ps.ib_lpsn) {
                    continue;
                }
                let off = u32::try_from(ipsn.delta(ps.ib_spsn)).unwrap_or(u32::MAX);
                if off < 64 && bth_psn == ps.full_psn(ps.spsn.wrapping_add(off)) {
                    if let Some(b) = w.placed.get_mut(usize::from(k)) {
                        *b |= 1 << off;
                    }
                    if off.wrapping_add(1) == rec.npkts {
                        if let Some(t) = w.tail_seen.get_mut(usize::from(k)) {
                            *t = true;
                        }
                    }
                    hit = true;
                    break 'found;
                }
            }
        }
        if !hit {
            req.stats.psn_dropped += 1;
            req.stats.resp_dropped += 1;
        }
        mark_in_order(req, chip);
        // Software checking follows the chip: a packet it took in
        // sequence shows where it stands.
        if let (Some(r), Some(c)) = (req.sw_psn, chip) {
            if c.next.generation() == r.generation() && c.next.seq() > r.seq() {
                req.sw_psn = Some(c.next);
            }
        }
        if !hit {
            // Still complete what the register shows (below), but the
            // packet itself named nothing.
            let done = complete_placed(rcd, qp, locked!(flags, flow, token), req)?;
            return Ok(if done {
                RespVerdict::Completed
            } else {
                RespVerdict::Dropped
            });
        }
    }
    let done = complete_placed(rcd, qp, locked!(flags, flow, token), req)?;
    Ok(if done {
        RespVerdict::Completed
    } else {
        RespVerdict::Counted
    })
}

/// Completes, in order per request, every segment whose packets are all
/// placed and whose stream has ended; releases the flow when nothing is
/// in flight any more. Returns true if a segment completed.
///
/// # Locking
///
/// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
fn complete_placed<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    ql: QpLocked<'_, '_>,
    req: &mut Requester<P>,
) -> Result<bool, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let QpLocked { flags, flow, token } = ql;
    // Complete, in order per request, every segment fully placed.
    let mut completed = 0u32;
    let mut first_err = None;
    let mut i = req.head;
    while i != req.tail {
        let s = Requester::<P>::slot(i);
        if let Some(w) = req.sq.get_mut(s).and_then(Option::as_mut) {
            let mut k = w.first_live();
            while w.tid.flow_idx != k {
                let (npkts, lpsn) = match w.tid.flow(k) {
                    Some(r) => (r.npkts, r.psns.ib_lpsn),
                    None => break,
                };
                let full = full_mask(npkts);
                let tail = w.tail_seen.get(usize::from(k)).copied().unwrap_or(false);
                let Some(b) = w.placed.get_mut(usize::from(k)) else {
                    break;
                };
                // Every packet placed, and the stream that is serving the
                // segment now has ended: no packet of it can still be on
                // its way from the responder once its TIDs are reused.
                if *b & full != full || !tail {
                    break;
                }
                *b = 0;
                if let Some(h) = w.held.get_mut(usize::from(k)) {
                    *h = true;
                }
                k = tid_flow::ring_next(k);
                req.pending_segs = req.pending_segs.saturating_sub(1);
                req.num_rd_atomic = req.num_rd_atomic.saturating_sub(1);
                if let Some(e) = req.window.iter_mut().find(|e| e.0 == lpsn) {
                    e.1 = true;
                }
                // s_last_psn: everything up to it completed (segments of
                // different requests may complete out of order).
                while let Some(e) = req.window.first().copied().filter(|e| e.1) {
                    req.window.pop_at(0);
                    req.s_last_psn = e.0;
                }
                req.stats.segments_done += 1;
                w.comp_seg += 1;
                if w.comp_seg >= w.total_segs {
                    req.tid_r_comp += 1;
                }
                completed += 1;
            }
        }
        i = i.wrapping_add(1);
    }
    if completed == 0 {
        return Ok(false);
    }
    // Nothing in flight any more (a SYNC point, no TID READ outstanding,
    // or just a pause): the flow moves to a fresh generation, which frees
    // the TIDs of the segments that completed in the old one.
    if req.pending_segs == 0 {
        if flags.waiting() {
            // Waiting on the RcvArray queue, a QP keeps its flow (a QP on
            // that queue holds one; giving it up could leave the queue's
            // head waiting for a flow held by the QPs behind it).
            tid_flow::regenerate_hw_flow(rcd, locked!(flags, flow, token));
        } else {
            clear_hw_flow(rcd, qp, locked!(flags, flow, token));
        }
        if req.sync_pending {
            req.sync_pending = false;
            req.stats.syncs += 1;
        }
        if let Err(e) = release_held(rcd, qp, locked!(flags, flow, token), req) {
            first_err.get_or_insert(match e {
                EngineError::Flow(f) => f,
                _ => FlowError::Invalid,
            });
        }
    }
    req.retire();
    rcd.sched.schedule_send(qp);
    if let Some(e) = first_err {
        return Err(e.into());
    }
    Ok(true)
}

/// The retry timer expired: if segments are outstanding, restart from the
/// oldest one (see `restart_flows`) and schedule the send engine.
/// Kernel: `hfi1_rc_timeout()` → `hfi1_restart_rc()` for a TID READ.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn timeout<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>)
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let req = &mut g.ext.req;
    if req.pending_segs > 0 {
        req.stats.timeouts += 1;
        req.restart_pending = true;
        rcd.sched.schedule_send(qp);
    }
}

/// Receives an RC ACK or NAK. Kernel: `do_rc_ack()` (the NAK branch).
///
/// A plain ACK carries nothing a TID READ needs (segments are
/// acknowledged by their READ_RESPs). A PSN-sequence NAK (the responder
/// missed a READ_REQ) restarts the segments in flight. Any other NAK is
/// fatal for the connection, as in RC: the QP is flushed and every
/// request completes in error.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); a fatal NAK takes `exp_lock` through
/// `tid-flow` and `qp-wait`.
pub fn rcv_ack<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>, a: &aeth::Repr)
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    if !a.is_nak() {
        return;
    }
    g.ext.req.stats.naks += 1;
    if a.syndrome == aeth::NakCode::PsnError.syndrome() {
        let req = &mut g.ext.req;
        if req.pending_segs > 0 {
            req.restart_pending = true;
            rcd.sched.schedule_send(qp);
        }
        return;
    }
    flush_with(rcd, qp, g, WcStatus::RemoteError, WcStatus::RemoteError);
}

/// Flushes the QP (reset or destroy): every request's segments are torn
/// down and its flow records freed, each request completes as flushed,
/// the hardware flow is released and any TID wait is unwound.
/// Kernel: `hfi1_qp_kern_exp_rcv_clear_all()` + `hfi1_kern_clear_hw_flow()`
/// + `hfi1_tid_rdma_flush_wait()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow` and
/// `qp-wait`.
pub fn flush<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>)
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    flush_with(rcd, qp, g, WcStatus::Flushed, WcStatus::Flushed);
}

/// [`flush`] with the completions' status: `first` for the oldest
/// request, `rest` for the others.
///
/// # Locking
///
/// As [`flush`].
fn flush_with<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    first: WcStatus,
    rest: WcStatus,
) where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    {
        let (state, token) = g.parts();
        let SendState { flags, ext } = state;
        let TidQp { flow, req, .. } = ext;
        let mut i = req.head;
        while i != req.tail {
            let s = Requester::<P>::slot(i);
            if let Some(mut w) = req.sq.get_mut(s).and_then(Option::take) {
                exp_rcv_clear_all(rcd, &mut w.tid, qp, locked!(flags, flow, token));
                let _ = w.tid.clean_swqe();
                if !req.completions.is_full() {
                    req.completions.push(Completion {
                        wr_id: w.wr_id,
                        length: w.length,
                        status: if i == req.head { first } else { rest },
                    });
                }
            }
            i = i.wrapping_add(1);
        }
        req.head = req.tail;
        req.cur = req.tail;
        req.pending_segs = 0;
        req.num_rd_atomic = 0;
        req.window.clear();
        req.tid_r_comp = req.tid_r_reqs;
        req.sync_pending = false;
        req.restart_pending = false;
        req.sw_psn = None;
        req.rdmar_seq = false;
        req.s_last_psn = req.s_next_psn.sub(1);
        clear_hw_flow(rcd, qp, locked!(flags, flow, token));
    }
    qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
}
