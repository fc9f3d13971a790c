// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The stateful engine's C entry points for objects the engine owns:
//! receive contexts, QPs, requests, hardware flows, segment setup and
//! teardown, the wait-queue flush (the trigger work is in `qp.rs`). The
//! self-test module drives the engine through them.
//!
//! Handles are opaque: `struct hfi1_tid_rcd`, `struct hfi1_tid_qp` and
//! `struct hfi1_tid_req` in the header are never defined in C.
//!
//! # Locking
//!
//! As in the driver, every entry point that works on a QP's state
//! (`hfi1_tid_setup_hw_flow`, `hfi1_tid_clear_hw_flow`,
//! `hfi1_tid_exp_rcv_setup`, `hfi1_tid_exp_rcv_clear`,
//! `hfi1_tid_exp_rcv_clear_all`, `hfi1_tid_flush_wait`,
//! `hfi1_tid_free_flows`) is called with that QP's `s_lock` **held**
//! (`__must_hold(&qp->s_lock)`); it reaches the QP's state through a guard
//! made over the held lock (`qp::with_held_s_lock`, which asserts it with
//! `lockdep_assert_held`) and takes the context's `exp_lock` inside.
//! Context creation, destruction and statistics, and request creation,
//! allocation and destruction, are called with no lock held.

use core::ffi::c_void;

use alloc::boxed::Box;
use arrayvec::ArrayVec;
use hfi1_hal::consts::TID_GROUP_SIZE;
use hfi1_hal::lock_order::{EXP_LOCK_CLASS, LockToken};
use hfi1_hal::services::AllocContext;
use qp_wait::{DevCounters, QueueKind, SGuard};
use tid_alloc::groups::GroupList;
use tid_flow::segment::{Sge, TidRequest};
use tid_flow::{CtxtParts, QpLocked, RcvCtxt};

use crate::chip::{ChipOps, KernelChip};
use crate::errno::{self, Errno};
use crate::kplat::{
    KDma, KMem, KQp, KRandom, KRef, KSched, KernelPlatform, KernelSpinLock, kernel, live_dec,
    live_inc, try_box,
};
use crate::qp::with_held_s_lock;

/// A receive context (`struct hfi1_tid_rcd`). Kernel: the TID RDMA part of
/// `struct hfi1_ctxtdata`.
///
/// A few hundred bytes (its TID group and waiter tables are separate
/// allocations), built by [`RcvCtxt::try_new_in`] and moved into its heap
/// block, where its `exp_lock` is then initialised.
#[derive(Debug)]
#[repr(transparent)]
pub struct Rcd(RcvCtxt<KernelPlatform>);

impl Rcd {
    pub(crate) fn ctx(&self) -> &RcvCtxt<KernelPlatform> {
        &self.0
    }
}

/// One request (`struct hfi1_tid_req`). Kernel: `struct tid_rdma_request`.
#[derive(Debug)]
pub struct Req {
    req: TidRequest<KernelPlatform>,
}

/// Context parameters (`struct hfi1_tid_ctx_params`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CtxParams {
    /// Context number. Kernel: `rcd->ctxt`.
    pub ctxt: u32,
    /// First RcvArray entry of its TID groups. Kernel: `rcd->expected_base`.
    pub expected_base: u32,
    /// TID groups (1..=256). Kernel: `rcd->expected_count / 8`.
    pub ngroups: u32,
    /// QPs that may wait on the context (their slots are `0..qp_slots`).
    pub qp_slots: u32,
}

/// A context's occupancy (`struct hfi1_tid_ctx_stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtxStats {
    /// Hardware flows reserved.
    pub flows_used: u32,
    /// TID groups with no entry used.
    pub groups_free: u32,
    /// TID groups partly used.
    pub groups_used: u32,
    /// TID groups fully used.
    pub groups_full: u32,
    /// QPs waiting for a flow.
    pub flow_waiters: u32,
    /// QPs waiting for RcvArray space.
    pub rarr_waiters: u32,
    /// Times a QP of the context started to wait.
    pub tid_waits: u64,
}

/// One scatter-gather element (`struct hfi1_tid_sge`): kernel virtual
/// address and length, both page aligned.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SgeC {
    /// Address of the first byte.
    pub vaddr: u64,
    /// Bytes.
    pub length: u32,
}

/// SGEs one setup call accepts.
pub const MAX_SGES: usize = 32;

/// Creates a receive context: TID groups all free, every flow given a
/// random generation and written disabled, both wait queues empty.
/// Returns null on bad parameters, a missing callback, no registered
/// platform or no memory.
///
/// Kernel: `hfi1_kern_exp_rcv_init()` (`hfi1_alloc_ctxt_rcv_groups()` and
/// `hfi1_kern_init_ctxt_generations()`).
///
/// # Safety
///
/// `p` and `chip_ops` are null or valid; the callbacks accept `chip` for
/// the context's lifetime; `dev` is what the platform's `dma_map` expects.
///
/// # Locking
///
/// None held; may allocate (`GFP_KERNEL` when called where it can sleep).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_ctx_create(
    p: *const CtxParams,
    chip_ops: *const ChipOps,
    chip: *mut c_void,
    dev: *mut c_void,
) -> *mut Rcd {
    // SAFETY: the caller promises `p` and `chip_ops` are null or valid.
    let (Some(p), Some(chip_ops)) = (unsafe { p.as_ref() }, unsafe { chip_ops.as_ref() }) else {
        return core::ptr::null_mut();
    };
    let Some(k) = kernel() else {
        return core::ptr::null_mut();
    };
    // SAFETY: the caller promises the callbacks accept `chip`.
    let Ok(hw) = (unsafe { KernelChip::new(chip_ops, chip) }) else {
        return core::ptr::null_mut();
    };
    let Some(devc) = try_box(DevCounters::new()) else {
        return core::ptr::null_mut();
    };
    let parts = CtxtParts {
        ctxt: p.ctxt,
        chip: hw,
        expected_base: p.expected_base,
        ngroups: p.ngroups as usize,
        qp_slots: p.qp_slots,
        sched: KSched(k),
        dma: KDma { dev, k },
        mem: KMem,
        dev: devc,
    };
    // The exp_lock's spinlock_t is initialised where it stays, with the
    // exp_lock class.
    let Ok(raw) = KernelSpinLock::try_new(k, &EXP_LOCK_CLASS) else {
        return core::ptr::null_mut();
    };
    let Ok(ctx) = RcvCtxt::<KernelPlatform>::try_new_in_with(&KMem, parts, raw, &mut KRandom(k))
    else {
        return core::ptr::null_mut();
    };
    live_inc();
    // `Rcd` is a transparent wrapper of the context.
    Box::into_raw(ctx).cast::<Rcd>()
}

/// Destroys a context. Returns 0, `-EINVAL` for null, or `-EBUSY` (and
/// leaves it alone) while a flow is reserved, a TID group is in use or a QP
/// waits on it.
///
/// Kernel: the TID RDMA part of `hfi1_free_ctxtdata()`.
///
/// # Safety
///
/// `rcd` is null or from [`hfi1_tid_ctx_create`], and no other thread
/// uses it.
///
/// # Locking
///
/// None held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_ctx_destroy(rcd: *mut Rcd) -> i32 {
    // SAFETY: the caller promises exclusive use of a valid context.
    let Some(Rcd(ctx)) = (unsafe { rcd.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    let es = ctx.exp_lock.get_mut();
    let busy = es.groups.list_len(GroupList::Used) + es.groups.list_len(GroupList::Full);
    if es.flows.mask() != 0 || busy != 0 || !es.waiters.is_empty() {
        return Errno::BUSY.to_neg();
    }
    // SAFETY: `rcd` came from `Box::into_raw` and is not used again.
    drop(unsafe { Box::from_raw(rcd) });
    live_dec();
    0
}

/// Reads a context's occupancy into `out` (0, or `-EINVAL`).
///
/// # Safety
///
/// `rcd` is null or live; `out` is null or writable.
///
/// # Locking
///
/// None held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_ctx_stats(rcd: *const Rcd, out: *mut CtxStats) -> i32 {
    // SAFETY: the caller promises `rcd` is null or live and `out` null or
    // writable.
    let (Some(rcd), Some(out)) = (unsafe { rcd.as_ref() }.map(Rcd::ctx), unsafe {
        out.as_mut()
    }) else {
        return Errno::INVAL.to_neg();
    };
    let mut root = LockToken::root();
    let e = rcd.exp_lock.lock(&mut root);
    let n = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
    *out = CtxStats {
        flows_used: e.flows.mask().count_ones(),
        groups_free: n(e.groups.list_len(GroupList::Free)),
        groups_used: n(e.groups.list_len(GroupList::Used)),
        groups_full: n(e.groups.list_len(GroupList::Full)),
        flow_waiters: n(e.waiters.len(QueueKind::Flow)),
        rarr_waiters: n(e.waiters.len(QueueKind::RcvArray)),
        tid_waits: rcd.dev.tid_waits(),
    };
    0
}

/// Gets the QP a hardware flow, or queues it: 0, `-EAGAIN` (queued, it
/// will be woken through its trigger work), `-EINVAL`.
///
/// Kernel: `hfi1_kern_setup_hw_flow()`.
///
/// # Safety
///
/// `rcd` and `qp` are null or live; `qp` uses `rcd`; the caller holds
/// `qp`'s `s_lock` (and no other lock of the engine's) for the call.
///
/// # Locking
///
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_setup_hw_flow(rcd: *const Rcd, qp: *mut KQp) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        with_s_lock(rcd, qp, |rcd, r, s| {
            let res = tid_flow::setup_hw_flow(rcd, r, QpLocked::from_guard(s));
            errno::ret(res.map_err(Errno::from))
        })
    }
}

/// Gives the QP's hardware flow back and wakes the head of the flow queue
/// (directly if it is this QP). 0 or `-EINVAL`.
///
/// Kernel: `hfi1_kern_clear_hw_flow()`.
///
/// # Safety
///
/// As [`hfi1_tid_setup_hw_flow`].
///
/// # Locking
///
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_clear_hw_flow(rcd: *const Rcd, qp: *mut KQp) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        with_s_lock(rcd, qp, |rcd, r, s| {
            tid_flow::clear_hw_flow(rcd, r, QpLocked::from_guard(s));
            0
        })
    }
}

/// Creates a request: `seg_len` bytes per segment, at most `n_flows`
/// segments in flight (≤ 8), path MTU `pmtu`; no flow records yet. Null on
/// bad arguments or no memory.
///
/// Kernel: `hfi1_init_trdma_req()`.
///
/// # Locking
///
/// None held.
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_req_create(seg_len: u32, n_flows: u32, pmtu: u32) -> *mut Req {
    let Ok(n) = u16::try_from(n_flows) else {
        return core::ptr::null_mut();
    };
    if kernel().is_none() || seg_len == 0 || n == 0 || usize::from(n) > hfi1_hal::consts::MAX_FLOWS
    {
        return core::ptr::null_mut();
    }
    match try_box(Req {
        req: TidRequest::new(seg_len, n, pmtu),
    }) {
        Some(b) => {
            live_inc();
            Box::into_raw(b)
        }
        None => core::ptr::null_mut(),
    }
}

/// Allocates the request's flow records (once): 0, `-ENOMEM` (the request
/// then stays a plain RDMA READ), `-EINVAL`.
///
/// Kernel: `hfi1_kern_exp_rcv_alloc_flows()`.
///
/// # Safety
///
/// `req` is null or live and used by no other thread.
///
/// # Locking
///
/// The QP's `s_lock` if the request is already in use by a QP (the
/// allocator then uses `GFP_ATOMIC`); none at QP creation.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_req_alloc_flows(req: *mut Req) -> i32 {
    // SAFETY: forwarded from the caller.
    let Some(r) = (unsafe { req.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    errno::ret(
        r.req
            .alloc_flows(&KMem, AllocContext::Atomic)
            .map_err(Errno::from),
    )
}

/// Frees the request's flow records (a large send queue recycling its
/// WQE), whatever they hold, as the driver does: 0, `-EINVAL`, or
/// `-EBUSY` if set-up segments or mappings went with them (a release the
/// caller missed; they are freed anyway). The request stays usable: the
/// next segment allocates them again.
///
/// Kernel: `__trdma_clean_swqe()` / `hfi1_kern_exp_rcv_free_flows()`.
///
/// # Safety
///
/// `qp` and `req` are null or live; `req` belongs to `qp`; the caller
/// holds `qp`'s `s_lock` for the call.
///
/// # Locking
///
/// `qp->s_lock` held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_free_flows(qp: *mut KQp, req: *mut Req) -> i32 {
    // SAFETY: the caller promises `req` is null or a live request.
    let Some(req) = (unsafe { req.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller (s_lock held).
    unsafe {
        with_held_s_lock(qp, |_, _| {
            errno::ret(req.req.free_flow_records().map_err(Errno::from))
        })
    }
}

/// Frees a request (and its flow records). Returns 0, `-EINVAL`, or
/// `-EBUSY` (nothing freed) while segments are set up or mapped.
///
/// Kernel: `hfi1_kern_exp_rcv_free_flows()` and the `kfree` of the WQE's
/// private part at QP teardown.
///
/// # Safety
///
/// `req` is null or from [`hfi1_tid_req_create`], used by no other thread.
///
/// # Locking
///
/// None held (the QP is being torn down: nobody else reaches the
/// request).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_req_destroy(req: *mut Req) -> i32 {
    // SAFETY: forwarded from the caller.
    let Some(r) = (unsafe { req.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    if r.req.in_flight() != 0 || r.req.holds_mappings() {
        return Errno::BUSY.to_neg();
    }
    if let Err(e) = r.req.free_flow_records() {
        return Errno::from(e).to_neg();
    }
    // SAFETY: `req` came from `Box::into_raw` and is not used again.
    drop(unsafe { Box::from_raw(req) });
    live_dec();
    0
}

/// Sets up the request's next segment (`seg_len` bytes from where the last
/// one ended in `sges`): finds and DMA-maps its page sets, allocates and
/// programs RcvArray entries, fills the flow record. 0, `-EAGAIN` (queued
/// for RcvArray space; woken later), `-ENOMEM` (DMA mapping failed),
/// `-EINVAL` (ring full, no pages, bad arguments, more than 32 SGEs).
///
/// Kernel: `hfi1_kern_exp_rcv_setup()`.
///
/// # Safety
///
/// `rcd`, `qp`, `req` are null or live; `req` belongs to `qp`, which uses
/// `rcd`; `sges` is valid for `nsges` reads; the caller holds `qp`'s
/// `s_lock` (and no other lock of the engine's) for the call.
///
/// # Locking
///
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_exp_rcv_setup(
    rcd: *const Rcd,
    qp: *mut KQp,
    req: *mut Req,
    sges: *const SgeC,
    nsges: u32,
) -> i32 {
    // SAFETY: the caller promises `req` is null or a live request.
    let Some(req) = (unsafe { req.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    if nsges as usize > MAX_SGES || (sges.is_null() && nsges != 0) {
        return Errno::INVAL.to_neg();
    }
    let mut list: ArrayVec<Sge, MAX_SGES> = ArrayVec::new();
    for i in 0..nsges as usize {
        // SAFETY: `i < nsges` and `sges` is valid for `nsges` reads.
        let s = unsafe { sges.add(i).read() };
        // Cannot overflow (`nsges <= MAX_SGES`, checked above); `try_push`
        // keeps ArrayVec's panicking path out of the object.
        if list
            .try_push(Sge {
                vaddr: s.vaddr,
                length: s.length,
            })
            .is_err()
        {
            return Errno::INVAL.to_neg();
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        with_s_lock(rcd, qp, |rcd, r, s| {
            let res = tid_flow::segment::setup_segment(
                rcd,
                &mut req.req,
                r,
                QpLocked::from_guard(s),
                &list,
            );
            errno::ret(res.map_err(Errno::from))
        })
    }
}

/// Releases the oldest set-up segment's RcvArray entries and mappings and
/// wakes the head of the RcvArray queue. 0, `-EINVAL` (nothing set up).
///
/// Kernel: `hfi1_kern_exp_rcv_clear()`.
///
/// # Safety
///
/// As [`hfi1_tid_exp_rcv_setup`].
///
/// # Locking
///
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_exp_rcv_clear(
    rcd: *const Rcd,
    qp: *mut KQp,
    req: *mut Req,
) -> i32 {
    // SAFETY: the caller promises `req` is null or a live request.
    let Some(req) = (unsafe { req.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        with_s_lock(rcd, qp, |rcd, r, s| {
            let res =
                tid_flow::segment::clear_segment(rcd, &mut req.req, r, QpLocked::from_guard(s));
            errno::ret(res.map_err(Errno::from))
        })
    }
}

/// Clears every set-up segment of the request (and forgets a half-set-up
/// one). 0 or `-EINVAL`.
///
/// Kernel: `hfi1_kern_exp_rcv_clear_all()`.
///
/// # Safety
///
/// As [`hfi1_tid_exp_rcv_setup`].
///
/// # Locking
///
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_exp_rcv_clear_all(
    rcd: *const Rcd,
    qp: *mut KQp,
    req: *mut Req,
) -> i32 {
    // SAFETY: the caller promises `req` is null or a live request.
    let Some(req) = (unsafe { req.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        with_s_lock(rcd, qp, |rcd, r, s| {
            tid_flow::segment::clear_all_segments(rcd, &mut req.req, r, QpLocked::from_guard(s));
            0
        })
    }
}

/// Unwinds the QP's TID wait (QP reset or destroy): clears
/// `WAIT_TID_SPACE` and takes it off whichever queue holds it, dropping
/// that queue's reference. 0 or `-EINVAL`.
///
/// Kernel: `hfi1_tid_rdma_flush_wait()`.
///
/// # Safety
///
/// As [`hfi1_tid_setup_hw_flow`].
///
/// # Locking
///
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_flush_wait(rcd: *const Rcd, qp: *mut KQp) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        with_s_lock(rcd, qp, |rcd, r, s| {
            qp_wait::flush_wait::<KernelPlatform, _>(r, s, &rcd.exp_lock, &rcd.sched);
            0
        })
    }
}

/// The common shape of the stateful entry points: resolves the context and
/// QP handles (`-EINVAL` if either is null) and runs `f` on the guard made
/// over the `s_lock` the caller holds ([`with_held_s_lock`]); the lock
/// stays held.
///
/// # Safety
///
/// `rcd` is null or a live context from [`hfi1_tid_ctx_create`]; `qp` is
/// null or a live QP the caller holds a reference to, whose `s_lock` the
/// calling context holds (and no other lock of the engine's) for the call.
unsafe fn with_s_lock(
    rcd: *const Rcd,
    qp: *mut KQp,
    f: impl FnOnce(&RcvCtxt<KernelPlatform>, &KRef, &mut SGuard<'_, KernelPlatform>) -> i32,
) -> i32 {
    // SAFETY: the caller promises `rcd` is null or live.
    let Some(rcd) = (unsafe { rcd.as_ref() }).map(Rcd::ctx) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_held_s_lock(qp, |r, g| f(rcd, r, g)) }
}

const _: () = assert!(TID_GROUP_SIZE == 8);
