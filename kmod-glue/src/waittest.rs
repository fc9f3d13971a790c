// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A test harness for the wait queues alone on the kernel platform
//! (self-test module only, feature `selftest`; `struct hfi1_tid_wt` in the
//! header).
//!
//! It isolates `qp-wait` from the rest of the engine: instead of flows and
//! RcvArray entries it keeps two counted resources, "flow" and "RcvArray"
//! tokens, and acquires and releases them exactly the way `tid-flow`
//! acquires and releases flows and TIDs: with the QP's `s_lock` held by the
//! caller, then `exp_lock`; a QP that finds others waiting ahead, or no
//! token, is queued with `qp_wait` and gets `-EAGAIN`; whoever gives a
//! token back reads the head of the queue under `exp_lock` and wakes it
//! after unlocking (directly if it is itself, else through its trigger
//! work). Everything it calls on the wait queues, wake-ups and QP
//! references is the real `qp-wait` code on the real kernel platform
//! ([`crate::kplat`]); a failure here and not in the engine's phases points
//! at the queues.
//!
//! # Locking
//!
//! [`hfi1_tid_wt_acquire`], [`hfi1_tid_wt_release`] and
//! [`hfi1_tid_wt_flush`] are called with the QP's `s_lock` held and take
//! `exp_lock`; the others with no lock held.

use alloc::boxed::Box;

use hfi1_hal::lock_order::{EXP_LOCK_CLASS, ExpLock, Lock, LockToken};
use qp_wait::{DevCounters, QueueKind, WaitQueues};

use crate::errno::Errno;
use crate::kplat::{
    KQp, KRef, KSched, KernelPlatform, KernelSpinLock, kernel, live_dec, live_inc, try_box,
};
use crate::qp::with_held_s_lock;

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
    sched: KSched,
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
    let Some(k) = kernel() else {
        return core::ptr::null_mut();
    };
    let Ok(waiters) = WaitQueues::new(slots) else {
        return core::ptr::null_mut();
    };
    let state = WtState {
        waiters,
        tokens: [flows, rarr],
    };
    let Ok(raw) = KernelSpinLock::try_new(k, &EXP_LOCK_CLASS) else {
        return core::ptr::null_mut();
    };
    let Some(b) = try_box(WaitTest {
        exp_lock: Lock::with_raw(raw, state),
        total: [flows, rarr],
        dev: DevCounters::new(),
        sched: KSched(k),
    }) else {
        return core::ptr::null_mut();
    };
    live_inc();
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
    live_dec();
    0
}

/// Takes a token of `k` (0 = flow, 1 = RcvArray) for `qp`, or queues it:
/// 0, `-EAGAIN` (queued; woken through its trigger work), `-EINVAL`.
/// Mirrors `tid_flow::setup_hw_flow`.
///
/// # Safety
///
/// `wt` and `qp` are null or live; the caller holds a reference to `qp`
/// and its `s_lock` (and no other lock of the engine's) for the call.
///
/// # Locking
///
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_acquire(wt: *const WaitTest, qp: *mut KQp, k: u32) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { on_token(wt, qp, k, acquire) }
}

/// Resolves the harness and token kind (`-EINVAL` for null or an unknown
/// kind) and runs `f` on the guard over the `s_lock` the caller holds.
///
/// # Safety
///
/// As [`hfi1_tid_wt_acquire`].
unsafe fn on_token(
    wt: *const WaitTest,
    qp: *mut KQp,
    k: u32,
    f: fn(&WaitTest, &KRef, &mut qp_wait::SGuard<'_, KernelPlatform>, QueueKind, usize) -> i32,
) -> i32 {
    // SAFETY: the caller promises `wt` is null or live.
    let (Some(w), Some((kind, i))) = (unsafe { wt.as_ref() }, kind(k)) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller (s_lock held).
    unsafe { with_held_s_lock(qp, |r, s| f(w, r, s, kind, i)) }
}

fn acquire(
    w: &WaitTest,
    r: &KRef,
    s: &mut qp_wait::SGuard<'_, KernelPlatform>,
    kind: QueueKind,
    i: usize,
) -> i32 {
    let (state, token) = s.parts();
    let wake = {
        let mut e = w.exp_lock.lock(token);
        let st = &mut *e;
        let free = st.tokens.get(i).copied().unwrap_or(0);
        if st.waiters.waiters(kind, r, &state.flags) || free == 0 {
            if st
                .waiters
                .enqueue(kind, r, &mut state.flags, &w.dev)
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
    wake.schedule(token, &w.sched);
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
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_release(wt: *const WaitTest, qp: *mut KQp, k: u32) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { on_token(wt, qp, k, release) }
}

fn release(
    w: &WaitTest,
    r: &KRef,
    s: &mut qp_wait::SGuard<'_, KernelPlatform>,
    kind: QueueKind,
    i: usize,
) -> i32 {
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
    wake.deliver(r, &state.flags, token, &w.sched);
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
/// `qp->s_lock` held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_flush(wt: *const WaitTest, qp: *mut KQp) -> i32 {
    // SAFETY: the caller promises `wt` is null or live.
    let Some(w) = (unsafe { wt.as_ref() }) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller (s_lock held).
    unsafe {
        with_held_s_lock(qp, |r, s| {
            qp_wait::flush_wait::<KernelPlatform, _>(r, s, &w.exp_lock, &w.sched);
            0
        })
    }
}

/// QPs waiting on queue `k`, free tokens of `k` in bits 32..63, or
/// `u64::MAX` on bad arguments.
///
/// # Safety
///
/// `wt` is null or live.
///
/// # Locking
///
/// None held; takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_wt_stats(wt: *const WaitTest, k: u32) -> u64 {
    // SAFETY: the caller promises `wt` is null or live.
    let (Some(w), Some((kind, i))) = (unsafe { wt.as_ref() }, kind(k)) else {
        return u64::MAX;
    };
    let mut root = LockToken::root();
    let e = w.exp_lock.lock(&mut root);
    let free = u64::from(e.tokens.get(i).copied().unwrap_or(0));
    (e.waiters.len(kind) as u64 & 0xFFFF_FFFF) | free << 32
}
