// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a run still holds at its end, and after every QP is destroyed.

use tid_read_proto::rc::QpState;

use super::{Observer, Report, Scenario};

impl<O: Observer> Scenario<'_, O> {
    /// Reads what is still held into `rep.leaked`, destroys every QP, and
    /// adds whatever is held after that as `after_destroy_*` (nothing may
    /// be).
    pub(super) fn held_at_end(&mut self, rep: &mut Report) {
        let leaks = self.nodes.leaks(&mut self.root);
        rep.leaked = leaks.iter().map(|(k, v)| (k.to_string(), v)).collect();
        let parked = self.refs_parked_for_dead_peers();
        if let Some(v) = rep.leaked.get_mut("mr_refs") {
            *v = v.saturating_sub(parked);
        }
        let after = self.nodes.teardown(&mut self.root);
        for (k, v) in after.leaks.iter().filter(|&(_, v)| v > 0) {
            rep.leaked.insert(format!("after_destroy_{k}"), v);
        }
    }

    /// Region references held by the ack queue of a responder whose
    /// requester ended in the error state. Linux 6.1 keeps them until the
    /// responder QP is destroyed: its send engine stops at an entry it
    /// sent before and was not asked for again (`hfi1_make_rc_ack()`
    /// moves the send pointer to the head), so a later entry that a
    /// duplicate request re-armed meanwhile keeps its `rdma_sge.mr` until
    /// the requester asks for it, the slot is reused or `rvt_reset_qp()`
    /// clears it. A dead requester never asks again, so these are counted
    /// at destroy (`after_destroy_mr_refs`), not at the end of the run.
    fn refs_parked_for_dead_peers(&mut self) -> u64 {
        let mut n = 0;
        for i in 0..self.nodes.responders.len() {
            let (req, _) = self.nodes.states(i, &mut self.root);
            if req == QpState::Error {
                let g = self.nodes.responders[i].s_lock.lock(&mut self.root);
                n += g.ext.responder.mr_refs() as u64;
            }
        }
        n
    }
}
