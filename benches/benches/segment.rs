// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Benchmarks of a full segment setup and clear (`tid_flow::setup_segment`
//! + `tid_flow::clear_segment`), locks and flow state included.
//!
//! Platform: the sim chip (call log off), an identity DMA map that only
//! counts live mappings (the sim's `SimDma` keeps a map of every mapping
//! for its checks and would dominate the scattered case), the sim's
//! counted allocator, and the plain host spin lock (the tests' lock-order
//! checker is left out so the numbers show the engine, not the checker).
//! Context: 16 TID groups at expected base 0. Each QP holds a hardware
//! flow for the whole run and one request whose flow records are
//! allocated once.
//!
//! Group `segment`:
//! - `setup_clear/scattered`: a 64-page segment with no two pages
//!   contiguous (64 page sets: 8 whole groups, 64 DMA mappings);
//! - `setup_clear/contiguous`: a 64-page contiguous segment (one 256 KiB
//!   page set and a filler: one RcvArray pair, one mapping);
//!   each iteration takes the QP's s_lock, sets the segment up (page walk,
//!   page sets, DMA map, exp_lock, TID allocation and programming, flow
//!   record) and clears it (exp_lock, unprogramming, unmap);
//! - `contention/2threads`: two threads, each with its own QP on the same
//!   context, each doing `setup_clear/contiguous` cycles; the time is per
//!   cycle of the pair's combined throughput (wall time / total cycles).
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use benches::{IdDma, bench_ctxt};
use criterion::{Criterion, criterion_group, criterion_main};
use hfi1_hal::lock_order::{Lock, LockToken, Unlocked};
use hfi1_hal::services::AllocContext;
use hfi1_hal::sim::SimRef;
use hfi1_hal::sync::SpinLock;
use qp_wait::{Qp, SendState};
use tid_flow::{
    QpFlowState, QpLocked, RcvCtxt, Sge, SgeCursor, TidRequest, clear_segment, setup_hw_flow,
    setup_segment,
};

tid_flow::sim_platform! {
    /// The sim platform with the plain host spin lock and the counting
    /// identity DMA map.
    enum Bench { ext: Ext, lock: SpinLock, dma: IdDma }
}

#[derive(Default)]
struct Ext {
    flow: QpFlowState,
}

impl AsMut<QpFlowState> for Ext {
    fn as_mut(&mut self) -> &mut QpFlowState {
        &mut self.flow
    }
}

type BQp = SimRef<Qp<Bench>>;

const PAGE: u64 = 4096;
const SEG: u32 = 64 * 4096;

fn ctxt() -> Box<RcvCtxt<Bench>> {
    bench_ctxt()
}

fn scattered(base: u64) -> Vec<Sge> {
    (0..64)
        .map(|i| Sge {
            vaddr: base + 2 * i * PAGE,
            length: PAGE as u32,
        })
        .collect()
}

fn contiguous(base: u64) -> Vec<Sge> {
    vec![Sge {
        vaddr: base,
        length: SEG,
    }]
}

struct Qpx {
    qp: BQp,
    req: TidRequest<Bench>,
}

fn qp(rcd: &RcvCtxt<Bench>, slot: u32, root: &mut LockToken<'_, Unlocked>) -> Qpx {
    let qp = SimRef::new(Qp::new(slot + 1, slot, 0, Lock::new(SendState::default())));
    let mut req = TidRequest::new(SEG, 6, 4096);
    req.alloc_flows(&rcd.mem, AllocContext::MaySleep)
        .expect("flow records");
    let mut g = qp.s_lock.lock(root);
    setup_hw_flow(rcd, &qp, QpLocked::from_guard(&mut g)).expect("flow");
    drop(g);
    Qpx { qp, req }
}

/// One setup + clear of a segment, with the QP's s_lock held throughout.
fn cycle(rcd: &RcvCtxt<Bench>, q: &mut Qpx, sges: &[Sge], root: &mut LockToken<'_, Unlocked>) {
    let mut g = q.qp.s_lock.lock(root);
    q.req.cursor = SgeCursor::default();
    setup_segment(rcd, &mut q.req, &q.qp, QpLocked::from_guard(&mut g), sges).expect("setup");
    clear_segment(rcd, &mut q.req, &q.qp, QpLocked::from_guard(&mut g)).expect("clear");
}

fn segment(c: &mut Criterion) {
    let mut g = c.benchmark_group("segment");
    let rcd = ctxt();
    let mut root = LockToken::root();
    let mut q = qp(&rcd, 0, &mut root);
    for (name, sges) in [
        ("setup_clear/scattered", scattered(0x1_0000_0000)),
        ("setup_clear/contiguous", contiguous(0x2_0000_0000)),
    ] {
        g.bench_function(name, |b| b.iter(|| cycle(&rcd, &mut q, &sges, &mut root)));
    }
    assert_eq!(rcd.dma.live(), 0);

    g.bench_function("contention/2threads", |b| {
        b.iter_custom(|iters| {
            let rcd = ctxt();
            let per = iters.div_ceil(2);
            let start = Instant::now();
            std::thread::scope(|s| {
                for t in 0..2u32 {
                    let rcd = &rcd;
                    s.spawn(move || {
                        let mut root = LockToken::root();
                        let mut q = qp(rcd, t, &mut root);
                        let sges = contiguous(0x10_0000_0000 * u64::from(t + 1));
                        for _ in 0..per {
                            cycle(rcd, &mut q, &sges, &mut root);
                        }
                    });
                }
            });
            let el = start.elapsed();
            // Per cycle of the pair: wall time over all cycles done.
            Duration::from_secs_f64(el.as_secs_f64() * iters as f64 / (2 * per) as f64)
        })
    });
    g.finish();
}

criterion_group!(benches, segment);
criterion_main!(benches);
