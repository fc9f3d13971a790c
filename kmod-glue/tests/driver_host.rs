// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The routed stateful functions on a driver built in user space: the
//! driver's structures in their C layout (`hfi1_hal::layout`), its
//! services a table of recording callbacks that keep the books the kernel
//! keeps (held locks, QP references, live DMA mappings, allocations).
//!
//! The in-kernel differential test (`hfi1/hfi1_tid_sdiff*.c`) compares
//! the routed functions with the driver's own C, and so cannot inject a
//! DMA mapping failure: the driver's C never sees one (see
//! `tid_flow::setup`, "Where this departs from the driver"). These tests
//! pin what the routed functions do then.

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::ptr;

use hfi1_hal::consts::{MAX_FLOWS, NUM_TID_FLOWS, PAGE_SIZE, S_WAIT_KMEM};
use hfi1_hal::layout::{
    CExpTidSet, CListHead, CRvtSge, CRvtSgeState, CTidFlowState, CTidGroup, CTidQueue,
    CTidRdmaFlow, CTidRdmaPageset, CTidRdmaRequest, DMA_FROM_DEVICE,
};
use kmod_glue::driver::entry::{
    hfi1_tid_drv_alloc_flows, hfi1_tid_drv_clear_hw_flow, hfi1_tid_drv_exp_rcv_clear,
    hfi1_tid_drv_exp_rcv_init, hfi1_tid_drv_exp_rcv_setup, hfi1_tid_drv_free_flows,
    hfi1_tid_drv_init_ctxt_generations, hfi1_tid_drv_setup_hw_flow,
};
use kmod_glue::driver::ops::{DrvOps, DrvQpView, DrvRcdView};

/// The kernel's `DMA_MAPPING_ERROR`.
const DMA_MAPPING_ERROR: u64 = !0;
/// `-ENOMEM`.
const ENOMEM: i32 = -12;
/// Pages per segment in these tests, each its own page set.
const SEG_PAGES: usize = 4;

/// What the driver's services were asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Map {
        page: u64,
        size: usize,
        bus: u64,
    },
    Unmap {
        bus: u64,
        size: usize,
    },
    PutTid {
        index: u32,
        pa: u64,
    },
    WaitKmem,
    /// A service asked for something the kernel would not allow (a
    /// callback cannot panic: it is `extern "C"`).
    Bad(String),
}

thread_local! {
    static LOG: RefCell<Vec<Ev>> = const { RefCell::new(Vec::new()) };
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    static LIVE: RefCell<HashSet<u64>> = RefCell::new(HashSet::new());
    static ALLOCS: RefCell<HashMap<usize, Layout>> = RefCell::new(HashMap::new());
    /// The map call (counted from 0) that fails, if any.
    static FAIL_AT: Cell<Option<u32>> = const { Cell::new(None) };
    static MAPS: Cell<u32> = const { Cell::new(0) };
    static NEXT_BUS: Cell<u64> = const { Cell::new(0x8_0000_0000) };
    static REFS: Cell<i64> = const { Cell::new(1) };
    static WORLD: Cell<*mut World> = const { Cell::new(ptr::null_mut()) };
}

fn log(e: Ev) {
    LOG.with(|l| l.borrow_mut().push(e));
}

/// What was logged since the last call; none of it a violation.
fn take_log() -> Vec<Ev> {
    let log = LOG.with(|l| std::mem::take(&mut *l.borrow_mut()));
    let bad: Vec<_> = log.iter().filter(|e| matches!(e, Ev::Bad(_))).collect();
    assert!(bad.is_empty(), "{bad:?}");
    log
}

unsafe extern "C" fn lock(l: *mut c_void) -> usize {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.contains(&(l as usize)) {
            log(Ev::Bad(format!("recursive locking of {l:?}")));
        }
        h.push(l as usize);
    });
    0
}

unsafe extern "C" fn unlock(l: *mut c_void, _flags: usize) {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        match h.iter().position(|&x| x == l as usize) {
            Some(at) => {
                h.remove(at);
            }
            None => log(Ev::Bad(format!("unlock of {l:?}, not held"))),
        }
    });
}

unsafe extern "C" fn assert_held(l: *mut c_void) {
    if !HELD.with(|h| h.borrow().contains(&(l as usize))) {
        log(Ev::Bad(format!("lockdep_assert_held({l:?}): not held")));
    }
}

unsafe extern "C" fn qp_get(_qp: *mut c_void) {
    REFS.with(|r| r.set(r.get() + 1));
}

unsafe extern "C" fn qp_put(_qp: *mut c_void) {
    REFS.with(|r| r.set(r.get() - 1));
}

unsafe extern "C" fn qp_of_wait(_link: *mut CListHead) -> *mut c_void {
    WORLD.with(Cell::get).cast()
}

unsafe extern "C" fn qp_view(_qp: *mut c_void, view: *mut DrvQpView) {
    // SAFETY: the test's one world is alive while the driver runs.
    unsafe { *view = (*WORLD.with(Cell::get)).qp_view() };
}

unsafe extern "C" fn queue_work_on(_cpu: i32, _wq: *mut c_void, _w: *mut c_void) -> bool {
    log(Ev::Bad("no QP waits for TID space in these tests".into()));
    false
}

unsafe extern "C" fn schedule_send(_qp: *mut c_void) {}

unsafe extern "C" fn do_send(_qp: *mut c_void, _in_thread: bool) {}

/// `hfi1_wait_kmem()`: the QP waits for the memory timer.
unsafe extern "C" fn wait_kmem(_qp: *mut c_void, s_flags: *mut u32) {
    // SAFETY: `&qp->s_flags`, under the held s_lock.
    unsafe { *s_flags |= S_WAIT_KMEM };
    log(Ev::WaitKmem);
}

unsafe extern "C" fn put_tid(_dd: *mut c_void, index: u32, _ty: u32, pa: u64, _order: u16) {
    log(Ev::PutTid { index, pa });
}

unsafe extern "C" fn wc_fill(_dd: *mut c_void, _index: u32) {}

unsafe extern "C" fn write_csr(_dd: *mut c_void, _ctxt: i32, _offset: u32, _value: u64) {}

unsafe extern "C" fn read_csr(_dd: *mut c_void, _ctxt: i32, _offset: u32) -> u64 {
    0
}

/// `dma_map_page()`: a fresh bus address, or `DMA_MAPPING_ERROR` for the
/// call `FAIL_AT` names.
unsafe extern "C" fn dma_map(
    _dev: *mut c_void,
    page: *mut c_void,
    offset: usize,
    size: usize,
    dir: i32,
) -> u64 {
    if (offset, dir) != (0, DMA_FROM_DEVICE) {
        log(Ev::Bad(format!("dma_map_page(offset {offset}, dir {dir})")));
    }
    let n = MAPS.with(|m| m.replace(m.get() + 1));
    let bus = if FAIL_AT.with(Cell::get) == Some(n) {
        DMA_MAPPING_ERROR
    } else {
        let b = NEXT_BUS.with(|b| b.replace(b.get() + 0x10_0000));
        LIVE.with(|l| l.borrow_mut().insert(b));
        b
    };
    log(Ev::Map {
        page: page as u64,
        size,
        bus,
    });
    bus
}

/// `dma_mapping_error()`, as the kernel's: the address is the error value.
unsafe extern "C" fn dma_error(_dev: *mut c_void, addr: u64) -> i32 {
    i32::from(addr == DMA_MAPPING_ERROR)
}

/// `dma_unmap_page()`: only a live mapping may be unmapped.
unsafe extern "C" fn dma_unmap(_dev: *mut c_void, bus: u64, size: usize, dir: i32) {
    if !LIVE.with(|l| l.borrow_mut().remove(&bus)) || dir != DMA_FROM_DEVICE {
        log(Ev::Bad(format!(
            "dma_unmap_page({bus:#x}, {size}, {dir}): not mapped"
        )));
    } else {
        log(Ev::Unmap { bus, size });
    }
}

/// `virt_to_page()` / `page_address()`: a page is named by its address.
unsafe extern "C" fn page_of(vaddr: u64) -> *mut c_void {
    vaddr as *mut c_void
}

unsafe extern "C" fn address_of(page: *mut c_void) -> u64 {
    page as u64
}

unsafe extern "C" fn mr_lkey(_mr: *mut c_void) -> u32 {
    0
}

unsafe extern "C" fn mr_seg(_mr: *mut c_void, _m: u32, _n: u32, _v: *mut u64, _l: *mut u64) {
    log(Ev::Bad("the tests' SGEs have no memory region map".into()));
}

/// `kmalloc_node()`: uninitialised, as the kernel's (filled with a pattern).
unsafe extern "C" fn kmalloc(size: usize, _gfp: u32, _node: i32) -> *mut c_void {
    let Ok(l) = Layout::from_size_align(size.max(1), 16) else {
        return ptr::null_mut();
    };
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc(l) };
    if p.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `p` has `size` bytes.
    unsafe { p.write_bytes(0xa5, size) };
    ALLOCS.with(|a| a.borrow_mut().insert(p as usize, l));
    p.cast()
}

unsafe extern "C" fn kcalloc(n: usize, size: usize, gfp: u32, node: i32) -> *mut c_void {
    let Some(bytes) = n.checked_mul(size) else {
        return ptr::null_mut();
    };
    // SAFETY: as kmalloc.
    let p = unsafe { kmalloc(bytes, gfp, node) };
    if p.is_null() {
        return p;
    }
    // SAFETY: `p` has `bytes` bytes.
    unsafe { p.cast::<u8>().write_bytes(0, bytes) };
    p
}

unsafe extern "C" fn kfree(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    match ALLOCS.with(|a| a.borrow_mut().remove(&(p as usize))) {
        // SAFETY: allocated by `kmalloc` with this layout.
        Some(l) => unsafe { std::alloc::dealloc(p.cast(), l) },
        None => log(Ev::Bad(format!("kfree({p:?}): not allocated"))),
    }
}

unsafe extern "C" fn random_u32() -> u32 {
    0x5_4321
}

unsafe extern "C" fn set_ctxt_jkey(_dd: *mut c_void, _rcd: *mut c_void, _jkey: u16) {}

const OPS: DrvOps = DrvOps {
    lock: Some(lock),
    unlock: Some(unlock),
    assert_held: Some(assert_held),
    qp_get: Some(qp_get),
    qp_put: Some(qp_put),
    qp_of_wait: Some(qp_of_wait),
    qp_view: Some(qp_view),
    queue_work_on: Some(queue_work_on),
    schedule_send: Some(schedule_send),
    do_send: Some(do_send),
    wait_kmem: Some(wait_kmem),
    put_tid: Some(put_tid),
    wc_fill: Some(wc_fill),
    write_csr: Some(write_csr),
    read_csr: Some(read_csr),
    dma_map: Some(dma_map),
    dma_error: Some(dma_error),
    dma_unmap: Some(dma_unmap),
    page_of: Some(page_of),
    address_of: Some(address_of),
    mr_lkey: Some(mr_lkey),
    mr_seg: Some(mr_seg),
    kmalloc: Some(kmalloc),
    kcalloc: Some(kcalloc),
    kfree: Some(kfree),
    random_u32: Some(random_u32),
    set_ctxt_jkey: Some(set_ctxt_jkey),
};

/// One receive context and one QP with one request, in the driver's
/// layout; the test's `struct hfi1_ctxtdata`, `struct rvt_qp` and
/// `struct hfi1_qp_priv` (only the fields the views point to).
#[repr(C)]
struct World {
    flow_mask: u64,
    flows: [CTidFlowState; NUM_TID_FLOWS],
    groups: *mut CTidGroup,
    lists: [CExpTidSet; 3],
    flow_queue: CTidQueue,
    rarr_queue: CTidQueue,
    jkey: u16,
    n_tidwait: u64,
    exp_lock: u64,
    s_lock: u64,
    s_flags: u32,
    flow_state: CTidFlowState,
    tid_wait: CListHead,
    tid_enqueue: u32,
    pages: [*mut c_void; 64],
    req: CTidRdmaRequest,
    ss: CRvtSgeState,
    sg_list: [CRvtSge; SEG_PAGES],
    last: bool,
}

fn init_list(l: *mut CListHead) {
    // SAFETY: a live head of the world.
    unsafe { *l = CListHead { next: l, prev: l } };
}

impl World {
    /// A context of 4 groups with its flows and groups set up as the
    /// driver's context init does, and a QP with flow records.
    fn new() -> Box<World> {
        // SAFETY: every field is an integer, a raw pointer or an array or
        // structure of them, for which all-zero is valid.
        let mut w: Box<World> = Box::new(unsafe { std::mem::zeroed() });
        let p: *mut World = &mut *w;
        WORLD.with(|c| c.set(p));
        for l in &mut w.lists {
            init_list(&mut l.list);
        }
        init_list(&mut w.flow_queue.queue_head);
        init_list(&mut w.rarr_queue.queue_head);
        init_list(&mut w.tid_wait);
        w.flow_state.index = NUM_TID_FLOWS as u8;
        w.flow_state.last_index = NUM_TID_FLOWS as u8;
        w.flow_state.generation = 0xfffff;
        let rcd = w.rcd_view();
        // SAFETY: a live, initialised context, used by this thread alone.
        unsafe {
            assert_eq!(hfi1_tid_drv_exp_rcv_init(&OPS, &rcd, 0, 0), 0);
            hfi1_tid_drv_init_ctxt_generations(&OPS, &rcd);
            assert_eq!(hfi1_tid_drv_alloc_flows(&OPS, &mut w.req, 0, 0), 0);
        }
        // As the driver sets a READ request up.
        w.req.n_flows = 6;
        w.req.seg_len = SEG_PAGES as u32 * PAGE_SIZE;
        // The driver's caller holds the QP's s_lock from here on.
        HELD.with(|h| h.borrow_mut().push(&raw const w.s_lock as usize));
        w
    }

    fn rcd_view(&mut self) -> DrvRcdView {
        DrvRcdView {
            rcd: (self as *mut World).cast(),
            dd: ptr::null_mut(),
            dev: ptr::null_mut(),
            exp_lock: (&raw mut self.exp_lock).cast(),
            flow_mask: &mut self.flow_mask,
            flows: self.flows.as_mut_ptr(),
            groups: &mut self.groups,
            tid_group_list: &mut self.lists[0],
            tid_used_list: &mut self.lists[1],
            tid_full_list: &mut self.lists[2],
            flow_queue: &mut self.flow_queue,
            rarr_queue: &mut self.rarr_queue,
            jkey: &mut self.jkey,
            n_tidwait: &mut self.n_tidwait,
            ctxt: 3,
            expected_base: 64,
            expected_count: 32,
            group_size: 8,
            numa_id: 0,
        }
    }

    fn qp_view(&mut self) -> DrvQpView {
        DrvQpView {
            qp: (self as *mut World).cast(),
            s_lock: (&raw mut self.s_lock).cast(),
            s_flags: &mut self.s_flags,
            flow_state: &mut self.flow_state,
            tid_wait: &mut self.tid_wait,
            tid_enqueue: &mut self.tid_enqueue,
            pages: self.pages.as_mut_ptr(),
            wq: ptr::null_mut(),
            trigger_work: ptr::null_mut(),
            pmtu: 4096,
            cpu: 0,
        }
    }

    /// A scatter list of `SEG_PAGES` one-page SGEs at pages far apart
    /// (so each page is a page set of its own), the `round`th such list.
    fn sges(&mut self, round: u64) {
        let sge = |i: u64| CRvtSge {
            mr: ptr::null_mut(),
            vaddr: (0x10_0000_0000 + round * 0x1000_0000 + i * 0x20_0000) as *mut c_void,
            sge_length: PAGE_SIZE,
            length: PAGE_SIZE,
            m: 0,
            n: 0,
        };
        for (i, s) in self.sg_list.iter_mut().enumerate() {
            *s = sge(i as u64 + 1);
        }
        self.ss = CRvtSgeState {
            sg_list: self.sg_list.as_mut_ptr(),
            sge: sge(0),
            total_len: SEG_PAGES as u32 * PAGE_SIZE,
            num_sge: SEG_PAGES as u8,
        };
        self.req.isge = 0;
    }

    fn page(round: u64, i: u64) -> u64 {
        0x10_0000_0000 + round * 0x1000_0000 + i * 0x20_0000
    }

    fn setup_hw_flow(&mut self) -> i32 {
        let (rcd, qp) = (self.rcd_view(), self.qp_view());
        // SAFETY: the world is live; the s_lock is held (HELD).
        unsafe { hfi1_tid_drv_setup_hw_flow(&OPS, &rcd, &qp) }
    }

    fn setup(&mut self) -> i32 {
        let (rcd, qp) = (self.rcd_view(), self.qp_view());
        // SAFETY: as above; `ss` is the request's scatter list.
        unsafe {
            hfi1_tid_drv_exp_rcv_setup(&OPS, &rcd, &qp, &mut self.req, &mut self.ss, &mut self.last)
        }
    }

    fn clear(&mut self) -> i32 {
        let (rcd, qp) = (self.rcd_view(), self.qp_view());
        // SAFETY: as above.
        unsafe { hfi1_tid_drv_exp_rcv_clear(&OPS, &rcd, &qp, &mut self.req) }
    }

    fn record(&self, i: usize) -> &CTidRdmaFlow {
        assert!(i < MAX_FLOWS);
        // SAFETY: `MAX_FLOWS` records from `alloc_flows`.
        unsafe { &*self.req.flows.add(i) }
    }

    fn sets(&self, i: usize) -> Vec<CTidRdmaPageset> {
        let r = self.record(i);
        r.pagesets[..usize::from(r.npagesets)].to_vec()
    }

    /// Everything released: the hardware flow, the flow records, the
    /// groups; no mapping, allocation or lock left, the QP's one
    /// reference.
    fn finish(mut self: Box<Self>) {
        let (rcd, qp) = (self.rcd_view(), self.qp_view());
        // SAFETY: as above.
        unsafe {
            hfi1_tid_drv_clear_hw_flow(&OPS, &rcd, &qp);
            hfi1_tid_drv_free_flows(&OPS, &mut self.req);
            kfree(self.groups.cast());
        }
        take_log();
        assert_eq!(self.flow_state.index, NUM_TID_FLOWS as u8);
        HELD.with(|h| {
            h.borrow_mut()
                .retain(|&l| l != &raw const self.s_lock as usize)
        });
        assert!(HELD.with(|h| h.borrow().is_empty()), "a lock left held");
        assert!(LIVE.with(|l| l.borrow().is_empty()), "a DMA mapping left");
        assert!(ALLOCS.with(|a| a.borrow().is_empty()), "an allocation left");
        assert_eq!(REFS.with(Cell::get), 1, "QP references");
        WORLD.with(|c| c.set(ptr::null_mut()));
    }
}

/// The bus addresses mapped, unmapped and programmed into the RcvArray,
/// in order.
fn maps(log: &[Ev]) -> Vec<u64> {
    pick(log, |e| matches!(e, Ev::Map { .. }))
}

fn unmaps(log: &[Ev]) -> Vec<u64> {
    pick(log, |e| matches!(e, Ev::Unmap { .. }))
}

fn programmed(log: &[Ev]) -> Vec<u64> {
    pick(log, |e| matches!(e, Ev::PutTid { pa, .. } if *pa != 0))
}

fn pick(log: &[Ev], f: impl Fn(&Ev) -> bool) -> Vec<u64> {
    log.iter()
        .filter(|e| f(e))
        .filter_map(|e| match e {
            Ev::Map { bus, .. } | Ev::Unmap { bus, .. } => Some(*bus),
            Ev::PutTid { pa, .. } => Some(*pa),
            _ => None,
        })
        .collect()
}

/// Kernel: `dma_map_flow()` under `hfi1_kern_exp_rcv_setup()`. A failed
/// `dma_map_page()` is seen: the segment is not set up, what was mapped is
/// unmapped, the QP waits for memory (`hfi1_wait_kmem()`, `-ENOMEM`), and
/// the setup the driver retries once woken maps the found page sets again
/// and programs the RcvArray with real bus addresses. The driver's C tests
/// the 48-bit field it stored the result in, which cannot hold the error
/// value (shown here), so it never sees the failure and programs the
/// truncated error value as a buffer address.
///
/// With the routed map testing the stored field as the driver does
/// (`DrvDma::map` given `CTidRdmaPageset::with_addr(bus).addr()`) the
/// setup returned 0 instead of `-ENOMEM`.
#[test]
fn a_mapping_failure_is_seen_in_the_driver_record() {
    // What the driver's test sees: the error value, truncated to the
    // field's 48 bits, is not the error value.
    let stored = CTidRdmaPageset::default()
        .with_addr(DMA_MAPPING_ERROR)
        .addr();
    assert_eq!(stored, 0xffff_ffff_ffff);
    // SAFETY: the test's callback.
    assert_eq!(unsafe { dma_error(ptr::null_mut(), stored) }, 0);

    let mut w = World::new();
    assert_eq!(w.setup_hw_flow(), 0);
    w.sges(0);
    take_log();
    MAPS.with(|m| m.set(0));
    FAIL_AT.with(|f| f.set(Some(2)));
    assert_eq!(w.setup(), ENOMEM);
    let log = take_log();
    let m = maps(&log);
    assert_eq!(m.len(), 3, "maps up to the failing one: {log:?}");
    assert_eq!(m[2], DMA_MAPPING_ERROR);
    assert_eq!(unmaps(&log), m[..2].to_vec(), "what was mapped is unmapped");
    assert!(log.contains(&Ev::WaitKmem));
    assert_ne!(w.s_flags & S_WAIT_KMEM, 0, "the QP waits for memory");
    assert!(programmed(&log).is_empty(), "nothing programmed: {log:?}");
    assert_eq!(w.req.setup_head, 0, "no segment set up");
    let sets = w.sets(0);
    assert_eq!(sets.len(), SEG_PAGES, "the found page sets are kept");
    // The record is not mapped (`dma_mapped()`: the first set's bit), nor
    // is any set this call mapped; the bits of the sets from the failed
    // one on are still what `kmalloc_node()` left.
    assert!(sets[..2].iter().all(|p| !p.mapped()));

    // The memory timer wakes the QP; the driver sets the segment up again.
    w.s_flags &= !S_WAIT_KMEM;
    FAIL_AT.with(|f| f.set(None));
    assert_eq!(w.setup(), 0);
    let log = take_log();
    let m = maps(&log);
    assert_eq!(m.len(), SEG_PAGES, "every set mapped once: {log:?}");
    let pages: Vec<u64> = log
        .iter()
        .filter_map(|e| match e {
            Ev::Map { page, size, .. } => {
                assert_eq!(*size, PAGE_SIZE as usize);
                Some(*page)
            }
            _ => None,
        })
        .collect();
    let want: Vec<u64> = (0..SEG_PAGES as u64).map(|i| World::page(0, i)).collect();
    assert_eq!(pages, want, "the same pages, from the kept sets");
    assert_eq!(programmed(&log), m, "programmed with the bus addresses");
    assert!(!programmed(&log).contains(&stored));
    assert_eq!(w.req.setup_head, 1);
    assert!(w.sets(0).iter().all(|p| p.mapped()));

    assert_eq!(w.clear(), 0);
    let log = take_log();
    assert_eq!(unmaps(&log), m);
    w.finish();
}

/// Kernel: `dma_unmap_flow()` after a failed `dma_map_flow()`. A record
/// reused as the ring of `MAX_FLOWS` records goes round keeps the
/// addresses its earlier segment was mapped at (unmapped since, only
/// `mapped` cleared). When a mapping of the new segment fails, only the
/// sets this attempt mapped are unmapped: the driver's rule (every set
/// with a count and an address) would also unmap the error value and the
/// earlier segment's long-unmapped addresses.
///
/// With the failure path of `tid_flow::setup::map_flow` deciding by count
/// and address as the driver's does (the failed set holding the truncated
/// error value), the test's `dma_unmap_page()` was asked to unmap
/// `0xffff_ffff_ffff` and two of round 0's addresses, long unmapped; with
/// it trusting every set's mapped bit, the first test's was asked to unmap
/// `kmalloc_node()`'s leftovers.
#[test]
fn a_failed_mapping_unmaps_only_what_it_mapped() {
    let mut w = World::new();
    assert_eq!(w.setup_hw_flow(), 0);
    let mut first = Vec::new();
    for round in 0..MAX_FLOWS as u64 {
        w.sges(round);
        assert_eq!(w.setup(), 0);
        assert_eq!(w.clear(), 0);
        if round == 0 {
            first = maps(&take_log());
        }
    }
    assert_eq!(w.req.setup_head, 0, "round the ring to record 0 again");
    assert_eq!(first.len(), SEG_PAGES);
    take_log();

    w.sges(MAX_FLOWS as u64);
    MAPS.with(|m| m.set(0));
    FAIL_AT.with(|f| f.set(Some(1)));
    assert_eq!(w.setup(), ENOMEM);
    let log = take_log();
    let m = maps(&log);
    assert_eq!(m.len(), 2);
    assert_eq!(
        unmaps(&log),
        vec![m[0]],
        "only the set mapped by this attempt"
    );

    // What the driver's rule would have unmapped: every set with a count
    // and an address, among them the earlier segment's.
    let sets = w.sets(0);
    let by_rule: Vec<u64> = sets
        .iter()
        .filter(|p| p.count() != 0 && p.addr() != 0)
        .map(|p| p.addr())
        .collect();
    assert_eq!(by_rule.len(), SEG_PAGES);
    assert_eq!(
        by_rule[1..],
        first[1..],
        "stale addresses of round 0 are still there"
    );
    assert!(sets.iter().all(|p| !p.mapped()));

    w.s_flags &= !S_WAIT_KMEM;
    FAIL_AT.with(|f| f.set(None));
    assert_eq!(w.setup(), 0);
    assert_eq!(w.clear(), 0);
    take_log();
    w.finish();
}
