// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Instruction-count driver: `instr <op> <iterations>` sets up one
//! benchmark's input, then runs its operation `iterations` times.
//!
//! `benches/instr.sh` runs it under cachegrind twice, with the iteration
//! count given and with 0, and divides the difference in instructions by
//! the count: the setup, the process start and the exit cancel out, what
//! is left is the operation's own cost, the same on a loaded machine as on
//! a quiet one. The ops and inputs are those of the criterion benchmarks
//! (`benches/tid_alloc.rs`, `benches/flow.rs`, `benches/read_segment.rs`),
//! under the same names as the C reference driver (`c-ref/driver.c`).

use std::hint::black_box;
use std::process::ExitCode;

use benches::{ArrayFlows, ArrayRcv, contiguous, mixed, scattered};
use hfi1_hal::platform::FlowTable;
use hfi1_hal::sim::SimContext;
use hfi1_hal::{FlowIndex, Generation};
use tid_alloc::{
    PageSets, Programmed, TidAlloc, TidGroups, find_phys_blocks, find_phys_blocks_4k_into,
    find_phys_blocks_8k_into,
};
use tid_flow::HwFlows;

/// Every op name, in the order `instr.sh` reports them (the
/// `read_segment` ops have no C counterpart: the C is the whole driver).
const OPS: [&str; 15] = [
    "find_phys_blocks/4k/contiguous",
    "find_phys_blocks/4k/scattered",
    "find_phys_blocks/4k/mixed",
    "find_phys_blocks/8k/contiguous",
    "find_phys_blocks/8k/scattered",
    "find_phys_blocks/8k/mixed",
    "tid_cycle/scattered/4096",
    "tid_cycle/contiguous/4096",
    "tid_cycle/mixed/4096",
    "tid_cycle/scattered/8192",
    "flow/reserve_release",
    "flow/reserve_setup_release",
    "flow/reserve_setup_release_sim",
    "read_segment/scattered",
    "read_segment/contiguous",
];

fn pages_of(name: &str) -> Option<Vec<u64>> {
    match name {
        "contiguous" => Some(contiguous()),
        "scattered" => Some(scattered()),
        "mixed" => Some(mixed()),
        _ => None,
    }
}

fn find(variant: &str, pages: &[u64], n: u64) -> Option<()> {
    let f = match variant {
        "4k" => find_phys_blocks_4k_into,
        "8k" => find_phys_blocks_8k_into,
        _ => return None,
    };
    let mut sets = PageSets::new();
    for _ in 0..n {
        f(black_box(pages), &mut sets).ok()?;
        black_box(&sets);
    }
    Some(())
}

fn tid_cycle(pages: &[u64], pmtu: u32, n: u64) -> Option<()> {
    let mut sets = find_phys_blocks(pages, pmtu).ok()?;
    for s in sets.iter_mut().filter(|s| !s.is_filler()) {
        s.dma = s.addr ^ 0x8000_0000_0000;
    }
    let mut groups = TidGroups::new(0, 16).ok()?;
    let mut rcv = ArrayRcv::default();
    let mut alloc = TidAlloc::default();
    let mut prog = Programmed::default();
    for _ in 0..n {
        groups.allocate_into(black_box(&sets), &mut alloc).ok()?;
        groups
            .program_into(&mut rcv, &alloc, &sets, pmtu, &mut prog)
            .ok()?;
        groups.unprogram(&mut rcv, &alloc).ok()?;
        black_box(prog.npkts);
    }
    black_box(rcv.entries);
    Some(())
}

/// The flow ops on `chip`: [`ArrayFlows`] (what the C's `write_csr`
/// does) or the software chip with its call log off.
fn flow(with_setup: bool, sim: bool, n: u64) -> Option<()> {
    if sim {
        let mut chip = SimContext::new(0, 8);
        chip.set_logging(false);
        flow_on(&mut chip, with_setup, n)
    } else {
        flow_on(&mut ArrayFlows::default(), with_setup, n)
    }
}

/// The flow ops, as `c-ref/driver.c` runs them: the flow asked for is a
/// constant (the C's `kern_reserve_flow(rcd, 7)` and `(rcd, -1)`, which
/// gcc specialises), and what each op returns is kept (the C returns the
/// flow number to its loop, and keeps the generation `setup` returns).
fn flow_on(chip: &mut impl FlowTable, with_setup: bool, n: u64) -> Option<()> {
    let mut flows = HwFlows::with_generations([Generation::masked(1); 32]);
    let seven = FlowIndex::new(7);
    for _ in 0..n {
        if with_setup {
            if let Ok(f) = flows.reserve(seven) {
                black_box(flows.setup(chip, f));
                flows.clear(chip, f);
                flows.release(f);
            }
        } else if let Ok(f) = flows.reserve(None) {
            flows.release(black_box(f));
        }
    }
    (flows.free_count() == 32).then_some(())
}

/// One 256 KiB READ segment end to end (`benches::read_segment`); the
/// setup (and one cycle, so the first-use allocations are outside the
/// count) happens for `n` = 0 too.
fn read_segment(scattered: bool, n: u64) -> Option<()> {
    let mut root = hfi1_hal::lock_order::LockToken::root();
    let mut s = benches::read_segment::Segment::new(scattered);
    black_box(s.cycle(&mut root));
    for _ in 0..n {
        black_box(s.cycle(&mut root));
    }
    (s.live_mappings() == 0).then_some(())
}

fn run(op: &str, n: u64) -> Option<()> {
    let parts: Vec<&str> = op.split('/').collect();
    match parts.as_slice() {
        ["find_phys_blocks", variant, input] => find(variant, &pages_of(input)?, n),
        ["tid_cycle", input, pmtu] => tid_cycle(&pages_of(input)?, pmtu.parse().ok()?, n),
        ["flow", "reserve_release"] => flow(false, false, n),
        ["flow", "reserve_setup_release"] => flow(true, false, n),
        ["flow", "reserve_setup_release_sim"] => flow(true, true, n),
        ["read_segment", "scattered"] => read_segment(true, n),
        ["read_segment", "contiguous"] => read_segment(false, n),
        _ => None,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [list] if list == "--list" => {
            for op in OPS {
                println!("{op}");
            }
            ExitCode::SUCCESS
        }
        [op, n] => match (n.parse::<u64>().ok()).and_then(|n| run(op, n)) {
            Some(()) => ExitCode::SUCCESS,
            None => {
                eprintln!("instr: unknown op {op:?}, bad count {n:?}, or the op failed");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("usage: instr <op> <iterations> | instr --list");
            ExitCode::FAILURE
        }
    }
}
