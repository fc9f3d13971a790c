// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two wait queues of a receive context (the flow queue and the
//! RcvArray queue), their wake-ups and the QP references they hold
//! (SPEC §4 and §5 "qp-wait").
//!
//! A QP that cannot get a hardware flow or RcvArray space waits on one of
//! its receive context's queues until another QP releases some; the head of
//! the queue is then woken. The queues belong to the context and live in
//! its `exp_lock`-guarded state (the context itself is in `tid-flow`):
//! [`WaitQueues`] is reachable only through that guard, so every function
//! here that changes a queue takes `&mut WaitQueues`, which is the proof.
//!
//! # Locking
//!
//! | state | guarded by | changed by |
//! |---|---|---|
//! | [`WaitQueues`]: both queues, every QP's [`Membership`], the per-queue enqueue/dequeue counters | the context's `exp_lock` | [`WaitQueues::enqueue`], [`WaitQueues::dequeue`], [`flush_wait`] |
//! | [`SendState::flags`] (`WAIT_TID_SPACE`) and the QP's extension state | the QP's `s_lock` | [`WaitQueues::enqueue`], [`WaitQueues::dequeue`], [`flush_wait`] |
//! | [`DevCounters`] | atomic | [`WaitQueues::enqueue`] |
//!
//! The order is `r_lock` → `s_lock` → `exp_lock`
//! ([`hfi1_hal::lock_order`]); every function that touches both takes
//! `&mut SFlags` (borrowed from the s_lock guard) and `&mut WaitQueues`
//! (borrowed from the exp_lock guard, taken with the s_lock token).
//!
//! | function | needs on entry | takes |
//! |---|---|---|
//! | [`WaitQueues::first`], [`WaitQueues::waiters`], [`WaitQueues::position`], [`WaitQueues::enqueue`], [`WaitQueues::dequeue`] | `exp_lock` (and the QP's `s_lock` for its flags) | nothing |
//! | [`Wakeup::deliver`], [`Wakeup::schedule`] | the caller's `s_lock`, `exp_lock` released (its token, by `&mut`) | nothing |
//! | [`trigger`] | the QP's `s_lock` (its flags); `exp_lock` may be held (it only schedules the send engine) | nothing |
//! | [`flush_wait`], [`flush_wait_with`] | the QP's `s_lock` (its guard, possibly one made over a lock the driver holds: `Lock::assume_held`) | `exp_lock` |
//! | [`wait_kmem`], [`kmem_wakeup`] | the QP's `s_lock` (its flags) | nothing (the scheduler's own list lock) |
//! | [`trigger_resume`], [`resume_with`] (the work item) | nothing (root token) | the QP's `s_lock`, alone |
//! | [`schedule_wakeup`] | anything but `exp_lock` (a token before it, by `&mut`) | nothing |
//!
//! **Why the wake-up is deferred.** The head of a queue is read under
//! `exp_lock` ([`WaitQueues::first`]), but waking it means looking at its
//! `WAIT_TID_SPACE` flag, which its own `s_lock` guards: taking that lock
//! under `exp_lock` would invert the order, and taking it while holding our
//! own QP's `s_lock` would hold two. So `first` returns a [`Wakeup`]: a
//! `#[must_use]` value holding a reference to the head, which can only be
//! acted on with the caller's s_lock guard back in hand, i.e. after the
//! exp_lock guard (which borrowed it) is gone. If the head is the caller's
//! own QP, [`Wakeup::deliver`] triggers it directly under the s_lock the
//! caller holds; otherwise it queues the QP's trigger work
//! ([`schedule_wakeup`]), which later runs [`trigger_resume`] and takes
//! that QP's `s_lock` alone.
//!
//! Acting on a wake-up while the exp_lock guard lives does not compile:
//!
//! ```compile_fail,E0499
//! # use hfi1_hal::lock_order::{ExpLock, Lock, LockToken};
//! # use hfi1_hal::sim::{SimRef, SimScheduler};
//! # use hfi1_hal::sync::SpinLock;
//! # use qp_wait::{Qp, QueueKind, SendState, WaitPlatform, WaitQueues};
//! # enum T {}
//! # impl WaitPlatform for T {
//! #     type Lock = SpinLock;
//! #     type Ext = ();
//! #     type Ref = SimRef<Qp<T>>;
//! #     type Sched = SimScheduler<SimRef<Qp<T>>>;
//! # }
//! # let qp: SimRef<Qp<T>> = SimRef::new(Qp::new(1, 0, 0, Lock::new(SendState::default())));
//! # let exp: Lock<ExpLock, SpinLock, WaitQueues<SimRef<Qp<T>>>> =
//! #     Lock::new(WaitQueues::new(1).unwrap());
//! # let sched = SimScheduler::new();
//! let mut root = LockToken::root();
//! let mut s = qp.s_lock.lock(&mut root);
//! let (state, token) = s.parts();
//! let e = exp.lock(token);
//! let wake = e.first(QueueKind::Flow);
//! wake.deliver(&qp, &state.flags, token, &sched); // `token` is lent to `e`
//! drop(e);
//! ```
//!
//! and compiles once the guard is gone:
//!
//! ```
//! # use hfi1_hal::lock_order::{ExpLock, Lock, LockToken};
//! # use hfi1_hal::sim::{SimRef, SimScheduler};
//! # use hfi1_hal::sync::SpinLock;
//! # use qp_wait::{Qp, QueueKind, SendState, WaitPlatform, WaitQueues};
//! # enum T {}
//! # impl WaitPlatform for T {
//! #     type Lock = SpinLock;
//! #     type Ext = ();
//! #     type Ref = SimRef<Qp<T>>;
//! #     type Sched = SimScheduler<SimRef<Qp<T>>>;
//! # }
//! # let qp: SimRef<Qp<T>> = SimRef::new(Qp::new(1, 0, 0, Lock::new(SendState::default())));
//! # let exp: Lock<ExpLock, SpinLock, WaitQueues<SimRef<Qp<T>>>> =
//! #     Lock::new(WaitQueues::new(1).unwrap());
//! # let sched = SimScheduler::new();
//! let mut root = LockToken::root();
//! let mut s = qp.s_lock.lock(&mut root);
//! let (state, token) = s.parts();
//! let wake = {
//!     let e = exp.lock(token);
//!     e.first(QueueKind::Flow)
//! };
//! wake.deliver(&qp, &state.flags, token, &sched);
//! ```
//!
//! # Example
//!
//! QP 2 finds no flow and waits on the flow queue; QP 1 releases one and,
//! once out of `exp_lock`, wakes the head: QP 2's trigger work is queued
//! and, when it runs, finds the QP still waiting and runs its send
//! engine.
//!
//! ```
//! use hfi1_hal::lock_order::{ExpLock, Lock, LockToken};
//! use hfi1_hal::sim::{SimRef, SimScheduler};
//! use hfi1_hal::sync::SpinLock;
//! use qp_wait::{DevCounters, Qp, QueueKind, SendState, WaitPlatform, WaitQueues};
//! enum T {}
//! impl WaitPlatform for T {
//!     type Lock = SpinLock;
//!     type Ext = ();
//!     type Ref = SimRef<Qp<T>>;
//!     type Sched = SimScheduler<SimRef<Qp<T>>>;
//! }
//! let new_qp = |qpn, slot| SimRef::new(Qp::<T>::new(qpn, slot, 0, Lock::new(SendState::default())));
//! let (one, two) = (new_qp(1, 0), new_qp(2, 1));
//! let exp: Lock<ExpLock, SpinLock, WaitQueues<SimRef<Qp<T>>>> =
//!     Lock::new(WaitQueues::new(2).unwrap());
//! let (sched, dev) = (SimScheduler::new(), DevCounters::new());
//! let mut root = LockToken::root();
//! {
//!     let mut s = two.s_lock.lock(&mut root);
//!     let (state, token) = s.parts();
//!     let mut e = exp.lock(token);
//!     e.enqueue(QueueKind::Flow, &two, &mut state.flags, &dev).unwrap();
//! }
//! assert!(two.s_lock.lock(&mut root).waiting());
//! {
//!     let mut s = one.s_lock.lock(&mut root);
//!     let (state, token) = s.parts();
//!     let wake = exp.lock(token).first(QueueKind::Flow); // QP 2, referenced
//!     wake.deliver(&one, &state.flags, token, &sched); // exp_lock released
//! }
//! let (_, qp) = sched.pop_work().unwrap(); // QP 2's trigger work
//! let mut ran = false;
//! qp_wait::trigger_resume::<T>(qp, &mut root, |_, _| ran = true);
//! assert!(ran && dev.tid_waits() == 1);
//! ```
//!
//! **References.** A queued QP is kept alive by the reference its queue
//! link holds; leaving the queue drops it. A wake-up carries its own
//! reference, handed to the work item when it is queued and dropped at
//! once if that work item was already pending.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

extern crate alloc;

use hfi1_hal::lock_order::RawSpinLock;
use hfi1_hal::services::{QpRef, Scheduler};

mod qp;
mod queues;
pub mod store;
mod wake;

pub use qp::{Qp, SGuard, SendState};
pub use queues::WaitQueues;
pub use store::{DevCounters, WaitCounter, WaitStore};
pub use wake::{
    Cpu, Slotted, Wakeup, flush_wait, flush_wait_with, kmem_wakeup, resume_with, schedule_wakeup,
    trigger, trigger_resume, wait_kmem,
};

/// Errors of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The QP's slot is outside the context's waiter table.
    #[error("QP slot {0} is outside the waiter table")]
    BadSlot(u32),
    /// The waiter table could not be allocated (ENOMEM).
    #[error("out of memory for the waiter table")]
    NoMemory,
}

/// What a platform supplies to the wait queues.
pub trait WaitPlatform: Sized + 'static {
    /// The spin-lock backend of `s_lock` and `exp_lock`.
    type Lock: RawSpinLock;
    /// The rest of a QP's `s_lock`-guarded state (the flow state for
    /// `tid-flow`, more for the protocol).
    type Ext;
    /// A counted reference to a QP.
    type Ref: QpRef<Target = Qp<Self>>;
    /// The scheduler of send engines and trigger work.
    type Sched: Scheduler<Self::Ref>;
}

/// A QP's send flags. Kernel: `qp->s_flags`. The wait queues change only
/// [`SFlags::WAIT_TID_SPACE`] and, through the memory-wait list,
/// [`SFlags::WAIT_KMEM`]; the other bits are the protocol's.
///
/// # Locking
///
/// The QP's `s_lock`.
pub use hfi1_hal::flags::SFlags;

/// Which of a context's two queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueKind {
    /// QPs waiting for a hardware flow. Kernel: `rcd->flow_queue`.
    Flow,
    /// QPs waiting for RcvArray (TID) space. Kernel: `rcd->rarr_queue`.
    RcvArray,
}

/// Where a QP waits: on no queue or on exactly one (SPEC §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Membership {
    /// On no queue.
    #[default]
    Idle,
    /// On one queue.
    Queued(QueueKind),
}

/// The receive context a QP uses: QP 0 uses context 0; every other QP
/// reads the device's QP map at `qpn >> qos_shift`, taken as the map's
/// 8-bit index. Kernel: `qp_to_rcd()` (`hfi1_get_qp_map(dd, qpn >>
/// dd->qos_shift)`, whose index parameter is a `u8`; `map` is the 256
/// bytes of `RCV_QP_MAP_TABLE` that `init_qpmap_table()` or
/// `init_qos()` wrote).
pub fn qp_to_rcd(qpn: u32, qos_shift: u32, map: &[u8; 256]) -> u32 {
    if qpn == 0 {
        return 0;
    }
    let idx = qpn.checked_shr(qos_shift).unwrap_or(0) as u8;
    // A u8 indexes every one of the 256 bytes: `get` cannot miss.
    map.get(usize::from(idx)).copied().map_or(0, u32::from)
}

#[cfg(test)]
mod tests;
