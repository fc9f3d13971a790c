// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two shapes of segment the walks see most, each with a path that
//! does only what that shape needs: one contiguous run (huge or freshly
//! allocated pages), whose output follows from its first page, and no
//! two neighbours contiguous (scattered pages), whose output is one set
//! per page. Each gives exactly the general walk's output; a segment of
//! neither shape costs the general walk one or two comparisons more.

use super::{AllocError, Bad, PAGE_BYTES, PAGE_SHIFT, PageSet, PageSets};
use super::{emit_run, follows, pad_even, push, single};

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

/// The output of [`super::walk_4k`] for a segment in which no page follows its
/// predecessor: every page a one-page set, then a filler if the count is
/// odd. `None` as soon as a page does follow (the caller then empties
/// `sets` and walks the runs): the loop compares, checks and stores, and
/// nothing else.
#[inline(never)]
pub(super) fn singles_4k(
    sets: &mut PageSets,
    pages: &[u64],
    first: u64,
    rest: &[u64],
) -> Option<Result<(), AllocError>> {
    let mut bad = Bad::new();
    let mut prev = first;
    for (k, &addr) in rest.iter().enumerate() {
        if follows(prev, addr) {
            return None;
        }
        bad.page(prev);
        if let Err(e) = push(sets, single(k, prev)) {
            return Some(Err(e));
        }
        prev = addr;
    }
    bad.page(prev);
    Some(
        push(sets, single(rest.len(), prev))
            .and_then(|()| bad.verdict(pages))
            .and_then(|()| pad_even(sets)),
    )
}

/// [`singles_4k`] for [`super::walk_8k`]: no pair contiguous means every page is
/// a one-page set (the odd last page with a filler). `None` at the first
/// contiguous pair.
#[inline(never)]
pub(super) fn singles_8k(sets: &mut PageSets, pages: &[u64]) -> Option<Result<(), AllocError>> {
    let mut bad = Bad::new();
    let mut pairs = pages.chunks_exact(2);
    for (p, pair) in pairs.by_ref().enumerate() {
        let &[v0, v1] = pair else {
            break;
        };
        if follows(v0, v1) {
            return None;
        }
        bad.page(v0);
        bad.page(v1);
        let k = p.wrapping_mul(2);
        if let Err(e) = push(sets, single(k, v0)).and_then(|()| push(sets, single(k | 1, v1))) {
            return Some(Err(e));
        }
    }
    if let &[v0] = pairs.remainder() {
        bad.page(v0);
        if let Err(e) = push(sets, single(pages.len().wrapping_sub(1), v0))
            .and_then(|()| push(sets, PageSet::FILLER))
        {
            return Some(Err(e));
        }
    }
    Some(bad.verdict(pages))
}

/// [`super::walk_4k`] of a segment that is one contiguous run from `first`: only
/// its first page needs checking (the others are it + k pages), then its
/// chunks and a filler. Out of line so the general walk's loop keeps its
/// registers.
#[inline(never)]
pub(super) fn one_run_4k(sets: &mut PageSets, first: u64, pages: &[u64]) -> Result<(), AllocError> {
    let mut bad = Bad::new();
    bad.run(first, pages.len());
    bad.verdict(pages)?;
    emit_run(sets, 0, pages.len(), first)?;
    pad_even(sets)
}

/// [`super::walk_8k`] of a segment that is one contiguous run of `n` (>= 1)
/// pages from `first`: every pair is contiguous and continues the one
/// before, so the walk comes down to one flush of the even part, then the
/// odd page's set and a filler. Out of line, as [`one_run_4k`].
#[inline(never)]
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
