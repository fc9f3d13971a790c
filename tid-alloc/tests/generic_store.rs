// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The generic allocation path as another platform drives it: page sets
//! from a source that is not a slice (`flow->pagesets[]` read set by set),
//! node lists and TID-entry sinks reached through `&mut`, and nodes the
//! caller rebuilt itself (`kern_add_tid_node()`'s group, map and count).
//! Each result is checked against what the slice path of
//! [`TidGroups::program`] gives for the same state, or against the entries
//! the driver's `kern_program_rcv_group()` writes.

use arrayvec::ArrayVec;
use hfi1_hal::consts::MAX_PAGESETS;
use hfi1_hal::sim::{SimCall, SimContext};
use hfi1_hal::{RcvType, TidCtrl, TidEntry};
use tid_alloc::groups::{GroupStore, NodeList, PageSetSource, ProgramSink};
use tid_alloc::groups::{alloc_tids, program_rcvarray, unprogram_rcvarray};
use tid_alloc::{
    AllocError, GroupList, GroupView, PageSet, Programmed, TidGroups, TidNode, find_phys_blocks,
};

const PMTU: u32 = 4096;
const GROUPS: usize = 8;

/// Page sets read one by one, as a platform that keeps them in its own
/// records hands them out (no slice, no eight at once).
struct OneByOne(Vec<PageSet>);

impl PageSetSource for OneByOne {
    fn set_count(&self) -> usize {
        self.0.len()
    }

    fn set(&self, i: usize) -> Option<PageSet> {
        self.0.get(i).copied()
    }
}

/// Page sets read one by one, but eight at once where it can (taken from
/// the slice implementation), still without a slice to borrow.
struct EightAtOnce(Vec<PageSet>);

impl PageSetSource for EightAtOnce {
    fn set_count(&self) -> usize {
        self.0.len()
    }

    fn set(&self, i: usize) -> Option<PageSet> {
        self.0.get(i).copied()
    }

    fn chunk8(&self, at: usize) -> Option<[PageSet; 8]> {
        self.0.as_slice().chunk8(at)
    }
}

/// `n` pages none of which follows the one before: `n` single-page sets.
fn scattered(n: u64) -> Vec<PageSet> {
    let pages: Vec<u64> = (0..n).map(|i| (0x1000 + 2 * i) * 4096).collect();
    let sets: Vec<PageSet> = find_phys_blocks(&pages, PMTU)
        .unwrap()
        .iter()
        .copied()
        .collect();
    assert_eq!(sets.len() as u64, n + n % 2);
    sets
}

/// A context with some groups partly used, so an allocation mixes whole
/// free groups, used groups and a partial free group.
fn context() -> (TidGroups, SimContext) {
    let mut g = TidGroups::new(0, GROUPS).unwrap();
    let mut sim = SimContext::new(0, 8 * GROUPS as u32);
    let first = scattered(6);
    let a = g.allocate(&first).unwrap();
    g.program(&mut sim, &a, &first, PMTU).unwrap();
    sim.set_logging(true);
    sim.take_log();
    (g, sim)
}

fn views(g: &TidGroups) -> (Vec<GroupView>, [Vec<u32>; 3]) {
    let lists = [GroupList::Free, GroupList::Used, GroupList::Full]
        .map(|l| g.list(l).map(|v| v.base).collect::<Vec<_>>());
    ((0..GROUPS).filter_map(|i| g.group(i)).collect(), lists)
}

/// Something already in a node list and a sink, as a flow record that is
/// reused holds from its last segment.
fn leftovers() -> (ArrayVec<TidNode, MAX_PAGESETS>, Programmed) {
    let mut nodes = ArrayVec::new();
    nodes.push(TidNode::new(GROUPS as u16 - 1, 0, 8));
    nodes.push(TidNode::new(GROUPS as u16 - 2, 0, 2));
    let mut out = Programmed::default();
    out.tid_entries
        .push(TidEntry::new(7, TidCtrl::Pair, 2).unwrap());
    out.npkts = 99;
    (nodes, out)
}

/// Runs one segment of `sets` through `alloc_tids` and `program_rcvarray`
/// with the list and sink behind `&mut`, the sets behind `&`, and checks
/// everything against [`TidGroups::allocate`] and [`TidGroups::program`]
/// over the same sets as a slice.
fn same_as_slice<S: PageSetSource>(source: &S, sets: &[PageSet]) {
    let (mut want_g, mut want_sim) = context();
    let alloc = want_g.allocate(sets).unwrap();
    let want = want_g.program(&mut want_sim, &alloc, sets, PMTU).unwrap();

    let (mut g, mut sim) = context();
    let (mut list, mut out) = leftovers();
    let mut nodes = &mut list;
    alloc_tids(&g, source.set_count(), &mut nodes).unwrap();
    assert_eq!(nodes.len(), alloc.nodes().len());
    assert_eq!(
        list.as_slice(),
        alloc.nodes(),
        "the nodes the driver chooses"
    );
    let mut sink = &mut out;
    program_rcvarray(&mut g, &mut sim, &&mut list, &source, PMTU, &mut sink).unwrap();
    assert_eq!(out, want, "TID entries and packets");
    assert_eq!(sim.log(), want_sim.log(), "RcvArray writes, in order");
    assert_eq!(views(&g), views(&want_g), "groups and lists");
}

#[test]
fn a_source_set_by_set_programs_what_the_slice_programs() {
    // 2 whole free groups, then used and partial ones; 4 sets; 64 sets.
    for n in [22, 4, 58] {
        let sets = scattered(n);
        same_as_slice(&OneByOne(sets.clone()), &sets);
        same_as_slice(&EightAtOnce(sets.clone()), &sets);
    }
}

#[test]
fn a_source_set_by_set_refuses_a_bad_set_by_its_index() {
    let mut sets = scattered(12);
    sets[9].count = 3;
    let (mut g, mut sim) = context();
    let before = views(&g);
    let mut list = ArrayVec::<TidNode, MAX_PAGESETS>::new();
    alloc_tids(&g, sets.len(), &mut list).unwrap();
    let (_, mut out) = leftovers();
    let kept = out.clone();
    let one = OneByOne(sets.clone());
    let r = program_rcvarray(&mut g, &mut sim, &list, &&one, PMTU, &mut &mut out);
    assert_eq!(r, Err(AllocError::BadPageSet { index: 9, count: 3 }));
    let r = program_rcvarray(&mut g, &mut sim, &list, &&EightAtOnce(sets), PMTU, &mut out);
    assert_eq!(r, Err(AllocError::BadPageSet { index: 9, count: 3 }));
    assert_eq!(out, kept, "the sink is untouched on error");
    assert!(sim.log().is_empty(), "nothing written");
    assert_eq!(views(&g), before);
}

/// Nodes a caller rebuilt from group, map and count, whose entries do not
/// start a pair: a node taking only the even entry of a pair makes a CTRL 1
/// entry and fills the odd one; one taking only the odd entry fills the
/// even one and makes a CTRL 2 entry. Each takes exactly one page set.
/// Kernel: the per-entry `pair` logic of `kern_program_rcv_group()`.
#[test]
fn a_single_entry_of_a_pair_takes_one_set() {
    let mut g = TidGroups::new(0, GROUPS).unwrap();
    let mut sim = SimContext::new(0, 8 * GROUPS as u32);
    sim.set_logging(true);
    let sets = scattered(2);
    let nodes = [
        TidNode::new(0, 0b0000_0010, 1), // entry 0
        TidNode::new(1, 0b0000_0001, 1), // entry 9
    ];
    let mut list: ArrayVec<TidNode, MAX_PAGESETS> = nodes.into_iter().collect();
    let mut out = Programmed::default();
    program_rcvarray(&mut g, &mut sim, &&mut list, &sets[..], PMTU, &mut out).unwrap();
    let want: ArrayVec<TidEntry, MAX_PAGESETS> = [
        TidEntry::new(0, TidCtrl::Even, 1).unwrap(),
        TidEntry::new(4, TidCtrl::Odd, 1).unwrap(),
    ]
    .into_iter()
    .collect();
    assert_eq!(out.tid_entries, want);
    assert_eq!(out.npkts, 2);
    let put = |rcventry: u32, s: &PageSet| SimCall::PutTid {
        rcventry,
        ty: RcvType::Expected,
        pa: s.dma,
        order: 1,
    };
    let wc = |rcventry| SimCall::WcFill { rcventry };
    let mut log = vec![put(0, &sets[0]), wc(1)];
    log.extend((2..8).map(wc));
    log.extend([wc(8), put(9, &sets[1])]);
    log.extend((10..16).map(wc));
    assert_eq!(sim.log(), log.as_slice());
    let used = [GroupList::Used].map(|l| g.list(l).map(|v| v.base).collect::<Vec<_>>());
    assert_eq!(used, [vec![0, 8]]);

    // Taken back: the entries are written INVALID, the rest filled.
    sim.take_log();
    unprogram_rcvarray(&mut g, &mut sim, &&mut list);
    assert_eq!(g.free_groups(), GROUPS);
    assert_eq!(g.group(1).map(|v| (v.used, v.map)), Some((0, 0)));
    let inval = |rcventry| SimCall::PutTid {
        rcventry,
        ty: RcvType::Invalid,
        pa: 0,
        order: 0,
    };
    assert!(sim.log().contains(&inval(0)) && sim.log().contains(&inval(9)));
}

/// An allocation released once is stale: releasing it again, or after its
/// entries went to another allocation, is refused and changes nothing.
/// Kernel: none (the driver trusts its flow records); what `unprogram`'s
/// ownership check stands for.
#[test]
fn a_released_allocation_is_not_released_again() {
    let (mut g, mut sim) = context();
    let sets = scattered(10);
    let a = g.allocate(&sets).unwrap();
    g.program(&mut sim, &a, &sets, PMTU).unwrap();
    g.unprogram(&mut sim, &a).unwrap();
    let before = views(&g);
    sim.take_log();
    assert_eq!(g.unprogram(&mut sim, &a), Err(AllocError::Stale));
    let b = g.allocate(&sets).unwrap();
    g.program(&mut sim, &b, &sets, PMTU).unwrap();
    let held = views(&g);
    sim.take_log();
    assert_eq!(g.unprogram(&mut sim, &a), Err(AllocError::Stale));
    assert!(sim.log().is_empty());
    assert_eq!(views(&g), held);
    g.unprogram(&mut sim, &b).unwrap();
    // Every group free again (the list order is the release order).
    assert_eq!(views(&g).0, before.0);
}

/// Counters written for a group the context does not have change nothing,
/// so an allocation made before still programs.
#[test]
fn counters_of_a_group_past_the_end_change_nothing() {
    let (mut g, mut sim) = context();
    let sets = scattered(4);
    let a = g.allocate(&sets).unwrap();
    let before = views(&g);
    g.set_counters(GROUPS as u16, 8, 0xff);
    assert_eq!(g.counters(GROUPS as u16), (0, 0));
    assert_eq!(views(&g), before);
    g.program(&mut sim, &a, &sets, PMTU).unwrap();
}

#[test]
fn a_node_list_is_empty_until_a_node_is_pushed() {
    let mut list = ArrayVec::<TidNode, MAX_PAGESETS>::new();
    assert!(NodeList::is_empty(&list));
    let mut by_ref = &mut list;
    assert!(NodeList::is_empty(&by_ref));
    NodeList::push(&mut by_ref, TidNode::new(0, 0, 2)).unwrap();
    assert!(!NodeList::is_empty(&by_ref));
    assert!(!NodeList::is_empty(&list));
    NodeList::clear(&mut &mut list);
    assert!(NodeList::is_empty(&list));
}

/// A sink reached through `&mut` starts over when told to.
#[test]
fn a_sink_behind_a_reference_starts_over() {
    let (_, mut out) = leftovers();
    let mut sink = &mut out;
    ProgramSink::reset(&mut sink);
    sink.add_packets(3);
    assert_eq!(
        out,
        Programmed {
            npkts: 3,
            ..Programmed::default()
        }
    );
}

/// Counters a platform wrote that disagree (no entry used, yet every entry
/// marked in the map) give a node that takes none of the entries it
/// counts; releasing that allocation is refused rather than taking back
/// entries it never held.
#[test]
fn a_node_that_takes_fewer_entries_than_it_counts_is_not_released() {
    let mut g = TidGroups::new(0, 1).unwrap();
    let mut sim = SimContext::new(0, 8);
    g.set_counters(0, 0, 0xff);
    let sets = scattered(2);
    let a = g.allocate(&sets).unwrap();
    assert_eq!(a.nodes().iter().map(|n| n.taken()).collect::<Vec<_>>(), [0]);
    g.program(&mut sim, &a, &sets, PMTU).unwrap();
    let before = views(&g);
    assert_eq!(g.unprogram(&mut sim, &a), Err(AllocError::Stale));
    assert_eq!(views(&g), before);
}
