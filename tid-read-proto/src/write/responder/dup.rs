// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A TID WRITE_REQ behind `r_psn`: the requester's go-back-N resend (a
//! WRITE_RESP was lost, or an RNR NAK's retry started earlier) or a copy
//! the fabric made. The entry it repeats sends its WRITE_RESPs again from
//! the segment the PSN names, with the same TIDs and flow PSNs; nothing is
//! allocated again. Kernel: the TID WRITE branch of `tid_rdma_rcv_error()`.

use hfi1_hal::Psn;
use hfi1_hal::consts::MAX_FLOWS;
use hfi1_hal::flags::TidFlags;
use tid_flow::ring_count;

use super::{AllocCtx, Env, RecvPath, RnrNakState, WriteEntry};
use crate::responder::Responder;
use crate::write::{TidReqState, WriteRegions};

use super::WriteReqVerdict;

/// `i + d` on the flow ring, `d` possibly negative. Kernel: `CIRC_ADD()`.
fn ring_add(i: u16, d: i32) -> u16 {
    (i32::from(i).wrapping_add(d) & (MAX_FLOWS as i32 - 1)) as u16
}

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// A WRITE_REQ with PSN `psn` behind `r_psn`. Kernel:
    /// `tid_rdma_rcv_error()` (the `diff < 0` path, TID WRITE entry).
    ///
    /// # Locking
    ///
    /// `r_lock` (`intr`) and the QP's `s_lock` held; takes `exp_lock`
    /// through `tid-flow` if it ends an RNR episode.
    pub(crate) fn duplicate_write_req(
        &mut self,
        intr: &RecvPath,
        psn: Psn,
        wmrs: &impl WriteRegions,
    ) -> WriteReqVerdict {
        let (found, prev, old_req) = self.rsp.find_prev_entry(psn);
        let is_write = |i: usize| self.rsp.is_write(i);
        let Some(i) = found.filter(|&i| is_write(i)) else {
            // No entry, or one that is no TID WRITE (6.1 would treat the
            // packet by that entry's opcode).
            self.w.stats.duplicates_dropped += 1;
            return WriteReqVerdict::Dropped;
        };
        let Some(e) = self.w.entries.get_mut(i) else {
            return WriteReqVerdict::Dropped;
        };
        let mut schedule = false;
        match e.state {
            TidReqState::Resend => e.state = TidReqState::ResendActive,
            TidReqState::InitResend => {
                e.state = TidReqState::Init;
                schedule = true;
            }
            _ => {}
        }
        self.w.stats.duplicates += 1;
        // Not answered yet: nothing to send again. The later requests wait
        // for their own resend (the requester's go-back-N).
        let unanswered = matches!(e.state, TidReqState::Init)
            || (e.state == TidReqState::Sync && e.cur_seg == 0);
        if old_req || unanswered {
            self.later_wait_for_resend(prev);
            if !schedule {
                return WriteReqVerdict::Duplicate;
            }
        }
        let Some(e) = self.w.entries.get_mut(i) else {
            return WriteReqVerdict::Dropped;
        };
        if e.req.clear_tail != e.req.setup_head {
            Self::rewind_entry(e, &mut self.w.pending_tid_w_segs, psn);
            self.later_resend(prev);
            self.w.flags.remove(TidFlags::R_TID_WAIT_INTERLCK);
            if old_req && self.skips_unanswered(prev) {
                self.w.stats.send_pointer_skips += 1;
            }
            self.rsp.rewind_to(prev);
        }
        let rnr = self.w.rnr_nak_state != RnrNakState::Init;
        self.end_rnr_episode(intr, wmrs);
        if !rnr || self.w.rnr_nak_state == RnrNakState::Init {
            self.rsp.nak_state = None;
        }
        WriteReqVerdict::Duplicate
    }

    /// Whether moving the send pointer to `prev`, an entry at or after it
    /// (a copy of a request already scheduled), passes an entry whose
    /// responses were not all sent.
    ///
    /// 6.1 moves the pointer there all the same (the rewind at the end of
    /// `tid_rdma_rcv_error()` runs for a scheduled TID WRITE whose state
    /// was `INIT_RESEND`), so the entries passed get no WRITE_RESP: the
    /// requester's resend of the first of them finds it unanswered and
    /// waits, and its retries run out. Kept as the kernel runs it;
    /// counted so a test can tell this stop from a lost request.
    fn skips_unanswered(&self, prev: usize) -> bool {
        Responder::slots(self.rsp.tail, prev).any(|j| self.rsp.ack.get(j).is_some_and(|a| !a.sent))
    }

    /// Runs `f` on every TID WRITE entry after `prev` up to the head,
    /// with the count of WRITE_RESPs waiting for data.
    fn later_writes(&mut self, prev: usize, mut f: impl FnMut(&mut WriteEntry<P>, &mut u32)) {
        for j in Responder::slots(Responder::next(prev), self.rsp.head) {
            let w = &mut *self.w;
            if let Some(e) = w.entries.get_mut(j).filter(|_| self.rsp.is_write(j)) {
                f(e, &mut w.pending_tid_w_segs);
            }
        }
    }

    /// Every later TID WRITE entry not answered yet waits for its own
    /// resent request (`INIT_RESEND`).
    fn later_wait_for_resend(&mut self, prev: usize) {
        self.later_writes(prev, |e, _| {
            if e.state == TidReqState::Init {
                e.state = TidReqState::InitResend;
            }
        });
    }

    /// The entry's WRITE_RESPs sent for segments whose data has not come
    /// are sent again from the segment `psn` names.
    ///
    /// Deviation from 6.1: the segment named is kept within the ones
    /// allocated and not yet received, and the resend position
    /// (`flow_idx`) and the count of responses sent (`cur_seg`) move
    /// together. 6.1 moves `flow_idx` by the PSN's distance alone and
    /// `cur_seg` only when a segment is left to resend: a second copy
    /// naming the first segment not allocated (the resend of an RNR-NAKed
    /// WRITE_REQ, while a first copy's resend is under way) leaves
    /// `flow_idx` at the end and `cur_seg` behind it, and when the RNR
    /// episode ends the first leg builds WRITE_RESPs from flow records of
    /// segments long received, with their stale flow PSNs and TIDs; the
    /// requester takes the first one it had not seen as the new
    /// segment's, its data goes nowhere, the requester counts it
    /// acknowledged, and both QPs wait forever
    /// (`tests/write_responder.rs`:
    /// `a_second_copy_past_the_allocated_segments_ends_the_resend`). A
    /// copy naming a segment already received resends from the oldest
    /// one not received instead of from flow records behind it.
    fn rewind_entry(e: &mut WriteEntry<P>, pending: &mut u32, psn: Psn) {
        let r = &mut e.req;
        let out = ring_count(r.flow_idx, r.clear_tail);
        if out == 0 {
            return;
        }
        let Some(base) = r.flow(r.clear_tail).map(|f| f.psns.resp_ib_psn) else {
            return;
        };
        let unreceived = ring_count(r.setup_head, r.clear_tail);
        let d = psn.delta(base).clamp(0, i32::from(unreceived));
        *pending = pending.saturating_sub(u32::from(out));
        r.flow_idx = ring_add(r.clear_tail, d);
        *pending = pending.saturating_add_signed(d);
        if ring_count(r.setup_head, r.flow_idx) != 0 {
            e.cur_seg = e.comp_seg.saturating_add(d.unsigned_abs());
            e.state = TidReqState::ResendActive;
        } else {
            // Every allocated segment's WRITE_RESP counts as sent.
            e.cur_seg = e.alloc_seg;
            if matches!(e.state, TidReqState::Resend | TidReqState::ResendActive) {
                e.state = TidReqState::Active;
            }
        }
    }

    /// Every later TID WRITE entry with responses outstanding sends them
    /// again from its first segment without data (`RESEND`); the ones not
    /// answered yet wait for their own resend.
    fn later_resend(&mut self, prev: usize) {
        self.later_writes(prev, |e, pending| match e.state {
            TidReqState::Init => e.state = TidReqState::InitResend,
            TidReqState::InitResend => {}
            _ if e.cur_seg == e.comp_seg => {}
            _ => {
                let out = ring_count(e.req.flow_idx, e.req.clear_tail);
                *pending = pending.saturating_sub(u32::from(out));
                e.req.flow_idx = e.req.clear_tail;
                e.state = TidReqState::Resend;
                e.cur_seg = e.comp_seg;
            }
        });
    }

    /// A retry PSN earlier than an RNR NAK's ends the RNR episode: the
    /// responder allocates again and `r_psn` moves past the newest entry.
    ///
    /// Deviation: the episode's NAK state is cleared before the
    /// allocation, so a segment that still cannot have TIDs is RNR-NAKed
    /// again (`r_psn` back at it). 6.1 clears `r_nak_state` only after
    /// `hfi1_tid_write_alloc_resources()`, which then sends no RNR NAK
    /// while `r_psn` stays past the unallocated segments: the
    /// requester's resend of them is a duplicate that gets no answer
    /// until TIDs come free, and each resend spends a retry
    /// (`tid-sim/tests/write_faults.rs`:
    /// `a_duplicate_ending_an_rnr_episode_rnr_naks_again_while_tids_are_short`).
    fn end_rnr_episode(&mut self, intr: &RecvPath, wmrs: &impl WriteRegions) {
        if self.w.rnr_nak_state == RnrNakState::Init {
            return;
        }
        self.w.rnr_nak = None;
        self.w.rnr_nak_state = RnrNakState::Init;
        if let Some(a) = self.rsp.ack.get(Responder::prev(self.rsp.head)) {
            self.rsp.expected_psn = a.lpsn.add(1);
        }
        self.rsp.nak_state = None;
        self.alloc_resources(wmrs, AllocCtx::Intr(intr));
    }
}
