// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The stateful engine's C ABI driven from the host with the callbacks a C
//! module would register, written here in Rust: spin locks on an atomic
//! word, QP reference counts that free the QP at zero, a trigger "work
//! queue" with the already-pending answer, counted DMA mappings.
//!
//! One test function: the platform table is process-wide.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicUsize, Ordering};

use kmod_glue::engine::*;
use kmod_glue::kplat::*;
use kmod_glue::platform::ChipOps;
use kmod_glue::qp::*;
use kmod_glue::waittest::*;

const EAGAIN: i32 = -11;
const EINVAL: i32 = -22;
const EBUSY: i32 = -16;

/// A C QP as the test models it.
struct TQp {
    lock: AtomicU32,
    refs: AtomicUsize,
    h: *mut KQp,
    pending: AtomicBool,
    sends: AtomicUsize,
}

static DMA_LIVE: AtomicI64 = AtomicI64::new(0);
static TRIGGERS: Mutex<VecDeque<usize>> = Mutex::new(VecDeque::new());
static ALREADY_PENDING: AtomicUsize = AtomicUsize::new(0);

unsafe fn word<'a>(lock: *mut c_void) -> &'a AtomicU32 {
    // SAFETY: every lock pointer handed to us is a 4-aligned word we own
    // (the TQp's, or the engine's 8-aligned embedded storage).
    unsafe { &*lock.cast::<AtomicU32>() }
}

unsafe extern "C" fn spin_init(lock: *mut c_void, _class: u32) {
    // SAFETY: see `word`.
    unsafe { word(lock) }.store(0, Ordering::Release);
}

unsafe extern "C" fn spin_lock(lock: *mut c_void) -> usize {
    // SAFETY: see `word`.
    let w = unsafe { word(lock) };
    while w
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    0x200
}

unsafe extern "C" fn spin_unlock(lock: *mut c_void, flags: usize) {
    assert_eq!(flags, 0x200, "flags come back unchanged");
    // SAFETY: see `word`.
    let w = unsafe { word(lock) };
    assert_eq!(w.swap(0, Ordering::Release), 1, "unlock of a free lock");
}

unsafe fn tqp<'a>(p: *mut c_void) -> &'a TQp {
    // SAFETY: cookies are leaked `TQp`s.
    unsafe { &*p.cast::<TQp>() }
}

unsafe extern "C" fn qp_get(p: *mut c_void) {
    // SAFETY: live cookie.
    unsafe { tqp(p) }.refs.fetch_add(1, Ordering::AcqRel);
}

unsafe extern "C" fn qp_put(p: *mut c_void) {
    // SAFETY: live cookie.
    let q = unsafe { tqp(p) };
    if q.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
        // SAFETY: the last reference: the engine side goes too.
        unsafe { hfi1_tid_qp_destroy(q.h) };
    }
}

unsafe extern "C" fn queue_trigger(p: *mut c_void, _cpu: u32) -> bool {
    // SAFETY: live cookie.
    let q = unsafe { tqp(p) };
    if q.pending.swap(true, Ordering::AcqRel) {
        ALREADY_PENDING.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    TRIGGERS.lock().unwrap().push_back(p as usize);
    true
}

unsafe extern "C" fn send(p: *mut c_void) {
    // SAFETY: live cookie.
    unsafe { tqp(p) }.sends.fetch_add(1, Ordering::Relaxed);
}

unsafe extern "C" fn dma_map(_dev: *mut c_void, addr: u64, _len: u32, bus: *mut u64) -> i32 {
    DMA_LIVE.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the engine passes a valid out-pointer.
    unsafe { bus.write(addr ^ 0x8000_0000_0000) };
    0
}

unsafe extern "C" fn dma_unmap(_dev: *mut c_void, _bus: u64, _len: u32) {
    DMA_LIVE.fetch_sub(1, Ordering::Relaxed);
}

unsafe extern "C" fn random() -> u32 {
    0x1234_5678
}

static FLOWS: Mutex<[u64; 32]> = Mutex::new([0; 32]);
static TIDS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn put_tid(_c: *mut c_void, _e: u32, _t: u32, _pa: u64, _o: u32) {
    TIDS.fetch_add(1, Ordering::Relaxed);
}
unsafe extern "C" fn wc_fill(_c: *mut c_void, _e: u32) {}
unsafe extern "C" fn write_flow(_c: *mut c_void, f: u32, v: u64) {
    FLOWS.lock().unwrap()[f as usize] = v;
}
unsafe extern "C" fn read_flow(_c: *mut c_void, f: u32) -> u64 {
    FLOWS.lock().unwrap()[f as usize]
}

fn new_qp(i: u32) -> *mut TQp {
    let q = Box::into_raw(Box::new(TQp {
        lock: AtomicU32::new(0),
        refs: AtomicUsize::new(1),
        h: std::ptr::null_mut(),
        pending: AtomicBool::new(false),
        sends: AtomicUsize::new(0),
    }));
    // SAFETY: `q` is live and leaked; its lock word outlives the handle.
    unsafe {
        let h = hfi1_tid_qp_create(q.cast(), 0x100 + i, i, 0, (&raw mut (*q).lock).cast());
        assert!(!h.is_null());
        (*q).h = h;
    }
    q
}

/// Runs every queued trigger work item, as the workqueue would.
fn run_triggers() -> usize {
    let mut ran = 0;
    loop {
        let Some(p) = TRIGGERS.lock().unwrap().pop_front() else {
            return ran;
        };
        // SAFETY: the work item holds a reference, so the QP is live.
        let q = unsafe { tqp(p as *mut c_void) };
        q.pending.store(false, Ordering::Release);
        // SAFETY: hands over the work item's reference.
        assert!(unsafe { hfi1_tid_trigger_resume(q.h) } >= 0);
        ran += 1;
    }
}

fn sges(base: u64, pages: u64) -> Vec<SgeC> {
    // Every other page: no two contiguous, one page set (and entry) each.
    (0..pages)
        .map(|i| SgeC {
            vaddr: base + i * 0x2000,
            length: 4096,
        })
        .collect()
}

#[test]
fn engine_through_the_c_abi() {
    let ops = PlatformOps {
        spin_lock_init: Some(spin_init),
        spin_lock_irqsave: Some(spin_lock),
        spin_unlock_irqrestore: Some(spin_unlock),
        qp_get: Some(qp_get),
        qp_put: Some(qp_put),
        queue_trigger: Some(queue_trigger),
        schedule_send: Some(send),
        do_send: Some(send),
        dma_map: Some(dma_map),
        dma_unmap: Some(dma_unmap),
        random_u32: Some(random),
    };
    let chip = ChipOps {
        put_tid: Some(put_tid),
        wc_fill: Some(wc_fill),
        write_flow: Some(write_flow),
        read_flow: Some(read_flow),
    };
    let mut holey = ops;
    holey.dma_map = None;
    // SAFETY: valid tables of valid callbacks.
    unsafe {
        assert_eq!(hfi1_tid_platform_register(&holey), EINVAL);
        assert_eq!(hfi1_tid_platform_register(&ops), 0);
        assert_eq!(hfi1_tid_platform_register(&ops), EBUSY);
    }
    let params = CtxParams {
        ctxt: 1,
        expected_base: 64,
        ngroups: 1,
        qp_slots: 40,
    };
    // SAFETY: valid pointers; the chip callbacks ignore the cookie.
    let rcd =
        unsafe { hfi1_tid_ctx_create(&params, &chip, std::ptr::null_mut(), std::ptr::null_mut()) };
    assert!(!rcd.is_null());
    // Every flow written disabled at init.
    assert!(FLOWS.lock().unwrap().iter().all(|&v| v == 0x6D_7FFF_F800));

    let qps: Vec<*mut TQp> = (0..34).map(new_qp).collect();
    // SAFETY: every handle is live and used by this thread only.
    unsafe {
        let h = |i: usize| (*qps[i]).h;
        let stats = || {
            let mut s = CtxStats::default();
            assert_eq!(hfi1_tid_ctx_stats(rcd, h(0), &mut s), 0);
            s
        };

        // Flow exhaustion: 32 flows, then two QPs queue.
        for i in 0..32 {
            assert_eq!(hfi1_tid_setup_hw_flow(rcd, h(i)), 0, "qp {i}");
        }
        assert_eq!(hfi1_tid_setup_hw_flow(rcd, h(32)), EAGAIN);
        assert_eq!(hfi1_tid_setup_hw_flow(rcd, h(33)), EAGAIN);
        assert_eq!(hfi1_tid_qp_waiting(h(32)), 1);
        assert_eq!(
            (*qps[32]).refs.load(Ordering::Acquire),
            2,
            "the queue holds a reference"
        );
        let s = stats();
        assert_eq!((s.flows_used, s.flow_waiters), (32, 2));

        // Flush the second waiter while queued: off the queue, reference back.
        assert_eq!(hfi1_tid_flush_wait(rcd, h(33)), 0);
        assert_eq!(hfi1_tid_qp_waiting(h(33)), 0);
        assert_eq!((*qps[33]).refs.load(Ordering::Acquire), 1);

        // Releasing a flow wakes the head through its trigger work.
        assert_eq!(hfi1_tid_clear_hw_flow(rcd, h(0)), 0);
        assert_eq!(run_triggers(), 1);
        assert_eq!((*qps[32]).sends.load(Ordering::Relaxed), 1);
        assert_eq!((*qps[33]).sends.load(Ordering::Relaxed), 0);
        assert_eq!(hfi1_tid_setup_hw_flow(rcd, h(32)), 0);
        assert_eq!(hfi1_tid_qp_waiting(h(32)), 0);
        assert_eq!((*qps[32]).refs.load(Ordering::Acquire), 1);

        // RcvArray exhaustion: one group of 8 entries, 8-page segments.
        let reqs: Vec<*mut Req> = (0..2)
            .map(|_| {
                let r = hfi1_tid_req_create(8 * 4096, 1, 4096);
                assert!(!r.is_null());
                assert_eq!(hfi1_tid_req_alloc_flows(r), 0);
                r
            })
            .collect();
        let a = sges(0x10_0000, 8);
        let b = sges(0x40_0000, 8);
        assert_eq!(hfi1_tid_exp_rcv_setup(rcd, h(1), reqs[0], a.as_ptr(), 8), 0);
        assert_eq!(DMA_LIVE.load(Ordering::Relaxed), 8);
        assert_eq!(
            hfi1_tid_exp_rcv_setup(rcd, h(2), reqs[1], b.as_ptr(), 8),
            EAGAIN
        );
        let s = stats();
        assert_eq!((s.groups_full, s.rarr_waiters), (1, 1));
        // A second segment of the same request does not fit n_flows = 1.
        assert_eq!(
            hfi1_tid_exp_rcv_setup(rcd, h(1), reqs[0], a.as_ptr(), 8),
            EINVAL
        );
        // Busy request cannot be freed.
        assert_eq!(hfi1_tid_req_destroy(reqs[0]), EBUSY);
        // The waiting segment stays mapped for its retry.
        assert_eq!(DMA_LIVE.load(Ordering::Relaxed), 16);
        assert_eq!(hfi1_tid_exp_rcv_clear(rcd, h(1), reqs[0]), 0);
        assert_eq!(DMA_LIVE.load(Ordering::Relaxed), 8);
        assert_eq!(run_triggers(), 1);
        assert_eq!((*qps[2]).sends.load(Ordering::Relaxed), 1);
        assert_eq!(hfi1_tid_exp_rcv_setup(rcd, h(2), reqs[1], b.as_ptr(), 8), 0);
        assert_eq!(hfi1_tid_exp_rcv_clear_all(rcd, h(2), reqs[1]), 0);
        assert_eq!(DMA_LIVE.load(Ordering::Relaxed), 0);
        assert!(TIDS.load(Ordering::Relaxed) >= 16);
        for r in reqs {
            assert_eq!(hfi1_tid_req_destroy(r), 0);
        }

        // A context still holding flows cannot go.
        assert_eq!(hfi1_tid_ctx_destroy(rcd), EBUSY);
        for i in 0..34 {
            assert_eq!(hfi1_tid_clear_hw_flow(rcd, h(i)), 0);
        }
        run_triggers();
        let s = stats();
        assert_eq!(
            s,
            CtxStats {
                groups_free: 1,
                tid_waits: s.tid_waits,
                ..Default::default()
            }
        );
        assert!(s.tid_waits >= 3);
        // The wait-queue harness the kernel self-test runs: one flow token.
        let wt = hfi1_tid_wt_create(40, 1, 1);
        assert!(!wt.is_null());
        let sends = (*qps[5]).sends.load(Ordering::Relaxed);
        assert_eq!(hfi1_tid_wt_acquire(wt, h(4), 0), 0);
        assert_eq!(hfi1_tid_wt_acquire(wt, h(5), 0), EAGAIN);
        assert_eq!(hfi1_tid_wt_stats(wt, h(4), 0), 1, "one waiter, no token");
        assert_eq!(hfi1_tid_wt_destroy(wt), EBUSY);
        assert_eq!(hfi1_tid_wt_release(wt, h(4), 0), 0);
        assert_eq!(run_triggers(), 1);
        assert_eq!((*qps[5]).sends.load(Ordering::Relaxed), sends + 1);
        assert_eq!(hfi1_tid_wt_acquire(wt, h(5), 0), 0);
        assert_eq!(hfi1_tid_wt_release(wt, h(5), 0), 0);
        assert_eq!(
            hfi1_tid_wt_release(wt, h(5), 0),
            EINVAL,
            "more tokens than made"
        );
        assert_eq!(hfi1_tid_wt_stats(wt, h(4), 0), 1 << 32);
        assert_eq!(hfi1_tid_wt_destroy(wt), 0);

        assert_eq!(hfi1_tid_platform_unregister(), EBUSY, "objects are alive");
        for q in qps {
            assert_eq!(
                (*q).refs.load(Ordering::Acquire),
                1,
                "only the creator's reference"
            );
            qp_put(q.cast());
            drop(Box::from_raw(q));
        }
        assert_eq!(hfi1_tid_ctx_destroy(rcd), 0);
    }
    assert_eq!(hfi1_tid_live_objects(), 0);
    #[cfg(feature = "sim")]
    read_between_two_engines();
    assert_eq!(hfi1_tid_platform_unregister(), 0);
    println!(
        "already-pending wake-ups: {}",
        ALREADY_PENDING.load(Ordering::Relaxed)
    );
}

/// The READ test the self-test module runs, on this file's callbacks.
#[cfg(feature = "sim")]
fn read_between_two_engines() {
    use kmod_glue::readtest::{QPS, READS, ReadTestResult, hfi1_tid_read_test};

    let mut r = ReadTestResult::default();
    // SAFETY: `r` is writable; the platform is registered.
    assert_eq!(unsafe { hfi1_tid_read_test(&mut r) }, 0);
    println!("{r:?}");
    let reads = (QPS * READS) as u64;
    assert_eq!((r.posted, r.completed, r.failed), (reads, reads, 0));
    assert_eq!(r.mismatched_bytes, 0);
    assert_eq!(
        r.verified_bytes,
        QPS as u64 * (4096 + 64 * 1024 + 320 * 1024)
    );
    // One segment each for the small READs, two for the large one.
    assert_eq!(r.segments, QPS as u64 * 4);
    assert!(r.tid_waits > 0, "the requesters waited for RcvArray space");
    assert_eq!((r.errors, r.timeouts, r.left_over), (0, 0, 0));
    assert_eq!(DMA_LIVE.load(Ordering::Acquire), 0);
    // SAFETY: a null result is refused.
    assert_eq!(unsafe { hfi1_tid_read_test(std::ptr::null_mut()) }, EINVAL);
}
