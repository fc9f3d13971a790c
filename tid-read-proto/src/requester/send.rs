// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's send engine. Per segment (kernel
//! `hfi1_build_tid_rdma_read_req()`):
//!
//! 1. **SYNC check.** If the QP's flow has no room left in its generation
//!    for the segment (`flow PSN + packets > 2047`), the request is at a
//!    SYNC point: it waits until every segment sent completed, then the
//!    hardware flow moves to a fresh generation.
//! 2. **Flow.** [`tid_flow::setup_hw_flow`]; if it has to wait, the QP is
//!    queued on the flow queue and woken later.
//! 3. **Segment.** [`tid_flow::exp_rcv_setup`]: pages, page sets, DMA
//!    mapping, RcvArray entries; waiting queues the QP on the RcvArray
//!    queue; a full flow ring (all `n_flows` segments in flight) just
//!    waits for a response to reschedule the QP.
//! 4. **READ_REQ.** The segment gets its IB PSN range (one PSN per
//!    response packet) and its READ_REQ goes out with the TID entries.

use arrayvec::ArrayVec;
use hfi1_hal::TidEntry;
use hfi1_hal::consts::{MAX_PAGESETS, MAX_TID_FLOW_PSN, PAGE_SIZE};
use hfi1_hal::services::AllocContext;
use tid_flow::{FlowError, FlowPlatform, QpLocked, RcvCtxt, clear_hw_flow, setup_hw_flow};

use super::{Reborrow, Requester, Segment};
use crate::rc::{Connection, EngineError, MAX_RD_ATOMIC, PacketSink};
use crate::read_req::{ReadReq, ReadReqFlow};

/// What setting up the next segment came to.
enum Setup {
    /// Set up: its READ_REQ can go.
    Ready,
    /// It has to wait (for a flow, RcvArray space, memory, a free ring
    /// slot or the SYNC point); the QP is queued or rescheduled.
    Wait,
    /// A SYNC point passed: look at the send queue again.
    Again,
}

impl<P: FlowPlatform> Requester<P> {
    /// The send engine with the QP's `s_lock` held: a pending restart
    /// first, then the READ_REQ of every segment that can go now.
    /// Kernel: `hfi1_make_rc_req()` → `hfi1_build_tid_rdma_read_req()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`locked`, `&mut self`); takes `exp_lock`
    /// through `tid-flow`.
    ///
    /// # Errors
    ///
    /// A flow-engine error other than "wait" or a packet that could not be
    /// built: the QP stops sending (a bug the sim's tests would show).
    pub fn send_requests(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        mut locked: QpLocked<'_, '_>,
        conn: &Connection,
        sink: &mut impl PacketSink,
    ) -> Result<(), EngineError> {
        if self.restart_pending && !self.restart(rcd, qp, locked.reborrow())? {
            return Ok(());
        }
        self.release_held(rcd, qp, locked.reborrow())?;
        let limit = conn.max_rd_atomic.min(MAX_RD_ATOMIC);
        while self.sq.cur != self.sq.tail {
            let i = self.sq.cur;
            let Some(w) = self.sq.get(i) else {
                break;
            };
            if w.cur_seg >= w.total_segs {
                self.sq.cur = i.wrapping_add(1);
                continue;
            }
            if self.in_flight >= limit {
                break;
            }
            let fresh = w.tid.flow_idx == w.tid.setup_head;
            if fresh {
                if self.window.len() >= limit as usize {
                    break;
                }
                match self.set_up_segment(rcd, qp, locked.reborrow(), i)? {
                    Setup::Ready => {}
                    Setup::Wait => break,
                    Setup::Again => continue,
                }
            }
            self.send_read_req(i, conn, fresh, sink)?;
        }
        Ok(())
    }

    /// Sets up the next segment of the READ at queue position `i` (steps
    /// 1 to 3 of the module doc) and gives it its IB PSNs.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    fn set_up_segment(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        mut locked: QpLocked<'_, '_>,
        i: u32,
    ) -> Result<Setup, EngineError> {
        let Some(w) = self.sq.get(i) else {
            return Ok(Setup::Wait);
        };
        let worst = w.seg_bytes(w.cur_seg).div_ceil(PAGE_SIZE);
        let flow = &locked.flow;
        if flow.index.is_some() && flow.psn.wrapping_add(worst) > MAX_TID_FLOW_PSN - 1 {
            self.sync_pending = true;
        }
        if self.sync_pending {
            return self.pass_sync_point(rcd, qp, locked);
        }
        match setup_hw_flow(rcd, qp, locked.reborrow()) {
            Ok(()) => {}
            Err(FlowError::Again) => {
                self.stats.flow_waits += 1;
                return Ok(Setup::Wait);
            }
            Err(e) => return Err(e.into()),
        }
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(Setup::Wait);
        };
        if let Err(e) = w.tid.alloc_flows(&rcd.mem, AllocContext::Atomic) {
            self.stats.no_memory += 1;
            return Err(e.into());
        }
        let head = w.tid.setup_head;
        match tid_flow::exp_rcv_setup(rcd, &mut w.tid, qp, locked, &w.sges) {
            Ok(()) => {}
            Err(FlowError::Again) => {
                self.stats.tid_waits += 1;
                return Ok(Setup::Wait);
            }
            // Ring full: a response will reschedule the QP.
            Err(FlowError::Invalid) => return Ok(Setup::Wait),
            Err(FlowError::NoMemory) => {
                self.stats.no_memory += 1;
                return Ok(Setup::Wait);
            }
            Err(e) => return Err(e.into()),
        }
        if !w.started {
            w.started = true;
            self.reads_started += 1;
            self.stats.requests += 1;
        }
        if let Some(s) = w.segs.get_mut(usize::from(head)) {
            *s = Segment::default();
        }
        let Some(rec) = w.tid.flow_mut(head) else {
            return Err(EngineError::Flow(FlowError::NoFlowRecords));
        };
        let npkts = rec.npkts.max(1);
        rec.psns.ib_spsn = self.next_psn;
        rec.psns.ib_lpsn = self.next_psn.add(npkts - 1);
        self.next_psn = self.next_psn.add(npkts);
        Ok(Setup::Ready)
    }

    /// A SYNC point: once nothing is in flight, the flow moves to a fresh
    /// generation (keeping its slot: the segment is about to need it) and
    /// the TIDs held in the old one come back.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    fn pass_sync_point(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        mut locked: QpLocked<'_, '_>,
    ) -> Result<Setup, EngineError> {
        if self.in_flight > 0 {
            return Ok(Setup::Wait);
        }
        if !tid_flow::regenerate_hw_flow(rcd, locked.reborrow()) {
            clear_hw_flow(rcd, qp, locked.reborrow());
        }
        self.sync_pending = false;
        self.stats.syncs += 1;
        self.release_held(rcd, qp, locked)?;
        // The queue may have moved (a request retired).
        Ok(Setup::Again)
    }

    /// Builds and sends the READ_REQ of the segment at the flow-ring
    /// cursor of the READ at queue position `i`; `fresh` if it is sent for
    /// the first time (else a restart sends it again).
    /// Kernel: `hfi1_build_tid_rdma_read_packet()` and its caller's
    /// bookkeeping.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`&mut self`).
    fn send_read_req(
        &mut self,
        i: u32,
        conn: &Connection,
        fresh: bool,
        sink: &mut impl PacketSink,
    ) -> Result<(), EngineError> {
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(());
        };
        let idx = w.tid.flow_idx;
        let rec = w
            .tid
            .flow(idx)
            .ok_or(EngineError::Flow(FlowError::NoFlowRecords))?;
        let flow = rec.idx.ok_or(EngineError::Flow(FlowError::Invalid))?;
        let entries: ArrayVec<TidEntry, MAX_PAGESETS> = rec
            .tid_entries
            .iter()
            .copied()
            .filter(|e| !e.is_empty())
            .collect();
        let req = ReadReq::build(&ReadReqFlow {
            entries: &entries,
            generation: rec.psns.generation,
            spsn: rec.psns.spsn,
            pkt: 0,
            sent: 0,
            ib_spsn: rec.psns.ib_spsn,
            flow,
            local_qp: conn.local.qp,
            ctxt: conn.local.qp.to_le_bytes()[0],
            remote_qp: conn.remote.qp,
            remote_jkey: conn.remote.jkey,
            remote_verbs_qp: conn.remote_verbs_qpn,
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            cur_seg: w.cur_seg,
            seg_len: w.tid.seg_len,
            len: rec.length,
        });
        let lpsn = rec.psns.ib_lpsn;
        let n = req.write_packet(sink.buffer(), conn.path)?;
        sink.send(n);
        self.stats.read_reqs += 1;
        if fresh {
            self.stats.segments += 1;
            // Room was checked before anything was set up.
            self.window.push(lpsn);
        } else {
            self.stats.retransmits += 1;
        }
        w.tid.flow_idx = tid_flow::ring_next(idx);
        w.cur_seg += 1;
        self.in_flight += 1;
        if w.cur_seg >= w.total_segs {
            self.sq.cur = i.wrapping_add(1);
        }
        Ok(())
    }
}
