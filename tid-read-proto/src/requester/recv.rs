// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's receive path (kernel `hfi1_rc_rcv_tid_rdma_read_resp()`,
//! `handle_read_kdeth_eflags()`, `do_rc_ack()`).
//!
//! Software normally sees only a segment's last READ_RESP (the chip placed
//! the others and suppressed their headers); with errors it sees more. It
//! finds the segment by the packet's `verbs_psn` and flow PSN, records
//! which packets the chip has placed (and which the flow register has moved
//! past), and completes a segment once all its packets are placed and the
//! stream serving it has ended. The hardware flow is released whenever
//! nothing is in flight (which covers SYNC points and "no TID READ
//! outstanding").
//!
//! Errors (SPEC §5):
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
//! - any NAK other than a PSN error flushes the QP (every request completes
//!   in error, everything is released); a PSN NAK restarts.

use hfi1_hal::services::Scheduler;
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Psn};
use tid_flow::{FlowError, FlowPlatform, QpLocked, RcvCtxt, clear_hw_flow};

use super::{Reborrow, Requester, ring_slots};
use crate::rc::{EngineError, WcStatus};
use crate::wire::{aeth, read_resp};

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
    pub flow: FlowIndex,
    /// Its next expected flow PSN.
    pub next: FlowPsn,
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
    /// Dropped, and the QP lost track of its requests (a sequence error
    /// whose flow PSN names no segment): every request completed in
    /// error and everything was released. The QP must also leave the TID
    /// wait queues, which needs its whole guard: [`crate::qp`]'s entry
    /// point does it.
    LostTrack,
}

/// What an RC ACK or NAK did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum AckVerdict {
    /// Nothing: an ACK (READ segments are acknowledged by their
    /// READ_RESPs) or a PSN NAK with nothing in flight.
    Ignored,
    /// A PSN-sequence NAK (the responder missed a READ_REQ): the segments
    /// in flight restart.
    Restart,
    /// Any other NAK, fatal for the connection as in RC: every request
    /// completed in error. The QP must also leave the TID wait queues
    /// ([`crate::qp`]'s entry point does it).
    Fatal,
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
    /// In a segment in flight.
    Live {
        /// The READ's send-queue position.
        wr: u32,
        /// The segment's ring slot.
        slot: u16,
        /// The packet's index in the segment.
        pkt: u32,
    },
    /// In a segment that completed and still holds its TIDs.
    Held,
    /// Nowhere.
    Nowhere,
}

impl<P: FlowPlatform> Requester<P> {
    /// Receives a READ_RESP the chip delivered to software: with header
    /// suppression a segment's last packet, or any packet the chip
    /// flagged (`error`); `chip` is the chip's flow register after it.
    /// Kernel: `hfi1_rc_rcv_tid_rdma_read_resp()` and
    /// `handle_read_kdeth_eflags()`.
    ///
    /// First a packet whose IB PSN (`verbs_psn`) lies outside
    /// `[s_last_psn, s_psn]` is dropped (a stale packet of a segment that
    /// completed, or garbage). Then:
    ///
    /// - a stale generation or a TID error: dropped (the chip did not
    ///   place it);
    /// - a flow sequence error: software PSN checking (`check_sw_psn`);
    ///   a packet naming no segment at all means the QP lost track
    ///   ([`RespVerdict::LostTrack`]);
    /// - no error: the chip placed it in sequence. Software records which
    ///   packets of each segment in flight were placed: this one (its IB
    ///   PSN and flow PSN must name the same packet of a segment) and
    ///   every sequence the chip's flow register has moved past.
    ///
    /// A segment completes once all its packets are placed and the stream
    /// serving it has ended (`complete_placed`).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`locked`, `&mut self`): the IB PSN checks
    /// of the error path run under it (SPEC §7); without the lock there is
    /// no [`QpLocked`] to pass, and the call does not compile:
    ///
    /// ```compile_fail
    /// # use tid_read_proto::requester::{Requester, KdethError};
    /// # fn f<P: tid_flow::FlowPlatform>(r: &mut Requester<P>, rcd: &tid_flow::RcvCtxt<P>,
    /// #        qp: &P::Ref, hdr: &tid_read_proto::wire::read_resp::Repr, psn: hfi1_hal::FlowPsn) {
    /// // No s_lock taken: there is no locked view to pass.
    /// r.receive_read_resp(rcd, qp, psn, hdr, Some(KdethError::FlowSeq), None);
    /// # }
    /// ```
    ///
    /// Takes `exp_lock` through `tid-flow`.
    ///
    /// # Errors
    ///
    /// A flow-engine error while releasing a segment.
    #[allow(clippy::too_many_arguments)]
    pub fn receive_read_resp(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        locked: QpLocked<'_, '_>,
        bth_psn: FlowPsn,
        hdr: &read_resp::Repr,
        error: Option<KdethError>,
        chip: Option<ChipFlow>,
    ) -> Result<RespVerdict, EngineError> {
        if !hdr.verbs_psn.within(self.last_psn, self.next_psn.sub(1)) {
            self.stats.psn_dropped += 1;
            self.stats.resp_dropped += 1;
            if error.is_some() {
                self.stats.kdeth_errors += 1;
            } else {
                // Taken in sequence by the chip all the same: what its
                // register shows placed stays placed.
                self.mark_in_order(chip);
                self.complete_placed(rcd, qp, locked)?;
            }
            return Ok(RespVerdict::Dropped);
        }
        match error {
            Some(KdethError::FlowGen) => {
                self.stats.stale_dropped += 1;
                self.stats.kdeth_errors += 1;
                Ok(RespVerdict::Dropped)
            }
            Some(KdethError::Tid) => {
                self.stats.tid_dropped += 1;
                self.stats.kdeth_errors += 1;
                Ok(RespVerdict::Dropped)
            }
            Some(KdethError::FlowSeq) => {
                self.stats.seq_errors += 1;
                self.stats.kdeth_errors += 1;
                self.receive_out_of_sequence(rcd, qp, locked, bth_psn, chip)
            }
            None => self.receive_in_sequence(rcd, qp, locked, hdr.verbs_psn, bth_psn, chip),
        }
    }

    /// A READ_RESP the chip flagged with a flow sequence error.
    ///
    /// # Locking
    ///
    /// As [`Requester::receive_read_resp`].
    fn receive_out_of_sequence(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        locked: QpLocked<'_, '_>,
        bth_psn: FlowPsn,
        chip: Option<ChipFlow>,
    ) -> Result<RespVerdict, EngineError> {
        let flow_gen = locked.flow.index.map(|_| locked.flow.generation);
        let asked = self.stats.seq_restarts;
        match self.check_sw_psn(flow_gen, bth_psn, chip) {
            SwCheck::Dropped => {
                if self.stats.seq_restarts != asked {
                    rcd.sched.schedule_send(qp);
                }
                // The packet is dropped, but the chip's register may show
                // a segment fully placed in sequence whose last packet
                // software never saw (a copy taken in sequence but dropped
                // by the IB PSN check): complete it, or its repeated
                // streams, all behind the chip, never would. (A sequence
                // error does not move the register: this packet advances
                // nothing.)
                self.mark_in_order(chip);
                self.complete_placed(rcd, qp, locked)?;
                Ok(RespVerdict::Dropped)
            }
            SwCheck::Accepted => Ok(if self.complete_placed(rcd, qp, locked)? {
                RespVerdict::Completed
            } else {
                RespVerdict::Counted
            }),
            SwCheck::NotFound => {
                self.stats.flow_not_found += 1;
                let (first, rest) = (WcStatus::LocalQpOpError, WcStatus::Flushed);
                self.flush_requests(rcd, qp, locked, first, rest);
                Ok(RespVerdict::LostTrack)
            }
        }
    }

    /// A READ_RESP the chip took in sequence (its IB PSN `ipsn`, flow PSN
    /// `bth_psn`).
    ///
    /// # Locking
    ///
    /// As [`Requester::receive_read_resp`].
    fn receive_in_sequence(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        locked: QpLocked<'_, '_>,
        ipsn: Psn,
        bth_psn: FlowPsn,
        chip: Option<ChipFlow>,
    ) -> Result<RespVerdict, EngineError> {
        let hit = self.record_packet(ipsn, bth_psn);
        if !hit {
            self.stats.psn_dropped += 1;
            self.stats.resp_dropped += 1;
        }
        self.mark_in_order(chip);
        // Software checking follows the chip: a packet it took in
        // sequence shows where it stands.
        if let (Some(r), Some(c)) = (self.sw_psn, chip) {
            if c.next.generation() == r.generation() && c.next.seq() > r.seq() {
                self.sw_psn = Some(c.next);
            }
        }
        // Complete what the register shows even if the packet itself
        // named nothing.
        let done = self.complete_placed(rcd, qp, locked)?;
        Ok(match (done, hit) {
            (true, _) => RespVerdict::Completed,
            (false, true) => RespVerdict::Counted,
            (false, false) => RespVerdict::Dropped,
        })
    }

    /// Records the packet whose IB PSN and flow PSN name the same packet of
    /// a segment in flight as placed. False if none matches.
    fn record_packet(&mut self, ipsn: Psn, bth_psn: FlowPsn) -> bool {
        for (_, w) in self.sq.iter_mut() {
            for k in ring_slots(w.first_live(), w.tid.flow_idx) {
                let Some(rec) = w.tid.flow(k) else { break };
                let ps = rec.psns;
                if !ipsn.within(ps.ib_spsn, ps.ib_lpsn) {
                    continue;
                }
                let off = u32::try_from(ipsn.delta(ps.ib_spsn)).unwrap_or(u32::MAX);
                if off < 64 && bth_psn == ps.full_psn(ps.spsn.wrapping_add(off)) {
                    let npkts = rec.npkts;
                    if let Some(s) = w.segs.get_mut(usize::from(k)) {
                        s.place(off, npkts);
                    }
                    return true;
                }
            }
        }
        false
    }

    /// Records as placed every packet of a segment in flight that the
    /// chip's flow register has moved past in the segment's generation:
    /// those arrived in sequence and were placed without being delivered.
    fn mark_in_order(&mut self, chip: Option<ChipFlow>) {
        let Some(c) = chip else { return };
        for (_, w) in self.sq.iter_mut() {
            for k in ring_slots(w.first_live(), w.tid.flow_idx) {
                let Some(rec) = w.tid.flow(k) else { break };
                let ps = rec.psns;
                if rec.idx == Some(c.flow) && c.next.generation() == ps.generation {
                    let n = c.next.seq().saturating_sub(ps.spsn).min(rec.npkts);
                    let npkts = rec.npkts;
                    if let Some(s) = w.segs.get_mut(usize::from(k)) {
                        s.place_first(n, npkts);
                    }
                }
            }
        }
    }

    /// Finds the segment whose flow PSN range holds `psn`, among every
    /// request's segments in flight and completed segments still holding
    /// their TIDs (the generation is part of the comparison).
    /// Kernel: `find_flow()`.
    fn locate(&self, psn: FlowPsn) -> Located {
        for (i, w) in self.sq.iter() {
            for k in ring_slots(w.tid.clear_tail, w.tid.flow_idx) {
                let Some(rec) = w.tid.flow(k) else { continue };
                let ps = rec.psns;
                let off = psn.seq().wrapping_sub(ps.spsn);
                if ps.generation == psn.generation() && psn.seq() >= ps.spsn && off < rec.npkts {
                    return if w.seg(k).held {
                        Located::Held
                    } else {
                        Located::Live {
                            wr: i,
                            slot: k,
                            pkt: off,
                        }
                    };
                }
            }
        }
        Located::Nowhere
    }

    /// Software PSN checking of a READ_RESP the chip flagged with a flow
    /// sequence error (SPEC §5 "Errors from the chip"). Kernel: the
    /// `RHF_RTE_EXPECTED_FLOW_SEQ_ERR` case of
    /// `handle_read_kdeth_eflags()`.
    ///
    /// The first sequence error of an episode switches the QP to software
    /// checking from the chip's next expected flow PSN (`chip`, read from
    /// the flow register), counts what the register shows was placed in
    /// order, asks for one restart and drops the packet. After that a
    /// packet ahead of the expected PSN is dropped (asking for a restart if
    /// none is pending in this episode); one behind it is dropped and shows
    /// that the restart took effect (the restart mark clears); the expected
    /// one is recorded as placed and advances the expected PSN, and if it
    /// is its segment's last packet the segment is complete. Only the
    /// packet's own segment is ever touched: packets of later segments
    /// never advance their flows (SPEC §7).
    fn check_sw_psn(
        &mut self,
        flow_gen: Option<Generation>,
        psn: FlowPsn,
        chip: Option<ChipFlow>,
    ) -> SwCheck {
        let (wr, slot, pkt) = match self.locate(psn) {
            Located::Live { wr, slot, pkt } => (wr, slot, pkt),
            Located::Held => {
                self.stats.late_dropped += 1;
                return SwCheck::Dropped;
            }
            Located::Nowhere => return SwCheck::NotFound,
        };
        let active = self
            .sw_psn
            .filter(|r| flow_gen.is_some_and(|g| g == r.generation()));
        let Some(expected) = active else {
            // First sequence error of an episode: start software checking
            // where the chip stands, keep what it placed in order so far.
            let from_chip = chip
                .map(|c| c.next)
                .filter(|n| n.generation() == psn.generation());
            if from_chip.is_some() {
                self.mark_in_order(chip);
            }
            self.sw_psn = Some(from_chip.unwrap_or(psn));
            self.stats.sw_dropped += 1;
            self.ask_restart();
            return SwCheck::Dropped;
        };
        if psn.seq() > expected.seq() {
            self.stats.sw_dropped += 1;
            self.ask_restart();
            return SwCheck::Dropped;
        }
        if psn.seq() < expected.seq() {
            self.stats.sw_dropped += 1;
            self.rdmar_seq = false;
            return SwCheck::Dropped;
        }
        self.sw_psn = Some(expected.next_seq());
        let Some(w) = self.sq.get_mut(wr) else {
            return SwCheck::NotFound;
        };
        let npkts = w.tid.flow(slot).map_or(0, |r| r.npkts);
        if let Some(s) = w.segs.get_mut(usize::from(slot)) {
            s.place(pkt, npkts);
        }
        if pkt.wrapping_add(1) == npkts {
            self.rdmar_seq = false;
        }
        SwCheck::Accepted
    }

    /// Asks for a restart unless one was asked for in this error episode.
    /// Kernel: `restart_tid_rdma_read_req()` guarded by `RVT_R_RDMAR_SEQ`.
    fn ask_restart(&mut self) {
        if !self.rdmar_seq && self.in_flight > 0 {
            self.rdmar_seq = true;
            self.restart_pending = true;
            self.stats.seq_restarts += 1;
        }
    }

    /// Completes, in order per request, every segment whose packets are
    /// all placed and whose stream has ended; releases the flow when
    /// nothing is in flight any more. Returns true if a segment completed.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    fn complete_placed(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        mut locked: QpLocked<'_, '_>,
    ) -> Result<bool, EngineError> {
        if self.complete_segments() == 0 {
            return Ok(false);
        }
        let mut first_err = None;
        // Nothing in flight any more (a SYNC point, no TID READ
        // outstanding, or just a pause): the flow moves to a fresh
        // generation, which frees the TIDs of the segments that completed
        // in the old one.
        if self.in_flight == 0 {
            if locked.flags.waiting() {
                // Waiting on the RcvArray queue, a QP keeps its flow (a QP
                // on that queue holds one; giving it up could leave the
                // queue's head waiting for a flow held by the QPs behind
                // it).
                tid_flow::regenerate_hw_flow(rcd, locked.reborrow());
            } else {
                clear_hw_flow(rcd, qp, locked.reborrow());
            }
            if self.sync_pending {
                self.sync_pending = false;
                self.stats.syncs += 1;
            }
            if let Err(e) = self.release_held(rcd, qp, locked) {
                first_err = Some(match e {
                    EngineError::Flow(f) => f,
                    _ => FlowError::Invalid,
                });
            }
        }
        self.retire();
        rcd.sched.schedule_send(qp);
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(true),
        }
    }

    /// The bookkeeping of [`Requester::complete_placed`]: marks complete,
    /// in order per request, every segment fully placed whose stream has
    /// ended (it then holds its TIDs), and moves `s_last_psn`. Returns how
    /// many completed.
    fn complete_segments(&mut self) -> u32 {
        let mut completed = 0;
        for (_, w) in self.sq.iter_mut() {
            for k in ring_slots(w.first_live(), w.tid.flow_idx) {
                let Some((npkts, lpsn)) = w.tid.flow(k).map(|r| (r.npkts, r.psns.ib_lpsn)) else {
                    break;
                };
                let Some(s) = w.segs.get_mut(usize::from(k)) else {
                    break;
                };
                if !s.is_complete(npkts) {
                    break;
                }
                s.placed = 0;
                s.held = true;
                self.in_flight = self.in_flight.saturating_sub(1);
                // s_last_psn: everything up to it completed (segments of
                // different requests may complete out of order).
                if let Some(last) = self.window.complete(lpsn) {
                    self.last_psn = last;
                }
                self.stats.segments_done += 1;
                w.comp_seg += 1;
                if w.comp_seg >= w.total_segs {
                    self.reads_done += 1;
                }
                completed += 1;
            }
        }
        completed
    }

    /// Receives an RC ACK or NAK. Kernel: `do_rc_ack()` (the NAK branch).
    ///
    /// A plain ACK carries nothing a TID READ needs (segments are
    /// acknowledged by their READ_RESPs). A PSN-sequence NAK (the responder
    /// missed a READ_REQ) restarts the segments in flight. Any other NAK is
    /// fatal for the connection, as in RC: every request completes in
    /// error and everything is released.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`locked`, `&mut self`); a fatal NAK takes
    /// `exp_lock` through `tid-flow`.
    pub fn receive_ack(
        &mut self,
        rcd: &RcvCtxt<P>,
        qp: &P::Ref,
        locked: QpLocked<'_, '_>,
        a: &aeth::Repr,
    ) -> AckVerdict {
        if !a.is_nak() {
            return AckVerdict::Ignored;
        }
        self.stats.naks += 1;
        if a.syndrome != aeth::NakCode::PsnError.syndrome() {
            let status = WcStatus::RemoteError;
            self.flush_requests(rcd, qp, locked, status, status);
            return AckVerdict::Fatal;
        }
        if self.in_flight == 0 {
            return AckVerdict::Ignored;
        }
        self.restart_pending = true;
        rcd.sched.schedule_send(qp);
        AckVerdict::Restart
    }
}
