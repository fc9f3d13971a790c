// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Pagesets: cutting a segment's pages into runs the RcvArray can map.
//!
//! One RcvArray entry maps a physically contiguous buffer whose size is a
//! power of two of pages, up to 2 MiB. The functions here walk a segment's
//! page addresses (at most 64 pages) and produce the list of such buffers,
//! always an even number of them, because the TID entries that name them
//! come in pairs. A set of count 0 (a *filler*) only pads the list to an even
//! length; it is programmed INVALID.
//!
//! Two variants exist, chosen by the path MTU ([`find_phys_blocks`]): the
//! 4 KiB one follows every contiguous run; the 8 KiB one looks at the pages
//! two by two so that an 8 KiB packet never straddles two buffers.

use arrayvec::ArrayVec;
use hfi1_hal::consts::{
    MAX_EXPECTED_PAGES, MAX_PAGESETS, MAX_SEGMENT_PAGES, PAGE_SHIFT, PAGE_SIZE,
};

use crate::AllocError;

mod fast;
mod pairs;
use fast::{is_one_run, one_run_4k, singles_4k};
pub use pairs::{find_phys_blocks_8k, find_phys_blocks_8k_into};

/// Bytes of one page, as a `u64` for address arithmetic.
const PAGE_BYTES: u64 = PAGE_SIZE as u64;
/// Low bits that must be clear in a page address.
const PAGE_OFFSET_MASK: u64 = PAGE_BYTES - 1;
/// The path MTU that selects the 4 KiB variant.
const MTU_4K: u32 = 4096;

/// One run of physically contiguous pages, programmed into one RcvArray
/// entry. Kernel: `struct tid_rdma_pageset`.
///
/// `count == 0` marks a filler: it pads the set list to an even length and
/// is programmed INVALID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageSet {
    /// Index, in the segment's page list, of the set's first page.
    ///
    /// Unspecified for a filler: this crate writes 0 there. (The driver
    /// never writes it at all, so it keeps whatever an earlier segment left
    /// in the reused array: quirk 1a of the vectors' README.)
    pub idx: u8,
    /// Pages in the set: a power of two, at most 512; 0 for a filler.
    pub count: u16,
    /// Page address of the set's first page (0 for a filler).
    pub addr: u64,
    /// Bus address of the buffer, filled in by the caller's DMA mapping
    /// before programming; `program` hands it to `put_tid`. 0 for a filler.
    pub dma: u64,
}

impl PageSet {
    /// A filler set (count 0).
    pub const FILLER: Self = Self {
        idx: 0,
        count: 0,
        addr: 0,
        dma: 0,
    };

    /// True for a filler (count 0).
    #[inline]
    pub const fn is_filler(&self) -> bool {
        self.count == 0
    }

    /// The RcvArray order of the buffer: `log2(count) + 1` (1 = 4 KiB,
    /// 2 = 8 KiB, ...); 0 for a filler. A count that is not a power of two
    /// (which no function of this crate produces) is rounded down.
    /// Kernel: `trdma_pset_order()`.
    #[inline]
    pub const fn order(&self) -> u8 {
        if self.count == 0 {
            0
        } else {
            // ilog2 of a non-zero u16 is at most 15, so this fits.
            (self.count.ilog2() + 1) as u8
        }
    }

    /// True when `count` is something the RcvArray can map: 0 (filler) or a
    /// power of two of at most 512 pages.
    #[inline]
    pub const fn is_programmable(&self) -> bool {
        unmappable(self.count) == 0
    }
}

/// Zero exactly when a set of `count` pages can be programmed (0, or a
/// power of two of at most 512): a power of two (or 0) has no bit left
/// when its lowest one is cleared, and one of at most 512 pages none from
/// bit 10 up. Branch-free, so a list of sets is checked by OR-ing these.
#[inline(always)]
pub(crate) const fn unmappable(count: u16) -> u16 {
    const _: () = assert!(MAX_EXPECTED_PAGES == 1 << 9, "the bits from 10 up");
    (count & count.wrapping_sub(1)) | oversized(count)
}

/// Non-zero exactly when `count` has a bit from 10 up (more than 512
/// pages for a power of two); of an OR of counts, when one of them has.
#[inline(always)]
pub(crate) const fn oversized(count: u16) -> u16 {
    count >> 10
}

/// The page sets of one segment (at most 64).
pub type PageSets = ArrayVec<PageSet, MAX_PAGESETS>;

/// Checks one page address against the rules every variant relies on.
#[inline(always)]
fn check_page(index: usize, addr: u64) -> Result<(), AllocError> {
    if addr == 0 {
        Err(AllocError::NullPage { index })
    } else if addr & PAGE_OFFSET_MASK != 0 {
        Err(AllocError::UnalignedPage { index, addr })
    } else {
        Ok(())
    }
}

/// Checks a whole page list: at most 64 pages, none at address 0, all page
/// aligned.
fn check_pages(pages: &[u64]) -> Result<(), AllocError> {
    if pages.len() > MAX_SEGMENT_PAGES {
        return Err(AllocError::TooManyPages(pages.len()));
    }
    for (index, &addr) in pages.iter().enumerate() {
        check_page(index, addr)?;
    }
    Ok(())
}

/// Remembers whether an invalid page (address 0, or low bits set) may
/// have been seen, so the walks validate without branching and look up the
/// exact error only when something may be wrong.
///
/// The walks only look at the first page of each contiguous run: every
/// other page of a run is its predecessor + 4096, so it is aligned when the
/// first one is, and it is 0 only if the run wraps past the top of the
/// address space, which [`Bad::run`] also catches.
#[derive(Clone, Copy)]
struct Bad {
    /// The run-first pages, as a [`fast::Seen`].
    seen: fast::Seen,
    /// A run that wraps past the top of the address space.
    wraps: bool,
}

impl Bad {
    const fn new() -> Self {
        Self {
            seen: fast::Seen::new(),
            wraps: false,
        }
    }

    /// Notes one page.
    #[inline(always)]
    fn page(&mut self, addr: u64) {
        self.seen.page(addr);
    }

    /// Notes a run of `len` (>= 1) contiguous pages starting at `first`.
    #[inline(always)]
    fn run(&mut self, first: u64, len: usize) {
        self.page(first);
        let span = ((len as u64).wrapping_sub(1)) << PAGE_SHIFT;
        self.wraps |= first.checked_add(span).is_none();
    }

    /// `Ok` if no bad page was seen, else the exact error (`Ok` after all
    /// for a false alarm, see [`fast::Seen`]).
    #[inline(always)]
    fn verdict(self, pages: &[u64]) -> Result<(), AllocError> {
        if self.wraps {
            // A run that wraps holds a page 0, which this finds.
            check_pages(pages)
        } else {
            self.seen.verdict(pages)
        }
    }
}

/// True when `next` is the page right after `prev`.
///
/// Wrapping is fine here: the only way `prev + 4096` wraps is to 0, and a
/// page at address 0 is rejected anyway, so the top page of the address
/// space never continues a run (the C would compare with its NULL
/// sentinel there).
#[inline(always)]
fn follows(prev: u64, next: u64) -> bool {
    prev.wrapping_add(PAGE_BYTES) == next
}

/// Pushes one set, mapping a full list to an error.
#[inline(always)]
fn push(sets: &mut PageSets, set: PageSet) -> Result<(), AllocError> {
    sets.try_push(set).map_err(|_| AllocError::TooManyPageSets)
}

/// The largest chunk a run of `pages` pages may start with: 512 pages if
/// the run is longer, else the largest power of two not above it; 0 for an
/// empty run (no panic path: `checked_ilog2` instead of `ilog2`).
#[inline(always)]
fn chunk_of(pages: usize) -> usize {
    // 1 << ilog2 rounds down to a power of two (and leaves a power of two
    // alone); capping the log at 9 caps the chunk at 512 pages, with one
    // compare on the log instead of one on the count and a constant.
    const MAX_LOG: u32 = MAX_EXPECTED_PAGES.ilog2();
    pages
        .checked_ilog2()
        .map_or(0, |log| 1usize << log.min(MAX_LOG))
}

/// Emits `count` pages starting at page `idx` as power-of-two chunks,
/// without a filler. Returns the index after the last page emitted.
fn split_run(
    sets: &mut PageSets,
    pages: &[u64],
    mut idx: usize,
    mut count: usize,
) -> Result<usize, AllocError> {
    while count > 0 {
        let chunk = chunk_of(count);
        let addr = *pages.get(idx).ok_or(AllocError::PageRange)?;
        let set = PageSet {
            // idx < 64 and chunk <= 512: both checked by the callers (the
            // page list holds at most 64 pages, `get` above proves idx).
            idx: idx as u8,
            count: chunk as u16,
            addr,
            dma: 0,
        };
        push(sets, set)?;
        idx = idx.wrapping_add(chunk);
        count = count.wrapping_sub(chunk);
    }
    Ok(idx)
}

/// Emits a contiguous run of `count` (>= 1) pages starting at page `idx`,
/// address `first`, as power-of-two chunks, without a filler. The chunks'
/// addresses follow from `first` because the run is contiguous.
#[inline(always)]
fn emit_run(
    sets: &mut PageSets,
    mut idx: usize,
    mut count: usize,
    first: u64,
) -> Result<(), AllocError> {
    let mut addr = first;
    if count == 0 {
        // The callers never pass an empty run; emitting nothing is right.
        return Ok(());
    }
    if count == 1 {
        // The common case of scattered pages.
        return push(
            sets,
            PageSet {
                idx: idx as u8,
                count: 1,
                addr,
                dma: 0,
            },
        );
    }
    loop {
        let chunk = chunk_of(count);
        push(
            sets,
            PageSet {
                // idx < 64 (at most 64 pages) and chunk <= 512.
                idx: idx as u8,
                count: chunk as u16,
                addr,
                dma: 0,
            },
        )?;
        count = count.wrapping_sub(chunk);
        if count == 0 {
            return Ok(());
        }
        idx = idx.wrapping_add(chunk);
        addr = addr.wrapping_add((chunk as u64) << PAGE_SHIFT);
    }
}

/// Appends a filler if the list holds an odd number of sets.
#[inline(always)]
fn pad_even(sets: &mut PageSets) -> Result<(), AllocError> {
    if sets.len() % 2 == 1 {
        push(sets, PageSet::FILLER)?;
    }
    Ok(())
}

/// Emits `count` accumulated pages starting at page `idx` as page sets
/// (power-of-two chunks of at most 512 pages), then a filler if the list
/// now holds an odd number of sets. Returns the page index after the last
/// page emitted.
///
/// Kernel: `tid_flush_pages()`.
///
/// # Errors
///
/// [`AllocError::PageRange`] if `idx + count` runs past `pages` or past the
/// 64-page segment limit; [`AllocError::TooManyPageSets`] if `sets` fills
/// up. On error `sets` may hold part of the output.
pub fn flush_pages(
    sets: &mut PageSets,
    pages: &[u64],
    idx: usize,
    count: usize,
) -> Result<usize, AllocError> {
    match idx.checked_add(count) {
        Some(end) if end <= pages.len() && end <= MAX_SEGMENT_PAGES => {}
        _ => return Err(AllocError::PageRange),
    }
    let next = split_run(sets, pages, idx, count)?;
    pad_even(sets)?;
    Ok(next)
}

/// What a walk returns.
type Walked = Result<(), AllocError>;
/// A one-run fast path: sets, the first page, the pages.
type OneRun = fn(&mut PageSets, u64, &[u64]) -> Walked;
/// An all-singles fast path: `None` when the segment is not all singles.
type Singles = fn(&mut PageSets, &[u64]) -> Option<Walked>;

/// The fast path the first two pages point to (see [`fast`]): contiguous
/// ones the single run, others the all-singles walk. `None` (and `sets`
/// emptied) when it does not apply and the general walk must run.
#[inline(always)]
fn try_fast(
    sets: &mut PageSets,
    pages: &[u64],
    one_run: OneRun,
    singles: Singles,
) -> Option<Walked> {
    match *pages {
        [v0, v1, ..] if follows(v0, v1) => {
            if is_one_run(pages, v0) {
                return Some(one_run(sets, v0, pages));
            }
        }
        _ => {
            if let Some(r) = singles(sets, pages) {
                return Some(r);
            }
            sets.clear();
        }
    }
    None
}

/// Page sets for a 4 KiB path MTU: every maximal run of contiguous pages
/// is cut into power-of-two chunks (at most 512 pages each); one filler at
/// the end makes the number of sets even. No pages, no sets.
///
/// Kernel: `tid_rdma_find_phys_blocks_4k()`.
///
/// `pages` are page addresses (pfn × 4096), in segment order. Two pages are
/// contiguous only if the second's address is the first's + 4096.
///
/// # Errors
///
/// [`AllocError::TooManyPages`] for more than 64 pages;
/// [`AllocError::NullPage`] for an address 0 (the driver's end-of-list
/// sentinel, quirk 1e: such a page would be misread as "no page");
/// [`AllocError::UnalignedPage`] for an address that is not page aligned.
pub fn find_phys_blocks_4k(pages: &[u64]) -> Result<PageSets, AllocError> {
    // Built in the return value itself, so the 1.5 KiB list is not copied
    // out of a local on the way back.
    let mut out = Ok(PageSets::new());
    if let Ok(sets) = &mut out {
        if let Err(e) = walk_4k(pages, sets) {
            out = Err(e);
        }
    }
    out
}

/// [`find_phys_blocks_4k`] writing into a caller's list (cleared first), so
/// the kernel can keep the 1.5 KiB list in a long-lived flow record
/// instead of on its stack.
///
/// # Errors
///
/// As [`find_phys_blocks_4k`]; on error `sets` is left empty.
pub fn find_phys_blocks_4k_into(pages: &[u64], sets: &mut PageSets) -> Result<(), AllocError> {
    sets.clear();
    let r = walk_4k(pages, sets);
    if r.is_err() {
        sets.clear();
    }
    r
}

#[inline(always)]
fn walk_4k(pages: &[u64], sets: &mut PageSets) -> Result<(), AllocError> {
    if pages.len() > MAX_SEGMENT_PAGES {
        return Err(AllocError::TooManyPages(pages.len()));
    }
    let Some(&first) = pages.first() else {
        return Ok(());
    };
    if let Some(r) = try_fast(sets, pages, one_run_4k, singles_4k) {
        return r;
    }
    walk_runs_4k(sets, pages, first)
}

/// The general case of [`walk_4k`]: every maximal run, cut into chunks.
///
/// Each run is stepped over from its first page by comparing the pages
/// that follow with the addresses the run predicts (`first + k · 4096`),
/// four at a time while four are left; only a run's first page is noted
/// for validation (the others are it + k pages). A run that wraps past the
/// top of the address space (and so holds a page 0) needs no test of its
/// own: its at most 64 pages start at or above 2^64 - 64 · 4096, where
/// [`fast::Seen`]'s top-bit alarm sends the walk to the exact check.
#[inline(always)]
fn walk_runs_4k(sets: &mut PageSets, pages: &[u64], first: u64) -> Result<(), AllocError> {
    // Checked by the caller; repeated so the compiler knows the bound in
    // this loop (every run at most 64 pages).
    if pages.len() > MAX_SEGMENT_PAGES {
        return Err(AllocError::TooManyPages(pages.len()));
    }
    const _: () = assert!(
        (MAX_SEGMENT_PAGES as u64) << PAGE_SHIFT <= (1 << 63) - PAGE_BYTES,
        "a run that wraps starts where the page check's top bit is set"
    );
    let mut seen = fast::Seen::new();
    let mut start = 0usize;
    let mut run_first = first;
    loop {
        let end = run_end(pages, start.wrapping_add(1), run_first);
        seen.page(run_first);
        emit_walk_run(sets, start, end.wrapping_sub(start), run_first)?;
        let Some(&f) = pages.get(end) else {
            break;
        };
        start = end;
        run_first = f;
    }
    // Sets emitted from bad pages are dropped by the caller on error.
    seen.verdict(pages)?;
    pad_even(sets)
}

/// The index after the run that page `i - 1` (at `prev`) belongs to, from
/// page `i` on: the first page that is not its predecessor + 4096, or the
/// list's end. Four pages a step while four are left, so the bound is
/// tested once for four pages.
#[inline(always)]
fn run_end(pages: &[u64], mut i: usize, prev: u64) -> usize {
    let mut expect = prev.wrapping_add(PAGE_BYTES);
    while let Some(&[a, b, c, d]) = pages.get(i..i.wrapping_add(4)) {
        if a != expect {
            return i;
        }
        if b != expect.wrapping_add(PAGE_BYTES) {
            return i.wrapping_add(1);
        }
        if c != expect.wrapping_add(2 * PAGE_BYTES) {
            return i.wrapping_add(2);
        }
        if d != expect.wrapping_add(3 * PAGE_BYTES) {
            return i.wrapping_add(3);
        }
        i = i.wrapping_add(4);
        expect = expect.wrapping_add(4 * PAGE_BYTES);
    }
    while let Some(&a) = pages.get(i) {
        if a != expect {
            return i;
        }
        i = i.wrapping_add(1);
        expect = expect.wrapping_add(PAGE_BYTES);
    }
    i
}

/// Emits one run of the walks: `len` (1..=64) pages from page `idx` at
/// `first`. A run of a power of two pages (most) is one set; any other is
/// cut into chunks. No 512-page cap is needed: a run is at most 64 pages.
#[inline(always)]
pub(super) fn emit_walk_run(
    sets: &mut PageSets,
    mut idx: usize,
    mut len: usize,
    first: u64,
) -> Result<(), AllocError> {
    let mut addr = first;
    // len without its lowest bit: 0 for a power of two, itself a power
    // of two for a run of two chunks (3, 5, 6, ...).
    let high = len & len.wrapping_sub(1);
    if high == 0 {
        return push(sets, walk_set(idx, len, addr));
    }
    if high & high.wrapping_sub(1) == 0 {
        // Both chunks pushed with one capacity check.
        if sets.len() > sets.capacity().wrapping_sub(2) {
            return Err(AllocError::TooManyPageSets);
        }
        push(sets, walk_set(idx, high, addr))?;
        let low = addr.wrapping_add((high as u64) << PAGE_SHIFT);
        return push(sets, walk_set(idx.wrapping_add(high), len ^ high, low));
    }
    loop {
        // The largest power of two not above len (len >= 1, and `| 1`
        // keeps its log while telling the compiler it is not 0).
        let chunk = 1usize << (len | 1).ilog2();
        push(sets, walk_set(idx, chunk, addr))?;
        len ^= chunk;
        if len == 0 {
            return Ok(());
        }
        idx = idx.wrapping_add(chunk);
        addr = addr.wrapping_add((chunk as u64) << PAGE_SHIFT);
    }
}

/// The set of `count` pages from page `idx` at `addr`, as the walks make
/// it: `idx` < 64 and `count` <= 64 (a segment holds at most 64 pages).
#[inline(always)]
pub(super) const fn walk_set(idx: usize, count: usize, addr: u64) -> PageSet {
    PageSet {
        idx: idx as u8,
        count: count as u16,
        addr,
        dma: 0,
    }
}

/// A one-page set for page `k` at `addr`.
#[inline(always)]
const fn single(k: usize, addr: u64) -> PageSet {
    PageSet {
        // k < 64: the list holds at most 64 pages.
        idx: k as u8,
        count: 1,
        addr,
        dma: 0,
    }
}

/// Page sets for a segment, with the variant the driver picks from the
/// QP's path MTU: 4 KiB iff `pmtu == 4096`, else 8 KiB.
///
/// Kernel: the choice in `kern_get_phys_blocks()`.
///
/// # Errors
///
/// As [`find_phys_blocks_4k`].
pub fn find_phys_blocks(pages: &[u64], pmtu: u32) -> Result<PageSets, AllocError> {
    if pmtu == MTU_4K {
        find_phys_blocks_4k(pages)
    } else {
        find_phys_blocks_8k(pages)
    }
}

/// [`find_phys_blocks`] writing into a caller's list (cleared first).
///
/// # Errors
///
/// As [`find_phys_blocks_4k`]; on error `sets` is left empty.
pub fn find_phys_blocks_into(
    pages: &[u64],
    pmtu: u32,
    sets: &mut PageSets,
) -> Result<(), AllocError> {
    if pmtu == MTU_4K {
        find_phys_blocks_4k_into(pages, sets)
    } else {
        find_phys_blocks_8k_into(pages, sets)
    }
}

#[cfg(test)]
mod tests;
