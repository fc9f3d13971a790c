// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The software platform's group table: one row per group (counters and
//! list links) and one row per list head, so the three lists are circular
//! and doubly linked through row indices, as the kernel's `list_head`s are
//! through pointers: a move is a handful of stores with no "first or
//! last?" branch, and nothing is scanned.
//!
//! The table always has [`ROWS`] rows, a power of two, and every row
//! index is masked with `ROWS - 1` where it is used: the compiler then
//! knows each access is in bounds, so a move or a counter update costs no
//! bounds checks (one length check per operation, where the rows are
//! borrowed as an array). Rows past the groups and heads stay empty.
//!
//! # Locking
//!
//! Part of [`TidGroups`], the context's `exp_lock`-guarded state.

use hfi1_hal::consts::MAX_TID_GROUPS;

use super::store::move_on_release;
use super::{GroupList, TidGroups};

/// One row of the table. For a list head only the links are used, and its
/// counters stay 0.
///
/// Aligned to 8 bytes, so a row's offset is its index times 8, which an
/// x86 address folds in (a 6-byte row costs an extra multiply on every
/// access); the table is 4 KiB instead of 3.
#[derive(Debug, Clone, Copy)]
#[repr(align(8))]
pub(super) struct Slot {
    /// Entries in use (0..=8). Kernel: `grp->used`.
    pub(super) used: u8,
    /// Bit i set = entry i in use. Kernel: `grp->map`.
    pub(super) map: u8,
    /// Row before this one on its list (a head's: the list's tail).
    pub(super) prev: u16,
    /// Row after this one on its list (a head's: the list's first).
    pub(super) next: u16,
}

impl Slot {
    pub(super) const EMPTY: Self = Self {
        used: 0,
        map: 0,
        prev: 0,
        next: 0,
    };
}

/// Number of lists, whose heads follow the largest group count.
pub(super) const HEADS: usize = 3;
/// Row of the first list head: past every group a context can have.
const HEAD_BASE: u16 = MAX_TID_GROUPS as u16;
/// Rows of the table: the groups and heads, rounded up to a power of two.
pub(super) const ROWS: usize = (MAX_TID_GROUPS + HEADS).next_power_of_two();

const _: () = assert!(ROWS <= u16::MAX as usize, "row indices fit the links");

/// The rows as an array, so masked indices need no bounds check.
type Rows = [Slot; ROWS];

/// Row `i` (masked into the table).
#[inline(always)]
const fn row(i: u16) -> usize {
    i as usize & (ROWS - 1)
}

impl TidGroups {
    /// Row of `list`'s head.
    #[inline(always)]
    pub(super) const fn head_row(list: GroupList) -> u16 {
        HEAD_BASE + list as u16
    }

    #[inline(always)]
    fn rows(&self) -> Option<&Rows> {
        self.slots.as_slice().try_into().ok()
    }

    #[inline(always)]
    fn rows_mut(&mut self) -> Option<&mut Rows> {
        self.slots.as_mut_slice().try_into().ok()
    }

    /// Group `g`'s row, if `g` is a group (not a head, not past the end).
    #[inline(always)]
    pub(super) fn slot(&self, g: u16) -> Option<&Slot> {
        if g < self.ngroups {
            self.rows()?.get(row(g))
        } else {
            None
        }
    }

    /// Group `g`'s counters, without the group check: every row that is
    /// not a group's has counters 0, the answer for "no group".
    #[inline(always)]
    pub(super) fn counters_of(&self, g: u16) -> (u8, u8) {
        self.rows()
            .and_then(|r| r.get(row(g)))
            .map_or((0, 0), |s| (s.used, s.map))
    }

    /// Group `g`'s row, mutably.
    #[inline(always)]
    pub(super) fn slot_mut(&mut self, g: u16) -> Option<&mut Slot> {
        if g < self.ngroups {
            self.rows_mut()?.get_mut(row(g))
        } else {
            None
        }
    }

    /// The row after `row` (a group or a head).
    #[inline(always)]
    pub(super) fn next_row(&self, r: u16) -> u16 {
        self.rows()
            .and_then(|rows| rows.get(row(r)))
            .map_or(u16::MAX, |s| s.next)
    }

    /// Makes every row empty and the three heads empty lists.
    pub(super) fn init_rows(&mut self) {
        let Some(rows) = self.rows_mut() else {
            return;
        };
        *rows = [Slot::EMPTY; ROWS];
        for l in [GroupList::Free, GroupList::Used, GroupList::Full] {
            let h = Self::head_row(l);
            if let Some(s) = rows.get_mut(row(h)) {
                s.prev = h;
                s.next = h;
            }
        }
        self.lens = [0; HEADS];
    }

    /// Appends group `g` (on no list) at the tail of `to`. Kernel:
    /// `tid_group_add_tail()`.
    #[inline(always)]
    pub(super) fn append(&mut self, g: u16, to: GroupList) {
        if let Some(rows) = self.rows_mut() {
            link_tail(rows, g, to);
        }
        if let Some(n) = self.lens.get_mut(to as usize) {
            *n = n.wrapping_add(1);
        }
    }

    /// Moves group `g` from `from` (the list it is on) to the tail of
    /// `to`. Kernel: `tid_group_move()`.
    #[inline(always)]
    pub(super) fn relink(&mut self, g: u16, from: GroupList, to: GroupList) {
        if let Some(rows) = self.rows_mut() {
            unlink(rows, g);
            link_tail(rows, g, to);
        }
        if let Some(n) = self.lens.get_mut(from as usize) {
            *n = n.wrapping_sub(1);
        }
        if let Some(n) = self.lens.get_mut(to as usize) {
            *n = n.wrapping_add(1);
        }
    }
}

impl TidGroups {
    /// [`GroupStore::release_entries`](super::GroupStore::release_entries)
    /// in one borrow of the table: one group check and one length check
    /// for the counters and the list move of the same row.
    #[inline(always)]
    pub(super) fn release_in_place(&mut self, g: u16, cnt: u8, taken: u8) {
        if g >= self.ngroups {
            return;
        }
        let Some(rows) = self.rows_mut() else {
            return;
        };
        let Some(s) = rows.get_mut(row(g)) else {
            return;
        };
        let used = s.used;
        let new_used = used.wrapping_sub(cnt);
        s.used = new_used;
        s.map &= !taken;
        let Some((from, to)) = move_on_release(used, new_used) else {
            return;
        };
        unlink(rows, g);
        link_tail(rows, g, to);
        if let Some(n) = self.lens.get_mut(from as usize) {
            *n = n.wrapping_sub(1);
        }
        if let Some(n) = self.lens.get_mut(to as usize) {
            *n = n.wrapping_add(1);
        }
    }
}

/// Takes row `g` off its list. Kernel: `list_del_init()`.
#[inline(always)]
fn unlink(rows: &mut Rows, g: u16) {
    let Some(&Slot { prev, next, .. }) = rows.get(row(g)) else {
        return;
    };
    if let Some(p) = rows.get_mut(row(prev)) {
        p.next = next;
    }
    if let Some(n) = rows.get_mut(row(next)) {
        n.prev = prev;
    }
}

/// Links row `g` in at the tail of `to`. Kernel: `list_add_tail()`.
#[inline(always)]
fn link_tail(rows: &mut Rows, g: u16, to: GroupList) {
    let h = TidGroups::head_row(to);
    let Some(head) = rows.get_mut(row(h)) else {
        return;
    };
    let tail = head.prev;
    head.prev = g;
    if let Some(t) = rows.get_mut(row(tail)) {
        t.next = g;
    }
    if let Some(s) = rows.get_mut(row(g)) {
        s.prev = tail;
        s.next = h;
    }
}
