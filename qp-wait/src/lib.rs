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
//! | [`WaitQueues::first`], [`WaitQueues::waiters`], [`WaitQueues::enqueue`], [`WaitQueues::dequeue`] | `exp_lock` (and the QP's `s_lock` for its flags) | nothing |
//! | [`Wakeup::deliver`], [`Wakeup::schedule`], [`trigger`] | the caller's `s_lock`, `exp_lock` released | nothing |
//! | [`flush_wait`] | the QP's `s_lock` (its guard, possibly one made over a lock the driver holds: `Lock::assume_held`) | `exp_lock` |
//! | [`trigger_resume`] (the work item) | nothing (root token) | the QP's `s_lock`, alone |
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

use alloc::vec::Vec;
use core::fmt;

use hfi1_hal::consts::S_WAIT_TID_SPACE;
use hfi1_hal::lock_order::{ExpLock, Guard, Lock, LockToken, RawSpinLock, SLock, Unlocked};
use hfi1_hal::services::{QpRef, Scheduler};
use hfi1_hal::sync::atomic::{AtomicU64, Ordering};

/// Errors of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The QP's slot is outside the context's waiter table.
    #[error("QP slot {0} is outside the waiter table")]
    BadSlot(u32),
    /// The waiter table could not be allocated (ENOMEM).
    #[error("out of memory for the waiter table")]
    NoMemory,
    /// The device has fewer than two kernel receive contexts.
    #[error("no kernel receive context to map QPs to")]
    NoContexts,
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

/// A QP's send flags. Kernel: `qp->s_flags` (only `WAIT_TID_SPACE` is used
/// here).
///
/// # Locking
///
/// The QP's `s_lock`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SFlags(pub u32);

impl SFlags {
    /// True if the QP waits for TID space (`HFI1_S_WAIT_TID_SPACE`).
    pub fn waiting(&self) -> bool {
        self.0 & S_WAIT_TID_SPACE != 0
    }

    fn set_waiting(&mut self, on: bool) {
        if on {
            self.0 |= S_WAIT_TID_SPACE;
        } else {
            self.0 &= !S_WAIT_TID_SPACE;
        }
    }
}

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

const NIL: u32 = u32::MAX;

struct Link<R> {
    state: Membership,
    prev: u32,
    next: u32,
    /// The queue's reference to the QP while it is queued.
    qp: Option<R>,
    /// The queue's enqueue count when this QP joined. Kernel:
    /// `priv->tid_enqueue`.
    ticket: u64,
}

#[derive(Debug, Clone, Copy)]
struct Queue {
    head: u32,
    tail: u32,
    len: u32,
    enqueue: u64,
    dequeue: u64,
}

impl Queue {
    const EMPTY: Self = Self {
        head: NIL,
        tail: NIL,
        len: 0,
        enqueue: 0,
        dequeue: 0,
    };
}

/// A context's two wait queues: an intrusive doubly linked list over a
/// table of per-QP links, indexed by the QP's slot, so joining and leaving
/// are O(1) and need no allocation after the table is made.
/// Kernel: `rcd->flow_queue`, `rcd->rarr_queue` and each QP's
/// `priv->tid_wait` list head.
///
/// # Locking
///
/// Lives in the context's `exp_lock`-guarded state: `&mut WaitQueues` is
/// proof that `exp_lock` is held.
pub struct WaitQueues<R> {
    links: Vec<Link<R>>,
    flow: Queue,
    rarr: Queue,
}

impl<R> fmt::Debug for WaitQueues<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitQueues")
            .field("slots", &self.links.len())
            .field("flow", &self.flow)
            .field("rarr", &self.rarr)
            .finish()
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

impl<R> WaitQueues<R> {
    /// Empty queues with room for `slots` QPs (slots `0..slots`).
    /// Allocates the table fallibly, once, at context init (no infallible
    /// allocation path is compiled in).
    ///
    /// # Errors
    ///
    /// [`WaitError::NoMemory`] if the table cannot be allocated.
    pub fn new(slots: u32) -> Result<Self, WaitError> {
        let mut links = Vec::new();
        hfi1_hal::services::try_fill_vec_with(&mut links, slots as usize, || Link {
            state: Membership::Idle,
            prev: NIL,
            next: NIL,
            qp: None,
            ticket: 0,
        })
        .map_err(|_| WaitError::NoMemory)?;
        Ok(Self {
            links,
            flow: Queue::EMPTY,
            rarr: Queue::EMPTY,
        })
    }

    /// The number of slots.
    pub fn slots(&self) -> u32 {
        self.links.len() as u32
    }

    fn queue(&self, kind: QueueKind) -> &Queue {
        match kind {
            QueueKind::Flow => &self.flow,
            QueueKind::RcvArray => &self.rarr,
        }
    }

    fn queue_mut(&mut self, kind: QueueKind) -> &mut Queue {
        match kind {
            QueueKind::Flow => &mut self.flow,
            QueueKind::RcvArray => &mut self.rarr,
        }
    }

    /// QPs waiting on `kind` now.
    pub fn len(&self, kind: QueueKind) -> usize {
        self.queue(kind).len as usize
    }

    /// True if both queues are empty.
    pub fn is_empty(&self) -> bool {
        self.flow.len == 0 && self.rarr.len == 0
    }

    /// QPs that ever joined `kind`. Kernel: `queue->enqueue`.
    pub fn enqueued(&self, kind: QueueKind) -> u64 {
        self.queue(kind).enqueue
    }

    /// QPs that ever left `kind`. Kernel: `queue->dequeue`.
    pub fn dequeued(&self, kind: QueueKind) -> u64 {
        self.queue(kind).dequeue
    }

    /// Where the QP in `slot` waits (`Idle` for a slot out of range).
    pub fn membership(&self, slot: u32) -> Membership {
        self.links
            .get(slot as usize)
            .map_or(Membership::Idle, |l| l.state)
    }

    /// The enqueue count of `kind` when the QP in `slot` joined it.
    /// Kernel: `priv->tid_enqueue`.
    pub fn ticket(&self, slot: u32) -> Option<u64> {
        self.links.get(slot as usize).map(|l| l.ticket)
    }

    /// The slots waiting on `kind`, head first.
    pub fn iter(&self, kind: QueueKind) -> impl Iterator<Item = u32> + '_ {
        let mut at = self.queue(kind).head;
        core::iter::from_fn(move || {
            if at == NIL {
                return None;
            }
            let here = at;
            at = self.links.get(at as usize).map_or(NIL, |l| l.next);
            Some(here)
        })
    }

    fn unlink(&mut self, slot: u32) -> Option<(QueueKind, R)> {
        let link = self.links.get_mut(slot as usize)?;
        let Membership::Queued(kind) = link.state else {
            return None;
        };
        let (prev, next) = (link.prev, link.next);
        link.state = Membership::Idle;
        link.prev = NIL;
        link.next = NIL;
        let qp = link.qp.take();
        if let Some(p) = self.links.get_mut(prev as usize) {
            p.next = next;
        }
        if let Some(n) = self.links.get_mut(next as usize) {
            n.prev = prev;
        }
        let q = self.queue_mut(kind);
        if q.head == slot {
            q.head = next;
        }
        if q.tail == slot {
            q.tail = prev;
        }
        q.len = q.len.wrapping_sub(1);
        q.dequeue = q.dequeue.wrapping_add(1);
        qp.map(|r| (kind, r))
    }
}

impl<R: QpRef> WaitQueues<R> {
    /// The head of `kind`, with a new reference for the caller to wake it
    /// once `exp_lock` is released. Kernel: `first_qp()`.
    ///
    /// # Locking
    ///
    /// `exp_lock` (proved by `&self` reached through its guard).
    pub fn first(&self, kind: QueueKind) -> Wakeup<R> {
        let head = self.queue(kind).head;
        Wakeup(
            self.links
                .get(head as usize)
                .and_then(|l| l.qp.as_ref())
                .map(QpRef::get),
        )
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

impl<R: QpRef> WaitQueues<R>
where
    R::Target: Slotted,
{
    /// False iff `kind` is empty, or its head is `qp` and `qp` waits
    /// (`WAIT_TID_SPACE` set); true otherwise: someone is ahead of `qp`.
    /// Reference-neutral. Kernel: `kernel_tid_waiters()`.
    ///
    /// # Locking
    ///
    /// `exp_lock` (the queues) and `qp`'s `s_lock` (`flags`).
    pub fn waiters(&self, kind: QueueKind, qp: &R::Target, flags: &SFlags) -> bool {
        let head = self.queue(kind).head;
        if head == NIL {
            return false;
        }
        !(head == qp.slot() && flags.waiting())
    }

    /// Puts `qp` at the tail of `kind` unless it already waits on a queue:
    /// sets `WAIT_TID_SPACE`, counts the enqueue (and a device-wide tid
    /// wait) and takes the queue's reference. Idempotent.
    /// Kernel: `queue_qp_for_tid_wait()`.
    ///
    /// # Locking
    ///
    /// `exp_lock` (`&mut self`) and `qp`'s `s_lock` (`flags`).
    pub fn enqueue(
        &mut self,
        kind: QueueKind,
        qp: &R,
        flags: &mut SFlags,
        dev: &DevCounters,
    ) -> Result<(), WaitError> {
        let slot = qp.slot();
        let tail = self.queue(kind).tail;
        let link = self
            .links
            .get_mut(slot as usize)
            .ok_or(WaitError::BadSlot(slot))?;
        if link.state != Membership::Idle {
            return Ok(());
        }
        flags.set_waiting(true);
        link.state = Membership::Queued(kind);
        link.prev = tail;
        link.next = NIL;
        link.qp = Some(QpRef::get(qp));
        if let Some(t) = self.links.get_mut(tail as usize) {
            t.next = slot;
        }
        let q = self.queue_mut(kind);
        if q.head == NIL {
            q.head = slot;
        }
        q.tail = slot;
        q.len = q.len.wrapping_add(1);
        q.enqueue = q.enqueue.wrapping_add(1);
        let ticket = q.enqueue;
        if let Some(l) = self.links.get_mut(slot as usize) {
            l.ticket = ticket;
        }
        dev.tid_waits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Takes `qp` off `kind` if it waits there: clears `WAIT_TID_SPACE`,
    /// counts a dequeue and drops the queue's reference. Returns whether
    /// it left. Idempotent. Kernel: `dequeue_tid_waiter()`.
    ///
    /// The kernel unlinks the QP from whichever list holds it (one link
    /// serves both queues) and counts the dequeue on `kind`. Here a QP
    /// waiting on the *other* queue stays there: otherwise a QP queued for
    /// RcvArray space that had to get a new flow (its flow released while
    /// it waited) would silently leave the RcvArray queue, and the QP
    /// behind it would become the head without a wake-up (found by the
    /// READ engine's simulator: two QPs stuck). Leaving any queue is
    /// [`flush_wait`]'s job.
    ///
    /// # Locking
    ///
    /// `exp_lock` (`&mut self`) and `qp`'s `s_lock` (`flags`).
    pub fn dequeue(&mut self, kind: QueueKind, qp: &R::Target, flags: &mut SFlags) -> bool {
        let slot = qp.slot();
        if self.membership(slot) != Membership::Queued(kind) {
            return false;
        }
        match self.unlink(slot) {
            Some((_, r)) => {
                flags.set_waiting(false);
                drop(r);
                true
            }
            None => false,
        }
    }
}

impl<R: QpRef> Wakeup<R>
where
    R::Target: Slotted + Cpu,
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
    R::Target: Slotted + Cpu,
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
    let waiting = {
        let s = qp.s_lock.lock(root);
        s.waiting()
    };
    if waiting {
        send_engine(&qp, root);
    }
    drop(qp);
    waiting
}

/// Unwinds any TID wait of `qp` (QP reset or destroy): clears
/// `WAIT_TID_SPACE` and takes it off whichever queue holds it, dropping
/// that reference. Kernel: `hfi1_tid_rdma_flush_wait()`.
///
/// One step beyond the kernel (SPEC §7, "a flush must wake every
/// waiter"): if `qp` was the head of its queue, the new head is woken.
/// The old head may already have been given the wake-up that a release
/// owed to the queue; if it leaves without using it, nobody else would
/// wake the QP behind it until the next release.
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
    state.flags.set_waiting(false);
    let wake = {
        let mut e = exp.lock(token);
        let queues = e.as_mut();
        let slot = qp.slot();
        let was_head = [QueueKind::Flow, QueueKind::RcvArray]
            .into_iter()
            .find(|k| queues.queue(*k).head == slot);
        if let Some((_, r)) = queues.unlink(slot) {
            drop(r);
        }
        match was_head {
            Some(k) => queues.first(k),
            None => Wakeup::none(),
        }
    };
    wake.schedule(token, sched);
}

/// The receive context a QP uses: QP 0 uses context 0; every other QP
/// maps `qpn >> qos_shift` onto the kernel contexts 1 ..
/// `n_krcv_queues - 1`. Kernel: `qp_to_rcd()`.
pub fn qp_to_rcd(qpn: u32, qos_shift: u32, n_krcv_queues: u32) -> Result<u32, WaitError> {
    if qpn == 0 {
        return Ok(0);
    }
    let n = n_krcv_queues
        .checked_sub(1)
        .filter(|n| *n > 0)
        .ok_or(WaitError::NoContexts)?;
    let shifted = qpn.checked_shr(qos_shift).unwrap_or(0);
    Ok(shifted % n + 1)
}

#[cfg(test)]
mod tests;
