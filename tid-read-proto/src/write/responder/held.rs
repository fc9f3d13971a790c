// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Held TIDs: a received segment's RcvArray entries are written INVALID
//! and unmapped at its last packet, as 6.1 does, but stay out of reuse
//! until the QP's flow leaves the generation they served. Kernel: the
//! `hfi1_kern_exp_rcv_clear()` of `hfi1_rc_rcv_tid_rdma_write_data()`,
//! split in two (`tid_flow::retire`).
//!
//! Deviation: 6.1 hands the entries out again at once. The chip places a
//! sequence-error packet whenever its TID is valid, so a late copy of the
//! finished segment (a duplicate, a reordered or a stale packet, which
//! still passes the generation check while the flow keeps its generation)
//! lands in the buffer of whichever segment took the entries next, on
//! this QP or another, and corrupts a WRITE that then completes
//! successfully (`tid-sim/tests/write_faults.rs`:
//! `late_copies_of_a_received_segment_do_not_reach_the_next_owner`).
//! The READ requester keeps
//! its completed segments' entries for the same reason.
//!
//! The entries come back when the flow's generation moves: the flow is
//! cleared (no request left, a sync point, the error state), a RESYNC
//! re-arms it, or, once no segment is allocated, the flow is moved to a
//! fresh generation on purpose so the next segment (this QP's or a
//! waiting one's) can have them at once.

use tid_flow::{regenerate_hw_flow, release_retired, retire_segment};

use super::Env;
use hfi1_hal::flags::TidFlags;

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Retires the oldest segment of entry `i`: its entries INVALID and
    /// unmapped, `clear_tail` on, the entries held. False on an empty ring.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    pub(super) fn retire_segment(&mut self, i: usize) -> bool {
        let Some(e) = self.w.entries.get_mut(i) else {
            return false;
        };
        let Ok(r) = retire_segment(self.rcd, &mut e.req, self.locked.again()) else {
            return false;
        };
        if r.is_empty() {
            return true;
        }
        if self.w.held.try_reserve(1).is_err() {
            // No memory to hold them: give them back now, as 6.1 does.
            release_retired(self.rcd, self.qp, self.locked.again(), r);
            return true;
        }
        self.w.held.push(r);
        true
    }

    /// Gives every held entry back (waking the RcvArray queue's head).
    /// Called only once the flow left the generation they served.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    pub(super) fn release_held(&mut self) {
        for r in self.w.held.drain(..) {
            release_retired(self.rcd, self.qp, self.locked.again(), r);
        }
    }

    /// With no segment allocated and entries held, the flow moves to a
    /// fresh generation (keeping its slot) and the entries come back.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    pub(super) fn drain_held(&mut self) {
        if self.w.alloc_w_segs != 0 || self.w.held.is_empty() {
            return;
        }
        if regenerate_hw_flow(self.rcd, self.locked.again()) {
            self.w.flags.remove(TidFlags::R_TID_SW_PSN);
            self.w.stats.regenerations += 1;
        }
        self.release_held();
    }
}
