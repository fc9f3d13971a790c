// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Benchmarks of `tid-alloc`: `find_phys_blocks` and the TID cycle.
//!
//! Inputs (64 pages each; page address = pfn × 4096):
//! - `contiguous`: pfn = 0x100000 + i;
//! - `scattered`: pfn = 0x200000 + 2i (no two pages contiguous);
//! - `mixed`: 14 runs of 8, 1, 4, 2, 16, 1, 3, 8, 5, 2, 1, 4, 6, 3 pages,
//!   run r starting at pfn 0x300000 + 0x1000·r.
//!
//! Group `find_phys_blocks`: ids `4k/<input>` and `8k/<input>` time one call
//! of `find_phys_blocks_4k_into` / `find_phys_blocks_8k_into`, which write
//! the set list into a caller's array as the C functions write
//! `flow->pagesets` (the by-value `find_phys_blocks_4k` adds a copy of the
//! 1.5 KiB list on return).
//!
//! Group `tid_cycle`: ids `<input>/<pmtu>` time `allocate_into` +
//! `program_into` + `unprogram` of one segment on a context of 16 groups at
//! expected base 0, writing the nodes and TID entries into caller-owned
//! values as the C writes `flow->tnode[]` and `flow->tid_entry[]`; the page
//! sets (the pmtu's variant) and their DMA addresses are computed once,
//! outside the timed loop. The RcvArray is `benches::ArrayRcv`: each
//! `put_tid` builds the chip's register word and each `wc_fill` stores 0,
//! volatile, as the driver's `hfi1_put_tid()` and `rcv_array_wc_fill()` do
//! in the C reference, so the calls cannot be optimised away.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tid_alloc::{
    AllocError, PageSets, Programmed, TidAlloc, TidGroups, find_phys_blocks,
    find_phys_blocks_4k_into, find_phys_blocks_8k_into,
};

use benches::{ArrayRcv, inputs};

type FindInto = fn(&[u64], &mut PageSets) -> Result<(), AllocError>;

fn bench_find(c: &mut Criterion) {
    let mut g = c.benchmark_group("find_phys_blocks");
    let variants: [(&str, FindInto); 2] = [
        ("4k", find_phys_blocks_4k_into),
        ("8k", find_phys_blocks_8k_into),
    ];
    for (variant, f) in variants {
        for (name, pages) in inputs() {
            let mut sets = PageSets::new();
            g.bench_function(format!("{variant}/{name}"), |b| {
                b.iter(|| {
                    f(black_box(&pages), &mut sets).unwrap();
                    black_box(&sets);
                })
            });
        }
    }
    g.finish();
}

fn bench_cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("tid_cycle");
    let [(_, cont), (_, scat), (_, mix)] = inputs();
    for (id, pages, pmtu) in [
        ("scattered/4096", scat.clone(), 4096u32),
        ("contiguous/4096", cont, 4096),
        ("mixed/4096", mix, 4096),
        ("scattered/8192", scat, 8192),
    ] {
        let mut sets = find_phys_blocks(&pages, pmtu).unwrap();
        for s in sets.iter_mut().filter(|s| !s.is_filler()) {
            s.dma = s.addr ^ 0x8000_0000_0000;
        }
        let mut groups = TidGroups::new(0, 16).unwrap();
        let mut rcv = ArrayRcv::default();
        let mut alloc = TidAlloc::default();
        let mut prog = Programmed::default();
        g.bench_function(id, |b| {
            b.iter(|| {
                groups.allocate_into(black_box(&sets), &mut alloc).unwrap();
                groups
                    .program_into(&mut rcv, &alloc, &sets, pmtu, &mut prog)
                    .unwrap();
                groups.unprogram(&mut rcv, &alloc).unwrap();
                black_box(prog.npkts)
            })
        });
        black_box(rcv.entries);
    }
    g.finish();
}

criterion_group!(benches, bench_find, bench_cycle);
criterion_main!(benches);
