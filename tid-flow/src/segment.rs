// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A request's flow ring and segment setup/teardown
//! (`exp_rcv_setup` / `exp_rcv_clear`).

use arrayvec::ArrayVec;
use core::ops::{Deref, DerefMut};
use hfi1_hal::consts::{MAX_FLOWS, MAX_PAGESETS, MAX_SEGMENT_PAGES, PAGE_SHIFT, PAGE_SIZE};

use hfi1_hal::services::{AllocContext, DmaMap, InitInPlace, Memory};
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Psn, TidEntry};
use qp_wait::QueueKind;
use tid_alloc::{AllocError, PageSets, TidAlloc, find_phys_blocks_into};

use crate::FlowError;
use crate::ctxt::{FlowPlatform, QpLocked, RcvCtxt};

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
    /// How many of the non-filler page sets are DMA-mapped (all of them
    /// once setup succeeded). Kernel: `pagesets[].mapped`.
    pub mapped: usize,
    /// The RcvArray entries the segment holds (empty when none).
    /// Kernel: `tnode[0..tnode_cnt)`.
    pub alloc: TidAlloc,
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
    /// Where the SGE walk stood before this segment's pages were taken
    /// (so an abandoned setup can give them back).
    pub start: SgeCursor,
}

impl FlowRecord {
    /// True when the segment's RcvArray entries are programmed.
    pub fn is_programmed(&self) -> bool {
        !self.alloc.is_empty()
    }

    /// Unmaps every mapped page set. Kernel: `dma_unmap_flow()` (which
    /// only unmaps sets it mapped: the kernel's version also unmaps sets
    /// whose address is left over from an earlier segment).
    fn unmap(&mut self, dma: &impl DmaMap) {
        let mut left = self.mapped;
        for ps in self.pagesets.iter_mut().filter(|p| !p.is_filler()) {
            if left == 0 {
                break;
            }
            dma.unmap(ps.dma, u32::from(ps.count).wrapping_mul(PAGE_SIZE));
            ps.dma = 0;
            left -= 1;
        }
        self.mapped = 0;
    }

    /// Maps every non-filler page set; on failure unmaps what it mapped.
    /// Kernel: `dma_map_flow()`.
    fn map(&mut self, dma: &impl DmaMap) -> Result<(), FlowError> {
        self.mapped = 0;
        let mut failed = false;
        for ps in self.pagesets.iter_mut().filter(|p| !p.is_filler()) {
            match dma.map(ps.addr, u32::from(ps.count).wrapping_mul(PAGE_SIZE)) {
                Ok(bus) => {
                    ps.dma = bus;
                    self.mapped += 1;
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            self.unmap(dma);
            return Err(FlowError::NoMemory);
        }
        Ok(())
    }

    /// True when every non-filler page set is mapped.
    pub fn is_mapped(&self) -> bool {
        !self.pagesets.is_empty()
            && self.mapped == self.pagesets.iter().filter(|p| !p.is_filler()).count()
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// Segments allowed in flight (the peer's `max_read`, at most 6 for a
    /// READ). Kernel: `n_flows`.
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

    /// Frees the flow records (a large send queue recycling its WQE).
    /// Kernel: `__trdma_clean_swqe()` / `hfi1_kern_exp_rcv_free_flows()`.
    ///
    /// Call it only with the ring empty and nothing mapped (after
    /// [`exp_rcv_clear_all`]): records still set up would leak their
    /// RcvArray entries and mappings, so this refuses and returns
    /// [`FlowError::Busy`].
    pub fn clean_swqe(&mut self) -> Result<(), FlowError> {
        let mapped = self
            .flows
            .as_ref()
            .is_some_and(|r| r.iter().any(|f| f.mapped != 0));
        if ring_count(self.setup_head, self.clear_tail) != 0 || mapped {
            return Err(FlowError::Busy);
        }
        self.flows = None;
        self.setup_head = 0;
        self.clear_tail = 0;
        self.flow_idx = 0;
        self.cursor = SgeCursor::default();
        Ok(())
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
    while length > 0 && !pages.is_full() {
        let Some(sge) = sges.get(cursor.isge as usize) else {
            break;
        };
        // The pages this SGE still has, as many as the segment and the
        // array take, in one run.
        let in_sge = sge
            .length
            .saturating_sub(cursor.offset)
            .div_ceil(PAGE_SIZE)
            .max(1);
        let want = length.div_ceil(PAGE_SIZE);
        let room = pages.remaining_capacity() as u32;
        let n = in_sge.min(want).min(room);
        let base = sge.vaddr.wrapping_add(u64::from(cursor.offset));
        for i in 0..n {
            // Cannot fail: `n` is at most the remaining capacity.
            let _ = pages.try_push(base.wrapping_add(u64::from(i) << PAGE_SHIFT));
        }
        cursor.offset = cursor.offset.wrapping_add(n.wrapping_mul(PAGE_SIZE));
        if cursor.offset >= sge.length {
            cursor.isge = cursor.isge.wrapping_add(1);
            cursor.offset = 0;
        }
        length = length.saturating_sub(n.saturating_mul(PAGE_SIZE));
    }
    seg_len - length
}

/// Sets up the next segment of `req`: page sets, DMA mapping, RcvArray
/// entries and the flow record's sequence numbers.
/// Kernel: `hfi1_kern_exp_rcv_setup()`.
///
/// 1. [`FlowError::Invalid`] if the ring is full or already holds
///    `n_flows` segments.
/// 2. Unless an earlier attempt already did: walk `seg_len` bytes of the
///    SGE list and find the page sets (4 KiB variant iff `pmtu` is 4096).
///    Map them unless mapped; on failure [`FlowError::NoMemory`] (the
///    caller waits for memory, kernel `hfi1_wait_kmem()`, and retries).
/// 3. Under `exp_lock`: if others wait on the RcvArray queue ahead of this
///    QP, or the TID groups are short, queue the QP and return
///    [`FlowError::Again`]. Else program the entries, fill the record
///    (flow index and generation from the QP, start sequence = the QP's
///    flow PSN, last = start + packets - 1), advance the QP's flow PSN,
///    leave the queue and read the new head.
/// 4. After unlocking: schedule the head's wake-up; advance `setup_head`.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, and `req` which it guards); takes
/// `exp_lock`.
///
/// # Errors
///
/// As above; [`FlowError::NoFlowRecords`] if [`TidRequest::alloc_flows`]
/// was not done; [`FlowError::Alloc`] for page lists `tid-alloc` rejects
/// (unaligned or null pages); [`FlowError::Wait`] for a bad QP slot.
pub fn exp_rcv_setup<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    req: &mut TidRequest<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
    sges: &[Sge],
) -> Result<(), FlowError> {
    let QpLocked { flags, flow, token } = qp_locked;
    let head = req.setup_head;
    if ring_space(head, req.clear_tail) == 0 || ring_count(head, req.clear_tail) >= req.n_flows {
        return Err(FlowError::Invalid);
    }
    let (seg_len, pmtu) = (req.seg_len, req.pmtu);
    let mut cursor = req.cursor;
    let ring = req.flows.as_mut().ok_or(FlowError::NoFlowRecords)?;
    let rec = ring.get_mut(usize::from(head)).ok_or(FlowError::Invalid)?;

    if rec.pagesets.is_empty() {
        rec.start = cursor;
        let mut pages = ArrayVec::new();
        let length = find_pages(sges, &mut cursor, seg_len, &mut pages);
        if pages.is_empty() {
            return Err(FlowError::Invalid);
        }
        find_phys_blocks_into(&pages, pmtu, &mut rec.pagesets)?;
        rec.length = length;
        rec.mapped = 0;
        req.cursor = cursor;
    }
    if !rec.is_mapped() {
        rec.map(&rcd.dma)?;
    }

    let wake = {
        let mut guard = rcd.exp_lock.lock(token);
        let es = &mut *guard;
        let alloc = if es.waiters.waiters(QueueKind::RcvArray, qp, flags) {
            Err(FlowError::Again)
        } else {
            es.groups.allocate(&rec.pagesets).map_err(FlowError::from)
        };
        let alloc = match alloc {
            Ok(a) => a,
            Err(e @ FlowError::Again) => {
                es.waiters
                    .enqueue(QueueKind::RcvArray, qp, flags, &rcd.dev)?;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let prog = es
            .groups
            .program(&mut es.chip, &alloc, &rec.pagesets, pmtu)?;
        rec.alloc = alloc;
        rec.tid_entries = prog.tid_entries;
        rec.npkts = prog.npkts;
        rec.idx = flow.index;
        rec.pkt = 0;
        rec.tid_idx = 0;
        rec.tid_offset = 0;
        rec.sent = 0;
        rec.resync_npkts = 0;
        let spsn = flow.psn;
        rec.psns = SegmentPsns {
            generation: flow.generation,
            spsn,
            lpsn: spsn.wrapping_add(prog.npkts).wrapping_sub(1),
            r_next_psn: FlowPsn::new(flow.generation, spsn),
            ib_spsn: Psn::new(0),
            ib_lpsn: Psn::new(0),
        };
        flow.psn = flow.psn.wrapping_add(prog.npkts);
        es.waiters.dequeue(QueueKind::RcvArray, qp, flags);
        es.waiters.first(QueueKind::RcvArray)
    };
    wake.schedule(token, &rcd.sched);
    req.setup_head = ring_next(head);
    Ok(())
}

/// Tears down the oldest segment of `req`: releases its RcvArray entries,
/// unmaps its buffers, forgets its page sets and advances `clear_tail`;
/// then wakes the RcvArray queue's head (directly if it is this QP).
/// Kernel: `hfi1_kern_exp_rcv_clear()`.
///
/// The record's allocation is forgotten under `exp_lock`, so a second
/// clear of the same record cannot free the entries twice.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, `req`); takes `exp_lock`.
///
/// # Errors
///
/// [`FlowError::Invalid`] on an empty ring. [`FlowError::Alloc`] if the
/// groups refuse the release (a record that does not match them: a bug
/// the sim's tests would show); the rest of the teardown still happens.
pub fn exp_rcv_clear<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    req: &mut TidRequest<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
) -> Result<(), FlowError> {
    let QpLocked {
        flags,
        flow: _,
        token,
    } = qp_locked;
    let tail = req.clear_tail;
    if ring_count(req.setup_head, tail) == 0 {
        return Err(FlowError::Invalid);
    }
    let ring = req.flows.as_mut().ok_or(FlowError::NoFlowRecords)?;
    let rec = ring.get_mut(usize::from(tail)).ok_or(FlowError::Invalid)?;
    let (wake, released) = {
        let mut guard = rcd.exp_lock.lock(token);
        let es = &mut *guard;
        let alloc = core::mem::take(&mut rec.alloc);
        let released: Result<(), AllocError> = if alloc.is_empty() {
            Ok(())
        } else {
            es.groups.unprogram(&mut es.chip, &alloc)
        };
        (es.waiters.first(QueueKind::RcvArray), released)
    };
    rec.unmap(&rcd.dma);
    rec.pagesets.clear();
    req.clear_tail = ring_next(tail);
    wake.deliver(qp, flags, token, &rcd.sched);
    released.map_err(FlowError::from)
}

/// Tears down every segment of `req`, then abandons a setup in progress
/// (a segment whose page sets were found and mapped by an
/// [`exp_rcv_setup`] that then had to wait): its buffers are unmapped and
/// the SGE walk rewinds to its start.
/// Kernel: `hfi1_kern_exp_rcv_clear_all()`; the kernel leaves the pending
/// segment's mappings in place, which leaks them when the QP is destroyed
/// while it waits.
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
    let QpLocked { flags, flow, token } = qp_locked;
    while req.in_flight() != 0 {
        let again = QpLocked {
            flags: &mut *flags,
            flow: &mut *flow,
            token: &mut *token,
        };
        if exp_rcv_clear(rcd, req, qp, again).is_err() {
            break;
        }
    }
    let head = req.setup_head;
    if let Some(rec) = req.flow_mut(head) {
        if !rec.pagesets.is_empty() {
            rec.unmap(&rcd.dma);
            rec.pagesets.clear();
            let start = rec.start;
            req.cursor = start;
        }
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

    #[test]
    fn ring_arithmetic() {
        assert_eq!((ring_count(3, 1), ring_space(3, 1)), (2, 5));
        assert_eq!((ring_count(1, 3), ring_space(1, 3)), (6, 1));
        assert_eq!((ring_count(5, 5), ring_space(5, 5)), (0, 7));
        assert_eq!(ring_next(7), 0);
    }
}
