// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Waking a QP that waits for TID space or memory: the wake-up taken
//! under `exp_lock` and delivered after it ([`Wakeup`]), the trigger work
//! item, and the unwinding of a QP's wait at reset.

use core::fmt;

use hfi1_hal::lock_order::{ExpLock, Lock, LockBefore, LockToken, RawSpinLock, SLock, Unlocked};
use hfi1_hal::services::{MemoryWait, QpRef, Scheduler};

use crate::store::{self, WaitStore};
use crate::{SFlags, SGuard, WaitPlatform, WaitQueues};

/// A reference to the head of a queue, taken under `exp_lock`, to be woken
/// after it is released (see the crate doc). Dropping it unused loses the
/// wake-up (the reference itself is still returned).
#[must_use = "a dropped wake-up leaves the queue head asleep"]
pub struct Wakeup<R>(pub(crate) Option<R>);

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
        token: &mut LockToken<'_, SLock>,
        sched: &impl Scheduler<R>,
    ) {
        match self.0 {
            Some(r) if QpRef::same(&r, own) => {
                trigger(own, flags, sched);
                drop(r);
            }
            Some(r) => schedule_wakeup(r, token, sched),
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
    pub fn schedule(self, not_under_exp: &mut LockToken<'_, SLock>, sched: &impl Scheduler<R>) {
        if let Some(r) = self.0 {
            schedule_wakeup(r, not_under_exp, sched);
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
/// No lock needed, but not under `exp_lock`: the caller lends a token of
/// a level before it (`_not_under_exp`) by `&mut`, which an `exp_lock`
/// guard taken from that token keeps borrowed for its whole life:
///
/// ```compile_fail,E0499
/// # use hfi1_hal::lock_order::{ExpLock, Lock, LockToken};
/// # use hfi1_hal::services::QpRef;
/// # use hfi1_hal::sim::{SimRef, SimScheduler};
/// # use hfi1_hal::sync::SpinLock;
/// # use qp_wait::{Qp, QueueKind, SendState, WaitPlatform, WaitQueues, schedule_wakeup};
/// # enum T {}
/// # impl WaitPlatform for T {
/// #     type Lock = SpinLock;
/// #     type Ext = ();
/// #     type Ref = SimRef<Qp<T>>;
/// #     type Sched = SimScheduler<SimRef<Qp<T>>>;
/// # }
/// # let qp: SimRef<Qp<T>> = SimRef::new(Qp::new(1, 0, 0, Lock::new(SendState::default())));
/// # let exp: Lock<ExpLock, SpinLock, WaitQueues<SimRef<Qp<T>>>> =
/// #     Lock::new(WaitQueues::new(1).unwrap());
/// # let sched = SimScheduler::new();
/// let mut root = LockToken::root();
/// let mut s = qp.s_lock.lock(&mut root);
/// let e = exp.lock(s.token());
/// schedule_wakeup(QpRef::get(&qp), s.token(), &sched); // the token is lent to `e`
/// drop(e);
/// ```
///
/// and compiles with any token not lent to one (here the root's):
///
/// ```
/// # use hfi1_hal::lock_order::{Lock, LockToken};
/// # use hfi1_hal::services::QpRef;
/// # use hfi1_hal::sim::{SimRef, SimScheduler};
/// # use hfi1_hal::sync::SpinLock;
/// # use qp_wait::{Qp, SendState, WaitPlatform, schedule_wakeup};
/// # enum T {}
/// # impl WaitPlatform for T {
/// #     type Lock = SpinLock;
/// #     type Ext = ();
/// #     type Ref = SimRef<Qp<T>>;
/// #     type Sched = SimScheduler<SimRef<Qp<T>>>;
/// # }
/// # let qp: SimRef<Qp<T>> = SimRef::new(Qp::new(1, 0, 3, Lock::new(SendState::default())));
/// # let sched = SimScheduler::new();
/// schedule_wakeup(QpRef::get(&qp), &mut LockToken::root(), &sched);
/// assert_eq!(sched.pop_work().map(|(cpu, _)| cpu), Some(3));
/// ```
pub fn schedule_wakeup<R, L>(
    qp: R,
    _not_under_exp: &mut LockToken<'_, L>,
    sched: &impl Scheduler<R>,
) where
    R: QpRef,
    R::Target: Cpu,
    L: LockBefore<ExpLock>,
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
