// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The WRITE half of a run: which requests are WRITEs (`--ops`), and the
//! counters both nodes' WRITE engines kept, gathered into the report.
//!
//! A `mix` run draws each request from its own generator (seeded from
//! `--seed`), so a READ run's schedule, page layout and faults stay what
//! they were before WRITEs existed.

use super::*;

/// Every QP's requests, each marked as a WRITE or not: `read` none,
/// `write` all, `mix` each with probability one half.
pub(super) fn requests(
    opts: &Options,
    sizes: impl Iterator<Item = VecDeque<u32>>,
) -> Vec<VecDeque<(u32, bool)>> {
    let mut r = Rng::new(opts.seed ^ 0x4D49_5845);
    sizes
        .map(|q| {
            q.into_iter()
                .map(|len| {
                    let write = match opts.ops {
                        Ops::Read => false,
                        Ops::Write => true,
                        Ops::Mix => r.chance(0.5),
                    };
                    (len, write)
                })
                .collect()
        })
        .collect()
}

impl<O: Observer> Scenario<'_, O> {
    /// Gathers the WRITE counters of every requester and responder.
    pub(super) fn finish_writes(&mut self, rep: &mut Report) {
        let w = &mut rep.write;
        for qp in &self.nodes.requesters {
            let g = qp.s_lock.lock(&mut self.root);
            let s = g.ext.requester.write_state().stats;
            w.tid_writes += s.tid_writes;
            w.plain_writes += s.plain_writes;
            w.write_reqs += s.write_reqs + s.write_req_resends;
            w.segments += s.segments_sent;
            w.segments_acked += s.segments_acked;
            w.data_packets += s.data_packets;
            w.resyncs += s.resyncs;
            w.resync_acks += s.resync_acks;
            w.tid_retry_expiries += s.tid_retry_expiries;
            w.second_leg_runs += s.second_leg_runs;
        }
        for qp in &self.nodes.responders {
            let g = qp.s_lock.lock(&mut self.root);
            let s = g.ext.write_responder.stats;
            w.write_resps += s.write_resps;
            w.tid_acks += s.tid_acks;
            w.tid_naks += s.tid_naks;
            w.rnr_naks += s.rnr_sent;
        }
    }
}
