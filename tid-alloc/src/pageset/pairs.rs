// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The 8 KiB variant of the page-set walk: the driver's walk over the
//! pages two at a time, so that an 8 KiB packet never straddles two
//! buffers.

use super::fast::{one_run_8k, singles_8k};
use super::{AllocError, Bad, MAX_SEGMENT_PAGES, PageSet, PageSets};
use super::{emit_run, follows, pad_even, push, single, try_fast};

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
#[inline(never)]
fn walk_pairs_8k(sets: &mut PageSets, pages: &[u64]) -> Result<(), AllocError> {
    let n = pages.len();
    // Checked by the caller; repeated so the compiler knows the bound in
    // this loop (every index below 64).
    if n > MAX_SEGMENT_PAGES {
        return Err(AllocError::TooManyPages(n));
    }
    let mut bad = Bad::new();
    // Index of the first page not yet emitted, pages accumulated since
    // then, and the second page of the previous pair if that pair was
    // contiguous (the driver's `vm1`; `prev_pair` false = NULL).
    let mut idx = 0usize;
    let mut pending = 0usize;
    let mut prev_pair = false;
    let mut prev_second = 0u64;
    let mut pairs = pages.chunks_exact(2);
    for (p, pair) in pairs.by_ref().enumerate() {
        let &[v0, v1] = pair else {
            break;
        };
        if follows(v0, v1) {
            if prev_pair && !follows(prev_second, v0) {
                idx = flush_run(sets, pages, idx, pending, &mut bad)?;
                pending = 0;
            }
            pending = pending.wrapping_add(2);
            prev_pair = true;
            prev_second = v1;
            continue;
        }
        // Everything before page k is emitted after this flush.
        let k = p.wrapping_mul(2);
        flush_run(sets, pages, idx, pending, &mut bad)?;
        bad.page(v0);
        bad.page(v1);
        push(sets, single(k, v0))?;
        push(sets, single(k.wrapping_add(1), v1))?;
        idx = k.wrapping_add(2);
        prev_pair = false;
        pending = 0;
    }
    if let &[v0] = pairs.remainder() {
        // An odd page count ends with its last page and a filler.
        let k = n.wrapping_sub(1);
        flush_run(sets, pages, idx, pending, &mut bad)?;
        bad.page(v0);
        push(sets, single(k, v0))?;
        push(sets, PageSet::FILLER)?;
        idx = n;
    }
    flush_run(sets, pages, idx, n.wrapping_sub(idx), &mut bad)?;
    bad.verdict(pages)
}

/// [`flush_pages`](super::flush_pages) for the 8 KiB walk, whose accumulated pages always form
/// one contiguous run: notes the run for validation first.
#[inline(always)]
fn flush_run(
    sets: &mut PageSets,
    pages: &[u64],
    idx: usize,
    count: usize,
    bad: &mut Bad,
) -> Result<usize, AllocError> {
    if count == 0 {
        // Nothing to emit, and the walk keeps the set count even between
        // flushes, so no filler either.
        return Ok(idx);
    }
    let first = *pages.get(idx).ok_or(AllocError::PageRange)?;
    bad.run(first, count);
    // The same sets as `flush_pages`, with the addresses worked out from
    // the run's first page.
    emit_run(sets, idx, count, first)?;
    pad_even(sets)?;
    Ok(idx.wrapping_add(count))
}
