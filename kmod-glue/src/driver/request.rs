// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A request and its flow records in the driver's `struct
//! tid_rdma_request` and `struct tid_rdma_flow` (the layout mirrors of
//! `hfi1_hal::layout`), as the engine's [`FlowRingStore`] and
//! [`SegmentRecord`]; and the request's scatter list (`struct
//! rvt_sge_state`) as its [`PageWalk`] (`kern_find_pages()`).
//!
//! # Locking
//!
//! The request's QP's `s_lock`, held by the driver's caller for as long
//! as any value here lives (the constructors' contract).

use core::ffi::c_void;
use core::ptr::NonNull;

use arrayvec::ArrayVec;
use hfi1_hal::TidEntry;
use hfi1_hal::consts::{FLOW_INDEX_NONE, MAX_FLOWS, MAX_PAGESETS, MAX_SEGMENT_PAGES, PAGE_SIZE};
use hfi1_hal::layout::{
    CFlowState, CKernTidNode, CRvtSgeState, CTidGroup, CTidRdmaFlow, CTidRdmaPageset,
    CTidRdmaRequest, RVT_SEGSZ,
};
use tid_alloc::groups::{NodeList, PageSetSource, ProgramSink};
use tid_alloc::{AllocError, PageSet, PageSets, TidNode, find_phys_blocks_into};
use tid_flow::{FlowRingStore, FlowSetup, PageWalk, SegmentRecord};

use super::ops::Ops;

/// A request of the driver, for one call. Its fields are reached through
/// the pointer (never a reference to the whole request): the scatter
/// list being walked may be the request's own `req->ss`, and the walk
/// moves `req->isge`.
///
/// # Invariants
///
/// `req` is a live request whose QP's `s_lock` is held while the value
/// lives; `req->flows` is null or `MAX_FLOWS` records; `groups` and
/// `ngroups` are its context's; `pages` is its QP's `qpriv->pages`.
#[derive(Debug)]
pub struct DrvRequest<'o> {
    req: NonNull<CTidRdmaRequest>,
    groups: *mut CTidGroup,
    ngroups: u16,
    pages: *mut *mut c_void,
    pmtu: u32,
    ops: &'o Ops,
}

impl<'o> DrvRequest<'o> {
    /// The request `req`, whose QP's path MTU is `pmtu` and page array
    /// `pages`, in a context whose groups are `groups[0..ngroups]`.
    ///
    /// # Safety
    ///
    /// As the type invariant, for as long as the value lives.
    pub unsafe fn new(
        ops: &'o Ops,
        req: NonNull<CTidRdmaRequest>,
        groups: *mut CTidGroup,
        ngroups: u16,
        pages: *mut *mut c_void,
        pmtu: u32,
    ) -> Self {
        // INVARIANT: by the caller.
        Self {
            req,
            groups,
            ngroups,
            pages,
            pmtu,
            ops,
        }
    }

    fn r(&self) -> *mut CTidRdmaRequest {
        self.req.as_ptr()
    }
}

impl<'o> FlowRingStore for DrvRequest<'o> {
    type Record<'r>
        = DrvRecord<'r, 'o>
    where
        Self: 'r;

    fn setup_head(&self) -> u16 {
        // SAFETY: live and locked (type invariant).
        unsafe { (*self.r()).setup_head }
    }

    fn set_setup_head(&mut self, v: u16) {
        // SAFETY: as above.
        unsafe { (*self.r()).setup_head = v }
    }

    fn clear_tail(&self) -> u16 {
        // SAFETY: as above.
        unsafe { (*self.r()).clear_tail }
    }

    fn set_clear_tail(&mut self, v: u16) {
        // SAFETY: as above.
        unsafe { (*self.r()).clear_tail = v }
    }

    fn n_flows(&self) -> u16 {
        // SAFETY: as above.
        unsafe { (*self.r()).n_flows }
    }

    fn seg_len(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.r()).seg_len }
    }

    fn pmtu(&self) -> u32 {
        self.pmtu
    }

    fn record(&mut self, i: u16) -> Option<DrvRecord<'_, 'o>> {
        // SAFETY: as above.
        let flows = unsafe { (*self.r()).flows };
        if flows.is_null() || usize::from(i) >= MAX_FLOWS {
            return None;
        }
        // SAFETY: `flows` holds `MAX_FLOWS` live records (type invariant),
        // a separate allocation reached only through this request, under
        // the QP's `s_lock`, for as long as `self` is borrowed.
        let flow = unsafe { &mut *flows.add(usize::from(i)) };
        Some(DrvRecord {
            flow,
            groups: self.groups,
            ngroups: self.ngroups,
            pages: self.pages,
            ops: self.ops,
        })
    }
}

/// One flow record of the driver.
#[derive(Debug)]
pub struct DrvRecord<'a, 'o> {
    flow: &'a mut CTidRdmaFlow,
    groups: *mut CTidGroup,
    ngroups: u16,
    pages: *mut *mut c_void,
    ops: &'o Ops,
}

impl DrvRecord<'_, '_> {
    fn pset(&self, i: usize) -> Option<CTidRdmaPageset> {
        (i < usize::from(self.flow.npagesets))
            .then(|| self.flow.pagesets.get(i).copied())
            .flatten()
    }
}

/// `flow->tnode[0..tnode_cnt)`, group pointers turned into indices.
#[derive(Debug)]
pub struct DrvNodes<'a> {
    tnode: &'a mut [CKernTidNode; MAX_PAGESETS],
    cnt: &'a mut u8,
    groups: *mut CTidGroup,
    ngroups: u16,
}

impl NodeList for DrvNodes<'_> {
    fn clear(&mut self) {
        *self.cnt = 0;
    }

    fn push(&mut self, node: TidNode) -> Result<(), AllocError> {
        let slot = self
            .tnode
            .get_mut(usize::from(*self.cnt))
            .ok_or(AllocError::NoSpace)?;
        *slot = CKernTidNode {
            grp: self.groups.wrapping_add(node.group_index()),
            map: node.map(),
            cnt: node.cnt(),
        };
        *self.cnt = self.cnt.wrapping_add(1);
        Ok(())
    }

    fn len(&self) -> usize {
        usize::from(*self.cnt)
    }

    fn node(&self, i: usize) -> Option<TidNode> {
        let n = self.tnode.get(i)?;
        let off = (n.grp as usize).checked_sub(self.groups as usize)?;
        let g = off / core::mem::size_of::<CTidGroup>();
        (g < usize::from(self.ngroups)).then(|| TidNode::new(g as u16, n.map, n.cnt))
    }
}

/// `flow->pagesets[0..npagesets)`, each set's page address taken from the
/// QP's page array (`qpriv->pages[pset->idx]`, as `dma_map_flow()` maps
/// it).
#[derive(Debug)]
pub struct DrvSets<'a, 'o> {
    sets: &'a [CTidRdmaPageset; MAX_PAGESETS],
    n: u8,
    pages: *mut *mut c_void,
    ops: &'o Ops,
}

impl DrvSets<'_, '_> {
    fn get(&self, i: usize) -> Option<PageSet> {
        if i >= usize::from(self.n) {
            return None;
        }
        let p = *self.sets.get(i)?;
        let count = u16::from(p.count());
        let addr = if count == 0 || self.pages.is_null() {
            0
        } else {
            // SAFETY: `pages` is the QP's `TID_RDMA_MAX_PAGES` array and
            // `idx` (a u8 below 64 for a set the walk found) indexes it;
            // its entries are the pages `kern_find_pages()` stored.
            unsafe {
                let page = *self.pages.add(usize::from(p.idx()) % MAX_SEGMENT_PAGES);
                (self.ops.address_of)(page)
            }
        };
        Some(PageSet {
            idx: p.idx(),
            count,
            addr,
            dma: p.addr(),
        })
    }
}

impl PageSetSource for DrvSets<'_, '_> {
    fn set_count(&self) -> usize {
        usize::from(self.n)
    }

    fn set(&self, i: usize) -> Option<PageSet> {
        self.get(i)
    }
}

/// `flow->tid_entry[]`, `flow->tidcnt`, `flow->npkts`.
#[derive(Debug)]
pub struct DrvSink<'a> {
    entries: &'a mut [u32; MAX_PAGESETS],
    tidcnt: &'a mut u8,
    npkts: &'a mut u8,
}

impl ProgramSink for DrvSink<'_> {
    fn reset(&mut self) {
        *self.npkts = 0;
        *self.tidcnt = 0;
    }

    fn push_entry(&mut self, entry: TidEntry) {
        if let Some(e) = self.entries.get_mut(usize::from(*self.tidcnt)) {
            *e = entry.raw();
            *self.tidcnt = self.tidcnt.wrapping_add(1);
        }
    }

    /// The driver's `flow->npkts` is a `u8`.
    fn add_packets(&mut self, n: u32) {
        *self.npkts = self.npkts.wrapping_add(n as u8);
    }
}

impl<'o> SegmentRecord for DrvRecord<'_, 'o> {
    type Nodes<'r>
        = DrvNodes<'r>
    where
        Self: 'r;
    type Sets<'r>
        = DrvSets<'r, 'o>
    where
        Self: 'r;
    type Sink<'r>
        = DrvSink<'r>
    where
        Self: 'r;

    fn has_pagesets(&self) -> bool {
        self.flow.npagesets != 0
    }

    /// As the driver's `tid_rdma_find_phys_blocks_*()`: each set's count,
    /// and its first page's index unless it is a filler (the driver never
    /// writes a filler's `idx`, quirk 1a); addresses and mapped bits stay.
    fn find_pagesets(&mut self, pages: &[u64], pmtu: u32, length: u32) -> Result<(), AllocError> {
        let mut sets = PageSets::new();
        find_phys_blocks_into(pages, pmtu, &mut sets)?;
        for (dst, s) in self.flow.pagesets.iter_mut().zip(&sets) {
            let mut p = dst.with_count(s.count as u8);
            if s.count != 0 {
                p = p.with_idx(s.idx);
            }
            *dst = p;
        }
        self.flow.npagesets = sets.len() as u8;
        self.flow.length = length;
        Ok(())
    }

    fn forget_pagesets(&mut self) {
        self.flow.npagesets = 0;
    }

    fn pageset_count(&self) -> usize {
        usize::from(self.flow.npagesets)
    }

    fn pageset(&self, i: usize) -> Option<PageSet> {
        DrvSets {
            sets: &self.flow.pagesets,
            n: self.flow.npagesets,
            pages: self.pages,
            ops: self.ops,
        }
        .get(i)
    }

    fn is_mapped(&self) -> bool {
        self.flow.pagesets.first().is_some_and(|p| p.mapped())
    }

    fn is_set_mapped(&self, i: usize) -> bool {
        self.pset(i).is_some_and(|p| p.mapped())
    }

    fn set_mapped(&mut self, i: usize, bus: u64) {
        if let Some(p) = self.flow.pagesets.get_mut(i) {
            *p = p.with_addr(bus).with_mapped(true);
        }
    }

    fn set_unmapped(&mut self, i: usize) {
        if let Some(p) = self.flow.pagesets.get_mut(i) {
            *p = p.with_mapped(false);
        }
    }

    fn nodes_mut(&mut self) -> DrvNodes<'_> {
        DrvNodes {
            tnode: &mut self.flow.tnode,
            cnt: &mut self.flow.tnode_cnt,
            groups: self.groups,
            ngroups: self.ngroups,
        }
    }

    fn program_parts(&mut self) -> (DrvNodes<'_>, DrvSets<'_, 'o>, DrvSink<'_>) {
        let f = &mut *self.flow;
        (
            DrvNodes {
                tnode: &mut f.tnode,
                cnt: &mut f.tnode_cnt,
                groups: self.groups,
                ngroups: self.ngroups,
            },
            DrvSets {
                sets: &f.pagesets,
                n: f.npagesets,
                pages: self.pages,
                ops: self.ops,
            },
            DrvSink {
                entries: &mut f.tid_entry,
                tidcnt: &mut f.tidcnt,
                npkts: &mut f.npkts,
            },
        )
    }

    fn npkts(&self) -> u32 {
        u32::from(self.flow.npkts)
    }

    /// Kernel: `memset(&flow->flow_state, 0, ..)`, then `idx`,
    /// `generation`, `spsn`, `lpsn`, `r_next_psn`.
    fn set_flow(&mut self, setup: &FlowSetup) {
        self.flow.flow_state = CFlowState {
            flags: 0,
            resp_ib_psn: 0,
            generation: setup.generation.get(),
            spsn: setup.spsn,
            lpsn: setup.lpsn,
            r_next_psn: setup.r_next_psn.raw(),
            ib_spsn: 0,
            ib_lpsn: 0,
        };
        self.flow.idx = setup.idx.map_or(FLOW_INDEX_NONE, hfi1_hal::FlowIndex::get);
    }
}

/// The request's scatter list: `ss` (`&qp->s_sge` for a READ,
/// `&req->ss` for a WRITE), `req->isge`, and the QP's page array the
/// found pages go to. Reached through pointers: `ss` may lie inside the
/// request.
///
/// # Invariants
///
/// `ss` is a live scatter list whose SGEs (`ss->sge` and
/// `ss->sg_list[0..num_sge - 1)`) name kernel virtual addresses of memory
/// regions, `isge` and `last` are live, `pages` has room for
/// `TID_RDMA_MAX_PAGES` pointers; the QP's `s_lock` is held while the
/// value lives.
#[derive(Debug)]
pub struct DrvSgeWalk<'o> {
    ss: NonNull<CRvtSgeState>,
    isge: NonNull<u32>,
    pages: *mut *mut c_void,
    last: NonNull<bool>,
    ops: &'o Ops,
}

impl<'o> DrvSgeWalk<'o> {
    /// The walk of `ss` from `*isge`, storing pages to `pages` and whether
    /// SGEs are left to `*last`.
    ///
    /// # Safety
    ///
    /// As the type invariant, for as long as the value lives.
    pub unsafe fn new(
        ops: &'o Ops,
        ss: NonNull<CRvtSgeState>,
        isge: NonNull<u32>,
        pages: *mut *mut c_void,
        last: NonNull<bool>,
    ) -> Self {
        // INVARIANT: by the caller.
        Self {
            ss,
            isge,
            pages,
            last,
            ops,
        }
    }
}

impl PageWalk for DrvSgeWalk<'_> {
    /// Kernel: `kern_find_pages()`, step for step: one page at a time from
    /// the current SGE, the next SGE from `sg_list` when one is used up, the
    /// next segment of its memory region's map when a segment is (an MR
    /// with a key), until `seg_len` bytes are found or the list ends (or
    /// 64 pages, all a segment of at most 256 KiB has); then `*last` says
    /// whether SGEs are left.
    fn find_pages(&mut self, seg_len: u32, out: &mut ArrayVec<u64, MAX_SEGMENT_PAGES>) -> u32 {
        out.clear();
        // SAFETY: live and locked, reached only through this walk for the
        // call (type invariant).
        let (ss, isge) = unsafe { (&mut *self.ss.as_ptr(), &mut *self.isge.as_ptr()) };
        let num_sge = u32::from(ss.num_sge);
        let mut length = seg_len;
        while length != 0 && *isge < num_sge && !out.is_full() {
            let sge = &mut ss.sge;
            // SAFETY: `vaddr` is a kernel address of the SGE's memory
            // (type invariant); the callbacks are the driver's.
            let page = unsafe { (self.ops.page_of)(sge.vaddr as u64) };
            // SAFETY: `pages` has room for 64 and `out` holds fewer.
            unsafe { *self.pages.add(out.len()) = page };
            // SAFETY: a page `virt_to_page()` returned.
            let _ = out.try_push(unsafe { (self.ops.address_of)(page) });
            sge.vaddr = sge.vaddr.wrapping_byte_add(PAGE_SIZE as usize);
            sge.length = sge.length.wrapping_sub(PAGE_SIZE);
            sge.sge_length = sge.sge_length.wrapping_sub(PAGE_SIZE);
            if sge.sge_length == 0 {
                *isge = isge.wrapping_add(1);
                if *isge < num_sge {
                    // SAFETY: `sg_list` has `num_sge - 1` entries and
                    // `isge - 1` is below that.
                    *sge = unsafe { *ss.sg_list.add((*isge - 1) as usize) };
                }
            // SAFETY: the SGE's region is live.
            } else if sge.length == 0 && unsafe { (self.ops.mr_lkey)(sge.mr) } != 0 {
                sge.n = sge.n.wrapping_add(1);
                if sge.n >= RVT_SEGSZ {
                    sge.m = sge.m.wrapping_add(1);
                    sge.n = 0;
                }
                let (mut vaddr, mut len) = (0u64, 0u64);
                // SAFETY: the region's map has the segment the SGE walks
                // into (the SGE's length says so).
                unsafe {
                    (self.ops.mr_seg)(
                        sge.mr,
                        u32::from(sge.m),
                        u32::from(sge.n),
                        &mut vaddr,
                        &mut len,
                    );
                }
                sge.vaddr = vaddr as *mut c_void;
                sge.length = len as u32;
            }
            length = length.wrapping_sub(PAGE_SIZE);
        }
        // SAFETY: live (type invariant).
        unsafe { *self.last.as_ptr() = *isge != num_sge };
        seg_len.wrapping_sub(length)
    }
}
