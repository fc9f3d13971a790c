// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Property tests: the invariants of pagesets and TID groups, and "no input
//! panics" for every public function (arbitrary, foreign and stale inputs
//! get typed errors and change nothing).

use hfi1_hal::sim::{SimCall, SimContext};
use hfi1_hal::{RcvType, TidCtrl};
use proptest::prelude::*;
use tid_alloc::{
    AllocError, GroupList, GroupView, PageSet, PageSets, TidAlloc, TidGroups, find_phys_blocks,
    find_phys_blocks_4k, find_phys_blocks_8k, flush_pages,
};

// ---- inputs ---------------------------------------------------------------

/// A segment's page list: runs of contiguous pfns separated by forward,
/// backward or far jumps, plus duplicates, 0..=64 pages, no pfn 0.
fn page_list() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec((1usize..20, 0u8..4, 1u64..1 << 20), 0..16).prop_map(|runs| {
        let mut pages = Vec::new();
        let mut pfn = 0x1000u64;
        for (len, jump, far) in runs {
            pfn = match jump {
                0 => pfn + 1 + far % 3,                   // small forward gap
                1 => pfn.saturating_sub(far % 50).max(1), // backward (may duplicate)
                2 => far << 8,                            // far away
                _ => pfn,                                 // duplicate page
            }
            .max(1);
            for _ in 0..len {
                if pages.len() == 64 {
                    break;
                }
                pages.push(pfn * 4096);
                pfn += 1;
            }
        }
        pages
    })
}

fn pmtu() -> impl Strategy<Value = u32> {
    prop::sample::select(vec![4096u32, 8192, 10240])
}

// ---- pagesets -------------------------------------------------------------

fn check_cover(pages: &[u64], sets: &PageSets) -> Result<(), TestCaseError> {
    prop_assert_eq!(sets.len() % 2, 0, "even number of sets");
    let mut next = 0usize;
    for s in sets.iter().filter(|s| !s.is_filler()) {
        prop_assert_eq!(usize::from(s.idx), next, "sets follow each other");
        prop_assert!(s.count.is_power_of_two() && s.count <= 512);
        prop_assert_eq!(s.addr, pages[next]);
        for j in 0..usize::from(s.count) {
            prop_assert_eq!(
                pages[next + j],
                s.addr + 4096 * j as u64,
                "contiguous inside a set"
            );
        }
        next += usize::from(s.count);
    }
    prop_assert_eq!(next, pages.len(), "every page exactly once");
    for s in sets.iter().filter(|s| s.is_filler()) {
        prop_assert_eq!(*s, PageSet::FILLER);
    }
    Ok(())
}

proptest! {
    #[test]
    fn pagesets_cover_every_page_once_in_order(pages in page_list()) {
        let s4 = find_phys_blocks_4k(&pages).unwrap();
        let s8 = find_phys_blocks_8k(&pages).unwrap();
        check_cover(&pages, &s4)?;
        check_cover(&pages, &s8)?;
        // The 4 KiB variant pads only at the very end.
        prop_assert!(s4.iter().rev().skip(1).all(|s| !s.is_filler()));
        prop_assert_eq!(find_phys_blocks(&pages, 4096).unwrap(), s4);
        prop_assert_eq!(find_phys_blocks(&pages, 8192).unwrap(), s8);
    }

    #[test]
    fn tid_lengths_add_up_to_the_pages(pages in page_list(), pmtu in pmtu(), base in 0u32..64) {
        prop_assume!(!pages.is_empty());
        let sets = find_phys_blocks(&pages, pmtu).unwrap();
        let mut groups = TidGroups::new(base * 8, 16).unwrap();
        let mut sim = SimContext::new(base * 8, 128);
        let alloc = groups.allocate(&sets).unwrap();
        let prog = groups.program(&mut sim, &alloc, &sets, pmtu).unwrap();
        let len: u32 = prog.tid_entries.iter().map(|t| t.len()).sum();
        prop_assert_eq!(len as usize, pages.len());
        let per_pkt = pmtu / 4096;
        let npkts: u32 = prog.tid_entries.iter().map(|t| t.len().div_ceil(per_pkt)).sum();
        prop_assert_eq!(prog.npkts, npkts);
        // Every EXPECTED entry maps exactly one non-filler set.
        let expected = sim.log().iter().filter(|c| matches!(c, SimCall::PutTid { ty: RcvType::Expected, .. })).count();
        prop_assert_eq!(expected, sets.iter().filter(|s| !s.is_filler()).count());
        prop_assert!(prog.tid_entries.iter().all(|t| t.ctrl().is_some()));
        prop_assert!(prog.tid_entries.iter().all(|t| t.ctrl() != Some(TidCtrl::Odd)), "pair-aligned allocations never use CTRL 2");
        prop_assert_eq!(sim.faults(), 0);
    }
}

// ---- groups ---------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    /// Allocate this many sets (made even and at least 2), with these
    /// counts (cycled).
    Alloc(usize, Vec<u16>),
    /// Free the live allocation at this position (mod the number live).
    Free(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (1usize..=32, prop::collection::vec(prop::sample::select(vec![0u16, 1, 2, 4, 8, 64]), 1..4))
            .prop_map(|(half, counts)| Op::Alloc(half * 2, counts)),
        2 => any::<usize>().prop_map(Op::Free),
    ];
    prop::collection::vec(op, 1..60)
}

fn snapshot(g: &TidGroups) -> Vec<Vec<GroupView>> {
    [GroupList::Free, GroupList::Used, GroupList::Full]
        .iter()
        .map(|&l| g.list(l).collect())
        .collect()
}

/// The entries (absolute indices) an allocation holds, from its nodes.
fn entries_of(alloc: &TidAlloc) -> Vec<u32> {
    alloc
        .tnodes()
        .zip(alloc.nodes())
        .flat_map(|(info, node)| {
            let taken = node.taken();
            (0..8u32)
                .filter(move |i| taken & (1 << i) != 0)
                .map(move |i| info.base + i)
        })
        .collect()
}

/// Checks the group state against the live allocations: each group's map
/// is exactly the union of what the live allocations hold in it, used is
/// its population count, and the group sits on the list its count says.
fn check_state(g: &TidGroups, live: &[(TidAlloc, Vec<u32>)]) -> Result<(), TestCaseError> {
    let base = g.expected_base();
    let mut want = vec![0u8; g.group_count()];
    let mut seen = std::collections::HashSet::new();
    for (_, entries) in live {
        for &e in entries {
            prop_assert!(seen.insert(e), "entry {} handed out twice", e);
            let rel = (e - base) as usize;
            want[rel / 8] |= 1 << (rel % 8);
        }
    }
    for (i, &m) in want.iter().enumerate() {
        let v = g.group(i).unwrap();
        prop_assert_eq!(v.map, m, "group {} map", i);
        prop_assert_eq!(u32::from(v.used), m.count_ones());
    }
    let lists = snapshot(g);
    prop_assert_eq!(
        lists.iter().map(Vec::len).sum::<usize>(),
        g.group_count(),
        "every group on one list"
    );
    prop_assert!(lists[0].iter().all(|v| v.used == 0));
    prop_assert!(lists[1].iter().all(|v| v.used > 0 && v.used < 8));
    prop_assert!(lists[2].iter().all(|v| v.used == 8));
    prop_assert_eq!(g.entries_in_use() as usize, seen.len());
    Ok(())
}

proptest! {
    #[test]
    fn alloc_free_in_any_order_restores_groups(
        ngroups in 1usize..=16,
        base in prop::sample::select(vec![0u32, 8, 512, 2048]),
        pmtu in pmtu(),
        ops in ops(),
    ) {
        let mut g = TidGroups::new(base, ngroups).unwrap();
        let mut sim = SimContext::new(base, ngroups as u32 * 8);
        sim.set_logging(false);
        let mut live: Vec<(TidAlloc, Vec<u32>)> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc(n, counts) => {
                    let sets: Vec<PageSet> = (0..n)
                        .map(|k| {
                            let c = counts[k % counts.len()];
                            PageSet { idx: k as u8, count: c, addr: 0, dma: if c == 0 { 0 } else { 0x1000 * (k as u64 + 1) } }
                        })
                        .collect();
                    let before = snapshot(&g);
                    match g.allocate(&sets) {
                        Ok(a) => {
                            prop_assert_eq!(a.nodes().iter().map(|n| usize::from(n.cnt())).sum::<usize>(), n);
                            g.program(&mut sim, &a, &sets, pmtu).unwrap();
                            let e = entries_of(&a);
                            prop_assert_eq!(e.len(), n);
                            live.push((a, e));
                        }
                        Err(AllocError::NoSpace) => prop_assert_eq!(snapshot(&g), before),
                        Err(e) => prop_assert!(false, "unexpected error {e}"),
                    }
                }
                Op::Free(k) => {
                    if !live.is_empty() {
                        let (a, _) = live.remove(k % live.len());
                        g.unprogram(&mut sim, &a).unwrap();
                        prop_assert_eq!(g.unprogram(&mut sim, &a), Err(AllocError::Stale));
                    }
                }
            }
            check_state(&g, &live)?;
        }
        for (a, _) in live.drain(..) {
            g.unprogram(&mut sim, &a).unwrap();
        }
        check_state(&g, &live)?;
        prop_assert_eq!(g.free_groups(), ngroups);
        // Everything the sim was told to map is INVALID again.
        prop_assert_eq!(sim.expected_entries(), 0);
        prop_assert_eq!(sim.faults(), 0);
    }
}

// ---- no input panics ------------------------------------------------------

fn arbitrary_sets() -> impl Strategy<Value = Vec<PageSet>> {
    prop::collection::vec(
        (
            any::<u8>(),
            prop_oneof![
                any::<u16>(),
                prop::sample::select(vec![0u16, 1, 2, 512, 1024])
            ],
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(idx, count, addr, dma)| PageSet {
                idx,
                count,
                addr,
                dma,
            }),
        0..80,
    )
}

proptest! {
    #[test]
    fn pageset_functions_take_any_input(
        pages in prop::collection::vec(prop_oneof![any::<u64>(), (0u64..8).prop_map(|p| p * 4096), Just(!4095u64)], 0..80),
        pmtu in any::<u32>(),
        idx in any::<usize>(),
        count in prop_oneof![any::<usize>(), 0usize..70],
    ) {
        let r = find_phys_blocks(&pages, pmtu);
        let valid = pages.len() <= 64 && pages.iter().all(|&p| p != 0 && p % 4096 == 0);
        prop_assert_eq!(r.is_ok(), valid);
        if let Ok(sets) = r {
            check_cover(&pages, &sets)?;
        }
        let mut sets = PageSets::new();
        let _ = flush_pages(&mut sets, &pages, idx, count);
        let _ = PageSet { idx: 0, count: count as u16, addr: 0, dma: 0 }.order();
    }

    #[test]
    fn group_functions_take_any_input(
        base in prop_oneof![1 => any::<u32>(), 1 => Just(u32::MAX - 7), 4 => (0u32..8).prop_map(|b| b * 8)],
        ngroups in prop_oneof![4 => 1usize..=16, 1 => 0usize..300, 1 => any::<usize>()],
        sets in arbitrary_sets(),
        pmtu in prop_oneof![any::<u32>(), Just(4096u32), Just(8192)],
        prefill in prop::collection::vec(1usize..=8, 0..6),
    ) {
        let Ok(mut g) = TidGroups::new(base, ngroups) else {
            let bad = ngroups == 0 || ngroups > 256 || base % 8 != 0 || base.checked_add(ngroups as u32 * 8).is_none();
            prop_assert!(bad);
            return Ok(());
        };
        let mut sim = SimContext::new(base, (ngroups * 8) as u32);
        // Some allocations already in place, so all three passes can run.
        let mut held = Vec::new();
        for half in prefill {
            let ok_sets = vec![PageSet { idx: 0, count: 1, addr: 4096, dma: 4096 }; half * 2];
            if let Ok(a) = g.allocate(&ok_sets) {
                g.program(&mut sim, &a, &ok_sets, 8192).unwrap();
                held.push(a);
            }
        }
        sim.take_log();
        let mut before = snapshot(&g);
        let in_use = g.entries_in_use();

        // A foreign allocation (same geometry, other instance) and an
        // empty one are refused.
        let other = TidGroups::new(base, ngroups).unwrap();
        let two = vec![PageSet::FILLER; 2];
        let foreign = other.allocate(&two).unwrap();
        prop_assert_eq!(g.program(&mut sim, &foreign, &two, 4096), Err(AllocError::Foreign));
        prop_assert_eq!(g.unprogram(&mut sim, &foreign), Err(AllocError::Foreign));
        prop_assert_eq!(g.unprogram(&mut sim, &TidAlloc::default()), Err(AllocError::Foreign));

        match g.allocate(&sets) {
            Ok(a) => {
                prop_assert!(!sets.is_empty() && sets.len() <= 64 && sets.len() % 2 == 0);
                // Never programmed: releasing it is refused.
                prop_assert_eq!(g.unprogram(&mut sim, &a), Err(AllocError::Stale));
                // Wrong set list length.
                let mut longer = sets.clone();
                longer.push(PageSet::FILLER);
                let mismatch = matches!(g.program(&mut sim, &a, &longer, pmtu), Err(AllocError::SetCountMismatch { .. }));
                prop_assert!(mismatch);
                match g.program(&mut sim, &a, &sets, pmtu) {
                    Ok(p) => {
                        prop_assert!(pmtu >= 4096);
                        prop_assert!(sets.iter().all(PageSet::is_programmable));
                        prop_assert!(p.tid_entries.len() <= sets.len());
                        // Programming the same allocation again is stale.
                        prop_assert_eq!(g.program(&mut sim, &a, &sets, pmtu), Err(AllocError::Stale));
                        g.unprogram(&mut sim, &a).unwrap();
                        prop_assert_eq!(g.unprogram(&mut sim, &a), Err(AllocError::Stale));
                        sim.take_log();
                        // The cycle restores every group's counts; the
                        // freed groups moved to the tail of their lists.
                        let by_base = |l: &Vec<Vec<GroupView>>| {
                            let mut v: Vec<_> = l.iter().flatten().copied().collect();
                            v.sort_by_key(|g| g.base);
                            v
                        };
                        let now = snapshot(&g);
                        prop_assert_eq!(by_base(&now), by_base(&before));
                        before = now;
                    }
                    Err(AllocError::BadPmtu(_) | AllocError::BadPageSet { .. }) => {}
                    Err(e) => prop_assert!(false, "unexpected program error {e}"),
                }
            }
            Err(AllocError::NoPageSets) => prop_assert!(sets.is_empty()),
            Err(AllocError::TooManyPageSets) => prop_assert!(sets.len() > 64),
            Err(AllocError::OddPageSets(n)) => prop_assert_eq!(n % 2, 1),
            Err(AllocError::NoSpace) => {}
            Err(e) => prop_assert!(false, "unexpected allocate error {e}"),
        }
        // Every refused call above left no trace.
        prop_assert_eq!(snapshot(&g), before);
        prop_assert_eq!(g.entries_in_use(), in_use);
        prop_assert!(sim.log().is_empty());
        // An allocation made before the state changed is stale for program.
        if let Ok(a) = g.allocate(&two) {
            if let Some(h) = held.pop() {
                g.unprogram(&mut sim, &h).unwrap();
                prop_assert_eq!(g.program(&mut sim, &a, &two, 4096), Err(AllocError::Stale));
            }
        }
        for h in held {
            g.unprogram(&mut sim, &h).unwrap();
        }
        prop_assert_eq!(g.entries_in_use(), 0);
        prop_assert_eq!(sim.faults(), 0);
    }
}
