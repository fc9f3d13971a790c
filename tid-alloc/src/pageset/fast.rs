// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two shapes of segment the walks see most, each with a path that
//! does only what that shape needs: one contiguous run (huge or freshly
//! allocated pages), whose output follows from its first page, and no
//! two neighbours contiguous (scattered pages), whose output is one set
//! per page. Each gives exactly the general walk's output; a segment of
//! neither shape costs the general walk one or two comparisons more.
//!
//! Also here: [`Seen`], the branch-free page check every walk uses, and
//! the grouped pushes that let the compiler drop per-set capacity checks.

use super::{AllocError, Bad, PAGE_BYTES, PAGE_SHIFT, PageSet, PageSets};
use super::{PAGE_OFFSET_MASK, check_pages, emit_run, follows, pad_even, push, single};

/// True when `pages` (whose first address is `first`) are one contiguous
/// run. The last page is compared first, so a list that is not one run
/// almost always costs one comparison; the full check is an OR of
/// differences that the compiler vectorises (two pages per SSE2
/// instruction on the host; plain 64-bit operations on the kernel target).
#[inline(always)]
pub(super) fn is_one_run(pages: &[u64], first: u64) -> bool {
    let span = (pages.len().wrapping_sub(1) as u64) << PAGE_SHIFT;
    if pages.last().copied() != Some(first.wrapping_add(span)) {
        return false;
    }
    let mut diff = 0u64;
    let mut expect = first;
    for &addr in pages {
        diff |= addr ^ expect;
        expect = expect.wrapping_add(PAGE_BYTES);
    }
    diff == 0
}

/// Whether an invalid page (address 0, or low bits set) may be among the
/// pages noted, at two ALU operations per page and no branch; the exact
/// error is looked up only when one may be.
///
/// Each page `a` contributes `a - 4096` (wrapping) to an OR. For a valid
/// page below 2^63 + 4096 that has its low 12 bits and its top bit clear;
/// an unaligned page sets some of the low bits, a page 0 (or any below
/// 4096) wraps and sets the top bit. A valid page at or above
/// 2^63 + 4096 sets the top bit too: that false alarm only sends
/// [`Seen::verdict`] to the exact check, which then finds nothing.
#[derive(Clone, Copy)]
pub(super) struct Seen(u64);

impl Seen {
    /// Bits of the OR that mean "look again": the page offset and the top.
    const ALARM: u64 = PAGE_OFFSET_MASK | 1 << 63;

    pub(super) const fn new() -> Self {
        Self(0)
    }

    /// Notes one page.
    #[inline(always)]
    pub(super) fn page(&mut self, addr: u64) {
        self.0 |= addr.wrapping_sub(PAGE_BYTES);
    }

    /// `Ok` if every page noted is valid, else the exact error (`Ok` after
    /// all for a false alarm).
    #[inline(always)]
    pub(super) fn verdict(self, pages: &[u64]) -> Result<(), AllocError> {
        if self.0 & Self::ALARM == 0 {
            Ok(())
        } else {
            check_pages(pages)
        }
    }
}

/// The output of [`super::walk_4k`] for a segment in which no page follows its
/// predecessor: every page a one-page set, then a filler if the count is
/// odd. `None` as soon as a page does follow (the caller then empties
/// `sets` and walks the runs). Four pages per step: four comparisons,
/// four checks, one capacity check and one length update for four sets.
#[inline(always)]
pub(super) fn singles_4k(sets: &mut PageSets, pages: &[u64]) -> Option<Result<(), AllocError>> {
    let mut seen = Seen::new();
    // The page before the group; the first page for the first group (a
    // page never follows itself).
    let mut last = pages.first().copied().unwrap_or(0);
    let mut quads = pages.chunks_exact(4);
    for (q, quad) in quads.by_ref().enumerate() {
        let &[a, b, c, d] = quad else {
            break;
        };
        if follows(last, a) || follows(a, b) || follows(b, c) || follows(c, d) {
            return None;
        }
        for v in [a, b, c, d] {
            seen.page(v);
        }
        if let Err(e) = push_singles(sets, q.wrapping_mul(4), [a, b, c, d]) {
            return Some(Err(e));
        }
        last = d;
    }
    let base = pages.len() & !3;
    for (j, &v) in quads.remainder().iter().enumerate() {
        if follows(last, v) {
            return None;
        }
        seen.page(v);
        if let Err(e) = push(sets, single(base.wrapping_add(j), v)) {
            return Some(Err(e));
        }
        last = v;
    }
    Some(seen.verdict(pages).and_then(|()| pad_even(sets)))
}

/// [`singles_4k`] for [`super::pairs::walk_8k`]: no pair contiguous means every page is
/// a one-page set (the odd last page with a filler). `None` at the first
/// contiguous pair. Two pairs per step, as in [`singles_4k`].
#[inline(always)]
pub(super) fn singles_8k(sets: &mut PageSets, pages: &[u64]) -> Option<Result<(), AllocError>> {
    let mut seen = Seen::new();
    let mut quads = pages.chunks_exact(4);
    for (q, quad) in quads.by_ref().enumerate() {
        let &[a, b, c, d] = quad else {
            break;
        };
        if follows(a, b) || follows(c, d) {
            return None;
        }
        for v in [a, b, c, d] {
            seen.page(v);
        }
        if let Err(e) = push_singles(sets, q.wrapping_mul(4), [a, b, c, d]) {
            return Some(Err(e));
        }
    }
    let base = pages.len() & !3;
    let r = match *quads.remainder() {
        [] => Ok(()),
        [a] => push_singles(sets, base, [a]).and_then(|()| push(sets, PageSet::FILLER)),
        [a, b] if !follows(a, b) => push_singles(sets, base, [a, b]),
        [a, b, c] if !follows(a, b) => {
            push_singles(sets, base, [a, b, c]).and_then(|()| push(sets, PageSet::FILLER))
        }
        _ => return None,
    };
    for &v in quads.remainder() {
        seen.page(v);
    }
    Some(r.and_then(|()| seen.verdict(pages)))
}

/// Appends the one-page sets of pages `k..k + N` (at `addrs`) with one
/// capacity check for all of them, written as a bound on the length (the
/// form the pushes test), so the compiler drops the pushes' own checks and
/// writes the length back once.
///
/// # Errors
///
/// [`AllocError::TooManyPageSets`] if the list has no room for `N` more.
#[inline(always)]
pub(super) fn push_singles<const N: usize>(
    sets: &mut PageSets,
    k: usize,
    addrs: [u64; N],
) -> Result<(), AllocError> {
    if sets.len() > sets.capacity().wrapping_sub(N) {
        return Err(AllocError::TooManyPageSets);
    }
    for (j, addr) in addrs.into_iter().enumerate() {
        push(sets, single(k.wrapping_add(j), addr))?;
    }
    Ok(())
}

/// [`super::walk_4k`] of a segment that is one contiguous run from `first`: only
/// its first page needs checking (the others are it + k pages), then its
/// chunks and a filler. Inlined, as every fast path here: its result then
/// goes back to the entry point in registers, not through the stack.
#[inline(always)]
pub(super) fn one_run_4k(sets: &mut PageSets, first: u64, pages: &[u64]) -> Result<(), AllocError> {
    let mut bad = Bad::new();
    bad.run(first, pages.len());
    bad.verdict(pages)?;
    emit_run(sets, 0, pages.len(), first)?;
    pad_even(sets)
}

/// [`super::pairs::walk_8k`] of a segment that is one contiguous run of `n` (>= 1)
/// pages from `first`: every pair is contiguous and continues the one
/// before, so the walk comes down to one flush of the even part, then the
/// odd page's set and a filler. Inlined, as [`one_run_4k`].
#[inline(always)]
pub(super) fn one_run_8k(sets: &mut PageSets, first: u64, pages: &[u64]) -> Result<(), AllocError> {
    let n = pages.len();
    let mut bad = Bad::new();
    bad.run(first, n);
    bad.verdict(pages)?;
    let even = n & !1;
    if even > 0 {
        emit_run(sets, 0, even, first)?;
        pad_even(sets)?;
    }
    if n % 2 == 1 {
        let last = first.wrapping_add((even as u64) << PAGE_SHIFT);
        push(sets, single(even, last))?;
        push(sets, PageSet::FILLER)?;
    }
    Ok(())
}
