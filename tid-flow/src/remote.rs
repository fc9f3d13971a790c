// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The flow ring of a TID RDMA WRITE requester: records of the
//! *responder's* segments, filled from its WRITE_RESPs, with no local TIDs.
//!
//! The requester of a WRITE programs nothing: each WRITE_RESP names the
//! TID entries, the KDETH QP and the flow PSNs the responder set up, and
//! the requester's second leg sends WRITE_DATA into them. Its ring moves
//! as the READ requester's does (`setup_head` per response, `clear_tail`
//! per segment sent, `acked_tail` per segment acknowledged), but none of
//! these steps maps, unmaps, programs or wakes anyone: the driver's
//! requester never calls `hfi1_kern_exp_rcv_clear()` (whose wake-up of
//! the RcvArray queue would be wrong here), it moves the indices itself
//! (`hfi1_rc_rcv_tid_rdma_write_resp()`, `hfi1_make_tid_rdma_pkt()`,
//! `hfi1_rc_rcv_tid_rdma_ack()`, `hfi1_tid_rdma_restart_req()`).
//!
//! # Locking
//!
//! Every function takes `&mut TidRequest`, part of the QP's
//! `s_lock`-guarded send queue: the caller holds `s_lock`. None takes a
//! lock.

use arrayvec::ArrayVec;
use hfi1_hal::consts::MAX_PAGESETS;
use hfi1_hal::{FlowIndex, Generation, Psn, TidEntry};

use crate::FlowError;
use crate::ctxt::FlowPlatform;
use crate::segment::{SegmentPsns, TidRequest, ring_count, ring_next, ring_space};

/// One WRITE_RESP's segment as the requester records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSegment {
    /// The responder's TID entries (the WRITE_RESP payload).
    pub tid_entries: ArrayVec<TidEntry, MAX_PAGESETS>,
    /// `tid_flow_qp`: the KDETH QP the data goes to.
    pub tid_qpn: u32,
    /// The flow's generation (`tid_flow_psn >> 11`).
    pub generation: Generation,
    /// First flow sequence (`tid_flow_psn & 0x7FF`).
    pub spsn: u32,
    /// The WRITE_RESP's IB PSN.
    pub resp_ib_psn: Psn,
    /// Bytes of the segment.
    pub length: u32,
    /// Packets it takes.
    pub npkts: u32,
}

impl<P: FlowPlatform> TidRequest<P> {
    /// Records a WRITE_RESP's segment at `setup_head` and advances it;
    /// returns the slot. The record's cursors (`pkt`, `tid_idx`,
    /// `tid_offset`, `sent`, `resync_npkts`) start at 0, `idx` is bits
    /// 11..16 of `tid_qpn`, `lpsn = spsn + npkts - 1`. The first response
    /// of a request (`first`) also sets `acked_tail` to the slot; the room
    /// is checked against `acked_tail` before that, as the driver does (a
    /// request set up with `acked_tail = setup_head` has seven free
    /// slots). Kernel: the flow fill of
    /// `hfi1_rc_rcv_tid_rdma_write_resp()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` (`&mut self`).
    ///
    /// # Errors
    ///
    /// [`FlowError::NoFlowRecords`] without records; [`FlowError::Busy`]
    /// if the ring has no room relative to `acked_tail` (the driver drops
    /// such a response); [`FlowError::Invalid`] for no TID entry or no
    /// packet. Nothing changes on an error.
    pub fn push_remote(&mut self, seg: RemoteSegment, first: bool) -> Result<u16, FlowError> {
        if !self.has_flows() {
            return Err(FlowError::NoFlowRecords);
        }
        let head = self.setup_head;
        if ring_space(head, self.acked_tail) == 0 {
            return Err(FlowError::Busy);
        }
        if seg.tid_entries.is_empty() || seg.npkts == 0 {
            return Err(FlowError::Invalid);
        }
        let rec = self.flow_mut(head).ok_or(FlowError::NoFlowRecords)?;
        rec.tid_entries = seg.tid_entries;
        rec.tid_qpn = seg.tid_qpn;
        rec.idx = FlowIndex::new((seg.tid_qpn >> 11) & 0x1F);
        rec.length = seg.length;
        rec.npkts = seg.npkts;
        rec.psns = SegmentPsns {
            generation: seg.generation,
            spsn: seg.spsn,
            lpsn: seg.spsn.wrapping_add(seg.npkts).wrapping_sub(1),
            resp_ib_psn: seg.resp_ib_psn,
            ..SegmentPsns::default()
        };
        rec.pkt = 0;
        rec.tid_idx = 0;
        rec.tid_offset = 0;
        rec.sent = 0;
        rec.resync_npkts = 0;
        if first {
            self.acked_tail = head;
        }
        self.setup_head = ring_next(head);
        Ok(head)
    }

    /// A recorded segment's data has all been sent: `clear_tail` moves on.
    /// Kernel: the `clear_tail` step of `hfi1_make_tid_rdma_pkt()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` (`&mut self`).
    ///
    /// # Errors
    ///
    /// [`FlowError::Invalid`] if no recorded segment is unsent.
    pub fn sent_remote(&mut self) -> Result<(), FlowError> {
        if ring_count(self.setup_head, self.clear_tail) == 0 {
            return Err(FlowError::Invalid);
        }
        self.clear_tail = ring_next(self.clear_tail);
        Ok(())
    }

    /// The oldest sent segment was acknowledged: `acked_tail` moves on.
    /// Kernel: the `acked_tail` step of `hfi1_rc_rcv_tid_rdma_ack()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` (`&mut self`).
    ///
    /// # Errors
    ///
    /// [`FlowError::Invalid`] if every sent segment is acknowledged.
    pub fn acked_remote(&mut self) -> Result<(), FlowError> {
        if ring_count(self.clear_tail, self.acked_tail) == 0 {
            return Err(FlowError::Invalid);
        }
        self.acked_tail = ring_next(self.acked_tail);
        Ok(())
    }

    /// Segments recorded and not acknowledged.
    pub fn unacked_remote(&self) -> u16 {
        ring_count(self.setup_head, self.acked_tail)
    }

    /// The WRITE_REQ is resent whole: responses to come replace the
    /// recorded segments not yet sent, so `setup_head` goes back to
    /// `clear_tail`. Kernel: `rc.c`'s resend branch of the TID WRITE_REQ
    /// (`req->setup_head = req->clear_tail`).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` (`&mut self`).
    pub fn unrecord_unsent(&mut self) {
        self.setup_head = self.clear_tail;
    }

    /// A restart resends from the oldest unacknowledged segment:
    /// `clear_tail` goes back to `acked_tail`. Kernel: the
    /// `req->clear_tail = req->acked_tail` of
    /// `hfi1_tid_rdma_restart_req()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` (`&mut self`).
    pub fn resend_unacked(&mut self) {
        self.clear_tail = self.acked_tail;
    }
}

#[cfg(all(test, feature = "sim", not(loom)))]
mod tests {
    use super::*;
    use crate::sim::{SimPlatform, new_ctxt};
    use hfi1_hal::TidCtrl;
    use hfi1_hal::services::AllocContext;

    fn seg(qpn_flow: u32, spsn: u32, npkts: u32) -> RemoteSegment {
        let mut tid_entries = ArrayVec::new();
        tid_entries.push(TidEntry::new(0, TidCtrl::Pair, 2).unwrap());
        RemoteSegment {
            tid_entries,
            tid_qpn: 0x80_0000 | qpn_flow << 11 | 3,
            generation: Generation::new(7).unwrap(),
            spsn,
            resp_ib_psn: Psn::new(100 + spsn),
            length: npkts * 4096,
            npkts,
        }
    }

    /// The requester's ring: no room relative to `acked_tail`, not to
    /// `clear_tail` (a WRITE_RESP is dropped while eight are unacked, even
    /// if all were sent); the cursors only move, nothing else (these
    /// functions take no context: no chip, group or queue is reachable).
    #[test]
    fn remote_ring_is_bounded_by_acked_tail_and_programs_nothing() {
        let rcd = new_ctxt(1, 0, 2, 1, 1).unwrap();
        let mut req: TidRequest<SimPlatform> = TidRequest::new(256 * 1024, 4, 4096);
        assert_eq!(
            req.push_remote(seg(1, 0, 64), true),
            Err(FlowError::NoFlowRecords)
        );
        req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
        // A response naming no TID entry, or no packet, is refused and
        // records nothing.
        let mut empty = seg(1, 0, 64);
        empty.tid_entries.clear();
        assert_eq!(req.push_remote(empty, true), Err(FlowError::Invalid));
        assert_eq!(req.push_remote(seg(1, 0, 0), true), Err(FlowError::Invalid));
        assert_eq!((req.setup_head, req.unacked_remote()), (0, 0));
        req.setup_head = 5;
        req.clear_tail = 5;
        let at = req.push_remote(seg(9, 64, 64), true).unwrap();
        assert_eq!((at, req.acked_tail, req.setup_head), (5, 5, 6));
        let f = req.flow(5).unwrap();
        assert_eq!(f.idx.map(FlowIndex::get), Some(9));
        assert_eq!((f.psns.spsn, f.psns.lpsn), (64, 127));
        assert_eq!(f.psns.generation, Generation::new(7).unwrap());
        assert_eq!(f.psns.resp_ib_psn, Psn::new(164));
        for i in 1..7u32 {
            req.push_remote(seg(9, 64 * (i + 1), 64), false).unwrap();
            req.sent_remote().unwrap();
        }
        req.sent_remote().unwrap();
        assert_eq!(req.unacked_remote(), 7);
        assert_eq!(
            req.push_remote(seg(9, 0, 64), false),
            Err(FlowError::Busy),
            "all sent, none acked: no room"
        );
        assert_eq!(req.sent_remote(), Err(FlowError::Invalid));
        req.acked_remote().unwrap();
        req.push_remote(seg(9, 0, 64), false).unwrap();
        req.resend_unacked();
        assert_eq!(req.clear_tail, req.acked_tail);
        req.unrecord_unsent();
        assert_eq!(req.setup_head, req.acked_tail);
    }
}
