// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A TID READ segment (kernel `hfi1_build_tid_rdma_read_req()`): at a SYNC
//! point it waits until every segment sent completed, then the hardware
//! flow is released and taken again (a fresh generation); a new segment
//! gets the flow ([`tid_flow::setup_hw_flow`]) and its RcvArray entries
//! ([`tid_flow::setup_segment`]), either of which may queue the QP, and
//! its IB PSN range (one PSN per response packet); a segment sent before
//! keeps its PSNs. Its READ_REQ goes out with the TID entries.
//!
//! A TID READ restart finds the segment holding `s_psn`, rewinds its
//! cursors and sends its READ_REQ again.

use arrayvec::ArrayVec;
use hfi1_hal::TidEntry;
use hfi1_hal::consts::{MAX_PAGESETS, MAX_TID_FLOW_PSN};
use tid_flow::{FlowError, FlowPlatform, setup_hw_flow, setup_segment};

use super::Step;
use crate::opfn::timeout_shift;
use crate::qualify::div_round_up_mtu;
use crate::rc::{EngineError, PacketSink};
use crate::requester::wqe::{ReqState, SegState};
use crate::requester::{Env, Requester, SendState};
use crate::response_stream::Cursor;
use crate::segment_request::{ReadReq, ReadReqFlow};

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

impl<P: FlowPlatform> Requester<P> {
    /// Restarts the TID READ at `i` at the segment holding `s_psn`.
    /// Kernel: the `TID_OP(READ_RESP)` case of `hfi1_make_rc_req()` and
    /// `hfi1_tid_rdma_restart_req()`.
    pub(super) fn tid_restart(
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
    pub(super) fn tid_segment(
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
        match setup_segment(env.rcd, &mut t.req, env.qp, env.locked(), &w.sges) {
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
}
