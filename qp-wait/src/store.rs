// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The wait queues as a HAL trait, and the queue logic written once over
//! it.
//!
//! [`WaitStore`] is where a context's two queues live: the sim keeps them
//! in [`WaitQueues`](crate::WaitQueues) (a table indexed by QP slot), the
//! kernel platform in the driver's `rcd->flow_queue` / `rcd->rarr_queue`
//! and each QP's `qpriv->tid_wait` link. The functions here are the
//! driver's queue helpers on top of any store: who is ahead of a QP
//! ([`waiters`], `kernel_tid_waiters()`), joining ([`enqueue`],
//! `queue_qp_for_tid_wait()`), leaving ([`dequeue`],
//! `dequeue_tid_waiter()`), the head to wake ([`first`], `first_qp()`) and
//! leaving for good ([`flush`], the queue part of
//! `hfi1_tid_rdma_flush_wait()`).
//!
//! A QP has one wait link for both queues, as in the driver: leaving
//! unlinks it from whichever queue holds it, and the dequeue is counted on
//! the queue the caller names (see [`dequeue`] and [`flush`]).
//!
//! # Where this departs from the driver
//!
//! Once: [`flush`] wakes the QP that becomes the head of the queue the
//! flushed QP led. The driver's `hfi1_tid_rdma_flush_wait()` wakes nobody,
//! which strands that QP and every QP behind it when the flushed head's
//! pending trigger work was the only wake-up left (see [`flush`]). Test:
//! `tid-flow/tests/regressions.rs` `a_flush_wakes_every_waiter`; the
//! rebuilt `hfi1.ko`'s differential test models exactly this extra
//! wake-up. Everything else here is the driver's behaviour.
//!
//! # Locking
//!
//! A store is the context's `exp_lock`-guarded state: `&S` / `&mut S` are
//! reached only through that guard. The functions that change a QP's
//! flags take `&mut SFlags`, which only that QP's `s_lock` guard lends.

use hfi1_hal::services::QpRef;
use hfi1_hal::sync::atomic::{AtomicU64, Ordering};

use crate::{Membership, QueueKind, SFlags, WaitError, Wakeup};

/// A context's two wait queues, wherever they live.
///
/// # Locking
///
/// The context's `exp_lock`: an implementation is reached only through
/// that lock's guard.
pub trait WaitStore<R: QpRef> {
    /// A new reference to the head of `kind`, if any. Kernel: `first_qp()`.
    fn head(&self, kind: QueueKind) -> Option<R>;

    /// Whether `qp` is the head of `kind`; `None` if `kind` is empty.
    /// Reference-neutral.
    fn head_is(&self, kind: QueueKind, qp: &R::Target) -> Option<bool>;

    /// Where `qp` waits. Kernel: `!list_empty(&priv->tid_wait)`, and the
    /// list that holds it.
    fn membership(&self, qp: &R::Target) -> Membership;

    /// Appends `qp`, which waits on no queue, at the tail of `kind`: the
    /// queue takes a new reference, counts the enqueue, and the count is
    /// the QP's ticket. Kernel: `list_add_tail(&priv->tid_wait, ..)`,
    /// `priv->tid_enqueue = ++queue->enqueue`, `rvt_get_qp()`.
    ///
    /// # Errors
    ///
    /// [`WaitError::BadSlot`] if the store cannot hold `qp` (nothing
    /// changes).
    fn push_tail(&mut self, kind: QueueKind, qp: &R) -> Result<(), WaitError>;

    /// Takes `qp` off whichever queue holds it, without counting; gives
    /// back the queue it was on and the queue's reference. Kernel:
    /// `list_del_init(&priv->tid_wait)` (dropping the reference is the
    /// `rvt_put_qp()`).
    fn unlink(&mut self, qp: &R::Target) -> Option<(QueueKind, R)>;

    /// Counts one dequeue on `kind`. Kernel: `queue->dequeue++`.
    fn count_dequeue(&mut self, kind: QueueKind);

    /// The enqueue count of the queue `qp` last joined, as it was when it
    /// joined (0 if it never did). Kernel: `priv->tid_enqueue` (a `u32`).
    fn enqueue_ticket(&self, qp: &R::Target) -> u32;

    /// The dequeues counted on `kind` so far, modulo 2^32. Kernel:
    /// `queue->dequeue`.
    fn dequeue_count(&self, kind: QueueKind) -> u32;
}

/// Something that counts the device's TID waits. Kernel:
/// `dd->verbs_dev.n_tidwait`.
pub trait WaitCounter {
    /// One more QP started to wait.
    fn count_wait(&self);
}

/// False iff `kind` is empty, or its head is `qp` and `qp` waits
/// (`WAIT_TID_SPACE` set); true otherwise: someone is ahead of `qp`.
/// Reference-neutral. Kernel: `kernel_tid_waiters()`.
///
/// # Locking
///
/// `exp_lock` (the store) and `qp`'s `s_lock` (`flags`).
pub fn waiters<R: QpRef, S: WaitStore<R> + ?Sized>(
    store: &S,
    kind: QueueKind,
    qp: &R::Target,
    flags: &SFlags,
) -> bool {
    match store.head_is(kind, qp) {
        None => false,
        Some(is_head) => !(is_head && flags.waiting()),
    }
}

/// Puts `qp` at the tail of `kind` unless it already waits on a queue:
/// sets `WAIT_TID_SPACE`, counts the enqueue (and a device-wide tid wait)
/// and takes the queue's reference. Idempotent.
/// Kernel: `queue_qp_for_tid_wait()`.
///
/// # Locking
///
/// `exp_lock` (`store`) and `qp`'s `s_lock` (`flags`).
///
/// # Errors
///
/// As [`WaitStore::push_tail`]; nothing changes then.
pub fn enqueue<R: QpRef, S: WaitStore<R> + ?Sized>(
    store: &mut S,
    kind: QueueKind,
    qp: &R,
    flags: &mut SFlags,
    dev: &impl WaitCounter,
) -> Result<(), WaitError> {
    if store.membership(qp) != Membership::Idle {
        return Ok(());
    }
    store.push_tail(kind, qp)?;
    flags.insert(SFlags::WAIT_TID_SPACE);
    dev.count_wait();
    Ok(())
}

/// Takes `qp` off the queue it waits on, if it waits: clears
/// `WAIT_TID_SPACE`, counts a dequeue on `kind` and drops the queue's
/// reference. Returns whether it left. Idempotent.
/// Kernel: `dequeue_tid_waiter()`.
///
/// As in the driver, the one wait link leaves whichever queue holds it,
/// and the dequeue is counted on `kind`. The driver's callers never need
/// the difference: a QP only dequeues from the queue whose resource it
/// just got, and it waits on that queue if it waits at all (a READ
/// requester queued for RcvArray space holds its flow until the request
/// ends; a WRITE responder sets up its flow before its segments).
///
/// # Locking
///
/// `exp_lock` (`store`) and `qp`'s `s_lock` (`flags`).
pub fn dequeue<R: QpRef, S: WaitStore<R> + ?Sized>(
    store: &mut S,
    kind: QueueKind,
    qp: &R::Target,
    flags: &mut SFlags,
) -> bool {
    if store.membership(qp) == Membership::Idle {
        return false;
    }
    match store.unlink(qp) {
        Some((_, r)) => {
            flags.remove(SFlags::WAIT_TID_SPACE);
            store.count_dequeue(kind);
            drop(r);
            true
        }
        None => false,
    }
}

/// How far `qp` is from the head of `kind`: its ticket minus the dequeues
/// counted on `kind`, modulo 2^32; 1 for the head when every QP that
/// joined before it has left. The TID RDMA WRITE responder scales its RNR
/// NAK timer by it. Kernel: `position_in_queue()`.
///
/// As in the driver, the ticket is the QP's last one, whichever queue it
/// joined: a QP already waiting on the RcvArray queue asked for its
/// position on the flow queue gets an unrelated (possibly wrapped) number,
/// which the driver then turns into a long RNR timer. The caller that
/// wants the position on the queue the QP waits on checks its
/// [`WaitStore::membership`] first. Unlike the driver, which reads both
/// counts without `exp_lock`, this reads them under it.
///
/// # Locking
///
/// `exp_lock` (`store`).
pub fn position<R: QpRef, S: WaitStore<R> + ?Sized>(
    store: &S,
    kind: QueueKind,
    qp: &R::Target,
) -> u32 {
    store
        .enqueue_ticket(qp)
        .wrapping_sub(store.dequeue_count(kind))
}

/// The head of `kind`, with a new reference for the caller to wake it once
/// `exp_lock` is released. Kernel: `first_qp()`.
///
/// # Locking
///
/// `exp_lock` (`store`).
pub fn first<R: QpRef, S: WaitStore<R> + ?Sized>(store: &S, kind: QueueKind) -> Wakeup<R> {
    Wakeup(store.head(kind))
}

/// Takes `qp` off whichever queue holds it (QP reset or destroy), counts
/// the dequeue on the flow queue and drops the queue's reference, and
/// returns the wake-up owed to the new head of that queue if `qp` was its
/// head. The queue part of `hfi1_tid_rdma_flush_wait()`; the caller clears
/// `WAIT_TID_SPACE`.
///
/// The count goes on the flow queue whichever queue held the QP, as the
/// driver's first `_tid_rdma_flush_wait()` call (on `rcd->flow_queue`)
/// does; the driver reads the counts only for the RNR timeout estimate of
/// `position_in_queue()`.
///
/// **One step beyond the kernel, kept on purpose:** the new head is woken
/// (SPEC §7, "a flush must wake every waiter"). The driver's flush wakes
/// nobody, and that strands a waiter: when flows (or RcvArray entries)
/// come back, every release hands the wake-up to the head of the queue,
/// and while the head's trigger work is pending the later releases'
/// wake-ups for it are coalesced into that one. If the head is then reset
/// before its trigger work runs, the work finds it no longer waiting and
/// does nothing; the QP behind it is now the head, every resource may be
/// free, and no release will ever come to wake it (nor any QP queued
/// behind it, since a QP that is not the head queues). Test:
/// `tid-flow/tests/regressions.rs` `a_flush_wakes_every_waiter`.
///
/// # Locking
///
/// `exp_lock` (`store`); `qp`'s `s_lock` held by the caller.
pub fn flush<R: QpRef, S: WaitStore<R> + ?Sized>(store: &mut S, qp: &R::Target) -> Wakeup<R> {
    let was_head = [QueueKind::Flow, QueueKind::RcvArray]
        .into_iter()
        .find(|k| store.head_is(*k, qp) == Some(true));
    if let Some((_, r)) = store.unlink(qp) {
        store.count_dequeue(QueueKind::Flow);
        drop(r);
    }
    match was_head {
        Some(k) => first(store, k),
        None => Wakeup::none(),
    }
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
