// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID READ_RESPs the chip hands to software (kernel
//! `hfi1_rc_rcv_tid_rdma_read_resp()`, `hfi1_handle_kdeth_eflags()`,
//! `handle_read_kdeth_eflags()`).
//!
//! Software normally sees only a segment's last READ_RESP (the chip placed
//! the others and suppressed their headers). The READ is found by the
//! packet's IB PSN (`verbs_psn`) among `s_acked..=s_cur`, the segment is
//! always the READ's oldest unfinished one (`flows[clear_tail]`), and it
//! completes only when the packet's IB PSN is that segment's last: its
//! TIDs are released (into the quarantine, see [`super`]), the ACK goes
//! through the RC completion (`do_rc_ack()`), and the hardware flow is
//! released at a SYNC point or once every TID READ posted has completed.
//!
//! A packet the chip flagged:
//!
//! - a TID error: dropped (nothing was placed);
//! - a stale generation: dropped once its IB PSN passed the window;
//! - a flow sequence error, after the IB PSN window `[s_last_psn, s_psn]`
//!   and the walk that restarts an earlier READ a later packet shows
//!   lost: the oldest segment's expected flow PSN is read from its own
//!   flow's register at the first error of an episode, which asks for one
//!   restart (at that segment's first IB PSN, through the RC restart and
//!   its budget) and drops the packet; afterwards ahead is dropped,
//!   behind is dropped and ends the restart episode, the expected one
//!   advances the expected PSN and, if it is the segment's last, is
//!   processed as above.

use hfi1_hal::platform::FlowTable;
use hfi1_hal::{FlowPsn, Psn};
use tid_flow::FlowPlatform;

use super::ack::RespOp;
use super::wqe::ReqState;
use super::{Env, Requester};
use crate::rc::nak::AethKind;
use crate::rc::{EngineError, sq};
use crate::wire::read_resp;

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

/// What the receive path did with a READ_RESP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespVerdict {
    /// It completed a segment.
    Completed,
    /// It advanced software PSN checking but completed nothing.
    Counted,
    /// Dropped.
    Dropped,
    /// It named no READ: the QP went to the error state (every READ
    /// flushed). The QP must also leave the TID wait queues, which needs
    /// its whole guard: [`crate::qp`]'s entry point does it.
    LostTrack,
}

/// What the KDETH error path made of a packet.
enum Eflags {
    /// Dropped.
    Dropped,
    /// The expected packet of software PSN checking, not the segment's
    /// last: counted.
    Advanced,
    /// The segment's last packet, in sequence for software: process it as
    /// an ordinary last packet.
    Process,
}

impl<P: FlowPlatform> Requester<P> {
    /// Receives a READ_RESP the chip delivered to software: with header
    /// suppression a segment's last packet, or any packet the chip
    /// flagged (`error`). `kpsn` is its BTH (flow) PSN.
    /// Kernel: `hfi1_rc_rcv_tid_rdma_read_resp()` and
    /// `hfi1_handle_kdeth_eflags()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`); takes `exp_lock` through
    /// `tid-flow` (TID release, flow release, the flow register).
    ///
    /// # Errors
    ///
    /// A flow-engine error releasing the segment (a bug the sim's tests
    /// would show).
    pub fn receive_read_resp(
        &mut self,
        env: &mut Env<'_, '_, P>,
        kpsn: FlowPsn,
        hdr: &read_resp::Repr,
        error: Option<KdethError>,
    ) -> Result<RespVerdict, EngineError> {
        if !env.state.receives() {
            self.stats.resp_dropped += 1;
            return Ok(RespVerdict::Dropped);
        }
        if let Some(e) = error {
            self.stats.kdeth_errors += 1;
            match e {
                KdethError::Tid => {
                    self.stats.tid_dropped += 1;
                    return Ok(RespVerdict::Dropped);
                }
                KdethError::FlowSeq | KdethError::FlowGen => {
                    match self.kdeth_eflags(env, e, kpsn, hdr.verbs_psn) {
                        Eflags::Dropped => {
                            self.stats.resp_dropped += 1;
                            return Ok(RespVerdict::Dropped);
                        }
                        Eflags::Advanced => return Ok(RespVerdict::Counted),
                        Eflags::Process => {}
                    }
                }
            }
        }
        self.tid_read_resp(env, kpsn, hdr)
    }

    /// The READ whose PSN range holds `ipsn`, among `s_acked..=s_cur`, if
    /// it is a TID READ. Kernel: `find_tid_request()`.
    fn find_tid_request(&self, ipsn: Psn) -> Option<u32> {
        let head = self.sq.head();
        // `s_cur` may sit at the head (nothing being sent): the walk stops
        // at whichever comes first, and at a slot no longer held.
        sq::indices(self.sq.acked, self.sq.cur.wrapping_add(1))
            .take_while(|&i| i != head)
            .map_while(|i| self.sq.get(i).map(|w| (i, w)))
            .find(|(_, w)| ipsn.within(w.psn, w.lpsn))
            .and_then(|(i, w)| w.tid.is_some().then_some(i))
    }

    /// The ordinary receive of a TID READ_RESP (the chip took it in
    /// sequence, or software PSN checking did).
    fn tid_read_resp(
        &mut self,
        env: &mut Env<'_, '_, P>,
        kpsn: FlowPsn,
        hdr: &read_resp::Repr,
    ) -> Result<RespVerdict, EngineError> {
        let ipsn = hdr.verbs_psn;
        let oldest = self.sq.acked;
        let Some(i) = self.find_tid_request(ipsn) else {
            self.stats.no_request += 1;
            self.error_qp(env);
            return Ok(RespVerdict::LostTrack);
        };
        let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid.as_mut()) else {
            return Ok(RespVerdict::Dropped);
        };
        let tail = t.req.clear_tail;
        let Some(lpsn) = t.oldest().map(|r| r.psns.ib_lpsn) else {
            self.stats.resp_dropped += 1;
            return Ok(RespVerdict::Dropped);
        };
        if ipsn != lpsn {
            // Not the segment's last: only software PSN checking moves.
            let Some(rec) = t.req.flow_mut(tail) else {
                return Ok(RespVerdict::Dropped);
            };
            if kpsn != rec.psns.r_next_psn {
                self.stats.resp_dropped += 1;
                return Ok(RespVerdict::Dropped);
            }
            rec.psns.r_next_psn = FlowPsn::from_raw(kpsn.raw().wrapping_add(1));
            return Ok(RespVerdict::Counted);
        }
        if i != oldest {
            // The last packet of a later READ's segment: an earlier READ's
            // response was lost. Restart, keeping this segment as it is.
            self.restart_for_a_later_response(env);
            self.stats.resp_dropped += 1;
            return Ok(RespVerdict::Dropped);
        }
        if AethKind::of(&hdr.aeth) != AethKind::Ack {
            // Deviation: a last packet whose AETH is not an ACK (no
            // responder sends one: a forged packet) acts as the NAK it
            // carries and the segment keeps its TIDs. 6.1 frees them
            // first; the NAK's restart then finds no segment
            // (`IB_WC_LOC_QP_OP_ERR`), or waits for ever for RcvArray
            // entries a later READ holds.
            self.do_rc_ack(env, &hdr.aeth, ipsn, RespOp::TidReadResp);
            self.stats.resp_dropped += 1;
            return Ok(RespVerdict::Dropped);
        }
        if let Some(rec) = t.req.flow_mut(tail) {
            rec.psns.r_next_psn = FlowPsn::from_raw(kpsn.raw().wrapping_add(1));
        }
        let counted = t
            .seg_mut(tail)
            .is_some_and(|s| core::mem::take(&mut s.counted));
        if counted {
            t.ack_pending = t.ack_pending.saturating_sub(1);
            self.pending_tid_r_segs = self.pending_tid_r_segs.saturating_sub(1);
            self.num_rd_atomic = self.num_rd_atomic.saturating_sub(1);
        }
        if self.flags.wait_rdmar {
            self.flags.wait_rdmar = false;
            self.flags.wait_ack = false;
            env.schedule();
        }
        self.retire_oldest(env, i)?;
        self.stats.segments_done += 1;
        if !self.do_rc_ack(env, &hdr.aeth, ipsn, RespOp::TidReadResp) {
            return Ok(RespVerdict::Completed);
        }
        self.segment_acked(env, i)?;
        env.schedule();
        Ok(RespVerdict::Completed)
    }

    /// A segment of the TID READ at `i` was acknowledged: it counts as
    /// completed; the hardware flow is released at a SYNC point that has
    /// nothing left in flight, or once every TID READ posted completed
    /// (else, if nothing is in flight, the flow moves to a fresh
    /// generation to give the quarantine back).
    /// Kernel: the end of `hfi1_rc_rcv_tid_rdma_read_resp()`.
    fn segment_acked(&mut self, env: &mut Env<'_, '_, P>, i: u32) -> Result<(), EngineError> {
        let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid.as_mut()) else {
            return Ok(());
        };
        t.comp_seg += 1;
        if t.comp_seg >= t.total_segs {
            self.tid_r_comp += 1;
            t.state = ReqState::Complete;
        }
        let sync_done = t.state == ReqState::Sync && t.comp_seg == t.cur_seg;
        if sync_done || self.tid_r_comp == self.tid_r_reqs {
            if sync_done {
                t.state = ReqState::Active;
                self.stats.syncs += 1;
            }
            return self.clear_flow(env);
        }
        self.drain_quarantine(env, false)
    }

    /// A READ_RESP the chip flagged with a flow sequence or generation
    /// error. Kernel: `handle_read_kdeth_eflags()`.
    fn kdeth_eflags(
        &mut self,
        env: &mut Env<'_, '_, P>,
        e: KdethError,
        kpsn: FlowPsn,
        ipsn: Psn,
    ) -> Eflags {
        if ipsn.delta(self.last_psn) < 0 || ipsn.delta(self.psn) > 0 {
            self.stats.psn_dropped += 1;
            return Eflags::Dropped;
        }
        // A packet of a later READ than the oldest unfinished one: that
        // READ's response was lost; restart it (once per episode).
        let ack_psn = ipsn.sub(1);
        let oldest = self.sq.acked;
        if let Some(w) = self.sq.get(oldest).filter(|_| oldest != self.sq.tail) {
            if ack_psn.delta(w.lpsn) >= 0 && !self.flags.rdmar_seq {
                self.flags.rdmar_seq = true;
                if w.tid.is_some() {
                    self.restart_tid_read(env, oldest);
                } else {
                    self.restart_rc(env, self.last_psn.add(1), false);
                    env.schedule();
                }
            }
        }
        if self.sq.acked == self.sq.tail || !env.state.receives() {
            return Eflags::Dropped;
        }
        if e == KdethError::FlowGen {
            self.stats.stale_dropped += 1;
            return Eflags::Dropped;
        }
        self.stats.seq_errors += 1;
        self.sw_psn_check(env, kpsn)
    }

    /// Software PSN checking of the oldest segment of the oldest READ
    /// (the `RHF_RTE_EXPECTED_FLOW_SEQ_ERR` case).
    fn sw_psn_check(&mut self, env: &mut Env<'_, '_, P>, kpsn: FlowPsn) -> Eflags {
        let i = self.sq.acked;
        let sw_psn = self.flags.sw_psn;
        let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid.as_mut()) else {
            return Eflags::Dropped;
        };
        if t.req.in_flight() == 0 {
            return Eflags::Dropped;
        }
        let tail = t.req.clear_tail;
        let Some(rec) = t.req.flow_mut(tail) else {
            return Eflags::Dropped;
        };
        if !sw_psn {
            // First error of the episode: start from where the chip stands
            // on the segment's own flow.
            //
            // Deviation: unless the chip's flow took every packet of the
            // segment already (a segment software did not complete: the
            // last packet of a later READ's segment, kept as it is, or a
            // last packet whose AETH was no ACK). Then the segment keeps
            // what it expects (its last packet). Kernel:
            // `read_r_next_psn()` in
            // `handle_read_kdeth_eflags()` always; 6.1 frees such a
            // segment instead, and its restart fails.
            if let Some(f) = rec.idx {
                let es = env.rcd.exp_lock.lock(env.locked.token);
                let chip = es.chip.read_flow(f).next_psn();
                drop(es);
                let passed = chip.generation() == rec.psns.generation && chip.seq() > rec.psns.lpsn;
                if !passed {
                    rec.psns.r_next_psn = chip;
                }
            }
            self.flags.sw_psn = true;
            self.stats.sw_dropped += 1;
            if !self.flags.rdmar_seq {
                self.restart_tid_read(env, i);
            }
            return Eflags::Dropped;
        }
        let diff = kpsn.as_psn().delta(rec.psns.r_next_psn.as_psn());
        if diff > 0 {
            self.stats.sw_dropped += 1;
            return Eflags::Dropped;
        }
        if diff < 0 {
            self.flags.rdmar_seq = false;
            self.stats.sw_dropped += 1;
            return Eflags::Dropped;
        }
        let last = rec.psns.full_psn(rec.psns.lpsn) == kpsn;
        rec.psns.r_next_psn = FlowPsn::from_raw(kpsn.raw().wrapping_add(1));
        if last {
            self.flags.rdmar_seq = false;
            return Eflags::Process;
        }
        Eflags::Advanced
    }

    /// Restarts the TID READ at `i` from its oldest segment's first IB
    /// PSN (through the RC restart and its budget), marking the episode.
    /// Kernel: `restart_tid_rdma_read_req()`.
    fn restart_tid_read(&mut self, env: &mut Env<'_, '_, P>, i: u32) {
        self.flags.rdmar_seq = true;
        self.stats.seq_restarts += 1;
        let from = self
            .sq
            .get(i)
            .and_then(|w| w.tid.as_ref())
            .and_then(|t| t.oldest())
            .map_or(self.last_psn.add(1), |r| r.psns.ib_spsn);
        self.restart_rc(env, from, false);
        env.schedule();
    }
}
