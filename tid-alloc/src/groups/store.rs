// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID groups as a HAL trait, and the driver's allocate / program /
//! unprogram written once over it.
//!
//! [`GroupStore`] is where a context's groups and their three lists live:
//! [`TidGroups`](super::TidGroups) keeps them in two Rust tables (the
//! software platform), the kernel platform in the driver's `rcd->groups`
//! and `rcd->tid_{group,used,full}_list`. [`NodeList`] is where one
//! segment's chosen groups go (`flow->tnode[]`), [`PageSetSource`] what
//! its page sets are (`flow->pagesets[]`), [`ProgramSink`] where its TID
//! entries go (`flow->tid_entry[]`, `flow->npkts`). The functions here are
//! the driver's `kern_alloc_tids()` ([`alloc_tids`]),
//! `kern_program_rcvarray()` ([`program_rcvarray`]) and the
//! `kern_unprogram_rcv_group()` loop of `hfi1_kern_exp_rcv_clear()`
//! ([`unprogram_rcvarray`]) on top of any of them.
//!
//! # Locking
//!
//! A store is the context's `exp_lock`-guarded state: every function here
//! runs under that lock, [`alloc_tids`] in the same critical section as
//! the [`program_rcvarray`] that uses its nodes.

use arrayvec::ArrayVec;
use hfi1_hal::consts::{MAX_PAGESETS, PAGE_SHIFT, TID_GROUP_FULL_MAP, TID_GROUP_SIZE};
use hfi1_hal::{RcvArray, RcvType, TidCtrl, TidEntry};

use super::{GroupList, Programmed, TidNode};
use crate::AllocError;
use crate::pageset::PageSet;

use super::GROUP_SIZE;

/// A context's TID groups and their three lists, wherever they live.
/// Kernel: `rcd->groups[]` (`struct tid_group`) and
/// `rcd->tid_group_list` / `tid_used_list` / `tid_full_list`.
///
/// Groups are named by their index in the context (`0..ngroups`).
///
/// # Locking
///
/// The context's `exp_lock`.
pub trait GroupStore {
    /// Absolute RcvArray index of the context's first entry.
    /// Kernel: `rcd->expected_base`.
    fn expected_base(&self) -> u32;

    /// The first group of `list`, if any.
    fn first(&self, list: GroupList) -> Option<u16>;

    /// The group after `g` on the list that holds it, if any.
    fn next(&self, g: u16) -> Option<u16>;

    /// Absolute RcvArray index of group `g`'s first entry. Kernel:
    /// `grp->base`.
    fn base(&self, g: u16) -> u32;

    /// Group `g`'s entries in use and its map. Kernel: `grp->used`,
    /// `grp->map`.
    fn counters(&self, g: u16) -> (u8, u8);

    /// Sets group `g`'s entries in use and its map.
    fn set_counters(&mut self, g: u16, used: u8, map: u8);

    /// Moves group `g` from `from` to the tail of `to`. Kernel:
    /// `tid_group_move()` (`list_del_init`, `from->count--`,
    /// `list_add_tail`, `to->count++`).
    fn move_to(&mut self, g: u16, from: GroupList, to: GroupList);
}

/// Where a segment's chosen groups go. Kernel: `flow->tnode[]` and
/// `flow->tnode_cnt`.
pub trait NodeList {
    /// Forgets every node. Kernel: `flow->tnode_cnt = 0`.
    fn clear(&mut self);

    /// Appends a node.
    ///
    /// # Errors
    ///
    /// [`AllocError::NoSpace`] if the list is full (64 nodes: cannot
    /// happen, every node takes at least one of at most 64 entries).
    fn push(&mut self, node: TidNode) -> Result<(), AllocError>;

    /// Nodes in the list.
    fn len(&self) -> usize;

    /// True if the list has no node.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Node `i`.
    fn node(&self, i: usize) -> Option<TidNode>;
}

/// A segment's page sets, as programming reads them. Kernel:
/// `flow->pagesets[0..npagesets)`.
pub trait PageSetSource {
    /// Page sets.
    fn set_count(&self) -> usize;

    /// Set `i` (count and bus address are what programming uses).
    fn set(&self, i: usize) -> Option<PageSet>;

    /// Sets `at..at + 8`, when the source can hand them out at once (the
    /// fast path of a whole free group).
    fn chunk8(&self, at: usize) -> Option<[PageSet; 8]> {
        let _ = at;
        None
    }
}

/// Where a segment's TID entries and packet count go. Kernel:
/// `flow->tid_entry[]`, `flow->tidcnt`, `flow->npkts`.
pub trait ProgramSink {
    /// Starts over: no entry, no packet. Kernel: `flow->npkts = 0;
    /// flow->tidcnt = 0`.
    fn reset(&mut self);

    /// Appends one TID entry (at most one per page set, so at most 64).
    fn push_entry(&mut self, entry: TidEntry);

    /// Adds packets. Kernel: `flow->npkts += ..`.
    fn add_packets(&mut self, n: u32);
}

impl<T: NodeList + ?Sized> NodeList for &mut T {
    fn clear(&mut self) {
        (**self).clear();
    }

    fn push(&mut self, node: TidNode) -> Result<(), AllocError> {
        (**self).push(node)
    }

    fn len(&self) -> usize {
        (**self).len()
    }

    fn node(&self, i: usize) -> Option<TidNode> {
        (**self).node(i)
    }
}

impl<T: PageSetSource + ?Sized> PageSetSource for &T {
    fn set_count(&self) -> usize {
        (**self).set_count()
    }

    fn set(&self, i: usize) -> Option<PageSet> {
        (**self).set(i)
    }

    fn chunk8(&self, at: usize) -> Option<[PageSet; 8]> {
        (**self).chunk8(at)
    }
}

impl<T: ProgramSink + ?Sized> ProgramSink for &mut T {
    fn reset(&mut self) {
        (**self).reset();
    }

    fn push_entry(&mut self, entry: TidEntry) {
        (**self).push_entry(entry);
    }

    fn add_packets(&mut self, n: u32) {
        (**self).add_packets(n);
    }
}

impl NodeList for ArrayVec<TidNode, MAX_PAGESETS> {
    fn clear(&mut self) {
        ArrayVec::clear(self);
    }

    fn push(&mut self, node: TidNode) -> Result<(), AllocError> {
        self.try_push(node).map_err(|_| AllocError::NoSpace)
    }

    fn len(&self) -> usize {
        ArrayVec::len(self)
    }

    fn node(&self, i: usize) -> Option<TidNode> {
        self.get(i).copied()
    }
}

impl PageSetSource for [PageSet] {
    fn set_count(&self) -> usize {
        self.len()
    }

    fn set(&self, i: usize) -> Option<PageSet> {
        self.get(i).copied()
    }

    #[inline]
    fn chunk8(&self, at: usize) -> Option<[PageSet; 8]> {
        self.get(at..)?
            .split_first_chunk::<TID_GROUP_SIZE>()
            .map(|(c, _)| *c)
    }
}

impl ProgramSink for Programmed {
    fn reset(&mut self) {
        self.tid_entries.clear();
        self.npkts = 0;
    }

    fn push_entry(&mut self, entry: TidEntry) {
        // Cannot fail: at most one TID entry per page set.
        let _ = self.tid_entries.try_push(entry);
    }

    fn add_packets(&mut self, n: u32) {
        self.npkts = self.npkts.wrapping_add(n);
    }
}

/// The nodes [`alloc_tids`]' passes have chosen so far.
struct Picker<'a, N: ?Sized> {
    nodes: &'a mut N,
    /// Entries found so far.
    taken: usize,
    /// Entries wanted (one per page set).
    n: usize,
}

impl<N: NodeList + ?Sized> Picker<'_, N> {
    /// Takes `cnt` entries of group `group`, whose map is `map` now.
    /// Kernel: `kern_add_tid_node()`.
    fn add(&mut self, group: u16, map: u8, cnt: u8) -> Result<(), AllocError> {
        self.nodes.push(TidNode::new(group, map, cnt))?;
        self.taken += usize::from(cnt);
        Ok(())
    }

    /// True once enough entries are found.
    fn done(&self) -> bool {
        self.taken >= self.n
    }
}

/// Where pass 1 stopped: the last group it took, and whether it ran off
/// the end of the free list.
#[derive(Debug, Clone, Copy)]
struct WholePass {
    last: Option<u16>,
    ran_off: bool,
}

/// Chooses RcvArray entries for `nsets` page sets, writing the chosen
/// groups to `nodes`, without changing the groups. Kernel:
/// `kern_alloc_tids()`.
///
/// Three passes, each recording `(group, map snapshot, count)` nodes:
/// 1. whole free groups, head first, `n / 8` of them;
/// 2. partly used groups, head first, each giving
///    `min(remaining, 8 - used)`;
/// 3. the one free group after the last one pass 1 took (the head of the
///    free list if pass 1 took none), giving `min(remaining, 8)`; not at
///    all if pass 1 ran off the end of the free list (quirk 2).
///
/// On [`AllocError::NoSpace`] the nodes found so far stay in `nodes`, as
/// the driver leaves `flow->tnode_cnt`.
///
/// # Locking
///
/// Under `exp_lock`, in the same critical section as the
/// [`program_rcvarray`] that uses the nodes.
///
/// # Errors
///
/// [`AllocError::NoSpace`] (the driver's `-EAGAIN`) when the passes do not
/// find enough entries; [`AllocError::NoPageSets`],
/// [`AllocError::OddPageSets`] or [`AllocError::TooManyPageSets`] for 0,
/// an odd number or more than 64 sets, with `nodes` empty. The driver only
/// warns about an odd count (quirk 3); refusing it changes nothing it
/// does, since `find_phys_blocks` always returns an even number of sets,
/// and keeps an odd count from ever breaking the pair alignment of the
/// group maps (two flows sharing one RcvArray pair).
pub fn alloc_tids<G, N>(groups: &G, nsets: usize, nodes: &mut N) -> Result<(), AllocError>
where
    G: GroupStore + ?Sized,
    N: NodeList + ?Sized,
{
    nodes.clear();
    if nsets == 0 {
        return Err(AllocError::NoPageSets);
    }
    if nsets > MAX_PAGESETS {
        return Err(AllocError::TooManyPageSets);
    }
    if nsets % 2 == 1 {
        return Err(AllocError::OddPageSets(nsets));
    }
    let mut pick = Picker {
        nodes,
        taken: 0,
        n: nsets,
    };
    let whole = pick_whole_groups(groups, &mut pick)?;
    if pick.done() {
        return Ok(());
    }
    pick_used_groups(groups, &mut pick)?;
    if pick.done() {
        return Ok(());
    }
    pick_one_more_free(groups, &mut pick, whole)
}

/// Pass 1 of [`alloc_tids`]: whole free groups, head first, `n / 8` of
/// them. Kernel: the "complete groups" loop of `kern_alloc_tids()`.
fn pick_whole_groups<G: GroupStore + ?Sized, N: NodeList + ?Sized>(
    groups: &G,
    pick: &mut Picker<'_, N>,
) -> Result<WholePass, AllocError> {
    let mut pass = WholePass {
        last: None,
        ran_off: false,
    };
    let mut whole = pick.n / TID_GROUP_SIZE;
    if whole == 0 {
        return Ok(pass);
    }
    let mut at = groups.first(GroupList::Free);
    loop {
        let Some(g) = at else {
            pass.ran_off = true;
            return Ok(pass);
        };
        pick.add(g, groups.counters(g).1, GROUP_SIZE)?;
        pass.last = Some(g);
        whole -= 1;
        if whole == 0 {
            return Ok(pass);
        }
        at = groups.next(g);
    }
}

/// Pass 2: partly used groups, head first, each giving
/// `min(remaining, 8 - used)`, until enough are found. Kernel: the "used
/// groups" loop of `kern_alloc_tids()`.
fn pick_used_groups<G: GroupStore + ?Sized, N: NodeList + ?Sized>(
    groups: &G,
    pick: &mut Picker<'_, N>,
) -> Result<(), AllocError> {
    let mut at = groups.first(GroupList::Used);
    while let Some(g) = at {
        let (used, map) = groups.counters(g);
        let room = GROUP_SIZE.saturating_sub(used) as usize;
        let take = room.min(pick.n - pick.taken);
        pick.add(g, map, take as u8)?;
        if pick.done() {
            return Ok(());
        }
        at = groups.next(g);
    }
    Ok(())
}

/// Pass 3: the one free group after the last one pass 1 took (the head of
/// the free list if pass 1 took none), giving `min(remaining, 8)`; not at
/// all if pass 1 ran off the end of the free list (quirk 2). Kernel: the
/// "complete continue" step of `kern_alloc_tids()`.
fn pick_one_more_free<G: GroupStore + ?Sized, N: NodeList + ?Sized>(
    groups: &G,
    pick: &mut Picker<'_, N>,
    whole: WholePass,
) -> Result<(), AllocError> {
    if whole.ran_off {
        return Err(AllocError::NoSpace);
    }
    let next = match whole.last {
        None => groups.first(GroupList::Free),
        Some(last) => groups.next(last),
    };
    let Some(g) = next else {
        return Err(AllocError::NoSpace);
    };
    let take = TID_GROUP_SIZE.min(pick.n - pick.taken);
    pick.add(g, groups.counters(g).1, take as u8)?;
    if pick.done() {
        Ok(())
    } else {
        Err(AllocError::NoSpace)
    }
}

/// Programs one entry with a set: EXPECTED with its DMA address and order,
/// or INVALID for a filler. Kernel: the `hfi1_put_tid()` calls of
/// `kern_program_rcv_group()`.
#[inline(always)]
fn put_set(rcv: &mut impl RcvArray, rcventry: u32, set: &PageSet) {
    if set.is_filler() {
        rcv.put_tid(rcventry, RcvType::Invalid, 0, 0);
    } else {
        rcv.put_tid(rcventry, RcvType::Expected, set.dma, set.order());
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
/// entry and the pair index (relative to the expected base) of its first
/// pair.
#[derive(Debug, Clone, Copy)]
struct GroupPairs {
    abs_base: u32,
    pair_base: u32,
}

impl GroupPairs {
    /// Appends the TID entry of pair `p` (CTRL, pages) and its packets.
    /// Kernel: the `EXP_TID_SET(IDX | CTRL | LEN)` of
    /// `kern_program_rcv_group()`.
    #[inline(always)]
    fn push_entry(
        self,
        p: u8,
        ctrl: TidCtrl,
        pages: u32,
        shape: PacketShape,
        out: &mut (impl ProgramSink + ?Sized),
    ) {
        let idx = self.pair_base.wrapping_add(u32::from(p));
        // Cannot fail: idx < 1024 (at most 256 groups) and pages <= 1024
        // (two sets of at most 512, checked by `check_sets`). Should it,
        // the entry would read LEN 0, which the peer rejects, rather than
        // name other entries.
        let entry = TidEntry::new(idx, ctrl, pages).unwrap_or(TidEntry::from_raw(0));
        out.push_entry(entry);
        out.add_packets(shape.packets(pages));
    }

    /// Programs both entries of pair `p` with `a` and `b` (a filler in the
    /// odd slot makes CTRL 1: the driver looks at the set it just
    /// programmed).
    #[inline(always)]
    fn put_both(
        self,
        rcv: &mut impl RcvArray,
        p: u8,
        a: &PageSet,
        b: &PageSet,
        shape: PacketShape,
        out: &mut (impl ProgramSink + ?Sized),
    ) {
        let even = self.abs_base.wrapping_add(2 * u32::from(p));
        put_set(rcv, even, a);
        put_set(rcv, even.wrapping_add(1), b);
        let ctrl = if b.is_filler() {
            TidCtrl::Even
        } else {
            TidCtrl::Pair
        };
        let pages = u32::from(a.count).wrapping_add(u32::from(b.count));
        self.push_entry(p, ctrl, pages, shape, out);
    }

    /// Pair `p` as the two bits of the node's `taken` map say:
    /// - neither taken: two write-combining fills;
    /// - only the even one: one TID entry, CTRL 1;
    /// - only the odd one: one TID entry, CTRL 2 (1 for a filler);
    /// - both: one TID entry for the pair, CTRL 3, LEN = both sets.
    ///
    /// This is the driver's entry-by-entry `pair` logic: an even entry
    /// starts a pair exactly when it and the next one are both taken by
    /// this node.
    #[inline(always)]
    fn put_pair(
        self,
        rcv: &mut impl RcvArray,
        p: u8,
        bits: u8,
        next: &mut impl FnMut() -> PageSet,
        shape: PacketShape,
        out: &mut (impl ProgramSink + ?Sized),
    ) {
        let even = self.abs_base.wrapping_add(2 * u32::from(p));
        let odd = even.wrapping_add(1);
        match bits {
            0 => {
                rcv.wc_fill(even);
                rcv.wc_fill(odd);
            }
            1 => {
                let a = next();
                put_set(rcv, even, &a);
                rcv.wc_fill(odd);
                self.push_entry(p, TidCtrl::Even, u32::from(a.count), shape, out);
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
                self.push_entry(p, ctrl, u32::from(b.count), shape, out);
            }
            _ => {
                let (a, b) = (next(), next());
                self.put_both(rcv, p, &a, &b, shape, out);
            }
        }
    }
}

/// Refuses page sets the RcvArray cannot map (a count that is not 0 or a
/// power of two up to 512) and path MTUs below a page, before anything is
/// written; returns the packet shape.
pub(super) fn check_sets<S: PageSetSource + ?Sized>(
    sets: &S,
    pmtu: u32,
) -> Result<PacketShape, AllocError> {
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
/// Under `exp_lock`, right after the [`alloc_tids`] that chose `nodes`.
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
    let mut next_set = 0usize;
    for i in 0..nodes.len() {
        let Some(node) = nodes.node(i) else { break };
        program_node(groups, rcv, &node, sets, &mut next_set, shape, out);
        take_entries(groups, &node);
    }
}

/// Programs the eight entries of `node`'s group: fills for entries the
/// node does not take, the next sets of `sets` for the others, one TID
/// entry per RcvArray pair it touches (see [`program_rcvarray`]).
/// Kernel: the entry loop of `kern_program_rcv_group()`.
#[inline]
fn program_node<G, S, O>(
    groups: &G,
    rcv: &mut impl RcvArray,
    node: &TidNode,
    sets: &S,
    at: &mut usize,
    shape: PacketShape,
    out: &mut O,
) where
    G: GroupStore + ?Sized,
    S: PageSetSource + ?Sized,
    O: ProgramSink + ?Sized,
{
    let abs_base = groups.base(node.group);
    let rel_base = abs_base.wrapping_sub(groups.expected_base());
    let group = GroupPairs {
        abs_base,
        // Groups start at a multiple of 8 from the expected base, so the
        // pair index of pair `p` is `rel_base / 2 + p`.
        pair_base: rel_base >> 1,
    };
    let taken = node.taken();
    // Fast path, the common case: a whole free group takes eight sets as
    // four pairs.
    if taken == TID_GROUP_FULL_MAP {
        if let Some(chunk) = sets.chunk8(*at) {
            for (p, pair) in (0u8..).zip(chunk.chunks_exact(2)) {
                if let &[a, b] = pair {
                    group.put_both(rcv, p, &a, &b, shape, out);
                }
            }
            *at = at.wrapping_add(TID_GROUP_SIZE);
            return;
        }
    }
    let mut next = || {
        let s = sets.set(*at).unwrap_or(PageSet::FILLER);
        *at = at.wrapping_add(1);
        s
    };
    for p in 0..(GROUP_SIZE / 2) {
        group.put_pair(rcv, p, (taken >> (2 * p)) & 3, &mut next, shape, out);
    }
}

/// Records that `node`'s entries are taken: the group's `used` and `map`,
/// and its move between lists. Kernel: the `used`/`map` updates and
/// `tid_group_move()`s of `kern_program_rcv_group()`.
#[inline]
fn take_entries<G: GroupStore + ?Sized>(groups: &mut G, node: &TidNode) {
    if node.cnt == 0 {
        return;
    }
    let g = node.group;
    let (used, map) = groups.counters(g);
    let new_used = used.wrapping_add(node.cnt);
    groups.set_counters(g, new_used, map | node.taken());
    if new_used == GROUP_SIZE {
        let from = if used == 0 {
            GroupList::Free
        } else {
            GroupList::Used
        };
        groups.move_to(g, from, GroupList::Full);
    } else if used == 0 {
        groups.move_to(g, GroupList::Free, GroupList::Used);
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
pub fn unprogram_rcvarray<G, N>(groups: &mut G, rcv: &mut impl RcvArray, nodes: &N)
where
    G: GroupStore + ?Sized,
    N: NodeList + ?Sized,
{
    for i in 0..nodes.len() {
        let Some(node) = nodes.node(i) else { break };
        let g = node.group;
        let (used, map) = groups.counters(g);
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
        // Net effect of the driver's entry-by-entry moves (full->used as
        // the first entry goes, used->free as the last one goes).
        let new_used = used.wrapping_sub(node.cnt);
        groups.set_counters(g, new_used, map & !taken);
        if new_used == 0 {
            let from = if used == GROUP_SIZE {
                GroupList::Full
            } else {
                GroupList::Used
            };
            groups.move_to(g, from, GroupList::Free);
        } else if used == GROUP_SIZE {
            groups.move_to(g, GroupList::Full, GroupList::Used);
        }
    }
}
