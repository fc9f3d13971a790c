// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The page-set entry points the walk tests do not reach: the flush helper
//! on its own (`tid_flush_pages()`, which the kernel glue exports), the
//! MTU dispatch into a caller's list, and an unaligned page whose address
//! is the one the cheap page check can only pass by looking again.

use tid_alloc::{
    AllocError, PageSet, PageSets, find_phys_blocks, find_phys_blocks_8k, find_phys_blocks_into,
    flush_pages,
};

const PAGE: u64 = 4096;

fn set(idx: u8, count: u16, addr: u64) -> PageSet {
    PageSet {
        idx,
        count,
        addr,
        dma: 0,
    }
}

/// SPEC §5 flush helper (`tid_flush_pages()`): `count` pages from `idx`
/// as power-of-two chunks, each named by its first page in the list, then
/// one filler if the list is odd; it returns the index after the pages.
#[test]
fn flush_pages_emits_chunks_from_the_list_then_pads_to_even() {
    // Scattered on purpose: a chunk's address is its own entry in the
    // list, whatever the pages around it are.
    let pages: Vec<u64> = (0..64).map(|i| (0x9000 + 7 * i) * PAGE).collect();
    let mut sets = PageSets::new();
    assert_eq!(flush_pages(&mut sets, &pages, 1, 7), Ok(8));
    assert_eq!(
        sets.as_slice(),
        [
            set(1, 4, pages[1]),
            set(5, 2, pages[5]),
            set(7, 1, pages[7]),
            PageSet::FILLER
        ]
    );
    // An even flush appends no filler; nothing to flush emits nothing.
    assert_eq!(flush_pages(&mut sets, &pages, 8, 24), Ok(32));
    assert_eq!(sets[4..], [set(8, 16, pages[8]), set(24, 8, pages[24])]);
    assert_eq!(flush_pages(&mut sets, &pages, 32, 0), Ok(32));
    assert_eq!(sets.len(), 6);
    // Up to the end of the segment, but not past it.
    assert_eq!(flush_pages(&mut sets, &pages, 32, 32), Ok(64));
    assert_eq!(sets[6..], [set(32, 32, pages[32]), PageSet::FILLER]);
    assert_eq!(
        flush_pages(&mut sets, &pages, 33, 32),
        Err(AllocError::PageRange)
    );
    // A longer list still ends at the 64-page segment limit.
    let long: Vec<u64> = (0..66).map(|i| (0x9000 + i) * PAGE).collect();
    let mut sets = PageSets::new();
    assert_eq!(
        flush_pages(&mut sets, &long, 0, 65),
        Err(AllocError::PageRange)
    );
    assert_eq!(flush_pages(&mut sets, &long, 0, 64), Ok(64));
    assert_eq!(sets.as_slice(), [set(0, 64, long[0]), PageSet::FILLER]);
}

/// The variant follows the path MTU (4 KiB iff 4096, as
/// `kern_get_phys_blocks()` chooses) into the caller's list as well, and
/// an error leaves that list empty.
#[test]
fn find_phys_blocks_into_follows_the_mtu() {
    // A 3-page run: [2, 1] with 4 KiB, [2, 0, 1, 0] with 8 KiB.
    let pages: Vec<u64> = (0..3).map(|i| (0x100 + i) * PAGE).collect();
    for (pmtu, counts) in [
        (4096, &[2u16, 1][..]),
        (8192, &[2, 0, 1, 0][..]),
        (2048, &[2, 0, 1, 0][..]),
    ] {
        let mut sets: PageSets = (0..5).map(|i| set(i, 1, PAGE)).collect();
        assert_eq!(find_phys_blocks_into(&pages, pmtu, &mut sets), Ok(()));
        let got: Vec<u16> = sets.iter().map(|s| s.count).collect();
        assert_eq!(got, counts, "pmtu {pmtu}");
        assert_eq!(Ok(sets), find_phys_blocks(&pages, pmtu));
    }
    let mut sets: PageSets = (0..5).map(|i| set(i, 1, PAGE)).collect();
    assert_eq!(
        find_phys_blocks_into(&[PAGE, 0], 4096, &mut sets),
        Err(AllocError::NullPage { index: 1 })
    );
    assert!(sets.is_empty());
}

/// Unaligned pages just above 2^63 (where valid pages also make the cheap
/// check look again) are rejected like any other, alone or after a valid
/// page, in both variants.
#[test]
fn unaligned_pages_above_2_pow_63_are_rejected() {
    let high = 1u64 << 63;
    for base in [high, high + PAGE, high + 2 * PAGE] {
        for off in [1, 0x7FF, 0xFFF] {
            let addr = base + PAGE + off;
            let want = Err(AllocError::UnalignedPage { index: 0, addr });
            assert_eq!(find_phys_blocks(&[addr], 4096), want, "{addr:#x}");
            assert_eq!(find_phys_blocks_8k(&[addr]), want, "{addr:#x}");
            let want = Err(AllocError::UnalignedPage { index: 1, addr });
            assert_eq!(find_phys_blocks(&[PAGE, addr], 4096), want);
            assert_eq!(find_phys_blocks_8k(&[PAGE, addr]), want);
        }
    }
}

/// A segment that is one contiguous run is checked by its first page
/// alone (the others are it + k pages): a run of unaligned pages, or one
/// from address 0, is refused by that page's index, in both variants.
#[test]
fn a_one_run_segment_with_a_bad_first_page_is_refused() {
    for n in [2u64, 3, 8, 64] {
        let unaligned: Vec<u64> = (0..n).map(|k| 0x10_0010 + k * PAGE).collect();
        let want = Err(AllocError::UnalignedPage {
            index: 0,
            addr: 0x10_0010,
        });
        assert_eq!(find_phys_blocks(&unaligned, 4096), want, "{n}");
        assert_eq!(find_phys_blocks_8k(&unaligned), want, "{n}");
        let from_null: Vec<u64> = (0..n).map(|k| k * PAGE).collect();
        let want = Err(AllocError::NullPage { index: 0 });
        assert_eq!(find_phys_blocks(&from_null, 4096), want, "{n}");
        assert_eq!(find_phys_blocks_8k(&from_null), want, "{n}");
    }
}
