// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Unit tests of the page-set walks: both variants, the fast paths, the
//! typed errors.

use super::*;

fn counts(sets: &PageSets) -> Vec<u16> {
    sets.iter().map(|s| s.count).collect()
}

fn run(start_pfn: u64, n: u64) -> Vec<u64> {
    (0..n).map(|i| (start_pfn + i) * 4096).collect()
}

#[test]
fn chunks_round_down_and_empty_runs_emit_nothing() {
    let got: Vec<usize> = [0, 1, 2, 3, 7, 8, 511, 512, 513, 4096]
        .iter()
        .map(|&n| chunk_of(n))
        .collect();
    assert_eq!(got, [0, 1, 2, 2, 4, 8, 256, 512, 512, 512]);
    let mut sets = PageSets::new();
    emit_run(&mut sets, 0, 0, 0x1000).unwrap();
    assert!(sets.is_empty());
    emit_run(&mut sets, 0, 3, 0x1000).unwrap();
    assert_eq!(counts(&sets), [2, 1]);
}

#[test]
fn three_page_run_differs_between_variants() {
    let p = run(0x100, 3);
    assert_eq!(counts(&find_phys_blocks_4k(&p).unwrap()), [2, 1]);
    assert_eq!(counts(&find_phys_blocks_8k(&p).unwrap()), [2, 0, 1, 0]);
}

#[test]
fn mixed_benchmark_pattern_gives_18_and_40_sets() {
    // README quirk 1b quotes these two numbers.
    let runs = [8u64, 1, 4, 2, 16, 1, 3, 8, 5, 2, 1, 4, 6, 3];
    let mut p = Vec::new();
    for (r, &len) in runs.iter().enumerate() {
        p.extend(run(0x300000 + 0x1000 * r as u64, len));
    }
    assert_eq!(p.len(), 64);
    assert_eq!(find_phys_blocks_4k(&p).unwrap().len(), 18);
    assert_eq!(find_phys_blocks_8k(&p).unwrap().len(), 40);
}

#[test]
fn bad_pages_are_typed_errors() {
    assert_eq!(
        find_phys_blocks_4k(&[4096, 0]),
        Err(AllocError::NullPage { index: 1 })
    );
    assert_eq!(
        find_phys_blocks_8k(&[4096, 4097]),
        Err(AllocError::UnalignedPage {
            index: 1,
            addr: 4097
        })
    );
    assert_eq!(
        find_phys_blocks(&run(1, 65), 4096),
        Err(AllocError::TooManyPages(65))
    );
    let mut sets = PageSets::new();
    assert_eq!(
        flush_pages(&mut sets, &run(1, 4), 3, 2),
        Err(AllocError::PageRange)
    );
    assert_eq!(
        flush_pages(&mut sets, &run(1, 4), usize::MAX, 2),
        Err(AllocError::PageRange)
    );
}

/// The general 4 KiB walk (neither one run nor all singles): a run
/// that wraps past the top of the address space holds a page 0, found
/// by its index wherever the run starts; runs of odd and even length
/// end where the page after them jumps, also at the segment's end.
#[test]
fn general_walk_runs_and_a_wrapping_run() {
    let top = !PAGE_OFFSET_MASK;
    let p = 4096;
    assert_eq!(
        find_phys_blocks_4k(&[7 * p, top - p, top, 0, p, 9 * p]),
        Err(AllocError::NullPage { index: 3 })
    );
    assert_eq!(
        find_phys_blocks_4k(&[7 * p, top, 0]),
        Err(AllocError::NullPage { index: 2 })
    );
    let mut pages = run(0x100, 3);
    pages.extend(run(0x200, 1));
    pages.extend(run(0x300, 2));
    pages.extend(run(0x400, 5));
    let sets = find_phys_blocks_4k(&pages).unwrap();
    assert_eq!(counts(&sets), [2, 1, 1, 2, 4, 1]);
    let idx: Vec<u8> = sets.iter().map(|s| s.idx).collect();
    assert_eq!(idx, [0, 2, 3, 4, 6, 10]);
    assert_eq!(sets[5].addr, (0x400 + 4) * 4096);
}

/// The general 8 KiB walk: a chain of pairs that wraps past the top
/// is refused by the index of its page 0; chains flush with a filler
/// when their chunks are odd, broken pairs give two singles, an odd
/// last page its set and a filler.
#[test]
fn general_pair_walk_chains_and_a_wrapping_chain() {
    let top = !PAGE_OFFSET_MASK;
    let p = 4096;
    assert_eq!(
        find_phys_blocks_8k(&[7 * p, 9 * p, top - p, top, 0, p]),
        Err(AllocError::NullPage { index: 4 })
    );
    // Pairs: (0x100, 0x102) broken, then a chain of 3 pairs from
    // 0x200, then a chain of one pair from 0x300, then 0x400 alone.
    let mut pages = vec![0x100 * p, 0x102 * p];
    pages.extend(run(0x200, 6));
    pages.extend(run(0x300, 2));
    pages.push(0x400 * p);
    let sets = find_phys_blocks_8k(&pages).unwrap();
    assert_eq!(counts(&sets), [1, 1, 4, 2, 2, 0, 1, 0]);
    let idx: Vec<u8> = sets.iter().map(|s| s.idx).collect();
    assert_eq!(idx, [0, 1, 2, 6, 8, 0, 10, 0]);
    assert_eq!(sets[3].addr, (0x200 + 4) * p);
}

#[test]
fn top_page_never_continues_a_run() {
    let top = !PAGE_OFFSET_MASK;
    assert_eq!(counts(&find_phys_blocks_8k(&[top]).unwrap()), [1, 0]);
    assert_eq!(counts(&find_phys_blocks_4k(&[top]).unwrap()), [1, 0]);
}

#[test]
fn order_of_sets() {
    let s = |count| PageSet {
        count,
        ..PageSet::default()
    };
    assert_eq!(s(0).order(), 0);
    assert_eq!(s(1).order(), 1);
    assert_eq!(s(64).order(), 7);
    assert_eq!(s(512).order(), 10);
    assert!(s(512).is_programmable());
    assert!(!s(3).is_programmable());
    assert!(!s(1024).is_programmable());
}

#[test]
fn unmappable_is_zero_exactly_for_the_counts_the_rcvarray_takes() {
    for count in 0..=u16::MAX {
        let takes = count == 0 || (count.is_power_of_two() && u32::from(count) <= 512);
        assert_eq!(unmappable(count) == 0, takes, "count {count}");
    }
}
