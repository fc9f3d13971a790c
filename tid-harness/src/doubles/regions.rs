// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's memory regions: READ regions that serve the pattern,
//! remote-writable ones over scattered pages, and the one counted table
//! of both ([`Regions`]).

use alloc::vec::Vec;
use core::cell::Cell;

use hfi1_hal::consts::PAGE_SIZE;
use tid_flow::Sge;
use tid_read_proto::rc::{MrTable, SourceData};
use tid_read_proto::write::WriteRegions;

#[cfg(doc)]
use super::PageAllocator;
use super::fill_pattern;

/// One memory region of the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First remote address.
    pub base: u64,
    /// Bytes.
    pub len: u64,
    /// Its R_Key.
    pub rkey: u32,
}

impl Region {
    /// True if `[vaddr, vaddr + len)` lies inside the region.
    pub fn covers(&self, vaddr: u64, len: u64) -> bool {
        inside(self.base, self.len, vaddr, len)
    }
}

/// True if `[vaddr, vaddr + len)` lies inside `[base, base + size)`.
fn inside(base: u64, size: u64, vaddr: u64, len: u64) -> bool {
    vaddr
        .checked_add(len)
        .is_some_and(|end| vaddr >= base && end <= base.saturating_add(size))
}

/// A remote-writable memory region of the responder: its pages (one SGE
/// per page, as [`PageAllocator::scattered`] hands them out) in the
/// responder node's memory, where its chip places WRITE data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritableRegion {
    /// First remote address.
    pub base: u64,
    /// Its R_Key.
    pub rkey: u32,
    /// Its pages, in address order, one page each.
    pub pages: Vec<Sge>,
}

impl WritableRegion {
    /// Bytes.
    pub fn len(&self) -> u64 {
        self.pages.len() as u64 * u64::from(PAGE_SIZE)
    }

    /// True if it has no page.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// True if `[vaddr, vaddr + len)` lies inside the region.
    pub fn covers(&self, vaddr: u64, len: u64) -> bool {
        inside(self.base, self.len(), vaddr, len)
    }

    /// The pages behind `[vaddr, vaddr + len)`, both page aligned; empty
    /// if the range is not inside the region.
    pub fn pages_of(&self, vaddr: u64, len: u64) -> &[Sge] {
        if !self.covers(vaddr, len) {
            return &[];
        }
        let first = ((vaddr - self.base) / u64::from(PAGE_SIZE)) as usize;
        let n = len.div_ceil(u64::from(PAGE_SIZE)) as usize;
        self.pages.get(first..first + n).unwrap_or(&[])
    }
}

/// The handle bit of a writable region (READ regions' handles are their
/// index, writable ones this bit plus theirs).
const WRITABLE: u32 = 1 << 31;

/// The responder's memory regions, their reference counts and the data
/// behind them ([`fill_pattern`]), and its remote-writable regions (the
/// pages of [`WritableRegion`]). Kernel: the `rvt_mregion`s behind
/// `rvt_rkey_ok()` / `rvt_put_mr()`.
///
/// One table holds both because one ack queue does: a READ entry's and a
/// WRITE entry's references are put through the same [`MrTable::put`].
/// A handle is the region's index (a writable region's with bit 31 set).
/// A put of a handle never handed out, or of a region with no reference
/// left, is a misuse: it is counted (and changes no count), and
/// [`Regions::misuses`] makes the harness fail at teardown.
#[derive(Debug, Default)]
pub struct Regions {
    regions: Vec<(Region, Cell<u64>)>,
    writable: Vec<(WritableRegion, Cell<u64>)>,
    misuses: Cell<u64>,
}

impl Regions {
    /// No region.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a region; returns its handle.
    pub fn add(&mut self, r: Region) -> u32 {
        self.regions.push((r, Cell::new(0)));
        u32::try_from(self.regions.len() - 1).unwrap_or(u32::MAX)
    }

    /// Adds a remote-writable region; returns its handle.
    pub fn add_writable(&mut self, r: WritableRegion) -> u32 {
        self.writable.push((r, Cell::new(0)));
        u32::try_from(self.writable.len() - 1).unwrap_or(u32::MAX) | WRITABLE
    }

    /// The writable region `i` (in the order added).
    pub fn writable(&self, i: usize) -> Option<&WritableRegion> {
        self.writable.get(i).map(|(r, _)| r)
    }

    /// The writable region covering `[vaddr, vaddr + len)`.
    pub fn writable_at(&self, vaddr: u64, len: u64) -> Option<&WritableRegion> {
        self.writable
            .iter()
            .map(|(r, _)| r)
            .find(|r| r.covers(vaddr, len))
    }

    /// References held now, over every region.
    pub fn refs(&self) -> u64 {
        let n = |v: &Cell<u64>| v.get();
        self.regions.iter().map(|(_, c)| n(c)).sum::<u64>()
            + self.writable.iter().map(|(_, c)| n(c)).sum::<u64>()
    }

    /// Puts of an unknown handle or of a region with no reference left.
    pub fn misuses(&self) -> u64 {
        self.misuses.get()
    }

    /// The reference count behind handle `mr`.
    fn count(&self, mr: u32) -> Option<&Cell<u64>> {
        if mr & WRITABLE != 0 {
            self.writable.get((mr & !WRITABLE) as usize).map(|(_, c)| c)
        } else {
            self.regions.get(mr as usize).map(|(_, c)| c)
        }
    }
}

/// Takes a reference on the first region of `list` that `hit`s; its
/// index, if that fits a handle (below [`WRITABLE`]).
fn take_ref<R>(list: &[(R, Cell<u64>)], hit: impl Fn(&R) -> bool) -> Option<u32> {
    let (i, (_, refs)) = list.iter().enumerate().find(|(_, (r, _))| hit(r))?;
    let mr = u32::try_from(i).ok().filter(|i| i & WRITABLE == 0)?;
    refs.set(refs.get() + 1);
    Some(mr)
}

impl MrTable for Regions {
    fn get(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        take_ref(&self.regions, |r| {
            r.rkey == rkey && r.covers(vaddr, u64::from(len))
        })
    }

    fn put(&self, mr: u32) {
        match self.count(mr) {
            Some(refs) if refs.get() > 0 => refs.set(refs.get() - 1),
            _ => self.misuses.set(self.misuses.get() + 1),
        }
    }
}

impl WriteRegions for Regions {
    fn get_write(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        let mr = take_ref(&self.writable, |r| {
            r.rkey == rkey && r.covers(vaddr, u64::from(len))
        })?;
        Some(mr | WRITABLE)
    }

    fn write_pages(&self, mr: u32, vaddr: u64) -> Option<(&[Sge], u64)> {
        if mr & WRITABLE == 0 {
            return None;
        }
        let (r, _) = self.writable.get((mr & !WRITABLE) as usize)?;
        r.covers(vaddr, 0)
            .then(|| (r.pages.as_slice(), vaddr - r.base))
            .filter(|&(_, off)| off < r.len())
    }
}

impl SourceData for Regions {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        let inside = self
            .regions
            .iter()
            .any(|(r, _)| r.covers(vaddr, out.len() as u64));
        if inside {
            fill_pattern(vaddr, out);
        }
        inside
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doubles::PageAllocator;

    #[test]
    fn a_put_of_an_unknown_handle_or_twice_is_a_misuse() {
        let mut r = Regions::new();
        r.add(Region {
            base: 0x1000,
            len: 0x1000,
            rkey: 7,
        });
        assert_eq!(r.get(0x1800, 0x800, 7), Some(0));
        assert_eq!(r.get(0x1800, 0x801, 7), None, "past the end");
        assert_eq!(r.get(0x1000, 8, 8), None, "other key");
        assert_eq!(r.refs(), 1);
        r.put(0);
        r.put(0);
        r.put(5);
        assert_eq!((r.refs(), r.misuses()), (0, 2));
    }

    #[test]
    fn writable_regions_share_the_handle_space_and_give_their_pages() {
        let mut r = Regions::new();
        r.add(Region {
            base: 0x1000,
            len: 0x1000,
            rkey: 7,
        });
        let pages = PageAllocator::new(0x40).scattered(4);
        let h = r.add_writable(WritableRegion {
            base: 0x10_0000,
            rkey: 9,
            pages: pages.clone(),
        });
        assert_eq!(
            r.get_write(0x1000, 8, 7),
            None,
            "a READ region is not writable"
        );
        assert_eq!(r.get(0x10_0000, 8, 9), None, "nor a writable one readable");
        assert_eq!(r.get_write(0x10_1000, 0x3001, 9), None, "past the end");
        let m = r.get_write(0x10_1000, 0x3000, 9).unwrap();
        assert_eq!(m, h);
        let (p, off) = r.write_pages(m, 0x10_2000).unwrap();
        assert_eq!((p.len(), off), (4, 0x2000));
        assert_eq!(r.write_pages(0, 0x10_2000), None, "a READ handle");
        assert_eq!(r.write_pages(m, 0x10_4000), None, "outside");
        let w = r.writable_at(0x10_1000, 0x2000).unwrap();
        assert_eq!(w.pages_of(0x10_1000, 0x2000), &pages[1..3]);
        let a = r.get(0x1000, 8, 7).unwrap();
        assert_eq!(r.refs(), 2);
        r.put(m);
        r.put(a);
        r.put(m);
        assert_eq!((r.refs(), r.misuses()), (0, 1));
    }
}
