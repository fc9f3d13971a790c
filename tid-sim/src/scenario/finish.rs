// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The end of a run: the counters gathered into the [`Report`], the QPs
//! left with work counted stuck.

use super::{Observer, Report, Scenario};
use crate::fabric::PacketKind;

impl<O: Observer> Scenario<'_, O> {
    /// Gathers the counters, reads what is still held, flushes every QP.
    pub fn finish(mut self) -> Report {
        let mut rep = std::mem::take(&mut self.rep);
        rep.sim_ns = self.clock.ns as u64;
        self.finish_details(&mut rep);
        let s = self.nodes.requester_stats(&mut self.root);
        rep.segments = s.segments;
        rep.plain_reads = s.plain_reads;
        rep.tid_reads = s.requests;
        rep.tid_waits = s.tid_waits;
        rep.flow_waits = s.flow_waits;
        rep.syncs = s.syncs;
        if std::env::var_os("TID_SIM_DEBUG").is_some() {
            eprintln!("requester stats {s:?}");
        }
        rep.resp_dropped = s.resp_dropped;
        rep.kdeth_errors = s.kdeth_errors;
        rep.retransmits = s.retransmits;
        rep.restarts = s.restarts;
        rep.timeouts = s.timeouts;
        rep.stale_dropped = s.stale_dropped;
        let r = self.nodes.responder_stats(&mut self.root);
        rep.naks = r.naks;
        self.finish_writes(&mut rep);
        for (k, v) in [
            ("requester_stale_generation", s.stale_dropped),
            ("requester_tid_error", s.tid_dropped),
            ("requester_ib_psn_check", s.psn_dropped),
            ("requester_sw_psn_check", s.sw_dropped),
            ("requester_ack_filter", s.ack_dropped),
            ("requester_no_request", s.no_request),
            ("responder_duplicate_ignored", r.duplicates_ignored),
            ("responder_in_error", r.dropped_in_error),
            ("responder_nak_dropped", r.naks_dropped),
        ] {
            rep.drops.insert(k.into(), v);
        }
        for (i, q) in rep.per_qp.iter_mut().enumerate() {
            let (req, resp) = self.nodes.states(i, &mut self.root);
            q.requester_state = req.name().into();
            q.responder_state = resp.name().into();
        }
        for i in 0..self.to_post.len() {
            if !self.to_post[i].is_empty() || self.nodes.posted(i).next().is_some() {
                rep.stuck_qps += 1;
                if std::env::var_os("TID_SIM_DEBUG").is_some() {
                    self.debug_stuck(i);
                }
            }
        }
        let (sa, sb) = (self.to_responder.stats(), self.to_requester.stats());
        rep.packets = sa.sent + sb.sent;
        rep.delivered = sa.delivered + sb.delivered;
        rep.duplicated = sa.duplicated + sb.duplicated;
        rep.stale_injected = sa.stale_injected + sb.stale_injected;
        rep.reordered = sa.reordered + sb.reordered;
        for (k, kind) in PacketKind::ALL.iter().enumerate() {
            let n =
                sa.dropped.get(k).copied().unwrap_or(0) + sb.dropped.get(k).copied().unwrap_or(0);
            *rep.drops
                .entry(format!("fabric_{}", kind.name()))
                .or_default() += n;
        }
        *rep.drops.entry("malformed".into()).or_default() += rep.malformed;
        self.held_at_end(&mut rep);
        rep.explain = self.ledger.explained();
        rep
    }

    fn debug_stuck(&mut self, i: usize) {
        {
            let g = self.nodes.responders[i].s_lock.lock(&mut self.root);
            eprintln!(
                "  responder {i}: flow {:?} {:?}",
                g.ext.flow, g.ext.write_responder
            );
        }
        let mut g = self.nodes.requesters[i].s_lock.lock(&mut self.root);
        eprintln!(
            "stuck qp {i}: waiting {} flow {:?} {:?}",
            g.waiting(),
            g.ext.flow,
            g.ext.requester
        );
        let (_, tok) = g.parts();
        let e = self.nodes.rcd.exp_lock.lock(tok);
        eprintln!(
            "  flow queue {:?} rarr queue {:?} free groups {}",
            e.waiters.iter(qp_wait::QueueKind::Flow).collect::<Vec<_>>(),
            e.waiters
                .iter(qp_wait::QueueKind::RcvArray)
                .collect::<Vec<_>>(),
            e.groups.free_groups()
        );
        let sched = &self.nodes.rcd.sched;
        eprintln!(
            "  triggers queued {} coalesced {} sends {}",
            sched.triggers_queued(),
            sched.triggers_coalesced(),
            sched.sends_scheduled()
        );
    }
}
