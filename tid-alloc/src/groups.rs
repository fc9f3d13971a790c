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
use hfi1_hal::RcvArray;
use hfi1_hal::consts::{MAX_PAGESETS, MAX_TID_GROUPS, TID_GROUP_FULL_MAP, TID_GROUP_SIZE};
use hfi1_hal::services::try_fill_vec;

use crate::AllocError;
use crate::pageset::PageSet;

pub mod node;
pub mod program;
pub mod store;

pub use node::{Programmed, TidAlloc, TidNode, TidNodeInfo};

pub use program::{program_rcvarray, unprogram_rcvarray};
pub use store::{GroupStore, NodeList, PageSetSource, ProgramSink, alloc_tids};

/// "No group" in the index links.
const NIL: u16 = u16::MAX;
/// Entries per group, as the `u8` the counters use.
const GROUP_SIZE: u8 = TID_GROUP_SIZE as u8;

const _: () = assert!(MAX_TID_GROUPS < NIL as usize, "group indices fit the links");
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

/// Per-group state: counters plus the list links.
#[derive(Debug, Clone, Copy)]
struct Group {
    used: u8,
    map: u8,
    list: GroupList,
    prev: u16,
    next: u16,
}

impl Group {
    const EMPTY: Self = Self {
        used: 0,
        map: 0,
        list: GroupList::Free,
        prev: NIL,
        next: NIL,
    };
}

/// Head, tail and length of one list.
#[derive(Debug, Clone, Copy)]
struct ListHead {
    head: u16,
    tail: u16,
    len: u16,
}

impl ListHead {
    const EMPTY: Self = Self {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// Writes `value` into the owner slots of the entries in `taken`.
#[inline(always)]
fn set_owners(owners: &mut [u32; TID_GROUP_SIZE], taken: u8, value: u32) {
    if taken == TID_GROUP_FULL_MAP {
        *owners = [value; TID_GROUP_SIZE];
    } else {
        for (i, o) in owners.iter_mut().enumerate() {
            if (taken >> i) & 1 == 1 {
                *o = value;
            }
        }
    }
}

/// True when every entry in `taken` is owned by `ticket`.
#[inline(always)]
fn owns_all(owners: &[u32; TID_GROUP_SIZE], taken: u8, ticket: u32) -> bool {
    if taken == TID_GROUP_FULL_MAP {
        owners.iter().fold(0, |acc, &o| acc | (o ^ ticket)) == 0
    } else {
        owners
            .iter()
            .enumerate()
            .all(|(i, &o)| (taken >> i) & 1 == 0 || o == ticket)
    }
}

/// Absolute index of group `g`'s first entry.
#[inline]
const fn group_base(expected_base: u32, g: u16) -> u32 {
    expected_base.wrapping_add((g as u32).wrapping_mul(TID_GROUP_SIZE as u32))
}

/// The TID groups of one receive context.
///
/// The per-group state and the entry owners live in two tables of
/// `ngroups` entries allocated fallibly once, at construction (the kernel
/// `kcalloc`s `rcd->groups` the same way), so the value itself is small
/// (under 100 bytes) and a context holding it can be built on a kernel
/// stack. Nothing else allocates; [`TidGroups::reset`] re-initialises one
/// in place and only allocates to grow the tables.
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
    /// Entries in use over all groups.
    in_use: u32,
    lists: [ListHead; 3],
    /// `ngroups` groups. Kernel: `rcd->groups`.
    groups: Vec<Group>,
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
            .field("entries_in_use", &self.in_use)
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
            in_use: 0,
            lists: [ListHead::EMPTY; 3],
            groups: Vec::new(),
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
        self.groups
            .try_reserve_exact(ngroups.saturating_sub(self.groups.len()))
            .map_err(|_| AllocError::NoMemory)?;
        self.owner
            .try_reserve_exact(ngroups.saturating_sub(self.owner.len()))
            .map_err(|_| AllocError::NoMemory)?;
        try_fill_vec(&mut self.groups, ngroups, Group::EMPTY).map_err(|_| AllocError::NoMemory)?;
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
        self.in_use = 0;
        self.lists = [ListHead::EMPTY; 3];
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
        self.lists.get(which.index()).map_or(0, |l| l.len as usize)
    }

    /// Groups with no entry in use.
    pub fn free_groups(&self) -> usize {
        self.list_len(GroupList::Free)
    }

    /// RcvArray entries in use over all groups.
    pub const fn entries_in_use(&self) -> u32 {
        self.in_use
    }

    /// Group `index` (0-based), or `None` past the last group.
    pub fn group(&self, index: usize) -> Option<GroupView> {
        if index >= self.ngroups as usize {
            return None;
        }
        let g = self.groups.get(index)?;
        Some(GroupView {
            base: group_base(self.expected_base, index as u16),
            used: g.used,
            map: g.map,
        })
    }

    /// The groups of one list, head to tail.
    pub fn list(&self, which: GroupList) -> ListIter<'_> {
        let head = self.lists.get(which.index()).map_or(NIL, |l| l.head);
        ListIter {
            groups: self,
            cur: head,
            left: self.ngroups,
        }
    }

    // ---- list plumbing -------------------------------------------------

    #[inline]
    fn list_mut(&mut self, which: GroupList) -> Option<&mut ListHead> {
        self.lists.get_mut(which.index())
    }

    #[inline]
    fn link(&mut self, g: u16) -> Option<&mut Group> {
        self.groups.get_mut(g as usize)
    }

    /// Appends group `g` (currently on no list) at the tail of `which`.
    #[inline]
    fn append(&mut self, g: u16, which: GroupList) {
        let Some(l) = self.list_mut(which) else {
            return;
        };
        let old_tail = l.tail;
        l.tail = g;
        if old_tail == NIL {
            l.head = g;
        }
        l.len = l.len.wrapping_add(1);
        if let Some(t) = self.link(old_tail) {
            t.next = g;
        }
        if let Some(n) = self.link(g) {
            n.prev = old_tail;
            n.next = NIL;
            n.list = which;
        }
    }

    /// Takes group `g` off the list it is on.
    #[inline]
    fn unlink(&mut self, g: u16) {
        let Some(&Group {
            prev, next, list, ..
        }) = self.groups.get(g as usize)
        else {
            return;
        };
        match self.link(prev) {
            Some(p) => p.next = next,
            None => {
                if let Some(l) = self.list_mut(list) {
                    l.head = next;
                }
            }
        }
        match self.link(next) {
            Some(n) => n.prev = prev,
            None => {
                if let Some(l) = self.list_mut(list) {
                    l.tail = prev;
                }
            }
        }
        if let Some(l) = self.list_mut(list) {
            l.len = l.len.wrapping_sub(1);
        }
        if let Some(n) = self.link(g) {
            n.prev = NIL;
            n.next = NIL;
        }
    }

    #[inline]
    fn head(&self, which: GroupList) -> u16 {
        self.lists.get(which.index()).map_or(NIL, |l| l.head)
    }

    #[inline]
    fn next_of(&self, g: u16) -> u16 {
        self.groups.get(g as usize).map_or(NIL, |n| n.next)
    }

    // ---- allocate / program / unprogram --------------------------------

    /// Chooses RcvArray entries for `sets.len()` page sets without changing
    /// anything. Kernel: `kern_alloc_tids()`; the passes are
    /// [`alloc_tids`]'s.
    ///
    /// The allocation remembers this context, the state it was made for
    /// and a ticket, so [`Self::program`] and [`Self::unprogram`] can
    /// refuse a stale, foreign or already released one.
    ///
    /// # Locking
    ///
    /// Under `exp_lock`, in the same critical section as the
    /// [`Self::program`] that uses the result.
    ///
    /// # Errors
    ///
    /// As [`alloc_tids`]. Nothing changes on any error.
    pub fn allocate(&self, sets: &[PageSet]) -> Result<TidAlloc, AllocError> {
        let mut out = TidAlloc::default();
        self.allocate_into(sets, &mut out)?;
        Ok(out)
    }

    /// [`Self::allocate`] writing into the caller's `TidAlloc` (as the
    /// driver writes `flow->tnode[]`), which saves copying the value out.
    /// On error `out` is left empty ([`TidAlloc::forget`]).
    ///
    /// # Locking
    ///
    /// As [`Self::allocate`].
    ///
    /// # Errors
    ///
    /// As [`Self::allocate`].
    pub fn allocate_into(&self, sets: &[PageSet], out: &mut TidAlloc) -> Result<(), AllocError> {
        out.forget();
        if let Err(e) = alloc_tids(self, sets.len(), &mut out.nodes) {
            out.nodes.clear();
            return Err(e);
        }
        let ticket = self.next_ticket.get();
        self.next_ticket.set(match ticket.wrapping_add(1) {
            0 => 1,
            t => t,
        });
        out.instance = self.instance;
        out.expected_base = self.expected_base;
        out.version = self.version;
        out.ticket = ticket;
        // n <= 64, checked by `alloc_tids`.
        out.nsets = sets.len() as u8;
        Ok(())
    }

    /// Checks that `alloc` was made by this context.
    #[inline]
    fn check_owner(&self, alloc: &TidAlloc) -> Result<(), AllocError> {
        if alloc.instance != self.instance
            || alloc.instance == 0
            || alloc.expected_base != self.expected_base
        {
            return Err(AllocError::Foreign);
        }
        Ok(())
    }

    /// Programs the entries `alloc` chose with `sets`, moves the groups
    /// between lists and builds the TID entries. Kernel:
    /// `kern_program_rcvarray()` / `kern_program_rcv_group()`; the
    /// programming is [`program_rcvarray`]'s.
    ///
    /// # Locking
    ///
    /// Under `exp_lock`, right after the [`Self::allocate`] that made
    /// `alloc`.
    ///
    /// # Errors
    ///
    /// Checked before anything is written, so nothing changes on error:
    /// [`AllocError::Foreign`] for an allocation of another context;
    /// [`AllocError::Stale`] if the groups changed since `allocate`;
    /// [`AllocError::SetCountMismatch`] if `sets` is not the list the
    /// allocation was made for; [`AllocError::BadPageSet`] for a count that
    /// is not 0 or a power of two up to 512; [`AllocError::BadPmtu`] for a
    /// path MTU below 4096.
    pub fn program(
        &mut self,
        rcv: &mut impl RcvArray,
        alloc: &TidAlloc,
        sets: &[PageSet],
        pmtu: u32,
    ) -> Result<Programmed, AllocError> {
        let mut out = Programmed::default();
        self.program_into(rcv, alloc, sets, pmtu, &mut out)?;
        Ok(out)
    }

    /// [`Self::program`] writing into the caller's `Programmed` (as the
    /// driver writes `flow->tid_entry[]` and `flow->npkts`), which saves
    /// copying the value out. `out` is cleared first; on error it is left
    /// empty and nothing else changes.
    ///
    /// # Locking
    ///
    /// As [`Self::program`].
    ///
    /// # Errors
    ///
    /// As [`Self::program`].
    pub fn program_into(
        &mut self,
        rcv: &mut impl RcvArray,
        alloc: &TidAlloc,
        sets: &[PageSet],
        pmtu: u32,
        out: &mut Programmed,
    ) -> Result<(), AllocError> {
        out.reset();
        self.check_owner(alloc)?;
        if alloc.version != self.version {
            return Err(AllocError::Stale);
        }
        if sets.len() != alloc.set_count() {
            return Err(AllocError::SetCountMismatch {
                expected: alloc.set_count(),
                got: sets.len(),
            });
        }
        let shape = program::check_sets(sets, pmtu)?;
        program::program_checked(self, rcv, &alloc.nodes, sets, shape, out);
        for node in &alloc.nodes {
            if let Some(owners) = self.owner.get_mut(node.group as usize) {
                set_owners(owners, node.taken(), alloc.ticket);
            }
        }
        self.version = self.version.wrapping_add(1);
        Ok(())
    }

    /// Releases the entries `alloc` holds: each is written INVALID, the
    /// group's `used` and `map` fall, and the group moves full→used and
    /// used→free as it empties (to the tail, quirk 4). Entries of a touched
    /// group that `alloc` does not hold get a write-combining fill.
    /// Kernel: `kern_unprogram_rcv_group()` for every node, as
    /// `hfi1_kern_exp_rcv_clear()` calls it; the release is
    /// [`unprogram_rcvarray`]'s.
    ///
    /// # Locking
    ///
    /// Under `exp_lock`.
    ///
    /// # Errors
    ///
    /// Checked before anything is written, so nothing changes on error:
    /// [`AllocError::Foreign`] for an allocation of another context (or the
    /// empty default); [`AllocError::Stale`] unless every entry `alloc`
    /// would release is held by this very allocation, i.e. it was
    /// programmed and not yet released. Ownership is a 32-bit ticket per
    /// allocation, recorded in each entry; a stale copy could only pass
    /// again after 2^32 further allocations, with the same entries held by
    /// the one allocation that reused its ticket.
    pub fn unprogram(
        &mut self,
        rcv: &mut impl RcvArray,
        alloc: &TidAlloc,
    ) -> Result<(), AllocError> {
        self.check_owner(alloc)?;
        if alloc.nodes.is_empty() || alloc.ticket == 0 {
            return Err(AllocError::Stale);
        }
        for node in &alloc.nodes {
            let Some(owners) = self.owner.get(node.group as usize) else {
                return Err(AllocError::Stale);
            };
            if node.group >= self.ngroups {
                return Err(AllocError::Stale);
            }
            let taken = node.taken();
            if taken.count_ones() != u32::from(node.cnt) {
                return Err(AllocError::Stale);
            }
            if !owns_all(owners, taken, alloc.ticket) {
                return Err(AllocError::Stale);
            }
        }
        unprogram_rcvarray(self, rcv, &alloc.nodes);
        for node in &alloc.nodes {
            if let Some(owners) = self.owner.get_mut(node.group as usize) {
                set_owners(owners, node.taken(), 0);
            }
        }
        self.version = self.version.wrapping_add(1);
        Ok(())
    }
}

/// The software platform's store: the tables of [`TidGroups`]. Every change
/// keeps the count of entries in use and bumps the version (so a checked
/// allocation made before it is stale).
impl GroupStore for TidGroups {
    fn expected_base(&self) -> u32 {
        self.expected_base
    }

    fn first(&self, list: GroupList) -> Option<u16> {
        Some(self.head(list)).filter(|&g| g != NIL)
    }

    fn next(&self, g: u16) -> Option<u16> {
        Some(self.next_of(g)).filter(|&n| n != NIL)
    }

    fn base(&self, g: u16) -> u32 {
        group_base(self.expected_base, g)
    }

    fn counters(&self, g: u16) -> (u8, u8) {
        self.groups
            .get(g as usize)
            .map_or((0, 0), |n| (n.used, n.map))
    }

    fn set_counters(&mut self, g: u16, used: u8, map: u8) {
        let Some(grp) = self.groups.get_mut(g as usize) else {
            return;
        };
        self.in_use = self
            .in_use
            .wrapping_add(u32::from(used))
            .wrapping_sub(u32::from(grp.used));
        grp.used = used;
        grp.map = map;
        self.version = self.version.wrapping_add(1);
    }

    fn move_to(&mut self, g: u16, _from: GroupList, to: GroupList) {
        self.unlink(g);
        self.append(g, to);
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
        if self.cur == NIL || self.left == 0 {
            return None;
        }
        self.left -= 1;
        let view = self.groups.group(self.cur as usize)?;
        self.cur = self.groups.next_of(self.cur);
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
    fn the_value_is_small() {
        assert!(core::mem::size_of::<TidGroups>() <= 128);
        let g = TidGroups::new(0, 256).unwrap();
        assert_eq!(g.group_count(), 256);
        assert_eq!(g.free_groups(), 256);
    }
}
