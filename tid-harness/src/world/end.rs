// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The end of a run: what both nodes still hold ([`TwoNodes::leaks`]),
//! read from the real state, and the destroy of every QP
//! ([`TwoNodes::teardown`]).

use alloc::vec::Vec;

use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::TidScheduler;
use qp_wait::QueueKind;
use tid_alloc::groups::GroupList;
use tid_flow::RcvCtxt;
use tid_read_proto::qp;
use tid_read_proto::rc::QpState;

use super::{Leaks, Node, Teardown, TwoNodes};

/// One receive context's holdings: RcvArray entries, groups on the used
/// or full lists, flows, queued QPs, chip faults.
#[derive(Debug, Default)]
struct CtxtHeld {
    entries: u64,
    groups: u64,
    flows: u64,
    queued: u64,
    chip_faults: u64,
}

/// Reads `rcd`'s holdings under `qp`'s `s_lock` (any QP of the node: the
/// context's `exp_lock` is taken inside one).
///
/// # Locking
///
/// Takes `qp`'s `s_lock`, then `rcd`'s `exp_lock`.
fn ctxt_held<P: Node>(
    rcd: &RcvCtxt<P>,
    qp: Option<&P::Ref>,
    root: &mut LockToken<'_, Unlocked>,
) -> CtxtHeld {
    let Some(qp) = qp else {
        return CtxtHeld::default();
    };
    let mut g = qp.s_lock.lock(root);
    let (_, tok) = g.parts();
    let e = rcd.exp_lock.lock(tok);
    CtxtHeld {
        entries: u64::from(e.groups.entries_in_use()),
        groups: (e.groups.list_len(GroupList::Used) + e.groups.list_len(GroupList::Full)) as u64,
        flows: u64::from(e.flows.mask().count_ones()),
        queued: (e.waiters.len(QueueKind::Flow) + e.waiters.len(QueueKind::RcvArray)) as u64,
        chip_faults: e.chip.faults(),
    }
}

impl<P: Node> TwoNodes<P>
where
    P::Sched: TidScheduler<P::Ref>,
{
    /// What is held now on both nodes, read from the real state: each
    /// receive context's RcvArray, groups, flows and queues, every QP's
    /// flags and references, both DMA maps and flow-record allocators
    /// (the responder's beyond one block per WRITE ack-queue slot, which
    /// the slot keeps until the QP is destroyed), the regions and both
    /// chips.
    pub fn leaks(&self, root: &mut LockToken<'_, Unlocked>) -> Leaks {
        let a = ctxt_held(&self.rcd, self.requesters.first(), root);
        let b = ctxt_held(&self.resp_rcd, self.responders.first(), root);
        let waiting = |qps: &[P::Ref], root: &mut LockToken<'_, Unlocked>| {
            qps.iter()
                .map(|qp| u64::from(qp.s_lock.lock(root).waiting()))
                .sum::<u64>()
        };
        let mut l = Leaks {
            tid_entries: a.entries,
            tid_groups: a.groups,
            flows: a.flows,
            queued_qps: a.queued,
            chip_faults: a.chip_faults,
            waiting_qps: waiting(&self.requesters, root),
            resp_tid_entries: b.entries,
            resp_tid_groups: b.groups,
            resp_flows: b.flows,
            resp_queued_qps: b.queued,
            resp_chip_faults: b.chip_faults,
            resp_waiting_qps: waiting(&self.responders, root),
            ..Leaks::default()
        };
        for qp in self.requesters.iter().chain(&self.responders) {
            match qp.live_refs() {
                0 => l.qp_refs_over_released += 1,
                n => l.qp_refs += (n - 1) as u64,
            }
        }
        l.dma_mappings = self.rcd.dma.live_mappings() as u64;
        l.flow_records = P::live_allocations(&self.rcd.mem) as u64;
        l.resp_dma_mappings = self.resp_rcd.dma.live_mappings() as u64;
        // A WRITE entry keeps its flow records while its ack-queue slot
        // lives (6.1 allocates them for every slot at QP creation and
        // frees them at destroy): those are the QP's, not held by a
        // request; anything beyond them is.
        let by_slots: u64 = self
            .responders
            .iter()
            .map(|qp| {
                let g = qp.s_lock.lock(root);
                let w = &g.ext.write_responder;
                (0..)
                    .map_while(|k| w.entry(k))
                    .filter(|e| e.req.has_flows())
                    .count() as u64
            })
            .sum();
        let records = P::live_allocations(&self.resp_rcd.mem) as u64;
        l.resp_flow_records = records.saturating_sub(by_slots);
        l.mr_refs = self.regions.refs();
        l.mr_misuses = self.regions.misuses();
        l.oversized_packets = self.to_responders.oversized() + self.to_requesters.oversized();
        l
    }

    /// Resets responder `i` as the application resets a connection whose
    /// requester failed: its WRITE half gives back the flow, every TID,
    /// mapping, flow record and region reference
    /// ([`qp::flush_write_responder`], the WRITE half of 6.1's
    /// `hfi1_qp_kern_exp_rcv_clear_all()` on the reset path), any TID wait
    /// ends, and the QP goes to the error state, so packets still in
    /// flight to it are dropped. False if there is no such responder.
    ///
    /// # Locking
    ///
    /// Runs with no lock held (`root`); takes the QP's `r_lock` (when the
    /// platform has one), its `s_lock`, and `exp_lock` inside them.
    pub fn reset_responder(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        let Some(qp) = self.responders.get(i) else {
            return false;
        };
        match self.r_locks.get(i) {
            Some(Some(rl)) => {
                let mut r = rl.lock(root);
                let mut g = qp.s_lock.lock(r.token());
                qp::flush_write_responder(&self.resp_rcd, qp, &mut g, &self.regions);
                g.ext.state = QpState::Error;
            }
            _ => {
                let mut g = qp.s_lock.lock(root);
                qp::flush_write_responder(&self.resp_rcd, qp, &mut g, &self.regions);
                g.ext.state = QpState::Error;
            }
        }
        if let Some(r) = self.ready.get_mut(i) {
            *r = false;
        }
        self.ready_queue.retain(|&k| k != i);
        true
    }

    /// Destroys the QPs' state: every requester is flushed (its READs and
    /// WRITEs complete as flushed and its TIDs, flows and records go
    /// back), every responder gives back its TIDs, flows, records and
    /// region references, and both schedulers' queues are emptied.
    /// Returns the flush's completions and what is still held.
    pub fn teardown(&mut self, root: &mut LockToken<'_, Unlocked>) -> Teardown {
        let mut flushed = Vec::new();
        for i in 0..self.requesters.len() {
            if let Some(qp) = self.requesters.get(i) {
                let mut g = qp.s_lock.lock(root);
                qp::flush(&self.rcd, qp, &mut g);
            }
            flushed.extend(self.poll(i, root));
            if let Some(qp) = self.responders.get(i) {
                let mut g = qp.s_lock.lock(root);
                qp::flush_write_responder(&self.resp_rcd, qp, &mut g, &self.regions);
            }
        }
        // The memory-wait list gives its references back as
        // `flush_qp_waiters()` does at reset.
        while self.tick_memory_timer(root).is_some() {}
        for sched in [&self.rcd.sched, &self.resp_rcd.sched] {
            while sched.pop_work().is_some() {}
            while sched.pop_send().is_some() {}
            while sched.pop_tid_send().is_some() {}
        }
        self.ready.iter_mut().for_each(|r| *r = false);
        self.ready_queue.clear();
        Teardown {
            flushed,
            leaks: self.leaks(root),
        }
    }
}
