// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A request's scatter list and the walk over it that finds one segment's
//! pages. Kernel: `kern_find_pages()` and the SGE state it moves.

use arrayvec::ArrayVec;
use hfi1_hal::consts::{MAX_SEGMENT_PAGES, PAGE_SHIFT, PAGE_SIZE};

use crate::setup::PageWalk;

/// One local scatter-gather element (page aligned, a page multiple, as
/// TID RDMA qualification requires). Kernel: `struct rvt_sge`.
///
/// `repr(C)`: a C caller's scatter list (`struct hfi1_tid_sge` of
/// kmod-glue's header) is read as these without a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Sge {
    /// Virtual (in the sim: physical) address of the first byte.
    pub vaddr: u64,
    /// Bytes.
    pub length: u32,
}

/// Where the segment walk stands in the request's SGE list.
/// Kernel: `req->isge` and the SGE state's `vaddr`/`length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SgeCursor {
    /// Current SGE.
    pub isge: u32,
    /// Byte offset in it.
    pub offset: u32,
}

impl SgeCursor {
    /// The cursor `bytes` into `sges` from their start: a TID WRITE
    /// responder starts its walk over a memory region's pages at the
    /// write's offset into the region. An offset that ends an SGE exactly
    /// is the start of the next. `None` if `sges` are shorter than
    /// `bytes` (an offset at their very end included: nothing is left to
    /// walk). Kernel: `rvt_skip_sge()`.
    pub fn at_offset(sges: &[Sge], bytes: u64) -> Option<Self> {
        let mut left = bytes;
        for (i, sge) in sges.iter().enumerate() {
            let len = u64::from(sge.length);
            if left < len {
                return Some(Self {
                    isge: u32::try_from(i).ok()?,
                    offset: u32::try_from(left).ok()?,
                });
            }
            left -= len;
        }
        None
    }
}

/// Walks the SGE list from `cursor` for up to `seg_len` bytes, one page at
/// a time, into `pages`; returns the bytes found.
/// Kernel: `kern_find_pages()`.
fn find_pages(
    sges: &[Sge],
    cursor: &mut SgeCursor,
    seg_len: u32,
    pages: &mut ArrayVec<u64, MAX_SEGMENT_PAGES>,
) -> u32 {
    pages.clear();
    let mut length = seg_len;
    // The cursor and the room left are kept in locals (registers) for the
    // walk and written back once.
    let (mut isge, mut offset) = (cursor.isge, cursor.offset);
    let mut room = pages.capacity() as u32;
    while length > 0 && room > 0 {
        let Some(sge) = sges.get(isge as usize) else {
            break;
        };
        if offset == 0 && sge.length == PAGE_SIZE && length >= PAGE_SIZE {
            // A one-page SGE from its start (a scattered buffer): its page,
            // without the run arithmetic below (which gives the same).
            let _ = pages.try_push(sge.vaddr);
            isge = isge.wrapping_add(1);
            length = length.wrapping_sub(PAGE_SIZE);
            room = room.wrapping_sub(1);
            continue;
        }
        // The pages this SGE still has, as many as the segment and the
        // array take, in one run.
        let in_sge = sge.length.saturating_sub(offset).div_ceil(PAGE_SIZE).max(1);
        let n = in_sge.min(length.div_ceil(PAGE_SIZE)).min(room);
        let base = sge.vaddr.wrapping_add(u64::from(offset));
        // Cannot fail: `n` is at most the room left.
        if n == 1 {
            let _ = pages.try_push(base);
        } else {
            for i in 0..n {
                let _ = pages.try_push(base.wrapping_add(u64::from(i) << PAGE_SHIFT));
            }
        }
        room = room.wrapping_sub(n);
        // `n` is at most the array's capacity: no overflow.
        let bytes = n.wrapping_mul(PAGE_SIZE);
        offset = offset.wrapping_add(bytes);
        if offset >= sge.length {
            isge = isge.wrapping_add(1);
            offset = 0;
        }
        length = length.saturating_sub(bytes);
    }
    *cursor = SgeCursor { isge, offset };
    seg_len - length
}

/// A scatter list and the cursor of its walk: the software platform's
/// [`PageWalk`].
#[derive(Debug)]
pub struct SgeWalk<'a> {
    /// The SGEs.
    pub sges: &'a [Sge],
    /// Where the walk stands.
    pub cursor: &'a mut SgeCursor,
}

impl PageWalk for SgeWalk<'_> {
    fn find_pages(&mut self, seg_len: u32, pages: &mut ArrayVec<u64, MAX_SEGMENT_PAGES>) -> u32 {
        find_pages(self.sges, self.cursor, seg_len, pages)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn find_pages_walks_across_sges_and_resumes() {
        let p = u64::from(PAGE_SIZE);
        let sges = [
            Sge {
                vaddr: 0x10_0000,
                length: 3 * PAGE_SIZE,
            },
            Sge {
                vaddr: 0x20_0000,
                length: 2 * PAGE_SIZE,
            },
            Sge {
                vaddr: 0x30_0000,
                length: 4 * PAGE_SIZE,
            },
        ];
        let mut cur = SgeCursor::default();
        let mut pages = ArrayVec::new();
        assert_eq!(
            find_pages(&sges, &mut cur, 4 * PAGE_SIZE, &mut pages),
            4 * PAGE_SIZE
        );
        assert_eq!(
            pages.as_slice(),
            [0x10_0000, 0x10_0000 + p, 0x10_0000 + 2 * p, 0x20_0000]
        );
        assert_eq!(
            cur,
            SgeCursor {
                isge: 1,
                offset: PAGE_SIZE
            }
        );
        assert_eq!(
            find_pages(&sges, &mut cur, 4 * PAGE_SIZE, &mut pages),
            4 * PAGE_SIZE
        );
        assert_eq!(
            pages.as_slice(),
            [0x20_0000 + p, 0x30_0000, 0x30_0000 + p, 0x30_0000 + 2 * p]
        );
        // The list runs out: a short segment.
        assert_eq!(
            find_pages(&sges, &mut cur, 4 * PAGE_SIZE, &mut pages),
            PAGE_SIZE
        );
        assert_eq!(pages.as_slice(), [0x30_0000 + 3 * p]);
        assert_eq!(find_pages(&sges, &mut cur, 4 * PAGE_SIZE, &mut pages), 0);
    }

    /// The walk one SGE run at a time, with no one-page shortcut: what
    /// `find_pages` must return for every list.
    fn find_pages_by_runs(sges: &[Sge], cur: &mut SgeCursor, seg_len: u32) -> (Vec<u64>, u32) {
        let mut out = Vec::new();
        let mut length = seg_len;
        while length > 0 && out.len() < MAX_SEGMENT_PAGES {
            let Some(sge) = sges.get(cur.isge as usize) else {
                break;
            };
            let in_sge = sge
                .length
                .saturating_sub(cur.offset)
                .div_ceil(PAGE_SIZE)
                .max(1);
            let room = (MAX_SEGMENT_PAGES - out.len()) as u32;
            let n = in_sge.min(length.div_ceil(PAGE_SIZE)).min(room);
            let base = sge.vaddr + u64::from(cur.offset);
            out.extend((0..n).map(|i| base + (u64::from(i) << PAGE_SHIFT)));
            cur.offset += n * PAGE_SIZE;
            if cur.offset >= sge.length {
                cur.isge += 1;
                cur.offset = 0;
            }
            length = length.saturating_sub(n * PAGE_SIZE);
        }
        (out, seg_len - length)
    }

    #[test]
    fn a_walk_from_inside_a_one_page_sge_starts_at_the_cursor() {
        // A WRITE's offset into a region need not be page aligned: the
        // page found is where the cursor stands (setup then refuses it as
        // unaligned), as the run-by-run walk gives.
        let sges = [
            Sge {
                vaddr: 0x10_0000,
                length: PAGE_SIZE,
            },
            Sge {
                vaddr: 0x30_0000,
                length: PAGE_SIZE,
            },
        ];
        let start = SgeCursor {
            isge: 0,
            offset: 512,
        };
        let (mut a, mut b) = (start, start);
        let mut pages = ArrayVec::new();
        let got = find_pages(&sges, &mut a, 2 * PAGE_SIZE, &mut pages);
        let (want, bytes) = find_pages_by_runs(&sges, &mut b, 2 * PAGE_SIZE);
        assert_eq!(pages.as_slice(), [0x10_0200, 0x30_0000]);
        assert_eq!((pages.as_slice(), got, a), (want.as_slice(), bytes, b));
    }

    #[test]
    fn find_pages_one_page_sges_walk_as_runs_do() {
        // Lists mixing one-page SGEs with longer, short and empty ones,
        // walked in segments of several sizes: the same pages and cursor
        // as the run-by-run walk.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..200 {
            let mut sges = Vec::new();
            for k in 0..40u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let length = match x % 6 {
                    0..=2 => PAGE_SIZE,
                    3 => PAGE_SIZE * (1 + (x >> 8) as u32 % 9),
                    4 => (x >> 8) as u32 % (3 * PAGE_SIZE),
                    _ => PAGE_SIZE / 2,
                };
                sges.push(Sge {
                    vaddr: (k + 1) << 24,
                    length,
                });
            }
            let seg = [
                PAGE_SIZE,
                3 * PAGE_SIZE + 100,
                64 * PAGE_SIZE,
                80 * PAGE_SIZE,
            ][x as usize % 4];
            let (mut a, mut b) = (SgeCursor::default(), SgeCursor::default());
            let mut pages = ArrayVec::new();
            for _ in 0..12 {
                let got = find_pages(&sges, &mut a, seg, &mut pages);
                let (want, bytes) = find_pages_by_runs(&sges, &mut b, seg);
                assert_eq!((pages.as_slice(), got, a), (want.as_slice(), bytes, b));
            }
        }
    }
}
