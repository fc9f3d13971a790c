// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID groups as a HAL trait, and the driver's allocation written
//! once over it (programming and unprogramming: [`super::program`]).
//!
//! [`GroupStore`] is where a context's groups and their three lists live:
//! [`TidGroups`](super::TidGroups) keeps them in two Rust tables (the
//! software platform), the kernel platform in the driver's `rcd->groups`
//! and `rcd->tid_{group,used,full}_list`. [`NodeList`] is where one
//! segment's chosen groups go (`flow->tnode[]`), [`PageSetSource`] what
//! its page sets are (`flow->pagesets[]`), [`ProgramSink`] where its TID
//! entries go (`flow->tid_entry[]`, `flow->npkts`). [`alloc_tids`] is the
//! driver's `kern_alloc_tids()` on top of any of them.
//!
//! # Locking
//!
//! A store is the context's `exp_lock`-guarded state: every function here
//! runs under that lock, [`alloc_tids`] in the same critical section as
//! the [`program_rcvarray`](super::program_rcvarray) that uses its nodes.

use arrayvec::ArrayVec;
use hfi1_hal::TidEntry;
use hfi1_hal::consts::{MAX_PAGESETS, TID_GROUP_SIZE};

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

    /// Records that `cnt` (> 0) more entries of group `g`, those in
    /// `taken`, are in use, and moves the group as the driver does (the
    /// net effect of its entry-by-entry moves: free→used at the first
    /// entry, to full at the eighth).
    /// Kernel: the `used`/`map` updates and `tid_group_move()`s of
    /// `kern_program_rcv_group()`. A store may do this in one step.
    #[inline]
    fn take_entries(&mut self, g: u16, cnt: u8, taken: u8) {
        let (used, map) = self.counters(g);
        let new_used = used.wrapping_add(cnt);
        self.set_counters(g, new_used, map | taken);
        if let Some((from, to)) = move_on_take(used, new_used) {
            self.move_to(g, from, to);
        }
    }

    /// Records that `cnt` (> 0) entries of group `g`, those in `taken`,
    /// are free again, and moves the group as the driver does (full→used
    /// as the first goes, to free as the last goes). Kernel: the `used`/`map` updates and
    /// `tid_group_move()`s of `kern_unprogram_rcv_group()`. A store may
    /// do this in one step.
    #[inline]
    fn release_entries(&mut self, g: u16, cnt: u8, taken: u8) {
        let (used, map) = self.counters(g);
        let new_used = used.wrapping_sub(cnt);
        self.set_counters(g, new_used, map & !taken);
        if let Some((from, to)) = move_on_release(used, new_used) {
            self.move_to(g, from, to);
        }
    }
}

/// The one list move of a group whose `used` goes from `used` to
/// `new_used` (> `used`) as entries are taken: free→used at its first
/// entry, to full at its eighth (the net effect of the driver's
/// entry-by-entry moves, each to the tail).
#[inline(always)]
const fn move_on_take(used: u8, new_used: u8) -> Option<(GroupList, GroupList)> {
    if new_used == GROUP_SIZE {
        if used == 0 {
            Some((GroupList::Free, GroupList::Full))
        } else {
            Some((GroupList::Used, GroupList::Full))
        }
    } else if used == 0 {
        Some((GroupList::Free, GroupList::Used))
    } else {
        None
    }
}

/// The one list move of a group whose `used` goes from `used` to
/// `new_used` (< `used`) as entries are released: full→used as the first
/// goes, to free as the last goes.
#[inline(always)]
pub(super) const fn move_on_release(used: u8, new_used: u8) -> Option<(GroupList, GroupList)> {
    if new_used == 0 {
        if used == GROUP_SIZE {
            Some((GroupList::Full, GroupList::Free))
        } else {
            Some((GroupList::Used, GroupList::Free))
        }
    } else if used == GROUP_SIZE {
        Some((GroupList::Full, GroupList::Used))
    } else {
        None
    }
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

    /// All the sets as one slice, when they are kept as [`PageSet`]s (the
    /// software platform): programming then borrows them in place.
    fn as_slice(&self) -> Option<&[PageSet]> {
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

    /// Appends the four TID entries of a whole group, in order (the same
    /// as four [`Self::push_entry`]s; a sink may take them in one step).
    #[inline]
    fn push_group(&mut self, entries: [TidEntry; 4]) {
        for e in entries {
            self.push_entry(e);
        }
    }

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

    fn as_slice(&self) -> Option<&[PageSet]> {
        (**self).as_slice()
    }
}

impl<T: ProgramSink + ?Sized> ProgramSink for &mut T {
    fn reset(&mut self) {
        (**self).reset();
    }

    fn push_entry(&mut self, entry: TidEntry) {
        (**self).push_entry(entry);
    }

    fn push_group(&mut self, entries: [TidEntry; 4]) {
        (**self).push_group(entries);
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

    #[inline]
    fn as_slice(&self) -> Option<&[PageSet]> {
        Some(self)
    }
}

impl ProgramSink for Programmed {
    #[inline]
    fn reset(&mut self) {
        self.tid_entries.clear();
        self.npkts = 0;
    }

    #[inline]
    fn push_entry(&mut self, entry: TidEntry) {
        // Cannot fail: at most one TID entry per page set.
        let _ = self.tid_entries.try_push(entry);
    }

    /// One capacity check for the four, written as a bound on the length
    /// (the form the pushes test), so the pushes' own checks go and the
    /// length is written back once.
    #[inline]
    fn push_group(&mut self, entries: [TidEntry; 4]) {
        if self.tid_entries.len() > self.tid_entries.capacity().wrapping_sub(4) {
            // Cannot happen (at most one TID entry per page set); drop
            // them as `push_entry` would.
            return;
        }
        for e in entries {
            let _ = self.tid_entries.try_push(e);
        }
    }

    #[inline]
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
/// [`program_rcvarray`](super::program_rcvarray) that uses the nodes.
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
