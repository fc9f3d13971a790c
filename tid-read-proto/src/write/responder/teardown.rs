// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Giving back everything the WRITE responder holds (QP reset or
//! destroy, or the error state): the hardware flow first, so late packets
//! fail, then every entry's programmed TIDs, DMA mappings and flow
//! records, and every region reference. Kernel: the TID WRITE half of
//! `hfi1_qp_kern_exp_rcv_clear_all()` with `hfi1_kern_clear_hw_flow()`.
//! And the reap timer's expiry, which gives everything back the same way
//! and errors the QP (`hfi1_tid_timeout()`).

use hfi1_hal::flags::TidFlags;
use tid_flow::{clear_all_segments, clear_hw_flow};

use super::{Env, RecvPath, RnrNakState};
use crate::rc::QpState;
use crate::write::WriteRegions;

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Clears the WRITE responder: flow, TIDs, mappings, flow records and
    /// region references; the ack queue's READ entries drop their
    /// references too.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    pub(crate) fn flush(&mut self, wmrs: &impl WriteRegions) {
        clear_hw_flow(self.rcd, self.qp, self.locked.again());
        self.release_held();
        for e in &mut self.w.entries {
            if e.req.has_flows() {
                clear_all_segments(self.rcd, &mut e.req, self.qp, self.locked.again());
                // Nothing is set up any more: cannot report busy.
                let _ = e.req.free_flow_records();
            }
            e.alloc_seg = e.comp_seg;
        }
        self.rsp.release_all(wmrs);
        self.w.alloc_w_segs = 0;
        self.w.pending_tid_w_segs = 0;
        self.w.sync_pt = false;
        self.w.rnr_nak_state = RnrNakState::Init;
        self.w.rnr_nak = None;
        self.w.tid_nak = None;
        self.w.flags = TidFlags::empty();
        self.w.reap.stop();
        self.w.r_tid_alloc = self.w.r_tid_head;
    }

    /// The reap timer expired: if it is logically armed (a WRITE_RESP
    /// still waits for its data), the flow and every TID come back and the
    /// QP goes to the error state (`IB_WC_RESP_TIMEOUT_ERR`: no NAK is
    /// sent). True if it acted; a late or stale expiry (the flag clear)
    /// does nothing. Kernel: `hfi1_tid_timeout()` (the `IB_EVENT_QP_FATAL`
    /// event is the verbs layer's to raise).
    ///
    /// # Locking
    ///
    /// `r_lock` (`_intr`) and the QP's `s_lock` held; takes `exp_lock`
    /// through `tid-flow`.
    pub(crate) fn reap_timeout(&mut self, _intr: &RecvPath, wmrs: &impl WriteRegions) -> bool {
        if !self.w.flags.contains(TidFlags::R_TID_RSC_TIMER) {
            return false;
        }
        self.w.stats.reap_expiries += 1;
        self.flush(wmrs);
        *self.state = QpState::Error;
        true
    }
}
