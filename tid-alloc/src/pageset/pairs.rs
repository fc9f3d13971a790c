// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The 8 KiB variant of the page-set walk: the driver's walk over the
//! pages two at a time, so that an 8 KiB packet never straddles two
//! buffers.

use super::fast::{Seen, one_run_8k, push_singles, singles_8k};
use super::{AllocError, MAX_SEGMENT_PAGES, PAGE_BYTES, PageSet, PageSets};
use super::{emit_walk_run, follows, pad_even, push, single, try_fast, walk_set};

/// Page sets for an 8 KiB (or larger) path MTU.
///
/// Kernel: `tid_rdma_find_phys_blocks_8k()`.
///
/// The pages are taken two at a time, `(0, 1)`, `(2, 3)`, ... A pair whose
/// second page is missing or not contiguous with its first flushes what has
/// accumulated ([`flush_pages`](super::flush_pages)) and is emitted as two 1-page sets (the
/// second a filler when the page count is odd). A contiguous pair that does
/// not continue the previous contiguous pair flushes first; then it joins
/// the accumulation. The remainder is flushed at the end. The result
/// always has an even number of sets.
///
/// Quirks kept on purpose, so that the output is the driver's bit for bit
/// (vectors' README 1b and 1c): contiguity is only seen inside the pairs and
/// between consecutive pairs, so a run starting at an odd page index is
/// broken up; every flush of an odd number of chunks appends a filler in
/// the middle of the list (a 3-page run gives `[2, 0, 1, 0]`, where the
/// 4 KiB variant gives `[2, 1]`); an odd page count ends with its last page
/// and a filler. Each filler costs an RcvArray entry.
///
/// # Errors
///
/// As [`find_phys_blocks_4k`](super::find_phys_blocks_4k).
pub fn find_phys_blocks_8k(pages: &[u64]) -> Result<PageSets, AllocError> {
    // Built in the return value itself, so the 1.5 KiB list is not copied
    // out of a local on the way back.
    let mut out = Ok(PageSets::new());
    if let Ok(sets) = &mut out {
        if let Err(e) = walk_8k(pages, sets) {
            out = Err(e);
        }
    }
    out
}

/// [`find_phys_blocks_8k`] writing into a caller's list (cleared first).
///
/// # Errors
///
/// As [`find_phys_blocks_4k`](super::find_phys_blocks_4k); on error `sets` is left empty.
pub fn find_phys_blocks_8k_into(pages: &[u64], sets: &mut PageSets) -> Result<(), AllocError> {
    sets.clear();
    let r = walk_8k(pages, sets);
    if r.is_err() {
        sets.clear();
    }
    r
}

#[inline(always)]
pub(super) fn walk_8k(pages: &[u64], sets: &mut PageSets) -> Result<(), AllocError> {
    let n = pages.len();
    if n > MAX_SEGMENT_PAGES {
        return Err(AllocError::TooManyPages(n));
    }
    if let Some(r) = try_fast(sets, pages, one_run_8k, singles_8k) {
        return r;
    }
    walk_pairs_8k(sets, pages)
}

/// The general case of [`walk_8k`]: the driver's pair walk.
///
/// Its output comes in three kinds of step, each read off the pages at an
/// even index: a contiguous pair starts a chain of pairs, each contiguous
/// and continuing the one before (the driver's accumulation, flushed as
/// one run with a filler if its chunks are odd); a pair that is not
/// contiguous gives two one-page sets; an odd last page gives its set and
/// a filler. Only the first page of a chain is noted for validation (the
/// others are it + k pages; a chain that wraps past the top starts where
/// the page check's top-bit alarm sends the walk to the exact check, as
/// in the 4 KiB walk).
#[inline(always)]
fn walk_pairs_8k(sets: &mut PageSets, pages: &[u64]) -> Result<(), AllocError> {
    let n = pages.len();
    // Checked by the caller; repeated so the compiler knows the bound in
    // this loop (every chain at most 64 pages).
    if n > MAX_SEGMENT_PAGES {
        return Err(AllocError::TooManyPages(n));
    }
    let mut seen = Seen::new();
    // Page index of the step (always even).
    let mut k = 0usize;
    while let Some(&[v0, v1]) = pages.get(k..).and_then(<[u64]>::first_chunk) {
        seen.page(v0);
        if follows(v0, v1) {
            let end = chain_end(pages, k.wrapping_add(2), v1);
            emit_chain(sets, k, end.wrapping_sub(k), v0)?;
            k = end;
        } else {
            seen.page(v1);
            push_singles(sets, k, [v0, v1])?;
            k = k.wrapping_add(2);
        }
    }
    if let Some(&v0) = pages.get(k) {
        // An odd page count ends with its last page and a filler.
        seen.page(v0);
        push(sets, single(k, v0))?;
        push(sets, PageSet::FILLER)?;
    }
    seen.verdict(pages)
}

/// Emits a chain of `len` (even, 2..=64) pages from page `idx` at `first`
/// and the filler its flush adds when its chunks are odd.
///
/// The list is even before every step of the pair walk (it starts empty,
/// and every step adds an even number of sets), so a chain of a power of
/// two pages (one chunk) always takes a filler: both are pushed with one
/// capacity check and no parity test.
#[inline(always)]
fn emit_chain(sets: &mut PageSets, idx: usize, len: usize, first: u64) -> Result<(), AllocError> {
    debug_assert!(
        sets.len() % 2 == 0,
        "the pair walk's list is even between steps"
    );
    if len & len.wrapping_sub(1) == 0 {
        if sets.len() > sets.capacity().wrapping_sub(2) {
            return Err(AllocError::TooManyPageSets);
        }
        push(sets, walk_set(idx, len, first))?;
        return push(sets, PageSet::FILLER);
    }
    emit_walk_run(sets, idx, len, first)?;
    pad_even(sets)
}

/// Steps over the pairs from page `i` on that continue a chain whose last
/// page so far is `last`: each pair must be contiguous and follow the
/// chain. Returns the index after the chain. Two pairs a step while two
/// are left, so the bound is tested once for four pages.
#[inline(always)]
fn chain_end(pages: &[u64], mut i: usize, last: u64) -> usize {
    let mut expect = last.wrapping_add(PAGE_BYTES);
    while let Some(&[a, b, c, d]) = pages.get(i..i.wrapping_add(4)) {
        if a != expect || b != expect.wrapping_add(PAGE_BYTES) {
            return i;
        }
        if c != expect.wrapping_add(2 * PAGE_BYTES) || d != expect.wrapping_add(3 * PAGE_BYTES) {
            return i.wrapping_add(2);
        }
        i = i.wrapping_add(4);
        expect = expect.wrapping_add(4 * PAGE_BYTES);
    }
    if let Some(&[a, b]) = pages.get(i..i.wrapping_add(2)) {
        if a == expect && b == expect.wrapping_add(PAGE_BYTES) {
            return i.wrapping_add(2);
        }
    }
    i
}
