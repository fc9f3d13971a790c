// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID groups: one receive context's RcvArray share, eight entries at a
//! time, and the allocate / program / unprogram cycle of a segment.
//!
//! Kernel: `struct tid_group` and the list helpers of `exp_rcv.h`;
//! `kern_alloc_tids()`, `kern_program_rcvarray()`,
//! `kern_program_rcv_group()`, `kern_unprogram_rcv_group()` in
//! `tid_rdma.c`.
//!
//! Every group sits on exactly one of three lists: *free* (no entry used;
//! the kernel's `tid_group_list`), *used* (1..=7) and *full* (8). A group
//! that moves is always appended at the tail of its new list (quirk 4 of
//! the vectors' README): freed groups go to the back of the free list, so
//! the allocation order rotates over time, exactly as in the driver.
//!
//! The algorithms are written once, in [`store`], over the
//! [`GroupStore`] trait: [`TidGroups`] is the software platform's store
//! (two Rust tables, lists doubly linked through group indices, so a move
//! is O(1) and nothing is scanned or allocated); the kernel platform's
//! store is the driver's own `rcd->groups` and list heads. [`TidGroups`]
//! also offers a checked interface ([`TidGroups::allocate`],
//! [`TidGroups::program`], [`TidGroups::unprogram`]) whose allocations
//! carry a ticket, so a stale, foreign or twice-released allocation is
//! refused.

extern crate alloc;

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};

use alloc::vec::Vec;
use hfi1_hal::consts::{MAX_PAGESETS, MAX_TID_GROUPS, TID_GROUP_SIZE};
use hfi1_hal::services::try_fill_vec;

use crate::AllocError;

mod checked;
pub mod node;
pub mod program;
pub mod store;
mod table;

pub use node::{Programmed, TidAlloc, TidNode, TidNodeInfo};

pub use program::{program_rcvarray, unprogram_rcvarray};
pub use store::{GroupStore, NodeList, PageSetSource, ProgramSink, alloc_tids};

/// Entries per group, as the `u8` the counters use.
const GROUP_SIZE: u8 = TID_GROUP_SIZE as u8;

const _: () = assert!(
    MAX_TID_GROUPS * TID_GROUP_SIZE / 2 <= 1 << 10,
    "every pair index fits the 10-bit IDX field of a TID entry"
);
const _: () = assert!(MAX_PAGESETS <= u8::MAX as usize);

/// Source of instance ids, so an allocation can name the `TidGroups` it
/// came from. 0 is never handed out (it marks the empty default
/// allocation).
static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(1);

/// One of the three lists a group lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupList {
    /// No entry in use. Kernel: `rcd->tid_group_list`.
    Free = 0,
    /// Some but not all entries in use. Kernel: `rcd->tid_used_list`.
    Used = 1,
    /// All eight entries in use. Kernel: `rcd->tid_full_list`.
    Full = 2,
}

impl GroupList {
    #[inline]
    const fn index(self) -> usize {
        self as usize
    }
}

/// A read-only view of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupView {
    /// Absolute RcvArray index of the group's first entry.
    pub base: u32,
    /// Entries in use (0..=8).
    pub used: u8,
    /// Bit i set = entry `base + i` in use.
    pub map: u8,
}

/// Absolute index of group `g`'s first entry.
#[inline]
const fn group_base(expected_base: u32, g: u16) -> u32 {
    expected_base.wrapping_add((g as u32).wrapping_mul(TID_GROUP_SIZE as u32))
}

/// The TID groups of one receive context.
///
/// The per-group state lives in two tables allocated fallibly once, at
/// construction (the kernel `kcalloc`s `rcd->groups` the same way): the
/// counters and list links (a fixed 512 rows of 6 bytes: every group a
/// context can have, then the list heads) and the entry owners (`ngroups`
/// rows). So the value itself is small (under 100 bytes) and a context
/// holding it can be built on a kernel stack. Nothing else allocates;
/// [`TidGroups::reset`] re-initialises one in place and only allocates to
/// grow the owner table.
///
/// # Locking
///
/// The type does no locking of its own. It is context state the driver
/// guards with `exp_lock`: hold that lock (in this workspace, the guard
/// of `tid-flow`'s context) for every call, including [`Self::allocate`]
/// followed by [`Self::program`], which must see the same state. The type
/// is `Send` but not `Sync`: `allocate` takes `&self` yet advances an
/// internal ticket counter, so shared references must not cross threads.
pub struct TidGroups {
    instance: u32,
    expected_base: u32,
    ngroups: u16,
    /// Bumped by every program and unprogram: an allocation is only good
    /// for the state it was computed from.
    version: u64,
    /// Ticket for the next allocation (never 0).
    next_ticket: Cell<u32>,
    /// Groups on each list.
    lens: [u16; table::HEADS],
    /// The groups (kernel: `rcd->groups`), then the heads of the free,
    /// used and full lists (`table::ROWS` rows).
    slots: Vec<table::Slot>,
    /// Ticket of the allocation that holds each entry; 0 = free
    /// (`ngroups` rows).
    owner: Vec<[u32; TID_GROUP_SIZE]>,
}

impl core::fmt::Debug for TidGroups {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TidGroups")
            .field("expected_base", &self.expected_base)
            .field("ngroups", &self.ngroups)
            .field("free", &self.list_len(GroupList::Free))
            .field("used", &self.list_len(GroupList::Used))
            .field("full", &self.list_len(GroupList::Full))
            .field("entries_in_use", &self.entries_in_use())
            .finish_non_exhaustive()
    }
}

impl TidGroups {
    /// `ngroups` groups of eight entries starting at absolute RcvArray
    /// index `expected_base`, all on the free list in index order (group
    /// `i` covers `expected_base + 8 i ..= expected_base + 8 i + 7`).
    ///
    /// Kernel: `hfi1_alloc_ctxt_rcv_groups()`.
    ///
    /// # Errors
    ///
    /// [`AllocError::BadGroupCount`] unless `1 <= ngroups <= 256`;
    /// [`AllocError::BadBase`] if `expected_base` is not a multiple of 8 or
    /// the groups would pass the end of the `u32` index space;
    /// [`AllocError::NoMemory`] if the tables cannot be allocated.
    pub fn new(expected_base: u32, ngroups: usize) -> Result<Self, AllocError> {
        let mut g = Self {
            instance: 0,
            expected_base: 0,
            ngroups: 0,
            version: 0,
            next_ticket: Cell::new(1),
            lens: [0; table::HEADS],
            slots: Vec::new(),
            owner: Vec::new(),
        };
        g.reset(expected_base, ngroups)?;
        Ok(g)
    }

    /// Re-initialises in place, as [`Self::new`] builds it; every earlier
    /// allocation becomes foreign. On error nothing changes. Allocates only
    /// if `ngroups` is more than the tables have held before.
    ///
    /// # Errors
    ///
    /// As [`Self::new`].
    pub fn reset(&mut self, expected_base: u32, ngroups: usize) -> Result<(), AllocError> {
        if ngroups == 0 || ngroups > MAX_TID_GROUPS {
            return Err(AllocError::BadGroupCount(ngroups));
        }
        let span = (ngroups as u32).wrapping_mul(TID_GROUP_SIZE as u32);
        if expected_base % TID_GROUP_SIZE as u32 != 0 || expected_base.checked_add(span).is_none() {
            return Err(AllocError::BadBase(expected_base));
        }
        // Room for both tables first, so that failing changes nothing and
        // the fills below cannot fail.
        self.slots
            .try_reserve_exact(table::ROWS.saturating_sub(self.slots.len()))
            .map_err(|_| AllocError::NoMemory)?;
        self.owner
            .try_reserve_exact(ngroups.saturating_sub(self.owner.len()))
            .map_err(|_| AllocError::NoMemory)?;
        try_fill_vec(&mut self.slots, table::ROWS, table::Slot::EMPTY)
            .map_err(|_| AllocError::NoMemory)?;
        try_fill_vec(&mut self.owner, ngroups, [0; TID_GROUP_SIZE])
            .map_err(|_| AllocError::NoMemory)?;
        let mut instance = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        if instance == 0 {
            instance = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        }
        self.instance = instance;
        self.expected_base = expected_base;
        self.ngroups = ngroups as u16;
        self.version = 0;
        self.next_ticket.set(1);
        self.init_rows();
        for i in 0..self.ngroups {
            self.append(i, GroupList::Free);
        }
        Ok(())
    }

    /// Absolute index of the context's first RcvArray entry.
    pub const fn expected_base(&self) -> u32 {
        self.expected_base
    }

    /// Number of groups.
    pub const fn group_count(&self) -> usize {
        self.ngroups as usize
    }

    /// Groups on `which` list.
    pub fn list_len(&self, which: GroupList) -> usize {
        self.lens.get(which.index()).map_or(0, |&n| usize::from(n))
    }

    /// Groups with no entry in use.
    pub fn free_groups(&self) -> usize {
        self.list_len(GroupList::Free)
    }

    /// RcvArray entries in use over all groups: the sum of the groups'
    /// counters, added up when asked (a statistic; the hot paths do not
    /// keep a running total).
    pub fn entries_in_use(&self) -> u32 {
        self.slots
            .iter()
            .take(usize::from(self.ngroups))
            .map(|s| u32::from(s.used))
            .sum()
    }

    /// Group `index` (0-based), or `None` past the last group.
    pub fn group(&self, index: usize) -> Option<GroupView> {
        let g = self.slot(u16::try_from(index).ok()?)?;
        Some(GroupView {
            base: group_base(self.expected_base, index as u16),
            used: g.used,
            map: g.map,
        })
    }

    /// The groups of one list, head to tail.
    pub fn list(&self, which: GroupList) -> ListIter<'_> {
        ListIter {
            groups: self,
            cur: self.next_row(Self::head_row(which)),
            left: self.ngroups,
        }
    }
}

/// The software platform's store: the tables of [`TidGroups`]. Every
/// counter change bumps the version (so a checked allocation made before
/// it is stale).
impl GroupStore for TidGroups {
    #[inline]
    fn expected_base(&self) -> u32 {
        self.expected_base
    }

    #[inline]
    fn first(&self, list: GroupList) -> Option<u16> {
        let g = self.next_row(Self::head_row(list));
        (g < self.ngroups).then_some(g)
    }

    #[inline]
    fn next(&self, g: u16) -> Option<u16> {
        let n = self.slot(g)?.next;
        (n < self.ngroups).then_some(n)
    }

    #[inline]
    fn base(&self, g: u16) -> u32 {
        group_base(self.expected_base, g)
    }

    #[inline]
    fn counters(&self, g: u16) -> (u8, u8) {
        self.counters_of(g)
    }

    #[inline]
    fn set_counters(&mut self, g: u16, used: u8, map: u8) {
        if self.put_counters(g, used, map) {
            self.version = self.version.wrapping_add(1);
        }
    }

    #[inline]
    fn move_to(&mut self, g: u16, from: GroupList, to: GroupList) {
        if g < self.ngroups {
            self.relink(g, from, to);
        }
    }
}

impl TidGroups {
    /// Sets group `g`'s counters, without the version bump; false (and
    /// nothing changed) if `g` is no group.
    #[inline(always)]
    fn put_counters(&mut self, g: u16, used: u8, map: u8) -> bool {
        let Some(grp) = self.slot_mut(g) else {
            return false;
        };
        grp.used = used;
        grp.map = map;
        true
    }
}

/// [`TidGroups`] as the store of one checked operation
/// ([`TidGroups::program`], [`TidGroups::unprogram`]): the same tables,
/// but counter changes do not bump the version one by one; the operation
/// bumps it once when it is done (nothing else can see the groups in
/// between: the operation holds them by `&mut`). A release also clears
/// the owner tickets of the entries it frees.
pub(crate) struct Batch<'a>(pub(crate) &'a mut TidGroups);

impl GroupStore for Batch<'_> {
    #[inline(always)]
    fn expected_base(&self) -> u32 {
        self.0.expected_base
    }

    #[inline(always)]
    fn first(&self, list: GroupList) -> Option<u16> {
        GroupStore::first(&*self.0, list)
    }

    #[inline(always)]
    fn next(&self, g: u16) -> Option<u16> {
        GroupStore::next(&*self.0, g)
    }

    #[inline(always)]
    fn base(&self, g: u16) -> u32 {
        group_base(self.0.expected_base, g)
    }

    #[inline(always)]
    fn counters(&self, g: u16) -> (u8, u8) {
        self.0.counters_of(g)
    }

    #[inline(always)]
    fn set_counters(&mut self, g: u16, used: u8, map: u8) {
        let _ = self.0.put_counters(g, used, map);
    }

    #[inline(always)]
    fn move_to(&mut self, g: u16, from: GroupList, to: GroupList) {
        GroupStore::move_to(&mut *self.0, g, from, to);
    }

    /// Also clears the released entries' owners (the checked unprogram's
    /// last step, made here while the node is at hand).
    #[inline(always)]
    fn release_entries(&mut self, g: u16, cnt: u8, taken: u8) {
        self.0.release_in_place(g, cnt, taken);
        if let Some(owners) = self.0.owner.get_mut(usize::from(g)) {
            checked::set_owners(owners, taken, 0);
        }
    }
}

/// The groups of one list, head to tail ([`TidGroups::list`]).
#[derive(Debug, Clone)]
pub struct ListIter<'a> {
    groups: &'a TidGroups,
    cur: u16,
    /// Bound on the walk, so even a broken link could not loop forever.
    left: u16,
}

impl Iterator for ListIter<'_> {
    type Item = GroupView;

    fn next(&mut self) -> Option<GroupView> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let view = self.groups.group(usize::from(self.cur))?;
        self.cur = self.groups.next_row(self.cur);
        Some(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pageset::find_phys_blocks;
    use hfi1_hal::sim::SimContext;

    /// Eight scattered pages: eight page sets, eight entries.
    fn eight_sets() -> crate::PageSets {
        let pages: Vec<u64> = (0..8u64).map(|i| (0x100 + 2 * i) << 12).collect();
        find_phys_blocks(&pages, 4096).unwrap()
    }

    fn bases(g: &TidGroups) -> Vec<u32> {
        g.list(GroupList::Free).map(|v| v.base).collect()
    }

    #[test]
    fn tables_follow_the_group_count_through_resets() {
        let mut rcv = SimContext::new(0, 4096);
        let mut g = TidGroups::new(64, 4).unwrap();
        assert_eq!(bases(&g), [64, 72, 80, 88]);
        let sets = eight_sets();
        let a = g.allocate(&sets).unwrap();
        g.program(&mut rcv, &a, &sets, 4096).unwrap();
        assert_eq!(g.entries_in_use(), 8);

        // Grow: more groups than the tables held, every entry free again,
        // the old allocation foreign.
        g.reset(128, 16).unwrap();
        assert_eq!(g.group_count(), 16);
        assert_eq!(g.entries_in_use(), 0);
        assert_eq!(bases(&g).last(), Some(&(128 + 15 * 8)));
        assert_eq!(g.group(16), None);
        assert_eq!(g.unprogram(&mut rcv, &a), Err(AllocError::Foreign));

        // Shrink, then refused resets change nothing.
        g.reset(0, 2).unwrap();
        assert_eq!(bases(&g), [0, 8]);
        assert_eq!(g.reset(0, 0), Err(AllocError::BadGroupCount(0)));
        assert_eq!(g.reset(0, 257), Err(AllocError::BadGroupCount(257)));
        assert_eq!(g.reset(3, 2), Err(AllocError::BadBase(3)));
        assert_eq!(bases(&g), [0, 8]);

        // The shrunk tables still serve a full cycle.
        let a = g.allocate(&sets).unwrap();
        g.program(&mut rcv, &a, &sets, 4096).unwrap();
        assert_eq!(g.list_len(GroupList::Full), 1);
        g.unprogram(&mut rcv, &a).unwrap();
        assert_eq!((g.entries_in_use(), g.free_groups()), (0, 2));
    }

    #[test]
    fn the_debug_output_counts_the_lists_and_entries() {
        let mut rcv = SimContext::new(0, 4096);
        let mut g = TidGroups::new(64, 4).unwrap();
        let sets = eight_sets();
        let a = g.allocate(&sets[..4]).unwrap();
        g.program(&mut rcv, &a, &sets[..4], 4096).unwrap();
        assert_eq!(
            format!("{g:?}"),
            "TidGroups { expected_base: 64, ngroups: 4, free: 3, used: 1, full: 0, \
             entries_in_use: 4, .. }"
        );
    }

    /// The store's list walk ends at the list head, also when the head's
    /// row number is the group count (256 groups: the free list's head is
    /// row 256), and a move of a row that is no group changes nothing.
    #[test]
    fn list_walks_end_at_the_head_and_non_groups_do_not_move() {
        let g = TidGroups::new(0, 256).unwrap();
        assert_eq!(GroupStore::first(&g, GroupList::Free), Some(0));
        assert_eq!(GroupStore::next(&g, 254), Some(255));
        assert_eq!(GroupStore::next(&g, 255), None, "255 is the last");
        assert_eq!(GroupStore::first(&g, GroupList::Used), None);

        let mut rcv = SimContext::new(0, 256 * 8);
        let mut g = TidGroups::new(0, 256).unwrap();
        let sets = eight_sets();
        let mut held = Vec::new();
        for _ in 0..256 {
            let a = g.allocate(&sets).unwrap();
            g.program(&mut rcv, &a, &sets, 4096).unwrap();
            held.push(a);
        }
        assert_eq!(g.free_groups(), 0);
        assert_eq!(GroupStore::first(&g, GroupList::Free), None, "empty");
        assert_eq!(g.allocate(&sets[..2]), Err(AllocError::NoSpace));

        let mut g = TidGroups::new(64, 4).unwrap();
        GroupStore::move_to(&mut g, 4, GroupList::Free, GroupList::Used);
        assert_eq!(bases(&g), [64, 72, 80, 88]);
        assert_eq!(
            (g.list_len(GroupList::Used), g.list(GroupList::Used).count()),
            (0, 0)
        );
    }

    /// What an allocation shows of itself: its nodes' groups and maps,
    /// empty or not, and nothing left after `forget`; and two page sets
    /// the RcvArray cannot map are refused together as alone.
    #[test]
    fn an_allocation_shows_its_nodes_and_bad_sets_are_refused() {
        let mut rcv = SimContext::new(0, 4096);
        let mut g = TidGroups::new(0, 4).unwrap();
        let sets = eight_sets();
        let a = g.allocate(&sets[..4]).unwrap();
        g.program(&mut rcv, &a, &sets[..4], 4096).unwrap();
        let mut b = g.allocate(&sets[..6]).unwrap();
        assert!(!b.is_empty() && TidAlloc::default().is_empty());
        let nodes: Vec<(usize, u8)> = b
            .nodes()
            .iter()
            .map(|n| (n.group_index(), n.map()))
            .collect();
        // Group 0's four free entries, then two of free group 1.
        assert_eq!(nodes, [(0, 0x0F), (1, 0)]);
        let c = g.allocate(&sets[..2]).unwrap();
        assert_eq!(
            c.nodes().first().map(|n| (n.group_index(), n.map())),
            Some((0, 0x0F))
        );
        b.forget();
        assert!(b.is_empty() && b.set_count() == 0);
        assert_eq!(g.unprogram(&mut rcv, &b), Err(AllocError::Foreign));

        let bad = [
            crate::PageSet {
                count: 3,
                addr: 0x1000,
                ..Default::default()
            },
            crate::PageSet {
                count: 3,
                addr: 0x8000,
                ..Default::default()
            },
        ];
        let a = g.allocate(&bad).unwrap();
        assert_eq!(
            g.program(&mut rcv, &a, &bad, 4096),
            Err(AllocError::BadPageSet { index: 0, count: 3 })
        );
    }

    #[test]
    fn the_value_is_small() {
        assert!(core::mem::size_of::<TidGroups>() <= 128);
        let g = TidGroups::new(0, 256).unwrap();
        assert_eq!(g.group_count(), 256);
        assert_eq!(g.free_groups(), 256);
    }
}
