// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A test harness for the wait queues on the kernel platform (test only,
//! `struct hfi1_tid_wt` in the header).
//!
//! It stands in for a receive context while the full one cannot be built
//! in a kernel (see the README: `RcvCtxt` needs 22 KiB of stack). It keeps
//! two counted resources, "flow" and "RcvArray" tokens, and acquires and
//! releases them exactly the way `tid-flow` acquires and releases flows and
//! TIDs: under the QP's `s_lock` and then `exp_lock`; a QP that finds
//! others waiting ahead, or no token, is queued with `qp_wait` and gets
//! `-EAGAIN`; whoever gives a token back reads the head of the queue under
//! `exp_lock` and wakes it after unlocking (directly if it is itself, else
//! through its trigger work). Everything it calls on the wait queues,
//! wake-ups and QP references is the real `qp-wait` code on the real
//! kernel platform ([`crate::kplat`]).

use core::sync::atomic::Ordering;

use alloc::boxed::Box;

use hfi1_hal::lock_order::{ExpLock, Lock, LockToken};
use qp_wait::{DevCounters, QueueKind, WaitQueues};

use crate::errno::Errno;
use crate::kplat::{KQp, KRef, KSched, KernelPlatform, KernelSpinLock, LIVE, ops};
use crate::qp::borrow_qp;

/// The `exp_lock`-guarded state of the harness.
#[derive(Debug)]
pub struct WtState {
    waiters: WaitQueues<KRef>,
    /// Free tokens: `[flow, RcvArray]`.
    tokens: [u32; 2],
}

impl AsMut<WaitQueues<KRef>> for WtState {
    fn as_mut(&mut self) -> &mut WaitQueues<KRef> {
        &mut self.waiters
    }
}

/// The harness (`struct hfi1_tid_wt`).
#[derive(Debug)]
pub struct WaitTest {
    exp_lock: Lock<ExpLock, KernelSpinLock, WtState>,
    total: [u32; 2],
    dev: DevCounters,
}

fn kind(k: u32) -> Option<(QueueKind, usize)> {
    match k {
        0 => Some((QueueKind::Flow, 0)),
        1 => Some((QueueKind::RcvArray, 1)),
        _ => None,
    }
}

/// Creates a harness with room for `slots` QPs and `flows` / `rarr`
/// tokens. Null on no memory or no registered platform.
///
/// # Locking
///
/// None held.
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_wt_create(slots: u32, flows: u32, rarr: u32) -> *mut WaitTest {
    if ops().is_none() {
        return core::ptr::null_mut();
    }
    let Ok(waiters) = WaitQueues::new(slots) else {
        return core::ptr::null_mut();
    };
    let state = WtState {
        waiters,
        tokens: [flows, rarr],
    };
    let raw = <KernelSpinLock as hfi1_hal::lock_order::NewRawSpinLock>::new_with_class(
        <ExpLock as hfi1_hal::lock_order::LockLevel>::CLASS,
    );
    let Some(b) = crate::kplat::try_box(WaitTest {
        exp_lock: Lock::with_raw(raw, state),
        total: [flows, rarr],
        dev: DevCounters::new(),
    }) else {
        return core::ptr::null_mut();
    };
    // SAFETY: the box is the lock's final place; nobody else has it yet.
    unsafe { b.exp_lock.raw().init_in_place() };
    LIVE.fetch_add(1, Ordering::AcqRel);
    Box::into_raw(b)
}

/// Frees a harness: 0, `-EINVAL`, or `-EBUSY` (nothing freed) while a QP
/// waits or a token is out.
///
/// # Safety
///
/// `wt` is null or from [`hfi1_tid_wt_create`], used by no other thread.
///
/// # Locking
///
/// None held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_destroy(wt: *mut WaitTest) -> i32 {
    // SAFETY: forwarded from the caller.
    let Some(w) = (unsafe { wt.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    let total = w.total;
    let st = w.exp_lock.get_mut();
    if !st.waiters.is_empty() || st.tokens != total {
        return Errno::BUSY.to_neg();
    }
    // SAFETY: `wt` came from `Box::into_raw` and is not used again.
    drop(unsafe { Box::from_raw(wt) });
    LIVE.fetch_sub(1, Ordering::AcqRel);
    0
}

/// Takes a token of `k` (0 = flow, 1 = RcvArray) for `qp`, or queues it:
/// 0, `-EAGAIN` (queued; woken through its trigger work), `-EINVAL`.
/// Mirrors `tid_flow::setup_hw_flow`.
///
/// # Safety
///
/// `wt` and `qp` are null or live; the caller holds a reference to `qp`.
///
/// # Locking
///
/// None held; takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_acquire(wt: *const WaitTest, qp: *mut KQp, k: u32) -> i32 {
    // SAFETY: forwarded from the caller.
    let (Some(w), Some(r), Some((kind, i))) =
        (unsafe { wt.as_ref() }, unsafe { borrow_qp(qp) }, kind(k))
    else {
        return Errno::INVAL.to_neg();
    };
    let mut root = LockToken::root();
    let mut s = r.s_lock.lock(&mut root);
    let (state, token) = s.parts();
    let wake = {
        let mut e = w.exp_lock.lock(token);
        let st = &mut *e;
        let free = st.tokens.get(i).copied().unwrap_or(0);
        if st.waiters.waiters(kind, &r, &state.flags) || free == 0 {
            if st
                .waiters
                .enqueue(kind, &r, &mut state.flags, &w.dev)
                .is_err()
            {
                return Errno::INVAL.to_neg();
            }
            return Errno::AGAIN.to_neg();
        }
        if let Some(t) = st.tokens.get_mut(i) {
            *t = free.wrapping_sub(1);
        }
        st.waiters.dequeue(kind, &**r, &mut state.flags);
        st.waiters.first(kind)
    };
    wake.schedule(token, &KSched);
    0
}

/// Gives a token of `k` back and wakes the head of that queue: directly if
/// it is `qp`, else through its trigger work. 0 or `-EINVAL`. Mirrors
/// `tid_flow::clear_hw_flow`.
///
/// # Safety
///
/// As [`hfi1_tid_wt_acquire`]; `qp` holds a token of `k`.
///
/// # Locking
///
/// None held; takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_release(wt: *const WaitTest, qp: *mut KQp, k: u32) -> i32 {
    // SAFETY: forwarded from the caller.
    let (Some(w), Some(r), Some((kind, i))) =
        (unsafe { wt.as_ref() }, unsafe { borrow_qp(qp) }, kind(k))
    else {
        return Errno::INVAL.to_neg();
    };
    let mut root = LockToken::root();
    let mut s = r.s_lock.lock(&mut root);
    let (state, token) = s.parts();
    let wake = {
        let mut e = w.exp_lock.lock(token);
        let st = &mut *e;
        match (st.tokens.get_mut(i), w.total.get(i)) {
            (Some(t), Some(&max)) if *t < max => *t = t.wrapping_add(1),
            _ => return Errno::INVAL.to_neg(),
        }
        st.waiters.first(kind)
    };
    wake.deliver(&r, &state.flags, token, &KSched);
    0
}

/// Unwinds `qp`'s wait (QP reset): `qp_wait::flush_wait`. 0 or `-EINVAL`.
///
/// # Safety
///
/// As [`hfi1_tid_wt_acquire`].
///
/// # Locking
///
/// None held; takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_flush(wt: *const WaitTest, qp: *mut KQp) -> i32 {
    // SAFETY: forwarded from the caller.
    let (Some(w), Some(r)) = (unsafe { wt.as_ref() }, unsafe { borrow_qp(qp) }) else {
        return Errno::INVAL.to_neg();
    };
    let mut root = LockToken::root();
    let mut s = r.s_lock.lock(&mut root);
    qp_wait::flush_wait::<KernelPlatform, _>(&r, &mut s, &w.exp_lock, &KSched);
    0
}

/// QPs waiting on queue `k`, free tokens of `k` in bits 32..63, or
/// `u64::MAX` on bad arguments. Takes `qp`'s `s_lock` to be allowed to take
/// `exp_lock`.
///
/// # Safety
///
/// As [`hfi1_tid_wt_acquire`].
///
/// # Locking
///
/// None held; takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_stats(wt: *const WaitTest, qp: *mut KQp, k: u32) -> u64 {
    // SAFETY: forwarded from the caller.
    let (Some(w), Some(r), Some((kind, i))) =
        (unsafe { wt.as_ref() }, unsafe { borrow_qp(qp) }, kind(k))
    else {
        return u64::MAX;
    };
    let mut root = LockToken::root();
    let mut s = r.s_lock.lock(&mut root);
    let e = w.exp_lock.lock(s.token());
    let free = u64::from(e.tokens.get(i).copied().unwrap_or(0));
    (e.waiters.len(kind) as u64 & 0xFFFF_FFFF) | free << 32
}
