// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Benchmarks of the hardware-flow bitmap (`tid_flow::HwFlows`).
//!
//! Group `flow`, on one context's flow state (every flow free, at
//! generation 1) and a flow table that stores every register write
//! (`benches::ArrayFlows`, as the C reference's `write_csr`; the software
//! chip's own flow table adds its call-log test, see `instr.rs`'s
//! `flow/reserve_setup_release_sim`). As in `c-ref/driver.c`, the flow
//! asked for is a constant and what each op returns is kept.
//!
//! - `reserve_release`: `reserve(None)` (lowest free flow) then `release`;
//!   the C counterpart is `kern_reserve_flow` + `clear_bit`.
//! - `reserve_setup_release`: `reserve(Some(7))`, `setup` (writes the flow
//!   register), `clear` (next generation, writes the reserved one) and
//!   `release`; the C counterpart is `kern_reserve_flow` +
//!   `kern_setup_hw_flow` + `kern_clear_hw_flow` + `clear_bit`.
//!
//! No locks: these are the parts that run under `exp_lock`.
#![allow(missing_docs)]

use std::hint::black_box;

use benches::ArrayFlows;
use criterion::{Criterion, criterion_group, criterion_main};
use hfi1_hal::{FlowIndex, Generation};
use tid_flow::HwFlows;

fn flow(c: &mut Criterion) {
    let mut g = c.benchmark_group("flow");
    let mut flows = HwFlows::with_generations([Generation::masked(1); 32]);
    let mut chip = ArrayFlows::default();
    let seven = FlowIndex::new(7);

    g.bench_function("reserve_release", |b| {
        b.iter(|| {
            if let Ok(f) = flows.reserve(None) {
                flows.release(black_box(f));
            }
        })
    });

    g.bench_function("reserve_setup_release", |b| {
        b.iter(|| {
            if let Ok(f) = flows.reserve(seven) {
                black_box(flows.setup(&mut chip, f));
                flows.clear(&mut chip, f);
                flows.release(f);
            }
        })
    });
    g.finish();
    assert_eq!(flows.free_count(), 32);
}

criterion_group!(benches, flow);
criterion_main!(benches);
