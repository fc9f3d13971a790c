// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a [`Scenario`] shows its observer and adds to its report beyond
//! the counters: every packet the fabric carried at its wire time,
//! progress, samples of the state, completions by status and per QP.

use tid_harness::world::Done;

use crate::fabric::{Origin, Packet as _};

use super::*;

impl<O: Observer> Scenario<'_, O> {
    /// Shows the observer one packet the fabric carried (capture after
    /// the fault injector), at wire time `at_ns`.
    pub(super) fn seen(&mut self, link: u8, at_ns: f64, bytes: &[u8], fate: Fate) {
        if self.obs.wants_packets() {
            self.obs.packet(&Seen {
                time_ns: at_ns as u64,
                link,
                bytes,
                fate,
            });
        }
    }

    /// Serialises a delivered packet on the wire: advances the clock by
    /// its time at the link rate and returns when it started.
    pub(super) fn serialise(&mut self, len: usize) -> f64 {
        let start = self.clock.ns;
        self.clock.ns += len as f64 / WIRE_BYTES_PER_NS;
        start
    }

    /// The next packet off link `link` (0 to the responder, 1 to the
    /// requester), serialised on the wire and shown to the observer.
    pub(super) fn take_delivery(&mut self, link: u8) -> Option<WirePacket> {
        let l = if link == 0 {
            &mut self.to_responder
        } else {
            &mut self.to_requester
        };
        let d = l.deliver_marked(&mut self.rng)?;
        let fault = match d.origin {
            Origin::Sent => None,
            Origin::Duplicate => Some(Fault::Duplicate),
            Origin::Stale => Some(Fault::Stale),
        };
        if let Some(f) = fault {
            self.ledger
                .fault(super::deliver::pair_of(link, d.packet.flow()), f);
        }
        let start = self.serialise(d.packet.bytes.len());
        let fate = Fate::Delivered {
            origin: d.origin,
            overtook: d.overtook,
        };
        self.seen(link, start, &d.packet.bytes, fate);
        self.clock.since_progress = 0;
        Some(d.packet)
    }

    /// Counts one completion: by status (the kernel's names), per QP and,
    /// for a successful READ or WRITE, its bytes as the check found them; a status
    /// the fabric cannot explain is counted wrong.
    pub(super) fn count_completion(&mut self, d: &Done) {
        let status = d.completion.status;
        let ok = status == WcStatus::Success;
        let data = d.data.unwrap_or_default();
        *self
            .rep
            .completions
            .entry(status.name().into())
            .or_default() += 1;
        if ok {
            self.rep.requests += 1;
            self.rep.succeeded_bytes += d.posted.as_ref().map_or(0, |p| u64::from(p.length));
            self.rep.mismatched_bytes += data.mismatched;
            self.rep.verified_bytes += data.verified;
            if d.posted.as_ref().is_some_and(|p| p.write) {
                self.rep.write.requests += 1;
                self.rep.write.verified_bytes += data.verified;
            }
        } else {
            self.rep.failed_requests += 1;
            if status == WcStatus::RetryExceeded {
                self.ledger.retry_exceeded(d.qp);
            }
            if !self.fabric_explains(status) {
                self.rep.wrong_statuses += 1;
            }
        }
        if let Some(q) = self.rep.per_qp.get_mut(d.qp) {
            if ok {
                q.requests += 1;
                q.verified_bytes += data.verified;
                q.mismatched_bytes += data.mismatched;
            } else {
                q.failed_requests += 1;
            }
        }
    }

    /// After a step: progress every `PROGRESS_STEPS` steps, a sample
    /// when one is due.
    pub fn observe(&mut self) {
        if self.rep.steps % PROGRESS_STEPS == 0 {
            self.report_progress();
        }
        if let Some(due) = self.obs.sample_due_ns() {
            if self.clock.ns as u64 >= due {
                let s = self.sample();
                self.obs.sample(s);
            }
        }
    }

    /// At the end of the run: the last sample, so the series ends where
    /// the run did.
    pub fn last_sample(&mut self) {
        if self.obs.sample_due_ns().is_some() {
            let s = self.sample();
            self.obs.sample(s);
        }
    }

    /// True if requester `i` has nothing left to post or complete.
    fn qp_done(&self, i: usize) -> bool {
        self.to_post.get(i).is_none_or(VecDeque::is_empty) && self.nodes.posted(i).next().is_none()
    }

    /// Tells the observer where the run stands.
    pub fn report_progress(&mut self) {
        let qps_done = (0..self.to_post.len()).filter(|&i| self.qp_done(i)).count();
        let p = Progress {
            verified_bytes: self.rep.verified_bytes,
            requested_bytes: self.rep.requested_bytes,
            requests_done: self.rep.requests + self.rep.failed_requests,
            qps_done: u32::try_from(qps_done).unwrap_or(u32::MAX),
            qps: u32::try_from(self.to_post.len()).unwrap_or(u32::MAX),
            restarts: self.nodes.requester_stats(&mut self.root).restarts,
            sim_ns: self.clock.ns as u64,
        };
        self.obs.progress(&p);
    }

    /// The state now, read from the receive context (under a QP's
    /// `s_lock` and the context's `exp_lock`) and the requesters'
    /// counters.
    pub fn sample(&mut self) -> Sample {
        let mut s = Sample {
            t_ns: self.clock.ns as u64,
            wire_bytes_to_requester: self.clock.wire_to_requester,
            verified_bytes: self.rep.verified_bytes,
            ..Sample::default()
        };
        if let Some(qp) = self.nodes.requesters.first() {
            let mut g = qp.s_lock.lock(&mut self.root);
            let (_, tok) = g.parts();
            let e = self.nodes.rcd.exp_lock.lock(tok);
            s.tid_entries = vec![e.groups.entries_in_use()];
            s.flows = e.flows.mask().count_ones();
            s.wait_flow = u32::try_from(e.waiters.len(qp_wait::QueueKind::Flow)).unwrap_or(0);
            s.wait_tid = u32::try_from(e.waiters.len(qp_wait::QueueKind::RcvArray)).unwrap_or(0);
        }
        let st = self.nodes.requester_stats(&mut self.root);
        (s.restarts, s.naks, s.timeouts) = (st.restarts, st.naks, st.timeouts);
        s
    }

    /// An empty series for this run's context.
    pub fn new_series(opts: &Options) -> Series {
        Series::new(vec![opts.groups * 8], NUM_TID_FLOWS as u32, opts.qps)
    }

    /// Per-QP counters, the tool and the memory high-water mark.
    pub(super) fn finish_details(&mut self, rep: &mut Report) {
        rep.tool = "tid-sim".into();
        rep.version = env!("CARGO_PKG_VERSION").into();
        rep.peak_resident_pages = self.nodes.mem.peak_resident_pages() as u64;
        for i in 0..self.nodes.requesters.len() {
            let stuck = !self.qp_done(i);
            let Some(qp) = self.nodes.requesters.get(i) else {
                continue;
            };
            let st = qp.s_lock.lock(&mut self.root).ext.requester.stats;
            if let Some(q) = rep.per_qp.get_mut(i) {
                q.segments = st.segments;
                q.tid_waits = st.tid_waits;
                q.flow_waits = st.flow_waits;
                q.restarts = st.restarts;
                q.timeouts = st.timeouts;
                q.stuck = stuck;
            }
        }
    }
}
