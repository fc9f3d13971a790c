// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The engine's side of a QP: creation, destruction, its wait flag, the
//! trigger work item (`struct hfi1_tid_qp` in the header), and the guard
//! the entry points make over the `s_lock` their caller holds.
//!
//! # Locking
//!
//! [`hfi1_tid_qp_create`] and [`hfi1_tid_qp_destroy`] need no lock;
//! [`hfi1_tid_qp_waiting`] and [`hfi1_tid_trigger_resume`] take the QP's
//! `s_lock` themselves (no lock held on entry); every other entry point
//! that names a QP is called with its `s_lock` held and reaches the QP's
//! state through a guard made over the held lock (`with_held_s_lock`).

use core::ffi::c_void;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use alloc::boxed::Box;

use hfi1_hal::Psn;
use hfi1_hal::lock_order::{Lock, LockToken, RLock};
use qp_wait::{Qp, SGuard, SendState};
use tid_flow::FlowPlatform;
use tid_read_proto::qp::TidQp;
use tid_read_proto::rc::{Connection, QpState};
use tid_read_proto::requester::Requester;
use tid_read_proto::responder::Responder;
use tid_read_proto::write::responder::WriteResponder;

use crate::errno::Errno;
use crate::kplat::{
    KQp, KRef, KernelPlatform, KernelSpinLock, do_send, kernel, live_dec, live_inc, try_box_uninit,
};
use crate::proto::ConnC;

/// Borrows the caller's reference to a QP as a [`KRef`] that is not
/// dropped (no reference count change).
///
/// # Safety
///
/// `qp` is null or a live QP the caller holds a reference to.
pub(crate) unsafe fn borrow_qp(qp: *mut KQp) -> Option<ManuallyDrop<KRef>> {
    // SAFETY: forwarded from the caller.
    NonNull::new(qp).map(|p| ManuallyDrop::new(unsafe { KRef::adopt(p) }))
}

/// Runs `f` on the QP's `s_lock` guard, made over the lock the C caller
/// holds ([`Lock::assume_held`], which asserts it with
/// `lockdep_assert_held`); the lock stays held when `f` returns. `-EINVAL`
/// for a null QP.
///
/// # Safety
///
/// `qp` is null or a live QP the caller holds a reference to, and the
/// calling context holds its `s_lock` (and no other lock of the engine's
/// order) for the whole call, touching the QP's engine state only through
/// this call.
///
/// # Locking
///
/// The QP's `s_lock` held on entry; nothing taken.
pub(crate) unsafe fn with_held_s_lock(
    qp: *mut KQp,
    f: impl FnOnce(&KRef, &mut SGuard<'_, KernelPlatform>) -> i32,
) -> i32 {
    // SAFETY: forwarded from the caller.
    let Some(r) = (unsafe { borrow_qp(qp) }) else {
        return Errno::INVAL.to_neg();
    };
    // The C caller holds no lock of the order but this s_lock: its
    // context's level is the root.
    let mut root = LockToken::root();
    // SAFETY: the caller holds the s_lock, taken with nothing else of the
    // order held, for the whole call, and reaches the QP's state only
    // through this guard meanwhile (the contract above).
    let mut g = unsafe { r.s_lock.assume_held(&mut root) };
    f(&r, &mut g)
}

/// A QP's `r_lock` as a lock of the engine's order: the C `spinlock_t`
/// of its owner, reached through the registered callbacks.
type RLockOf = Lock<RLock, KernelSpinLock, ()>;

/// The `r_lock` at `r_lock`, `-EINVAL` for a null QP or lock.
///
/// # Safety
///
/// `qp` is null or live with a reference held by the caller; `r_lock` is
/// null or the QP's initialised `r_lock`.
unsafe fn r_lock_of(
    qp: *mut KQp,
    r_lock: *mut c_void,
) -> Result<(ManuallyDrop<KRef>, RLockOf), i32> {
    // SAFETY: forwarded from the caller.
    let r = unsafe { borrow_qp(qp) }.ok_or(Errno::INVAL.to_neg())?;
    // SAFETY: the caller promises an initialised spinlock that outlives
    // the call.
    let raw = unsafe { KernelSpinLock::external(r.kernel(), r_lock) };
    let raw = raw.ok_or(Errno::INVAL.to_neg())?;
    Ok((r, Lock::with_raw(raw, ())))
}

/// Runs `f` with the token of the QP's `r_lock`, which the C caller holds
/// (the receive path's packet handlers): [`Lock::assume_held`] asserts it
/// with `lockdep_assert_held`, and the lock stays held. `-EINVAL` for a
/// null QP or lock.
///
/// # Safety
///
/// `qp` is null or live with a reference held by the caller; `r_lock` is
/// null or the QP's `r_lock`, which the calling context holds (taken with
/// no other lock of the engine's order held) for the whole call.
///
/// # Locking
///
/// The QP's `r_lock` held on entry; what `f` takes.
pub(crate) unsafe fn with_held_r_lock(
    qp: *mut KQp,
    r_lock: *mut c_void,
    f: impl FnOnce(&KRef, &mut LockToken<'_, RLock>) -> i32,
) -> i32 {
    // SAFETY: forwarded from the caller.
    let (r, lock) = match unsafe { r_lock_of(qp, r_lock) } {
        Ok(x) => x,
        Err(e) => return e,
    };
    let mut root = LockToken::root();
    // SAFETY: the caller holds the r_lock, taken with nothing else of the
    // order held, for the whole call; it guards no data here (`()`), and
    // this is its only guard.
    let mut g = unsafe { lock.assume_held(&mut root) };
    f(&r, g.token())
}

/// Takes the QP's `r_lock`, runs `f` with its token and releases it (the
/// KDETH error path takes it itself). `-EINVAL` for a null QP or lock.
///
/// # Safety
///
/// `qp` is null or live with a reference held by the caller; `r_lock` is
/// null or the QP's initialised `r_lock`, not held by the caller.
///
/// # Locking
///
/// None held; takes the QP's `r_lock`, then what `f` takes.
pub(crate) unsafe fn with_r_lock_taken(
    qp: *mut KQp,
    r_lock: *mut c_void,
    f: impl FnOnce(&KRef, &mut LockToken<'_, RLock>) -> i32,
) -> i32 {
    // SAFETY: forwarded from the caller.
    let (r, lock) = match unsafe { r_lock_of(qp, r_lock) } {
        Ok(x) => x,
        Err(e) => return e,
    };
    let mut root = LockToken::root();
    let mut g = lock.lock(&mut root);
    f(&r, g.token())
}

/// Writes a connected QP's state at `p`: [`TidQp::new`] part by part,
/// each role in a frame of its own (all at once, their temporaries would
/// take more than a page of kernel stack).
///
/// # Safety
///
/// `p` is valid for writes of one `SendState` and aligned.
pub(crate) unsafe fn init_send_state<P>(p: *mut SendState<TidQp<P>>, conn: Connection, psn: Psn)
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    #[inline(never)]
    unsafe fn requester<P: FlowPlatform>(p: *mut Requester<P>, conn: &Connection, psn: Psn) {
        // SAFETY: forwarded from the caller.
        unsafe { p.write(Requester::new(conn, psn)) }
    }
    #[inline(never)]
    unsafe fn responder(p: *mut Responder, psn: Psn) {
        // SAFETY: forwarded from the caller.
        unsafe { p.write(Responder::new(psn)) }
    }
    #[inline(never)]
    unsafe fn write_responder<P: FlowPlatform>(p: *mut WriteResponder<P>) {
        // SAFETY: forwarded from the caller.
        unsafe { p.write(WriteResponder::new()) }
    }
    // Every field of `TidQp` is written below: this pattern stops
    // compiling when one is added.
    let _ = |t: TidQp<P>| {
        let TidQp {
            flow: _,
            conn: _,
            state: _,
            requester: _,
            responder: _,
            write_responder: _,
        } = t;
    };
    // SAFETY: `p` is valid for writes (the caller's promise); each field
    // is written once through its own place.
    unsafe {
        (&raw mut (*p).flags).write(Default::default());
        let e = &raw mut (*p).ext;
        requester(&raw mut (*e).requester, &conn, psn);
        responder(&raw mut (*e).responder, psn);
        write_responder(&raw mut (*e).write_responder);
        (&raw mut (*e).flow).write(Default::default());
        (&raw mut (*e).conn).write(conn);
        (&raw mut (*e).state).write(QpState::Rts);
    }
}

/// Creates the engine's side of a QP: number `qpn`, waiter slot `slot`
/// (unique in its context, below `qp_slots`), trigger work on `cpu`, its
/// `s_lock` the C `spinlock_t` at `s_lock` (initialised by the caller),
/// `cookie` the C QP given back to the callbacks, and its connection
/// `conn` (null: the kernel's defaults, first PSN 0, for a QP that only
/// uses flows and TIDs). Returns null on bad arguments, no registered
/// platform or no memory.
///
/// Kernel: the TID parts of `hfi1_qp_priv_init()`.
///
/// # Safety
///
/// `s_lock` is null or an initialised spinlock, and `cookie` a QP, that
/// both outlive the returned handle; `conn` is null or valid; the C QP calls
/// [`hfi1_tid_qp_destroy`] when its last reference goes.
///
/// # Locking
///
/// None held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_qp_create(
    cookie: *mut c_void,
    qpn: u32,
    slot: u32,
    cpu: u32,
    s_lock: *mut c_void,
    conn: *const ConnC,
) -> *mut KQp {
    let Some(k) = kernel() else {
        return core::ptr::null_mut();
    };
    // SAFETY: the caller promises an initialised, long-lived spinlock.
    let Some(raw) = (unsafe { KernelSpinLock::external(k, s_lock) }) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the caller promises `conn` is null or valid.
    let (conn, psn) = match unsafe { conn.as_ref() } {
        None => (Connection::default(), Psn::new(0)),
        Some(c) => match c.to_connection() {
            Some(x) => x,
            None => return core::ptr::null_mut(),
        },
    };
    // The protocol state is too large for the kernel stack: the QP is
    // built in its allocation, part by part.
    let Some(mut b) = try_box_uninit::<KQp>() else {
        return core::ptr::null_mut();
    };
    let p = b.as_mut_ptr();
    // SAFETY: `p` is a fresh allocation for one `KQp`; every field is
    // written once (the QP's state through `init_send_state`), so the box
    // holds a valid `KQp` afterwards.
    let b = unsafe {
        (&raw mut (*p).cookie).write(cookie);
        (&raw mut (*p).k).write(k);
        let st = Qp::init_at(&raw mut (*p).qp, qpn, slot, cpu, raw);
        init_send_state(st, conn, psn);
        b.assume_init()
    };
    live_inc();
    Box::into_raw(b)
}

/// Frees the engine's side of a QP; null is ignored. Called by the C QP's
/// release when its last reference is dropped (so it waits on no queue and
/// no work item holds it).
///
/// Kernel: the TID parts of `hfi1_qp_priv_free()`.
///
/// # Safety
///
/// `qp` is null or from [`hfi1_tid_qp_create`], with no reference left.
///
/// # Locking
///
/// None held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_qp_destroy(qp: *mut KQp) {
    if !qp.is_null() {
        // SAFETY: the caller gives back ownership of the box.
        drop(unsafe { Box::from_raw(qp) });
        live_dec();
    }
}

/// 1 if the QP waits for TID space (`HFI1_S_WAIT_TID_SPACE`), 0 if not,
/// `-EINVAL` for null.
///
/// # Safety
///
/// `qp` is null or live, with a reference held by the caller.
///
/// # Locking
///
/// None held; takes `qp->s_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_qp_waiting(qp: *mut KQp) -> i32 {
    // SAFETY: forwarded from the caller.
    let Some(r) = (unsafe { borrow_qp(qp) }) else {
        return Errno::INVAL.to_neg();
    };
    let mut root = LockToken::root();
    let s = r.s_lock.lock(&mut root);
    i32::from(s.waiting())
}

/// The trigger work item: takes the QP's `s_lock`; if the QP still waits
/// for TID space, releases it and runs the send engine (`do_send`); then
/// drops the reference the work item carried. Returns 1 if the send engine
/// ran, 0 if not, `-EINVAL` for null.
///
/// Kernel: `tid_rdma_trigger_resume()`.
///
/// # Safety
///
/// `qp` is null or live, and the call hands over the reference taken when
/// the work was queued (`queue_trigger` returned true).
///
/// # Locking
///
/// None held (workqueue context); takes `qp->s_lock` alone.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_trigger_resume(qp: *mut KQp) -> i32 {
    let Some(p) = NonNull::new(qp) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: the caller hands over the work item's reference.
    let r = unsafe { KRef::adopt(p) };
    let mut root = LockToken::root();
    i32::from(qp_wait::trigger_resume::<KernelPlatform>(
        r,
        &mut root,
        |q, _| do_send(q),
    ))
}
