// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The software platform's group table: one row per group (counters, list
//! links, the owner of each entry) and one row per list head, so the
//! three lists are circular and doubly linked through row indices, as the
//! kernel's `list_head`s are through pointers: a move is a handful of
//! stores with no "first or last?" branch, and nothing is scanned.
//!
//! # Locking
//!
//! Part of [`TidGroups`], the context's `exp_lock`-guarded state.

use hfi1_hal::consts::TID_GROUP_SIZE;

use super::{GroupList, TidGroups};

/// One row of the table. For a list head only the links are used.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    /// Entries in use (0..=8). Kernel: `grp->used`.
    pub(super) used: u8,
    /// Bit i set = entry i in use. Kernel: `grp->map`.
    pub(super) map: u8,
    /// Row before this one on its list (a head's: the list's tail).
    pub(super) prev: u16,
    /// Row after this one on its list (a head's: the list's first).
    pub(super) next: u16,
    /// Ticket of the allocation that holds each entry; 0 = free.
    pub(super) owner: [u32; TID_GROUP_SIZE],
}

impl Slot {
    pub(super) const EMPTY: Self = Self {
        used: 0,
        map: 0,
        prev: 0,
        next: 0,
        owner: [0; TID_GROUP_SIZE],
    };
}

/// Rows of the list heads after the groups.
pub(super) const HEADS: usize = 3;

impl TidGroups {
    /// Row of `list`'s head.
    #[inline(always)]
    pub(super) const fn head_row(&self, list: GroupList) -> u16 {
        self.ngroups.wrapping_add(list as u16)
    }

    /// Group `g`'s row, if `g` is a group (not a head, not past the end).
    #[inline(always)]
    pub(super) fn slot(&self, g: u16) -> Option<&Slot> {
        if g < self.ngroups {
            self.slots.get(usize::from(g))
        } else {
            None
        }
    }

    /// Group `g`'s row, mutably.
    #[inline(always)]
    pub(super) fn slot_mut(&mut self, g: u16) -> Option<&mut Slot> {
        if g < self.ngroups {
            self.slots.get_mut(usize::from(g))
        } else {
            None
        }
    }

    /// The row after `row` (a group or a head).
    #[inline(always)]
    pub(super) fn next_row(&self, row: u16) -> u16 {
        self.slots
            .get(usize::from(row))
            .map_or(u16::MAX, |s| s.next)
    }

    /// Makes the three heads empty lists.
    pub(super) fn init_heads(&mut self) {
        for l in [GroupList::Free, GroupList::Used, GroupList::Full] {
            let h = self.head_row(l);
            if let Some(s) = self.slots.get_mut(usize::from(h)) {
                *s = Slot {
                    prev: h,
                    next: h,
                    ..Slot::EMPTY
                };
            }
        }
        self.lens = [0; HEADS];
    }

    /// Appends group `g` (on no list, or just unlinked) at the tail of
    /// `to`. Kernel: `tid_group_add_tail()`.
    #[inline(always)]
    pub(super) fn append(&mut self, g: u16, to: GroupList) {
        let h = self.head_row(to);
        let Some(head) = self.slots.get_mut(usize::from(h)) else {
            return;
        };
        let tail = head.prev;
        head.prev = g;
        if let Some(t) = self.slots.get_mut(usize::from(tail)) {
            t.next = g;
        }
        if let Some(s) = self.slots.get_mut(usize::from(g)) {
            s.prev = tail;
            s.next = h;
        }
        if let Some(n) = self.lens.get_mut(to as usize) {
            *n = n.wrapping_add(1);
        }
    }

    /// Takes group `g` off `from`, the list it is on. Kernel:
    /// `tid_group_remove()`.
    #[inline(always)]
    pub(super) fn unlink(&mut self, g: u16, from: GroupList) {
        let Some(&Slot { prev, next, .. }) = self.slots.get(usize::from(g)) else {
            return;
        };
        if let Some(p) = self.slots.get_mut(usize::from(prev)) {
            p.next = next;
        }
        if let Some(n) = self.slots.get_mut(usize::from(next)) {
            n.prev = prev;
        }
        if let Some(n) = self.lens.get_mut(from as usize) {
            *n = n.wrapping_sub(1);
        }
    }
}
