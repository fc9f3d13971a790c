// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Loom models of QPs racing segment setup, clear, wake-up and the trigger
//! work on one receive context: no deadlock, no lost wake-up, no leaked
//! reference, under every interleaving loom explores (bounded preemption).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p tid-flow --features sim --release --test loom`.
//! Without `--cfg loom` this file compiles to nothing.
#![cfg(loom)]

use std::sync::Arc;

use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::AllocContext;
use loom::sync::{Condvar, Mutex};
use qp_wait::{QueueKind, trigger_resume};
use tid_flow::sim::{SimPlatform, SimQp, new_ctxt, new_qp};
use tid_flow::{
    FlowError, QpLocked, RcvCtxt, Sge, TidRequest, clear_hw_flow, exp_rcv_clear, exp_rcv_setup,
    setup_hw_flow,
};

struct World {
    rcd: Box<RcvCtxt<SimPlatform>>,
    qps: Vec<SimQp>,
    /// Per QP: woken flag and the condition a waiting QP sleeps on.
    woken: Vec<(Mutex<bool>, Condvar)>,
    free_flows: u32,
}

impl World {
    fn new(nqp: u32, free_flows: u32) -> Self {
        let rcd = new_ctxt(1, 0, 1, nqp + 1, 7).unwrap();
        let qps: Vec<SimQp> = (0..nqp).map(|i| new_qp(0x10 + i, i, i)).collect();
        {
            let outsider = new_qp(0xFF, nqp, 0);
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
            woken: (0..nqp)
                .map(|_| (Mutex::new(false), Condvar::new()))
                .collect(),
            free_flows,
        }
    }

    /// Runs whatever the scheduler holds: trigger work (which takes the
    /// named QP's s_lock alone) and send-engine requests.
    fn wake(&self, slot: u32) {
        let (m, cv) = &self.woken[slot as usize];
        *m.lock().unwrap() = true;
        cv.notify_one();
    }

    /// Runs whatever the scheduler holds: trigger work (which takes the
    /// named QP's s_lock alone) and send-engine requests.
    fn run_work(&self, root: &mut LockToken<'_, Unlocked>) {
        while let Some((_, r)) = self.rcd.sched.pop_work() {
            trigger_resume::<SimPlatform>(r, root, |q, _| self.wake(q.slot()));
        }
        while let Some(r) = self.rcd.sched.pop_send() {
            self.wake(r.slot());
        }
    }

    /// Sleeps until `me` is woken. A lost wake-up leaves it asleep for
    /// ever, which loom reports as a deadlock.
    fn wait(&self, me: usize) {
        let (m, cv) = &self.woken[me];
        let mut g = m.lock().unwrap();
        while !*g {
            g = cv.wait(g).unwrap();
        }
        *g = false;
    }

    /// One QP: get a flow and one segment that fills the context's only
    /// TID group, then clear both.
    fn qp_thread(&self, me: usize) {
        let qp = &self.qps[me];
        let mut root = LockToken::root();
        let sges: Vec<Sge> = (0..8u64)
            .map(|p| Sge {
                vaddr: ((me as u64 + 1) << 32) + p * 2 * u64::from(PAGE_SIZE),
                length: PAGE_SIZE,
            })
            .collect();
        let mut req: TidRequest<SimPlatform> = TidRequest::new(8 * PAGE_SIZE, 1, 4096);
        req.alloc_flows(&self.rcd.mem, AllocContext::Atomic)
            .unwrap();
        loop {
            let r = {
                let mut g = qp.s_lock.lock(&mut root);
                setup_hw_flow(&self.rcd, qp, QpLocked::from_guard(&mut g)).and_then(|()| {
                    exp_rcv_setup(&self.rcd, &mut req, qp, QpLocked::from_guard(&mut g), &sges)
                })
            };
            match r {
                Ok(()) => break,
                Err(FlowError::Again) => self.wait(me),
                Err(e) => panic!("setup: {e:?}"),
            }
        }
        {
            let mut g = qp.s_lock.lock(&mut root);
            exp_rcv_clear(&self.rcd, &mut req, qp, QpLocked::from_guard(&mut g)).unwrap();
            clear_hw_flow(&self.rcd, qp, QpLocked::from_guard(&mut g));
        }
        req.clean_swqe().unwrap();
        // The releasing thread runs the trigger work it queued (the
        // kernel's workqueue would, on the QP's CPU).
        self.run_work(&mut root);
    }

    fn check_end(&self) {
        let mut root = LockToken::root();
        self.run_work(&mut root);
        for (i, q) in self.qps.iter().enumerate() {
            assert_eq!(q.live_refs(), 1, "QP {i} leaked a reference");
        }
        let q0 = &self.qps[0];
        let mut s = q0.s_lock.lock(&mut root);
        let e = self.rcd.exp_lock.lock(s.token());
        for k in [QueueKind::Flow, QueueKind::RcvArray] {
            assert_eq!(e.waiters.len(k), 0);
            assert_eq!(e.waiters.enqueued(k), e.waiters.dequeued(k));
        }
        assert_eq!(e.groups.entries_in_use(), 0);
        assert_eq!(e.flows.free_count(), self.free_flows);
        drop(e);
        drop(s);
        assert_eq!(self.rcd.dma.live_mappings(), 0);
        assert_eq!(self.rcd.mem.live_allocations(), 0);
    }
}

/// Stack for model threads: the context and a request's flow ring are
/// built on the stack before they are boxed.
const STACK: usize = 4 << 20;

fn model(nqp: u32, free_flows: u32, preemptions: usize) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.max_branches = 20_000;
    b.check(move || {
        // loom's own first thread has a small stack: everything runs in
        // threads with room.
        let main = loom::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || {
                let w = Arc::new(World::new(nqp, free_flows));
                let handles: Vec<_> = (1..nqp as usize)
                    .map(|i| {
                        let w = Arc::clone(&w);
                        loom::thread::Builder::new()
                            .stack_size(STACK)
                            .spawn(move || w.qp_thread(i))
                            .unwrap()
                    })
                    .collect();
                w.qp_thread(0);
                for h in handles {
                    h.join().unwrap();
                }
                w.check_end();
            })
            .unwrap();
        main.join().unwrap();
    });
}

/// Two QPs, one free flow: they race on the flow queue.
#[test]
fn two_qps_one_flow() {
    model(2, 1, 3);
}

/// Two QPs, two flows, one TID group that one segment fills: they race on
/// the RcvArray queue, with the trigger work run by either thread.
#[test]
fn two_qps_one_group() {
    model(2, 2, 2);
}

/// Three QPs on one flow and one group.
#[test]
fn three_qps() {
    model(3, 1, 1);
}
