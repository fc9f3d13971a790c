// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Loom models of QPs racing segment setup, clear, wake-up, flush and
//! destroy, and the trigger work, on one receive context: no deadlock, no
//! lost wake-up, no leaked reference, flow, TID entry, mapping or memory,
//! under every interleaving loom explores within each model's preemption
//! bound.
//!
//! Every model runs with the runtime lock-order checker
//! (`hfi1_hal::sim::lockdep::CheckedSpinLock`) as the lock backend, over
//! loom's atomics, with one held-lock stack per model thread; each QP's
//! entry points are called as the driver calls them (the caller takes the
//! raw `s_lock`, the engine works on a guard made over it), so the checker
//! also checks every held-lock guard. [`the_checker_is_on_under_loom`]
//! shows a second QP's `s_lock` taken under the first is caught inside a
//! loom model.
//!
//! The trigger work runs either on the releasing thread right after its
//! release ([`Work::Inline`]), or on a worker thread of its own that sleeps
//! until a QP thread kicks it ([`Work::Worker`], as the kernel's workqueue
//! runs it). A QP that gets `Again` sleeps on its own condition until its
//! send engine runs; a lost wake-up leaves it asleep for ever, which loom
//! reports as a deadlock.
//!
//! Each model runs through `hfi1_hal::sim::loom_model::explore`, which
//! prints its preemption bound and the number of interleavings (complete
//! executions) loom explored; the figures are in the README.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p tid-flow --features sim --release --test loom -- --nocapture`.
//! Without `--cfg loom` this file compiles to nothing.
#![cfg(loom)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::lock_order::{Lock, LockToken, RawSpinLock, Unlocked};
use hfi1_hal::services::AllocContext;
use hfi1_hal::sim::SimRef;
use hfi1_hal::sim::lockdep::{self, CheckedSpinLock};
use hfi1_hal::sim::loom_model::{Doorbell, Signal, explore, spawn};
use qp_wait::{Membership, Qp, QueueKind, SendState, flush_wait, trigger_resume};
use tid_flow::sim::{SimQpExt, new_ctxt_for, with_s_lock_held};
use tid_flow::{
    FlowError, QpLocked, RcvCtxt, Sge, TidRequest, clear_hw_flow, clear_segment, setup_hw_flow,
    setup_segment,
};

tid_flow::sim_platform! {
    /// The sim platform with the lock-order checker as its lock backend
    /// (named: the crate's own sim platform uses the plain spin lock under
    /// loom).
    enum Checked { ext: SimQpExt, lock: CheckedSpinLock }
}

type LQp = SimRef<Qp<Checked>>;

fn new_qp(qpn: u32, slot: u32) -> LQp {
    SimRef::new(Qp::new(qpn, slot, slot, Lock::new(SendState::default())))
}

/// Where the trigger work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    /// On the thread that queued it, right after its release.
    Inline,
    /// On a worker thread of its own.
    Worker,
}

/// What a QP needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// A hardware flow only.
    Flow,
    /// A flow and one segment that fills the context's only TID group.
    FlowAndSegment,
}

struct World {
    rcd: Box<RcvCtxt<Checked>>,
    qps: Vec<LQp>,
    /// Per QP: the signal its sleeping thread waits for.
    woken: Vec<Signal>,
    /// The worker's doorbell.
    bell: Doorbell,
    work: Work,
    need: Need,
    free_flows: u32,
    /// Trigger work items that found their QP waiting and ran its send
    /// engine, and those that found it no longer waiting (per QP slot).
    resumed: Vec<(AtomicU64, AtomicU64)>,
}

impl World {
    fn new(nqp: u32, free_flows: u32, work: Work, need: Need) -> Self {
        let rcd = new_ctxt_for::<Checked>(1, 0, 1, nqp + 1, 7).unwrap();
        let qps: Vec<LQp> = (0..nqp).map(|i| new_qp(0x10 + i, i)).collect();
        {
            let outsider = new_qp(0xFF, nqp);
            let mut root = LockToken::root();
            let mut s = outsider.s_lock.lock(&mut root);
            let mut e = rcd.exp_lock.lock(s.token());
            for _ in free_flows..32 {
                e.flows.reserve(None).unwrap();
            }
        }
        World {
            rcd,
            qps,
            woken: (0..nqp).map(|_| Signal::default()).collect(),
            bell: Doorbell::default(),
            work,
            need,
            free_flows,
            resumed: (0..nqp)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
        }
    }

    /// The send engine of the QP in `slot`: wakes its thread.
    fn wake(&self, slot: u32) {
        self.woken[slot as usize].set();
    }

    /// Runs whatever the scheduler holds: trigger work (which takes the
    /// named QP's s_lock alone) and send-engine requests.
    fn run_work(&self, root: &mut LockToken<'_, Unlocked>) {
        while let Some((_, r)) = self.rcd.sched.pop_work() {
            let slot = r.slot() as usize;
            let ran = trigger_resume::<Checked>(r, root, |q, _| self.wake(q.slot()));
            let (yes, no) = &self.resumed[slot];
            if ran { yes } else { no }.fetch_add(1, Relaxed);
        }
        while let Some(r) = self.rcd.sched.pop_send() {
            self.wake(r.slot());
        }
    }

    /// After a release (or anything else that may queue work): runs the
    /// work here, or rings the worker.
    fn released(&self, root: &mut LockToken<'_, Unlocked>) {
        match self.work {
            Work::Inline => self.run_work(root),
            Work::Worker => self.bell.kick(),
        }
    }

    /// The worker: runs the work, then sleeps until kicked; stops when told
    /// to and no kick is left.
    fn worker(&self) {
        let mut root = LockToken::root();
        loop {
            self.run_work(&mut root);
            if !self.bell.wait() {
                return;
            }
        }
    }

    fn stop_worker(&self) {
        self.bell.stop();
    }

    /// Sleeps until `me` is woken.
    fn wait(&self, me: usize) {
        self.woken[me].take();
    }

    fn request(&self, me: usize) -> (TidRequest<Checked>, Vec<Sge>) {
        let sges: Vec<Sge> = (0..8u64)
            .map(|p| Sge {
                vaddr: ((me as u64 + 1) << 32) + p * 2 * u64::from(PAGE_SIZE),
                length: PAGE_SIZE,
            })
            .collect();
        let mut req: TidRequest<Checked> = TidRequest::new(8 * PAGE_SIZE, 1, 4096);
        req.alloc_flows(&self.rcd.mem, AllocContext::Atomic)
            .unwrap();
        (req, sges)
    }

    /// One attempt at what `me` needs, entered as the driver enters it.
    fn try_setup(
        &self,
        me: usize,
        req: &mut TidRequest<Checked>,
        sges: &[Sge],
        root: &mut LockToken<'_, Unlocked>,
    ) -> Result<(), FlowError> {
        let qp = &self.qps[me];
        with_s_lock_held::<Checked, _>(qp, root, |g| {
            setup_hw_flow(&self.rcd, qp, QpLocked::from_guard(g))?;
            match self.need {
                Need::Flow => Ok(()),
                Need::FlowAndSegment => {
                    setup_segment(&self.rcd, req, qp, QpLocked::from_guard(g), sges)
                }
            }
        })
    }

    /// Retries until `me` has what it needs, sleeping after each `Again`.
    /// `queued`: `me` is already queued, so it sleeps first.
    fn acquire(&self, me: usize, queued: bool, req: &mut TidRequest<Checked>, sges: &[Sge]) {
        let mut root = LockToken::root();
        if queued {
            self.wait(me);
        }
        loop {
            let r = self.try_setup(me, req, sges, &mut root);
            // A setup may have queued the next head's wake-up.
            self.released(&mut root);
            match r {
                Ok(()) => return,
                Err(FlowError::Again) => self.wait(me),
                Err(e) => panic!("setup: {e:?}"),
            }
        }
    }

    /// Gives back what `me` holds.
    fn release(&self, me: usize, req: &mut TidRequest<Checked>) {
        let qp = &self.qps[me];
        let mut root = LockToken::root();
        with_s_lock_held::<Checked, _>(qp, &mut root, |g| {
            if self.need == Need::FlowAndSegment {
                clear_segment(&self.rcd, req, qp, QpLocked::from_guard(g)).unwrap();
            }
            clear_hw_flow(&self.rcd, qp, QpLocked::from_guard(g));
        });
        self.released(&mut root);
    }

    /// One QP: get what it needs, then give it back.
    fn qp_thread(&self, me: usize, queued: bool) {
        let (mut req, sges) = self.request(me);
        self.acquire(me, queued, &mut req, &sges);
        self.release(me, &mut req);
        req.free_flow_records().unwrap();
    }

    /// QP reset or destroy: unwinds `me`'s wait, as the driver does with
    /// the QP's `s_lock` held.
    fn flush(&self, me: usize) {
        let qp = &self.qps[me];
        let mut root = LockToken::root();
        with_s_lock_held::<Checked, _>(qp, &mut root, |g| {
            flush_wait::<Checked, _>(qp, g, &self.rcd.exp_lock, &self.rcd.sched);
        });
        self.released(&mut root);
    }

    /// Makes `me` try once, before the model's threads start, and checks
    /// it was queued (`Again`); the request is kept for a later retry.
    fn queue_up(&self, me: usize) -> (TidRequest<Checked>, Vec<Sge>) {
        let (mut req, sges) = self.request(me);
        let mut root = LockToken::root();
        assert_eq!(
            self.try_setup(me, &mut req, &sges, &mut root),
            Err(FlowError::Again)
        );
        (req, sges)
    }

    /// Every resource back, every queue empty and balanced, every
    /// reference but the creators' dropped.
    fn check_end(&self) {
        let mut root = LockToken::root();
        self.run_work(&mut root);
        assert_eq!(self.rcd.sched.pending_work(), 0);
        assert_eq!(self.rcd.sched.pending_sends(), 0);
        for (i, q) in self.qps.iter().enumerate() {
            assert_eq!(q.live_refs(), 1, "QP {i} leaked a reference");
            let s = q.s_lock.lock(&mut root);
            assert!(!s.waiting(), "QP {i} still waits");
        }
        let q0 = &self.qps[0];
        let mut s = q0.s_lock.lock(&mut root);
        let e = self.rcd.exp_lock.lock(s.token());
        for k in [QueueKind::Flow, QueueKind::RcvArray] {
            assert_eq!(e.waiters.len(k), 0);
            assert_eq!(e.waiters.enqueued(k), e.waiters.dequeued(k));
        }
        for i in 0..self.qps.len() {
            assert_eq!(e.waiters.membership(i as u32), Membership::Idle);
        }
        assert_eq!(e.groups.entries_in_use(), 0);
        assert_eq!(e.flows.free_count(), self.free_flows);
        drop(e);
        drop(s);
        assert_eq!(self.rcd.dma.live_mappings(), 0);
        assert_eq!(self.rcd.mem.live_allocations(), 0);
        assert_eq!(lockdep::held_by_this_thread(), 0);
    }
}

/// `nqp` QPs each get what they need and give it back, all at once.
/// Returns how many QPs joined the flow queue and the RcvArray queue.
fn race(nqp: u32, free_flows: u32, work: Work, need: Need) -> (u64, u64) {
    let w = Arc::new(World::new(nqp, free_flows, work, need));
    let worker = (work == Work::Worker).then(|| {
        let w = Arc::clone(&w);
        spawn(move || w.worker())
    });
    let qps: Vec<_> = (1..nqp as usize)
        .map(|i| {
            let w = Arc::clone(&w);
            spawn(move || w.qp_thread(i, false))
        })
        .collect();
    w.qp_thread(0, false);
    for h in qps {
        h.join().unwrap();
    }
    w.stop_worker();
    if let Some(h) = worker {
        h.join().unwrap();
    }
    w.check_end();
    let mut root = LockToken::root();
    let mut s = w.qps[0].s_lock.lock(&mut root);
    let e = w.rcd.exp_lock.lock(s.token());
    (
        e.waiters.enqueued(QueueKind::Flow),
        e.waiters.enqueued(QueueKind::RcvArray),
    )
}

/// A [`race`] model as a test: its name, preemption bound, QPs, free
/// flows and where the trigger work runs.
macro_rules! race_model {
    ($(#[$doc:meta])* $name:ident, $bound:expr, $qps:expr, $flows:expr, $work:expr) => {
        $(#[$doc])*
        #[test]
        fn $name() {
            explore(stringify!($name), $bound, || {
                race($qps, $flows, $work, Need::FlowAndSegment);
            });
        }
    };
}

race_model!(
    /// Two QPs, one free flow: they race on the flow queue; the trigger
    /// work runs on the releasing thread.
    two_qps_one_flow, 3, 2, 1, Work::Inline
);
race_model!(
    /// Two QPs, two flows, one TID group that one segment fills: they race
    /// on the RcvArray queue, with the trigger work run by either thread.
    two_qps_one_group, 2, 2, 2, Work::Inline
);
race_model!(
    /// Three QPs on one flow and one group, the work run inline.
    three_qps, 1, 3, 1, Work::Inline
);
race_model!(
    /// Two QPs on one flow, the trigger work run by a worker thread of its
    /// own: the wake-up crosses threads, and the worker may run before,
    /// during or after the release that queued it.
    two_qps_one_flow_worker, 2, 2, 1, Work::Worker
);

/// Three QPs on two flows and one TID group, the work on a worker, all
/// starting at once: some interleavings queue a QP for RcvArray space.
#[test]
fn three_qps_two_flows_worker() {
    let rarr = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&rarr);
    explore("three_qps_two_flows_worker", 1, move || {
        let (_, on_rarr) = race(3, 2, Work::Worker, Need::FlowAndSegment);
        seen.fetch_add(on_rarr, Relaxed);
    });
    assert!(
        rarr.load(Relaxed) > 0,
        "no QP ever waited for RcvArray space"
    );
}

/// Three QPs on two queues at once: QP 0 holds a flow and the only TID
/// group; QP 1 holds the other flow and waits on the RcvArray queue; QP 2
/// waits on the flow queue. Then, at once: QP 0 releases both (its
/// segment's release wakes the RcvArray head, its flow's the flow head);
/// QP 1 and QP 2 sleep until woken and retry; a worker runs the trigger
/// work. Both must get what they need, in any order.
#[test]
fn three_qps_two_queues_worker() {
    explore("three_qps_two_queues_worker", 1, || {
        let w = Arc::new(World::new(3, 2, Work::Worker, Need::FlowAndSegment));
        let (mut req0, sges0) = w.request(0);
        w.acquire(0, false, &mut req0, &sges0);
        let queued: Vec<_> = (1..3).map(|i| w.queue_up(i)).collect();
        {
            let mut root = LockToken::root();
            let mut s = w.qps[0].s_lock.lock(&mut root);
            let e = w.rcd.exp_lock.lock(s.token());
            assert_eq!(e.waiters.len(QueueKind::RcvArray), 1);
            assert_eq!(e.waiters.len(QueueKind::Flow), 1);
        }
        let worker = {
            let w = Arc::clone(&w);
            spawn(move || w.worker())
        };
        let waiters: Vec<_> = queued
            .into_iter()
            .enumerate()
            .map(|(i, (mut req, sges))| {
                let w = Arc::clone(&w);
                spawn(move || {
                    w.acquire(i + 1, true, &mut req, &sges);
                    w.release(i + 1, &mut req);
                    req.free_flow_records().unwrap();
                })
            })
            .collect();
        w.release(0, &mut req0);
        req0.free_flow_records().unwrap();
        for h in waiters {
            h.join().unwrap();
        }
        w.stop_worker();
        worker.join().unwrap();
        w.check_end();
    });
}

/// A QP's request and its pages.
type Req = (TidRequest<Checked>, Vec<Sge>);

/// The start of the flush and destroy models: QP 0 holds the only flow,
/// QP 1 waits on the flow queue and QP 2 behind it, a worker runs the
/// trigger work, and QP 2's thread sleeps until woken, then gets the
/// flow and gives it back. Returns the world, QP 0's and QP 1's requests
/// and the threads.
fn one_holder_two_waiters() -> (Arc<World>, Req, Req, [loom::thread::JoinHandle<()>; 2]) {
    let w = Arc::new(World::new(3, 1, Work::Worker, Need::Flow));
    let (mut req0, sges0) = w.request(0);
    w.acquire(0, false, &mut req0, &sges0);
    let one = w.queue_up(1);
    let (mut req2, sges2) = w.queue_up(2);
    let worker = {
        let w = Arc::clone(&w);
        spawn(move || w.worker())
    };
    let behind = {
        let w = Arc::clone(&w);
        spawn(move || {
            w.acquire(2, true, &mut req2, &sges2);
            w.release(2, &mut req2);
            req2.free_flow_records().unwrap();
        })
    };
    (w, (req0, sges0), one, [worker, behind])
}

/// The end of the flush and destroy models: QP 0 gives its flow back
/// (its wake-up goes to the head), `other` and QP 2 finish, the worker
/// stops, and everything must be back.
fn release_and_finish(
    w: &World,
    mut req0: Req,
    other: loom::thread::JoinHandle<()>,
    [worker, behind]: [loom::thread::JoinHandle<()>; 2],
) {
    w.release(0, &mut req0.0);
    req0.0.free_flow_records().unwrap();
    other.join().unwrap();
    behind.join().unwrap();
    w.stop_worker();
    worker.join().unwrap();
    w.check_end();
}

/// QP 0 holds the only flow; QP 1 waits on the flow queue, QP 2 behind it.
/// Then, at once: QP 0 releases its flow (its wake-up goes to QP 1, the
/// head); QP 1 is reset (`flush_wait`) and posts again; QP 2 sleeps until
/// woken; a worker runs the trigger work. The reset may come before QP 1's
/// trigger work is queued, after it is queued, or after it ran: either
/// way QP 2 and QP 1 must both get the flow in the end (the flush wakes
/// the new head when it takes the old one off).
#[test]
fn flush_races_a_queued_wakeup() {
    explore("flush_races_a_queued_wakeup", 1, || {
        let (w, req0, (mut req1, sges1), threads) = one_holder_two_waiters();
        let reset = {
            let w = Arc::clone(&w);
            spawn(move || {
                w.flush(1);
                w.acquire(1, false, &mut req1, &sges1);
                w.release(1, &mut req1);
                req1.free_flow_records().unwrap();
            })
        };
        release_and_finish(&w, req0, reset, threads);
    });
}

/// As [`flush_races_a_queued_wakeup`], but QP 1 is destroyed: flushed
/// while its trigger work may be queued, holding a reference of its own,
/// and never posts again. That work must find it no longer waiting (no
/// send engine for a destroyed QP) and drop its reference, so that the
/// count drains back to the creator's alone (the driver's destroy waits
/// for that before it frees the QP), and QP 2 behind it must still be
/// woken. Loom must see both orders: the work finding QP 1 still waiting
/// (it ran before the flush) and finding it flushed.
#[test]
fn destroy_races_a_queued_wakeup() {
    let found_waiting = Arc::new(AtomicU64::new(0));
    let found_flushed = Arc::new(AtomicU64::new(0));
    let (fw, ff) = (Arc::clone(&found_waiting), Arc::clone(&found_flushed));
    explore("destroy_races_a_queued_wakeup", 1, move || {
        let (w, req0, (mut req1, _), threads) = one_holder_two_waiters();
        let destroy = {
            let w = Arc::clone(&w);
            spawn(move || {
                w.flush(1);
                req1.free_flow_records().unwrap();
            })
        };
        release_and_finish(&w, req0, destroy, threads);
        let (yes, no) = &w.resumed[1];
        fw.fetch_add(yes.load(Relaxed), Relaxed);
        ff.fetch_add(no.load(Relaxed), Relaxed);
    });
    assert!(found_waiting.load(Relaxed) > 0, "the work never ran first");
    assert!(found_flushed.load(Relaxed) > 0, "the flush never ran first");
}

/// The checker is live under loom: a second QP's `s_lock` taken while
/// holding the first is reported (a lockdep splat is a panic here).
#[test]
#[should_panic(expected = "lock-order violation")]
fn the_checker_is_on_under_loom() {
    loom::model(|| {
        let a = new_qp(1, 0);
        let b = new_qp(2, 1);
        a.s_lock.raw().lock_irqsave();
        b.s_lock.raw().lock_irqsave();
    });
}
