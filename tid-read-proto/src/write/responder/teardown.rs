// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Giving back everything the WRITE responder holds (QP reset or
//! destroy, or the error state): the hardware flow first, so late packets
//! fail, then every entry's programmed TIDs, DMA mappings and flow
//! records, and every region reference. Kernel: the TID WRITE half of
//! `hfi1_qp_kern_exp_rcv_clear_all()` with `hfi1_kern_clear_hw_flow()`.

use hfi1_hal::flags::TidFlags;
use tid_flow::{clear_hw_flow, exp_rcv_clear_all};

use super::{Env, RnrNakState};
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
        for e in &mut self.w.entries {
            if e.req.has_flows() {
                exp_rcv_clear_all(self.rcd, &mut e.req, self.qp, self.locked.again());
                // Nothing is set up any more: cannot report busy.
                let _ = e.req.clean_swqe();
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
}
