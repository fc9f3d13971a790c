// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a posted READ keeps ([`Wqe`]), and for a TID READ its request
//! state and its segments' ([`TidRead`], [`SegState`]).

use alloc::vec::Vec;
use hfi1_hal::Psn;
use hfi1_hal::consts::{MAX_FLOWS, PAGE_SIZE};
use tid_flow::{FlowPlatform, FlowRecord, Sge, TidRequest, ring_next};

use crate::qualify::div_round_up_mtu;
use crate::write::requester::{TidWrite, WriteWqe};

/// A TID READ request's state. Kernel: `req->state` (`TID_REQUEST_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReqState {
    /// Sending its segments.
    Active,
    /// At a SYNC point: waits for every segment in flight, then the flow
    /// moves to a fresh generation.
    Sync,
    /// Its next segment waits for a flow or RcvArray space.
    Queued,
    /// Re-sending its segments after a restart.
    Resend,
    /// Every segment completed.
    Complete,
}

/// What the requester keeps beside one flow record, on the same ring
/// slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SegState {
    /// The segment's index in its request.
    pub(crate) index: u32,
    /// Its READ_REQ is outstanding and counted in `pending_tid_r_segs`
    /// and `s_num_rd_atomic` (see the module doc's "counters after a
    /// restart").
    pub(crate) counted: bool,
}

/// The TID part of a READ. Kernel: `struct tid_rdma_request` (requester
/// side).
pub(crate) struct TidRead<P: FlowPlatform> {
    /// The flow ring and segment walk.
    pub(crate) req: TidRequest<P>,
    /// Kernel: `req->total_segs`.
    pub(crate) total_segs: u32,
    /// Segments requested (the next to request). Kernel: `req->cur_seg`.
    pub(crate) cur_seg: u32,
    /// Segments completed. Kernel: `req->comp_seg`.
    pub(crate) comp_seg: u32,
    /// Segments requested and not yet answered. Kernel:
    /// `req->ack_pending`.
    pub(crate) ack_pending: u32,
    /// Kernel: `req->state`.
    pub(crate) state: ReqState,
    /// IB PSN of the next segment's first packet. Kernel:
    /// `req->s_next_psn`.
    pub(crate) s_next_psn: Psn,
    /// Per ring slot, what the segment on it is.
    pub(crate) segs: [SegState; MAX_FLOWS],
}

impl<P: FlowPlatform> TidRead<P> {
    /// The state beside ring slot `k`.
    pub(crate) fn seg(&self, k: u16) -> SegState {
        self.segs.get(usize::from(k)).copied().unwrap_or_default()
    }

    /// The state beside ring slot `k`, mutably.
    pub(crate) fn seg_mut(&mut self, k: u16) -> Option<&mut SegState> {
        self.segs.get_mut(usize::from(k))
    }

    /// The ring slots of the segments set up and not yet completed,
    /// oldest first.
    pub(crate) fn live_slots(&self) -> impl Iterator<Item = u16> + use<P> {
        let (tail, head) = (self.req.clear_tail, self.req.setup_head);
        core::iter::successors(Some(tail), |&k| Some(ring_next(k))).take_while(move |&k| k != head)
    }

    /// The flow record of the oldest segment not completed, if one is set
    /// up. Kernel: `req->flows[req->clear_tail]`.
    pub(crate) fn oldest(&self) -> Option<&FlowRecord> {
        (self.req.in_flight() > 0)
            .then(|| self.req.flow(self.req.clear_tail))
            .flatten()
    }

    /// Bytes of segment `seg` of a READ of `length`.
    pub(crate) fn seg_bytes(&self, length: u32, seg: u32) -> u32 {
        let start = u64::from(seg) * u64::from(self.req.seg_len);
        let left = u64::from(length).saturating_sub(start);
        u32::try_from(left.min(u64::from(self.req.seg_len))).unwrap_or(0)
    }
}

/// One posted READ. Kernel: `struct rvt_swqe` with its
/// `tid_rdma_request`.
pub(crate) struct Wqe<P: FlowPlatform> {
    pub(crate) wr_id: u64,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(crate) length: u32,
    /// The local buffer, zero-length elements dropped.
    pub(crate) sges: Vec<Sge>,
    /// First IB PSN, given when the READ starts. Kernel: `wqe->psn`.
    pub(crate) psn: Psn,
    /// Last IB PSN (for a TID READ an upper bound until its last segment
    /// is set up). Kernel: `wqe->lpsn`.
    pub(crate) lpsn: Psn,
    /// It got its PSNs (it started once).
    pub(crate) started: bool,
    /// A plain READ's request is outstanding and counted in
    /// `s_num_rd_atomic`.
    pub(crate) counted: bool,
    /// The TID part; `None` for a plain RDMA READ (and for a WRITE).
    pub(crate) tid: Option<TidRead<P>>,
    /// `Some` for an RDMA WRITE (TID or plain): then the WQE is no READ.
    pub(crate) write: Option<WriteWqe<P>>,
}

impl<P: FlowPlatform> Wqe<P> {
    /// A work request as posted, not started (a WRITE's kind is set by
    /// its post).
    pub(crate) fn new(
        wr_id: u64,
        remote_addr: u64,
        rkey: u32,
        length: u32,
        sges: Vec<Sge>,
    ) -> Self {
        Self {
            wr_id,
            remote_addr,
            rkey,
            length,
            sges,
            psn: Psn::new(0),
            lpsn: Psn::new(0),
            started: false,
            counted: false,
            tid: None,
            write: None,
        }
    }

    /// The TID part of a TID WRITE.
    pub(crate) fn tid_write(&self) -> Option<&TidWrite<P>> {
        self.write.as_ref().and_then(|w| w.tid.as_ref())
    }

    /// The TID part of a TID WRITE, mutably.
    pub(crate) fn tid_write_mut(&mut self) -> Option<&mut TidWrite<P>> {
        self.write.as_mut().and_then(|w| w.tid.as_mut())
    }

    /// True for a plain RDMA WRITE.
    pub(crate) fn is_plain_write(&self) -> bool {
        self.write.as_ref().is_some_and(|w| w.tid.is_none())
    }

    /// The IB PSNs it takes when it starts: a plain READ one per response
    /// packet (`ceil(length / pmtu)`, one for a zero-length READ), a TID
    /// READ at most one per page. Kernel: the `wqe->lpsn` of
    /// `rvt_post_one_wr()` and `setup_tid_rdma_wqe()`.
    pub(crate) fn psns(&self, pmtu: u32) -> u32 {
        if let Some(w) = &self.write {
            // A TID WRITE takes one PSN per segment (its WRITE_RESPs), a
            // plain WRITE one per packet.
            return match &w.tid {
                Some(t) => t.total_segs.max(1),
                None => div_round_up_mtu(self.length, pmtu).max(1),
            };
        }
        if self.tid.is_some() {
            self.length.div_ceil(PAGE_SIZE).max(1)
        } else {
            div_round_up_mtu(self.length, pmtu).max(1)
        }
    }
}
