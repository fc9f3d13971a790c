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
//! the kernel's `tid_group_list`), *used* (1..=7) and *full* (8). The lists
//! are doubly linked through group indices stored next to the groups, so
//! a move is O(1) and nothing is ever scanned or allocated. A group that
//! moves is always appended at the tail of its new list (quirk 4 of the
//! vectors' README): freed groups go to the back of the free list, so the
//! allocation order rotates over time, exactly as in the driver.

extern crate alloc;

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};

use alloc::vec::Vec;
use arrayvec::ArrayVec;
use hfi1_hal::consts::{
    MAX_PAGESETS, MAX_TID_GROUPS, PAGE_SHIFT, TID_GROUP_FULL_MAP, TID_GROUP_SIZE,
};
use hfi1_hal::services::try_fill_vec;
use hfi1_hal::{RcvArray, RcvType, TidCtrl, TidEntry};

use crate::AllocError;
use crate::pageset::PageSet;

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

/// One group chosen by [`TidGroups::allocate`]: which group, its map when
/// it was chosen, and how many entries this allocation takes in it (the
/// lowest `cnt` entries whose bit is clear in `map`).
/// Kernel: `struct kern_tid_node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TidNode {
    group: u16,
    map: u8,
    cnt: u8,
    /// The entries taken, precomputed from `map` and `cnt`.
    taken: u8,
}

impl TidNode {
    /// Index of the group in its context (0-based).
    pub const fn group_index(&self) -> usize {
        self.group as usize
    }

    /// The group's map when it was chosen.
    pub const fn map(&self) -> u8 {
        self.map
    }

    /// Entries taken in the group.
    pub const fn cnt(&self) -> u8 {
        self.cnt
    }

    /// The entries of the group this node takes, as a bit map: the `cnt`
    /// lowest bits clear in the snapshot.
    #[inline]
    pub const fn taken(&self) -> u8 {
        self.taken
    }

    /// Builds a node, working out which entries it takes.
    #[inline]
    const fn new(group: u16, map: u8, cnt: u8) -> Self {
        if map == 0 {
            // A whole free group: the `cnt` lowest entries.
            let taken = if cnt >= GROUP_SIZE {
                TID_GROUP_FULL_MAP
            } else {
                (1u8 << cnt) - 1
            };
            return Self {
                group,
                map,
                cnt,
                taken,
            };
        }
        let mut taken = 0u8;
        let mut free = !map;
        let mut left = cnt;
        while left > 0 && free != 0 {
            let lowest = free & free.wrapping_neg();
            taken |= lowest;
            free &= !lowest;
            left -= 1;
        }
        Self {
            group,
            map,
            cnt,
            taken,
        }
    }
}

/// A node as the reference vectors show it: `(group base, map, cnt)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TidNodeInfo {
    /// Absolute RcvArray index of the group's first entry.
    pub base: u32,
    /// The group's map when it was chosen.
    pub map: u8,
    /// Entries taken in the group.
    pub cnt: u8,
}

/// The RcvArray entries reserved for one segment, as
/// [`TidGroups::allocate`] chose them. A small value the caller keeps in
/// its flow record until it calls [`TidGroups::unprogram`].
///
/// It remembers which `TidGroups` made it and carries a ticket that the
/// groups record in every entry [`TidGroups::program`] fills, so
/// [`TidGroups::unprogram`] can tell a live allocation from a stale,
/// foreign or already released one.
///
/// The default value holds nothing and belongs to no context: program and
/// unprogram reject it with [`AllocError::Foreign`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TidAlloc {
    instance: u32,
    expected_base: u32,
    version: u64,
    ticket: u32,
    nsets: u8,
    nodes: ArrayVec<TidNode, MAX_PAGESETS>,
}

impl TidAlloc {
    /// The chosen groups, in allocation order. Kernel: `flow->tnode[]`.
    pub fn nodes(&self) -> &[TidNode] {
        &self.nodes
    }

    /// The chosen groups as `(base, map, cnt)`, in allocation order.
    pub fn tnodes(&self) -> impl Iterator<Item = TidNodeInfo> + '_ {
        let eb = self.expected_base;
        self.nodes.iter().map(move |n| TidNodeInfo {
            base: group_base(eb, n.group),
            map: n.map,
            cnt: n.cnt,
        })
    }

    /// Number of page sets (and RcvArray entries) the allocation covers.
    pub const fn set_count(&self) -> usize {
        self.nsets as usize
    }

    /// True for an allocation that holds nothing (the default value).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Empties the value in place: it then holds nothing and belongs to no
    /// context, like the default. The caller does this after
    /// [`TidGroups::unprogram`] so its record cannot be released twice.
    pub fn forget(&mut self) {
        self.nodes.clear();
        self.instance = 0;
        self.ticket = 0;
        self.nsets = 0;
    }
}

/// What [`TidGroups::program`] produced for a segment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Programmed {
    /// The TID entries to send to the peer, in order.
    /// Kernel: `flow->tid_entry[0..tidcnt)`.
    pub tid_entries: ArrayVec<TidEntry, MAX_PAGESETS>,
    /// Packets the segment takes at the path MTU given: the sum over TID
    /// entries of `ceil(LEN / (pmtu / 4096))`. Kernel: `flow->npkts`.
    pub npkts: u32,
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

/// Packets per TID entry at one path MTU: the driver rounds
/// `pages / (pmtu / 4096)` up with a shift by log2 of the pages per packet
/// (exact for the power-of-two MTUs; 10240 counts as 2 pages).
#[derive(Debug, Clone, Copy)]
struct PacketShape {
    pmtu_pages: u32,
    shift: u32,
}

impl PacketShape {
    /// The shape of `pmtu`; [`AllocError::BadPmtu`] below 4096.
    fn new(pmtu: u32) -> Result<Self, AllocError> {
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
        out: &mut Programmed,
    ) {
        let idx = self.pair_base.wrapping_add(u32::from(p));
        // Cannot fail: idx < 1024 (at most 256 groups, asserted above) and
        // pages <= 1024 (two sets of at most 512, checked by
        // `check_program`). Should it, the entry would read LEN 0, which
        // the peer rejects, rather than name other entries.
        let entry = TidEntry::new(idx, ctrl, pages).unwrap_or(TidEntry::from_raw(0));
        // Cannot fail: at most one TID entry per page set.
        let _ = out.tid_entries.try_push(entry);
        out.npkts = out.npkts.wrapping_add(shape.packets(pages));
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
        out: &mut Programmed,
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
        sets: &mut core::slice::Iter<'_, PageSet>,
        shape: PacketShape,
        out: &mut Programmed,
    ) {
        let even = self.abs_base.wrapping_add(2 * u32::from(p));
        let odd = even.wrapping_add(1);
        let mut next = || sets.next().copied().unwrap_or(PageSet::FILLER);
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

/// The nodes [`TidGroups::allocate`]'s passes have chosen so far.
struct Picker<'a> {
    nodes: &'a mut ArrayVec<TidNode, MAX_PAGESETS>,
    /// Entries found so far.
    taken: usize,
    /// Entries wanted (one per page set).
    n: usize,
}

impl Picker<'_> {
    /// Takes `cnt` entries of group `group`, whose map is `map` now.
    ///
    /// Every node takes at least one entry and the passes stop once
    /// `n <= 64` entries are found, so `nodes` cannot overflow; should it,
    /// the allocation fails cleanly.
    fn add(&mut self, group: u16, map: u8, cnt: u8) -> Result<(), AllocError> {
        self.nodes
            .try_push(TidNode::new(group, map, cnt))
            .map_err(|_| AllocError::NoSpace)?;
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

    /// Moves group `g` to the tail of `to`. Kernel: `tid_group_move()`.
    #[inline]
    fn move_to(&mut self, g: u16, to: GroupList) {
        self.unlink(g);
        self.append(g, to);
    }

    #[inline]
    fn head(&self, which: GroupList) -> u16 {
        self.lists.get(which.index()).map_or(NIL, |l| l.head)
    }

    #[inline]
    fn next_of(&self, g: u16) -> u16 {
        self.groups.get(g as usize).map_or(NIL, |n| n.next)
    }

    #[inline]
    fn counters(&self, g: u16) -> (u8, u8) {
        self.groups
            .get(g as usize)
            .map_or((0, 0), |n| (n.used, n.map))
    }

    // ---- allocate / program / unprogram --------------------------------

    /// Chooses RcvArray entries for `sets.len()` page sets without changing
    /// anything. Kernel: `kern_alloc_tids()`.
    ///
    /// Three passes, each recording `(group, map snapshot, count)` nodes:
    /// 1. whole free groups, head first, `n / 8` of them;
    /// 2. partly used groups, head first, each giving
    ///    `min(remaining, 8 - used)`;
    /// 3. the one free group after the last one pass 1 took (the head of
    ///    the free list if pass 1 took none), giving `min(remaining, 8)`.
    ///
    /// Quirk 2 of the vectors' README is kept: pass 3 takes at most one
    /// group (enough, since the remainder is then below 8), and if pass 1
    /// ran off the end of the free list, pass 3 does not run at all.
    ///
    /// # Locking
    ///
    /// Under `exp_lock`, in the same critical section as the
    /// [`Self::program`] that uses the result.
    ///
    /// # Errors
    ///
    /// [`AllocError::NoSpace`] (the driver's `-EAGAIN`) when the passes do
    /// not find enough entries; [`AllocError::NoPageSets`],
    /// [`AllocError::OddPageSets`] or [`AllocError::TooManyPageSets`] for
    /// 0, an odd number, or more than 64 sets. Odd counts are refused on
    /// purpose (the driver only warns, quirk 3): they break the pair
    /// alignment of the group maps and let two flows share one RcvArray
    /// pair. Nothing changes on any error.
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
        let r = self.choose(sets.len(), &mut out.nodes);
        if let Err(e) = r {
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
        // n <= 64, checked by `choose`.
        out.nsets = sets.len() as u8;
        Ok(())
    }

    /// The three passes of [`Self::allocate`] for `n` sets, appending the
    /// chosen nodes to `nodes`.
    fn choose(
        &self,
        n: usize,
        nodes: &mut ArrayVec<TidNode, MAX_PAGESETS>,
    ) -> Result<(), AllocError> {
        if n == 0 {
            return Err(AllocError::NoPageSets);
        }
        if n > MAX_PAGESETS {
            return Err(AllocError::TooManyPageSets);
        }
        if n % 2 == 1 {
            return Err(AllocError::OddPageSets(n));
        }
        let mut pick = Picker { nodes, taken: 0, n };
        let whole = self.pick_whole_groups(&mut pick)?;
        if pick.done() {
            return Ok(());
        }
        self.pick_used_groups(&mut pick)?;
        if pick.done() {
            return Ok(());
        }
        self.pick_one_more_free(&mut pick, whole)
    }

    /// Pass 1 of [`Self::allocate`]: whole free groups, head first, `n / 8`
    /// of them. Kernel: the "complete groups" loop of `kern_alloc_tids()`.
    fn pick_whole_groups(&self, pick: &mut Picker<'_>) -> Result<WholePass, AllocError> {
        let mut pass = WholePass {
            last: None,
            ran_off: false,
        };
        let mut whole = pick.n / TID_GROUP_SIZE;
        if whole == 0 {
            return Ok(pass);
        }
        let mut g = self.head(GroupList::Free);
        loop {
            if g == NIL {
                pass.ran_off = true;
                return Ok(pass);
            }
            pick.add(g, self.counters(g).1, GROUP_SIZE)?;
            pass.last = Some(g);
            whole -= 1;
            if whole == 0 {
                return Ok(pass);
            }
            g = self.next_of(g);
        }
    }

    /// Pass 2: partly used groups, head first, each giving
    /// `min(remaining, 8 - used)`, until enough are found. Kernel: the
    /// "used groups" loop of `kern_alloc_tids()`.
    fn pick_used_groups(&self, pick: &mut Picker<'_>) -> Result<(), AllocError> {
        let mut g = self.head(GroupList::Used);
        while g != NIL {
            let (used, map) = self.counters(g);
            let room = GROUP_SIZE.saturating_sub(used) as usize;
            let take = room.min(pick.n - pick.taken);
            pick.add(g, map, take as u8)?;
            if pick.done() {
                return Ok(());
            }
            g = self.next_of(g);
        }
        Ok(())
    }

    /// Pass 3: the one free group after the last one pass 1 took (the head
    /// of the free list if pass 1 took none), giving `min(remaining, 8)`;
    /// not at all if pass 1 ran off the end of the free list (quirk 2).
    /// Kernel: the "complete continue" step of `kern_alloc_tids()`.
    fn pick_one_more_free(
        &self,
        pick: &mut Picker<'_>,
        whole: WholePass,
    ) -> Result<(), AllocError> {
        if whole.ran_off {
            return Err(AllocError::NoSpace);
        }
        let g = match whole.last {
            None => self.head(GroupList::Free),
            Some(last) => self.next_of(last),
        };
        if g == NIL {
            return Err(AllocError::NoSpace);
        }
        let take = TID_GROUP_SIZE.min(pick.n - pick.taken);
        pick.add(g, self.counters(g).1, take as u8)?;
        if pick.done() {
            Ok(())
        } else {
            Err(AllocError::NoSpace)
        }
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
    /// `kern_program_rcvarray()` / `kern_program_rcv_group()`.
    ///
    /// For each node the group's eight entries are visited in order; an
    /// entry taken in the snapshot, or beyond the node's count, gets a
    /// write-combining fill; every other entry takes the next page set:
    /// `put_tid` EXPECTED with the set's `dma` and order, or INVALID for a
    /// filler. Two free entries at an even position form a pair (one TID
    /// entry, CTRL 3, LEN = pages of both) when the node needs at least two
    /// more; otherwise an entry yields CTRL 1 (even) or 2 (odd), and a
    /// filler CTRL 1. Each TID entry adds `ceil(LEN / (pmtu / 4096))`
    /// packets. A group moves free→used at its first entry and used→full at
    /// its eighth (quirk 4). A pair of two fillers gives a LEN 0 entry
    /// (quirk 5; `find_phys_blocks` never produces one).
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
        out.tid_entries.clear();
        out.npkts = 0;
        let shape = self.check_program(alloc, sets, pmtu)?;
        let mut next_set = sets.iter();
        for node in &alloc.nodes {
            self.program_node(rcv, node, &mut next_set, shape, out);
            self.take_entries(node, alloc.ticket);
        }
        self.in_use = self.in_use.wrapping_add(u32::from(alloc.nsets));
        self.version = self.version.wrapping_add(1);
        Ok(())
    }

    /// Everything [`Self::program_into`] refuses, checked before anything
    /// is written; the packet shape of the path MTU.
    fn check_program(
        &self,
        alloc: &TidAlloc,
        sets: &[PageSet],
        pmtu: u32,
    ) -> Result<PacketShape, AllocError> {
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
        // One branch-free pass; the culprit is looked up only on error.
        let all_ok = sets.iter().fold(true, |ok, s| ok & s.is_programmable());
        if !all_ok {
            if let Some((index, s)) = sets.iter().enumerate().find(|(_, s)| !s.is_programmable()) {
                return Err(AllocError::BadPageSet {
                    index,
                    count: s.count,
                });
            }
        }
        PacketShape::new(pmtu)
    }

    /// Programs the eight entries of `node`'s group: fills for entries the
    /// node does not take, the next sets of `sets` for the others, one TID
    /// entry per RcvArray pair it touches (see [`Self::program`]).
    /// Kernel: the entry loop of `kern_program_rcv_group()`.
    #[inline]
    fn program_node(
        &self,
        rcv: &mut impl RcvArray,
        node: &TidNode,
        sets: &mut core::slice::Iter<'_, PageSet>,
        shape: PacketShape,
        out: &mut Programmed,
    ) {
        let rel_base = u32::from(node.group).wrapping_mul(TID_GROUP_SIZE as u32);
        let group = GroupPairs {
            abs_base: self.expected_base.wrapping_add(rel_base),
            // Groups start at a multiple of 8 from the expected base, so
            // the pair index of pair `p` is `rel_base / 2 + p`.
            pair_base: rel_base >> 1,
        };
        let taken = node.taken();
        // Fast path, the common case: a whole free group takes eight sets
        // as four pairs.
        let whole = if taken == TID_GROUP_FULL_MAP {
            sets.as_slice().split_first_chunk::<TID_GROUP_SIZE>()
        } else {
            None
        };
        if let Some((chunk, rest)) = whole {
            for (p, pair) in (0u8..).zip(chunk.chunks_exact(2)) {
                if let &[a, b] = pair {
                    group.put_both(rcv, p, &a, &b, shape, out);
                }
            }
            *sets = rest.iter();
            return;
        }
        for p in 0..(GROUP_SIZE / 2) {
            group.put_pair(rcv, p, (taken >> (2 * p)) & 3, sets, shape, out);
        }
    }

    /// Records that `node`'s entries are taken: the group's `used` and
    /// `map`, its move between lists, and the entries' owner ticket.
    /// Kernel: the `used`/`map` updates and `tid_group_move()`s of
    /// `kern_program_rcv_group()`.
    #[inline]
    fn take_entries(&mut self, node: &TidNode, ticket: u32) {
        let g = node.group;
        let Some(&Group { used, map, .. }) = self.groups.get(g as usize) else {
            return;
        };
        let taken = node.taken();
        // The driver moves the group entry by entry (free->used at the
        // first, used->full at the eighth), always to the tail; the net
        // effect on the three lists is this one move.
        let new_used = used.wrapping_add(node.cnt);
        if let Some(grp) = self.link(g) {
            grp.used = new_used;
            grp.map = map | taken;
        }
        if new_used == GROUP_SIZE {
            self.move_to(g, GroupList::Full);
        } else if used == 0 {
            self.move_to(g, GroupList::Used);
        }
        if let Some(owners) = self.owner.get_mut(g as usize) {
            set_owners(owners, taken, ticket);
        }
    }

    /// Releases the entries `alloc` holds: each is written INVALID, the
    /// group's `used` and `map` fall, and the group moves full→used and
    /// used→free as it empties (to the tail, quirk 4). Entries of a touched
    /// group that `alloc` does not hold get a write-combining fill.
    /// Kernel: `kern_unprogram_rcv_group()` for every node, as
    /// `hfi1_kern_exp_rcv_clear()` calls it.
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

        for node in &alloc.nodes {
            let g = node.group;
            let Some(&Group { used, map, .. }) = self.groups.get(g as usize) else {
                continue;
            };
            let taken = node.taken();
            let abs_base = group_base(self.expected_base, g);
            if taken == TID_GROUP_FULL_MAP {
                for i in 0..TID_GROUP_SIZE as u32 {
                    rcv.put_tid(abs_base.wrapping_add(i), RcvType::Invalid, 0, 0);
                }
            } else {
                for i in 0..GROUP_SIZE {
                    let rcventry = abs_base.wrapping_add(u32::from(i));
                    if taken & (1 << i) == 0 {
                        rcv.wc_fill(rcventry);
                    } else {
                        rcv.put_tid(rcventry, RcvType::Invalid, 0, 0);
                    }
                }
            }
            // Net effect of the driver's entry-by-entry moves (full->used as
            // the first entry goes, used->free as the last one goes).
            let new_used = used.wrapping_sub(node.cnt);
            if let Some(grp) = self.link(g) {
                grp.used = new_used;
                grp.map = map & !taken;
            }
            if new_used == 0 {
                self.move_to(g, GroupList::Free);
            } else if used == GROUP_SIZE {
                self.move_to(g, GroupList::Used);
            }
            if let Some(owners) = self.owner.get_mut(g as usize) {
                set_owners(owners, taken, 0);
            }
        }
        self.in_use = self.in_use.wrapping_sub(u32::from(alloc.nsets));
        self.version = self.version.wrapping_add(1);
        Ok(())
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
