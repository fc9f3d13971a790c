// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Two threads drive 32 QPs on one context through 10^5 segment
//! setup/clear cycles with the runtime lock-order checker on; the end state
//! must be as clean as in the single-threaded scenarios.
//!
//! `HFI1_STRESS_CYCLES` sets a different cycle count (the default keeps the
//! run to seconds).
#![cfg(not(loom))]

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{Shape, World};
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::sim::{SimRandom, lockdep};

#[test]
fn two_threads_32_qps() {
    let cycles: u64 = std::env::var("HFI1_STRESS_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let qps = 32u32;
    let segs = 5u32;
    let requests = u32::try_from(cycles.div_ceil(u64::from(qps * segs))).unwrap();
    let shape = Shape {
        qps,
        groups: 3,
        free_flows: 4,
        requests,
        segs,
        depth: 2,
        seed: 0x5EED,
    };
    let w = World::new(shape);
    let acquired_before = lockdep::acquisitions();
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let w = &w;
            s.spawn(move || {
                let mut root = LockToken::root();
                let mut rng = SimRandom::new(0xABCD + t);
                let mut last = (w.progress.load(Ordering::Relaxed), Instant::now());
                while !w.all_finished() {
                    if !w.tick(&mut root, &mut rng) {
                        std::thread::yield_now();
                    }
                    let p = w.progress.load(Ordering::Relaxed);
                    if p != last.0 {
                        last = (p, Instant::now());
                    } else {
                        assert!(
                            last.1.elapsed() < Duration::from_secs(10),
                            "no progress for 10 s: lost wake-up or deadlock"
                        );
                    }
                }
            });
        }
    });
    let total: u64 = w.jobs.iter().map(|j| j.lock().unwrap().cycles).sum();
    println!(
        "stress: {total} setup/clear cycles, {} waits, {} trigger works, {:?}",
        w.waits(),
        w.rcd.sched.triggers_queued(),
        start.elapsed()
    );
    assert!(total >= cycles);
    assert!(w.waits() > 0, "the run never contended");
    assert!(lockdep::acquisitions() > acquired_before + total);
    w.check_clean_with(false);
}
