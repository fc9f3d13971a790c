// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID part of one request: its flow ring (allocated on first use)
//! and cursors, and the sim-facing setup and teardown entry points.

use hfi1_hal::Psn;
use hfi1_hal::services::{AllocContext, Memory};

use super::walk::{SgeCursor, SgeWalk};
use super::{FlowRecord, FlowRing, Sge, ring_count, ring_indices};
use crate::FlowError;
use crate::ctxt::{FlowPlatform, QpLocked, RcvCtxt};
use crate::setup::{
    FlowRingStore, clear_all_segments_with, clear_segment_with, setup_segment_with,
};

/// The TID part of one RDMA READ request (one WQE).
/// Kernel: `struct tid_rdma_request`.
///
/// # Locking
///
/// Guarded by the QP's `s_lock` (the protocol keeps it with the QP's
/// send queue).
pub struct TidRequest<P: FlowPlatform> {
    flows: Option<<P::Mem as Memory>::Boxed<FlowRing>>,
    /// Next record to set up. Kernel: `setup_head`.
    pub setup_head: u16,
    /// Next record to clear. Kernel: `clear_tail`.
    pub clear_tail: u16,
    /// The record the protocol is building or sending (its cursor; this
    /// crate does not move it). Kernel: `flow_idx`.
    pub flow_idx: u16,
    /// The oldest record not yet acknowledged (TID RDMA WRITE, both
    /// roles; the ring has no room when `setup_head` would reach it).
    /// Kernel: `acked_tail`.
    pub acked_tail: u16,
    /// Segments allowed in flight: for a READ requester the peer's
    /// `max_read` (at most 6), for a WRITE the `max_write` (at most 4: the
    /// responder's own, the requester the peer's). Kernel: `n_flows`.
    pub n_flows: u16,
    /// Bytes per segment. Kernel: `seg_len`.
    pub seg_len: u32,
    /// The QP's path MTU (4096 picks the 4 KiB page-set variant).
    pub pmtu: u32,
    /// The segment walk over the SGE list.
    pub cursor: SgeCursor,
}

impl<P: FlowPlatform> core::fmt::Debug for TidRequest<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TidRequest")
            .field("allocated", &self.flows.is_some())
            .field("setup_head", &self.setup_head)
            .field("clear_tail", &self.clear_tail)
            .field("flow_idx", &self.flow_idx)
            .field("acked_tail", &self.acked_tail)
            .field("n_flows", &self.n_flows)
            .finish_non_exhaustive()
    }
}

impl<P: FlowPlatform> TidRequest<P> {
    /// A request with no flow records yet. Kernel: `hfi1_init_trdma_req()`.
    pub fn new(seg_len: u32, n_flows: u16, pmtu: u32) -> Self {
        Self {
            flows: None,
            setup_head: 0,
            clear_tail: 0,
            flow_idx: 0,
            acked_tail: 0,
            n_flows,
            seg_len,
            pmtu,
            cursor: SgeCursor::default(),
        }
    }

    /// Allocates the flow records if not done yet (they start zeroed).
    /// Kernel: `hfi1_kern_exp_rcv_alloc_flows()`.
    ///
    /// # Errors
    ///
    /// [`FlowError::NoMemory`]: the request then stays a plain RDMA READ.
    pub fn alloc_flows(&mut self, mem: &P::Mem, ctx: AllocContext) -> Result<(), FlowError> {
        if self.flows.is_some() {
            return Ok(());
        }
        let b = mem
            .try_box_in_place::<FlowRing>(ctx)
            .map_err(|_| FlowError::NoMemory)?;
        self.flows = Some(b);
        Ok(())
    }

    /// Frees the flow records. Kernel: `__trdma_clean_swqe()` /
    /// `hfi1_kern_exp_rcv_free_flows()`.
    ///
    /// The records go whatever they hold, as in the driver; the ring
    /// starts over for the request's next use (the driver does that when
    /// it sets the WQE up again).
    ///
    /// # Errors
    ///
    /// [`FlowError::Busy`] if the records still held set-up segments or
    /// mappings (a release the caller missed: their RcvArray entries and
    /// mappings are lost, as in the driver); the records are freed anyway.
    pub fn free_flow_records(&mut self) -> Result<(), FlowError> {
        let busy = ring_count(self.setup_head, self.clear_tail) != 0 || self.holds_mappings();
        self.flows = None;
        self.setup_head = 0;
        self.clear_tail = 0;
        self.flow_idx = 0;
        self.acked_tail = 0;
        self.cursor = SgeCursor::default();
        if busy { Err(FlowError::Busy) } else { Ok(()) }
    }

    /// True if a flow record holds a DMA mapping.
    pub fn holds_mappings(&self) -> bool {
        self.flows
            .as_ref()
            .is_some_and(|r| r.iter().any(|f| f.mapped != 0))
    }

    /// True once the flow records are allocated.
    pub fn has_flows(&self) -> bool {
        self.flows.is_some()
    }

    /// Segments set up and not yet cleared.
    pub fn in_flight(&self) -> u16 {
        ring_count(self.setup_head, self.clear_tail)
    }

    /// Flow record `i` (0..8).
    pub fn flow(&self, i: u16) -> Option<&FlowRecord> {
        self.flows.as_ref()?.get(usize::from(i))
    }

    /// Flow record `i` (0..8), mutably.
    pub fn flow_mut(&mut self, i: u16) -> Option<&mut FlowRecord> {
        self.flows.as_mut()?.get_mut(usize::from(i))
    }

    /// The record whose IB PSN range holds `psn`, oldest first, with its
    /// ring index. Kernel: `find_flow_ib()`.
    pub fn find_flow_ib(&self, psn: Psn) -> Option<(u16, &FlowRecord)> {
        let ring = self.flows.as_ref()?;
        ring_indices(self.clear_tail, self.setup_head)
            .map_while(|i| ring.get(usize::from(i)).map(|f| (i, f)))
            .find(|(_, f)| psn.within(f.psns.ib_spsn, f.psns.ib_lpsn))
    }
}

impl<P: FlowPlatform> FlowRingStore for TidRequest<P> {
    type Record<'a> = &'a mut FlowRecord;

    fn setup_head(&self) -> u16 {
        self.setup_head
    }

    fn set_setup_head(&mut self, v: u16) {
        self.setup_head = v;
    }

    fn clear_tail(&self) -> u16 {
        self.clear_tail
    }

    fn set_clear_tail(&mut self, v: u16) {
        self.clear_tail = v;
    }

    fn n_flows(&self) -> u16 {
        self.n_flows
    }

    fn seg_len(&self) -> u32 {
        self.seg_len
    }

    fn pmtu(&self) -> u32 {
        self.pmtu
    }

    fn record(&mut self, i: u16) -> Option<&mut FlowRecord> {
        self.flows.as_mut()?.get_mut(usize::from(i))
    }
}

/// Sets up the next segment. Kernel: `hfi1_kern_exp_rcv_setup()`.
///
/// [`crate::setup::setup_segment_with`] on a sim request, walking `sges`
/// from the request's cursor.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, and `req` which it guards); takes
/// `exp_lock`.
///
/// # Errors
///
/// As [`crate::setup::setup_segment_with`].
pub fn setup_segment<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    req: &mut TidRequest<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
    sges: &[Sge],
) -> Result<(), FlowError> {
    let mut cursor = req.cursor;
    let r = setup_segment_with(
        rcd,
        req,
        qp,
        qp_locked,
        &mut SgeWalk {
            sges,
            cursor: &mut cursor,
        },
    );
    req.cursor = cursor;
    r
}

/// Tears down the oldest segment. Kernel: `hfi1_kern_exp_rcv_clear()`.
///
/// [`crate::setup::clear_segment_with`] on a sim request.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, `req`); takes `exp_lock`.
///
/// # Errors
///
/// As [`crate::setup::clear_segment_with`].
pub fn clear_segment<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    req: &mut TidRequest<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
) -> Result<(), FlowError> {
    clear_segment_with(rcd, req, qp, qp_locked)
}

/// Tears down every segment. Kernel: `hfi1_kern_exp_rcv_clear_all()`.
///
/// [`crate::setup::clear_all_segments_with`] on a sim request.
///
/// # Locking
///
/// As [`clear_segment`].
pub fn clear_all_segments<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    req: &mut TidRequest<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
) {
    clear_all_segments_with(rcd, req, qp, qp_locked);
}
