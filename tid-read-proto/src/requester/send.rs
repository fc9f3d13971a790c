// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's send engine (kernel `hfi1_make_rc_req()`), one request
//! packet per step, by `s_state`:
//!
//! - **start** the READ at `s_cur` (new, or again from its first PSN): it
//!   gets its IB PSNs the first time; the interlock may hold it back; a
//!   plain READ sends its RDMA READ request, a TID READ its first (next)
//!   segment;
//! - **the rest of a plain READ** after a restart in its middle: a request
//!   for the bytes from `s_psn` on;
//! - **a TID READ restart**: the segment holding `s_psn` is found, its
//!   cursors rewound, and its READ_REQ sent again;
//! - **the next segment** of the TID READ at `s_cur`.
//!
//! A TID READ segment (kernel `hfi1_build_tid_rdma_read_req()`): at a SYNC
//! point it waits until every segment sent completed, then the hardware
//! flow is released and taken again (a fresh generation); a new segment
//! gets the flow ([`tid_flow::setup_hw_flow`]) and its RcvArray entries
//! ([`tid_flow::exp_rcv_setup`]), either of which may queue the QP, and
//! its IB PSN range (one PSN per response packet); a segment sent before
//! keeps its PSNs. Its READ_REQ goes out with the TID entries.
//!
//! After every packet: a restart's `SEND_ONE` turns into `WAIT_ACK`, and
//! the retry timer is armed if it is not running and a READ is
//! outstanding (the kernel arms it at the send completion,
//! `hfi1_rc_send_complete()`).

use arrayvec::ArrayVec;
use hfi1_hal::consts::{MAX_PAGESETS, MAX_TID_FLOW_PSN};
use hfi1_hal::{Psn, TidEntry};
use tid_flow::{FlowError, FlowPlatform, exp_rcv_setup, setup_hw_flow};

use super::wqe::{ReqState, SegState};
use super::{Env, Requester, SendState};
use crate::opfn::timeout_shift;
use crate::plain_read;
use crate::qualify::div_round_up_mtu;
use crate::qualify::{InterlockState, WqeOp, interlock};
use crate::rc::retry::retry_ns;
use crate::rc::{EngineError, MAX_RD_ATOMIC, PacketSink};
use crate::read_req::{ReadReq, ReadReqFlow};
use crate::read_resp::Cursor;
use crate::wire::reth;

/// Where byte `at` of a scatter list lies.
fn sge_cursor_at(sges: &[tid_flow::Sge], at: u64) -> tid_flow::SgeCursor {
    let mut left = at;
    for (isge, s) in (0u32..).zip(sges) {
        if left < u64::from(s.length) {
            return tid_flow::SgeCursor {
                isge,
                offset: u32::try_from(left).unwrap_or(0),
            };
        }
        left -= u64::from(s.length);
    }
    tid_flow::SgeCursor {
        isge: u32::try_from(sges.len()).unwrap_or(u32::MAX),
        offset: 0,
    }
}

/// What one step of the send engine came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// A packet went out: look again.
    Sent,
    /// Nothing more can go now.
    Stop,
}

impl<P: FlowPlatform> Requester<P> {
    /// The send engine with the QP's `s_lock` held: every request packet
    /// that can go now. In the error state it only makes sure every
    /// request has completed. Kernel: `hfi1_make_rc_req()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`); takes `exp_lock` through
    /// `tid-flow`.
    ///
    /// # Errors
    ///
    /// A flow-engine error other than "wait" or a packet that could not be
    /// built: the QP stops sending (a bug the sim's tests would show).
    pub fn send_requests(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
    ) -> Result<(), EngineError> {
        self.send_requests_with(env, sink, &crate::write::requester::NoSource)
    }

    /// [`Self::send_requests`] with the local memory `src` the plain RDMA
    /// WRITEs' payloads are read from (a QP that posts WRITEs runs this
    /// one). Kernel: `hfi1_make_rc_req()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`); takes `exp_lock` through
    /// `tid-flow`.
    ///
    /// # Errors
    ///
    /// As [`Self::send_requests`]; [`crate::packet::PacketError::Source`]
    /// if a WRITE's buffer is not in `src`.
    pub fn send_requests_with(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        src: &dyn crate::rc::SourceData,
    ) -> Result<(), EngineError> {
        loop {
            if !env.state.receives() {
                self.error_qp(env);
                return Ok(());
            }
            if self.flags.wait_ack
                || self.rnr_timer.is_armed()
                || env
                    .locked
                    .flags
                    .contains(hfi1_hal::flags::SFlags::WAIT_HALT)
            {
                return Ok(());
            }
            let step = self.step(env, sink, src)?;
            if let Some(shift) = self.arm_on_send.take() {
                self.arm_after_send(env, shift);
            }
            if step == Step::Stop {
                return Ok(());
            }
        }
    }

    /// The send completion of a request packet: the retry timer starts if
    /// it does not run and a READ is outstanding. Kernel: the timer part
    /// of `hfi1_rc_send_complete()`.
    fn arm_after_send(&mut self, env: &Env<'_, '_, P>, shift: u8) {
        let outstanding = self.sq.acked != self.sq.tail;
        if outstanding
            && env.state.receives()
            && !self.retry_timer.is_armed()
            && !self.rnr_timer.is_armed()
        {
            self.retry_timer.arm(retry_ns(env.conn.timeout, shift));
        }
    }

    /// One packet, by `s_state`.
    fn step(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        src: &dyn crate::rc::SourceData,
    ) -> Result<Step, EngineError> {
        let i = self.sq.cur;
        match self.s_state {
            SendState::Start => self.start(env, sink, src, i),
            SendState::PlainRest => self.plain_rest(env, sink, i),
            SendState::TidRestart => self.tid_restart(env, sink, i),
            SendState::TidWriteRest => self.write_rest(env, sink, i),
            SendState::PlainWrite => self.plain_write_packet(env, sink, src, i),
            SendState::TidNext => {
                let Some(w) = self.sq.get(i) else {
                    self.s_state = SendState::Start;
                    return Ok(Step::Stop);
                };
                let at_start = self.psn == w.psn;
                if w.tid.is_none() || at_start || i == self.sq.tail {
                    self.s_state = SendState::Start;
                    if at_start || i == self.sq.tail {
                        return self.start(env, sink, src, i);
                    }
                    return Ok(Step::Stop);
                }
                if self.at_rd_atomic_limit(env) {
                    return Ok(Step::Stop);
                }
                self.tid_segment(env, sink, i)
            }
        }
    }

    /// `s_num_rd_atomic` at `s_max_rd_atomic`: wait for a read to finish.
    /// Kernel: `RVT_S_WAIT_RDMAR`.
    fn at_rd_atomic_limit(&mut self, env: &Env<'_, '_, P>) -> bool {
        let limit = env.conn.max_rd_atomic.min(MAX_RD_ATOMIC);
        if self.num_rd_atomic >= limit {
            self.flags.wait_rdmar = true;
            return true;
        }
        false
    }

    /// Starts the READ at `i` (new or again from its first PSN). Kernel:
    /// the default case of `hfi1_make_rc_req()`'s `s_state` switch.
    fn start(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        src: &dyn crate::rc::SourceData,
        i: u32,
    ) -> Result<Step, EngineError> {
        if i == self.sq.head() {
            return Ok(Step::Stop);
        }
        let newreq = i == self.sq.tail;
        let pmtu = env.conn.pmtu;
        let next_psn = self.next_psn;
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(Step::Stop);
        };
        if newreq {
            if !w.started {
                w.started = true;
                w.psn = next_psn;
                w.lpsn = next_psn.add(w.psns(pmtu) - 1);
                self.next_psn = w.lpsn.add(1);
            }
            self.psn = w.psn;
        }
        if self.flags.interlock || self.interlocked(i) {
            self.flags.interlock = true;
            return Ok(Step::Stop);
        }
        if self.sq.get(i).is_some_and(|w| w.write.is_some()) {
            return self.start_write(env, sink, src, i, newreq);
        }
        if self.at_rd_atomic_limit(env) {
            return Ok(Step::Stop);
        }
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(Step::Stop);
        };
        let psn = self.psn;
        let Some(t) = w.tid.as_mut() else {
            let r = reth::Repr {
                vaddr: w.remote_addr,
                rkey: w.rkey,
                length: w.length,
            };
            let lpsn = w.lpsn;
            w.counted = true;
            self.num_rd_atomic += 1;
            self.send_plain(env, sink, psn, &r)?;
            self.stats.plain_reads += u64::from(newreq);
            self.sq.cur = i.wrapping_add(1);
            if newreq {
                self.sq.tail = i.wrapping_add(1);
            }
            self.psn = lpsn.add(1);
            self.s_state = SendState::Start;
            return Ok(Step::Sent);
        };
        if newreq {
            let head = t.req.setup_head;
            if t.req.flow(head).is_some_and(|r| r.pagesets.is_empty()) {
                t.req.clear_tail = head;
                t.req.flow_idx = head;
                t.state = ReqState::Active;
            }
        } else if psn == w.psn {
            t.cur_seg = 0;
            t.comp_seg = 0;
            t.ack_pending = 0;
            t.req.flow_idx = t.req.clear_tail;
            t.state = ReqState::Resend;
        }
        t.s_next_psn = psn;
        let step = self.tid_segment(env, sink, i)?;
        if step == Step::Sent && newreq {
            self.sq.tail = i.wrapping_add(1);
            self.stats.requests += 1;
        }
        Ok(step)
    }

    /// True if the READ at `i` must wait for the one before it.
    /// Kernel: `hfi1_tid_rdma_wqe_interlock()`.
    pub(crate) fn interlocked(&self, i: u32) -> bool {
        let op = |w: &super::Wqe<P>| match (&w.write, &w.tid) {
            (Some(x), _) if x.tid.is_some() => WqeOp::TidRdmaWrite,
            (Some(_), _) => WqeOp::RdmaWrite,
            (None, Some(_)) => WqeOp::TidRdmaRead,
            (None, None) => WqeOp::RdmaRead,
        };
        let Some(w) = self.sq.get(i) else {
            return false;
        };
        let prev_w = self.sq.get(i.wrapping_sub(1));
        let prev = prev_w.map_or(WqeOp::Other, op);
        let prev_write_pending = prev_w
            .and_then(|p| p.tid_write())
            .is_some_and(|t| t.ack_seg != t.total_segs);
        let st = InterlockState {
            prev,
            unacked: self.sq.acked != self.sq.cur,
            prev_write_pending,
        };
        interlock(op(w), &st)
    }

    /// The rest of a plain READ after a restart in its middle: a request
    /// for the bytes from `s_psn` on. Kernel: the
    /// `OP(RDMA_READ_RESPONSE_MIDDLE)` case of `hfi1_make_rc_req()`.
    fn plain_rest(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        i: u32,
    ) -> Result<Step, EngineError> {
        let pmtu = env.conn.pmtu;
        let psn = self.psn;
        let Some(w) = self.sq.get(i).filter(|w| w.tid.is_none()) else {
            self.s_state = SendState::Start;
            return Ok(Step::Stop);
        };
        let skipped = u32::try_from(psn.delta(w.psn))
            .unwrap_or(0)
            .saturating_mul(pmtu);
        let r = reth::Repr {
            vaddr: w.remote_addr.wrapping_add(u64::from(skipped)),
            rkey: w.rkey,
            length: w.length.saturating_sub(skipped),
        };
        let lpsn = w.lpsn;
        self.send_plain(env, sink, psn, &r)?;
        self.stats.retransmits += 1;
        self.s_state = SendState::Start;
        self.psn = lpsn.add(1);
        self.sq.cur = i.wrapping_add(1);
        Ok(Step::Sent)
    }

    /// Sends one RDMA READ request.
    fn send_plain(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        psn: Psn,
        r: &reth::Repr,
    ) -> Result<(), EngineError> {
        let conn = env.conn;
        let n = plain_read::write_request(sink.buffer(), conn.path, conn.remote_verbs_qpn, psn, r)?;
        sink.send(n);
        self.sent(0);
        Ok(())
    }

    /// Restarts the TID READ at `i` at the segment holding `s_psn`.
    /// Kernel: the `TID_OP(READ_RESP)` case of `hfi1_make_rc_req()` and
    /// `hfi1_tid_rdma_restart_req()`.
    fn tid_restart(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        i: u32,
    ) -> Result<Step, EngineError> {
        let psn = self.psn;
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(Step::Stop);
        };
        let first = w.psn;
        let Some(t) = w.tid.as_mut() else {
            return Ok(Step::Stop);
        };
        let found = t
            .req
            .find_flow_ib(psn)
            .map(|(k, r)| (k, psn.delta(r.psns.ib_spsn)));
        let Some((k, delta)) = found else {
            let past_all = t
                .live_slots()
                .filter_map(|k| t.req.flow(k))
                .all(|r| r.psns.ib_lpsn.delta(psn) < 0);
            let next = t.comp_seg + u32::from(t.req.in_flight());
            // Every segment before the last is whole.
            let per_seg = div_round_up_mtu(t.req.seg_len, t.req.pmtu);
            let next_psn = first.add(next.wrapping_mul(per_seg));
            if past_all && next < t.total_segs && psn == next_psn {
                // The PSN is the next segment's, not set up yet: go on
                // with it (an ACK moved the cursor past what it covers).
                // A PSN inside a segment whose TIDs went without its
                // acknowledgement (a NAK in a READ_RESP's AETH, which only
                // a forged packet carries) fails below, as in 6.1.
                t.cur_seg = next;
                t.req.flow_idx = t.req.setup_head;
                t.s_next_psn = psn;
                t.state = ReqState::Active;
                self.s_state = SendState::TidNext;
                return self.tid_segment(env, sink, i);
            }
            // No segment holds the PSN: the request cannot go on.
            self.s_state = SendState::Start;
            self.fail_oldest(env, crate::rc::WcStatus::LocalQpOperation);
            return Ok(Step::Stop);
        };
        let pmtu = t.req.pmtu;
        let index = t.seg(k).index;
        let Some(rec) = t.req.flow_mut(k) else {
            return Ok(Step::Stop);
        };
        let c = Cursor::rewound(&rec.tid_entries, pmtu, u32::try_from(delta).unwrap_or(0))
            .unwrap_or_default();
        rec.pkt = u32::from(c.pkt);
        rec.sent = c.sent;
        rec.tid_idx = u32::try_from(c.tid_idx).unwrap_or(0);
        rec.tid_offset = c.tid_offset;
        t.s_next_psn = rec.psns.ib_lpsn.add(1);
        t.req.flow_idx = k;
        t.cur_seg = index;
        t.state = ReqState::Resend;
        self.send_segment(env, sink, i, true)?;
        self.after_segment(i);
        Ok(Step::Sent)
    }

    /// Sets up (or, after a restart, takes again) the next segment of the
    /// TID READ at `i` and sends its READ_REQ. Kernel:
    /// `hfi1_build_tid_rdma_read_req()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    fn tid_segment(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        i: u32,
    ) -> Result<Step, EngineError> {
        if !self.pass_sync(env, i)? {
            return Ok(Step::Stop);
        }
        let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid.as_ref()) else {
            return Ok(Step::Stop);
        };
        let fresh = t.req.flow_idx == t.req.setup_head;
        if fresh && !self.set_up(env, i)? {
            return Ok(Step::Stop);
        }
        let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid.as_mut()) else {
            return Ok(Step::Stop);
        };
        let k = t.req.flow_idx;
        if !fresh {
            // A segment set up before goes again as itself (its own remote
            // bytes), whatever the cursor says.
            t.cur_seg = t.seg(k).index;
        }
        let next = t.s_next_psn;
        let Some(rec) = t.req.flow_mut(k) else {
            return Err(EngineError::Flow(FlowError::NoFlowRecords));
        };
        rec.pkt = 0;
        rec.tid_idx = 0;
        rec.tid_offset = 0;
        rec.sent = 0;
        if fresh {
            rec.psns.ib_spsn = next;
            rec.psns.ib_lpsn = next.add(rec.npkts.max(1) - 1);
        }
        t.s_next_psn = next.add(rec.npkts.max(1));
        self.send_segment(env, sink, i, !fresh)?;
        self.after_segment(i);
        Ok(Step::Sent)
    }

    /// A request at a SYNC point waits until nothing is in flight, then
    /// the hardware flow is released (a waiting QP may get it; ours takes
    /// one again with the segment) and quarantined RcvArray entries come
    /// back. False while it waits.
    /// Kernel: the `sync_check` of `hfi1_build_tid_rdma_read_req()`.
    fn pass_sync(&mut self, env: &mut Env<'_, '_, P>, i: u32) -> Result<bool, EngineError> {
        let sync = self
            .sq
            .get(i)
            .and_then(|w| w.tid.as_ref())
            .map(|t| t.state == ReqState::Sync);
        match sync {
            None => return Ok(false),
            Some(false) => return Ok(true),
            Some(true) => {}
        }
        if self.segments_set_up() {
            return Ok(false);
        }
        if let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid.as_mut()) {
            t.state = ReqState::Active;
        }
        self.stats.syncs += 1;
        self.clear_flow(env)?;
        Ok(true)
    }

    /// Sets up the segment at the ring's head of the TID READ at `i`: the
    /// SYNC check, the hardware flow, the RcvArray entries. False if it
    /// waits (the QP is queued, or a response or memory will reschedule
    /// it).
    fn set_up(&mut self, env: &mut Env<'_, '_, P>, i: u32) -> Result<bool, EngineError> {
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(false);
        };
        let length = w.length;
        let Some(t) = w.tid.as_mut() else {
            return Ok(false);
        };
        if t.state == ReqState::Resend {
            // The first segment set up again after a restart: the walk
            // over the scatter list resumes at its bytes. Kernel:
            // `restart_sge()` in `hfi1_build_tid_rdma_read_req()`.
            // A segment whose pages an earlier try found (it then waited
            // for RcvArray space) keeps them: the walk resumes after
            // them (6.1 resumes at the segment's start and so walks its
            // pages again for the next segment).
            let found = t
                .req
                .flow(t.req.setup_head)
                .filter(|r| !r.pagesets.is_empty())
                .map_or(0, |r| r.length);
            let at = u64::from(t.cur_seg) * u64::from(t.req.seg_len) + u64::from(found);
            t.req.cursor = sge_cursor_at(&w.sges, at);
            t.state = ReqState::Active;
        }
        let npkts = div_round_up_mtu(t.seg_bytes(length, t.cur_seg), t.req.pmtu);
        if env.locked.flow.psn.wrapping_add(npkts) > MAX_TID_FLOW_PSN - 1 {
            t.state = ReqState::Sync;
            return self.pass_sync(env, i);
        }
        match setup_hw_flow(env.rcd, env.qp, env.locked()) {
            Ok(()) => {}
            Err(FlowError::Again) => {
                self.stats.flow_waits += 1;
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        }
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(false);
        };
        let Some(t) = w.tid.as_mut() else {
            return Ok(false);
        };
        let head = t.req.setup_head;
        match exp_rcv_setup(env.rcd, &mut t.req, env.qp, env.locked(), &w.sges) {
            Ok(()) => {}
            Err(FlowError::Again) => {
                t.state = ReqState::Queued;
                self.stats.tid_waits += 1;
                // Queued for entries the QP itself may hold in quarantine.
                self.drain_quarantine(env, true)?;
                return Ok(false);
            }
            // The ring holds `n_flows` segments: a response reschedules.
            Err(FlowError::Invalid) => return Ok(false),
            Err(FlowError::NoMemory) => {
                self.stats.no_memory += 1;
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        }
        let index = t.cur_seg;
        if let Some(s) = t.seg_mut(head) {
            *s = SegState {
                index,
                counted: false,
            };
        }
        Ok(true)
    }

    /// Builds and sends the READ_REQ of the segment at the flow-ring
    /// cursor of the TID READ at `i`, from its packet cursor; counts it
    /// outstanding. `again` if it was requested before.
    /// Kernel: `hfi1_build_tid_rdma_read_packet()`.
    fn send_segment(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        i: u32,
        again: bool,
    ) -> Result<(), EngineError> {
        let conn = env.conn;
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(());
        };
        let length = w.length;
        let Some(t) = w.tid.as_mut() else {
            return Ok(());
        };
        let k = t.req.flow_idx;
        let len = t.seg_bytes(length, t.cur_seg);
        let rec = t
            .req
            .flow(k)
            .ok_or(EngineError::Flow(FlowError::NoFlowRecords))?;
        let flow = rec.idx.ok_or(EngineError::Flow(FlowError::Invalid))?;
        let entries: ArrayVec<TidEntry, MAX_PAGESETS> = rec
            .tid_entries
            .iter()
            .skip(rec.tid_idx as usize)
            .copied()
            .filter(|e| !e.is_empty())
            .collect();
        let req = ReadReq::build(&ReadReqFlow {
            entries: &entries,
            generation: rec.psns.generation,
            spsn: rec.psns.spsn,
            pkt: u8::try_from(rec.pkt).unwrap_or(u8::MAX),
            sent: rec.sent,
            ib_spsn: rec.psns.ib_spsn,
            flow,
            local_qp: conn.local.qp,
            ctxt: conn.local.qp.to_le_bytes()[0],
            remote_qp: conn.remote.qp,
            remote_jkey: conn.remote.jkey,
            remote_verbs_qp: conn.remote_verbs_qpn,
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            cur_seg: t.cur_seg,
            seg_len: t.req.seg_len,
            len: len.saturating_sub(rec.sent),
        });
        let n = req.write_packet(sink.buffer(), conn.path)?;
        sink.send(n);
        if let Some(rec) = t.req.flow_mut(k) {
            rec.sent = len;
        }
        t.cur_seg += 1;
        t.req.flow_idx = tid_flow::ring_next(k);
        t.ack_pending += 1;
        let newly = t
            .seg_mut(k)
            .is_some_and(|s| !core::mem::replace(&mut s.counted, true));
        if newly {
            self.pending_tid_r_segs += 1;
            self.num_rd_atomic += 1;
        }
        if again {
            self.stats.retransmits += 1;
        } else {
            self.stats.segments += 1;
        }
        self.sent(timeout_shift(conn.remote.max_len, conn.pmtu));
        Ok(())
    }

    /// After a TID READ's segment went out: past its last segment the
    /// READ's PSN range is final and sending moves to the next READ.
    fn after_segment(&mut self, i: u32) {
        let next_started = self.sq.get(i.wrapping_add(1)).is_some_and(|w| w.started);
        let Some(w) = self.sq.get_mut(i) else {
            return;
        };
        let Some(t) = w.tid.as_ref() else {
            return;
        };
        self.psn = t.s_next_psn;
        self.s_state = SendState::TidNext;
        if t.cur_seg >= t.total_segs {
            w.lpsn = t.s_next_psn.sub(1);
            if !next_started {
                self.next_psn = t.s_next_psn;
            }
            self.sq.cur = i.wrapping_add(1);
        }
    }

    /// A request packet went out: `SEND_ONE` becomes `WAIT_ACK`, and once
    /// the step's bookkeeping is done the timer may start
    /// ([`Self::arm_after_send`], with `shift`). Kernel: the end of
    /// `hfi1_make_rc_req()`.
    pub(crate) fn sent(&mut self, shift: u8) {
        self.stats.read_reqs += 1;
        if self.flags.send_one {
            self.flags.send_one = false;
            self.flags.wait_ack = true;
        }
        self.arm_on_send = Some(shift);
    }
}
