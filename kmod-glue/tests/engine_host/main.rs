// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The stateful engine's C ABI driven from the host with the callbacks a C
//! module would register, written here in Rust: spin locks on an atomic
//! word whose holders are tracked per thread (so `lockdep_assert_held`
//! really checks), QP reference counts that free the QP at zero, a trigger
//! "work queue" with the already-pending answer, counted DMA mappings.
//! As a C driver does, the test takes a QP's `s_lock` itself around every
//! call that needs it held ([`with_s_lock`]).
//!
//! One test function: the platform table is process-wide.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_char, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicUsize, Ordering};

use kmod_glue::chip::ChipOps;
use kmod_glue::engine::*;
use kmod_glue::kplat::*;
use kmod_glue::qp::*;
use kmod_glue::waittest::*;

mod proto;

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

std::thread_local! {
    /// The locks this thread holds, as lockdep would know them.
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// `spin_lock_init`s seen, by class name.
static INITS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// `lockdep_assert_held` calls that found the lock held by this thread.
static ASSERTED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn spin_init(lock: *mut c_void, name: *const c_char, key: *mut c_void) {
    assert!(!key.is_null(), "a lock class needs a key");
    // SAFETY: the engine passes its class's static C string.
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    INITS
        .lock()
        .unwrap()
        .push(name.to_str().unwrap().to_string());
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
    HELD.with(|h| h.borrow_mut().push(lock as usize));
    0x200
}

unsafe extern "C" fn spin_unlock(lock: *mut c_void, flags: usize) {
    assert_eq!(flags, 0x200, "flags come back unchanged");
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        let at = h.iter().rposition(|&l| l == lock as usize);
        h.remove(at.expect("unlock by a thread that does not hold the lock"));
    });
    // SAFETY: see `word`.
    let w = unsafe { word(lock) };
    assert_eq!(w.swap(0, Ordering::Release), 1, "unlock of a free lock");
}

unsafe extern "C" fn assert_held(lock: *mut c_void) {
    let held = HELD.with(|h| h.borrow().contains(&(lock as usize)));
    assert!(
        held,
        "lockdep_assert_held: this thread does not hold the lock"
    );
    ASSERTED.fetch_add(1, Ordering::Relaxed);
}

/// Runs `f` with `q`'s `s_lock` held, as a driver calls the entry points.
fn with_s_lock<T>(q: *mut TQp, f: impl FnOnce() -> T) -> T {
    // SAFETY: `q` is live; its lock word is the QP's s_lock.
    let lock = unsafe { (&raw mut (*q).lock).cast::<c_void>() };
    // SAFETY: a lock word of ours.
    let flags = unsafe { spin_lock(lock) };
    let out = f();
    // SAFETY: taken just above, with these flags.
    unsafe { spin_unlock(lock, flags) };
    out
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

/// Second-leg work queued: (QP cookie, already pending?) as the test's
/// "work queue" sees it.
static TID_SENDS: Mutex<VecDeque<usize>> = Mutex::new(VecDeque::new());

unsafe extern "C" fn queue_tid_send(p: *mut c_void, _cpu: u32) -> bool {
    let mut q = TID_SENDS.lock().unwrap();
    if q.contains(&(p as usize)) {
        return false;
    }
    q.push_back(p as usize);
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

static KMEM_WAITS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn wait_kmem(_qp: *mut c_void, s_flags: *mut u32) {
    KMEM_WAITS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the engine passes the QP's flags word, valid for the call.
    unsafe { *s_flags |= 0x2000 };
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
    new_qp_inner(0x100 + i, i, std::ptr::null())
}

/// A QP with a connection, for the protocol's entry points.
fn new_qp_with(qpn: u32, slot: u32, conn: &kmod_glue::proto::ConnC) -> *mut TQp {
    new_qp_inner(qpn, slot, conn)
}

fn new_qp_inner(qpn: u32, slot: u32, conn: *const kmod_glue::proto::ConnC) -> *mut TQp {
    let q = Box::into_raw(Box::new(TQp {
        lock: AtomicU32::new(0),
        refs: AtomicUsize::new(1),
        h: std::ptr::null_mut(),
        pending: AtomicBool::new(false),
        sends: AtomicUsize::new(0),
    }));
    // SAFETY: `q` is live and leaked; its lock word outlives the handle.
    unsafe {
        let h = hfi1_tid_qp_create(q.cast(), qpn, slot, 0, (&raw mut (*q).lock).cast(), conn);
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
        lockdep_assert_held: Some(assert_held),
        qp_get: Some(qp_get),
        qp_put: Some(qp_put),
        queue_trigger: Some(queue_trigger),
        schedule_send: Some(send),
        do_send: Some(send),
        dma_map: Some(dma_map),
        dma_unmap: Some(dma_unmap),
        wait_kmem: Some(wait_kmem),
        random_u32: Some(random),
        queue_tid_send: Some(queue_tid_send),
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
            assert_eq!(hfi1_tid_ctx_stats(rcd, &mut s), 0);
            s
        };
        // The entry points that need the QP's s_lock, called with it held.
        let setup = |i: usize| with_s_lock(qps[i], || hfi1_tid_setup_hw_flow(rcd, h(i)));
        let clear = |i: usize| with_s_lock(qps[i], || hfi1_tid_clear_hw_flow(rcd, h(i)));
        let seg_setup = |i: usize, r: *mut Req, s: &[SgeC]| {
            with_s_lock(qps[i], || {
                hfi1_tid_exp_rcv_setup(rcd, h(i), r, s.as_ptr(), s.len() as u32)
            })
        };
        let seg_clear =
            |i: usize, r: *mut Req| with_s_lock(qps[i], || hfi1_tid_exp_rcv_clear(rcd, h(i), r));

        // Flow exhaustion: 32 flows, then two QPs queue.
        for i in 0..32 {
            assert_eq!(setup(i), 0, "qp {i}");
        }
        assert_eq!(setup(32), EAGAIN);
        assert_eq!(setup(33), EAGAIN);
        assert_eq!(hfi1_tid_qp_waiting(h(32)), 1);
        assert_eq!(
            (*qps[32]).refs.load(Ordering::Acquire),
            2,
            "the queue holds a reference"
        );
        let s = stats();
        assert_eq!((s.flows_used, s.flow_waiters), (32, 2));

        // Flush the second waiter while queued: off the queue, reference back.
        assert_eq!(with_s_lock(qps[33], || hfi1_tid_flush_wait(rcd, h(33))), 0);
        assert_eq!(hfi1_tid_qp_waiting(h(33)), 0);
        assert_eq!((*qps[33]).refs.load(Ordering::Acquire), 1);

        // Releasing a flow wakes the head through its trigger work.
        assert_eq!(clear(0), 0);
        assert_eq!(run_triggers(), 1);
        assert_eq!((*qps[32]).sends.load(Ordering::Relaxed), 1);
        assert_eq!((*qps[33]).sends.load(Ordering::Relaxed), 0);
        assert_eq!(setup(32), 0);
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
        assert_eq!(seg_setup(1, reqs[0], &a), 0);
        assert_eq!(DMA_LIVE.load(Ordering::Relaxed), 8);
        assert_eq!(seg_setup(2, reqs[1], &b), EAGAIN);
        let s = stats();
        assert_eq!((s.groups_full, s.rarr_waiters), (1, 1));
        // A second segment of the same request does not fit n_flows = 1.
        assert_eq!(seg_setup(1, reqs[0], &a), EINVAL);
        // A busy request cannot be destroyed.
        assert_eq!(hfi1_tid_req_destroy(reqs[0]), EBUSY);
        // The waiting segment stays mapped for its retry.
        assert_eq!(DMA_LIVE.load(Ordering::Relaxed), 16);
        assert_eq!(seg_clear(1, reqs[0]), 0);
        assert_eq!(DMA_LIVE.load(Ordering::Relaxed), 8);
        assert_eq!(run_triggers(), 1);
        assert_eq!((*qps[2]).sends.load(Ordering::Relaxed), 1);
        assert_eq!(seg_setup(2, reqs[1], &b), 0);
        assert_eq!(
            with_s_lock(qps[2], || hfi1_tid_exp_rcv_clear_all(rcd, h(2), reqs[1])),
            0
        );
        // The records go (a recycled WQE) and come back for the next use.
        assert_eq!(
            with_s_lock(qps[1], || hfi1_tid_free_flows(h(1), reqs[0])),
            0
        );
        assert_eq!(hfi1_tid_req_alloc_flows(reqs[0]), 0);
        assert_eq!(DMA_LIVE.load(Ordering::Relaxed), 0);
        assert!(TIDS.load(Ordering::Relaxed) >= 16);
        for r in reqs {
            assert_eq!(hfi1_tid_req_destroy(r), 0);
        }

        // A context still holding flows cannot go.
        assert_eq!(hfi1_tid_ctx_destroy(rcd), EBUSY);
        for i in 0..34 {
            assert_eq!(clear(i), 0);
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
        let acquire = |i: usize| with_s_lock(qps[i], || hfi1_tid_wt_acquire(wt, h(i), 0));
        let release = |i: usize| with_s_lock(qps[i], || hfi1_tid_wt_release(wt, h(i), 0));
        assert_eq!(acquire(4), 0);
        assert_eq!(acquire(5), EAGAIN);
        assert_eq!(hfi1_tid_wt_stats(wt, 0), 1, "one waiter, no token");
        assert_eq!(hfi1_tid_wt_destroy(wt), EBUSY);
        assert_eq!(release(4), 0);
        assert_eq!(run_triggers(), 1);
        assert_eq!((*qps[5]).sends.load(Ordering::Relaxed), sends + 1);
        assert_eq!(acquire(5), 0);
        assert_eq!(release(5), 0);
        assert_eq!(release(5), EINVAL, "more tokens than made");
        assert_eq!(hfi1_tid_wt_stats(wt, 0), 1 << 32);
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
    // Every held-lock entry asserted its s_lock, and every lock the engine
    // owns was initialised with its level's class.
    assert!(ASSERTED.load(Ordering::Relaxed) >= 80);
    assert!(
        INITS
            .lock()
            .unwrap()
            .iter()
            .all(|n| n == "hfi1_tid_rcd_exp_lock")
    );
    read_between_two_engines();
    proto::read_and_write_through_the_c_abi();
    assert_eq!(hfi1_tid_live_objects(), 0);
    assert_eq!(hfi1_tid_platform_unregister(), 0);
    println!(
        "already-pending wake-ups: {}",
        ALREADY_PENDING.load(Ordering::Relaxed)
    );
}

/// The READ, WRITE and mixed runs the self-test module makes, on this
/// file's callbacks.
fn read_between_two_engines() {
    use kmod_glue::prototest::{
        MIX_OPS, ProtoTestResult, QPS, READ_BYTES, WRITE_BYTES, hfi1_tid_mix_test,
        hfi1_tid_read_test, hfi1_tid_write_test,
    };

    let mut r = ProtoTestResult::default();
    // SAFETY: `r` is writable; the platform is registered.
    assert_eq!(unsafe { hfi1_tid_read_test(&mut r) }, 0);
    println!("read: {r:?}");
    let reads = (QPS * READ_BYTES.len()) as u64;
    assert_eq!(
        (r.posted, r.completed, r.failed, r.writes),
        (reads, reads, 0, 0)
    );
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

    let mut w = ProtoTestResult::default();
    // SAFETY: as above.
    assert_eq!(unsafe { hfi1_tid_write_test(&mut w) }, 0);
    println!("write: {w:?}");
    let writes = (QPS * WRITE_BYTES.len()) as u64;
    assert_eq!(
        (w.posted, w.writes, w.completed, w.failed),
        (writes, writes, writes, 0)
    );
    let bytes: u32 = WRITE_BYTES.iter().sum();
    assert_eq!(
        (w.verified_bytes, w.mismatched_bytes),
        (QPS as u64 * u64::from(bytes), 0)
    );
    // Two segments, then one, on every QP: each received and TID-ACKed.
    assert_eq!(w.write_segments, QPS as u64 * 3);
    assert!(w.tid_acks > 0, "{w:?}");
    assert!(w.second_leg_runs > 0);
    // Two segments' room for four QPs: the responders RNR-NAKed and the
    // RNR timer brought the WRITE_REQs back.
    assert!(w.rnr_naks > 0 && w.rnr_timeouts > 0, "{w:?}");
    assert_eq!((w.errors, w.timeouts, w.left_over), (0, 0, 0));
    assert_eq!(DMA_LIVE.load(Ordering::Acquire), 0);

    let mut m = ProtoTestResult::default();
    // SAFETY: as above.
    assert_eq!(unsafe { hfi1_tid_mix_test(&mut m) }, 0);
    println!("mixed: {m:?}");
    let ops = (QPS * MIX_OPS.len()) as u64;
    let nwrites = MIX_OPS.iter().filter(|o| o.1).count() as u64 * QPS as u64;
    assert_eq!(
        (m.posted, m.writes, m.completed, m.failed),
        (ops, nwrites, ops, 0)
    );
    let bytes: u32 = MIX_OPS.iter().map(|o| o.0).sum();
    assert_eq!(
        (m.verified_bytes, m.mismatched_bytes),
        (QPS as u64 * u64::from(bytes), 0)
    );
    assert!(m.segments > 0 && m.write_segments > 0, "{m:?}");
    assert_eq!((m.errors, m.timeouts, m.left_over), (0, 0, 0));
    assert_eq!(DMA_LIVE.load(Ordering::Acquire), 0);
    // SAFETY: a null result is refused.
    unsafe {
        assert_eq!(hfi1_tid_read_test(std::ptr::null_mut()), EINVAL);
        assert_eq!(hfi1_tid_write_test(std::ptr::null_mut()), EINVAL);
        assert_eq!(hfi1_tid_mix_test(std::ptr::null_mut()), EINVAL);
    }
}
