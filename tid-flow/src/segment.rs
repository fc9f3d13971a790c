// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A request's flow ring and its flow records as the software platform
//! keeps them ([`TidRequest`], [`FlowRecord`]), and the sim-facing entry
//! points of segment setup and teardown (`exp_rcv_setup` /
//! `exp_rcv_clear`), which run the engine of [`crate::setup`] on them.

use arrayvec::ArrayVec;
use core::ops::{Deref, DerefMut};
use hfi1_hal::consts::{MAX_FLOWS, MAX_PAGESETS, MAX_SEGMENT_PAGES, PAGE_SHIFT, PAGE_SIZE};

use hfi1_hal::services::{AllocContext, InitInPlace, Memory};
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Psn, TidEntry};
use tid_alloc::groups::ProgramSink;
use tid_alloc::{AllocError, PageSet, PageSets, TidNode, find_phys_blocks_into};

use crate::FlowError;
use crate::ctxt::{FlowPlatform, QpLocked, RcvCtxt};
use crate::setup::{
    FlowRingStore, FlowSetup, PageWalk, SegmentRecord, exp_rcv_clear_all_with, exp_rcv_clear_with,
    exp_rcv_setup_with,
};

/// The ring size as the `u16` cursors use it.
const RING: u16 = MAX_FLOWS as u16;
const RING_MASK: u16 = RING - 1;

/// Entries between `tail` and `head` of a ring of [`MAX_FLOWS`].
/// Kernel: `CIRC_CNT(head, tail, MAX_FLOWS)`.
pub const fn ring_count(head: u16, tail: u16) -> u16 {
    head.wrapping_sub(tail) & RING_MASK
}

/// Free slots of the ring (one is always kept empty).
/// Kernel: `CIRC_SPACE(head, tail, MAX_FLOWS)`.
pub const fn ring_space(head: u16, tail: u16) -> u16 {
    tail.wrapping_sub(head).wrapping_sub(1) & RING_MASK
}

/// The next ring position. Kernel: `CIRC_NEXT()`.
pub const fn ring_next(i: u16) -> u16 {
    i.wrapping_add(1) & RING_MASK
}

/// One segment's flow state (sequence numbers).
/// Kernel: `struct flow_state` inside `tid_rdma_flow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentPsns {
    /// The flow's generation.
    pub generation: Generation,
    /// First 11-bit flow sequence of the segment. Kernel: `spsn`.
    pub spsn: u32,
    /// Last 11-bit flow sequence (`spsn + npkts - 1`). Kernel: `lpsn`.
    pub lpsn: u32,
    /// The next full flow PSN expected. Kernel: `r_next_psn`.
    pub r_next_psn: FlowPsn,
    /// First IB PSN of the segment (set by the protocol).
    /// Kernel: `ib_spsn`.
    pub ib_spsn: Psn,
    /// Last IB PSN of the segment (set by the protocol).
    /// Kernel: `ib_lpsn`.
    pub ib_lpsn: Psn,
    /// The IB PSN of the WRITE_RESP that gave the segment (set by the
    /// protocol, both WRITE roles). Kernel: `resp_ib_psn`.
    pub resp_ib_psn: Psn,
}

impl SegmentPsns {
    /// The full flow PSN of sequence `seq` in this segment's generation.
    /// Kernel: `full_flow_psn()`.
    pub fn full_psn(&self, seq: u32) -> FlowPsn {
        FlowPsn::new(self.generation, seq)
    }
}

/// One segment of a request. Kernel: `struct tid_rdma_flow`.
///
/// # Locking
///
/// Part of the request, guarded by the QP's `s_lock`.
#[derive(Debug, Clone, Default)]
pub struct FlowRecord {
    /// The segment's page sets, with their bus addresses once mapped.
    /// Kernel: `pagesets[0..npagesets)`.
    pub pagesets: PageSets,
    /// Bit i: page set i is DMA-mapped. Kernel: `pagesets[i].mapped`.
    pub mapped: u64,
    /// The TID groups the segment's RcvArray entries are in (empty when
    /// none). Kernel: `tnode[0..tnode_cnt)`.
    pub tnodes: ArrayVec<TidNode, MAX_PAGESETS>,
    /// The TID entries to send to the peer. Kernel: `tid_entry[0..tidcnt)`.
    pub tid_entries: ArrayVec<TidEntry, MAX_PAGESETS>,
    /// Packets the segment takes. Kernel: `npkts`.
    pub npkts: u32,
    /// The hardware flow the segment uses (the QP's at setup).
    /// Kernel: `idx`.
    pub idx: Option<FlowIndex>,
    /// Bytes of the segment. Kernel: `length`.
    pub length: u32,
    /// Sequence numbers. Kernel: `flow_state`.
    pub psns: SegmentPsns,
    /// Packets sent or received so far (protocol cursor). Kernel: `pkt`.
    pub pkt: u32,
    /// Current TID entry (protocol cursor). Kernel: `tid_idx`.
    pub tid_idx: u32,
    /// Byte offset in the current TID entry (protocol cursor).
    /// Kernel: `tid_offset`.
    pub tid_offset: u32,
    /// Bytes sent (protocol cursor). Kernel: `sent`.
    pub sent: u32,
    /// Packets counted for a RESYNC. Kernel: `resync_npkts`.
    pub resync_npkts: u32,
    /// The KDETH QP number the segment's data packets go to: the
    /// responder's KDETH QP with the flow index in bits 11..16 and the
    /// receive context in the low byte (set by the protocol; a WRITE
    /// requester takes it from the WRITE_RESP). Kernel: `tid_qpn`.
    pub tid_qpn: u32,
}

impl FlowRecord {
    /// True when the segment's RcvArray entries are programmed.
    pub fn is_programmed(&self) -> bool {
        !self.tnodes.is_empty()
    }

    /// True when the record counts as mapped. Kernel: `dma_mapped()`
    /// (`pagesets[0].mapped`).
    pub fn is_mapped(&self) -> bool {
        self.mapped & 1 != 0
    }

    /// Page sets mapped now.
    pub fn mapped_sets(&self) -> u32 {
        self.mapped.count_ones()
    }
}

/// Where programming writes a sim record's TID entries and packets.
#[derive(Debug)]
pub struct RecordSink<'a> {
    entries: &'a mut ArrayVec<TidEntry, MAX_PAGESETS>,
    npkts: &'a mut u32,
}

impl ProgramSink for RecordSink<'_> {
    fn reset(&mut self) {
        self.entries.clear();
        *self.npkts = 0;
    }

    fn push_entry(&mut self, entry: TidEntry) {
        // Cannot fail: at most one TID entry per page set.
        let _ = self.entries.try_push(entry);
    }

    fn add_packets(&mut self, n: u32) {
        *self.npkts = self.npkts.wrapping_add(n);
    }
}

impl SegmentRecord for FlowRecord {
    type Nodes<'a> = &'a mut ArrayVec<TidNode, MAX_PAGESETS>;
    type Sets<'a> = &'a [PageSet];
    type Sink<'a> = RecordSink<'a>;

    fn has_pagesets(&self) -> bool {
        !self.pagesets.is_empty()
    }

    fn find_pagesets(&mut self, pages: &[u64], pmtu: u32, length: u32) -> Result<(), AllocError> {
        find_phys_blocks_into(pages, pmtu, &mut self.pagesets)?;
        self.length = length;
        Ok(())
    }

    fn forget_pagesets(&mut self) {
        self.pagesets.clear();
    }

    fn pageset_count(&self) -> usize {
        self.pagesets.len()
    }

    fn pageset(&self, i: usize) -> Option<PageSet> {
        self.pagesets.get(i).copied()
    }

    fn is_mapped(&self) -> bool {
        FlowRecord::is_mapped(self)
    }

    fn is_set_mapped(&self, i: usize) -> bool {
        i < 64 && self.mapped & (1 << i) != 0
    }

    fn set_mapped(&mut self, i: usize, bus: u64) {
        if let Some(ps) = self.pagesets.get_mut(i) {
            ps.dma = bus;
            self.mapped |= 1 << i;
        }
    }

    fn set_unmapped(&mut self, i: usize) {
        if i < 64 {
            self.mapped &= !(1 << i);
        }
    }

    fn nodes_mut(&mut self) -> &mut ArrayVec<TidNode, MAX_PAGESETS> {
        &mut self.tnodes
    }

    fn program_parts(
        &mut self,
    ) -> (
        &mut ArrayVec<TidNode, MAX_PAGESETS>,
        &[PageSet],
        RecordSink<'_>,
    ) {
        (
            &mut self.tnodes,
            &self.pagesets,
            RecordSink {
                entries: &mut self.tid_entries,
                npkts: &mut self.npkts,
            },
        )
    }

    fn npkts(&self) -> u32 {
        self.npkts
    }

    fn set_flow(&mut self, setup: &FlowSetup) {
        self.idx = setup.idx;
        self.psns = SegmentPsns {
            generation: setup.generation,
            spsn: setup.spsn,
            lpsn: setup.lpsn,
            r_next_psn: setup.r_next_psn,
            ib_spsn: Psn::new(0),
            ib_lpsn: Psn::new(0),
            resp_ib_psn: Psn::new(0),
        };
    }
}

/// A request's eight flow records. Kernel: `req->flows` (`MAX_FLOWS`
/// records, one allocation of about 18 KiB, so it is initialised in place,
/// one record at a time: [`InitInPlace`]).
#[repr(transparent)]
pub struct FlowRing([FlowRecord; MAX_FLOWS]);

impl core::fmt::Debug for FlowRing {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl Deref for FlowRing {
    type Target = [FlowRecord; MAX_FLOWS];

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for FlowRing {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

// SAFETY: `init_in_place` writes a valid `FlowRecord` into each of the
// `MAX_FLOWS` elements, which is all a `FlowRing` holds
// (`repr(transparent)` over the array).
unsafe impl InitInPlace for FlowRing {
    unsafe fn init_in_place(ptr: *mut Self) {
        let first = ptr.cast::<FlowRecord>();
        for i in 0..MAX_FLOWS {
            // SAFETY: the caller gives room for one `FlowRing`, which is
            // `MAX_FLOWS` consecutive records; `i` stays inside it.
            unsafe { first.add(i).write(FlowRecord::default()) };
        }
    }
}

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

/// The TID part of one RDMA READ request (one WQE).
/// Kernel: `struct tid_rdma_request`.
///
/// # Locking
///
/// Guarded by the QP's `s_lock` (the protocol keeps it with the QP's
/// send queue).
pub struct TidRequest<P: FlowPlatform> {
    flows: Option<<P::Mem as Memory>::Boxed<FlowRing>>,
    /// Next record to set up. Kernel: `setup_head`.
    pub setup_head: u16,
    /// Next record to clear. Kernel: `clear_tail`.
    pub clear_tail: u16,
    /// The record the protocol is building or sending (its cursor; this
    /// crate does not move it). Kernel: `flow_idx`.
    pub flow_idx: u16,
    /// The oldest record not yet acknowledged (TID RDMA WRITE, both
    /// roles; the ring has no room when `setup_head` would reach it).
    /// Kernel: `acked_tail`.
    pub acked_tail: u16,
    /// Segments allowed in flight: for a READ requester the peer's
    /// `max_read` (at most 6), for a WRITE the `max_write` (at most 4: the
    /// responder's own, the requester the peer's). Kernel: `n_flows`.
    pub n_flows: u16,
    /// Bytes per segment. Kernel: `seg_len`.
    pub seg_len: u32,
    /// The QP's path MTU (4096 picks the 4 KiB page-set variant).
    pub pmtu: u32,
    /// The segment walk over the SGE list.
    pub cursor: SgeCursor,
}

impl<P: FlowPlatform> core::fmt::Debug for TidRequest<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TidRequest")
            .field("allocated", &self.flows.is_some())
            .field("setup_head", &self.setup_head)
            .field("clear_tail", &self.clear_tail)
            .field("flow_idx", &self.flow_idx)
            .field("acked_tail", &self.acked_tail)
            .field("n_flows", &self.n_flows)
            .finish_non_exhaustive()
    }
}

impl<P: FlowPlatform> TidRequest<P> {
    /// A request with no flow records yet. Kernel: `hfi1_init_trdma_req()`.
    pub fn new(seg_len: u32, n_flows: u16, pmtu: u32) -> Self {
        Self {
            flows: None,
            setup_head: 0,
            clear_tail: 0,
            flow_idx: 0,
            acked_tail: 0,
            n_flows,
            seg_len,
            pmtu,
            cursor: SgeCursor::default(),
        }
    }

    /// Allocates the flow records if not done yet (they start zeroed).
    /// Kernel: `hfi1_kern_exp_rcv_alloc_flows()`.
    ///
    /// # Errors
    ///
    /// [`FlowError::NoMemory`]: the request then stays a plain RDMA READ.
    pub fn alloc_flows(&mut self, mem: &P::Mem, ctx: AllocContext) -> Result<(), FlowError> {
        if self.flows.is_some() {
            return Ok(());
        }
        let b = mem
            .try_box_in_place::<FlowRing>(ctx)
            .map_err(|_| FlowError::NoMemory)?;
        self.flows = Some(b);
        Ok(())
    }

    /// Frees the flow records, whatever they hold, as the driver does; and
    /// starts the ring over for the request's next use (the driver does
    /// that when it sets the WQE up again). Kernel: `__trdma_clean_swqe()`
    /// / `hfi1_kern_exp_rcv_free_flows()`.
    ///
    /// # Errors
    ///
    /// [`FlowError::Busy`] if the records still held set-up segments or
    /// mappings (a release the caller missed: their RcvArray entries and
    /// mappings are lost, as in the driver); the records are freed anyway.
    pub fn clean_swqe(&mut self) -> Result<(), FlowError> {
        let busy = ring_count(self.setup_head, self.clear_tail) != 0 || self.holds_mappings();
        self.flows = None;
        self.setup_head = 0;
        self.clear_tail = 0;
        self.flow_idx = 0;
        self.acked_tail = 0;
        self.cursor = SgeCursor::default();
        if busy { Err(FlowError::Busy) } else { Ok(()) }
    }

    /// True if a flow record holds a DMA mapping.
    pub fn holds_mappings(&self) -> bool {
        self.flows
            .as_ref()
            .is_some_and(|r| r.iter().any(|f| f.mapped != 0))
    }

    /// True once the flow records are allocated.
    pub fn has_flows(&self) -> bool {
        self.flows.is_some()
    }

    /// Segments set up and not yet cleared.
    pub fn in_flight(&self) -> u16 {
        ring_count(self.setup_head, self.clear_tail)
    }

    /// Flow record `i` (0..8).
    pub fn flow(&self, i: u16) -> Option<&FlowRecord> {
        self.flows.as_ref()?.get(usize::from(i))
    }

    /// Flow record `i` (0..8), mutably.
    pub fn flow_mut(&mut self, i: u16) -> Option<&mut FlowRecord> {
        self.flows.as_mut()?.get_mut(usize::from(i))
    }

    /// The record whose IB PSN range holds `psn`, oldest first, with its
    /// ring index. Kernel: `find_flow_ib()`.
    pub fn find_flow_ib(&self, psn: Psn) -> Option<(u16, &FlowRecord)> {
        let ring = self.flows.as_ref()?;
        let mut tail = self.clear_tail;
        while ring_count(self.setup_head, tail) != 0 {
            let f = ring.get(usize::from(tail))?;
            if psn.within(f.psns.ib_spsn, f.psns.ib_lpsn) {
                return Some((tail, f));
            }
            tail = ring_next(tail);
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

impl<P: FlowPlatform> FlowRingStore for TidRequest<P> {
    type Record<'a> = &'a mut FlowRecord;

    fn setup_head(&self) -> u16 {
        self.setup_head
    }

    fn set_setup_head(&mut self, v: u16) {
        self.setup_head = v;
    }

    fn clear_tail(&self) -> u16 {
        self.clear_tail
    }

    fn set_clear_tail(&mut self, v: u16) {
        self.clear_tail = v;
    }

    fn n_flows(&self) -> u16 {
        self.n_flows
    }

    fn seg_len(&self) -> u32 {
        self.seg_len
    }

    fn pmtu(&self) -> u32 {
        self.pmtu
    }

    fn record(&mut self, i: u16) -> Option<&mut FlowRecord> {
        self.flows.as_mut()?.get_mut(usize::from(i))
    }
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

/// [`crate::setup::exp_rcv_setup_with`] on a sim request, walking `sges`
/// from the request's cursor. Kernel: `hfi1_kern_exp_rcv_setup()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, and `req` which it guards); takes
/// `exp_lock`.
///
/// # Errors
///
/// As [`crate::setup::exp_rcv_setup_with`].
pub fn exp_rcv_setup<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    req: &mut TidRequest<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
    sges: &[Sge],
) -> Result<(), FlowError> {
    let mut cursor = req.cursor;
    let r = exp_rcv_setup_with(
        rcd,
        req,
        qp,
        qp_locked,
        &mut SgeWalk {
            sges,
            cursor: &mut cursor,
        },
    );
    req.cursor = cursor;
    r
}

/// [`crate::setup::exp_rcv_clear_with`] on a sim request. Kernel:
/// `hfi1_kern_exp_rcv_clear()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, `req`); takes `exp_lock`.
///
/// # Errors
///
/// As [`crate::setup::exp_rcv_clear_with`].
pub fn exp_rcv_clear<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    req: &mut TidRequest<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
) -> Result<(), FlowError> {
    exp_rcv_clear_with(rcd, req, qp, qp_locked)
}

/// [`crate::setup::exp_rcv_clear_all_with`] on a sim request. Kernel:
/// `hfi1_kern_exp_rcv_clear_all()`.
///
/// # Locking
///
/// As [`exp_rcv_clear`].
pub fn exp_rcv_clear_all<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    req: &mut TidRequest<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
) {
    exp_rcv_clear_all_with(rcd, req, qp, qp_locked);
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

    #[test]
    fn ring_arithmetic() {
        assert_eq!((ring_count(3, 1), ring_space(3, 1)), (2, 5));
        assert_eq!((ring_count(1, 3), ring_space(1, 3)), (6, 1));
        assert_eq!((ring_count(5, 5), ring_space(5, 5)), (0, 7));
        assert_eq!(ring_next(7), 0);
    }
}
