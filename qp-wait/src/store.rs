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
//! # Locking
//!
//! A store is the context's `exp_lock`-guarded state: `&S` / `&mut S` are
//! reached only through that guard. The functions that change a QP's
//! flags take `&mut SFlags`, which only that QP's `s_lock` guard lends.

use hfi1_hal::services::QpRef;

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

    /// Takes `qp` off the queue it waits on and counts a dequeue there;
    /// gives back that queue and the queue's reference. Kernel:
    /// `list_del_init(&priv->tid_wait)`, `queue->dequeue++` (dropping the
    /// reference is the `rvt_put_qp()`).
    fn unlink(&mut self, qp: &R::Target) -> Option<(QueueKind, R)>;
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
    flags.set_waiting(true);
    dev.count_wait();
    Ok(())
}

/// Takes `qp` off `kind` if it waits there: clears `WAIT_TID_SPACE`,
/// counts a dequeue and drops the queue's reference. Returns whether it
/// left. Idempotent. Kernel: `dequeue_tid_waiter()`.
///
/// The kernel unlinks the QP from whichever list holds it (one link serves
/// both queues) and counts the dequeue on `kind`. Here a QP waiting on the
/// *other* queue stays there: otherwise a QP queued for RcvArray space
/// that had to get a new flow (its flow released while it waited) would
/// silently leave the RcvArray queue, and the QP behind it would become
/// the head without a wake-up (found by the READ engine's simulator: two
/// QPs stuck). Leaving any queue is [`flush`]'s job.
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
    if store.membership(qp) != Membership::Queued(kind) {
        return false;
    }
    match store.unlink(qp) {
        Some((_, r)) => {
            flags.set_waiting(false);
            drop(r);
            true
        }
        None => false,
    }
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

/// Takes `qp` off whichever queue holds it (QP reset or destroy),
/// dropping the queue's reference, and returns the wake-up owed to the
/// new head of that queue if `qp` was its head. The queue part of
/// `hfi1_tid_rdma_flush_wait()`; the caller clears `WAIT_TID_SPACE`.
///
/// Two steps beyond the kernel, kept on purpose:
/// - the new head is woken (SPEC §7, "a flush must wake every waiter"):
///   the old head may already have been given the wake-up a release owed
///   to the queue; leaving without using it would strand the QP behind it
///   until the next release;
/// - the dequeue is counted on the queue the QP was on (the kernel's first
///   `_tid_rdma_flush_wait()` call counts it on the flow queue whichever
///   list held the QP), so each queue's enqueue and dequeue counts stay
///   balanced (the scenario tests check it after every run; the driver's
///   `position_in_queue()` reads them).
///
/// # Locking
///
/// `exp_lock` (`store`); `qp`'s `s_lock` held by the caller.
pub fn flush<R: QpRef, S: WaitStore<R> + ?Sized>(store: &mut S, qp: &R::Target) -> Wakeup<R> {
    let was_head = [QueueKind::Flow, QueueKind::RcvArray]
        .into_iter()
        .find(|k| store.head_is(*k, qp) == Some(true));
    if let Some((_, r)) = store.unlink(qp) {
        drop(r);
    }
    match was_head {
        Some(k) => first(store, k),
        None => Wakeup::none(),
    }
}
