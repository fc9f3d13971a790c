// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Both nodes' pages: the allocator that hands them out as fragmented as
//! a test wants, mapping them into the software chip's memory, and
//! filling and checking them against the pattern.

use alloc::vec::Vec;

use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::sim::SimMemory;
use tid_flow::Sge;
use tid_read_proto::rc::SourceData;

use super::{fill_pattern, mismatched_bytes};

/// Hands out destination pages by page frame number, in rising order,
/// with the gaps the caller asks for (so buffers are as fragmented as a
/// test wants). The pages are physical addresses of the software chip's
/// [`SimMemory`]: [`map`] adds them, [`unmap`] takes them away.
#[derive(Debug, Clone)]
pub struct PageAllocator {
    next_pfn: u64,
}

impl PageAllocator {
    /// Pages from `first_pfn` on.
    pub fn new(first_pfn: u64) -> Self {
        Self {
            next_pfn: first_pfn,
        }
    }

    /// `len` contiguous pages starting `gap` pages after the last page
    /// handed out.
    pub fn run(&mut self, gap: u64, len: u64) -> Sge {
        let start = self.next_pfn.wrapping_add(gap);
        self.next_pfn = start.wrapping_add(len);
        Sge {
            vaddr: start << 12,
            length: u32::try_from(len).unwrap_or(0).wrapping_mul(PAGE_SIZE),
        }
    }

    /// `pages` pages no two of which are contiguous, one SGE each, and a
    /// gap after them.
    pub fn scattered(&mut self, pages: u64) -> Vec<Sge> {
        let sges = (0..pages).map(|k| self.run(u64::from(k > 0), 1)).collect();
        self.next_pfn = self.next_pfn.wrapping_add(1);
        sges
    }

    /// `pages` pages (at most 8) with a one-page gap before page `k`
    /// wherever bit `k` of `gaps` is set (bit 0 is ignored); contiguous
    /// pages share an SGE. A gap follows the last page.
    pub fn with_gaps(&mut self, pages: u64, gaps: u8) -> Vec<Sge> {
        let mut sges: Vec<Sge> = Vec::new();
        for k in 0..pages.min(8) {
            let gap = k > 0 && gaps & (1 << k) != 0;
            let s = self.run(u64::from(gap), 1);
            match sges.last_mut() {
                Some(last) if !gap => last.length += s.length,
                _ => sges.push(s),
            }
        }
        self.next_pfn = self.next_pfn.wrapping_add(1);
        sges
    }
}

/// The page frame numbers of `sges`.
pub fn pfns(sges: &[Sge]) -> impl Iterator<Item = u64> + '_ {
    sges.iter()
        .flat_map(|s| (0..u64::from(s.length / PAGE_SIZE)).map(move |k| (s.vaddr >> 12) + k))
}

/// Adds the pages of `sges` to `mem`.
pub fn map(mem: &mut SimMemory, sges: &[Sge]) {
    pfns(sges).for_each(|p| mem.add_page(p));
}

/// Takes the pages of `sges` away from `mem`.
pub fn unmap(mem: &mut SimMemory, sges: &[Sge]) {
    pfns(sges).for_each(|p| mem.remove_page(p));
}

/// What comparing a buffer with the source found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataCheck {
    /// Bytes equal to the source.
    pub verified: u64,
    /// Bytes that differ (a page not there counts whole).
    pub mismatched: u64,
    /// The first page that differs: its address and the remote address it
    /// was read from.
    pub first_bad: Option<(u64, u64)>,
}

/// Compares the pages of `sges` in `mem` with the source bytes from
/// remote address `remote` on, in place (no copy of either side).
pub fn check_data(mem: &SimMemory, sges: &[Sge], remote: u64) -> DataCheck {
    static ZERO: [u8; PAGE_SIZE as usize] = [0; PAGE_SIZE as usize];
    let mut c = DataCheck::default();
    for (k, pfn) in pfns(sges).enumerate() {
        let addr = pfn << 12;
        let from = remote.wrapping_add(k as u64 * u64::from(PAGE_SIZE));
        let bad = match mem.page(pfn) {
            // Never written: it reads as zeros.
            Ok(page) => mismatched_bytes(from, page.unwrap_or(&ZERO)),
            Err(_) => u64::from(PAGE_SIZE),
        };
        if bad > 0 && c.first_bad.is_none() {
            c.first_bad = Some((addr, from));
        }
        c.mismatched += bad;
        c.verified += u64::from(PAGE_SIZE) - bad;
    }
    c
}

/// A node's memory as the source of an engine's payloads (a WRITE's local
/// buffer). Kernel: the kernel virtual addresses the send path copies
/// from.
#[derive(Debug, Clone, Copy)]
pub struct MemSource<'a>(pub &'a SimMemory);

impl SourceData for MemSource<'_> {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        self.0.read(vaddr, out).is_ok()
    }
}

/// Writes the source bytes of remote addresses `remote..` into the pages
/// of `sges` in `mem` (a WRITE's local buffer). Pages not in `mem` are
/// skipped; returns the bytes written.
pub fn fill_data(mem: &mut SimMemory, sges: &[Sge], remote: u64) -> u64 {
    // A page goes in pieces: a whole page's buffer would be a 4 KiB stack
    // frame, over the kernel self-test's budget for one function.
    const PIECE: usize = 512;
    let mut piece = [0u8; PIECE];
    let mut written = 0;
    for (k, pfn) in pfns(sges).enumerate() {
        let src = remote.wrapping_add(k as u64 * u64::from(PAGE_SIZE));
        // A page is mapped whole or not at all: the first piece decides.
        let whole = (0..PAGE_SIZE as usize).step_by(PIECE).all(|off| {
            fill_pattern(src.wrapping_add(off as u64), &mut piece);
            mem.write((pfn << 12).wrapping_add(off as u64), &piece)
                .is_ok()
        });
        if whole {
            written += u64::from(PAGE_SIZE);
        }
    }
    written
}

/// Forgets what the pages of `sges` hold: they read as zeros again (so a
/// later check sees only what is written after this).
pub fn wipe(mem: &mut SimMemory, sges: &[Sge]) {
    unmap(mem, sges);
    map(mem, sges);
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn filled_pages_check_and_wiped_pages_do_not() {
        let mut mem = SimMemory::new();
        let sges = PageAllocator::new(0x10).scattered(3);
        map(&mut mem, &sges);
        assert_eq!(fill_data(&mut mem, &sges, 0x7000), 3 * u64::from(PAGE_SIZE));
        let c = check_data(&mem, &sges, 0x7000);
        assert_eq!((c.verified, c.mismatched), (3 * u64::from(PAGE_SIZE), 0));
        wipe(&mut mem, &sges[1..2]);
        let c = check_data(&mem, &sges, 0x7000);
        assert_eq!(c.first_bad, Some((sges[1].vaddr, 0x8000)));
    }

    #[test]
    fn page_layouts() {
        let mut p = PageAllocator::new(0x100);
        let s = p.scattered(3);
        assert_eq!(
            s.iter().map(|s| s.vaddr >> 12).collect::<Vec<_>>(),
            [0x100, 0x102, 0x104]
        );
        let g = p.with_gaps(4, 0b0100);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].vaddr >> 12, g[0].length), (0x106, 2 * PAGE_SIZE));
        assert_eq!((g[1].vaddr >> 12, g[1].length), (0x109, 2 * PAGE_SIZE));
        assert_eq!(pfns(&g).count(), 4);
    }

    #[test]
    fn data_check_counts_and_names_the_first_bad_page() {
        let mut mem = SimMemory::new();
        let sges = PageAllocator::new(0x10).scattered(2);
        map(&mut mem, &sges);
        let mut page = vec![0u8; PAGE_SIZE as usize];
        fill_pattern(0x9000, &mut page);
        mem.write(sges[0].vaddr, &page).unwrap();
        let c = check_data(&mem, &sges, 0x9000);
        assert_eq!(c.verified + c.mismatched, 2 * u64::from(PAGE_SIZE));
        assert_eq!(c.first_bad, Some((sges[1].vaddr, 0x9000 + 4096)));
        unmap(&mut mem, &sges);
        assert_eq!(mem.page_count(), 0);
    }
}
