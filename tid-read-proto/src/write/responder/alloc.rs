// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Allocate or queue: a hardware flow and each segment's TIDs for the TID
//! WRITE entries from `r_tid_alloc` on, and the RNR NAK when the QP had to
//! wait. Kernel: `hfi1_tid_write_alloc_resources()`, `send_rnr_nak` (its
//! tail), `hfi1_compute_tid_rnr_timeout()`,
//! `hfi1_compute_tid_rdma_flow_wt()`, `position_in_queue()`.

use arrayvec::ArrayVec;
use hfi1_hal::consts::MAX_SEGMENT_PAGES;
use hfi1_hal::consts::{MAX_FLOWS, MAX_TID_FLOW_PSN};
use hfi1_hal::flags::TidFlags;
use hfi1_hal::lock_order::{LockToken, RLock};
use hfi1_hal::rnr::{flow_wt, rnr_nak_syndrome, rnr_timer_index, tid_rnr_timeout_us};
use tid_flow::{
    FlowError, PageWalk, SgeWalk, clear_hw_flow, ring_space, setup_hw_flow, setup_segment_with,
    wait_position,
};

use super::{Env, RnrNakState};
use crate::qualify::div_round_up_mtu;
use crate::responder::{EpisodeNak, Responder};
use crate::write::WriteRegions;

/// Proof that the caller holds the QP's `r_lock` (the receive path): only
/// it may schedule an RNR NAK, whose state (`r_nak_state`, `r_psn`) the
/// receive path owns. Made only from an `r_lock` token, and neither
/// `Clone` nor `Copy`. Kernel: `lockdep_assert_held(&qp->r_lock)` in
/// `hfi1_tid_write_alloc_resources()`.
#[derive(Debug)]
pub struct RecvPath {
    _held: (),
}

impl RecvPath {
    /// The receive path holds `r_lock`: `_token` proves it.
    pub fn held(_token: &LockToken<'_, RLock>) -> Self {
        Self { _held: () }
    }
}

/// Who allocates, which decides whether a wait becomes an RNR NAK.
/// Kernel: the `intr_ctx` argument.
#[derive(Debug, Clone, Copy)]
pub enum AllocCtx<'a> {
    /// The receive path (WRITE_REQ, WRITE_DATA): may RNR-NAK.
    Intr(&'a RecvPath),
    /// The first leg building a WRITE_RESP: never NAKs.
    SendEngine,
}

/// The region's pages from the request's cursor, no further than the
/// bytes of the request not yet allocated: the last segment of a request
/// that is not a multiple of the segment length takes only its own pages.
/// Kernel: `kern_find_pages()` on `req->ss`, whose SGE is as long as the
/// WRITE (`rvt_rkey_ok()` with the request's length).
struct RequestWalk<'a> {
    inner: SgeWalk<'a>,
    left: u32,
}

impl PageWalk for RequestWalk<'_> {
    fn find_pages(&mut self, seg_len: u32, pages: &mut ArrayVec<u64, MAX_SEGMENT_PAGES>) -> u32 {
        let found = self.inner.find_pages(seg_len.min(self.left), pages);
        self.left = self.left.saturating_sub(found);
        found
    }
}

/// Why the loop stopped waiting (the `-EAGAIN` cases), and the segments
/// the QP is expected to wait. Kernel: `to_seg`.
struct Wait(u32);

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Allocates what it can for the TID WRITE entries from `r_tid_alloc`
    /// on; from the receive path, a wait with no NAK owed schedules an RNR
    /// NAK. Kernel: `hfi1_tid_write_alloc_resources()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`self.locked`); takes `exp_lock` through
    /// `tid-flow`. With [`AllocCtx::Intr`], `r_lock` too.
    pub(crate) fn alloc_resources(&mut self, wmrs: &impl WriteRegions, ctx: AllocCtx<'_>) {
        let mut wait = None;
        loop {
            if self.w.rnr_nak_state == RnrNakState::Send {
                break;
            }
            if self.w.r_tid_alloc == self.w.r_tid_head {
                if self.locked.flow.index.is_some() && self.w.alloc_w_segs == 0 {
                    clear_hw_flow(self.rcd, self.qp, self.locked.again());
                    self.w.flags.remove(TidFlags::R_TID_SW_PSN);
                    self.release_held();
                }
                break;
            }
            let i = self.w.r_tid_alloc;
            let is_write = self.rsp.is_write(i);
            let Some(e) = self.w.entries.get(i).filter(|_| is_write) else {
                self.w.r_tid_alloc = Responder::next(i);
                continue;
            };
            if e.alloc_seg >= e.total_segs {
                self.w.r_tid_alloc = Responder::next(i);
                continue;
            }
            match self.alloc_one(i, wmrs) {
                Ok(true) => {}
                Ok(false) => break,
                Err(w) => {
                    wait = Some(w);
                    break;
                }
            }
        }
        if let (Some(Wait(to_seg)), AllocCtx::Intr(_)) = (wait, ctx) {
            if self.rsp.nak_state.is_none() {
                self.schedule_rnr_nak(to_seg);
            }
        }
    }

    /// One segment of entry `i`: `Ok(true)` allocated, `Ok(false)` stop
    /// without waiting, `Err` queued (or the ring is full) with the wait.
    fn alloc_one(&mut self, i: usize, wmrs: &impl WriteRegions) -> Result<bool, Wait> {
        let max_write = u32::from(self.conn.local.max_write);
        if self.w.alloc_w_segs >= max_write {
            return Ok(false);
        }
        if !self.hw_flow_ready()? {
            return Ok(false);
        }
        let (vaddr, mr) = match self.rsp.ack.get(i) {
            Some(a) => (a.vaddr, a.mr),
            None => return Ok(false),
        };
        let Some(e) = self.w.entries.get_mut(i) else {
            return Ok(false);
        };
        let npkts = div_round_up_mtu(e.req.seg_len, self.conn.pmtu);
        if self.locked.flow.psn.saturating_add(npkts) > MAX_TID_FLOW_PSN - 1 {
            self.w.sync_pt = true;
            return Ok(false);
        }
        if ring_space(e.req.setup_head, e.req.acked_tail) == 0 {
            // The second leg is behind with its ACKs; not queued.
            self.w.flags.insert(TidFlags::ACK_PENDING);
            return Err(Wait((MAX_FLOWS >> 1) as u32));
        }
        let Some((pages, _)) = mr.and_then(|m| wmrs.write_pages(m, vaddr)) else {
            self.w.stats.setup_errors += 1;
            return Ok(false);
        };
        let left = e
            .total_len
            .saturating_sub(e.alloc_seg.saturating_mul(e.req.seg_len));
        let mut cursor = e.req.cursor;
        let mut walk = RequestWalk {
            inner: SgeWalk {
                sges: pages,
                cursor: &mut cursor,
            },
            left,
        };
        let r = setup_segment_with(
            self.rcd,
            &mut e.req,
            self.qp,
            self.locked.again(),
            &mut walk,
        );
        e.req.cursor = cursor;
        match r {
            Ok(()) => {
                self.w.alloc_w_segs += 1;
                e.alloc_seg += 1;
                self.w.stats.segments_allocated += 1;
                Ok(true)
            }
            Err(FlowError::Again) => Err(Wait(self.position())),
            // Waits for memory (`hfi1_wait_kmem()`): no RNR.
            Err(FlowError::NoMemory) => Ok(false),
            Err(_) => {
                self.w.stats.setup_errors += 1;
                Ok(false)
            }
        }
    }

    /// The hardware flow for the next segment: at a sync point (the flow
    /// PSN space spent) once every allocated segment is in, the flow is
    /// released for a fresh one; held entries come back; a QP without a
    /// flow sets one up. `Ok(true)` the QP has its flow, `Ok(false)` stop
    /// without waiting, `Err` queued for a flow with the wait. Kernel:
    /// the sync-point and `hfi1_kern_setup_hw_flow()` steps of
    /// `hfi1_tid_write_alloc_resources()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    fn hw_flow_ready(&mut self) -> Result<bool, Wait> {
        if self.w.sync_pt {
            if self.w.alloc_w_segs > 0 {
                return Ok(false);
            }
            clear_hw_flow(self.rcd, self.qp, self.locked.again());
            self.w.sync_pt = false;
            self.w.flags.remove(TidFlags::R_TID_SW_PSN);
            self.release_held();
        }
        self.drain_held();
        if self.locked.flow.index.is_none() {
            match setup_hw_flow(self.rcd, self.qp, self.locked.again()) {
                Ok(()) => {}
                Err(FlowError::Again) => {
                    let pos = self.position();
                    return Err(Wait(flow_wt(self.conn.pmtu).saturating_mul(pos)));
                }
                Err(_) => {
                    self.w.stats.setup_errors += 1;
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// The QP's position on the queue it waits on (1 at the head).
    /// Kernel: `position_in_queue()`.
    fn position(&mut self) -> u32 {
        wait_position(self.rcd, self.qp, self.locked.again()).map_or(1, |(_, p)| p.max(1))
    }

    /// Schedules an RNR NAK for the segment being allocated: `r_psn` is
    /// pulled back to it, the entries after its request are forgotten
    /// (the requester's go-back-N resends them), and the first leg sends
    /// the NAK at the segment boundary. The syndrome is the receive side's
    /// NAK state for the episode, so a request ahead of the pulled-back
    /// `r_psn` earns no PSN NAK meanwhile. Kernel: `send_rnr_nak` in
    /// `hfi1_tid_write_alloc_resources()`, `hfi1_compute_tid_rnr_timeout()`.
    ///
    /// # Locking
    ///
    /// `r_lock` and the QP's `s_lock` held (only [`AllocCtx::Intr`] gets
    /// here).
    fn schedule_rnr_nak(&mut self, to_seg: u32) {
        let i = self.w.r_tid_alloc;
        let (Some(a), Some(e)) = (self.rsp.ack.get(i), self.w.entries.get(i)) else {
            return;
        };
        let index = rnr_timer_index(tid_rnr_timeout_us(to_seg, self.conn.egress));
        let psn = a.psn.add(e.alloc_seg);
        self.rsp.expected_psn = psn;
        self.rsp.head = Responder::next(i);
        self.w.r_tid_head = self.rsp.head;
        let syndrome = rnr_nak_syndrome(index);
        // Held as the episode's NAK: nothing else NAKs until it ends.
        self.rsp.nak_state = Some(EpisodeNak::Rnr(syndrome));
        self.w.rnr_nak = Some((syndrome, psn));
        self.w.rnr_nak_state = RnrNakState::Send;
        self.w.stats.rnr_scheduled += 1;
    }
}
