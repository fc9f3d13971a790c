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
//!
//! Pages are found through a table of 2 MiB chunks (512 page slots each)
//! keyed by chunk number: a lookup is a search among the few chunks in
//! use, not among every page posted, and pages next to each other share
//! their chunk's slots.
//!
//! Backings come from slabs, never from one allocation per page. In host
//! builds (feature `std`) a slab is 512 pages, aligned to 2 MiB and
//! offered to the kernel for a transparent huge page before it is first
//! touched: a simulation that backs tens of MiB takes one page fault per
//! 2 MiB instead of one per 4 KiB (per-page faults are otherwise a large
//! share of a run's time). Without `std` (the kernel self-test, where a
//! 2 MiB-aligned allocation is not to be asked for) a slab is one page.
//! A slab's pages are handed out once each; a page
//! given back goes to the spare list, so the bound above still holds, up
//! to the last slab's pages not yet handed out.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::mem::MaybeUninit;

use crate::consts::{PAGE_SHIFT, PAGE_SIZE};

/// Bytes of a page.
const PAGE: usize = PAGE_SIZE as usize;

/// Page frame numbers per chunk, as a shift.
const CHUNK_SHIFT: u32 = 9;
/// Pages per chunk.
const CHUNK_PAGES: usize = 1 << CHUNK_SHIFT;

/// One page of bytes.
pub type Page = [u8; PAGE];

/// Pages per slab: 2 MiB in host builds (one transparent huge page).
#[cfg(feature = "std")]
const SLAB_PAGES: usize = 512;
/// Pages per slab: one, where large aligned allocations are not wanted.
#[cfg(not(feature = "std"))]
const SLAB_PAGES: usize = 1;

/// Marks a chunk slot without backing.
const NO_FRAME: u32 = u32::MAX;

/// A slab of page backings, aligned so that a host build's slab is one
/// huge-page frame. Its pages are uninitialised until handed out: a page
/// is written whole (the first write's bytes, zeros around them) when it
/// leaves the slab, so the slab itself is never zeroed in a pass of its
/// own (the kernel already clears the huge page on its first touch).
#[cfg_attr(feature = "std", repr(C, align(2097152)))]
#[cfg_attr(not(feature = "std"), repr(C))]
struct Slab([MaybeUninit<Page>; SLAB_PAGES]);

impl Slab {
    /// A new slab, on the heap (it is too large for the stack).
    fn new_boxed() -> Box<Self> {
        let mut slab = Box::<Self>::new_uninit();
        advise_huge(slab.as_mut_ptr().cast(), core::mem::size_of::<Self>());
        // SAFETY: `Slab` is an array of `MaybeUninit`, which needs no
        // initialisation.
        unsafe { slab.assume_init() }
    }
}

impl core::fmt::Debug for Slab {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Slab({} pages)", SLAB_PAGES)
    }
}

/// Asks the host kernel to back `len` bytes at `addr` with transparent
/// huge pages (`madvise(MADV_HUGEPAGE)`); a refusal only costs speed.
#[cfg(all(feature = "std", target_os = "linux", not(miri)))]
fn advise_huge(addr: *mut u8, len: usize) {
    /// `MADV_HUGEPAGE` of `<asm-generic/mman-common.h>`.
    const MADV_HUGEPAGE: core::ffi::c_int = 14;
    unsafe extern "C" {
        fn madvise(
            addr: *mut core::ffi::c_void,
            len: usize,
            advice: core::ffi::c_int,
        ) -> core::ffi::c_int;
    }
    // SAFETY: `madvise` only changes how the kernel backs the range, never
    // its contents or its mapping; the range is one allocation this
    // process owns (the libc symbol is linked with `std`). The result is
    // ignored on purpose: without huge pages the slab works the same.
    let _ = unsafe { madvise(addr.cast(), len, MADV_HUGEPAGE) };
}

/// No huge pages to ask for in this build.
#[cfg(not(all(feature = "std", target_os = "linux", not(miri))))]
fn advise_huge(_addr: *mut u8, _len: usize) {}

/// Where page backings live: slabs, the pages handed out of them so far,
/// and those given back.
#[derive(Debug, Default)]
struct Frames {
    slabs: Vec<Box<Slab>>,
    /// Frames handed out of the slabs (the next fresh one is this).
    fresh: usize,
    /// Frames given back, for reuse (contents stale).
    spare: Vec<u32>,
}

impl Clone for Frames {
    fn clone(&self) -> Self {
        // Fresh frames are handed out in order, so taking them again one
        // by one gives each the same number.
        let mut n = Self::default();
        for f in 0..self.fresh {
            let page = u32::try_from(f).ok().and_then(|f| self.get(f));
            let _ = n.take(0, page.map_or(&[0; PAGE], |p| p));
        }
        n.spare.clone_from(&self.spare);
        n
    }
}

impl Frames {
    /// Slab and page within it of `frame`.
    const fn place(frame: u32) -> (usize, usize) {
        let f = frame as usize;
        (f / SLAB_PAGES, f - (f / SLAB_PAGES) * SLAB_PAGES)
    }

    fn get(&self, frame: u32) -> Option<&Page> {
        if frame as usize >= self.fresh {
            return None;
        }
        let (slab, page) = Self::place(frame);
        let slot = self.slabs.get(slab)?.0.get(page)?;
        // SAFETY: every frame below `fresh` was written whole when it was
        // handed out (`take`), and stays initialised after.
        Some(unsafe { slot.assume_init_ref() })
    }

    fn get_mut(&mut self, frame: u32) -> Option<&mut Page> {
        if frame as usize >= self.fresh {
            return None;
        }
        let (slab, page) = Self::place(frame);
        let slot = self.slabs.get_mut(slab)?.0.get_mut(page)?;
        // SAFETY: as in `get`: frames below `fresh` are initialised.
        Some(unsafe { slot.assume_init_mut() })
    }

    /// A frame for a page's first write of `data` at offset `off`, with
    /// the write done: a spare frame (zeroed first unless `data` covers it
    /// whole) or a fresh one (`data` and zeros around it). `None` if
    /// `data` does not fit the page at `off`, or the frame numbers ran out.
    fn take(&mut self, off: usize, data: &[u8]) -> Option<u32> {
        let end = off.checked_add(data.len()).filter(|&e| e <= PAGE)?;
        if let Some(f) = self.spare.pop() {
            let p = self.get_mut(f)?;
            if data.len() < PAGE {
                p.fill(0);
            }
            p.get_mut(off..end)?.copy_from_slice(data);
            return Some(f);
        }
        let f = u32::try_from(self.fresh).ok().filter(|&f| f != NO_FRAME)?;
        if self.fresh == self.slabs.len() * SLAB_PAGES {
            self.slabs.push(Slab::new_boxed());
        }
        let (slab, page) = Self::place(f);
        let slot = self.slabs.get_mut(slab)?.0.get_mut(page)?;
        let dst = slot.as_mut_ptr().cast::<u8>();
        // SAFETY: `dst` is the start of this slot's `PAGE` bytes, owned by
        // the slab and not yet handed out (no reference to them exists);
        // `off <= end <= PAGE`, so the three ranges [0, off), [off, end)
        // and [end, PAGE) are inside the slot and together cover it, and
        // `data` is caller memory, never a slot not yet handed out.
        unsafe {
            core::ptr::write_bytes(dst, 0, off);
            core::ptr::copy_nonoverlapping(data.as_ptr(), dst.add(off), data.len());
            core::ptr::write_bytes(dst.add(end), 0, PAGE - end);
        }
        self.fresh += 1;
        Some(f)
    }
}

/// An access touched a page that was never allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no simulated page at address {addr:#x}")]
pub struct UnmappedPage {
    /// The first address that was not backed by a page.
    pub addr: u64,
}

/// 512 consecutive page frames: which were added, and the backing of
/// those written.
#[derive(Debug, Clone)]
struct Chunk {
    /// Bit `i % 64` of word `i / 64`: page `i` of the chunk was added.
    added: [u64; CHUNK_PAGES / 64],
    /// Pages added.
    count: u32,
    /// Frame backing page `i`, [`NO_FRAME`] until it is written.
    backing: Box<[u32]>,
}

impl Chunk {
    fn new() -> Self {
        Self {
            added: [0; CHUNK_PAGES / 64],
            count: 0,
            backing: alloc::vec![NO_FRAME; CHUNK_PAGES].into_boxed_slice(),
        }
    }

    /// Slot of page frame `pfn` (its low bits).
    const fn slot(pfn: u64) -> usize {
        (pfn as usize) & (CHUNK_PAGES - 1)
    }

    fn has(&self, slot: usize) -> bool {
        self.added
            .get(slot / 64)
            .is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }

    /// Marks `slot` added or not; returns whether that changed it.
    fn set(&mut self, slot: usize, on: bool) -> bool {
        let Some(w) = self.added.get_mut(slot / 64) else {
            return false;
        };
        let bit = 1u64 << (slot % 64);
        let was = *w & bit != 0;
        if on {
            *w |= bit;
        } else {
            *w &= !bit;
        }
        was != on
    }
}

/// Sparse simulated memory.
#[derive(Debug, Default, Clone)]
pub struct SimMemory {
    /// The chunks with a page added, by chunk number (`pfn >> 9`).
    chunks: BTreeMap<u64, Chunk>,
    /// Pages added and not removed.
    count: usize,
    /// The backings, in use and spare.
    frames: Frames,
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
        let chunk = self
            .chunks
            .entry(pfn >> CHUNK_SHIFT)
            .or_insert_with(Chunk::new);
        if chunk.set(Chunk::slot(pfn), true) {
            chunk.count += 1;
            self.count += 1;
        }
    }

    /// Drops the page at frame `pfn`; its backing is kept for the next
    /// first write.
    pub fn remove_page(&mut self, pfn: u64) {
        let key = pfn >> CHUNK_SHIFT;
        let Some(chunk) = self.chunks.get_mut(&key) else {
            return;
        };
        let slot = Chunk::slot(pfn);
        if !chunk.set(slot, false) {
            return;
        }
        chunk.count -= 1;
        self.count -= 1;
        if let Some(b) = chunk.backing.get_mut(slot) {
            let frame = core::mem::replace(b, NO_FRAME);
            if frame != NO_FRAME {
                self.resident -= 1;
                self.frames.spare.push(frame);
            }
        }
        if chunk.count == 0 {
            self.chunks.remove(&key);
        }
    }

    /// Pages added and not removed.
    pub fn page_count(&self) -> usize {
        self.count
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
        let slot = Chunk::slot(pfn);
        match self.chunks.get(&(pfn >> CHUNK_SHIFT)) {
            Some(c) if c.has(slot) => Ok(c
                .backing
                .get(slot)
                .filter(|&&f| f != NO_FRAME)
                .and_then(|&f| self.frames.get(f))),
            _ => Err(UnmappedPage {
                addr: pfn << PAGE_SHIFT,
            }),
        }
    }

    /// Copies `data` to memory starting at bus address `addr`, crossing
    /// pages as needed. Nothing is written if any page is missing.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), UnmappedPage> {
        let off = (addr & u64::from(PAGE_SIZE - 1)) as usize;
        if off.saturating_add(data.len()) > PAGE {
            // Across pages: every page is checked before any is written.
            self.check(addr, data.len())?;
        }
        let mut done = 0usize;
        while let Some(rest) = data.get(done..).filter(|r| !r.is_empty()) {
            let a = addr.wrapping_add(done as u64);
            let off = (a & u64::from(PAGE_SIZE - 1)) as usize;
            let n = rest.len().min(PAGE - off);
            let pfn = a >> PAGE_SHIFT;
            let slot = Chunk::slot(pfn);
            let backing = match self.chunks.get_mut(&(pfn >> CHUNK_SHIFT)) {
                Some(c) if c.has(slot) => c.backing.get_mut(slot),
                _ => None,
            }
            .ok_or(UnmappedPage { addr: a })?;
            let src = rest.get(..n).unwrap_or(&[]);
            if *backing == NO_FRAME {
                *backing = self.frames.take(off, src).ok_or(UnmappedPage { addr: a })?;
                self.resident += 1;
                self.peak_resident = self.peak_resident.max(self.resident);
            } else {
                let page = self
                    .frames
                    .get_mut(*backing)
                    .ok_or(UnmappedPage { addr: a })?;
                if let Some(dst) = page.get_mut(off..off + n) {
                    dst.copy_from_slice(src);
                }
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
            if self.page(pfn).is_err() {
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
            m.write(11 * 4096 + 4000, &[7; 200]),
            Err(UnmappedPage { addr: 12 * 4096 })
        );
        // Nothing was written by the failed call, not even on the page
        // that exists.
        let mut back = [9u8; 96];
        m.read(11 * 4096 + 4000, &mut back).unwrap();
        assert_eq!(back, [0; 96]);
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
        assert_eq!(m.page(100), Err(UnmappedPage { addr: 100 * 4096 }));
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
    fn pages_in_and_across_chunks_are_counted_once() {
        let mut m = SimMemory::new();
        // The last page of chunk 0, the first of chunk 1, one far away.
        for pfn in [511, 512, 512, 1 << 40] {
            m.add_page(pfn);
        }
        assert_eq!(m.page_count(), 3);
        assert!(m.page(510).is_err() && m.page(513).is_err());
        // A write across the chunk boundary, and one that would run into
        // a missing page (nothing written by it).
        let data: Vec<u8> = (0..200u32).map(|i| i as u8 | 1).collect();
        m.write(512 * 4096 - 100, &data).unwrap();
        assert_eq!(
            m.write(513 * 4096 - 100, &data),
            Err(UnmappedPage { addr: 513 * 4096 })
        );
        let mut back = [0u8; 200];
        m.read(512 * 4096 - 100, &mut back).unwrap();
        assert_eq!(back[..], data[..]);
        assert_eq!(m.resident_pages(), 2);
        // Removing a page never added changes nothing; the last page of a
        // chunk takes the chunk with it.
        m.remove_page(510);
        assert_eq!(m.page_count(), 3);
        m.remove_page(511);
        m.remove_page(512);
        assert_eq!(
            (m.page_count(), m.resident_pages(), m.chunks.len()),
            (1, 0, 1)
        );
        assert_eq!(m.frames.spare.len(), 2);
        m.remove_page(1 << 40);
        assert!(m.chunks.is_empty());
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
            assert!(m.resident_pages() + m.frames.spare.len() <= m.peak_resident_pages());
        }
        assert_eq!(m.peak_resident_pages(), 40);
    }

    #[test]
    fn pages_past_one_slab_keep_their_own_bytes() {
        // More pages than a host slab holds: each frame is its own page,
        // in the first slab and in the next.
        let n = SLAB_PAGES as u64 + 100;
        let mut m = SimMemory::new();
        for pfn in 0..n {
            m.add_page(pfn);
            m.write(pfn * 4096, &[pfn as u8; PAGE]).unwrap();
        }
        for pfn in 0..n {
            let p = m.page(pfn).unwrap().unwrap();
            assert!(p.iter().all(|&b| b == pfn as u8), "page {pfn}");
        }
        // A copy owns its bytes: writing the original leaves it alone.
        let copy = m.clone();
        m.write(3 * 4096, &[0xEE; 8]).unwrap();
        assert_eq!(copy.page(3).unwrap().unwrap()[..8], [3; 8]);
        assert_eq!(m.page(3).unwrap().unwrap()[..8], [0xEE; 8]);
        // Frames given back are reused before a fresh one is taken.
        m.remove_page(0);
        m.add_page(n);
        m.write(n * 4096 + 1, &[9]).unwrap();
        assert_eq!(m.page(n).unwrap().unwrap()[..3], [0, 9, 0]);
        assert_eq!(m.frames.fresh, n as usize);
        assert_eq!(m.peak_resident_pages(), n as usize);
    }
}
