// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Segment setup and teardown (`hfi1_kern_exp_rcv_setup()` / `_clear()`), written
//! once over the traits a request and its flow records are reached
//! through: [`FlowRingStore`] (a request's ring, `struct
//! tid_rdma_request`), [`SegmentRecord`] (one flow record, `struct
//! tid_rdma_flow`) and [`PageWalk`] (the request's scatter list). The
//! software platform implements them on [`TidRequest`](crate::TidRequest)
//! and [`FlowRecord`](crate::FlowRecord); the kernel platform on the
//! driver's own structures.
//!
//! # Where this departs from the driver
//!
//! - **A failed DMA mapping is seen.** The driver's `dma_map_flow()`
//!   stores `dma_map_page()`'s result in the 48-bit bitfield
//!   `pset->addr` and then tests the field with `dma_mapping_error()`:
//!   the truncated error value never equals `DMA_MAPPING_ERROR`, so the
//!   driver never sees a failure, and programs the RcvArray with the
//!   truncated error value as the buffer's address. Here the result of
//!   the map call itself is tested ([`map_flow`]); on failure the QP waits
//!   for memory (`hfi1_wait_kmem()`) as the driver's code intends. Tests:
//!   `tests/regressions.rs` `dma_map_failure_waits_for_memory_and_resumes`;
//!   kmod-glue's `a_mapping_failure_is_seen_in_the_driver_record`.
//! - **A failed mapping unmaps only what it mapped.** The driver's
//!   `dma_unmap_flow()` (unreachable there after a failure, see above)
//!   unmaps every page set with a count and an address: after a failure
//!   at set k, the error value in set k, and in the sets after it
//!   whatever addresses an earlier segment of the same record left there,
//!   long unmapped (or a fresh record's uninitialised contents: the driver
//!   `kmalloc`s the records and initialises only the first set's mapped
//!   bit). Here a failure unmaps the sets before k, which that call
//!   mapped ([`map_flow`]), and a clear the non-filler sets it marked
//!   mapped ([`unmap_flow`]). Test: kmod-glue's
//!   `a_failed_mapping_unmaps_only_what_it_mapped`.
//! - **`clear_all` also clears a setup that had to wait.** A segment whose
//!   page sets were found and mapped by a [`setup_segment_with`] that
//!   then had to wait (queued for RcvArray space) keeps its mapping in the
//!   driver, which `hfi1_kern_exp_rcv_clear_all()` leaves in place; the
//!   request is then given up (every caller of `clear_all` in the driver
//!   completes it in error or errors the QP, and its flow records are
//!   freed by `__trdma_clean_swqe()`), and the mapping is never undone.
//!   Here [`clear_all_segments_with`] unmaps that segment and forgets its
//!   page sets, as [`clear_segment_with`] does for a segment that was set
//!   up. (Keeping the page sets for a retry would map them again from the
//!   QP's page array, which another request of the QP may have overwritten
//!   meanwhile; the driver never retries after `clear_all`.) Test:
//!   `tests/regressions.rs` `clear_all_unmaps_a_setup_that_waited`.
//! - A segment with no pages (a scatter list already walked to its end) is
//!   refused ([`FlowError::Invalid`]): the driver's callers never ask for
//!   one.
//!
//! # Locking
//!
//! Every function here is called with the request's QP's `s_lock` held
//! (a [`QpLocked`], and `&mut` to the request, which it guards) and takes
//! the context's `exp_lock` inside.

use arrayvec::ArrayVec;
use hfi1_hal::consts::{MAX_SEGMENT_PAGES, PAGE_SIZE};
use hfi1_hal::services::DmaMap;
use hfi1_hal::{FlowIndex, FlowPsn, Generation};
use qp_wait::QueueKind;
use qp_wait::store as wait;
use tid_alloc::groups::{NodeList, PageSetSource, ProgramSink, alloc_tids, program_rcvarray};
use tid_alloc::{AllocError, PageSet, groups};

use crate::FlowError;
use crate::ctxt::{Context, ExpStore, QpLocked};
use crate::flows::QpFlow;
use crate::segment::{ring_count, ring_next, ring_space};

/// What setup writes into a record's flow state. Kernel: the
/// `memset(&flow->flow_state, 0, ..)` and the fields set after it in
/// `hfi1_kern_exp_rcv_setup()`, and `flow->idx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSetup {
    /// The QP's hardware flow. Kernel: `flow->idx =
    /// qpriv->flow_state.index`.
    pub idx: Option<FlowIndex>,
    /// Its generation. Kernel: `flow_state.generation`.
    pub generation: Generation,
    /// First flow sequence. Kernel: `flow_state.spsn`.
    pub spsn: u32,
    /// Last flow sequence (`spsn + npkts - 1`). Kernel: `flow_state.lpsn`.
    pub lpsn: u32,
    /// The full flow PSN of `spsn`. Kernel: `flow_state.r_next_psn`.
    pub r_next_psn: FlowPsn,
}

/// One segment's flow record, wherever it lives. Kernel:
/// `struct tid_rdma_flow`.
///
/// # Locking
///
/// Part of the request, guarded by its QP's `s_lock`.
pub trait SegmentRecord {
    /// Where the chosen TID groups go. Kernel: `tnode[]`, `tnode_cnt`.
    type Nodes<'a>: NodeList
    where
        Self: 'a;
    /// The page sets as programming reads them.
    type Sets<'a>: PageSetSource
    where
        Self: 'a;
    /// Where the TID entries and packet count go. Kernel: `tid_entry[]`,
    /// `tidcnt`, `npkts`.
    type Sink<'a>: ProgramSink
    where
        Self: 'a;

    /// True once the segment's page sets are found. Kernel:
    /// `flow->npagesets != 0`.
    fn has_pagesets(&self) -> bool;

    /// Finds the page sets of `pages` (the 4 KiB variant iff `pmtu` is
    /// 4096) and keeps them, with the segment's length. Kernel:
    /// `tid_rdma_find_phys_blocks_{4k,8k}()` into `flow->pagesets`,
    /// `flow->npagesets`, `flow->length`.
    ///
    /// # Errors
    ///
    /// What `tid_alloc::find_phys_blocks` refuses (pages the driver never
    /// passes).
    fn find_pagesets(&mut self, pages: &[u64], pmtu: u32, length: u32) -> Result<(), AllocError>;

    /// Forgets the page sets. Kernel: `hfi1_tid_rdma_reset_flow()`
    /// (`flow->npagesets = 0`).
    fn forget_pagesets(&mut self);

    /// Page sets.
    fn pageset_count(&self) -> usize;

    /// Page set `i`, with the page address of its first page and its bus
    /// address.
    fn pageset(&self, i: usize) -> Option<PageSet>;

    /// True if the record counts as mapped. Kernel: `dma_mapped()`
    /// (`pagesets[0].mapped`).
    fn is_mapped(&self) -> bool;

    /// True if page set `i` is mapped. Kernel: `pagesets[i].mapped`.
    fn is_set_mapped(&self, i: usize) -> bool;

    /// Page set `i` is now mapped at `bus`. Kernel: `pset->addr =
    /// dma_map_page(..); pset->mapped = 1`.
    fn set_mapped(&mut self, i: usize, bus: u64);

    /// Page set `i` is no longer mapped (its bus address stays, as the
    /// driver's does). Kernel: `pset->mapped = 0`.
    fn set_unmapped(&mut self, i: usize);

    /// The chosen TID groups, to fill.
    fn nodes_mut(&mut self) -> Self::Nodes<'_>;

    /// The chosen groups, the page sets and the TID entry sink at once,
    /// for programming.
    fn program_parts(&mut self) -> (Self::Nodes<'_>, Self::Sets<'_>, Self::Sink<'_>);

    /// Packets the segment takes. Kernel: `flow->npkts`.
    fn npkts(&self) -> u32;

    /// Writes the segment's flow state (every other field of it zeroed)
    /// and flow index; the protocol's cursors (`pkt`, `tid_idx`, `sent`,
    /// ...) are left to the protocol.
    fn set_flow(&mut self, setup: &FlowSetup);
}

/// A request's ring of flow records, wherever it lives. Kernel: `struct
/// tid_rdma_request` (`flows`, `setup_head`, `clear_tail`, `n_flows`,
/// `seg_len`) and the path MTU of its QP (`req->qp->pmtu`).
///
/// # Locking
///
/// Guarded by the request's QP's `s_lock`.
pub trait FlowRingStore {
    /// One flow record.
    type Record<'a>: SegmentRecord
    where
        Self: 'a;

    /// Next record to set up. Kernel: `setup_head`.
    fn setup_head(&self) -> u16;
    /// Sets it.
    fn set_setup_head(&mut self, v: u16);
    /// Next record to clear. Kernel: `clear_tail`.
    fn clear_tail(&self) -> u16;
    /// Sets it.
    fn set_clear_tail(&mut self, v: u16);
    /// Segments allowed in flight. Kernel: `n_flows`.
    fn n_flows(&self) -> u16;
    /// Bytes per segment. Kernel: `seg_len`.
    fn seg_len(&self) -> u32;
    /// The QP's path MTU (4096 picks the 4 KiB page-set variant).
    fn pmtu(&self) -> u32;
    /// Record `i`, or `None` if the records are not allocated.
    fn record(&mut self, i: u16) -> Option<Self::Record<'_>>;
}

/// A request's scatter list, walked one segment at a time.
pub trait PageWalk {
    /// Walks up to `seg_len` bytes from where the last call stopped, one
    /// page at a time, into `pages`; returns the bytes found. Kernel:
    /// `kern_find_pages()`.
    fn find_pages(&mut self, seg_len: u32, pages: &mut ArrayVec<u64, MAX_SEGMENT_PAGES>) -> u32;
}

/// Maps every non-filler page set; on failure unmaps what this call
/// mapped and gives [`FlowError::NoMemory`]. Kernel: `dma_map_flow()`.
/// Called only on a record that is not mapped.
pub fn map_flow<R: SegmentRecord + ?Sized>(
    rec: &mut R,
    dma: &impl DmaMap,
) -> Result<(), FlowError> {
    for i in 0..rec.pageset_count() {
        let Some(ps) = rec.pageset(i) else { break };
        if ps.is_filler() {
            continue;
        }
        match dma.map(ps.addr, u32::from(ps.count).wrapping_mul(PAGE_SIZE)) {
            Ok(bus) => rec.set_mapped(i, bus),
            Err(_) => {
                // The sets before `i` are the ones this call mapped; the
                // mapped bits of those after it are not to be trusted (the
                // driver initialises only the first set's).
                unmap_sets(rec, dma, i);
                return Err(FlowError::NoMemory);
            }
        }
    }
    Ok(())
}

/// Unmaps every page set that is mapped. Kernel: `dma_unmap_flow()`,
/// which decides by count and address instead (see the module doc).
pub fn unmap_flow<R: SegmentRecord + ?Sized>(rec: &mut R, dma: &impl DmaMap) {
    unmap_sets(rec, dma, rec.pageset_count());
}

/// Unmaps the mapped non-filler sets among the first `n` (a filler's
/// mapped bit is never written, in the driver's records).
fn unmap_sets<R: SegmentRecord + ?Sized>(rec: &mut R, dma: &impl DmaMap, n: usize) {
    for i in 0..n.min(rec.pageset_count()) {
        let Some(ps) = rec.pageset(i) else { break };
        if ps.is_filler() || !rec.is_set_mapped(i) {
            continue;
        }
        dma.unmap(ps.dma, u32::from(ps.count).wrapping_mul(PAGE_SIZE));
        rec.set_unmapped(i);
    }
}

/// Finds and maps a segment's page sets unless an earlier attempt already
/// did. Kernel: `kern_get_phys_blocks()`.
fn get_phys_blocks<R: SegmentRecord + ?Sized>(
    rec: &mut R,
    walk: &mut (impl PageWalk + ?Sized),
    seg_len: u32,
    pmtu: u32,
    dma: &impl DmaMap,
) -> Result<(), FlowError> {
    if rec.has_pagesets() {
        if !rec.is_mapped() {
            return map_flow(rec, dma);
        }
        return Ok(());
    }
    let mut pages = ArrayVec::new();
    let length = walk.find_pages(seg_len, &mut pages);
    if pages.is_empty() {
        return Err(FlowError::Invalid);
    }
    rec.find_pagesets(&pages, pmtu, length)?;
    map_flow(rec, dma)
}

/// Sets up the next segment of `req`. Kernel: `hfi1_kern_exp_rcv_setup()`.
///
/// Page sets, DMA mapping, RcvArray entries and the flow record's
/// sequence numbers; `walk` is the request's scatter list.
///
/// 1. [`FlowError::Invalid`] if the ring is full or already holds
///    `n_flows` segments.
/// 2. Unless an earlier attempt already did: walk `seg_len` bytes of the
///    scatter list and find the page sets (4 KiB variant iff the path MTU
///    is 4096). Map them unless mapped; on failure (which the driver does
///    not see, module doc) the QP waits for memory (`hfi1_wait_kmem()`:
///    the scheduler's memory-wait list, which wakes it later) and
///    [`FlowError::NoMemory`] is returned; the page sets stay for the
///    retry.
/// 3. Under `exp_lock`: if others wait on the RcvArray queue ahead of this
///    QP, or the TID groups are short, queue the QP and return
///    [`FlowError::Again`]. Else program the entries, fill the record
///    (flow index and generation from the QP, start sequence = the QP's
///    flow PSN, last = start + packets - 1, next expected = the full flow
///    PSN of the start), advance the QP's flow PSN, take the QP off the
///    queue it waits on and read the RcvArray queue's head.
/// 4. After unlocking: schedule the head's wake-up; advance `setup_head`.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, and `req` which it guards); takes
/// `exp_lock`.
///
/// # Errors
///
/// As above; [`FlowError::NoFlowRecords`] without flow records;
/// [`FlowError::Alloc`] for page lists `tid-alloc` rejects (unaligned or
/// null pages); [`FlowError::Wait`] if the QP cannot be queued.
pub fn setup_segment_with<C, Q, F, W>(
    rcd: &C,
    req: &mut Q,
    qp: &C::Ref,
    qp_locked: QpLocked<'_, '_, F>,
    walk: &mut W,
) -> Result<(), FlowError>
where
    C: Context,
    Q: FlowRingStore + ?Sized,
    F: QpFlow + ?Sized,
    W: PageWalk + ?Sized,
{
    let QpLocked { flags, flow, token } = qp_locked;
    let (head, tail) = (req.setup_head(), req.clear_tail());
    if ring_space(head, tail) == 0 || ring_count(head, tail) >= req.n_flows() {
        return Err(FlowError::Invalid);
    }
    let (seg_len, pmtu) = (req.seg_len(), req.pmtu());
    let mut rec = req.record(head).ok_or(FlowError::NoFlowRecords)?;
    if let Err(e) = get_phys_blocks(&mut rec, walk, seg_len, pmtu, rcd.dma()) {
        if e == FlowError::NoMemory {
            qp_wait::wait_kmem(qp, flags, rcd.sched());
        }
        return Err(e);
    }
    let wake = {
        let mut guard = rcd.exp_lock().lock(token);
        let es = guard.split();
        let nsets = rec.pageset_count();
        let alloc = if wait::waiters(&*es.waits, QueueKind::RcvArray, qp, flags) {
            Err(FlowError::Again)
        } else {
            alloc_tids(&*es.groups, nsets, &mut rec.nodes_mut()).map_err(FlowError::from)
        };
        match alloc {
            Ok(()) => {}
            Err(e @ FlowError::Again) => {
                wait::enqueue(es.waits, QueueKind::RcvArray, qp, flags, rcd.dev())?;
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        {
            let (nodes, sets, mut sink) = rec.program_parts();
            program_rcvarray(es.groups, es.chip, &nodes, &sets, pmtu, &mut sink)?;
        }
        let (generation, spsn) = (flow.generation(), flow.psn());
        let npkts = rec.npkts();
        rec.set_flow(&FlowSetup {
            idx: flow.index(),
            generation,
            spsn,
            lpsn: spsn.wrapping_add(npkts).wrapping_sub(1),
            r_next_psn: FlowPsn::new(generation, spsn),
        });
        flow.set_psn(spsn.wrapping_add(npkts));
        wait::dequeue(es.waits, QueueKind::RcvArray, qp, flags);
        wait::first(&*es.waits, QueueKind::RcvArray)
    };
    wake.schedule(token, rcd.sched());
    drop(rec);
    req.set_setup_head(ring_next(head));
    Ok(())
}

/// Tears down the oldest segment of `req`. Kernel: `hfi1_kern_exp_rcv_clear()`.
///
/// Releases its RcvArray entries (and forgets them under `exp_lock`, so a
/// second clear cannot free them twice), unmaps its buffers, forgets its
/// page sets and advances `clear_tail`; then wakes the RcvArray queue's
/// head (directly if it is this QP).
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, `req`); takes `exp_lock`.
///
/// # Errors
///
/// [`FlowError::Invalid`] on an empty ring; [`FlowError::NoFlowRecords`]
/// without flow records.
pub fn clear_segment_with<C, Q, F>(
    rcd: &C,
    req: &mut Q,
    qp: &C::Ref,
    qp_locked: QpLocked<'_, '_, F>,
) -> Result<(), FlowError>
where
    C: Context,
    Q: FlowRingStore + ?Sized,
    F: ?Sized,
{
    let QpLocked { flags, token, .. } = qp_locked;
    let tail = req.clear_tail();
    if ring_count(req.setup_head(), tail) == 0 {
        return Err(FlowError::Invalid);
    }
    let mut rec = req.record(tail).ok_or(FlowError::NoFlowRecords)?;
    let wake = {
        let mut guard = rcd.exp_lock().lock(token);
        let es = guard.split();
        let mut nodes = rec.nodes_mut();
        groups::unprogram_rcvarray(es.groups, es.chip, &nodes);
        nodes.clear();
        wait::first(&*es.waits, QueueKind::RcvArray)
    };
    unmap_flow(&mut rec, rcd.dma());
    rec.forget_pagesets();
    drop(rec);
    req.set_clear_tail(ring_next(tail));
    wake.deliver(qp, flags, token, rcd.sched());
    Ok(())
}

/// Tears down every segment of `req`. Kernel: `hfi1_kern_exp_rcv_clear_all()`.
///
/// Then unmaps and forgets a setup that had to wait (see the module doc:
/// the driver leaves its mapping in place). The request is given up
/// afterwards.
///
/// # Locking
///
/// As [`clear_segment_with`].
pub fn clear_all_segments_with<C, Q, F>(
    rcd: &C,
    req: &mut Q,
    qp: &C::Ref,
    mut qp_locked: QpLocked<'_, '_, F>,
) where
    C: Context,
    Q: FlowRingStore + ?Sized,
    F: ?Sized,
{
    while ring_count(req.setup_head(), req.clear_tail()) != 0 {
        if clear_segment_with(rcd, req, qp, qp_locked.again()).is_err() {
            break;
        }
    }
    let head = req.setup_head();
    if let Some(mut rec) = req.record(head) {
        if rec.has_pagesets() {
            unmap_flow(&mut rec, rcd.dma());
            rec.forget_pagesets();
        }
    }
}

/// The records a reference to a record stands for, so a ring can hand out
/// `&mut` to records it owns.
impl<T: SegmentRecord + ?Sized> SegmentRecord for &mut T {
    type Nodes<'a>
        = T::Nodes<'a>
    where
        Self: 'a;
    type Sets<'a>
        = T::Sets<'a>
    where
        Self: 'a;
    type Sink<'a>
        = T::Sink<'a>
    where
        Self: 'a;

    fn has_pagesets(&self) -> bool {
        (**self).has_pagesets()
    }

    fn find_pagesets(&mut self, pages: &[u64], pmtu: u32, length: u32) -> Result<(), AllocError> {
        (**self).find_pagesets(pages, pmtu, length)
    }

    fn forget_pagesets(&mut self) {
        (**self).forget_pagesets();
    }

    fn pageset_count(&self) -> usize {
        (**self).pageset_count()
    }

    fn pageset(&self, i: usize) -> Option<PageSet> {
        (**self).pageset(i)
    }

    fn is_mapped(&self) -> bool {
        (**self).is_mapped()
    }

    fn is_set_mapped(&self, i: usize) -> bool {
        (**self).is_set_mapped(i)
    }

    fn set_mapped(&mut self, i: usize, bus: u64) {
        (**self).set_mapped(i, bus);
    }

    fn set_unmapped(&mut self, i: usize) {
        (**self).set_unmapped(i);
    }

    fn nodes_mut(&mut self) -> T::Nodes<'_> {
        (**self).nodes_mut()
    }

    fn program_parts(&mut self) -> (T::Nodes<'_>, T::Sets<'_>, T::Sink<'_>) {
        (**self).program_parts()
    }

    fn npkts(&self) -> u32 {
        (**self).npkts()
    }

    fn set_flow(&mut self, setup: &FlowSetup) {
        (**self).set_flow(setup);
    }
}
