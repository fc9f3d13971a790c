// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Simulated physical memory: sparse 4 KiB pages addressed by bus address.
//!
//! The sim's DMA mapping is the identity (bus address = page address), so a
//! page set's DMA address is also where its bytes live here. Pages exist
//! only once allocated; reading or writing an absent page is a typed error,
//! never a panic, so a model bug shows up as a counted fault.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;

use crate::consts::{PAGE_SHIFT, PAGE_SIZE};

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
    pages: BTreeMap<u64, Box<[u8; PAGE_SIZE as usize]>>,
}

impl SimMemory {
    /// Empty memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Backs page frame `pfn` with a zeroed page (no-op if it exists).
    pub fn add_page(&mut self, pfn: u64) {
        self.pages
            .entry(pfn)
            .or_insert_with(|| Box::new([0; PAGE_SIZE as usize]));
    }

    /// Drops the page at frame `pfn`.
    pub fn remove_page(&mut self, pfn: u64) {
        self.pages.remove(&pfn);
    }

    /// Pages allocated.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Copies `data` to memory starting at bus address `addr`, crossing
    /// pages as needed. Nothing is written if any page is missing.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), UnmappedPage> {
        self.check(addr, data.len())?;
        let mut done = 0usize;
        while let Some(rest) = data.get(done..).filter(|r| !r.is_empty()) {
            let a = addr.wrapping_add(done as u64);
            let off = (a & u64::from(PAGE_SIZE - 1)) as usize;
            let page = self
                .pages
                .get_mut(&(a >> PAGE_SHIFT))
                .ok_or(UnmappedPage { addr: a })?;
            let n = rest.len().min(PAGE_SIZE as usize - off);
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
                .pages
                .get(&(a >> PAGE_SHIFT))
                .ok_or(UnmappedPage { addr: a })?;
            let n = (len - done).min(PAGE_SIZE as usize - off);
            if let (Some(dst), Some(src)) = (out.get_mut(done..done + n), page.get(off..off + n)) {
                dst.copy_from_slice(src);
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
}
