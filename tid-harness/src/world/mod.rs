// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! [`TwoNodes`]: a requester node (one receive context on a software chip,
//! its QPs, the destination memory the chip places READ data into) and a
//! responder node (its own receive context and chip, the peer QPs, their
//! memory regions, and the memory its chip places TID WRITE data into),
//! with the actions a fabric schedules between them and the resource
//! accounting at the end on both nodes. The WRITE half is in `write`.
//!
//! The world holds no fabric: what the engines send waits in
//! [`TwoNodes::to_responders`] and [`TwoNodes::to_requesters`], and the
//! caller carries it over its own links (in order, shuffled, dropped,
//! copied) into [`TwoNodes::deliver_to_responder`] and
//! [`TwoNodes::deliver_to_requester`].

mod end;
mod outcome;
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

use hfi1_hal::FlowPsn;
use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::lock_order::{Lock, LockToken, RLock, Unlocked};
use hfi1_hal::services::TidScheduler;
use hfi1_hal::sim::SimMemory;
use tid_flow::{RcvCtxt, Sge};
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::qp;
use tid_read_proto::rc::retry::Timer;
use tid_read_proto::rc::{Completion, EngineError, QpState, WcStatus};
use tid_read_proto::requester::{ReadWr, ReqStats};
use tid_read_proto::responder::RespStats;

use crate::chip::{self, Arriving, DestMemory};
use crate::doubles::{self, MemSource, Outbox, PageAllocator, Region, Regions, WritableRegion};

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

    /// Action 1a: runs the oldest trigger work item (a wake-up: the QP's
    /// send engine if it still waits); with none queued, the memory timer
    /// ticks instead ([`Self::tick_memory_timer`]). `None` if neither had
    /// anything to do.
    pub fn run_trigger_work(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        match self.run_work_item(root) {
            Some(r) => Some(r),
            None => self.tick_memory_timer(root),
        }
    }

    /// The oldest trigger work item, if one is queued.
    fn run_work_item(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let (_, qp) = self.rcd.sched.pop_work()?;
        let i = Self::requester_index(&qp);
        let (rcd, out, src) = (&self.rcd, &mut self.to_responders, MemSource(&self.mem));
        let mut result = Ok(());
        qp_wait::trigger_resume::<P>(qp, root, |qp, root| {
            result = qp::send_engine_with(rcd, qp, root, out, &src);
        });
        Some(Ran { qp: i, result })
    }

    /// One tick of the memory timer: the QP longest on the memory-wait
    /// list leaves it and has its send engine scheduled, as the kernel's
    /// `mem_timer()` wakes one waiter per tick with `hfi1_qp_wakeup(qp,
    /// RVT_S_WAIT_KMEM)`. A QP is there when a DMA mapping of its segment
    /// failed: the sim's map fails only when told to (`rcd.dma.fail_in`)
    /// or for a page set starting at a page another segment still has
    /// mapped (a READ posted into the pages of one in flight). Returns
    /// that QP (with `Ok`: the engine runs with the scheduled sends), or
    /// `None` if none waits.
    pub fn tick_memory_timer(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let qp = self.rcd.sched.kmem_tick()?;
        kmem_wakeup::<P>(&qp, &mut qp.s_lock.lock(root).flags, &self.rcd.sched);
        Some(Ran {
            qp: Self::requester_index(&qp),
            result: Ok(()),
        })
    }

    /// Action 1b: runs the oldest scheduled requester send engine. `None`
    /// if none is scheduled.
    pub fn run_requester_send(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let qp = self.rcd.sched.pop_send()?;
        let src = MemSource(&self.mem);
        let result = qp::send_engine_with(&self.rcd, &qp, root, &mut self.to_responders, &src);
        Some(Ran {
            qp: Self::requester_index(&qp),
            result,
        })
    }

    /// Action 1: every trigger work item and one memory-timer tick, then
    /// every scheduled send engine, then every second leg.
    pub fn run_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> Vec<Ran> {
        let mut ran = Vec::new();
        while let Some(r) = self.run_work_item(root) {
            ran.push(r);
        }
        ran.extend(self.tick_memory_timer(root));
        while let Some(r) = self.run_requester_send(root) {
            ran.push(r);
        }
        while let Some(r) = self.run_requester_second_leg(root) {
            ran.push(r);
        }
        ran
    }

    /// Marks responder `i` as having something to send.
    fn mark_ready(&mut self, i: usize) {
        if let Some(r) = self.ready.get_mut(i) {
            if !*r {
                *r = true;
                self.ready_queue.push_back(i);
            }
        }
    }

    /// Responders with something to send.
    pub fn responders_ready(&self) -> usize {
        self.ready_queue.len()
    }

    /// Action 2: the responder node receives `bytes`: a TID READ_REQ or
    /// a plain RDMA READ request, or a packet of a WRITE (a TID
    /// WRITE_REQ, a WRITE_DATA through the responder's chip; see
    /// `write`).
    pub fn deliver_to_responder(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> AtResponder {
        if write::opcode(bytes).is_some_and(write::to_responder_write) {
            return self.deliver_write_to_responder(bytes, root);
        }
        let parsed = match packet::parse(bytes) {
            Ok((_, p)) => p,
            Err(e) => return AtResponder::Unparsable(e),
        };
        let i = match parsed {
            Parsed::ReadReq { hdr, .. } => hdr.verbs_qp,
            Parsed::ReadRequest { bth, .. } => bth.dest_qp,
            _ => return AtResponder::Unexpected,
        }
        .wrapping_sub(RESPONDER.qpn) as usize;
        let Some(qp) = self.responders.get(i) else {
            return AtResponder::NoSuchQp;
        };
        let (verdict, work) = {
            let mut g = qp.s_lock.lock(root);
            let v = match parsed {
                Parsed::ReadReq { bth, hdr, payload } => {
                    qp::receive_read_req::<P>(&mut g, bth.psn, &hdr, payload, &self.regions)
                }
                Parsed::ReadRequest { bth, reth } => {
                    qp::receive_plain_read::<P>(&mut g, bth.psn, &reth, &self.regions)
                }
                _ => return AtResponder::Unexpected,
            };
            (v, g.ext.responder.has_work(g.ext.state))
        };
        if work {
            self.mark_ready(i);
        }
        AtResponder::Received { qp: i, verdict }
    }

    /// Action 3: responder `i` sends up to `budget` packets, if it has
    /// something to send (`None` if not). Returns whether more wait.
    pub fn run_responder(
        &mut self,
        i: usize,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Option<Result<bool, EngineError>> {
        if !self.ready.get(i).copied().unwrap_or(false) {
            return None;
        }
        let r = self.send_responses(i, budget, root);
        if !matches!(r, Ok(true)) {
            if let Some(f) = self.ready.get_mut(i) {
                *f = false;
            }
            self.ready_queue.retain(|&k| k != i);
        }
        Some(r)
    }

    /// Action 3, in turn: the responder that became ready first sends up
    /// to `budget` packets, and goes to the back of the line if more wait.
    pub fn run_next_responder(
        &mut self,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Option<(usize, Result<bool, EngineError>)> {
        let i = self.ready_queue.pop_front()?;
        if let Some(f) = self.ready.get_mut(i) {
            *f = false;
        }
        let r = self.send_responses(i, budget, root);
        if matches!(r, Ok(true)) {
            self.mark_ready(i);
        }
        Some((i, r))
    }

    /// Action 3, for all: every responder-node work item runs, every
    /// responder with something to send sends up to `budget` packets, in
    /// QP order, and every TID ACK owed goes.
    pub fn run_responders(
        &mut self,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Vec<(usize, Result<bool, EngineError>)> {
        let mut ran = Vec::new();
        while let Some(r) = self.run_responder_work(budget, root) {
            ran.push(r);
        }
        ran.extend(
            (0..self.responders.len())
                .filter_map(|i| self.run_responder(i, budget, root).map(|r| (i, r))),
        );
        while let Some(r) = self.run_responder_second_leg(root) {
            ran.push(r);
        }
        ran
    }

    fn send_responses(
        &mut self,
        i: usize,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Result<bool, EngineError> {
        let Some(qp) = self.responders.get(i) else {
            return Ok(false);
        };
        let mut g = qp.s_lock.lock(root);
        qp::write_responses_locked(
            &self.resp_rcd,
            qp,
            &mut g,
            &self.regions,
            &self.regions,
            &mut self.to_requesters,
            budget,
        )
    }

    /// Action 4: the requester node receives `bytes`: a TID READ_RESP
    /// through its chip, an ACK or NAK, a plain READ response, a
    /// WRITE_RESP or a TID ACK straight to the QP (eager receive); then
    /// that QP's completions are taken, matched and checked.
    pub fn deliver_to_requester(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> AtRequester {
        let (arrival, taken) = self.arrive(bytes, root);
        let done = match arrival.qp() {
            Some(i) => taken.into_iter().map(|c| self.finish(i, c)).collect(),
            None => Vec::new(),
        };
        AtRequester { arrival, done }
    }

    /// The packet reaches its QP, whose completions are taken under the
    /// same `s_lock`.
    fn arrive(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> (Arrival, Vec<Completion>) {
        if write::opcode(bytes).is_some_and(write::to_requester_write) {
            return self.arrive_write(bytes, root);
        }
        let p = match packet::parse(bytes) {
            Ok((_, p)) => p,
            Err(e) => return (Arrival::Unparsable(e), Vec::new()),
        };
        let i = match p {
            Parsed::ReadResp { hdr, .. } => hdr.verbs_qp.wrapping_sub(REQUESTER.qpn),
            Parsed::Ack { bth, .. } | Parsed::ReadResponse { bth, .. } => {
                bth.dest_qp.wrapping_sub(REQUESTER.qpn)
            }
            Parsed::ReadReq { .. } | Parsed::ReadRequest { .. } => {
                return (Arrival::Unexpected, Vec::new());
            }
        } as usize;
        let Some(qp) = self.requesters.get(i) else {
            return (Arrival::NoSuchQp, Vec::new());
        };
        let mut g = qp.s_lock.lock(root);
        let arrival = match p {
            Parsed::ReadResp { bth, hdr, payload } => {
                let pkt = Arriving {
                    dest_qp: bth.dest_qp,
                    psn: FlowPsn::from_raw(bth.psn.get()),
                    hdr: &hdr,
                    payload,
                };
                let (outcome, verdict) =
                    chip::receive_read_resp(&self.rcd, qp, &mut g, &mut self.mem, pkt);
                Arrival::ReadResp {
                    qp: i,
                    outcome,
                    verdict,
                }
            }
            Parsed::Ack { bth, aeth } => {
                let verdict = qp::receive_ack(&self.rcd, qp, &mut g, bth.psn, &aeth);
                Arrival::Ack {
                    qp: i,
                    aeth,
                    verdict,
                }
            }
            Parsed::ReadResponse {
                bth,
                kind,
                aeth,
                payload,
            } => {
                let mut mem = DestMemory(&mut self.mem);
                let taken = qp::receive_read_response(
                    &self.rcd, qp, &mut g, bth.psn, kind, aeth, payload, &mut mem,
                );
                Arrival::ReadResponse { qp: i, taken }
            }
            Parsed::ReadReq { .. } | Parsed::ReadRequest { .. } => Arrival::Unexpected,
        };
        let mut taken = Vec::new();
        while let Some(c) = g.ext.requester.poll() {
            taken.push(c);
        }
        (arrival, taken)
    }

    /// Takes requester `i`'s completions: each is matched with its READ,
    /// a successful one's destination is compared with the source, and
    /// the READ's pages leave the destination memory.
    pub fn poll(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> Vec<Done> {
        let mut taken = Vec::new();
        if let Some(qp) = self.requesters.get(i) {
            let mut g = qp.s_lock.lock(root);
            while let Some(c) = g.ext.requester.poll() {
                taken.push(c);
            }
        }
        taken.into_iter().map(|c| self.finish(i, c)).collect()
    }

    fn finish(&mut self, i: usize, c: Completion) -> Done {
        let posted = self.posted.get_mut(i).and_then(|p| p.remove(&c.wr_id));
        if let Some(p) = posted.as_ref().filter(|p| p.write) {
            let data = self.finish_write(i, p, &c);
            return Done {
                qp: i,
                completion: c,
                posted,
                data,
            };
        }
        let data = posted.as_ref().and_then(|p| {
            let ok = c.status == WcStatus::Success;
            let whole_pages = p
                .sges
                .iter()
                .all(|s| s.vaddr % 4096 == 0 && s.length % 4096 == 0);
            let check = ok.then(|| {
                if whole_pages {
                    doubles::check_data(&self.mem, &p.sges, p.remote)
                } else {
                    outcome::check_bytes(&self.mem, &p.sges, p.remote)
                }
            });
            doubles::unmap(&mut self.mem, &p.sges);
            check
        });
        Done {
            qp: i,
            completion: c,
            posted,
            data,
        }
    }

    /// Action 5, for one QP: requester `i`'s retry timer expires. Returns
    /// true if it was running (and so restarted, or spent the budget).
    /// The completions it may cause are taken by [`Self::poll`].
    pub fn fire_timer(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        let Some(qp) = self.requesters.get(i) else {
            return false;
        };
        let mut g = qp.s_lock.lock(root);
        qp::timeout(&self.rcd, qp, &mut g)
    }

    /// Action 5b, for one QP: requester `i`'s RNR timer expires. Returns
    /// true if it was running.
    pub fn fire_rnr_timer(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        let Some(qp) = self.requesters.get(i) else {
            return false;
        };
        let mut g = qp.s_lock.lock(root);
        qp::rnr_timeout(&self.rcd, qp, &mut g)
    }

    /// Action 5: every requester timer that runs (retry, RNR and TID
    /// retry) expires. Returns how many did.
    pub fn fire_timers(&mut self, root: &mut LockToken<'_, Unlocked>) -> usize {
        (0..self.requesters.len())
            .map(|i| {
                usize::from(self.fire_rnr_timer(i, root))
                    + usize::from(self.fire_timer(i, root))
                    + usize::from(self.fire_tid_retry_timer(i, root))
            })
            .sum()
    }

    /// Requester `i`'s retry and RNR timers (each armed with a duration,
    /// and an epoch that changes with every arm and stop: the caller keeps
    /// the deadlines).
    pub fn timers(&self, i: usize, root: &mut LockToken<'_, Unlocked>) -> Option<(Timer, Timer)> {
        let qp = self.requesters.get(i)?;
        let g = qp.s_lock.lock(root);
        let r = &g.ext.requester;
        Some((r.retry_timer(), r.rnr_timer()))
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

/// [`qp_wait::kmem_wakeup`] through the platform's scheduler bound (the
/// sim scheduler's own impl asks for `Send` QP references, which a
/// generic node's are not known to be).
///
/// # Locking
///
/// `qp`'s `s_lock` held (`flags`).
fn kmem_wakeup<P: qp_wait::WaitPlatform>(
    qp: &P::Ref,
    flags: &mut qp_wait::SFlags,
    sched: &P::Sched,
) {
    qp_wait::kmem_wakeup(qp, flags, sched);
}
