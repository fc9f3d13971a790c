// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The routed stateful functions of the rebuilt `hfi1.ko`: each runs the
//! engine of `tid-flow` / `qp-wait` on the driver's own structures. The C
//! adapters of `hfi1/hfi1_tid_route.c` have the original signatures and
//! call these with the driver's services table and views of the context
//! and QP involved.
//!
//! | routed | here | lock the caller holds |
//! |---|---|---|
//! | `hfi1_kern_exp_rcv_init()` | [`hfi1_tid_drv_exp_rcv_init`] | none (context init) |
//! | `hfi1_kern_init_ctxt_generations()` | [`hfi1_tid_drv_init_ctxt_generations`] | none (context init) |
//! | `hfi1_kern_setup_hw_flow()` | [`hfi1_tid_drv_setup_hw_flow`] | `qp->s_lock` |
//! | `hfi1_kern_clear_hw_flow()` | [`hfi1_tid_drv_clear_hw_flow`] | `qp->s_lock` |
//! | `hfi1_kern_exp_rcv_setup()` | [`hfi1_tid_drv_exp_rcv_setup`] | `req->qp->s_lock` |
//! | `hfi1_kern_exp_rcv_clear()` | [`hfi1_tid_drv_exp_rcv_clear`] | `req->qp->s_lock` |
//! | `hfi1_kern_exp_rcv_clear_all()` | [`hfi1_tid_drv_exp_rcv_clear_all`] | `req->qp->s_lock` |
//! | `hfi1_kern_exp_rcv_alloc_flows()` | [`hfi1_tid_drv_alloc_flows`] | the QP's `s_lock`, or none at QP init |
//! | `hfi1_kern_exp_rcv_free_flows()`, `__trdma_clean_swqe()` | [`hfi1_tid_drv_free_flows`] | the QP's `s_lock`, or none at QP teardown |
//! | `hfi1_tid_rdma_flush_wait()` | [`hfi1_tid_drv_flush_wait`] | `qp->s_lock` |
//! | `tid_rdma_trigger_resume()` | [`hfi1_tid_drv_trigger_resume`] | none (work item) |
//!
//! # Locking
//!
//! As the table says; a held `s_lock` is asserted (`lockdep_assert_held`)
//! when the guard over it is made, and `exp_lock` is taken inside it.

use core::ffi::c_void;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use hfi1_hal::consts::{MAX_FLOWS, TID_RDMA_JKEY};
use hfi1_hal::layout::{
    CExpTidSet, CRvtSgeState, CTidFlowState, CTidGroup, CTidRdmaFlow, CTidRdmaRequest,
};
use hfi1_hal::lock_order::{Lock, LockToken, SLock};
use hfi1_hal::services::RandomSource;
use tid_flow::flows::init_generations;
use tid_flow::{
    Context, ExpStore, QpLocked, clear_all_segments_with, clear_hw_flow_with, clear_segment_with,
    setup_hw_flow_with, setup_segment_with,
};

use super::ctxt::DrvCtxt;
use super::list;
use super::ops::{DrvOps, DrvQpView, DrvRcdView, Ops};
use super::qp::{DrvQpState, DrvRef, DrvSpinLock};
use super::request::{DrvRequest, DrvSgeWalk};
use crate::errno::{self, Errno};

/// The checked table behind `ops`.
///
/// # Safety
///
/// `ops` is null or a valid table.
unsafe fn ops_of(ops: *const DrvOps) -> Option<Ops> {
    // SAFETY: by the caller.
    unsafe { ops.as_ref() }.and_then(Ops::check)
}

/// Runs `f` with the context of `rcd`, the caller's reference to the QP
/// of `qp` (not dropped) and the QP's state under the `s_lock` the caller
/// holds (a guard made over it, asserted with `lockdep_assert_held`).
/// `None` for a null or incomplete argument.
///
/// # Safety
///
/// `rcd` and `qp` are null or views of a live context and QP (the caller
/// holds a reference to it and its `s_lock`, taken with no other lock of
/// the order held, for the whole call).
unsafe fn with_qp<'o, T>(
    ops: &'o Ops,
    rcd: *const DrvRcdView,
    qp: *const DrvQpView,
    f: impl FnOnce(&DrvCtxt<'o>, &DrvRef<'o>, QpLocked<'_, '_, CTidFlowState>) -> T,
) -> Option<T> {
    // SAFETY: by the caller.
    let (rcd, view) = unsafe { (rcd.as_ref()?, *qp.as_ref()?) };
    // SAFETY: a live context whose state is reached under its exp_lock.
    let ctx = unsafe { DrvCtxt::new(ops, rcd) }?;
    // SAFETY: the caller holds a reference; it is borrowed, not dropped.
    let qp = ManuallyDrop::new(unsafe { DrvRef::adopt(ops, view) });
    let state = DrvQpState::of(&view)?;
    // SAFETY: `&qp->s_lock`, initialised, of a live QP.
    let raw = unsafe { DrvSpinLock::new(ops, NonNull::new(view.s_lock)?) };
    let s_lock: Lock<SLock, DrvSpinLock<'o>, DrvQpState> = Lock::with_raw(raw, state);
    let mut root = LockToken::root();
    // SAFETY: the caller holds this s_lock, taken with nothing else of the
    // order held, for the whole call; the QP's flags and flow state are
    // reached only through this guard meanwhile.
    let mut g = unsafe { s_lock.assume_held(&mut root) };
    let (st, token) = g.parts();
    // SAFETY: reached through the guard over the held s_lock.
    let (flags, flow) = unsafe { st.parts() };
    Some(f(&ctx, &qp, QpLocked { flags, flow, token }))
}

/// Kernel: `hfi1_kern_setup_hw_flow()`. 0, or `-EAGAIN` (queued on the
/// flow queue; woken later); `-EINVAL` for a bad argument.
///
/// # Safety
///
/// `ops` is a valid table; `rcd` and `qp` view a live context and QP; the
/// caller holds the QP's `s_lock` (and a reference to it).
///
/// # Locking
///
/// `qp->s_lock` held; takes `rcd->exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_setup_hw_flow(
    ops: *const DrvOps,
    rcd: *const DrvRcdView,
    qp: *const DrvQpView,
) -> i32 {
    // SAFETY: forwarded from the caller.
    let Some(ops) = (unsafe { ops_of(ops) }) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller.
    let r = unsafe { with_qp(&ops, rcd, qp, setup_hw_flow_with) };
    match r {
        Some(r) => errno::ret(r.map_err(Errno::from)),
        None => Errno::INVAL.to_neg(),
    }
}

/// Kernel: `hfi1_kern_clear_hw_flow()`.
///
/// # Safety
///
/// As [`hfi1_tid_drv_setup_hw_flow`].
///
/// # Locking
///
/// `qp->s_lock` held; takes `rcd->exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_clear_hw_flow(
    ops: *const DrvOps,
    rcd: *const DrvRcdView,
    qp: *const DrvQpView,
) {
    // SAFETY: forwarded from the caller.
    let Some(ops) = (unsafe { ops_of(ops) }) else {
        return;
    };
    // SAFETY: forwarded from the caller.
    let _ = unsafe { with_qp(&ops, rcd, qp, clear_hw_flow_with) };
}

/// The request at `req`, in the context of `rcd`, of the QP of `qp`.
///
/// # Safety
///
/// `req` is a live request of that QP, whose `s_lock` is held; `rcd` is
/// its context.
unsafe fn request<'o>(
    ops: &'o Ops,
    rcd: &DrvRcdView,
    qp: &DrvQpView,
    req: NonNull<CTidRdmaRequest>,
) -> Option<DrvRequest<'o>> {
    let groups = NonNull::new(rcd.groups)?;
    // SAFETY: `&rcd->groups` of a live context.
    let groups: *mut CTidGroup = unsafe { *groups.as_ptr() };
    let ngroups = u16::try_from(rcd.expected_count / rcd.group_size.max(1)).ok()?;
    // SAFETY: by the caller.
    Some(unsafe { DrvRequest::new(ops, req, groups, ngroups, qp.pages, qp.pmtu) })
}

/// Kernel: `hfi1_kern_exp_rcv_setup()`. `ss` is the request's scatter
/// list, `last` is set as the driver's `kern_find_pages()` sets it. 0,
/// `-EINVAL` (ring full, bad argument), `-ENOMEM` (DMA mapping failed:
/// the QP waits for memory, `hfi1_wait_kmem()`), `-EAGAIN` (queued on the
/// RcvArray queue).
///
/// # Safety
///
/// As [`hfi1_tid_drv_setup_hw_flow`], for `req->qp` and `req->rcd`; `req`
/// is live with null or `MAX_FLOWS` flow records; `ss` is its live scatter
/// list; `last` is valid for writes.
///
/// # Locking
///
/// `req->qp->s_lock` held; takes `rcd->exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_exp_rcv_setup(
    ops: *const DrvOps,
    rcd: *const DrvRcdView,
    qp: *const DrvQpView,
    req: *mut CTidRdmaRequest,
    ss: *mut CRvtSgeState,
    last: *mut bool,
) -> i32 {
    // SAFETY: forwarded from the caller.
    let (Some(ops), Some(reqp), Some(ssp), Some(lastp)) = (
        unsafe { ops_of(ops) },
        NonNull::new(req),
        NonNull::new(ss),
        NonNull::new(last),
    ) else {
        return Errno::INVAL.to_neg();
    };
    let o = &ops;
    // SAFETY: forwarded from the caller.
    let r = unsafe {
        with_qp(o, rcd, qp, |c, q, l| {
            let mut r = request(o, &*rcd, &q.view, reqp).ok_or(Errno::INVAL)?;
            let isge = NonNull::new(&raw mut (*reqp.as_ptr()).isge).ok_or(Errno::INVAL)?;
            let mut walk = DrvSgeWalk::new(o, ssp, isge, q.view.pages, lastp);
            setup_segment_with(c, &mut r, q, l, &mut walk).map_err(Errno::from)
        })
    };
    match r {
        Some(r) => errno::ret(r),
        None => Errno::INVAL.to_neg(),
    }
}

/// Kernel: `hfi1_kern_exp_rcv_clear()`. 0, or `-EINVAL` (nothing set up,
/// bad argument).
///
/// # Safety
///
/// As [`hfi1_tid_drv_exp_rcv_setup`].
///
/// # Locking
///
/// `req->qp->s_lock` held; takes `rcd->exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_exp_rcv_clear(
    ops: *const DrvOps,
    rcd: *const DrvRcdView,
    qp: *const DrvQpView,
    req: *mut CTidRdmaRequest,
) -> i32 {
    // SAFETY: forwarded from the caller.
    let (Some(ops), Some(reqp)) = (unsafe { ops_of(ops) }, NonNull::new(req)) else {
        return Errno::INVAL.to_neg();
    };
    let o = &ops;
    // SAFETY: forwarded from the caller.
    let r = unsafe {
        with_qp(o, rcd, qp, |c, q, l| {
            let mut r = request(o, &*rcd, &q.view, reqp).ok_or(Errno::INVAL)?;
            clear_segment_with(c, &mut r, q, l).map_err(Errno::from)
        })
    };
    match r {
        Some(r) => errno::ret(r),
        None => Errno::INVAL.to_neg(),
    }
}

/// Kernel: `hfi1_kern_exp_rcv_clear_all()` (which also clears a setup that
/// had to wait: `tid_flow::setup`).
///
/// # Safety
///
/// As [`hfi1_tid_drv_exp_rcv_setup`].
///
/// # Locking
///
/// `req->qp->s_lock` held; takes `rcd->exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_exp_rcv_clear_all(
    ops: *const DrvOps,
    rcd: *const DrvRcdView,
    qp: *const DrvQpView,
    req: *mut CTidRdmaRequest,
) {
    // SAFETY: forwarded from the caller.
    let (Some(ops), Some(reqp)) = (unsafe { ops_of(ops) }, NonNull::new(req)) else {
        return;
    };
    let o = &ops;
    // SAFETY: forwarded from the caller.
    let _ = unsafe {
        with_qp(o, rcd, qp, |c, q, l| {
            if let Some(mut r) = request(o, &*rcd, &q.view, reqp) {
                clear_all_segments_with(c, &mut r, q, l);
            }
        })
    };
}

/// Kernel: `hfi1_tid_rdma_flush_wait()`: clears `HFI1_S_WAIT_TID_SPACE`
/// and takes the QP off whichever of its context's queues holds it (and
/// wakes the queue's new head: `qp_wait::store::flush`).
///
/// # Safety
///
/// As [`hfi1_tid_drv_setup_hw_flow`]; `rcd` is the QP's context
/// (`qpriv->rcd`).
///
/// # Locking
///
/// `qp->s_lock` held; takes `rcd->exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_flush_wait(
    ops: *const DrvOps,
    rcd: *const DrvRcdView,
    qp: *const DrvQpView,
) {
    // SAFETY: forwarded from the caller.
    let Some(ops) = (unsafe { ops_of(ops) }) else {
        return;
    };
    // SAFETY: forwarded from the caller.
    let _ = unsafe {
        with_qp(&ops, rcd, qp, |c, q, l| {
            let QpLocked { flags, token, .. } = l;
            qp_wait::flush_wait_with(q, flags, token, c.exp(), |e| &mut e.waits, c.sched());
        })
    };
}

/// Kernel: `tid_rdma_trigger_resume()`: takes the QP's `s_lock`; if it
/// still waits for TID space, releases it and runs `hfi1_do_send(qp,
/// true)`; else releases it; then drops the reference the work item held.
///
/// # Safety
///
/// `ops` is a valid table; `qp` views a live QP; the call hands over the
/// reference `queue_work_on()` took with the work.
///
/// # Locking
///
/// None held (workqueue); takes `qp->s_lock` alone.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_trigger_resume(ops: *const DrvOps, qp: *const DrvQpView) {
    // SAFETY: by the caller.
    let (Some(ops), Some(view)) = (unsafe { ops_of(ops) }, unsafe { qp.as_ref() }.copied()) else {
        return;
    };
    // SAFETY: the work item's reference is handed over.
    let r = unsafe { DrvRef::adopt(&ops, view) };
    let (Some(state), Some(lock)) = (DrvQpState::of(&view), NonNull::new(view.s_lock)) else {
        return;
    };
    // SAFETY: `&qp->s_lock`, initialised, of a live QP.
    let raw = unsafe { DrvSpinLock::new(&ops, lock) };
    let s_lock: Lock<SLock, DrvSpinLock<'_>, DrvQpState> = Lock::with_raw(raw, state);
    let mut root = LockToken::root();
    qp_wait::resume_with(&r, &s_lock, &mut root, |q, _| {
        // SAFETY: the reference keeps the QP alive; no lock is held.
        unsafe { (q.ops.do_send)(q.view.qp, true) }
    });
    drop(r);
}

/// Kernel: `hfi1_kern_exp_rcv_alloc_flows()`: if the request has no flow
/// records, `kmalloc_node()`s `MAX_FLOWS` of them on `node` with `gfp`
/// and sets in each what the driver's "mini init" sets (`req`,
/// `npagesets`, `pagesets[0].mapped`, `resync_npkts`). 0, or `-ENOMEM`.
///
/// # Safety
///
/// `ops` is a valid table; `req` a live request its caller may change.
///
/// # Locking
///
/// The request's QP's `s_lock`, or none while the QP is being set up.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_alloc_flows(
    ops: *const DrvOps,
    req: *mut CTidRdmaRequest,
    gfp: u32,
    node: i32,
) -> i32 {
    // SAFETY: by the caller.
    let (Some(ops), Some(reqp)) = (unsafe { ops_of(ops) }, NonNull::new(req)) else {
        return Errno::INVAL.to_neg();
    };
    let r = reqp.as_ptr();
    // SAFETY: a live request (the caller).
    if unsafe { !(*r).flows.is_null() } {
        return 0;
    }
    let size = MAX_FLOWS * core::mem::size_of::<CTidRdmaFlow>();
    // SAFETY: the driver's allocator.
    let flows = unsafe { (ops.kmalloc)(size, gfp, node) }.cast::<CTidRdmaFlow>();
    if flows.is_null() {
        return Errno::NOMEM.to_neg();
    }
    for i in 0..MAX_FLOWS {
        // SAFETY: `flows` has room for `MAX_FLOWS` records; only the
        // fields the driver initialises are written, through raw places.
        unsafe {
            let f = flows.add(i);
            (&raw mut (*f).req).write(r.cast::<c_void>());
            (&raw mut (*f).npagesets).write(0);
            let p0 = (&raw mut (*f).pagesets).cast::<hfi1_hal::layout::CTidRdmaPageset>();
            p0.write(p0.read().with_mapped(false));
            (&raw mut (*f).resync_npkts).write(0);
        }
    }
    // SAFETY: a live request.
    unsafe { (*r).flows = flows };
    0
}

/// Kernel: `hfi1_kern_exp_rcv_free_flows()` (and `__trdma_clean_swqe()`,
/// whose adapter passes the WQE's request): `kfree(req->flows)`, whatever
/// the records hold, as the driver does; `req->flows = NULL`.
///
/// # Safety
///
/// As [`hfi1_tid_drv_alloc_flows`].
///
/// # Locking
///
/// As [`hfi1_tid_drv_alloc_flows`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_free_flows(ops: *const DrvOps, req: *mut CTidRdmaRequest) {
    // SAFETY: by the caller.
    let (Some(ops), Some(reqp)) = (unsafe { ops_of(ops) }, NonNull::new(req)) else {
        return;
    };
    let r = reqp.as_ptr();
    // SAFETY: a live request; its records came from the driver's
    // allocator (`kmalloc_node`), or are null (`kfree(NULL)` is fine).
    unsafe {
        (ops.kfree)((*r).flows.cast());
        (*r).flows = core::ptr::null_mut();
    }
}

/// Kernel: `hfi1_kern_exp_rcv_init()`: unless `reinit`, sets the context's
/// J_KEY to `TID_RDMA_JKEY` (`hfi1_set_ctxt_jkey()`) and sets up its TID
/// groups as `hfi1_alloc_ctxt_rcv_groups()` does: `expected_count /
/// group_size` groups `kcalloc_node()`ed with `gfp`, each with its size
/// and base, all on `tid_group_list` in order. 0, or `-ENOMEM`.
///
/// # Safety
///
/// `ops` is a valid table; `rcd` views a live context being initialised
/// (its lists initialised, nobody else using it).
///
/// # Locking
///
/// None (context init).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_exp_rcv_init(
    ops: *const DrvOps,
    rcd: *const DrvRcdView,
    reinit: i32,
    gfp: u32,
) -> i32 {
    if reinit != 0 {
        return 0;
    }
    // SAFETY: by the caller.
    let (Some(ops), Some(rcd)) = (unsafe { ops_of(ops) }, unsafe { rcd.as_ref() }) else {
        return Errno::INVAL.to_neg();
    };
    let (Some(jkey), Some(groups_at), Some(free)) = (
        NonNull::new(rcd.jkey),
        NonNull::new(rcd.groups),
        NonNull::new(rcd.tid_group_list),
    ) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: fields of a live context being set up by this call alone.
    unsafe {
        *jkey.as_ptr() = TID_RDMA_JKEY;
        (ops.set_ctxt_jkey)(rcd.dd, rcd.rcd, TID_RDMA_JKEY);
    }
    let size = rcd.group_size;
    let ngroups = rcd.expected_count / size.max(1);
    // SAFETY: the driver's allocator.
    let groups = unsafe {
        (ops.kcalloc)(
            ngroups as usize,
            core::mem::size_of::<CTidGroup>(),
            gfp,
            rcd.numa_id,
        )
    }
    .cast::<CTidGroup>();
    if groups.is_null() {
        return Errno::NOMEM.to_neg();
    }
    // SAFETY: a live context being set up by this call alone.
    unsafe { *groups_at.as_ptr() = groups };
    let set: *mut CExpTidSet = free.as_ptr();
    let mut base = rcd.expected_base;
    for i in 0..ngroups as usize {
        // SAFETY: `groups` has `ngroups` zeroed groups; the free list is
        // initialised and ours.
        unsafe {
            let g = groups.add(i);
            (*g).size = size as u8;
            (*g).base = base;
            list::add_tail(&raw mut (*g).list, &raw mut (*set).list);
            (*set).count = (*set).count.wrapping_add(1);
        }
        base = base.wrapping_add(size);
    }
    0
}

/// Kernel: `hfi1_kern_init_ctxt_generations()`: each flow a random 20-bit
/// generation (`get_random_u32()`), its register written disabled.
///
/// # Safety
///
/// `ops` is a valid table; `rcd` views a live context being initialised.
///
/// # Locking
///
/// None (context init).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_drv_init_ctxt_generations(
    ops: *const DrvOps,
    rcd: *const DrvRcdView,
) {
    // SAFETY: by the caller.
    let (Some(ops), Some(rcd)) = (unsafe { ops_of(ops) }, unsafe { rcd.as_ref() }) else {
        return;
    };
    // SAFETY: a live context being set up by this call alone.
    let Some(mut ctx) = (unsafe { DrvCtxt::new(&ops, rcd) }) else {
        return;
    };
    let mut rng = DrvRandom(&ops);
    // No lock, as in the driver: nobody else sees the context yet, which
    // `&mut` to it says.
    let es = ctx.exp_mut().split();
    init_generations(es.flows, &mut rng, es.chip);
}

/// The driver's `get_random_u32()`.
struct DrvRandom<'o>(&'o Ops);

impl RandomSource for DrvRandom<'_> {
    fn next_u32(&mut self) -> u32 {
        // SAFETY: the driver's callback.
        unsafe { (self.0.random_u32)() }
    }
}
