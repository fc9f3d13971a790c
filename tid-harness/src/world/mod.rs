// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! [`TwoNodes`]: a requester node (one receive context on a software chip,
//! its QPs, the destination memory the chip places READ data into) and a
//! responder node (its own receive context and chip, the peer QPs, their
//! memory regions, and the memory its chip places TID WRITE data into),
//! with the actions a fabric schedules between them and the resource
//! accounting at the end on both nodes. Here: building the nodes, posting
//! READs, and what can be asked of them; the READ half's actions are in
//! `requester` (actions 1, 4 and 5) and `responder` (2 and 3), the WRITE
//! half's in `write`, the accounting in `end`.
//!
//! The world holds no fabric: what the engines send waits in
//! [`TwoNodes::to_responders`] and [`TwoNodes::to_requesters`], and the
//! caller carries it over its own links (in order, shuffled, dropped,
//! copied) into [`TwoNodes::deliver_to_responder`] and
//! [`TwoNodes::deliver_to_requester`].

mod end;
mod outcome;
mod requester;
mod responder;
mod setup;
mod write;

pub use outcome::{Arrival, AtRequester, AtResponder, Done, Leaks, Posted, Ran, Teardown};
pub use setup::{
    Node, Numbering, REQUESTER, RESPONDER, RKEY_BASE, Setup, WRITE_RKEY_BASE, new_qp, new_qp_with,
    region_base, write_region_base,
};

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::lock_order::{Lock, LockToken, RLock, Unlocked};
use hfi1_hal::services::TidScheduler;
use hfi1_hal::sim::SimMemory;
use tid_flow::{RcvCtxt, Sge};
use tid_read_proto::qp;
use tid_read_proto::rc::{EngineError, QpState};
use tid_read_proto::requester::{ReadWr, ReqStats};
use tid_read_proto::responder::RespStats;

use crate::doubles::{self, Outbox, PageAllocator, Region, Regions, WritableRegion};

/// A QP's `r_lock` on platform `P` (it guards nothing the harness reads:
/// the receive paths' state is under `s_lock` here).
pub type RLockOf<P> = Lock<RLock, <P as qp_wait::WaitPlatform>::Lock, ()>;

/// The two nodes.
///
/// # Locking
///
/// Every action runs with no lock held (the `root` token) and takes one
/// QP's locks at a time: `r_lock` for a WRITE delivery to the responder,
/// `s_lock`, and the context's `exp_lock` inside it.
pub struct TwoNodes<P: Node> {
    setup: Setup,
    /// The requester node's receive context.
    pub rcd: Box<RcvCtxt<P>>,
    /// The responder node's receive context (a TID WRITE's TIDs and
    /// flows, its scheduler for the responders' trigger work and second
    /// legs).
    pub resp_rcd: Box<RcvCtxt<P>>,
    /// The responder QPs' `r_lock`s (`None` on a platform that cannot
    /// make one).
    pub r_locks: Vec<Option<RLockOf<P>>>,
    /// The responder node's memory: the pages of every writable region.
    pub resp_mem: SimMemory,
    /// The requester QPs.
    pub requesters: Vec<P::Ref>,
    /// Their peers on the responder node.
    pub responders: Vec<P::Ref>,
    /// The responder node's memory regions, one per QP.
    pub regions: Regions,
    /// The requester node's memory: every READ destination and WRITE
    /// source page.
    pub mem: SimMemory,
    /// Where destination pages come from.
    pub pages: PageAllocator,
    /// Packets the requesters sent, for the fabric to carry.
    pub to_responders: Outbox,
    /// Packets the responders sent.
    pub to_requesters: Outbox,
    posted: Vec<BTreeMap<u64, Posted>>,
    next_remote: Vec<u64>,
    next_write: Vec<u64>,
    next_wr: u64,
    ready: Vec<bool>,
    ready_queue: VecDeque<usize>,
}

impl<P: Node> core::fmt::Debug for TwoNodes<P>
where
    P::Sched: TidScheduler<P::Ref>,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TwoNodes")
            .field("setup", &self.setup)
            .field("outstanding", &self.outstanding())
            .finish_non_exhaustive()
    }
}

impl<P: Node> TwoNodes<P>
where
    P::Sched: TidScheduler<P::Ref>,
{
    /// Builds both nodes, or `None` without memory.
    pub fn new(setup: Setup) -> Option<Self> {
        let slots = u32::try_from(setup.qps).ok()?;
        let rcd = P::new_ctxt(u32::from(REQUESTER.ctxt), setup.groups, slots, setup.seed)?;
        let resp_seed = setup.seed ^ 0x5EED_0FB0;
        let resp_rcd = P::new_ctxt(
            u32::from(RESPONDER.ctxt),
            setup.resp_groups,
            slots,
            resp_seed,
        )?;
        let mut requesters = Vec::new();
        let mut responders = Vec::new();
        let mut regions = Regions::new();
        let mut resp_mem = SimMemory::new();
        let mut resp_pages = PageAllocator::new(setup.first_pfn.wrapping_add(1 << 28));
        for i in 0..setup.qps {
            let (rc, sc) = setup.connections(i);
            let (slot, cpu) = (u32::try_from(i).ok()?, u32::try_from(i % 4).ok()?);
            requesters.push(P::new_qp(rc.verbs_qpn, slot, cpu, rc, setup.first_psn)?);
            responders.push(P::new_qp(sc.verbs_qpn, slot, cpu, sc, setup.first_psn)?);
            regions.add(Region {
                base: region_base(i),
                len: setup.region_len,
                rkey: RKEY_BASE.wrapping_add(slot),
            });
            let pages = resp_pages.scattered(setup.write_region_len / u64::from(PAGE_SIZE));
            doubles::map(&mut resp_mem, &pages);
            regions.add_writable(WritableRegion {
                base: write_region_base(i),
                rkey: WRITE_RKEY_BASE.wrapping_add(slot),
                pages,
            });
        }
        Some(Self {
            setup,
            rcd,
            resp_rcd,
            r_locks: (0..setup.qps)
                .map(|_| P::new_rlock().map(|raw| Lock::with_raw(raw, ())))
                .collect(),
            resp_mem,
            requesters,
            responders,
            regions,
            mem: SimMemory::new(),
            pages: PageAllocator::new(setup.first_pfn),
            to_responders: Outbox::new(),
            to_requesters: Outbox::new(),
            posted: (0..setup.qps).map(|_| BTreeMap::new()).collect(),
            next_remote: (0..setup.qps).map(region_base).collect(),
            next_write: (0..setup.qps).map(write_region_base).collect(),
            next_wr: 1,
            ready: (0..setup.qps).map(|_| false).collect(),
            ready_queue: VecDeque::new(),
        })
    }

    /// How the nodes were built.
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    /// READs and WRITEs posted and not yet completed, over every QP.
    pub fn outstanding(&self) -> usize {
        self.posted.iter().map(BTreeMap::len).sum()
    }

    /// READs and WRITEs of requester `i` posted and not yet completed.
    pub fn posted(&self, i: usize) -> impl Iterator<Item = &Posted> {
        self.posted
            .iter()
            .skip(i)
            .take(1)
            .flat_map(BTreeMap::values)
    }

    /// True if requester `i`'s send queue takes another READ.
    pub fn can_post(&self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        self.requesters
            .get(i)
            .is_some_and(|qp| qp.s_lock.lock(root).ext.requester.can_post())
    }

    /// Posts a READ on requester `i` into `sges` (their pages join the
    /// destination memory) from the next bytes of its region. Returns the
    /// work-request id.
    ///
    /// # Errors
    ///
    /// What the requester refused the READ with (its pages leave the
    /// memory again).
    pub fn post(
        &mut self,
        i: usize,
        sges: Vec<Sge>,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Result<u64, EngineError> {
        let (Some(qp), Some(next)) = (self.requesters.get(i), self.next_remote.get_mut(i)) else {
            return Err(EngineError::QueueFull);
        };
        doubles::map(&mut self.mem, &sges);
        let wr_id = self.next_wr;
        let remote = *next;
        let rkey = RKEY_BASE.wrapping_add(u32::try_from(i).unwrap_or(u32::MAX));
        let r = {
            let mut g = qp.s_lock.lock(root);
            let wr = ReadWr {
                wr_id,
                remote_addr: remote,
                rkey,
                sges: &sges,
            };
            qp::post_read(&self.rcd, qp, &mut g, &wr)
        };
        if let Err(e) = r {
            doubles::unmap(&mut self.mem, &sges);
            return Err(e);
        }
        let length = sges.iter().map(|s| s.length).sum();
        *next = next.wrapping_add(u64::from(length));
        self.next_wr += 1;
        if let Some(p) = self.posted.get_mut(i) {
            p.insert(
                wr_id,
                Posted {
                    wr_id,
                    write: false,
                    remote,
                    sges,
                    length,
                },
            );
        }
        Ok(wr_id)
    }

    /// Wake-ups waiting: trigger work items, and QPs on the memory-wait
    /// list (the memory timer's).
    pub fn pending_work(&self) -> usize {
        self.rcd.sched.pending_work() + self.rcd.sched.kmem_waiters()
    }

    /// Requester send-engine runs scheduled.
    pub fn pending_sends(&self) -> usize {
        self.rcd.sched.pending_sends()
    }

    /// The requester index of a requester QP reference.
    fn requester_index(qp: &P::Ref) -> usize {
        qp.qpn().wrapping_sub(REQUESTER.qpn) as usize
    }

    /// The states of QP pair `i`: the requester's and the responder's.
    pub fn states(&self, i: usize, root: &mut LockToken<'_, Unlocked>) -> (QpState, QpState) {
        let req = self
            .requesters
            .get(i)
            .map_or(QpState::Error, |qp| qp.s_lock.lock(root).ext.state);
        let resp = self
            .responders
            .get(i)
            .map_or(QpState::Error, |qp| qp.s_lock.lock(root).ext.state);
        (req, resp)
    }

    /// The requesters' counters, summed.
    pub fn requester_stats(&self, root: &mut LockToken<'_, Unlocked>) -> ReqStats {
        let mut s = ReqStats::default();
        for qp in &self.requesters {
            s += qp.s_lock.lock(root).ext.requester.stats;
        }
        s
    }

    /// The responders' counters, summed.
    pub fn responder_stats(&self, root: &mut LockToken<'_, Unlocked>) -> RespStats {
        let mut s = RespStats::default();
        for qp in &self.responders {
            s += qp.s_lock.lock(root).ext.responder.stats;
        }
        s
    }
}
