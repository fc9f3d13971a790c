// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Scenario tests: 1–64 QPs on one context with 1–4 TID groups and a few
//! free hardware flows, each working through its requests segment by
//! segment. After every run: every QP finished (no lost wake-up), QP
//! references are back at baseline, queue counters balance, every group is
//! free, all flows are free, no DMA mapping or flow record remains, each
//! queue served FIFO, and the lock-order checker saw nothing.
#![cfg(not(loom))]

mod common;

use common::{Shape, World};
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::services::RandomSource;
use hfi1_hal::sim::SimRandom;

fn run(shape: Shape) -> World {
    let w = World::new(shape);
    let mut rng = SimRandom::new(shape.seed);
    w.run(&mut rng, |_, _| {});
    w.check_clean();
    w
}

#[test]
fn one_qp_alone() {
    // One segment in flight always fits: it never waits.
    let w = run(Shape {
        qps: 1,
        groups: 1,
        free_flows: 1,
        requests: 3,
        segs: 4,
        depth: 1,
        seed: 1,
    });
    assert_eq!(w.waits(), 0);
    // Two in flight on one group: it waits for its own segment to clear,
    // and that clear wakes it directly (it is its own queue head).
    let w = run(Shape {
        qps: 1,
        groups: 1,
        free_flows: 1,
        requests: 3,
        segs: 4,
        depth: 2,
        seed: 1,
    });
    assert!(w.waits() > 0);
    assert!(w.rcd.sched.sends_scheduled() > 0);
    assert_eq!(w.rcd.sched.triggers_queued(), 0);
}

#[test]
fn many_shapes_finish_clean() {
    let mut contended = 0;
    for (i, &qps) in [2u32, 3, 5, 8, 16, 33, 64].iter().enumerate() {
        for groups in 1..=4usize {
            for &free_flows in &[1u32, 3, 32] {
                let seed =
                    0xC0FFEE ^ (i as u64) << 8 ^ (groups as u64) << 16 ^ u64::from(free_flows);
                let w = run(Shape {
                    qps,
                    groups,
                    free_flows,
                    requests: 2,
                    segs: 3,
                    depth: 1 + (seed % 2) as u16,
                    seed,
                });
                if w.waits() > 0 {
                    contended += 1;
                }
            }
        }
    }
    // The shapes must actually exercise the queues.
    assert!(contended > 50, "only {contended} runs ever waited");
}

#[test]
fn a_qp_destroyed_while_queued() {
    let mut destroyed_queued = 0;
    for seed in 0..12u64 {
        let shape = Shape {
            qps: 12,
            groups: 1 + (seed % 2) as usize,
            free_flows: 2,
            requests: 3,
            segs: 3,
            depth: 2,
            seed: 77 + seed,
        };
        let w = World::new(shape);
        let mut rng = SimRandom::new(shape.seed);
        let mut root = LockToken::root();
        let mut ticks = 0u64;
        let victim_at = 20 + seed * 7;
        let mut killed = 0;
        while w.tick(&mut root, &mut rng) {
            ticks += 1;
            if ticks >= victim_at && killed < 2 {
                // The first QP that waits on a queue now is destroyed.
                if let Some(slot) = (0..shape.qps).find(|&s| w.is_queued(s, &mut root)) {
                    w.destroy(slot, &mut root);
                    killed += 1;
                    destroyed_queued += 1;
                }
            }
        }
        w.check_clean();
        assert_eq!(
            w.destroyed.load(std::sync::atomic::Ordering::Relaxed),
            killed
        );
    }
    assert!(
        destroyed_queued >= 12,
        "only {destroyed_queued} QPs destroyed while queued"
    );
}

#[test]
fn dma_failure_at_every_step() {
    let base = Shape {
        qps: 4,
        groups: 2,
        free_flows: 2,
        requests: 2,
        segs: 3,
        depth: 2,
        seed: 5,
    };
    // How many DMA map calls a clean run makes.
    let clean = run(base);
    let maps = clean.rcd.dma.maps();
    assert!(maps > 20);
    for k in 0..maps {
        let w = World::new(base);
        w.rcd.dma.fail_in(k);
        let mut rng = SimRandom::new(base.seed);
        w.run(&mut rng, |_, _| {});
        w.check_clean();
    }
    // A failure that lasts a while: nothing moves, then everything does.
    let w = World::new(base);
    w.rcd.dma.fail_always(true);
    let mut rng = SimRandom::new(9);
    w.run(&mut rng, |w, t| {
        if t == 400 {
            w.rcd.dma.fail_always(false);
        }
    });
    w.check_clean();
}

#[test]
fn flow_record_allocation_failure_at_every_step() {
    let base = Shape {
        qps: 4,
        groups: 2,
        free_flows: 2,
        requests: 3,
        segs: 2,
        depth: 1,
        seed: 6,
    };
    let allocs = u64::from(base.qps * base.requests);
    let mut plain = 0;
    for k in 0..allocs {
        let w = World::new(base);
        w.rcd.mem.fail_in(k);
        let mut rng = SimRandom::new(base.seed);
        w.run(&mut rng, |_, _| {});
        w.check_clean();
        plain += w
            .jobs
            .iter()
            .map(|j| j.lock().unwrap().plain_segs)
            .sum::<u64>();
    }
    // Each injected failure turned exactly one request into a plain READ.
    assert_eq!(plain, allocs * u64::from(base.segs));
}

#[test]
fn random_interleavings() {
    let mut rng = SimRandom::new(0xDEC0DE);
    for _ in 0..40 {
        let shape = Shape {
            qps: 1 + rng.next_u32() % 64,
            groups: 1 + (rng.next_u32() % 4) as usize,
            free_flows: 1 + rng.next_u32() % 4,
            requests: 1 + rng.next_u32() % 3,
            segs: 1 + rng.next_u32() % 4,
            depth: 1 + (rng.next_u32() % 2) as u16,
            seed: u64::from(rng.next_u32()),
        };
        run(shape);
    }
}
