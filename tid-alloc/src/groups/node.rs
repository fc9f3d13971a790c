// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What an allocation of RcvArray entries is made of: the groups chosen
//! ([`TidNode`], the driver's `struct kern_tid_node`), the software
//! platform's ticketed allocation ([`TidAlloc`]) and what programming a
//! segment produced ([`Programmed`]).
//!
//! # Locking
//!
//! Plain values, kept in a flow record under its QP's `s_lock`; the
//! groups they name are the context's, under its `exp_lock`.

use arrayvec::ArrayVec;
use hfi1_hal::TidEntry;
use hfi1_hal::consts::{MAX_PAGESETS, TID_GROUP_FULL_MAP};

#[cfg(doc)]
use super::TidGroups;
use super::{GROUP_SIZE, group_base};

/// One group chosen by [`TidGroups::allocate`]: which group, its map when
/// it was chosen, and how many entries this allocation takes in it (the
/// lowest `cnt` entries whose bit is clear in `map`).
/// Kernel: `struct kern_tid_node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TidNode {
    pub(super) group: u16,
    pub(super) map: u8,
    pub(super) cnt: u8,
    /// The entries taken, precomputed from `map` and `cnt`.
    pub(super) taken: u8,
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

    /// Builds a node for group `group` (its index in the context), whose
    /// map was `map` when it was chosen, taking `cnt` entries, and works
    /// out which entries it takes (the `cnt` lowest bits clear in `map`).
    /// Kernel: `kern_add_tid_node()` (which stores the group pointer, map
    /// and count; a store rebuilds the node from those).
    #[inline]
    pub const fn new(group: u16, map: u8, cnt: u8) -> Self {
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
/// unprogram reject it with [`AllocError::Foreign`](crate::AllocError::Foreign).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TidAlloc {
    pub(super) instance: u32,
    pub(super) expected_base: u32,
    pub(super) version: u64,
    pub(super) ticket: u32,
    pub(super) nsets: u8,
    pub(super) nodes: ArrayVec<TidNode, MAX_PAGESETS>,
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
