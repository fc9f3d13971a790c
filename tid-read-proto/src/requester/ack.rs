// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! RC responses at the requester (kernel `rc_rcv_resp()` and `do_rc_ack()`):
//! ACKs and NAKs here, and in `read_response` a plain READ's responses,
//! which software copies from the eager buffer into the READ's scatter
//! list.
//!
//! Every such packet first passes the kernel's filter: a PSN at or past
//! `s_next_psn` (nothing was asked there) or at or before `s_last_psn` (a
//! duplicate) is dropped, and while a restart after a sequence error is
//! under way (`RVT_R_RDMAR_SEQ`) only `s_last_psn + 1` is taken.
//!
//! `do_rc_ack()` then completes what the PSN finishes (a READ only by its
//! own last response: anything later means the READ's response was lost,
//! and the QP restarts from `s_last_psn + 1`), and by the AETH's class:
//! an ACK drives the retry timer and refills the budgets; an RNR NAK waits
//! its timer and resends from its PSN; a PSN NAK restarts at its PSN; an
//! invalid-request, remote-access or remote-operational NAK completes the
//! oldest READ with its status and errors the QP; other codes are
//! ignored.

use core::ops::ControlFlow;

use hfi1_hal::Psn;
use tid_flow::FlowPlatform;

use super::{Env, Requester, SendState};
use crate::opfn::timeout_shift;
use crate::plain_read::RespKind;
use crate::rc::WcStatus;
use crate::rc::nak::{AethKind, NakAction};
use crate::rc::retry::{retry_ns, rnr_ns};
use crate::wire::aeth;

mod read_response;

/// What an RC ACK or NAK did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum AckVerdict {
    /// Dropped by the filter (stale, ahead, or the QP is not receiving).
    Ignored,
    /// An ACK: taken.
    Acked,
    /// A NAK or RNR NAK that restarts (or waits to restart) the QP.
    Restart,
    /// A NAK whose code is ignored, or a reserved class.
    NotActed,
    /// A fatal NAK (or an exhausted budget): the oldest READ completed
    /// with this status and the QP is in the error state.
    Fatal(WcStatus),
}

/// What a response's opcode is, as `do_rc_ack()` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RespOp {
    /// An RC ACKNOWLEDGE.
    Ack,
    /// A plain READ's response.
    Read(RespKind),
    /// A TID READ_RESP.
    TidReadResp,
    /// A TID WRITE_RESP.
    TidWriteResp,
}

impl<P: FlowPlatform> Requester<P> {
    /// The filter of `rc_rcv_resp()`: true if a response with `psn` is
    /// taken.
    pub(crate) fn takes(&mut self, env: &Env<'_, '_, P>, psn: Psn) -> bool {
        let taken = env.state.receives()
            && psn.delta(self.next_psn) < 0
            && psn.delta(self.last_psn) > 0
            && (!self.flags.rdmar_seq || psn == self.last_psn.add(1))
            && self.sq.acked != self.sq.tail;
        if taken {
            self.flags.rdmar_seq = false;
        } else {
            self.stats.ack_dropped += 1;
        }
        taken
    }

    /// Receives an RC ACK or NAK (`ACKNOWLEDGE` packet with PSN `psn`).
    /// Kernel: `rc_rcv_resp()` → `do_rc_ack()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`); a fatal NAK takes `exp_lock`
    /// through `tid-flow`.
    pub fn receive_ack(
        &mut self,
        env: &mut Env<'_, '_, P>,
        psn: Psn,
        a: &aeth::Repr,
    ) -> AckVerdict {
        let kind = AethKind::of(a);
        if kind.is_nak() {
            self.stats.naks += 1;
        }
        if !self.takes(env, psn) {
            return AckVerdict::Ignored;
        }
        let before = self.stats.errors;
        let acked = self.do_rc_ack(env, a, psn, RespOp::Ack);
        if !env.state.receives() {
            return AckVerdict::Fatal(self.fatal_status(before));
        }
        match (acked, kind) {
            (true, _) => AckVerdict::Acked,
            (false, AethKind::Rnr { .. }) => AckVerdict::Restart,
            (false, AethKind::Nak { code }) if NakAction::of(code) == NakAction::Restart => {
                AckVerdict::Restart
            }
            _ => AckVerdict::NotActed,
        }
    }

    /// The status the QP's oldest failed READ got (for the verdict).
    fn fatal_status(&self, errors_before: u64) -> WcStatus {
        if self.stats.errors == errors_before {
            return WcStatus::Flushed;
        }
        self.sq
            .iter()
            .filter_map(|(_, _, s)| s)
            .find(|s| *s != WcStatus::Success)
            .unwrap_or(WcStatus::Flushed)
    }

    /// Processes an ACK or NAK for IB PSN `psn` carried by a response of
    /// kind `op`. Returns false if the current operation is to be
    /// abandoned (a NAK, or a response for a later READ).
    /// Kernel: `do_rc_ack()`.
    ///
    /// Deviation: a reserved class or an ignored NAK code keeps the retry
    /// timer running (6.1's `bail_stop` stops it; see the module doc).
    ///
    /// Deviation: if this stops a running RNR timer (the send engine was
    /// waiting for it), the send engine is scheduled. 6.1's
    /// `rvt_stop_rc_timers()` clears `RVT_S_WAIT_RNR` and nothing wakes
    /// the send engine: the QP hangs with work queued (only a response
    /// carrying an RNR NAK, which no responder sends, gets there).
    pub(crate) fn do_rc_ack(
        &mut self,
        env: &mut Env<'_, '_, P>,
        a: &aeth::Repr,
        psn: Psn,
        op: RespOp,
    ) -> bool {
        let rnr_waiting = self.rnr_timer.is_armed();
        let acked = self.do_rc_ack_inner(env, a, psn, op);
        if rnr_waiting && !self.rnr_timer.is_armed() {
            env.schedule();
        }
        acked
    }

    /// [`Self::do_rc_ack`] without the RNR wake-up: the requests the PSN
    /// covers complete, then the AETH's class acts.
    fn do_rc_ack_inner(
        &mut self,
        env: &mut Env<'_, '_, P>,
        a: &aeth::Repr,
        psn: Psn,
        op: RespOp,
    ) -> bool {
        let kind = AethKind::of(a);
        let ack_psn = if kind.is_nak() { psn.sub(1) } else { psn };
        if let ControlFlow::Break(acked) = self.complete_covered(env, ack_psn, psn, op) {
            return acked;
        }
        match kind {
            AethKind::Ack => self.take_ack(env, psn, op),
            AethKind::Rnr { timer } => {
                self.rnr_nak(env, psn, timer);
                false
            }
            AethKind::Nak { code } => self.take_nak(env, psn, code),
            AethKind::Reserved => false,
        }
    }

    /// Completes, oldest first, the requests that `ack_psn` covers (a
    /// response of kind `op` with IB PSN `psn`). Breaks with
    /// [`Self::do_rc_ack`]'s answer when the response shows a lost one
    /// (or is a plain READ's ONLY response for the oldest READ); continues
    /// to the AETH's class otherwise. Kernel: the `while` loop of
    /// `do_rc_ack()`.
    fn complete_covered(
        &mut self,
        env: &mut Env<'_, '_, P>,
        ack_psn: Psn,
        psn: Psn,
        op: RespOp,
    ) -> ControlFlow<bool> {
        // Each pass completes the request at `s_acked` or leaves; the
        // queue holds at most `SQ_SIZE`, so the bound only keeps a broken
        // completion from spinning under `s_lock`.
        for _ in 0..crate::rc::SQ_SIZE {
            if self.sq.acked == self.sq.tail {
                break;
            }
            let i = self.sq.acked;
            let Some(w) = self.sq.get(i) else { break };
            let diff = ack_psn.delta(w.lpsn);
            if diff < 0 {
                break;
            }
            if w.tid_write().is_some() {
                // A TID WRITE is acknowledged by its TID ACKs; a PSN past
                // it must follow the last one taken.
                if psn.delta(self.last_psn) != 1 {
                    self.set_restart_qp(env);
                    self.stop_timers();
                    return ControlFlow::Break(false);
                }
                break;
            }
            if w.write.is_some() {
                self.rc_completion(env, i);
                continue;
            }
            let plain = w.tid.is_none();
            if plain && op == RespOp::Read(RespKind::Only) && diff == 0 {
                self.stop_timers();
                return ControlFlow::Break(true);
            }
            let own_last = if plain {
                op == RespOp::Read(RespKind::Last)
            } else {
                op == RespOp::TidReadResp
            };
            if !own_last || diff != 0 {
                self.restart_for_a_later_response(env);
                return ControlFlow::Break(false);
            }
            if plain {
                self.uncount_plain(env, i);
            }
            self.rc_completion(env, i);
        }
        ControlFlow::Continue(())
    }

    /// An ACK for `psn` carried by a response of kind `op`: the timers
    /// (a TID WRITE_RESP's must follow `s_last_psn`), a waiting send
    /// engine woken, the budgets refilled, `s_last_psn` moved. Returns
    /// false if a TID WRITE_RESP out of sequence asked for a restart.
    /// Kernel: the `case 0` of `do_rc_ack()`.
    fn take_ack(&mut self, env: &mut Env<'_, '_, P>, psn: Psn, op: RespOp) -> bool {
        if op != RespOp::TidWriteResp {
            self.ack_timers(env, psn);
        } else if psn != self.last_psn.add(1) {
            self.set_restart_qp(env);
            self.stop_timers();
            return false;
        } else {
            self.write_resp_timers(env, psn);
        }
        if self.flags.wait_ack {
            self.flags.wait_ack = false;
            env.schedule();
        }
        self.budgets.refill();
        self.last_psn = psn;
        true
    }

    /// A NAK for `psn` with `code`: a PSN sequence error restarts there, a
    /// fatal code fails the oldest READ, other codes are ignored. Always
    /// false (the current operation is abandoned). Kernel: the `case 3` of
    /// `do_rc_ack()`.
    fn take_nak(&mut self, env: &mut Env<'_, '_, P>, psn: Psn, code: u8) -> bool {
        if self.sq.acked == self.sq.tail {
            self.stop_timers();
            return false;
        }
        self.last_psn = psn.sub(1);
        match NakAction::of(code) {
            NakAction::Restart => {
                self.restart_rc(env, psn, false);
                env.schedule();
            }
            NakAction::Fatal(status) => self.class_b(env, status),
            NakAction::Ignore => return false,
        }
        self.budgets.refill();
        self.stop_timers();
        false
    }

    /// The retry timer after an ACK: a TID READ at `s_acked` with segments
    /// outstanding pushes it back (with its shift), none stops it; another
    /// READ outstanding pushes it back, and sending skips what the ACK
    /// covers; nothing outstanding stops it. Kernel: the `case 0` of
    /// `do_rc_ack()`.
    fn ack_timers(&mut self, env: &Env<'_, '_, P>, psn: Psn) {
        let conn = env.conn;
        let i = self.sq.acked;
        let pending = self
            .sq
            .get(i)
            .filter(|_| i != self.sq.tail)
            .and_then(|w| w.tid.as_ref())
            .map(|t| t.ack_pending);
        match pending {
            Some(p) => {
                if p > 0 {
                    let shift = timeout_shift(conn.remote.max_len, conn.pmtu);
                    self.retry_timer.arm(retry_ns(conn.timeout, shift));
                } else {
                    self.stop_timers();
                }
                // Deviation: what the ACK covers is not sent again (6.1
                // does this for every operation but a TID READ, which it
                // then re-sends from its start with `comp_seg` reset:
                // the next segment's TIDs with the first one's address).
                if self.psn.delta(psn) <= 0 {
                    self.reset_psn(psn.add(1));
                }
            }
            None if i != self.sq.tail => {
                self.retry_timer.arm(retry_ns(conn.timeout, 0));
                if self.psn.delta(psn) <= 0 {
                    self.reset_psn(psn.add(1));
                }
            }
            None => {
                self.stop_timers();
                if self.psn.delta(psn) <= 0 {
                    self.s_state = SendState::Start;
                    self.psn = psn.add(1);
                }
            }
        }
    }

    /// An RNR NAK for `psn`: wait `timer`'s time, then resend from `psn`
    /// (from `s_last_psn + 1` if the oldest WQE is a TID WRITE); with the
    /// RNR budget spent, the oldest READ completes
    /// [`WcStatus::RnrRetryExceeded`]. Kernel: the `case 1` of `do_rc_ack()`.
    fn rnr_nak(&mut self, env: &mut Env<'_, '_, P>, psn: Psn, timer: u8) {
        self.stats.rnr_naks += 1;
        if self.sq.acked == self.sq.tail || self.rnr_timer.is_armed() {
            self.stop_timers();
            return;
        }
        if !self.budgets.spend_rnr() {
            self.class_b(env, WcStatus::RnrRetryExceeded);
            self.stop_timers();
            return;
        }
        // A TID WRITE's `s_last_psn` moves only with its WRITE_RESPs: a
        // lost one before the NAKed segment is asked for again, which the
        // responder answers as a duplicate with the TIDs it holds.
        let tid_write = self
            .sq
            .get(self.sq.acked)
            .is_some_and(|w| w.tid_write().is_some());
        if tid_write {
            self.reset_psn(self.last_psn.add(1));
        } else {
            self.last_psn = psn.sub(1);
            self.reset_psn(psn);
        }
        self.flags.wait_ack = false;
        self.stop_timers();
        self.rnr_timer.arm(rnr_ns(timer));
    }

    /// A class-B error: every TID READ's TIDs and the flow are released,
    /// the oldest READ completes with `status`, the QP goes to the error
    /// state. Kernel: `class_b` of `do_rc_ack()` with
    /// `hfi1_kern_read_tid_flow_free()`.
    fn class_b(&mut self, env: &mut Env<'_, '_, P>, status: WcStatus) {
        self.fail_oldest(env, status);
    }

    /// A response that shows an earlier READ's response was lost: restart
    /// from `s_last_psn + 1`, once per episode. Kernel: `set_restart_qp()`.
    pub(crate) fn set_restart_qp(&mut self, env: &mut Env<'_, '_, P>) {
        if !self.flags.rdmar_seq {
            self.flags.rdmar_seq = true;
            self.restart_rc(env, self.last_psn.add(1), false);
            env.schedule();
        }
    }

    /// A response (or ACK) for a later operation than the oldest
    /// unfinished READ: that READ's response was lost. Asks for the
    /// restart and stops the timers, as `do_rc_ack()` does
    /// (`set_restart_qp()`, `bail_stop`), unless a restart was already
    /// asked for in this episode.
    ///
    /// Deviation: then the retry timer keeps running. 6.1 stops it
    /// there too, and `set_restart_qp()` does nothing while
    /// `RVT_R_RDMAR_SEQ` is set, so if the restarted READ's responses are
    /// lost (or dropped as behind the flow) once more, nothing arms the
    /// timer again and the QP hangs; with the timer running, its expiry
    /// restarts again and spends the retry budget, which ends the episode
    /// (`tid-harness`'s `fuzz_regressions`,
    /// `requester_rx/a-later-response-during-a-restart-keeps-the-timer`).
    pub(super) fn restart_for_a_later_response(&mut self, env: &mut Env<'_, '_, P>) {
        if self.flags.rdmar_seq {
            return;
        }
        self.set_restart_qp(env);
        self.stop_timers();
    }

    /// A plain READ finished: it is no longer outstanding.
    fn uncount_plain(&mut self, env: &Env<'_, '_, P>, i: u32) {
        if let Some(w) = self.sq.get_mut(i) {
            if core::mem::replace(&mut w.counted, false) {
                self.num_rd_atomic = self.num_rd_atomic.saturating_sub(1);
            }
        }
        if self.flags.wait_rdmar {
            self.flags.wait_rdmar = false;
            self.flags.wait_ack = false;
            env.schedule();
        }
    }

    /// The request at `i` (the oldest) completes successfully: its flow
    /// records are freed, the retry budget refills, `s_last_psn` moves to
    /// its last PSN (not for a TID WRITE) and `s_acked` past it. Kernel:
    /// `do_rc_completion()`.
    ///
    /// Deviation: when `s_cur` moves on with `s_acked` to a request not
    /// started yet, the send state becomes "start the request at
    /// `s_cur`". 6.1 resets it only when a started request follows; a
    /// restart's state (`TID_OP(WRITE_RESP)` for a TID WRITE) is then
    /// kept for the next request, whose WQE 6.1 would use to build a
    /// WRITE_REQ, and here nothing was sent: a READ interlocked behind the
    /// WRITE never went (`tests/write_requester.rs`,
    /// `a_write_completing_under_a_restart_lets_the_read_behind_it_go`).
    pub(crate) fn rc_completion(&mut self, env: &Env<'_, '_, P>, i: u32) {
        let (lpsn, tid_write) = match self.sq.get_mut(i) {
            Some(w) => {
                if let Some(t) = w.tid.as_mut() {
                    if t.req.free_flow_records().is_err() {
                        self.stats.clean_refused += 1;
                    }
                }
                (w.lpsn, w.tid_write().is_some())
            }
            None => return,
        };
        self.sq.complete(i, WcStatus::Success);
        self.budgets.refill_retry();
        // A TID WRITE completes by its TID ACKs, which may come after
        // WRITE_RESPs of later requests moved `s_last_psn` past it.
        if !tid_write {
            self.last_psn = lpsn;
        }
        if self.sq.acked == self.sq.cur {
            self.sq.cur = self.sq.cur.wrapping_add(1);
            self.sq.acked = self.sq.cur;
            if self.sq.acked != self.sq.tail {
                if let Some(next) = self.sq.get(self.sq.cur) {
                    self.s_state = SendState::Start;
                    self.psn = next.psn;
                }
            } else {
                // Deviation: nothing is left to resend, so whatever resend
                // the send state named (a restart backed it up to the
                // request that just completed) is over.
                self.s_state = SendState::Start;
            }
        } else {
            self.sq.acked = self.sq.acked.wrapping_add(1);
        }
        if self.flags.interlock {
            self.flags.interlock = false;
            env.schedule();
        }
    }
}
