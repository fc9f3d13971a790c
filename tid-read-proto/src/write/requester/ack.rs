// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID ACKs at the requester (kernel `hfi1_rc_rcv_tid_rdma_ack()`) and
//! the TID retry timer (`hfi1_tid_retry_timeout()`).
//!
//! An ACK covers every sent segment whose last flow PSN it reaches: each
//! moves `acked_tail`, and a request whose segments are all acknowledged
//! completes (`do_rc_completion()`, with the WRITE's byte count), the
//! walk going on into the next TID WRITE. An ACK then re-arms the TID
//! retry timer while sent segments are unacknowledged, else stops it, and
//! schedules the first leg (the interlock may have held a WQE). A NAK
//! acknowledges everything before its PSN; only the PSN-sequence code
//! acts: inside the oldest unacknowledged segment it rewinds the second
//! leg to resend from that packet. Other codes are ignored, as in 6.1.
//! The TID retry timer sends a RESYNC (the first leg halted); its ACK
//! renumbers what is not acknowledged into the next generation.

use hfi1_hal::FlowPsn;
use hfi1_hal::flags::{SFlags, TidFlags};
use hfi1_hal::services::TidScheduler;
use tid_flow::{FlowPlatform, ring_indices};

use super::TidSendState;
use crate::rc::WcStatus;
use crate::rc::nak::AethKind;
use crate::requester::{Env, Requester};
use crate::wire::resync::is_resync_psn;
use crate::wire::tid_ack;
use crate::write::TidReqState;

/// What a TID ACK did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum TidAckVerdict {
    /// Dropped: not receiving, no TID WRITE at `s_acked`, or stale.
    Dropped,
    /// An ACK: `segments` more acknowledged, `completed` WRITEs done.
    Acked {
        /// Segments it acknowledged.
        segments: u32,
        /// TID WRITEs it completed.
        completed: u32,
    },
    /// A PSN NAK that rewound the second leg.
    Restart,
    /// A NAK not acted on.
    NotActed,
}

/// The full flow PSN of sequence `seq` in `generation`'s flow. Kernel:
/// `full_flow_psn()`.
fn full(generation: hfi1_hal::Generation, seq: u32) -> u32 {
    FlowPsn::new(generation, seq & 0x7FF).raw()
}

/// Flow PSN order (31-bit serial arithmetic as the kernel's `cmp_psn()`).
fn cmp(a: u32, b: u32) -> i32 {
    (((a.wrapping_sub(b)) << 1) as i32) >> 1
}

impl<P: FlowPlatform> Requester<P> {
    /// Receives a TID ACK with BTH (flow) PSN `psn`. While a RESYNC is
    /// outstanding only its ACK is taken. Kernel:
    /// `hfi1_rc_rcv_tid_rdma_ack()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    pub fn receive_tid_ack(
        &mut self,
        env: &mut Env<'_, '_, P>,
        psn: FlowPsn,
        hdr: &tid_ack::Repr,
    ) -> TidAckVerdict
    where
        P::Sched: TidScheduler<P::Ref>,
    {
        let kind = AethKind::of(&hdr.aeth);
        let nak = kind.is_nak();
        let resync = is_resync_psn(psn.raw());
        let kpsn = if resync {
            hdr.resync_psn.raw()
        } else {
            psn.raw()
        };
        let (mut ack_psn, mut ack_kpsn) = (hdr.verbs_psn, kpsn);
        if nak {
            ack_psn = ack_psn.sub(1);
            ack_kpsn = ack_kpsn.wrapping_sub(1) & 0x7FFF_FFFF;
        }
        let _ = ack_psn;
        if !self.tid_ack_taken(env, psn, hdr) {
            return self.tid_ack_dropped();
        }
        let (segments, completed) = self.ack_segments(env, ack_kpsn);
        self.write.stats.segments_acked += u64::from(segments);
        match kind {
            AethKind::Ack => {
                self.take_tid_ack(env, psn, kpsn, resync);
                TidAckVerdict::Acked {
                    segments,
                    completed,
                }
            }
            AethKind::Nak { code } => self.take_tid_nak(env, psn, code),
            _ => TidAckVerdict::NotActed,
        }
    }

    /// The filter of `hfi1_rc_rcv_tid_rdma_ack()`: true if a TID ACK with
    /// flow PSN `psn` is taken. Not while a RESYNC other than this one is
    /// outstanding, the QP is not receiving or has no TID WRITE at
    /// `s_acked` with segments out, nor for a PSN before that flow or a
    /// verbs PSN before its response (the kernel's `ack_op_err`).
    fn tid_ack_taken(&self, env: &Env<'_, '_, P>, psn: FlowPsn, hdr: &tid_ack::Repr) -> bool {
        if env.locked.flags.contains(SFlags::WAIT_HALT)
            && psn.raw() != self.write.s_resync_psn.get()
        {
            return false;
        }
        if !env.state.receives() || self.sq.acked == self.sq.tail {
            return false;
        }
        let Some(t) = self.sq.get(self.sq.acked).and_then(|w| w.tid_write()) else {
            return false;
        };
        let Some(flow) = t.req.flow(t.req.acked_tail) else {
            return false;
        };
        let start = full(flow.psns.generation, flow.psns.spsn);
        t.req.unacked_remote() != 0
            && cmp(psn.raw(), start) >= 0
            && hdr.verbs_psn.delta(flow.psns.resp_ib_psn) >= 0
    }

    /// A TID ACK (flow PSN `psn`, KDETH PSN `kpsn`) past the segments it
    /// acknowledged: a RESYNC's renumbers what is left; another re-arms
    /// the TID retry timer while sent segments are unacknowledged, else
    /// stops it, and schedules the first leg. Either refills the retry
    /// budget. Kernel: the `case 0` of `hfi1_rc_rcv_tid_rdma_ack()`.
    fn take_tid_ack(&mut self, env: &mut Env<'_, '_, P>, psn: FlowPsn, kpsn: u32, resync: bool)
    where
        P::Sched: TidScheduler<P::Ref>,
    {
        self.write.stats.tid_acks += 1;
        self.write.tid_flags &= !TidFlags::WAIT_ACK;
        if resync {
            self.resync_ack(env, psn, kpsn);
            self.write.s_retry = env.conn.retry_cnt;
            return;
        }
        let unacked = self
            .sq
            .get(self.sq.acked)
            .filter(|_| self.sq.acked != self.sq.tail)
            .and_then(|w| w.tid_write())
            .is_some_and(|t| t.ack_seg < t.cur_seg);
        if unacked {
            self.write
                .tid_retry
                .arm(crate::rc::retry::retry_ns(env.conn.timeout, 0));
        } else {
            self.write.tid_retry.stop();
        }
        env.schedule();
        self.write.s_retry = env.conn.retry_cnt;
    }

    /// A TID NAK with `code` at flow PSN `psn`: the TID retry timer
    /// stops; only a PSN sequence error inside the oldest unacknowledged
    /// segment acts, rewinding the second leg. Kernel: the `case 3` of
    /// `hfi1_rc_rcv_tid_rdma_ack()`.
    fn take_tid_nak(&mut self, env: &mut Env<'_, '_, P>, psn: FlowPsn, code: u8) -> TidAckVerdict
    where
        P::Sched: TidScheduler<P::Ref>,
    {
        self.write.stats.tid_naks += 1;
        self.write.tid_retry.stop();
        if code != 0 {
            return TidAckVerdict::NotActed;
        }
        if !self.nak_rewind(env, psn) {
            return TidAckVerdict::NotActed;
        }
        TidAckVerdict::Restart
    }

    fn tid_ack_dropped(&mut self) -> TidAckVerdict {
        self.write.stats.tid_acks_dropped += 1;
        TidAckVerdict::Dropped
    }

    /// Acknowledges every sent segment whose last flow PSN `ack_kpsn`
    /// reaches, completing finished TID WRITEs and walking on into the
    /// next. Returns (segments, completions).
    fn ack_segments(&mut self, env: &mut Env<'_, '_, P>, ack_kpsn: u32) -> (u32, u32) {
        let (mut segs, mut done) = (0, 0);
        loop {
            let i = self.sq.acked;
            if i == self.sq.tail {
                break;
            }
            let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid_write_mut()) else {
                break;
            };
            let Some(flow) = t.req.flow(t.req.acked_tail) else {
                break;
            };
            let last = full(flow.psns.generation, flow.psns.lpsn);
            if cmp(ack_kpsn, last) < 0 || t.ack_seg >= t.cur_seg {
                break;
            }
            let _ = t.req.acked_remote();
            t.ack_seg += 1;
            segs += 1;
            if t.ack_seg < t.total_segs {
                continue;
            }
            t.state = TidReqState::Complete;
            if t.req.free_flow_records().is_err() {
                self.stats.clean_refused += 1;
            }
            self.rc_completion(env, i);
            self.write.n_tid_requests = self.write.n_tid_requests.saturating_sub(1);
            self.write.stats.completed += 1;
            done += 1;
        }
        (segs, done)
    }

    /// A PSN NAK inside the oldest unacknowledged segment: the second leg
    /// resends from the NAK's packet. False if the PSN lies past it.
    fn nak_rewind(&mut self, env: &mut Env<'_, '_, P>, psn: FlowPsn) -> bool
    where
        P::Sched: TidScheduler<P::Ref>,
    {
        let acked = self.sq.acked;
        let Some(t) = self.sq.get_mut(acked).and_then(|w| w.tid_write_mut()) else {
            return false;
        };
        let Some(flow) = t.req.flow(t.req.acked_tail) else {
            return false;
        };
        if cmp(psn.raw(), full(flow.psns.generation, flow.psns.lpsn)) > 0 {
            return false;
        }
        t.r_ack_psn = psn;
        t.cur_seg = t.ack_seg;
        self.write.s_tid_tail = Some(acked);
        self.write.s_state = TidSendState::WriteReq;
        self.write.s_retry = env.conn.retry_cnt;
        crate::write::second_leg::schedule_tid_send(env, &mut self.write);
        true
    }

    /// The ACK of a RESYNC: the first leg resumes; every segment not
    /// acknowledged, from `acked_tail` of the WRITE at `s_acked` through
    /// `s_tid_cur`, is renumbered in the new generation from sequence 0
    /// (the packets the responder already has, counted from its
    /// `tid_flow_psn`, kept in `resync_npkts`), and the second leg resends
    /// from there. Kernel: the RESYNC-ACK branch of
    /// `hfi1_rc_rcv_tid_rdma_ack()`.
    ///
    /// Deviation from 6.1: a segment already in a later generation than
    /// the PSNs being counted (its WRITE_RESP came while the RESYNC was
    /// out, built by a responder that had renumbered its segments for this
    /// RESYNC or for an earlier one whose ACK was lost) keeps its packet
    /// count. 6.1 counts it as for the others, from the RESYNC ACK's PSN
    /// in the old generation to the segment's last PSN in its own: about
    /// 2048 packets, whose last PSN wraps the 11-bit sequence onto the
    /// segment before it (or the next segment starts on its sequences); a
    /// later NAK then acknowledged that segment with the one before, and
    /// the responder's RESYNC ACKs, naming it unacknowledged, were
    /// dropped until the retries ran out (`tests/write_requester.rs`:
    /// `a_write_resp_during_a_resync_keeps_its_packet_count` and
    /// `a_write_resp_from_a_resync_whose_ack_was_lost_keeps_its_packet_count`).
    fn resync_ack(&mut self, env: &mut Env<'_, '_, P>, psn: FlowPsn, resync_psn: u32)
    where
        P::Sched: TidScheduler<P::Ref>,
    {
        self.write.stats.resync_acks += 1;
        self.write.tid_retry.stop();
        *env.locked.flags &= !SFlags::WAIT_HALT;
        self.write.tid_flags &= !TidFlags::SEND_ONE;
        env.schedule();
        let start = FlowPsn::from_raw(psn.raw().wrapping_add(1) & 0x7FFF_FFFF);
        let generation = start.generation();
        self.write.resync_numbering = Some((generation, 0));
        let acked = self.sq.acked;
        let state = self
            .sq
            .get(acked)
            .and_then(|w| w.tid_write())
            .map(|t| (t.ack_seg == t.total_segs, t.ack_seg == t.comp_seg));
        let Some((all, responded)) = state else {
            self.write.s_state = TidSendState::WriteDataLast;
            return;
        };
        if (self.write.s_tid_tail == Some(acked) && all) || acked == self.sq.tail {
            self.write.s_state = TidSendState::WriteDataLast;
            return;
        }
        if responded {
            self.write.s_state = TidSendState::WriteData;
            return;
        }
        let mut resync = resync_psn;
        let mut spsn = 0u32;
        let cur = self.write.s_tid_cur.unwrap_or(acked);
        let mut first = true;
        for n in self.sq.through(acked, cur) {
            if let Some(t) = self.sq.get_mut(n).and_then(|w| w.tid_write_mut()) {
                if first {
                    t.r_ack_psn = start;
                    if let Some(f) = t.req.flow_mut(t.req.acked_tail) {
                        let fpsn = full(f.psns.generation, f.psns.spsn);
                        if f.psns.generation.get() != resync >> 11 {
                            resync = fpsn.wrapping_sub(1) & 0x7FFF_FFFF;
                        }
                        let got = cmp(resync.wrapping_add(1), fpsn).max(0);
                        f.resync_npkts += got.unsigned_abs();
                    }
                }
                for k in ring_indices(t.req.acked_tail, t.req.setup_head) {
                    if let Some(f) = t.req.flow_mut(k) {
                        let lpsn = full(f.psns.generation, f.psns.lpsn);
                        // A segment whose WRITE_RESP the responder built
                        // after it took this RESYNC, or an earlier one
                        // whose ACK never came, is in a later generation
                        // than the PSNs being counted, none of its packets
                        // received: it keeps its own count (see the
                        // deviation).
                        let counted = FlowPsn::from_raw(resync).generation();
                        let npkts = if f.psns.generation != counted {
                            f.npkts
                        } else {
                            cmp(lpsn, resync).max(0).unsigned_abs()
                        };
                        f.npkts = npkts;
                        f.psns.generation = generation;
                        f.psns.spsn = spsn;
                        f.psns.lpsn = (spsn + npkts).wrapping_sub(1);
                        f.pkt = 0;
                        spsn += npkts;
                        resync = resync.wrapping_add(npkts);
                    }
                }
                t.cur_seg = if first { t.ack_seg } else { t.cur_seg };
                first = false;
            }
        }
        if let Some(t) = self.sq.get_mut(acked).and_then(|w| w.tid_write_mut()) {
            t.cur_seg = t.ack_seg;
        }
        self.write.resync_numbering = Some((generation, spsn));
        self.write.s_tid_tail = Some(acked);
        self.write.s_state = TidSendState::WriteReq;
        crate::write::second_leg::schedule_tid_send(env, &mut self.write);
    }

    /// The TID retry timer expired: if it was running, with retries left
    /// a RESYNC goes out alone (the first leg halted until its ACK); with
    /// none left the WRITE at `s_acked` completes
    /// [`WcStatus::RetryExceeded`] and the QP errors. Returns whether it
    /// was running. Kernel: `hfi1_tid_retry_timeout()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    pub fn tid_retry_timeout(&mut self, env: &mut Env<'_, '_, P>) -> bool
    where
        P::Sched: TidScheduler<P::Ref>,
    {
        if !self.write.tid_retry.expire() || !env.state.receives() {
            return false;
        }
        self.write.stats.tid_retry_expiries += 1;
        if self.write.s_retry == 0 {
            self.fail_oldest(env, WcStatus::RetryExceeded);
            return true;
        }
        self.write.tid_flags &= !TidFlags::WAIT_ACK;
        self.write.tid_flags |= TidFlags::SEND_ONE;
        *env.locked.flags |= SFlags::WAIT_HALT;
        self.write.s_state = TidSendState::Resync;
        self.write.s_retry -= 1;
        crate::write::second_leg::schedule_tid_send(env, &mut self.write);
        true
    }
}
