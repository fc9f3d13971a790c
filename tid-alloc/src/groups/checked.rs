// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The checked interface of [`TidGroups`]: allocations that name their
//! context, the state they were made for and a ticket, so a stale,
//! foreign or twice-released one is refused before anything is written.
//! The work itself is the store-generic engine's ([`alloc_tids`],
//! [`program_rcvarray`], [`unprogram_rcvarray`]).
//!
//! # Locking
//!
//! The context's `exp_lock`, as for every [`TidGroups`] call.

use hfi1_hal::RcvArray;
use hfi1_hal::consts::{TID_GROUP_FULL_MAP, TID_GROUP_SIZE};

use super::program::{self, unprogram_rcvarray};
#[cfg(doc)]
use super::program_rcvarray;
use super::store::{ProgramSink, alloc_tids};
use super::{Batch, GROUP_SIZE, Programmed, TidAlloc, TidGroups};
use crate::AllocError;
use crate::pageset::PageSet;

/// Writes `value` into the owner slots of the entries in `taken`: one
/// vector store for a whole group, else one store per entry taken.
#[inline(always)]
pub(super) fn set_owners(owners: &mut [u32; TID_GROUP_SIZE], taken: u8, value: u32) {
    if taken == TID_GROUP_FULL_MAP {
        *owners = [value; TID_GROUP_SIZE];
        return;
    }
    let mut left = taken;
    while left != 0 {
        if let Some(o) = owners.get_mut(left.trailing_zeros() as usize) {
            *o = value;
        }
        left &= left.wrapping_sub(1);
    }
}

/// True when every entry in `taken` is owned by `ticket`: one vector
/// compare for a whole group, else one compare per entry taken.
#[inline(always)]
fn owns_all(owners: &[u32; TID_GROUP_SIZE], taken: u8, ticket: u32) -> bool {
    if taken == TID_GROUP_FULL_MAP {
        return owners.iter().fold(0, |acc, &o| acc | (o ^ ticket)) == 0;
    }
    let mut left = taken;
    while left != 0 {
        if owners.get(left.trailing_zeros() as usize) != Some(&ticket) {
            return false;
        }
        left &= left.wrapping_sub(1);
    }
    true
}

/// True when a node's `taken` map has exactly its `cnt` entries (always so
/// for a node [`alloc_tids`] made from consistent counters).
#[inline(always)]
fn takes_cnt(taken: u8, cnt: u8) -> bool {
    if taken == TID_GROUP_FULL_MAP {
        cnt == GROUP_SIZE
    } else {
        taken.count_ones() == u32::from(cnt)
    }
}

impl TidGroups {
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
        // Every reset takes a new instance number and none is 0, so this
        // also refuses the empty default and allocations made before a
        // reset (whatever base they had).
        if alloc.instance != self.instance {
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
        program::program_checked(&mut Batch(self), rcv, &alloc.nodes, sets, shape, out);
        for node in &alloc.nodes {
            if let Some(owners) = self.owner.get_mut(usize::from(node.group)) {
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
            let Some(owners) = self.owner.get(usize::from(node.group)) else {
                return Err(AllocError::Stale);
            };
            let taken = node.taken();
            if !takes_cnt(taken, node.cnt) || !owns_all(owners, taken, alloc.ticket) {
                return Err(AllocError::Stale);
            }
        }
        // The batch store clears each released entry's owner as it goes.
        unprogram_rcvarray(&mut Batch(self), rcv, &alloc.nodes);
        self.version = self.version.wrapping_add(1);
        Ok(())
    }
}
