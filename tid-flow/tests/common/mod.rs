// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A scenario driver: QPs on one sim context, each working through TID
//! READ requests segment by segment (hardware flow, setup, receive-side
//! clear), woken only through the wait queues' wake-ups.
//!
//! The "send engine" of a QP is [`World::engine`]; it runs with the QP's
//! s_lock held. In-flight segments complete on the "receive path"
//! ([`World::complete`]), which also runs under the QP's s_lock, like the
//! driver's receive interrupt. Both enter the engine as the driver does:
//! the caller takes the s_lock and the engine works on a guard made over
//! the held lock (`tid_flow::sim::with_s_lock_held`). The driver never retries a waiting QP by
//! itself: a QP that got EAGAIN runs again only when a wake-up (a trigger
//! work item or a send-engine request from the scheduler) names it. A lost
//! wake-up therefore shows up as a run that stops with work left.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hfi1_hal::consts::{PAGE_SIZE, TID_GROUP_SIZE};
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::RandomSource;
use hfi1_hal::services::{AllocContext, QpRef};
use hfi1_hal::sim::SimRandom;
use qp_wait::{Membership, QueueKind, SGuard, flush_wait, trigger_resume};
use tid_flow::sim::{SimPlatform, SimQp, new_ctxt, new_qp, with_s_lock_held};
use tid_flow::{
    FlowError, QpLocked, RcvCtxt, Sge, TidRequest, clear_all_segments, clear_hw_flow,
    clear_segment, setup_hw_flow, setup_segment,
};

/// Shape of one run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// QPs on the context.
    pub qps: u32,
    /// TID groups (1..=4 here).
    pub groups: usize,
    /// Hardware flows left free for the QPs (the rest are held by an
    /// outsider for the whole run).
    pub free_flows: u32,
    /// Requests per QP.
    pub requests: u32,
    /// Segments per request.
    pub segs: u32,
    /// Segments a QP keeps in flight at most (1..=2).
    pub depth: u16,
    /// Seed for page layouts and choices.
    pub seed: u64,
}

/// Where a QP's work stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Has work.
    Active,
    /// Finished everything.
    Done,
    /// Destroyed in the middle.
    Destroyed,
}

/// A QP's work, guarded (conceptually) by its s_lock: only touched while
/// the QP's s_lock is held.
pub struct Job {
    pub req: TidRequest<SimPlatform>,
    pub sges: Vec<Sge>,
    pub requests_left: u32,
    pub to_setup: u32,
    pub done_segs: u64,
    pub plain_segs: u64,
    pub phase: Phase,
    pub pmtu: u32,
    pub cycles: u64,
}

/// Per queue, the tickets of the QPs served from it, in service order.
#[derive(Default)]
pub struct Served {
    pub flow: Vec<u64>,
    pub rarr: Vec<u64>,
}

pub struct World {
    pub shape: Shape,
    pub rcd: Box<RcvCtxt<SimPlatform>>,
    pub qps: Vec<SimQp>,
    pub jobs: Vec<Mutex<Job>>,
    runnable: Mutex<VecDeque<u32>>,
    marked: Vec<AtomicBool>,
    completions: Mutex<VecDeque<u32>>,
    pub served: Mutex<Served>,
    pub outsider: SimQp,
    pub progress: AtomicU64,
    pub destroyed: AtomicU64,
}

/// What one engine run ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Did something; run again later.
    Yield,
    /// Queued for TID space or a flow: wait for a wake-up.
    Wait,
    /// DMA mapping failed: wait for memory (retried by the driver).
    MemWait,
    /// Nothing left.
    Finished,
}

fn layout(rng: &mut SimRandom, base: u64, groups: usize, pmtu: u32) -> Vec<Sge> {
    // 16 pages per segment in power-of-two runs with gaps between them, so
    // each run is its own page set; retried until the sets fit the
    // context (the 8 KiB variant can add fillers).
    loop {
        let mut sges = Vec::new();
        let mut left = 16u32;
        let mut addr = base;
        while left > 0 {
            let choices: &[u32] = if groups == 1 {
                &[2, 4, 8]
            } else {
                &[1, 2, 4, 8]
            };
            let pick = choices[(rng.next_u32() as usize) % choices.len()].min(left);
            let pick = 1 << pick.ilog2();
            sges.push(Sge {
                vaddr: addr,
                length: pick * PAGE_SIZE,
            });
            addr += u64::from(pick + 1 + rng.next_u32() % 3) * u64::from(PAGE_SIZE);
            left -= pick;
        }
        let pages: Vec<u64> = sges
            .iter()
            .flat_map(|s| {
                (0..s.length / PAGE_SIZE).map(move |i| s.vaddr + u64::from(i * PAGE_SIZE))
            })
            .collect();
        let sets = tid_alloc::find_phys_blocks(&pages, pmtu).unwrap();
        if sets.len() <= groups * TID_GROUP_SIZE {
            return sges;
        }
    }
}

pub const SEG_LEN: u32 = 16 * PAGE_SIZE;

impl World {
    pub fn new(shape: Shape) -> Self {
        let rcd = new_ctxt(3, 512, shape.groups, shape.qps + 1, shape.seed).unwrap();
        let qps: Vec<SimQp> = (0..shape.qps)
            .map(|i| new_qp(0x100 + i, i, i % 4))
            .collect();
        let jobs = (0..shape.qps)
            .map(|i| {
                let pmtu = if i % 3 == 2 { 8192 } else { 4096 };
                Mutex::new(Job {
                    req: TidRequest::new(SEG_LEN, shape.depth, pmtu),
                    sges: Vec::new(),
                    requests_left: shape.requests,
                    to_setup: 0,
                    done_segs: 0,
                    plain_segs: 0,
                    phase: Phase::Active,
                    pmtu,
                    cycles: 0,
                })
            })
            .collect();
        let outsider = new_qp(0xFFFF, shape.qps, 0);
        let w = World {
            shape,
            rcd,
            qps,
            jobs,
            runnable: Mutex::new((0..shape.qps).collect()),
            marked: (0..shape.qps).map(|_| AtomicBool::new(true)).collect(),
            completions: Mutex::new(VecDeque::new()),
            served: Mutex::new(Served::default()),
            outsider,
            progress: AtomicU64::new(0),
            destroyed: AtomicU64::new(0),
        };
        // The outsider holds all flows but `free_flows`.
        let mut root = LockToken::root();
        let mut s = w.outsider.s_lock.lock(&mut root);
        let mut e = w.rcd.exp_lock.lock(s.token());
        for _ in shape.free_flows..32 {
            e.flows.reserve(None).unwrap();
        }
        drop(e);
        drop(s);
        w
    }

    fn mark(&self, slot: u32) {
        if let Some(m) = self.marked.get(slot as usize) {
            if !m.swap(true, Ordering::AcqRel) {
                self.runnable.lock().unwrap().push_back(slot);
            }
        }
    }

    fn start_request(&self, slot: u32, job: &mut Job) {
        job.requests_left -= 1;
        let mut rng = SimRandom::new(
            self.shape.seed ^ (u64::from(slot) << 20) ^ u64::from(job.requests_left) << 40 | 1,
        );
        let mut sges = Vec::new();
        for s in 0..self.shape.segs {
            let base = (u64::from(slot) + 1) << 36
                | u64::from(job.requests_left) << 28
                | u64::from(s) << 20;
            sges.extend(layout(&mut rng, base, self.shape.groups, job.pmtu));
        }
        job.sges = sges;
        job.req = TidRequest::new(SEG_LEN, self.shape.depth, job.pmtu);
        match job.req.alloc_flows(&self.rcd.mem, AllocContext::Atomic) {
            Ok(()) => job.to_setup = self.shape.segs,
            Err(FlowError::NoMemory) => {
                // Stays a plain RDMA READ: no TID resources at all.
                job.plain_segs += u64::from(self.shape.segs);
                job.done_segs += u64::from(self.shape.segs);
                job.to_setup = 0;
            }
            Err(e) => panic!("alloc_flows: {e:?}"),
        }
    }

    /// The QP's send engine: a few steps with its s_lock held.
    pub fn engine(&self, slot: u32, root: &mut LockToken<'_, Unlocked>) -> Step {
        let qp = &self.qps[slot as usize];
        with_s_lock_held(qp, root, |g| self.engine_locked(slot, g))
    }

    fn engine_locked(&self, slot: u32, g: &mut SGuard<'_, SimPlatform>) -> Step {
        let qp = &self.qps[slot as usize];
        let mut job = self.jobs[slot as usize].lock().unwrap();
        let job = &mut *job;
        if job.phase != Phase::Active {
            return Step::Finished;
        }
        // Which queue it waits on (for the FIFO check).
        let before = {
            let e = self.rcd.exp_lock.lock(g.token());
            let m = e.waiters.membership(slot);
            (m, e.waiters.ticket(slot))
        };
        let served = |kind: QueueKind| {
            if let (Membership::Queued(k), Some(t)) = before {
                if k == kind {
                    let mut s = self.served.lock().unwrap();
                    match kind {
                        QueueKind::Flow => s.flow.push(t),
                        QueueKind::RcvArray => s.rarr.push(t),
                    }
                }
            }
        };
        if job.to_setup == 0 && job.req.in_flight() == 0 {
            // Request finished: release the flow, free the records.
            clear_hw_flow(&self.rcd, qp, QpLocked::from_guard(g));
            clear_all_segments(&self.rcd, &mut job.req, qp, QpLocked::from_guard(g));
            job.req.free_flow_records().unwrap();
            if job.requests_left == 0 {
                job.phase = Phase::Done;
                self.progress.fetch_add(1, Ordering::Relaxed);
                return Step::Finished;
            }
            self.start_request(slot, job);
            self.progress.fetch_add(1, Ordering::Relaxed);
            return Step::Yield;
        }
        if job.to_setup > 0 && job.req.in_flight() < self.shape.depth {
            if let Err(e) = setup_hw_flow(&self.rcd, qp, QpLocked::from_guard(g)) {
                assert_eq!(e, FlowError::Again);
                return self.waiting(slot, job);
            }
            served(QueueKind::Flow);
            match setup_segment(
                &self.rcd,
                &mut job.req,
                qp,
                QpLocked::from_guard(g),
                &job.sges,
            ) {
                Ok(()) => {
                    served(QueueKind::RcvArray);
                    job.to_setup -= 1;
                    job.cycles += 1;
                    self.progress.fetch_add(1, Ordering::Relaxed);
                    self.completions.lock().unwrap().push_back(slot);
                    return Step::Yield;
                }
                Err(FlowError::Again) => return self.waiting(slot, job),
                Err(FlowError::NoMemory) => {
                    // The setup put the QP on the memory-wait list.
                    assert!(g.flags.waiting_kmem(), "QP {slot} not waiting for memory");
                    return Step::MemWait;
                }
                Err(e) => panic!("setup_segment: {e:?}"),
            }
        }
        // Ring full or nothing to set up: segments in flight complete on
        // the receive path.
        Step::Wait
    }

    fn waiting(&self, _slot: u32, _job: &mut Job) -> Step {
        Step::Wait
    }

    /// The receive path: the oldest in-flight segment of `slot` completes.
    pub fn complete(&self, slot: u32, root: &mut LockToken<'_, Unlocked>) {
        let qp = &self.qps[slot as usize];
        // The receive path wakes its own send engine when there is more to
        // do (as the RC layer schedules the send engine on an ACK), but not
        // a QP that waits on a queue: that one must be woken by the queue.
        if with_s_lock_held(qp, root, |g| self.complete_locked(slot, g)) == Some(false) {
            self.mark(slot);
        }
    }

    /// [`World::complete`] under the s_lock; whether the QP waits on a
    /// queue, if a segment completed.
    fn complete_locked(&self, slot: u32, g: &mut SGuard<'_, SimPlatform>) -> Option<bool> {
        let qp = &self.qps[slot as usize];
        let mut job = self.jobs[slot as usize].lock().unwrap();
        let job = &mut *job;
        if job.phase != Phase::Active || job.req.in_flight() == 0 {
            return None;
        }
        clear_segment(&self.rcd, &mut job.req, qp, QpLocked::from_guard(g)).unwrap();
        job.done_segs += 1;
        self.progress.fetch_add(1, Ordering::Relaxed);
        // Every few segments the flow goes back (a SYNC point), so flows
        // cycle between QPs too.
        // (Not while it waits on a queue: a QP queued for RcvArray space
        // keeps its flow, as the requester does.)
        let waiting = g.waiting();
        if job.req.in_flight() == 0 && job.done_segs % 3 == 0 && !waiting {
            clear_hw_flow(&self.rcd, qp, QpLocked::from_guard(g));
        }
        Some(waiting)
    }

    /// Destroys QP `slot` in the middle of the run (reset: flush its wait,
    /// tear down every segment and its flow).
    pub fn destroy(&self, slot: u32, root: &mut LockToken<'_, Unlocked>) {
        let qp = &self.qps[slot as usize];
        with_s_lock_held(qp, root, |g| self.destroy_locked(slot, g));
    }

    fn destroy_locked(&self, slot: u32, g: &mut SGuard<'_, SimPlatform>) {
        let qp = &self.qps[slot as usize];
        let mut job = self.jobs[slot as usize].lock().unwrap();
        if job.phase != Phase::Active {
            return;
        }
        flush_wait::<SimPlatform, _>(qp, g, &self.rcd.exp_lock, &self.rcd.sched);
        // Off the memory-wait list too (kernel: `flush_qp_waiters()`).
        drop(self.rcd.sched.cancel_kmem(qp));
        g.flags.remove(qp_wait::SFlags::WAIT_KMEM);
        clear_all_segments(&self.rcd, &mut job.req, qp, QpLocked::from_guard(g));
        clear_hw_flow(&self.rcd, qp, QpLocked::from_guard(g));
        job.req.free_flow_records().unwrap();
        job.phase = Phase::Destroyed;
        self.destroyed.fetch_add(1, Ordering::Relaxed);
    }

    /// True if `slot` waits on a queue now.
    pub fn is_queued(&self, slot: u32, root: &mut LockToken<'_, Unlocked>) -> bool {
        let qp = &self.qps[slot as usize];
        let mut g = qp.s_lock.lock(root);
        let e = self.rcd.exp_lock.lock(g.token());
        e.waiters.membership(slot) != Membership::Idle
    }

    /// Runs the scheduler's pending items: trigger work, then send-engine
    /// requests. Returns whether there were any.
    pub fn drain_scheduler(&self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut any = false;
        while let Some((_, r)) = self.rcd.sched.pop_work() {
            any = true;
            trigger_resume::<SimPlatform>(r, root, |q, _| self.mark(q.slot()));
        }
        while let Some(r) = self.rcd.sched.pop_send() {
            any = true;
            self.mark(r.slot());
        }
        any
    }

    /// One unit of driver work; false when there is nothing at all to do.
    pub fn tick(&self, root: &mut LockToken<'_, Unlocked>, rng: &mut SimRandom) -> bool {
        let mut any = self.drain_scheduler(root);
        // Receive-path completions and send engines, interleaved.
        let take_completion = rng.next_u32() % 2 == 0;
        if take_completion {
            let c = self.completions.lock().unwrap().pop_front();
            if let Some(slot) = c {
                self.complete(slot, root);
                return true;
            }
        }
        let next = self.runnable.lock().unwrap().pop_front();
        if let Some(slot) = next {
            self.marked[slot as usize].store(false, Ordering::Release);
            if self.engine(slot, root) == Step::Yield {
                self.mark(slot);
            }
            return true;
        }
        let c = self.completions.lock().unwrap().pop_front();
        if let Some(slot) = c {
            self.complete(slot, root);
            return true;
        }
        // One tick of the memory-wait timer: its oldest waiter is woken
        // (kernel: `mem_timer()` -> `hfi1_qp_wakeup(qp, RVT_S_WAIT_KMEM)`).
        if let Some(r) = self.rcd.sched.kmem_tick() {
            any = true;
            let mut g = r.s_lock.lock(root);
            qp_wait::kmem_wakeup(&r, &mut g.flags, &self.rcd.sched);
        }
        any
    }

    /// All QPs finished or destroyed.
    pub fn all_finished(&self) -> bool {
        self.jobs
            .iter()
            .all(|j| j.lock().unwrap().phase != Phase::Active)
    }

    /// Runs single-threaded until nothing is left to do; returns the ticks.
    pub fn run(&self, rng: &mut SimRandom, mut hook: impl FnMut(&World, u64)) -> u64 {
        let mut root = LockToken::root();
        let mut ticks = 0;
        while self.tick(&mut root, rng) {
            ticks += 1;
            hook(self, ticks);
            assert!(ticks < 10_000_000, "runaway scenario");
        }
        ticks
    }

    /// The end-of-run checks every scenario makes.
    pub fn check_clean(&self) {
        self.check_clean_with(true);
    }

    /// The end-of-run checks; `fifo` also checks the service order (only
    /// meaningful single-threaded: with two threads the order is recorded
    /// after exp_lock is dropped, so two services can be recorded swapped).
    pub fn check_clean_with(&self, fifo: bool) {
        let mut root = LockToken::root();
        // Nothing left anywhere: every QP finished (no lost wake-up).
        for (i, j) in self.jobs.iter().enumerate() {
            let j = j.lock().unwrap();
            assert_ne!(
                j.phase,
                Phase::Active,
                "QP {i} never finished: lost wake-up?"
            );
            if j.phase == Phase::Done {
                assert_eq!(
                    j.done_segs,
                    u64::from(self.shape.requests * self.shape.segs),
                    "QP {i} segment count"
                );
            }
            assert!(!j.req.has_flows(), "QP {i} kept its flow records");
        }
        assert!(!self.drain_scheduler(&mut root), "scheduler had work left");
        // References back to the creator's only.
        for (i, q) in self.qps.iter().enumerate() {
            assert_eq!(q.live_refs(), 1, "QP {i} leaked references");
        }
        let mut s = self.outsider.s_lock.lock(&mut root);
        let e = self.rcd.exp_lock.lock(s.token());
        let both = [QueueKind::Flow, QueueKind::RcvArray];
        for k in both {
            assert_eq!(e.waiters.len(k), 0, "{k:?} queue not empty");
        }
        // Every join left again; a flush counts its dequeue on the flow
        // queue, as the driver's does, so only the sums match.
        assert_eq!(
            both.iter().map(|&k| e.waiters.enqueued(k)).sum::<u64>(),
            both.iter().map(|&k| e.waiters.dequeued(k)).sum::<u64>(),
            "queue counters"
        );
        assert_eq!(self.rcd.sched.kmem_waiters(), 0, "memory waiters left");
        assert_eq!(
            e.groups.free_groups(),
            self.shape.groups,
            "groups not all free"
        );
        assert_eq!(e.groups.entries_in_use(), 0);
        assert_eq!(
            e.chip.expected_entries(),
            0,
            "RcvArray entries left programmed"
        );
        assert_eq!(e.chip.faults(), 0);
        assert_eq!(
            e.flows.free_count(),
            self.shape.free_flows,
            "flows not all free"
        );
        drop(e);
        drop(s);
        assert_eq!(self.rcd.dma.live_mappings(), 0, "DMA mappings leaked");
        assert_eq!(self.rcd.dma.bad_unmaps(), 0);
        assert_eq!(self.rcd.mem.live_allocations(), 0, "flow records leaked");
        // Service order is FIFO per queue.
        let served = self.served.lock().unwrap();
        for (name, v) in [("flow", &served.flow), ("rarr", &served.rarr)] {
            let bad = v.windows(2).position(|w| w[0] >= w[1]);
            if fifo {
                assert!(
                    bad.is_none(),
                    "{name} queue served out of order at {bad:?} of {}",
                    v.len()
                );
            }
        }
        assert_eq!(hfi1_hal::sim::lockdep::violations(), 0);
        // The engine was entered as the driver enters it: on guards made
        // over the s_lock the caller held, each checked by the checker.
        assert!(hfi1_hal::sim::lockdep::assumed_held() > 0);
    }

    /// Sum of queue enqueues (to show a scenario really contended).
    pub fn waits(&self) -> u64 {
        self.rcd.dev.tid_waits()
    }
}

/// The QP's slot through its reference.
pub trait SlotOf {
    fn slot(&self) -> u32;
}

impl SlotOf for SimQp {
    fn slot(&self) -> u32 {
        (**self).slot()
    }
}

pub fn same(a: &SimQp, b: &SimQp) -> bool {
    QpRef::same(a, b)
}
