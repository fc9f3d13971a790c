// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a run still holds at its end, and after every QP is destroyed.

use super::{Observer, Report, Scenario};

impl<O: Observer> Scenario<'_, O> {
    /// Reads what is still held into `rep.leaked`, destroys every QP, and
    /// adds whatever is held after that as `after_destroy_*` (nothing may
    /// be).
    ///
    /// Region references are counted at the end of the run only if no
    /// responder's ack queue holds them: Linux 6.1 keeps one in an ack
    /// entry until the requester asks for that entry again, the slot is
    /// reused or the QP is reset (`rvt_reset_qp()`). A duplicate request
    /// (a retransmission, or a stale copy of one) re-arms its entry and
    /// takes a reference; if the send engine is then back at an earlier
    /// entry, it stops at the first entry it sent before and was not asked
    /// for again and moves its pointer to the head (`hfi1_make_rc_ack()`),
    /// past the re-armed one. A requester that has completed everything,
    /// or died, never asks for it again, so the reference waits for the
    /// destroy, where it is counted (`after_destroy_mr_refs`). A reference
    /// no entry holds is a leak at once.
    pub(super) fn held_at_end(&mut self, rep: &mut Report) {
        let leaks = self.nodes.leaks(&mut self.root);
        rep.leaked = leaks.iter().map(|(k, v)| (k.to_string(), v)).collect();
        let in_ack_queues = self.refs_in_ack_queues();
        if let Some(v) = rep.leaked.get_mut("mr_refs") {
            *v = v.saturating_sub(in_ack_queues);
        }
        let after = self.nodes.teardown(&mut self.root);
        for (k, v) in after.leaks.iter().filter(|&(_, v)| v > 0) {
            rep.leaked.insert(format!("after_destroy_{k}"), v);
        }
    }

    /// Region references the responders' ack entries hold.
    fn refs_in_ack_queues(&mut self) -> u64 {
        let mut n = 0;
        for qp in &self.nodes.responders {
            n += qp.s_lock.lock(&mut self.root).ext.responder.mr_refs() as u64;
        }
        n
    }
}
