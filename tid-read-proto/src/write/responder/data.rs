// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! WRITE_DATA reaching software at the responder: a segment's last packet
//! (the chip placed and suppressed the rest), its TIDs retired (held
//! until the flow leaves their generation, see `held`), more allocated,
//! and a TID ACK owed. Kernel:
//! `hfi1_rc_rcv_tid_rdma_write_data()`.

use hfi1_hal::FlowPsn;
use hfi1_hal::flags::TidFlags;
use tid_flow::ring_count;

use super::{AllocCtx, Env, RecvPath};
use crate::responder::Responder;
use crate::write::{TidReqState, WriteRegions};

/// What the responder did with a WRITE_DATA packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataVerdict {
    /// A segment's last packet: the segment is complete and a TID ACK is
    /// owed.
    SegmentDone,
    /// The request's last packet (WRITE_DATA_LAST): the request is
    /// complete and a TID ACK is owed.
    RequestDone,
    /// An in-sequence packet that is not the segment's last (only seen
    /// when the chip did not suppress it): noted, nothing owed.
    InSequence,
    /// Out of sequence: a TID NAK is owed (once per episode).
    Nak,
    /// Dropped: the QP is in the error state, or no TID WRITE segment is
    /// receiving.
    Dropped,
}

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Receives a WRITE_DATA (`last_of_request`: a WRITE_DATA_LAST) with
    /// flow PSN `psn` that the chip handed to software without an error.
    /// Kernel: `hfi1_rc_rcv_tid_rdma_write_data()`.
    ///
    /// # Locking
    ///
    /// `r_lock` (`intr`) and the QP's `s_lock` held; takes `exp_lock`
    /// through `tid-flow`.
    pub(crate) fn receive_write_data(
        &mut self,
        intr: &RecvPath,
        psn: FlowPsn,
        last_of_request: bool,
        wmrs: &impl WriteRegions,
    ) -> DataVerdict {
        if self.dropped_not_receiving(wmrs) {
            return DataVerdict::Dropped;
        }
        let Some(t) = self.w.r_tid_tail.filter(|&t| self.rsp.is_write(t)) else {
            self.w.stats.dropped += 1;
            return DataVerdict::Dropped;
        };
        let Some(e) = self.w.entries.get_mut(t) else {
            return DataVerdict::Dropped;
        };
        let ct = e.req.clear_tail;
        let in_flight = ring_count(e.req.setup_head, ct) != 0;
        let Some(f) = e.req.flow_mut(ct).filter(|_| in_flight) else {
            self.w.stats.dropped += 1;
            return DataVerdict::Dropped;
        };
        let next = FlowPsn::from_raw(psn.raw().wrapping_add(1));
        if psn != f.psns.full_psn(f.psns.lpsn) {
            if psn != f.psns.r_next_psn {
                let expected = f.psns.r_next_psn;
                self.w.r_next_psn_kdeth = expected;
                return self.owe_nak(expected);
            }
            f.psns.r_next_psn = next;
            self.w.r_next_psn_kdeth = next;
            self.w.data_generation = Some(f.psns.generation);
            return DataVerdict::InSequence;
        }
        f.psns.r_next_psn = next;
        self.w.data_generation = Some(f.psns.generation);
        let resend_here = self
            .w
            .entries
            .get(t)
            .is_some_and(|e| e.req.flow_idx == ct && ring_count(e.req.setup_head, ct) != 0);
        if !self.retire_segment(t) {
            self.w.stats.dropped += 1;
            return DataVerdict::Dropped;
        }
        self.w.alloc_w_segs = self.w.alloc_w_segs.saturating_sub(1);
        if let Some(e) = self.w.entries.get_mut(t) {
            e.comp_seg += 1;
            if resend_here {
                Self::skip_received_resend(e);
            }
        }
        self.w.tid_nak = None;
        self.w.stats.segments_received += 1;
        if self.w.r_tid_ack.is_none() {
            self.w.r_tid_ack = Some(t);
        }
        if last_of_request {
            self.request_received(t, wmrs);
        }
        self.alloc_resources(wmrs, AllocCtx::Intr(intr));
        self.w.pending_tid_w_segs = self.w.pending_tid_w_segs.saturating_sub(1);
        if self.w.flags.contains(TidFlags::R_TID_RSC_TIMER) {
            if self.w.pending_tid_w_segs > 0 {
                self.w.reap.arm(super::reap_ns(self.conn.remote.timeout));
            } else {
                self.w.flags.remove(TidFlags::R_TID_RSC_TIMER);
                self.w.reap.stop();
            }
        }
        self.w.flags.insert(TidFlags::ACK_PENDING);
        self.w.r_next_psn_kdeth = next;
        if last_of_request {
            DataVerdict::RequestDone
        } else {
            DataVerdict::SegmentDone
        }
    }

    /// The segment whose WRITE_RESP a duplicate WRITE_REQ asked to send
    /// again has all its data after all (the first WRITE_RESP got
    /// through): the resend moves on with `clear_tail` instead of staying
    /// behind it.
    ///
    /// Deviation from 6.1: `hfi1_rc_rcv_tid_rdma_write_data()` moves
    /// `clear_tail` alone, so `flow_idx` falls behind it; the next
    /// duplicate WRITE_REQ counts the WRITE_RESPs outstanding from there
    /// (`CIRC_CNT(flow_idx, clear_tail)`, a whole ring) and rewinds to a
    /// segment past the allocated ones, which the send engine can never
    /// answer: a stale copy of the first WRITE_REQ during an RNR episode,
    /// then the data, then the requester's resend, and the WRITE was
    /// never answered again (`tid-sim/tests/mix_faults.rs`:
    /// `a_resend_overtaken_by_its_data_moves_on`).
    fn skip_received_resend(e: &mut super::WriteEntry<P>) {
        e.req.flow_idx = e.req.clear_tail;
        e.cur_seg = e.cur_seg.max(e.comp_seg);
        if ring_count(e.req.setup_head, e.req.flow_idx) == 0 {
            e.state = TidReqState::Active;
        }
    }

    /// The request at `r_tid_tail` has all its data: its region reference
    /// goes, `r_tid_tail` moves to the next TID WRITE entry and the acked
    /// pointer past it.
    fn request_received(&mut self, t: usize, wmrs: &impl WriteRegions) {
        if let Some(mr) = self.rsp.ack.get_mut(t).and_then(|a| a.mr.take()) {
            wmrs.put(mr);
        }
        let head = self.w.r_tid_head;
        let next = Responder::slots(Responder::next(t), head)
            .find(|&j| self.rsp.is_write(j))
            .unwrap_or(head);
        self.w.r_tid_tail = Some(next);
        self.rsp.acked = Responder::next(self.rsp.acked);
        self.w.stats.requests_received += 1;
    }

    /// True (and the packet counted as dropped) if the QP is not
    /// receiving; any region reference the ack queue still holds is
    /// released.
    pub(crate) fn dropped_not_receiving(&mut self, wmrs: &impl WriteRegions) -> bool {
        if self.state.receives() {
            return false;
        }
        self.rsp.drop_in_error(wmrs);
        self.w.stats.dropped += 1;
        true
    }

    /// A TID NAK with the expected PSN, once per episode. Kernel: the
    /// `send_nak` label.
    fn owe_nak(&mut self, expected: FlowPsn) -> DataVerdict {
        if self.w.tid_nak.is_none() {
            self.w.tid_nak = Some(expected);
        }
        self.trigger_ack();
        DataVerdict::Nak
    }
}
