// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Simulated physical memory: sparse 4 KiB pages addressed by bus address.
//!
//! The sim's DMA mapping is the identity (bus address = page address), so a
//! page set's DMA address is also where its bytes live here. Pages exist
//! only once added; reading or writing an absent page is a typed error,
//! never a panic, so a model bug shows up as a counted fault.
//!
//! # What it costs
//!
//! A page that was added but never written takes no page of host memory:
//! it reads as zeros and is backed on its first write. A removed page's
//! backing goes to a spare list for the next first write, so a simulation
//! that adds and removes pages at a steady rate allocates nothing once
//! warm. A first write that covers the whole page takes a spare page as it
//! is (every byte is overwritten); a partial one zeroes it first, so a
//! page always reads as zeros where it was not written.
//!
//! A new backing is allocated only when the spare list is empty, so the
//! pages written and not yet removed plus the spare ones never exceed the
//! most pages written and not removed at any one time
//! ([`SimMemory::peak_resident_pages`]): host memory is bounded by that
//! peak, not by the pages ever added.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::consts::{PAGE_SHIFT, PAGE_SIZE};

/// Bytes of a page.
const PAGE: usize = PAGE_SIZE as usize;

/// One page of bytes.
pub type Page = [u8; PAGE];

/// An access touched a page that was never allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no simulated page at address {addr:#x}")]
pub struct UnmappedPage {
    /// The first address that was not backed by a page.
    pub addr: u64,
}

/// Sparse simulated memory.
#[derive(Debug, Default, Clone)]
pub struct SimMemory {
    /// Every page added, by frame number: `None` until first written.
    pages: BTreeMap<u64, Option<Box<Page>>>,
    /// Backing of removed pages, for reuse (contents stale).
    spare: Vec<Box<Page>>,
    /// Pages with backing now.
    resident: usize,
    /// Most pages with backing at once.
    peak_resident: usize,
}

impl SimMemory {
    /// Empty memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds page frame `pfn`, reading as zeros (no-op if it exists). No
    /// host memory is taken until it is written.
    pub fn add_page(&mut self, pfn: u64) {
        self.pages.entry(pfn).or_insert(None);
    }

    /// Drops the page at frame `pfn`; its backing is kept for the next
    /// first write.
    pub fn remove_page(&mut self, pfn: u64) {
        if let Some(Some(page)) = self.pages.remove(&pfn) {
            self.resident -= 1;
            self.spare.push(page);
        }
    }

    /// Pages added and not removed.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Pages that hold host memory now (written and not removed).
    pub fn resident_pages(&self) -> usize {
        self.resident
    }

    /// The most pages that held host memory at once.
    pub fn peak_resident_pages(&self) -> usize {
        self.peak_resident
    }

    /// The bytes of page `pfn`: `Ok(None)` for a page that was added and
    /// never written (it reads as zeros).
    ///
    /// # Errors
    ///
    /// [`UnmappedPage`] if the page was never added.
    pub fn page(&self, pfn: u64) -> Result<Option<&Page>, UnmappedPage> {
        match self.pages.get(&pfn) {
            Some(p) => Ok(p.as_deref()),
            None => Err(UnmappedPage {
                addr: pfn << PAGE_SHIFT,
            }),
        }
    }

    /// Backing for a page's first write: a spare page (zeroed unless the
    /// write covers it whole) or a new zeroed one.
    fn back(spare: &mut Vec<Box<Page>>, whole: bool) -> Box<Page> {
        match spare.pop() {
            Some(mut p) => {
                if !whole {
                    p.fill(0);
                }
                p
            }
            // Zeroed by the allocator (fresh heap pages are zero already).
            None => alloc::vec![0u8; PAGE]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| Box::new([0; PAGE])),
        }
    }

    /// Copies `data` to memory starting at bus address `addr`, crossing
    /// pages as needed. Nothing is written if any page is missing.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), UnmappedPage> {
        self.check(addr, data.len())?;
        let mut done = 0usize;
        while let Some(rest) = data.get(done..).filter(|r| !r.is_empty()) {
            let a = addr.wrapping_add(done as u64);
            let off = (a & u64::from(PAGE_SIZE - 1)) as usize;
            let n = rest.len().min(PAGE - off);
            let slot = self
                .pages
                .get_mut(&(a >> PAGE_SHIFT))
                .ok_or(UnmappedPage { addr: a })?;
            let page = match slot {
                Some(p) => p,
                None => {
                    self.resident += 1;
                    self.peak_resident = self.peak_resident.max(self.resident);
                    slot.insert(Self::back(&mut self.spare, n == PAGE))
                }
            };
            if let (Some(dst), Some(src)) = (page.get_mut(off..off + n), rest.get(..n)) {
                dst.copy_from_slice(src);
            }
            done += n;
        }
        Ok(())
    }

    /// Copies memory starting at `addr` into `out`.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), UnmappedPage> {
        let mut done = 0usize;
        let len = out.len();
        while done < len {
            let a = addr.wrapping_add(done as u64);
            let off = (a & u64::from(PAGE_SIZE - 1)) as usize;
            let page = self
                .page(a >> PAGE_SHIFT)
                .map_err(|_| UnmappedPage { addr: a })?;
            let n = (len - done).min(PAGE - off);
            if let Some(dst) = out.get_mut(done..done + n) {
                match page.and_then(|p| p.get(off..off + n)) {
                    Some(src) => dst.copy_from_slice(src),
                    None => dst.fill(0),
                }
            }
            done += n;
        }
        Ok(())
    }

    /// Checks every page of `addr .. addr + len` exists.
    fn check(&self, addr: u64, len: usize) -> Result<(), UnmappedPage> {
        if len == 0 {
            return Ok(());
        }
        let first = addr >> PAGE_SHIFT;
        let last = addr.wrapping_add(len as u64 - 1) >> PAGE_SHIFT;
        let mut pfn = first;
        loop {
            if !self.pages.contains_key(&pfn) {
                return Err(UnmappedPage {
                    addr: (pfn << PAGE_SHIFT).max(addr),
                });
            }
            if pfn >= last {
                return Ok(());
            }
            pfn += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_across_pages() {
        let mut m = SimMemory::new();
        m.add_page(10);
        m.add_page(11);
        let data: alloc::vec::Vec<u8> = (0..6000u32).map(|i| i as u8).collect();
        m.write(10 * 4096 + 100, &data).unwrap();
        let mut back = alloc::vec![0u8; 6000];
        m.read(10 * 4096 + 100, &mut back).unwrap();
        assert_eq!(back, data);
        assert_eq!(
            m.write(11 * 4096 + 4000, &[0; 200]),
            Err(UnmappedPage { addr: 12 * 4096 })
        );
        // Nothing was written by the failed call.
        let mut one = [9u8; 1];
        m.read(11 * 4096 + 4000, &mut one).unwrap();
        assert_eq!(one, [0]);
    }

    #[test]
    fn pages_take_memory_only_once_written() {
        let mut m = SimMemory::new();
        for pfn in 0..100 {
            m.add_page(pfn);
        }
        assert_eq!((m.page_count(), m.resident_pages()), (100, 0));
        let mut b = [7u8; 16];
        m.read(5 * 4096, &mut b).unwrap();
        assert_eq!(b, [0; 16], "an unwritten page reads as zeros");
        assert_eq!(m.page(5).unwrap(), None);
        assert!(m.page(100).is_err());
        m.write(5 * 4096 + 8, &[1, 2]).unwrap();
        assert_eq!(m.resident_pages(), 1);
        assert_eq!(
            m.page(5).unwrap().map(|p| &p[6..12]),
            Some(&[0, 0, 1, 2, 0, 0][..])
        );
        m.remove_page(5);
        assert_eq!((m.page_count(), m.resident_pages()), (99, 0));
        assert_eq!(m.peak_resident_pages(), 1);
    }

    #[test]
    fn a_reused_page_reads_as_zeros_where_not_written() {
        let mut m = SimMemory::new();
        m.add_page(1);
        m.write(4096, &[0xAB; PAGE]).unwrap();
        m.remove_page(1);
        // The stale backing is reused for page 2's partial first write.
        m.add_page(2);
        m.write(2 * 4096 + 100, &[1]).unwrap();
        let p = m.page(2).unwrap().unwrap();
        assert_eq!(p.iter().filter(|&&b| b != 0).count(), 1);
        // A whole-page first write overwrites every byte.
        m.remove_page(2);
        m.add_page(3);
        m.write(3 * 4096, &[5; PAGE]).unwrap();
        assert!(m.page(3).unwrap().unwrap().iter().all(|&b| b == 5));
        assert_eq!(m.peak_resident_pages(), 1);
    }

    #[test]
    fn backing_never_exceeds_the_peak() {
        let mut m = SimMemory::new();
        for round in 0..50u64 {
            // A wave of up to 40 pages written, then removed.
            let n = 10 + (round * 7) % 31;
            for k in 0..n {
                m.add_page(round * 100 + k);
                m.write((round * 100 + k) * 4096, &[1; PAGE]).unwrap();
            }
            for k in 0..n {
                m.remove_page(round * 100 + k);
            }
            assert!(m.resident_pages() + m.spare.len() <= m.peak_resident_pages());
        }
        assert_eq!(m.peak_resident_pages(), 40);
    }
}
