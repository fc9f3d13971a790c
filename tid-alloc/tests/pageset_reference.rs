// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The fast page-set walks against a plain model of the driver's
//! `tid_rdma_find_phys_blocks_4k()` / `_8k()` and `tid_flush_pages()`:
//! one loop per variant, no fast path, every page checked first. Random
//! segments mix scattered pages, runs of every length (so the one-run,
//! all-singles and general paths are all taken, and a fast path that gives
//! up part-way hands over correctly), duplicates, backward jumps, the top
//! page and invalid pages; the outputs (or the errors) must be equal, set
//! for set, on both the by-value and the `_into` entry points.

use proptest::prelude::*;
use tid_alloc::{
    AllocError, PageSet, PageSets, find_phys_blocks_4k, find_phys_blocks_4k_into,
    find_phys_blocks_8k, find_phys_blocks_8k_into,
};

const PAGE: u64 = 4096;

/// The largest power-of-two chunk (at most 512 pages) a run of `n` starts with.
fn chunk(n: usize) -> usize {
    if n > 512 { 512 } else { 1 << n.ilog2() }
}

/// The error the driver's input rules give, if any, in page order.
fn check(pages: &[u64]) -> Result<(), AllocError> {
    if pages.len() > 64 {
        return Err(AllocError::TooManyPages(pages.len()));
    }
    for (index, &addr) in pages.iter().enumerate() {
        if addr == 0 {
            return Err(AllocError::NullPage { index });
        }
        if addr % PAGE != 0 {
            return Err(AllocError::UnalignedPage { index, addr });
        }
    }
    Ok(())
}

fn set(idx: usize, count: usize, addr: u64) -> PageSet {
    PageSet {
        idx: idx as u8,
        count: count as u16,
        addr,
        dma: 0,
    }
}

/// `tid_flush_pages()`: `count` pages from `*idx` as chunks, then a filler
/// if the list is odd.
fn flush(out: &mut Vec<PageSet>, pages: &[u64], idx: &mut usize, mut count: usize) {
    while count > 0 {
        let c = chunk(count);
        let at = *idx;
        out.push(set(at, c, pages[at]));
        *idx += c;
        count -= c;
    }
    if out.len() % 2 == 1 {
        out.push(PageSet::FILLER);
    }
}

fn model_4k(pages: &[u64]) -> Result<Vec<PageSet>, AllocError> {
    check(pages)?;
    let mut out = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let mut j = i + 1;
        while j < pages.len() && pages[j - 1].wrapping_add(PAGE) == pages[j] {
            j += 1;
        }
        let mut idx = i;
        let mut left = j - i;
        while left > 0 {
            let c = chunk(left);
            out.push(set(idx, c, pages[idx]));
            idx += c;
            left -= c;
        }
        i = j;
    }
    if out.len() % 2 == 1 {
        out.push(PageSet::FILLER);
    }
    Ok(out)
}

fn model_8k(pages: &[u64]) -> Result<Vec<PageSet>, AllocError> {
    check(pages)?;
    let n = pages.len();
    let mut out = Vec::new();
    let (mut idx, mut pending, mut vm1) = (0usize, 0usize, None::<u64>);
    let mut i = 0;
    while i < n {
        let v0 = pages[i];
        let v1 = pages.get(i + 1).copied();
        if v1 != Some(v0.wrapping_add(PAGE)) {
            flush(&mut out, pages, &mut idx, pending);
            out.push(set(idx, 1, v0));
            idx += 1;
            match v1 {
                Some(v1) => {
                    out.push(set(idx, 1, v1));
                    idx += 1;
                }
                None => out.push(PageSet::FILLER),
            }
            vm1 = None;
            pending = 0;
        } else {
            if let Some(prev) = vm1 {
                if v0 != prev.wrapping_add(PAGE) {
                    flush(&mut out, pages, &mut idx, pending);
                    pending = 0;
                }
            }
            pending += 2;
            vm1 = v1;
        }
        i += 2;
    }
    let rest = n - idx;
    flush(&mut out, pages, &mut idx, rest);
    Ok(out)
}

/// Segments built from pieces: runs of 1..=20 pages (sometimes 64), each
/// after a jump that may be +1 page (joining the runs), a gap, backward,
/// or to the top of the address space; now and then a bad page.
fn segment() -> impl Strategy<Value = Vec<u64>> {
    let piece = (0u8..8, 1usize..=20, 0u8..16, any::<u32>());
    (proptest::collection::vec(piece, 0..24), 0u8..4).prop_map(|(pieces, shape)| {
        let mut pages = Vec::new();
        let mut pfn = 0x4000u64;
        for (jump, len, bad, far) in pieces {
            pfn = match jump {
                0 => pfn + 1,
                1 | 2 => pfn + 2 + u64::from(far % 5),
                3 => pfn.saturating_sub(u64::from(far % 64) + 1).max(1),
                4 => (u64::MAX >> 12) - u64::from(far % 3),
                _ => pfn + 1 + u64::from(far),
            };
            let len = if shape == 0 && jump == 7 { 64 } else { len };
            for _ in 0..len {
                pages.push(pfn.wrapping_mul(PAGE));
                pfn = pfn.wrapping_add(1);
            }
            if bad == 0 {
                let at = far as usize % pages.len();
                pages[at] = if far % 2 == 0 { 0 } else { pages[at] | 0x800 };
            }
        }
        match shape {
            // The common segment sizes.
            1 => pages.truncate(64),
            2 => pages.truncate(pages.len().min(63)),
            _ => pages.truncate(66),
        }
        pages
    })
}

fn fast(
    pages: &[u64],
    f: fn(&[u64]) -> Result<PageSets, AllocError>,
) -> Result<Vec<PageSet>, AllocError> {
    f(pages).map(|s| s.to_vec())
}

fn fast_into(
    pages: &[u64],
    f: fn(&[u64], &mut PageSets) -> Result<(), AllocError>,
) -> Result<Vec<PageSet>, AllocError> {
    // A list left full by an earlier call: the walk must clear it.
    let mut sets: PageSets = (0..64).map(|i| set(i, 3, 0x1000)).collect();
    match f(pages, &mut sets) {
        Ok(()) => Ok(sets.to_vec()),
        Err(e) => {
            assert!(sets.is_empty(), "error leaves the list empty");
            Err(e)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn walks_match_the_driver_model(pages in segment()) {
        let m4 = model_4k(&pages);
        prop_assert_eq!(&fast(&pages, find_phys_blocks_4k), &m4);
        prop_assert_eq!(&fast_into(&pages, find_phys_blocks_4k_into), &m4);
        let m8 = model_8k(&pages);
        prop_assert_eq!(&fast(&pages, find_phys_blocks_8k), &m8);
        prop_assert_eq!(&fast_into(&pages, find_phys_blocks_8k_into), &m8);
    }
}

/// The three benchmark shapes and their neighbours, exactly.
#[test]
fn benchmark_shapes_match_the_driver_model() {
    let contiguous: Vec<u64> = (0..64).map(|i| (0x100000 + i) * PAGE).collect();
    let scattered: Vec<u64> = (0..64).map(|i| (0x200000 + 2 * i) * PAGE).collect();
    let mut mixed = Vec::new();
    for (r, len) in [8u64, 1, 4, 2, 16, 1, 3, 8, 5, 2, 1, 4, 6, 3]
        .into_iter()
        .enumerate()
    {
        mixed.extend((0..len).map(|i| (0x300000 + 0x1000 * r as u64 + i) * PAGE));
    }
    for base in [contiguous, scattered, mixed] {
        for n in 0..=base.len() {
            for cut in [&base[..n], &base[base.len() - n..]] {
                assert_eq!(fast(cut, find_phys_blocks_4k), model_4k(cut), "4k {cut:x?}");
                assert_eq!(fast(cut, find_phys_blocks_8k), model_8k(cut), "8k {cut:x?}");
            }
        }
        // A scattered or contiguous list broken once at every place.
        for at in 0..base.len() {
            let mut p = base.clone();
            p[at] += 0x40_0000 * PAGE;
            assert_eq!(fast(&p, find_phys_blocks_4k), model_4k(&p));
            assert_eq!(fast(&p, find_phys_blocks_8k), model_8k(&p));
            p[at] = 0;
            assert_eq!(fast(&p, find_phys_blocks_4k), model_4k(&p));
            assert_eq!(fast(&p, find_phys_blocks_8k), model_8k(&p));
        }
    }
}

/// The page checks' edge cases, where the cheap check can only raise a
/// false alarm or must catch: pages below 4096, unaligned ones, a page 0
/// after the top page (a wrapping run), and valid pages at and above 2^63,
/// alone, scattered and in runs.
#[test]
fn page_check_edges_match_the_driver_model() {
    let top = !(PAGE - 1);
    let high = 1u64 << 63;
    let cases: [&[u64]; 12] = [
        &[5],
        &[PAGE, 5],
        &[0x800],
        &[top],
        &[top, 0],
        &[top - PAGE, top],
        &[high],
        &[high, high + PAGE],
        &[
            high + PAGE,
            high + 3 * PAGE,
            high + 5 * PAGE,
            high + 7 * PAGE,
        ],
        &[high - PAGE, high, high + PAGE, high + 2 * PAGE],
        &[PAGE, 3 * PAGE, 5 * PAGE, 0, 9 * PAGE],
        &[PAGE, 3 * PAGE, 5 * PAGE, 7 * PAGE, 9 * PAGE + 1],
    ];
    for pages in cases {
        assert_eq!(
            fast(pages, find_phys_blocks_4k),
            model_4k(pages),
            "4k {pages:x?}"
        );
        assert_eq!(
            fast(pages, find_phys_blocks_8k),
            model_8k(pages),
            "8k {pages:x?}"
        );
    }
}

/// Every contiguity pattern of up to 13 pages (each page either continues
/// the one before or jumps ahead), through both variants and both entry
/// points: the fast paths must hand over to the general walk at every
/// place a run begins or ends, including runs of exactly two pages inside
/// a group of four and an odd tail after scattered pairs, which random
/// segments reach too rarely to be relied on.
#[test]
fn every_contiguity_pattern_matches_the_driver_model() {
    for n in 0..=13usize {
        for pattern in 0..1u32 << n.saturating_sub(1) {
            let mut pages = Vec::with_capacity(n);
            let mut pfn = 0x5000u64;
            for i in 0..n {
                if i > 0 {
                    pfn += if pattern >> (i - 1) & 1 == 1 { 1 } else { 3 };
                }
                pages.push(pfn * PAGE);
            }
            let m4 = model_4k(&pages);
            assert_eq!(fast(&pages, find_phys_blocks_4k), m4, "4k {pattern:b}/{n}");
            assert_eq!(fast_into(&pages, find_phys_blocks_4k_into), m4);
            let m8 = model_8k(&pages);
            assert_eq!(fast(&pages, find_phys_blocks_8k), m8, "8k {pattern:b}/{n}");
            assert_eq!(fast_into(&pages, find_phys_blocks_8k_into), m8);
        }
    }
}
