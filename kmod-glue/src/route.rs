// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Stateless functions the rebuilt `hfi1.ko` routes to.
//!
//! The C adapters in `hfi1/hfi1_tid_route.c` convert the driver's own
//! structures (bitfield pagesets, `struct page` pointers, the flow bitmap,
//! `struct tid_rdma_params`) to the plain arguments taken here and back.
//! Each function says which kernel function it replaces.

use hfi1_hal::consts::{MAX_PAGESETS, MAX_SEGMENT_PAGES, PAGE_SIZE};
use tid_alloc::AllocError;
use tid_alloc::pageset::{self, PageSet, PageSets};

use hfi1_hal::consts::NUM_TID_FLOWS;
use hfi1_hal::{FlowIndex, Generation};
use tid_flow::FlowError;
use tid_flow::flows::HwFlows;
use tid_read_proto::opfn::TidParams;

use crate::errno::Errno;

impl From<FlowError> for Errno {
    fn from(e: FlowError) -> Self {
        match e {
            FlowError::Again => Errno::AGAIN,
            FlowError::NoMemory => Errno::NOMEM,
            FlowError::Busy => Errno::BUSY,
            FlowError::Alloc(a) => a.into(),
            FlowError::Invalid | FlowError::NoFlowRecords | FlowError::Wait(_) => Errno::INVAL,
        }
    }
}

/// Reserves a hardware flow in the context's flow bitmap `*mask` (bit i =
/// flow i taken): flow `last` if it is in `0..32` and free, else the lowest
/// free one. Returns the flow index, or `-EAGAIN` with `*mask` unchanged
/// when all 32 are taken (`-EINVAL` for a null `mask`).
///
/// Kernel: `kern_reserve_flow()`.
///
/// # Safety
///
/// `mask` is null or valid for a read and a write.
///
/// # Locking
///
/// The receive context's `exp_lock` (it guards the bitmap).
#[unsafe(no_mangle)]
// The conversion below is the identity while `reserve` reports `FlowError`.
#[allow(clippy::useless_conversion)]
pub unsafe extern "C" fn hfi1_tid_flow_reserve(mask: *mut u32, last: i32) -> i32 {
    // SAFETY: the caller promises `mask` is null or valid.
    let Some(mask) = (unsafe { mask.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    // The engine keeps the bitmap inside `HwFlows`; rebuild that state from
    // the driver's word: reserving each taken flow by index in a fresh
    // bitmap sets exactly its bit.
    let mut flows = HwFlows::with_generations([Generation::RESERVED; NUM_TID_FLOWS]);
    for i in 0..NUM_TID_FLOWS as u32 {
        if *mask & (1 << i) != 0 && flows.reserve(FlowIndex::new(i)).is_err() {
            return Errno::INVAL.to_neg();
        }
    }
    let last = u32::try_from(last).ok().and_then(FlowIndex::new);
    match flows.reserve(last) {
        Ok(f) => {
            *mask = flows.mask();
            i32::from(f.get())
        }
        // Through FlowError, whatever error type `reserve` reports.
        Err(e) => Errno::from(FlowError::from(e)).to_neg(),
    }
}

/// The TID RDMA parameters as they cross the boundary
/// (`struct hfi1_tid_opfn_params`; the driver's `struct tid_rdma_params`
/// without its RCU head and the version, which OPFN never carries).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpfnParams {
    /// KDETH QPN: prefix << 16 | receive context.
    pub qp: u32,
    /// Largest segment in bytes.
    pub max_len: u32,
    /// J_KEY.
    pub jkey: u16,
    /// READ segments in flight.
    pub max_read: u8,
    /// WRITE segments in flight.
    pub max_write: u8,
    /// ACK timeout exponent.
    pub timeout: u8,
    /// Urgent-interrupt capable.
    pub urg: u8,
}

impl From<OpfnParams> for TidParams {
    fn from(p: OpfnParams) -> Self {
        Self {
            qp: p.qp,
            max_len: p.max_len,
            jkey: p.jkey,
            max_read: p.max_read,
            max_write: p.max_write,
            timeout: p.timeout,
            urg: p.urg,
        }
    }
}

impl From<TidParams> for OpfnParams {
    fn from(p: TidParams) -> Self {
        Self {
            qp: p.qp,
            max_len: p.max_len,
            jkey: p.jkey,
            max_read: p.max_read,
            max_write: p.max_write,
            timeout: p.timeout,
            urg: p.urg,
        }
    }
}

/// Packs TID RDMA parameters into the OPFN word (0 for a null `p`).
///
/// Kernel: `tid_rdma_opfn_encode()`.
///
/// # Safety
///
/// `p` is null or valid for reading.
///
/// # Locking
///
/// None: a pure function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_opfn_encode(p: *const OpfnParams) -> u64 {
    // SAFETY: the caller promises `p` is null or valid.
    match unsafe { p.as_ref() } {
        Some(p) => TidParams::from(*p).encode(),
        None => 0,
    }
}

/// Unpacks an OPFN word into `*p`. Returns 0, or `-EINVAL` for a null `p`.
///
/// Kernel: `tid_rdma_opfn_decode()`.
///
/// # Safety
///
/// `p` is null or valid for writing.
///
/// # Locking
///
/// None: a pure function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_opfn_decode(data: u64, p: *mut OpfnParams) -> i32 {
    // SAFETY: the caller promises `p` is null or valid.
    match unsafe { p.as_mut() } {
        Some(p) => {
            *p = TidParams::decode(data).into();
            0
        }
        None => Errno::INVAL.to_neg(),
    }
}

/// One page set as it crosses the boundary (`struct hfi1_tid_pageset`):
/// the index of its first page in the segment and its page count
/// (0 = filler, whose `idx` is meaningless: the driver never writes it).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageSetC {
    /// Index of the first page.
    pub idx: u32,
    /// Pages in the set; 0 for a filler.
    pub count: u32,
}

impl From<AllocError> for Errno {
    fn from(e: AllocError) -> Self {
        match e {
            AllocError::NoSpace => Errno::AGAIN,
            _ => Errno::INVAL,
        }
    }
}

/// Borrows a C array, or fails for a null pointer with a non-zero length.
///
/// # Safety
///
/// `ptr` is null or valid for reading `len` values.
unsafe fn c_slice<'a, T>(ptr: *const T, len: usize) -> Result<&'a [T], Errno> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: non-null and valid for `len` reads, by the caller.
    Ok(unsafe { core::slice::from_raw_parts(ptr, len) })
}

/// Copies `sets[from..]` to `out[from..]`, or fails if `out` is too short.
///
/// # Safety
///
/// `out` is null or valid for writing `cap` values.
unsafe fn write_sets(
    sets: &PageSets,
    from: usize,
    out: *mut PageSetC,
    cap: u32,
) -> Result<i32, Errno> {
    if sets.len() > cap as usize || (out.is_null() && sets.len() > from) {
        return Err(Errno::INVAL);
    }
    for (i, s) in sets.iter().enumerate().skip(from) {
        // SAFETY: `i < sets.len() <= cap` and `out` is valid for `cap`
        // writes, by the caller.
        unsafe {
            out.add(i).write(PageSetC {
                idx: u32::from(s.idx),
                count: u32::from(s.count),
            })
        };
    }
    i32::try_from(sets.len()).map_err(|_| Errno::INVAL)
}

/// Page sets of one segment, 4 KiB path MTU. `pages` holds `npages` page
/// addresses (kernel virtual, page aligned, non-zero); `out` room for
/// `cap` sets. Returns the number of sets or a negative errno
/// (`-EINVAL` for more than 64 pages, a bad address or too small `out`).
///
/// Kernel: `tid_rdma_find_phys_blocks_4k()`.
///
/// # Safety
///
/// `pages` is valid for `npages` reads and `out` for `cap` writes (either
/// may be null when its length is 0).
///
/// # Locking
///
/// None: a pure function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_find_phys_blocks_4k(
    pages: *const u64,
    npages: u32,
    out: *mut PageSetC,
    cap: u32,
) -> i32 {
    // SAFETY: forwarded from the caller.
    match unsafe { find_phys_blocks(pages, npages, out, cap, pageset::find_phys_blocks_4k_into) } {
        Ok(n) => n,
        Err(e) => e.to_neg(),
    }
}

/// As [`hfi1_tid_find_phys_blocks_4k`], for an 8 KiB (or larger) path MTU.
///
/// Kernel: `tid_rdma_find_phys_blocks_8k()`.
///
/// # Safety
///
/// As [`hfi1_tid_find_phys_blocks_4k`].
///
/// # Locking
///
/// None: a pure function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_find_phys_blocks_8k(
    pages: *const u64,
    npages: u32,
    out: *mut PageSetC,
    cap: u32,
) -> i32 {
    // SAFETY: forwarded from the caller.
    match unsafe { find_phys_blocks(pages, npages, out, cap, pageset::find_phys_blocks_8k_into) } {
        Ok(n) => n,
        Err(e) => e.to_neg(),
    }
}

/// # Safety
///
/// As [`hfi1_tid_find_phys_blocks_4k`].
unsafe fn find_phys_blocks(
    pages: *const u64,
    npages: u32,
    out: *mut PageSetC,
    cap: u32,
    walk: fn(&[u64], &mut PageSets) -> Result<(), AllocError>,
) -> Result<i32, Errno> {
    if npages as usize > MAX_SEGMENT_PAGES {
        return Err(Errno::INVAL);
    }
    // SAFETY: forwarded from the caller.
    let pages = unsafe { c_slice(pages, npages as usize) }?;
    let mut sets = PageSets::new();
    walk(pages, &mut sets)?;
    // SAFETY: forwarded from the caller.
    unsafe { write_sets(&sets, 0, out, cap) }
}

/// Emits `pages` accumulated pages, starting at page `*idx`, as page sets
/// after the `sets` already in `list`, adds a filler if the count is then
/// odd, advances `*idx`, and returns the new set count (or a negative
/// errno: `-EINVAL` if `*idx + pages` or the set count would pass 64, or
/// `list` is too short). Sets before index `sets` are not touched.
///
/// Kernel: `tid_flush_pages()`.
///
/// # Safety
///
/// `list` is valid for `cap` writes and `idx` for a read and a write.
///
/// # Locking
///
/// None: a pure function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_flush_pages(
    list: *mut PageSetC,
    cap: u32,
    sets: u32,
    idx: *mut u32,
    pages: u32,
) -> i32 {
    // SAFETY: forwarded from the caller.
    match unsafe { flush(list, cap, sets, idx, pages) } {
        Ok(n) => n,
        Err(e) => e.to_neg(),
    }
}

/// # Safety
///
/// As [`hfi1_tid_flush_pages`].
unsafe fn flush(
    list: *mut PageSetC,
    cap: u32,
    sets: u32,
    idx: *mut u32,
    pages: u32,
) -> Result<i32, Errno> {
    // SAFETY: the caller promises `idx` is null or valid.
    let start = unsafe { idx.as_mut() }.ok_or(Errno::INVAL)?;
    let end = start.checked_add(pages).ok_or(Errno::INVAL)?;
    if end as usize > MAX_SEGMENT_PAGES || sets as usize > MAX_PAGESETS {
        return Err(Errno::INVAL);
    }
    // The flush looks only at page indices; any distinct page addresses do.
    let mut addrs = [0u64; MAX_SEGMENT_PAGES];
    for (i, a) in addrs.iter_mut().enumerate() {
        *a = (i as u64 + 1) * 2 * u64::from(PAGE_SIZE);
    }
    let addrs = addrs.get(..end as usize).ok_or(Errno::INVAL)?;
    let mut out = PageSets::new();
    for _ in 0..sets {
        out.try_push(PageSet::FILLER).map_err(|_| Errno::INVAL)?;
    }
    let next = pageset::flush_pages(&mut out, addrs, *start as usize, pages as usize)?;
    // SAFETY: forwarded from the caller.
    let n = unsafe { write_sets(&out, sets as usize, list, cap) }?;
    *start = u32::try_from(next).map_err(|_| Errno::INVAL)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_on_a_c_bitmap() {
        let mut m = 0u32;
        // SAFETY: valid pointer.
        unsafe {
            assert_eq!(hfi1_tid_flow_reserve(&mut m, 5), 5);
            assert_eq!(hfi1_tid_flow_reserve(&mut m, 5), 0);
            assert_eq!(hfi1_tid_flow_reserve(&mut m, -1), 1);
            assert_eq!(hfi1_tid_flow_reserve(&mut m, 32), 2);
            assert_eq!(m, 0b100111);
            let mut full = u32::MAX;
            assert_eq!(hfi1_tid_flow_reserve(&mut full, 3), -11);
            assert_eq!(full, u32::MAX);
            assert_eq!(hfi1_tid_flow_reserve(core::ptr::null_mut(), 3), -22);
        }
    }

    #[test]
    fn opfn_round_trip() {
        let p = OpfnParams {
            qp: 0x80_0003,
            max_len: 256 * 1024,
            jkey: 32,
            max_read: 6,
            max_write: 4,
            timeout: 14,
            urg: 1,
        };
        // SAFETY: valid pointers.
        let w = unsafe { hfi1_tid_opfn_encode(&p) };
        assert_eq!(w >> 56, 3);
        assert_eq!((w >> 48) & 0xFF, 0x80);
        let mut q = OpfnParams::default();
        // SAFETY: valid pointers.
        assert_eq!(unsafe { hfi1_tid_opfn_decode(w, &mut q) }, 0);
        assert_eq!(q, p);
        // SAFETY: null is allowed.
        unsafe {
            assert_eq!(hfi1_tid_opfn_encode(core::ptr::null()), 0);
            assert_eq!(hfi1_tid_opfn_decode(w, core::ptr::null_mut()), -22);
        }
    }

    fn run4k(pages: &[u64]) -> Vec<PageSetC> {
        let mut out = [PageSetC::default(); 64];
        // SAFETY: valid slices.
        let n = unsafe {
            hfi1_tid_find_phys_blocks_4k(pages.as_ptr(), pages.len() as u32, out.as_mut_ptr(), 64)
        };
        assert!(n >= 0, "{n}");
        out[..n as usize].to_vec()
    }

    #[test]
    fn contiguous_runs_4k() {
        // 3 contiguous pages, then 1 apart: [2, 1] + [1] + filler.
        let p = [0x10000, 0x11000, 0x12000, 0x40000];
        let s = run4k(&p);
        let counts: Vec<u32> = s.iter().map(|s| s.count).collect();
        assert_eq!(counts, [2, 1, 1, 0]);
        assert_eq!((s[0].idx, s[1].idx, s[2].idx), (0, 2, 3));
        assert!(run4k(&[]).is_empty());
    }

    #[test]
    fn bad_inputs_are_einval() {
        let p = [0x1001u64];
        let mut out = [PageSetC::default(); 2];
        // SAFETY: valid slices.
        unsafe {
            assert_eq!(
                hfi1_tid_find_phys_blocks_8k(p.as_ptr(), 1, out.as_mut_ptr(), 2),
                -22
            );
            assert_eq!(
                hfi1_tid_find_phys_blocks_8k(core::ptr::null(), 1, out.as_mut_ptr(), 2),
                -22
            );
            assert_eq!(
                hfi1_tid_find_phys_blocks_4k(p.as_ptr(), 65, out.as_mut_ptr(), 2),
                -22
            );
            let ok = [0x1000u64];
            // Two sets (page + filler) do not fit in one slot.
            assert_eq!(
                hfi1_tid_find_phys_blocks_4k(ok.as_ptr(), 1, out.as_mut_ptr(), 1),
                -22
            );
        }
    }

    #[test]
    fn flush_appends_and_pads() {
        let mut list = [PageSetC { idx: 99, count: 99 }; 64];
        let mut idx = 2u32;
        // 7 pages from index 2 after one existing set: 4, 2, 1 -> 4 sets
        // total, even, so no filler.
        // SAFETY: valid pointers.
        let n = unsafe { hfi1_tid_flush_pages(list.as_mut_ptr(), 64, 1, &mut idx, 7) };
        assert_eq!(n, 4);
        assert_eq!(idx, 9);
        assert_eq!(list[0], PageSetC { idx: 99, count: 99 });
        assert_eq!(list[1], PageSetC { idx: 2, count: 4 });
        assert_eq!(list[2], PageSetC { idx: 6, count: 2 });
        assert_eq!(list[3], PageSetC { idx: 8, count: 1 });
        // Past 64 pages: refused, idx untouched.
        // SAFETY: valid pointers.
        let n = unsafe { hfi1_tid_flush_pages(list.as_mut_ptr(), 64, 0, &mut idx, 60) };
        assert_eq!((n, idx), (-22, 9));
        // SAFETY: null idx is allowed and refused.
        let n = unsafe { hfi1_tid_flush_pages(list.as_mut_ptr(), 64, 0, core::ptr::null_mut(), 1) };
        assert_eq!(n, -22);
    }
}
