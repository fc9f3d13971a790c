// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Recovery: the RC restart (`hfi1_restart_rc()` with its retry budget,
//! `reset_psn()`), the retry and RNR timers' expiry, the error state
//! (`rvt_error_qp()` with everything the QP holds released), the flush at
//! destroy, and the hardware flow's release with the RcvArray quarantine.

use hfi1_hal::Psn;
use tid_flow::{
    FlowPlatform, clear_all_segments, clear_hw_flow, regenerate_hw_flow, release_retired,
    retire_segment,
};

use super::{Env, Flags, Requester, SendState};
use crate::rc::{EngineError, WcStatus, sq};

impl<P: FlowPlatform> Requester<P> {
    /// Backs up to resend from IB PSN `psn` (`wait`: send one request,
    /// then wait for an ACK). Spends one retry; with none left the oldest
    /// READ completes [`WcStatus::RetryExceeded`] and the QP goes to the
    /// error state. Kernel: `hfi1_restart_rc()`.
    ///
    /// Deviation: with the budget spent, every TID READ's TIDs and the
    /// flow are released, not only the oldest READ's (see the module doc).
    /// With nothing outstanding (`s_acked == s_tail`) only the wait flags
    /// are cleared: no retry is spent and no single send is asked for
    /// (6.1 spends one, and with none left completes the stale slot at
    /// `s_acked` with an error).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    pub(crate) fn restart_rc(&mut self, env: &mut Env<'_, '_, P>, psn: Psn, wait: bool) {
        if self.sq.acked == self.sq.tail {
            // Nothing to resend and nothing to fail, but the wait flags
            // still go, as in 6.1: a WAIT_ACK set by a resend whose request
            // completed since (a TID ACK does not clear it) would hold back
            // every later post with no timer left running to clear it.
            self.flags.wait_rdmar = false;
            self.flags.wait_ack = false;
            return;
        }
        if !self.budgets.spend_retry() {
            self.fail_oldest(env, WcStatus::RetryExceeded);
            return;
        }
        self.stats.restarts += 1;
        self.flags.wait_rdmar = false;
        self.flags.wait_ack = false;
        if wait {
            self.flags.send_one = true;
        }
        self.reset_psn(psn);
    }

    /// The state to resend from IB PSN `psn`: `s_cur` and `s_state` at the
    /// READ holding it, `s_psn = psn`, the reads outstanding recounted and
    /// the WRITE_RESPs outstanding zeroed.
    /// Kernel: `reset_psn()` with `update_num_rd_atomic()`.
    ///
    /// Deviation: a segment (or plain READ) stays counted outstanding if
    /// it lies before `psn` and was counted; everything from `psn` on is
    /// uncounted and counted again when its request is sent again (6.1
    /// zeroes the counters and adds back an estimate; see the module doc).
    pub(crate) fn reset_psn(&mut self, psn: Psn) {
        let n0 = self.sq.acked;
        self.sq.cur = n0;
        self.uncount_from(psn);
        // Every WRITE_REQ from `psn` on goes again and counts its
        // WRITE_RESPs again.
        self.write.pending_tid_w_resp = 0;
        let Some(first) = self.sq.get(n0) else {
            self.s_state = SendState::Start;
            self.reset_done(psn);
            return;
        };
        if psn.delta(first.psn) <= 0 {
            self.s_state = SendState::Start;
            self.reset_done(psn);
            return;
        }
        let mut at_start = false;
        for n in sq::indices(n0.wrapping_add(1), self.sq.tail) {
            let Some(w) = self.sq.get(n) else { break };
            let diff = psn.delta(w.psn);
            if diff < 0 {
                break;
            }
            self.sq.cur = n;
            if diff == 0 {
                at_start = true;
                break;
            }
        }
        let cur = self.sq.get(self.sq.cur);
        self.s_state = if at_start {
            SendState::Start
        } else if cur.is_some_and(|w| w.tid_write().is_some()) {
            // Kernel: `TID_OP(WRITE_RESP)`, the WRITE_REQ for the rest.
            SendState::TidWriteRest
        } else if cur.is_some_and(|w| w.is_plain_write()) {
            SendState::PlainWrite
        } else if cur.is_some_and(|w| w.tid.is_some()) {
            SendState::TidRestart
        } else {
            SendState::PlainRest
        };
        self.reset_done(psn);
    }

    fn reset_done(&mut self, psn: Psn) {
        self.flags.interlock = false;
        self.psn = psn;
    }

    /// Uncounts every request outstanding from IB PSN `psn` on: plain
    /// READs that start there or later, TID READ segments whose first PSN
    /// is there or later; each TID READ's `ack_pending` is what stays
    /// counted.
    fn uncount_from(&mut self, psn: Psn) {
        let (mut reads, mut segs) = (0u32, 0u32);
        for (_, w) in self.sq.unfinished_mut() {
            let at_or_after = |p: Psn| p.delta(psn) >= 0;
            match w.tid.as_mut() {
                None => {
                    if w.counted && at_or_after(w.psn) {
                        w.counted = false;
                    }
                    reads += u32::from(w.counted);
                }
                Some(t) => {
                    let mut pending = 0;
                    for k in t.live_slots().collect::<arrayvec::ArrayVec<u16, 8>>() {
                        let spsn = t.req.flow(k).map(|r| r.psns.ib_spsn);
                        if let Some(s) = t.seg_mut(k) {
                            if s.counted && spsn.is_none_or(at_or_after) {
                                s.counted = false;
                            }
                            pending += u32::from(s.counted);
                        }
                    }
                    t.ack_pending = pending;
                    segs += pending;
                }
            }
        }
        self.pending_tid_r_segs = segs;
        self.num_rd_atomic = reads + segs;
    }

    /// The retry timer expired: if it was running, restart from
    /// `s_last_psn + 1` sending one request, then wait for an ACK. Returns
    /// whether it was running. Kernel: `rvt_rc_timeout()` →
    /// `hfi1_restart_rc(qp, qp->s_last_psn + 1, 1)`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    ///
    /// Deviation: if the oldest READ is a TID READ whose oldest segment
    /// not completed starts at or before `s_last_psn` (a PSN NAK's
    /// implicit acknowledgement passed it: the responder had its request,
    /// the requester never got its last packet), the restart is from that
    /// segment's first PSN and `s_last_psn` goes back before it. 6.1
    /// restarts from `s_last_psn + 1`: that segment is then re-requested
    /// only by the first sequence error of an episode
    /// (`restart_tid_rdma_read_req()`); once software PSN checking is on,
    /// every later packet is behind it and dropped, and each expiry asks
    /// for the segments after it again, until the budget runs out.
    pub fn timeout(&mut self, env: &mut Env<'_, '_, P>) -> bool {
        if !self.retry_timer.expire() || !env.state.receives() {
            return false;
        }
        self.stats.timeouts += 1;
        let from = self.timeout_psn();
        if from.delta(self.last_psn) <= 0 {
            self.last_psn = from.sub(1);
        }
        self.restart_rc(env, from, true);
        env.schedule();
        true
    }

    /// Where an expiry restarts (see [`Self::timeout`]): `s_last_psn + 1`,
    /// or the first PSN of the oldest TID READ's oldest unfinished segment
    /// if that lies before it.
    fn timeout_psn(&self) -> Psn {
        let next = self.last_psn.add(1);
        self.sq
            .get(self.sq.acked)
            .filter(|_| self.sq.acked != self.sq.tail)
            .and_then(|w| w.tid.as_ref())
            .and_then(|t| t.oldest())
            .map(|r| r.psns.ib_spsn)
            .filter(|s| s.delta(next) < 0)
            .unwrap_or(next)
    }

    /// The RNR timer expired: sending resumes. Returns whether it was
    /// running. Kernel: `rvt_rc_rnr_retry()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    pub fn rnr_timeout(&mut self, env: &mut Env<'_, '_, P>) -> bool {
        if !self.rnr_timer.expire() {
            return false;
        }
        env.schedule();
        true
    }

    /// Stops both timers. Kernel: `rvt_stop_rc_timers()`.
    pub(crate) fn stop_timers(&mut self) {
        self.retry_timer.stop();
        self.rnr_timer.stop();
    }

    /// The oldest READ completes with `status` and the QP goes to the
    /// error state. Kernel: the class-B end of `do_rc_ack()` and
    /// `hfi1_restart_rc()` (`hfi1_trdma_send_complete()` +
    /// `rvt_error_qp()`).
    pub(crate) fn fail_oldest(&mut self, env: &mut Env<'_, '_, P>, status: WcStatus) {
        self.error_qp_with(env, Some(status));
    }

    /// Moves the QP to the error state: timers stopped, waits cleared,
    /// every TID, flow, flow record and DMA mapping released, every READ
    /// not completed completes [`WcStatus::Flushed`]. The QP's TID wait
    /// is unwound by [`crate::qp`] (it needs the whole guard). No-op for a
    /// QP already there except that anything still held is released.
    /// Kernel: `rvt_error_qp()` and the flush of `hfi1_make_rc_req()`,
    /// with the release of `hfi1_kern_read_tid_flow_free()` for every
    /// READ.
    pub(crate) fn error_qp(&mut self, env: &mut Env<'_, '_, P>) {
        self.error_qp_with(env, None);
    }

    /// [`Self::error_qp`], the oldest READ not completed completing with
    /// `first` (if given) instead of flushed.
    fn error_qp_with(&mut self, env: &mut Env<'_, '_, P>, first: Option<WcStatus>) {
        *env.state = crate::rc::QpState::Error;
        self.stop_timers();
        self.flags = Flags::default();
        self.release_everything(env);
        self.write_error();
        *env.locked.flags &=
            !(hfi1_hal::flags::SFlags::WAIT_HALT | hfi1_hal::flags::SFlags::WAIT_TID_RESP);
        let unfinished: arrayvec::ArrayVec<u32, { crate::rc::SQ_SIZE }> =
            self.sq.unfinished_mut().map(|(i, _)| i).collect();
        for (n, i) in unfinished.into_iter().enumerate() {
            let status = match first {
                Some(s) if n == 0 && i == self.sq.acked => s,
                _ => WcStatus::Flushed,
            };
            self.sq.complete(i, status);
            self.stats.errors += 1;
        }
        let head = self.sq.head();
        self.sq.acked = head;
        self.sq.cur = head;
        self.sq.tail = head;
        self.num_rd_atomic = 0;
        self.pending_tid_r_segs = 0;
        self.tid_r_comp = self.tid_r_reqs;
        self.read_copy = None;
        self.s_state = SendState::Start;
    }

    /// Releases the hardware flow first (late packets then fail the
    /// generation check), then every READ's segments and flow records and
    /// the quarantine.
    fn release_everything(&mut self, env: &mut Env<'_, '_, P>) {
        clear_hw_flow(env.rcd, env.qp, env.locked());
        for (_, w) in self.sq.unfinished_mut() {
            if let Some(t) = w.tid.as_mut() {
                clear_all_segments(env.rcd, &mut t.req, env.qp, env.locked());
                if t.req.free_flow_records().is_err() {
                    self.stats.clean_refused += 1;
                }
            }
        }
        self.release_quarantine(env);
    }

    /// Destroys the requester's state: as the error state, and the flow
    /// released even if the QP was there already. Kernel: the requester
    /// part of `rvt_reset_qp()` (`hfi1_qp_kern_exp_rcv_clear_all()`,
    /// `hfi1_kern_clear_hw_flow()`).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    pub fn destroy(&mut self, env: &mut Env<'_, '_, P>) {
        self.error_qp(env);
    }

    /// The hardware flow is released (its generation moves on, its bit is
    /// freed, the flow queue's head woken), software PSN checking ends,
    /// and the quarantined RcvArray entries come back.
    /// Kernel: `hfi1_kern_clear_hw_flow()` + clearing `HFI1_R_TID_SW_PSN`.
    pub(crate) fn clear_flow(&mut self, env: &mut Env<'_, '_, P>) -> Result<(), EngineError> {
        clear_hw_flow(env.rcd, env.qp, env.locked());
        self.flags.sw_psn = false;
        self.release_quarantine(env);
        Ok(())
    }

    /// No segment is set up while the QP keeps its flow (a TID READ it
    /// posted is not finished), entries wait in the quarantine, and a QP
    /// waits for RcvArray space (`waiting`, or someone on the RcvArray
    /// queue): the flow moves to a fresh generation, keeping its slot, and
    /// the entries come back (waking the queue's head). Without this a QP
    /// whose next segment waits for the very entries it, or a QP that
    /// keeps its flow, quarantined would wait for ever; 6.1 frees them at
    /// once, which is the late-copy hole.
    pub(crate) fn drain_quarantine(
        &mut self,
        env: &mut Env<'_, '_, P>,
        waiting: bool,
    ) -> Result<(), EngineError> {
        if self.segments_set_up() || self.quarantine.is_empty() {
            return Ok(());
        }
        let waiters = waiting || {
            let es = env.rcd.exp_lock.lock(env.locked.token);
            es.waiters.len(qp_wait::QueueKind::RcvArray) > 0
        };
        if !waiters {
            return Ok(());
        }
        if regenerate_hw_flow(env.rcd, env.locked()) {
            self.stats.drain_regenerations += 1;
        }
        self.flags.sw_psn = false;
        self.release_quarantine(env);
        Ok(())
    }

    /// True if any TID READ has a segment set up and not completed (after
    /// a restart such a segment is not counted outstanding until it is
    /// requested again, but its flow PSNs and TIDs are still live).
    pub(crate) fn segments_set_up(&self) -> bool {
        self.pending_tid_r_segs != 0
            || self.sq.iter().any(|(_, w, s)| {
                s.is_none() && w.tid.as_ref().is_some_and(|t| t.req.in_flight() > 0)
            })
    }

    /// Gives every quarantined RcvArray entry back. Called only once the
    /// flow left the generation they served.
    pub(crate) fn release_quarantine(&mut self, env: &mut Env<'_, '_, P>) {
        for r in self.quarantine.drain(..) {
            release_retired(env.rcd, env.qp, env.locked(), r);
        }
    }

    /// Releases the oldest segment of the TID READ at `i` at its last
    /// packet: unprogrammed and unmapped now, its RcvArray entries into
    /// the quarantine. Kernel: the `hfi1_kern_exp_rcv_clear()` of
    /// `hfi1_rc_rcv_tid_rdma_read_resp()` (which frees them at once).
    pub(crate) fn retire_oldest(
        &mut self,
        env: &mut Env<'_, '_, P>,
        i: u32,
    ) -> Result<(), EngineError> {
        let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid.as_mut()) else {
            return Ok(());
        };
        let r = retire_segment(env.rcd, &mut t.req, env.locked())?;
        if r.is_empty() {
            return Ok(());
        }
        if self.quarantine.try_reserve(1).is_err() {
            // No memory to keep it: free it now, as 6.1 does.
            release_retired(env.rcd, env.qp, env.locked(), r);
            return Ok(());
        }
        self.quarantine.push(r);
        Ok(())
    }
}
