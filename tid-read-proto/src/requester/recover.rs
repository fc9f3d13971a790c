// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Recovery: restarts from the oldest segment in flight (after a flow
//! sequence error, the retry timer or a PSN NAK), releasing the TIDs of
//! completed segments once the flow has left their generation, and
//! flushing the QP.
//!
//! A restart (SPEC §5 "Restart") rewinds the oldest segment in flight and
//! every later one to their start, with the same flow PSNs and
//! generation, and their READ_REQs go out again; the responder streams
//! them again. Completed segments keep their TIDs until the flow leaves
//! their generation: the chip places sequence-error packets (the TID is
//! valid), so a late copy must never find a TID that was handed to
//! another request.

use hfi1_hal::FlowPsn;
use hfi1_hal::services::Scheduler;
use tid_flow::{
    FlowError, FlowPlatform, QpFlowState, QpLocked, RcvCtxt, clear_hw_flow, exp_rcv_clear,
    exp_rcv_clear_all, setup_hw_flow,
};

use super::{Reborrow, Requester, WorkRequest, full_mask, ring_slots};
use crate::rc::{Completion, EngineError, WcStatus};

impl<P: FlowPlatform> WorkRequest<P> {
    /// The oldest ring slot if its segment completed and may give its
    /// TIDs back: the QP's flow (generation `now`) no longer runs the
    /// generation the segment was received in.
    fn releasable(&self, now: Option<hfi1_hal::Generation>) -> Option<u16> {
        let k = self.tid.clear_tail;
        if k == self.tid.flow_idx || !self.seg(k).held {
            return None;
        }
        let seg_gen = self.tid.flow(k).map(|r| r.psns.generation);
        (now.is_none() || now != seg_gen).then_some(k)
    }
}

impl<P: FlowPlatform> Requester<P> {
    /// The retry timer expired: if segments are outstanding, restart from
    /// the oldest one ([`Requester::send_requests`] runs the restart) and
    /// schedule the send engine. Returns whether a restart was asked for.
    /// Kernel: `hfi1_rc_timeout()` → `hfi1_restart_rc()` for a TID READ.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`&mut self`).
    pub fn timeout(&mut self, rcd: &RcvCtxt<P>, qp: &P::Ref) -> bool {
        if self.in_flight == 0 {
            return false;
        }
        self.stats.timeouts += 1;
        self.restart_pending = true;
        rcd.sched.schedule_send(qp);
        true
    }

    /// Releases the TIDs of completed segments once the QP's flow has left
    /// the generation they were received in, oldest first, and retires the
    /// requests that are then done. Kernel: the `hfi1_kern_exp_rcv_clear()`
    /// of `hfi1_rc_rcv_tid_rdma_read_resp()`, moved later.
    ///
    /// Why later: the chip places a packet whose sequence is behind its
    /// flow (a duplicate, a stale copy, a straggler) as long as the TID is
    /// valid. Once a segment's TIDs are handed to another request such a
    /// packet of the old segment would overwrite the new owner's data.
    /// While the flow keeps the generation the old segment was received
    /// in, its TIDs stay with it; after the flow moves on, any late packet
    /// of it fails the generation check and is dropped unplaced. The flow
    /// moves on whenever nothing is in flight (and at SYNC points and
    /// restarts), so held TIDs come back as soon as the QP's pipeline
    /// drains.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`locked`, `&mut self`); takes `exp_lock`
    /// through `tid-flow`.
    pub(super) fn release_held(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        mut locked: QpLocked<'_, '_>,
    ) -> Result<(), EngineError> {
        let mut first_err = None;
        for (_, w) in self.sq.iter_mut() {
            loop {
                let now = locked.flow.index.map(|_| locked.flow.generation);
                let Some(k) = w.releasable(now) else { break };
                if let Some(s) = w.segs.get_mut(usize::from(k)) {
                    s.held = false;
                }
                if let Err(e) = exp_rcv_clear(rcd, &mut w.tid, qp, locked.reborrow()) {
                    first_err.get_or_insert(e);
                    break;
                }
            }
        }
        self.retire();
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Restarts from the oldest segment in flight (SPEC §5 "Restart"): its
    /// IB PSN is the restart point; that segment's and every later
    /// segment's packet and offset cursors are rewound to their start and
    /// the send queue is rewound so their READ_REQs go out again (the
    /// responder treats each as a duplicate and streams it again).
    /// Kernel: `restart_tid_rdma_read_req()` → `hfi1_restart_rc()` →
    /// `hfi1_tid_rdma_restart_req()`.
    ///
    /// The segments keep their flow PSNs and generation, as in the driver:
    /// the chip's flow register still waits for the first packet it
    /// missed, so the repeated stream brings it back in sequence, and what
    /// comes before is behind it (dropped by software PSN checking). Only
    /// if the QP no longer holds the flow its segments were set up in (it
    /// cannot while segments are in flight; kept as a fallback) are they
    /// re-armed in a fresh generation. Returns false if that fallback had
    /// to wait for a hardware flow (the QP is queued and the restart stays
    /// pending).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`locked`, `&mut self`); takes `exp_lock`
    /// through `tid-flow`.
    pub(super) fn restart(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        mut locked: QpLocked<'_, '_>,
    ) -> Result<bool, EngineError> {
        if self.in_flight == 0 {
            // Everything completed since the restart was asked for.
            self.restart_pending = false;
            return Ok(true);
        }
        let same_gen = self.in_flow_generation(locked.flow);
        if !same_gen && !self.move_to_fresh_generation(rcd, qp, locked.reborrow())? {
            return Ok(false);
        }
        if let Some(first) = self.rewind(locked.flow, same_gen) {
            // The send queue resumes at the oldest request with a segment
            // to send again (never later than where it stood).
            self.sq.rewind_to(first);
        }
        self.restart_pending = false;
        if !same_gen {
            // The flow left the generation of the error episode: its
            // packets now fail the generation check, and a new sequence
            // error is a new episode.
            self.rdmar_seq = false;
            self.sw_psn = None;
        }
        self.stats.restarts += 1;
        Ok(true)
    }

    /// True if every segment in flight was set up in the QP's flow as it
    /// stands (its index and generation).
    fn in_flow_generation(&self, flow: &QpFlowState) -> bool {
        flow.index.is_some()
            && self.sq.iter().all(|(_, w)| {
                ring_slots(w.first_live(), w.tid.flow_idx).all(|k| {
                    w.tid.flow(k).is_some_and(|r| {
                        r.idx == flow.index && r.psns.generation == flow.generation
                    })
                })
            })
    }

    /// The restart's fallback: the flow moves to a fresh generation,
    /// keeping its slot if it has one (a QP holding TIDs must not wait for
    /// a flow held by QPs waiting for its TIDs), and held TIDs come back.
    /// False if a flow had to be waited for.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    fn move_to_fresh_generation(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        mut locked: QpLocked<'_, '_>,
    ) -> Result<bool, EngineError> {
        if !tid_flow::regenerate_hw_flow(rcd, locked.reborrow()) {
            match setup_hw_flow(rcd, qp, locked.reborrow()) {
                Ok(()) => {}
                Err(FlowError::Again) => {
                    self.stats.flow_waits += 1;
                    return Ok(false);
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.release_held(rcd, qp, locked)?;
        self.sync_pending = false;
        Ok(true)
    }

    /// Rewinds every segment in flight to its start (re-armed in `flow`'s
    /// generation unless `same_gen`) and each request's send cursor to its
    /// oldest one. Returns the send-queue position of the oldest request
    /// with a segment to send again.
    fn rewind(&mut self, flow: &mut QpFlowState, same_gen: bool) -> Option<u32> {
        let mut first = None;
        for (i, w) in self.sq.iter_mut() {
            let live = w.first_live();
            let sent = tid_flow::ring_count(w.tid.flow_idx, live);
            for k in ring_slots(live, w.tid.flow_idx) {
                let Some(rec) = w.tid.flow_mut(k) else {
                    continue;
                };
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
                // What the chip placed stays placed: the TIDs and the
                // bytes are the same. A segment not yet complete now waits
                // for the end of its repeated stream.
                let full = full_mask(rec.npkts);
                if let Some(s) = w.segs.get_mut(usize::from(k)) {
                    if s.placed & full != full {
                        s.tail_seen = false;
                    }
                }
            }
            if sent > 0 {
                w.tid.flow_idx = live;
                w.cur_seg = w.cur_seg.saturating_sub(u32::from(sent));
                self.in_flight = self.in_flight.saturating_sub(u32::from(sent));
                first.get_or_insert(i);
            }
        }
        first
    }

    /// Tears every request down: its segments are cleared and its flow
    /// records freed, each completes (`first` for the oldest, `rest` for
    /// the others), and the hardware flow is released. The QP's TID wait
    /// is not unwound here: that needs the whole guard ([`crate::qp::flush`]
    /// does both).
    /// Kernel: `hfi1_qp_kern_exp_rcv_clear_all()` +
    /// `hfi1_kern_clear_hw_flow()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`locked`, `&mut self`); takes `exp_lock`
    /// through `tid-flow`.
    pub fn flush_requests(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        mut locked: QpLocked<'_, '_>,
        first: WcStatus,
        rest: WcStatus,
    ) {
        let completions = &mut self.completions;
        self.sq.drain(|oldest, mut w| {
            exp_rcv_clear_all(rcd, &mut w.tid, qp, locked.reborrow());
            let _ = w.tid.clean_swqe();
            let _ = completions.try_push(Completion {
                wr_id: w.wr_id,
                length: w.length,
                status: if oldest { first } else { rest },
            });
        });
        self.in_flight = 0;
        self.window.clear();
        self.reads_done = self.reads_started;
        self.sync_pending = false;
        self.restart_pending = false;
        self.sw_psn = None;
        self.rdmar_seq = false;
        self.last_psn = self.next_psn.sub(1);
        clear_hw_flow(rcd, qp, locked);
    }
}
