// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The stateful engine's C entry points: receive contexts, QPs, requests,
//! hardware flows, segment setup and teardown, the wait-queue flush and
//! the trigger work (issue 6).
//!
//! Handles are opaque: `struct hfi1_tid_rcd`, `struct hfi1_tid_qp` and
//! `struct hfi1_tid_req` in the header are never defined in C.
//!
//! # Locking
//!
//! These entry points take the QP's `s_lock` themselves and then, where
//! needed, the context's `exp_lock` (always in that order), so the caller
//! holds **neither** lock. That is where this interface differs from the
//! driver's functions, whose callers already hold `s_lock`: the engine
//! keeps the `s_lock`-guarded state (flags, flow state, requests) behind
//! its own lock type, and reaching it needs the guard this crate takes.
//! The README explains what this means for wiring the driver to it.

use core::ffi::c_void;
use core::sync::atomic::Ordering;

use arrayvec::ArrayVec;
use hfi1_hal::consts::TID_GROUP_SIZE;
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::services::AllocContext;
use qp_wait::{DevCounters, QueueKind, SGuard};
use tid_alloc::groups::GroupList;
use tid_flow::segment::{Sge, TidRequest};
use tid_flow::{CtxtParts, QpLocked, RcvCtxt};

use crate::errno::{self, Errno};
use crate::kplat::{KDma, KMem, KQp, KRandom, KRef, KSched, KernelPlatform, LIVE, ops, try_box};
use crate::platform::{ChipOps, KernelChip};
use crate::qp::borrow_qp;

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
    fn ctx(&self) -> &RcvCtxt<KernelPlatform> {
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

fn live_inc() {
    LIVE.fetch_add(1, Ordering::AcqRel);
}

fn live_dec() {
    LIVE.fetch_sub(1, Ordering::AcqRel);
}

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
    if ops().is_none() {
        return core::ptr::null_mut();
    }
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
        sched: KSched,
        dma: KDma { dev },
        mem: KMem,
        dev: devc,
    };
    let Ok(ctx) = RcvCtxt::<KernelPlatform>::try_new_in(&KMem, parts, &mut KRandom) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the heap block is the lock's final place (the context never
    // moves out of its box) and nobody else has it yet.
    unsafe { ctx.exp_lock.raw().init_in_place() };
    live_inc();
    // `Rcd` is a transparent wrapper of the context.
    Box::into_raw(ctx).cast::<Rcd>()
}

use alloc::boxed::Box;

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

/// Reads a context's occupancy into `out` (0, or `-EINVAL`). Takes `qp`'s
/// `s_lock` to be allowed to take `exp_lock` (any QP will do).
///
/// # Safety
///
/// `rcd` and `qp` are null or live; `out` is null or writable.
///
/// # Locking
///
/// None held; takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_ctx_stats(
    rcd: *const Rcd,
    qp: *mut KQp,
    out: *mut CtxStats,
) -> i32 {
    // SAFETY: the caller promises `out` is null or writable.
    let Some(out) = (unsafe { out.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        with_s_lock(rcd, qp, |rcd, _, s| {
            let e = rcd.exp_lock.lock(s.token());
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
        })
    }
}

/// Gets the QP a hardware flow, or queues it: 0, `-EAGAIN` (queued, it
/// will be woken through its trigger work), `-EINVAL`.
///
/// Kernel: `hfi1_kern_setup_hw_flow()`.
///
/// # Safety
///
/// `rcd` and `qp` are null or live; `qp` uses `rcd`.
///
/// # Locking
///
/// None held (the driver's caller holds `s_lock`; see the module doc);
/// takes `qp->s_lock`, then `exp_lock`.
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
/// None held; takes `qp->s_lock`, then `exp_lock`.
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
    if ops().is_none() || seg_len == 0 || n == 0 || usize::from(n) > hfi1_hal::consts::MAX_FLOWS {
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

/// Frees a request (and its flow records). Returns 0, `-EINVAL`, or
/// `-EBUSY` (nothing freed) while segments are set up or mapped.
///
/// Kernel: `hfi1_kern_exp_rcv_free_flows()` and the `kfree` of the WQE's
/// private part.
///
/// # Safety
///
/// `req` is null or from [`hfi1_tid_req_create`], used by no other thread.
///
/// # Locking
///
/// None held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_req_destroy(req: *mut Req) -> i32 {
    // SAFETY: forwarded from the caller.
    let Some(r) = (unsafe { req.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    if let Err(e) = r.req.clean_swqe() {
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
/// `rcd`; `sges` is valid for `nsges` reads.
///
/// # Locking
///
/// None held; takes `qp->s_lock`, then `exp_lock`.
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
            let res = tid_flow::segment::exp_rcv_setup(
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
/// None held; takes `qp->s_lock`, then `exp_lock`.
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
                tid_flow::segment::exp_rcv_clear(rcd, &mut req.req, r, QpLocked::from_guard(s));
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
/// None held; takes `qp->s_lock`, then `exp_lock`.
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
            tid_flow::segment::exp_rcv_clear_all(rcd, &mut req.req, r, QpLocked::from_guard(s));
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
/// None held; takes `qp->s_lock`, then `exp_lock`.
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
/// QP handles (`-EINVAL` if either is null), takes the QP's `s_lock` from a
/// fresh root token (C calls these with no lock of ours held) and runs `f`
/// with it; the lock is released before the result goes back to C.
///
/// # Safety
///
/// `rcd` is null or a live context from [`hfi1_tid_ctx_create`]; `qp` is
/// null or a live QP the caller holds a reference to.
unsafe fn with_s_lock(
    rcd: *const Rcd,
    qp: *mut KQp,
    f: impl FnOnce(&RcvCtxt<KernelPlatform>, &KRef, &mut SGuard<'_, KernelPlatform>) -> i32,
) -> i32 {
    // SAFETY: forwarded from the caller.
    let (Some(rcd), Some(r)) = (unsafe { rcd.as_ref() }.map(Rcd::ctx), unsafe {
        borrow_qp(qp)
    }) else {
        return Errno::INVAL.to_neg();
    };
    let mut root = LockToken::root();
    let mut s = r.s_lock.lock(&mut root);
    f(rcd, &r, &mut s)
}

const _: () = assert!(TID_GROUP_SIZE == 8);
