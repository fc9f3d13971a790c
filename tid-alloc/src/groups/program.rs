// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Programming a segment's RcvArray entries and taking them back, written
//! once over [`GroupStore`]: the driver's `kern_program_rcvarray()`
//! ([`program_rcvarray`]) and the `kern_unprogram_rcv_group()` loop of
//! `hfi1_kern_exp_rcv_clear()` ([`unprogram_rcvarray`]).
//!
//! # Locking
//!
//! The context's `exp_lock`, as for every [`GroupStore`] function;
//! [`program_rcvarray`] in the same critical section as the
//! [`alloc_tids`](super::alloc_tids) that chose its nodes.

use hfi1_hal::consts::{PAGE_SHIFT, TID_GROUP_FULL_MAP, TID_GROUP_SIZE};
use hfi1_hal::{RcvArray, RcvType, TidCtrl, TidEntry};

use super::store::{GroupStore, NodeList, PageSetSource, ProgramSink};
use super::{GROUP_SIZE, TidNode};
use crate::AllocError;
use crate::pageset::PageSet;

/// Programs one entry with a set: EXPECTED with its DMA address and order,
/// or INVALID for a filler. Kernel: the `hfi1_put_tid()` calls of
/// `kern_program_rcv_group()`.
#[inline(always)]
fn put_set(rcv: &mut impl RcvArray, rcventry: u32, set: &PageSet) {
    let count = u32::from(set.count);
    if count == 0 {
        rcv.put_tid(rcventry, RcvType::Invalid, 0, 0);
    } else {
        // `PageSet::order` for a count known not to be 0, in 32 bits
        // (one bit scan and an add; at most 16, so the cast is exact).
        let order = (u32::BITS - count.leading_zeros()) as u8;
        rcv.put_tid(rcventry, RcvType::Expected, set.dma, order);
    }
}

/// Packets per TID entry at one path MTU: the driver rounds
/// `pages / (pmtu / 4096)` up with a shift by log2 of the pages per packet
/// (exact for the power-of-two MTUs; 10240 counts as 2 pages).
#[derive(Debug, Clone, Copy)]
pub(super) struct PacketShape {
    pmtu_pages: u32,
    shift: u32,
}

impl PacketShape {
    /// The shape of `pmtu`; [`AllocError::BadPmtu`] below 4096.
    pub(super) fn new(pmtu: u32) -> Result<Self, AllocError> {
        let pmtu_pages = pmtu >> PAGE_SHIFT;
        match pmtu_pages.checked_ilog2() {
            Some(shift) => Ok(Self { pmtu_pages, shift }),
            None => Err(AllocError::BadPmtu(pmtu)),
        }
    }

    /// Packets a TID entry of `pages` pages takes.
    /// Kernel: `(npages + pmtu_pg - 1) >> ilog2(pmtu_pg)`.
    #[inline(always)]
    fn packets(self, pages: u32) -> u32 {
        pages.wrapping_add(self.pmtu_pages - 1) >> self.shift
    }
}

/// Where one group's RcvArray pairs are: the absolute index of its first
/// entry, and its first pair's index (relative to the expected base)
/// already in place as the IDX field of a TID entry.
#[derive(Debug, Clone, Copy)]
struct GroupPairs {
    abs_base: u32,
    /// IDX of the group's first pair, shifted into place.
    idx_word: u32,
    /// LEN bits kept: all 11, or none for a group whose pairs would not
    /// fit the IDX field.
    len_mask: u32,
}

/// First bit of a TID entry's IDX field.
const IDX_SHIFT: u32 = 22;
/// First bit of a TID entry's CTRL field.
const CTRL_SHIFT: u32 = 20;
/// The LEN field (bits 0..=10).
const LEN_MASK: u32 = 0x7FF;
/// The largest pair index a group's first pair can have: its four pairs
/// then end at 1023, the last the 10-bit IDX field holds.
const LAST_GROUP_PAIR: u32 = 1023 - 3;

const _: () = {
    let e = match TidEntry::new(LAST_GROUP_PAIR + 3, TidCtrl::Pair, LEN_MASK) {
        Ok(e) => e,
        Err(_) => panic!("the last pair and the largest LEN fit"),
    };
    assert!(e.raw() == (LAST_GROUP_PAIR + 3) << IDX_SHIFT | 3 << CTRL_SHIFT | LEN_MASK);
};

impl GroupPairs {
    /// The pairs of the group whose first entry is `abs_base`, with the
    /// context's entries starting at `expected_base`. The IDX field is
    /// checked here, once per group; a group whose pairs it cannot name
    /// (no store hands one out: at most 256 groups) gets entries with LEN
    /// 0, which the peer rejects, rather than entries naming other pairs.
    #[inline(always)]
    fn new(abs_base: u32, expected_base: u32) -> Self {
        // Groups start at a multiple of 8 from the expected base, so the
        // pair index of pair `p` is `rel_base / 2 + p`.
        let pair_base = abs_base.wrapping_sub(expected_base) >> 1;
        let fits = pair_base <= LAST_GROUP_PAIR;
        Self {
            abs_base,
            idx_word: if fits { pair_base << IDX_SHIFT } else { 0 },
            len_mask: if fits { LEN_MASK } else { 0 },
        }
    }

    /// The TID entry of pair `p` (CTRL, pages). Kernel: the
    /// `EXP_TID_SET(IDX | CTRL | LEN)` of `kern_program_rcv_group()`.
    ///
    /// The word is packed here without [`TidEntry::new`]'s field checks:
    /// IDX was checked for the group in [`Self::new`] (p < 4), and
    /// `pages` is at most 1024 (two sets of at most 512, checked by
    /// `check_sets` before anything is programmed), so LEN fits its 11
    /// bits; the mask keeps even a wrong count from reaching other fields.
    #[inline(always)]
    fn entry(self, p: u8, ctrl: TidCtrl, pages: u32) -> TidEntry {
        let raw = self.idx_word.wrapping_add(u32::from(p) << IDX_SHIFT)
            | ctrl.bits() << CTRL_SHIFT
            | (pages & self.len_mask);
        TidEntry::from_raw(raw)
    }

    /// Appends the TID entry of pair `p` (CTRL, pages); returns its
    /// packets (added to the sink once per group).
    #[inline(always)]
    fn push_entry(
        self,
        p: u8,
        ctrl: TidCtrl,
        pages: u32,
        shape: PacketShape,
        out: &mut (impl ProgramSink + ?Sized),
    ) -> u32 {
        out.push_entry(self.entry(p, ctrl, pages));
        shape.packets(pages)
    }

    /// Programs a whole free group with its eight sets: four pairs, four
    /// TID entries pushed together; returns the group's packets.
    #[inline(always)]
    fn put_whole(
        self,
        rcv: &mut impl RcvArray,
        chunk: &[PageSet; TID_GROUP_SIZE],
        shape: PacketShape,
        out: &mut (impl ProgramSink + ?Sized),
    ) -> u32 {
        let mut entries = [TidEntry::from_raw(0); 4];
        let mut npkts = 0u32;
        for ((p, pair), e) in (0u8..).zip(chunk.chunks_exact(2)).zip(&mut entries) {
            let [a, b] = pair else { continue };
            let (ctrl, pages) = self.put_sets(rcv, p, a, b);
            *e = self.entry(p, ctrl, pages);
            npkts = npkts.wrapping_add(shape.packets(pages));
        }
        out.push_group(entries);
        npkts
    }

    /// Programs both entries of pair `p` with `a` and `b` (a filler in the
    /// odd slot makes CTRL 1: the driver looks at the set it just
    /// programmed); returns the entry's packets.
    #[inline(always)]
    fn put_both(
        self,
        rcv: &mut impl RcvArray,
        p: u8,
        a: &PageSet,
        b: &PageSet,
        shape: PacketShape,
        out: &mut (impl ProgramSink + ?Sized),
    ) -> u32 {
        let (ctrl, pages) = self.put_sets(rcv, p, a, b);
        self.push_entry(p, ctrl, pages, shape, out)
    }

    /// Writes `a` and `b` into the two RcvArray slots of pair `p`; returns
    /// the pair's CTRL (a filler in the odd slot makes it an even entry)
    /// and its pages.
    #[inline(always)]
    fn put_sets(self, rcv: &mut impl RcvArray, p: u8, a: &PageSet, b: &PageSet) -> (TidCtrl, u32) {
        let even = self.abs_base.wrapping_add(2 * u32::from(p));
        put_set(rcv, even, a);
        put_set(rcv, even.wrapping_add(1), b);
        let ctrl = if b.is_filler() {
            TidCtrl::Even
        } else {
            TidCtrl::Pair
        };
        (ctrl, u32::from(a.count).wrapping_add(u32::from(b.count)))
    }

    /// Pair `p` as the two bits of the node's `taken` map say:
    /// - neither taken: two write-combining fills;
    /// - only the even one: one TID entry, CTRL 1;
    /// - only the odd one: one TID entry, CTRL 2 (1 for a filler);
    /// - both: one TID entry for the pair, CTRL 3, LEN = both sets.
    ///
    /// This is the driver's entry-by-entry `pair` logic: an even entry
    /// starts a pair exactly when it and the next one are both taken by
    /// this node. Returns the packets of the entry made (0 for none).
    #[inline(always)]
    fn put_pair(
        self,
        rcv: &mut impl RcvArray,
        p: u8,
        bits: u8,
        next: &mut impl FnMut() -> PageSet,
        shape: PacketShape,
        out: &mut (impl ProgramSink + ?Sized),
    ) -> u32 {
        let even = self.abs_base.wrapping_add(2 * u32::from(p));
        let odd = even.wrapping_add(1);
        match bits {
            0 => {
                rcv.wc_fill(even);
                rcv.wc_fill(odd);
                0
            }
            1 => {
                let a = next();
                put_set(rcv, even, &a);
                rcv.wc_fill(odd);
                self.push_entry(p, TidCtrl::Even, u32::from(a.count), shape, out)
            }
            2 => {
                rcv.wc_fill(even);
                let b = next();
                put_set(rcv, odd, &b);
                let ctrl = if b.is_filler() {
                    TidCtrl::Even
                } else {
                    TidCtrl::Odd
                };
                self.push_entry(p, ctrl, u32::from(b.count), shape, out)
            }
            _ => {
                let (a, b) = (next(), next());
                self.put_both(rcv, p, &a, &b, shape, out)
            }
        }
    }
}

/// Where programming takes its page sets from, in order.
trait SetCursor {
    /// Runs `f` on the next eight sets and steps past them, if the source
    /// can hand them out at once (the fast path of a whole free group).
    fn with_whole<R>(&mut self, f: impl FnOnce(&[PageSet; TID_GROUP_SIZE]) -> R) -> Option<R>;

    /// The next set (a filler past the end) and steps past it.
    fn next_set(&mut self) -> PageSet;
}

/// The sets of a slice: whole groups are borrowed in place.
struct SliceCursor<'a>(&'a [PageSet]);

impl SetCursor for SliceCursor<'_> {
    #[inline(always)]
    fn with_whole<R>(&mut self, f: impl FnOnce(&[PageSet; TID_GROUP_SIZE]) -> R) -> Option<R> {
        let (chunk, rest) = self.0.split_first_chunk::<TID_GROUP_SIZE>()?;
        self.0 = rest;
        Some(f(chunk))
    }

    #[inline(always)]
    fn next_set(&mut self) -> PageSet {
        match self.0.split_first() {
            Some((s, rest)) => {
                self.0 = rest;
                *s
            }
            None => PageSet::FILLER,
        }
    }
}

/// The sets of any [`PageSetSource`], one by one (or eight at a time
/// where it offers [`PageSetSource::chunk8`]).
struct SourceCursor<'a, S: ?Sized> {
    sets: &'a S,
    at: usize,
}

impl<S: PageSetSource + ?Sized> SetCursor for SourceCursor<'_, S> {
    #[inline(always)]
    fn with_whole<R>(&mut self, f: impl FnOnce(&[PageSet; TID_GROUP_SIZE]) -> R) -> Option<R> {
        let chunk = self.sets.chunk8(self.at)?;
        self.at = self.at.wrapping_add(TID_GROUP_SIZE);
        Some(f(&chunk))
    }

    #[inline(always)]
    fn next_set(&mut self) -> PageSet {
        let s = self.sets.set(self.at).unwrap_or(PageSet::FILLER);
        self.at = self.at.wrapping_add(1);
        s
    }
}

/// Refuses page sets the RcvArray cannot map (a count that is not 0 or a
/// power of two up to 512) and path MTUs below a page, before anything is
/// written; returns the packet shape. Over a slice the sets are checked
/// together first (one OR per set), the failing index looked for only
/// when one is bad.
pub(super) fn check_sets<S: PageSetSource + ?Sized>(
    sets: &S,
    pmtu: u32,
) -> Result<PacketShape, AllocError> {
    // The OR of `unmappable(count)` over the sets, its two halves kept
    // apart so the size test is made once, on the OR of the counts (a
    // count from bit 10 up sets that bit in the OR).
    let all_good = sets.as_slice().is_some_and(|s| {
        let (not_pow2, any) = s.iter().fold((0u16, 0u16), |(p, a), set| {
            let c = set.count;
            (p | (c & c.wrapping_sub(1)), a | c)
        });
        not_pow2 | crate::pageset::oversized(any) == 0
    });
    if !all_good {
        for index in 0..sets.set_count() {
            if let Some(s) = sets.set(index) {
                if !s.is_programmable() {
                    return Err(AllocError::BadPageSet {
                        index,
                        count: s.count,
                    });
                }
            }
        }
    }
    PacketShape::new(pmtu)
}

/// Programs the entries `nodes` chose with `sets`, moves the groups
/// between lists and writes the TID entries to `out`. Kernel:
/// `kern_program_rcvarray()` / `kern_program_rcv_group()`.
///
/// For each node the group's eight entries are visited in order; an
/// entry taken in the snapshot, or beyond the node's count, gets a
/// write-combining fill; every other entry takes the next page set:
/// `put_tid` EXPECTED with the set's `dma` and order, or INVALID for a
/// filler. Two free entries at an even position form a pair (one TID
/// entry, CTRL 3, LEN = pages of both) when the node needs at least two
/// more; otherwise an entry yields CTRL 1 (even) or 2 (odd), and a filler
/// CTRL 1. Each TID entry adds `ceil(LEN / (pmtu / 4096))` packets. A
/// group moves free→used at its first entry and used→full at its eighth
/// (the driver moves it entry by entry, always to the tail; the net
/// effect on the lists is the one move made here). A pair of two fillers
/// gives a LEN 0 entry (quirk 5; `find_phys_blocks` never produces one).
///
/// # Locking
///
/// Under `exp_lock`, right after the [`alloc_tids`](super::alloc_tids) that chose `nodes`.
///
/// # Errors
///
/// Checked before anything is written, so nothing changes on error:
/// [`AllocError::BadPageSet`] for a count the RcvArray cannot map,
/// [`AllocError::BadPmtu`] for a path MTU below 4096.
pub fn program_rcvarray<G, N, S, O>(
    groups: &mut G,
    rcv: &mut impl RcvArray,
    nodes: &N,
    sets: &S,
    pmtu: u32,
    out: &mut O,
) -> Result<(), AllocError>
where
    G: GroupStore + ?Sized,
    N: NodeList + ?Sized,
    S: PageSetSource + ?Sized,
    O: ProgramSink + ?Sized,
{
    let shape = check_sets(sets, pmtu)?;
    out.reset();
    program_checked(groups, rcv, nodes, sets, shape, out);
    Ok(())
}

/// [`program_rcvarray`] after its checks.
#[inline]
pub(super) fn program_checked<G, N, S, O>(
    groups: &mut G,
    rcv: &mut impl RcvArray,
    nodes: &N,
    sets: &S,
    shape: PacketShape,
    out: &mut O,
) where
    G: GroupStore + ?Sized,
    N: NodeList + ?Sized,
    S: PageSetSource + ?Sized,
    O: ProgramSink + ?Sized,
{
    match sets.as_slice() {
        Some(slice) => program_nodes(groups, rcv, nodes, SliceCursor(slice), shape, out),
        None => program_nodes(groups, rcv, nodes, SourceCursor { sets, at: 0 }, shape, out),
    }
}

/// The node loop of [`program_checked`] over one kind of cursor.
#[inline(always)]
fn program_nodes<G, N, C, O>(
    groups: &mut G,
    rcv: &mut impl RcvArray,
    nodes: &N,
    mut sets: C,
    shape: PacketShape,
    out: &mut O,
) where
    G: GroupStore + ?Sized,
    N: NodeList + ?Sized,
    C: SetCursor,
    O: ProgramSink + ?Sized,
{
    let expected_base = groups.expected_base();
    // The entries first, then the counters and list moves: programming
    // reads neither (a node carries its map snapshot), and the entry loop
    // keeps its registers for the sets.
    for i in 0..nodes.len() {
        let Some(node) = nodes.node(i) else { break };
        let group = GroupPairs::new(groups.base(node.group), expected_base);
        program_node(rcv, &node, group, &mut sets, shape, out);
    }
    for i in 0..nodes.len() {
        let Some(node) = nodes.node(i) else { break };
        take_entries(groups, &node);
    }
}

/// Programs the eight entries of `node`'s group: fills for entries the
/// node does not take, the next sets for the others, one TID entry per
/// RcvArray pair it touches (see [`program_rcvarray`]).
/// Kernel: the entry loop of `kern_program_rcv_group()`.
#[inline(always)]
fn program_node<C, O>(
    rcv: &mut impl RcvArray,
    node: &TidNode,
    group: GroupPairs,
    sets: &mut C,
    shape: PacketShape,
    out: &mut O,
) where
    C: SetCursor,
    O: ProgramSink + ?Sized,
{
    let taken = node.taken();
    // Fast path, the common case: a whole free group takes eight sets as
    // four pairs.
    if taken == TID_GROUP_FULL_MAP {
        let whole = sets.with_whole(|chunk| group.put_whole(rcv, chunk, shape, out));
        if let Some(npkts) = whole {
            out.add_packets(npkts);
            return;
        }
    }
    let mut next = || sets.next_set();
    let mut npkts = 0u32;
    for p in 0..(GROUP_SIZE / 2) {
        let n = group.put_pair(rcv, p, (taken >> (2 * p)) & 3, &mut next, shape, out);
        npkts = npkts.wrapping_add(n);
    }
    out.add_packets(npkts);
}

/// Records that `node`'s entries are taken (see
/// [`GroupStore::take_entries`]).
#[inline(always)]
fn take_entries<G: GroupStore + ?Sized>(groups: &mut G, node: &TidNode) {
    if node.cnt != 0 {
        groups.take_entries(node.group, node.cnt, node.taken());
    }
}

/// Releases the entries `nodes` hold: each is written INVALID, the group's
/// `used` and `map` fall, and the group moves full→used and used→free as
/// it empties (to the tail, quirk 4). Entries of a touched group that the
/// node does not hold get a write-combining fill. Kernel:
/// `kern_unprogram_rcv_group()` for every node, as
/// `hfi1_kern_exp_rcv_clear()` calls it.
///
/// # Locking
///
/// Under `exp_lock`.
#[inline]
pub fn unprogram_rcvarray<G, N>(groups: &mut G, rcv: &mut impl RcvArray, nodes: &N)
where
    G: GroupStore + ?Sized,
    N: NodeList + ?Sized,
{
    for i in 0..nodes.len() {
        let Some(node) = nodes.node(i) else { break };
        let g = node.group;
        let taken = node.taken();
        let abs_base = groups.base(g);
        if node.cnt == 0 {
            for e in 0..TID_GROUP_SIZE as u32 {
                rcv.wc_fill(abs_base.wrapping_add(e));
            }
            continue;
        }
        if taken == TID_GROUP_FULL_MAP {
            for e in 0..TID_GROUP_SIZE as u32 {
                rcv.put_tid(abs_base.wrapping_add(e), RcvType::Invalid, 0, 0);
            }
        } else {
            for e in 0..GROUP_SIZE {
                let rcventry = abs_base.wrapping_add(u32::from(e));
                if taken & (1 << e) == 0 {
                    rcv.wc_fill(rcventry);
                } else {
                    rcv.put_tid(rcventry, RcvType::Invalid, 0, 0);
                }
            }
        }
        groups.release_entries(g, node.cnt, taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that keeps only the entries.
    #[derive(Default)]
    struct Entries(Vec<TidEntry>);

    impl ProgramSink for Entries {
        fn reset(&mut self) {
            self.0.clear();
        }

        fn push_entry(&mut self, entry: TidEntry) {
            self.0.push(entry);
        }

        fn add_packets(&mut self, _n: u32) {}
    }

    /// The packed word is the checked constructor's, for every pair of
    /// every group the IDX field can name and every LEN two sets give.
    #[test]
    fn packed_entries_are_the_checked_constructors() {
        let shape = PacketShape::new(4096).unwrap();
        let mut out = Entries::default();
        for expected_base in [0u32, 8, 4096] {
            for pair_base in (0..=LAST_GROUP_PAIR).step_by(4) {
                let g = GroupPairs::new(expected_base + 2 * pair_base, expected_base);
                for p in 0..4u8 {
                    for ctrl in [TidCtrl::Even, TidCtrl::Odd, TidCtrl::Pair] {
                        for pages in [0u32, 1, 2, 3, 512, 513, 1024] {
                            out.reset();
                            g.push_entry(p, ctrl, pages, shape, &mut out);
                            let want = TidEntry::new(pair_base + u32::from(p), ctrl, pages);
                            assert_eq!(Ok(out.0[0]), want, "pair {pair_base}+{p} len {pages}");
                        }
                    }
                }
            }
        }
    }

    /// A group whose pairs the 10-bit IDX field cannot name (a store
    /// handing out a base past the 256th group) gets LEN 0 entries, which
    /// the peer rejects, never entries naming other pairs.
    #[test]
    fn a_group_past_the_idx_field_gets_len_0_entries() {
        let shape = PacketShape::new(4096).unwrap();
        let mut out = Entries::default();
        for pair_base in [LAST_GROUP_PAIR + 1, LAST_GROUP_PAIR + 4, 1024, 4096] {
            let g = GroupPairs::new(2 * pair_base, 0);
            for p in 0..4u8 {
                g.push_entry(p, TidCtrl::Pair, 2, shape, &mut out);
            }
        }
        assert_eq!(out.0.len(), 16);
        assert!(out.0.iter().all(|e| e.is_empty()), "{:?}", out.0);
    }
}
