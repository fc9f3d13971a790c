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
//! | [`Wakeup::deliver`], [`Wakeup::schedule`], [`trigger`] | the caller's `s_lock`, `exp_lock` released | nothing |
//! | [`flush_wait`], [`flush_wait_with`] | the QP's `s_lock` (its guard, possibly one made over a lock the driver holds: `Lock::assume_held`) | `exp_lock` |
//! | [`wait_kmem`], [`kmem_wakeup`] | the QP's `s_lock` (its flags) | nothing (the scheduler's own list lock) |
//! | [`trigger_resume`], [`resume_with`] (the work item) | nothing (root token) | the QP's `s_lock`, alone |
//! | [`schedule_wakeup`] | anything but `exp_lock` | nothing |
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

use core::fmt;

use hfi1_hal::lock_order::{ExpLock, Guard, Lock, LockToken, RawSpinLock, SLock, Unlocked};
use hfi1_hal::services::{MemoryWait, QpRef, Scheduler};
use hfi1_hal::sync::atomic::{AtomicU64, Ordering};

mod queues;
pub mod store;

pub use queues::WaitQueues;
pub use store::{WaitCounter, WaitStore};

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

/// A QP's `s_lock`-guarded state: its flags and the platform's extension
/// (split it with a `let SendState { flags, ext } = ..` pattern to lend
/// both at once).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SendState<X> {
    /// Kernel: `qp->s_flags`.
    pub flags: SFlags,
    /// The platform's extension state.
    pub ext: X,
}

impl<X> SendState<X> {
    /// True if the QP waits for TID space.
    pub fn waiting(&self) -> bool {
        self.flags.waiting()
    }
}

/// The guard of a QP's `s_lock`.
pub type SGuard<'a, P> =
    Guard<'a, SLock, <P as WaitPlatform>::Lock, SendState<<P as WaitPlatform>::Ext>>;

/// The part of a QP these crates see. Kernel: `struct rvt_qp` with its
/// `hfi1_qp_priv`.
pub struct Qp<P: WaitPlatform> {
    qpn: u32,
    slot: u32,
    cpu: u32,
    /// Kernel: `qp->s_lock`, with the state it guards.
    pub s_lock: Lock<SLock, P::Lock, SendState<P::Ext>>,
}

impl<P: WaitPlatform> fmt::Debug for Qp<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Qp")
            .field("qpn", &self.qpn)
            .field("slot", &self.slot)
            .finish()
    }
}

impl<P: WaitPlatform> Qp<P> {
    /// A QP numbered `qpn`, using waiter-table slot `slot` of its context
    /// (unique among the context's QPs), whose trigger work runs on `cpu`
    /// (kernel: the CPU of its SDMA engine, or the first CPU of the
    /// device's node), with a fresh `s_lock` around `ext`.
    pub fn new(
        qpn: u32,
        slot: u32,
        cpu: u32,
        s_lock: Lock<SLock, P::Lock, SendState<P::Ext>>,
    ) -> Self {
        Self {
            qpn,
            slot,
            cpu,
            s_lock,
        }
    }

    /// [`Qp::new`] in place, for a state too large to build on a kernel
    /// stack: writes the QP at `p` with `raw` as its `s_lock` and returns
    /// where the state the lock guards goes, for the caller to write.
    ///
    /// # Safety
    ///
    /// `p` is valid for writes of one QP and aligned, and the caller writes
    /// a valid state at the returned pointer before the QP is used, moved
    /// or dropped.
    #[cfg(not(loom))]
    pub unsafe fn init_at(
        p: *mut Self,
        qpn: u32,
        slot: u32,
        cpu: u32,
        raw: P::Lock,
    ) -> *mut SendState<P::Ext> {
        // SAFETY: `p` is valid for writes (the caller's promise), each
        // field written once through its own place; the lock's data is
        // the caller's to write.
        unsafe {
            (&raw mut (*p).qpn).write(qpn);
            (&raw mut (*p).slot).write(slot);
            (&raw mut (*p).cpu).write(cpu);
            Lock::init_at(&raw mut (*p).s_lock, raw)
        }
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The QP's slot in its context's waiter table.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The CPU its trigger work is queued on.
    pub fn cpu(&self) -> u32 {
        self.cpu
    }
}

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

/// Device-wide counters. Kernel: `dd->verbs_dev.n_tidwait`.
#[derive(Debug, Default)]
pub struct DevCounters {
    tid_waits: AtomicU64,
}

impl WaitCounter for DevCounters {
    fn count_wait(&self) {
        self.tid_waits.fetch_add(1, Ordering::Relaxed);
    }
}

impl DevCounters {
    /// Zeroed counters.
    pub fn new() -> Self {
        Self {
            tid_waits: AtomicU64::new(0),
        }
    }

    /// Times any QP of the device started to wait for TID space.
    pub fn tid_waits(&self) -> u64 {
        self.tid_waits.load(Ordering::Relaxed)
    }
}

/// A reference to the head of a queue, taken under `exp_lock`, to be woken
/// after it is released (see the crate doc). Dropping it unused loses the
/// wake-up (the reference itself is still returned).
#[must_use = "a dropped wake-up leaves the queue head asleep"]
pub struct Wakeup<R>(Option<R>);

impl<R> fmt::Debug for Wakeup<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Wakeup(qp)"
        } else {
            "Wakeup(none)"
        })
    }
}

impl<R> Wakeup<R> {
    /// No QP to wake.
    pub fn none() -> Self {
        Self(None)
    }

    /// The QP to wake, if any.
    pub fn qp(&self) -> Option<&R> {
        self.0.as_ref()
    }

    /// True if there is no QP to wake.
    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

/// Something with a waiter-table slot (a QP).
pub trait Slotted {
    /// The waiter-table slot.
    fn slot(&self) -> u32;
}

impl<P: WaitPlatform> Slotted for Qp<P> {
    fn slot(&self) -> u32 {
        self.slot
    }
}

impl<R: QpRef> Wakeup<R>
where
    R::Target: Cpu,
{
    /// Wakes the head after `exp_lock` is gone. If it is the caller's own
    /// QP (`own`, whose `flags` the caller holds under its s_lock),
    /// triggers it directly and drops the reference; otherwise queues its
    /// trigger work. Kernel: the tail of `hfi1_kern_clear_hw_flow()` /
    /// `hfi1_kern_exp_rcv_clear()`.
    ///
    /// # Locking
    ///
    /// The caller's `s_lock` is held (`flags`, `token`). The s_lock token
    /// is taken by `&mut`: an `exp_lock` guard borrows it for its whole
    /// life, so this cannot run under `exp_lock`.
    pub fn deliver(
        self,
        own: &R,
        flags: &SFlags,
        _token: &mut LockToken<'_, SLock>,
        sched: &impl Scheduler<R>,
    ) {
        match self.0 {
            Some(r) if QpRef::same(&r, own) => {
                trigger(own, flags, sched);
                drop(r);
            }
            Some(r) => schedule_wakeup(r, sched),
            None => {}
        }
    }

    /// Queues the head's trigger work (the setup paths, where the head is
    /// never the caller: the caller has just left the queue).
    /// Kernel: `tid_rdma_schedule_tid_wakeup()` after `first_qp()`.
    ///
    /// # Locking
    ///
    /// Takes the caller's s_lock token by `&mut` as proof that `exp_lock`
    /// is no longer held.
    pub fn schedule(self, _not_under_exp: &mut LockToken<'_, SLock>, sched: &impl Scheduler<R>) {
        if let Some(r) = self.0 {
            schedule_wakeup(r, sched);
        }
    }
}

/// Schedules `qp`'s send engine if it waits for TID space.
/// Kernel: `__trigger_tid_waiter()`.
///
/// # Locking
///
/// `qp`'s `s_lock` (`flags`).
pub fn trigger<R>(qp: &R, flags: &SFlags, sched: &impl Scheduler<R>) {
    if flags.waiting() {
        sched.schedule_send(qp);
    }
}

/// Queues `qp`'s trigger work on its CPU, giving it the reference; if that
/// work was already pending, drops the reference at once.
/// Kernel: `tid_rdma_schedule_tid_wakeup()`.
///
/// # Locking
///
/// None needed; must not be called under `exp_lock` (it is only reached
/// through [`Wakeup`], which enforces that).
pub fn schedule_wakeup<R>(qp: R, sched: &impl Scheduler<R>)
where
    R: QpRef,
    R::Target: Cpu,
{
    let cpu = qp.cpu();
    if let Err(back) = sched.queue_trigger(cpu, qp) {
        drop(back);
    }
}

/// Something whose deferred work has a home CPU (a QP).
pub trait Cpu {
    /// The CPU.
    fn cpu(&self) -> u32;
}

impl<P: WaitPlatform> Cpu for Qp<P> {
    fn cpu(&self) -> u32 {
        self.cpu
    }
}

/// The trigger work item: takes `qp`'s `s_lock`; if the QP still waits,
/// releases it and runs the send engine; else just releases it; then drops
/// the work item's reference. Returns whether the engine ran.
/// Kernel: `tid_rdma_trigger_resume()`.
///
/// # Locking
///
/// Runs with no lock held (`root`); takes the QP's `s_lock` alone. The send
/// engine gets the root token back and takes what it needs.
pub fn trigger_resume<P: WaitPlatform>(
    qp: P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    send_engine: impl FnOnce(&P::Ref, &mut LockToken<'_, Unlocked>),
) -> bool {
    let ran = resume_with(&qp, &qp.s_lock, root, send_engine);
    drop(qp);
    ran
}

/// The body of [`trigger_resume`] for a QP whose `s_lock` is `s_lock`
/// (guarding state that holds its flags), wherever the lock and the
/// flags live; the caller drops the work item's reference afterwards.
///
/// # Locking
///
/// Runs with no lock held (`root`); takes `s_lock` alone.
pub fn resume_with<R, L: RawSpinLock, T: AsRef<SFlags>>(
    qp: &R,
    s_lock: &Lock<SLock, L, T>,
    root: &mut LockToken<'_, Unlocked>,
    send_engine: impl FnOnce(&R, &mut LockToken<'_, Unlocked>),
) -> bool {
    let waiting = {
        let s = s_lock.lock(root);
        (*s).as_ref().waiting()
    };
    if waiting {
        send_engine(qp, root);
    }
    waiting
}

impl<X> AsRef<SFlags> for SendState<X> {
    fn as_ref(&self) -> &SFlags {
        &self.flags
    }
}

/// Unwinds any TID wait of `qp` (QP reset or destroy): clears
/// `WAIT_TID_SPACE` and takes it off whichever queue holds it, dropping
/// that reference. Kernel: `hfi1_tid_rdma_flush_wait()`.
///
/// The queue part is [`store::flush`], which says where it goes beyond
/// the kernel (the new head is woken).
///
/// # Locking
///
/// `qp`'s `s_lock` held (`s`); takes `exp_lock` (`exp`) inside it.
pub fn flush_wait<P, S>(
    qp: &P::Ref,
    s: &mut SGuard<'_, P>,
    exp: &Lock<ExpLock, P::Lock, S>,
    sched: &P::Sched,
) where
    P: WaitPlatform,
    S: AsMut<WaitQueues<P::Ref>>,
{
    let (state, token) = s.parts();
    flush_wait_with(qp, &mut state.flags, token, exp, |e| e.as_mut(), sched);
}

/// [`flush_wait`] for any QP and any store: `flags` and `token` are
/// borrowed from the QP's `s_lock` guard, `exp` is its context's
/// `exp_lock`, `store` finds the wait queues in the state it guards.
///
/// # Locking
///
/// `qp`'s `s_lock` held (`flags`, `token`); takes `exp_lock` inside it.
pub fn flush_wait_with<R, L, T, S>(
    qp: &R,
    flags: &mut SFlags,
    token: &mut LockToken<'_, SLock>,
    exp: &Lock<ExpLock, L, T>,
    store: impl FnOnce(&mut T) -> &mut S,
    sched: &impl Scheduler<R>,
) where
    R: QpRef,
    R::Target: Cpu,
    L: RawSpinLock,
    S: WaitStore<R> + ?Sized,
{
    flags.remove(SFlags::WAIT_TID_SPACE);
    let wake = {
        let mut e = exp.lock(token);
        store::flush(store(&mut e), &**qp)
    };
    wake.schedule(token, sched);
}

/// Makes `qp` wait for memory after a failed DMA mapping: the scheduler's
/// memory-wait list takes it (setting `RVT_S_WAIT_KMEM` in its flags)
/// unless it already waits there. Kernel: `hfi1_wait_kmem()`.
///
/// # Locking
///
/// `qp`'s `s_lock` held (`flags`).
pub fn wait_kmem<R>(qp: &R, flags: &mut SFlags, sched: &impl MemoryWait<R>) {
    sched.wait_kmem(qp, flags);
}

/// Wakes a QP the memory-wait timer took off the list: if it still waits
/// for memory, clears `RVT_S_WAIT_KMEM` and schedules its send engine.
/// Kernel: `hfi1_qp_wakeup(qp, RVT_S_WAIT_KMEM)` from `mem_timer()`.
///
/// # Locking
///
/// `qp`'s `s_lock` held (`flags`).
pub fn kmem_wakeup<R>(qp: &R, flags: &mut SFlags, sched: &impl Scheduler<R>) {
    if flags.waiting_kmem() {
        flags.remove(SFlags::WAIT_KMEM);
        sched.schedule_send(qp);
    }
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
