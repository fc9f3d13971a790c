// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The software platform's wait queues ([`WaitQueues`]): the
//! [`WaitStore`] the sim, the tests and the engine's own objects keep in
//! Rust, indexed by QP slot.
//!
//! # Locking
//!
//! Part of the context's `exp_lock`-guarded state: `&mut WaitQueues` is
//! proof that `exp_lock` is held.

use alloc::vec::Vec;
use core::fmt;

use hfi1_hal::services::QpRef;

use crate::store::{self, WaitStore};
use crate::{DevCounters, Membership, QueueKind, SFlags, Slotted, WaitError, Wakeup};

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

    fn unlink_slot(&mut self, slot: u32) -> Option<(QueueKind, R)> {
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
    pub fn first(&self, kind: QueueKind) -> Wakeup<R>
    where
        R::Target: Slotted,
    {
        store::first(self, kind)
    }
}

impl<R: QpRef> WaitQueues<R>
where
    R::Target: Slotted,
{
    /// [`store::waiters`] on these queues. Kernel: `kernel_tid_waiters()`.
    ///
    /// # Locking
    ///
    /// `exp_lock` (the queues) and `qp`'s `s_lock` (`flags`).
    pub fn waiters(&self, kind: QueueKind, qp: &R::Target, flags: &SFlags) -> bool {
        store::waiters(self, kind, qp, flags)
    }

    /// [`store::enqueue`] on these queues. Kernel:
    /// `queue_qp_for_tid_wait()`.
    ///
    /// # Locking
    ///
    /// `exp_lock` (`&mut self`) and `qp`'s `s_lock` (`flags`).
    ///
    /// # Errors
    ///
    /// [`WaitError::BadSlot`] if `qp`'s slot is outside the table.
    pub fn enqueue(
        &mut self,
        kind: QueueKind,
        qp: &R,
        flags: &mut SFlags,
        dev: &DevCounters,
    ) -> Result<(), WaitError> {
        store::enqueue(self, kind, qp, flags, dev)
    }

    /// [`store::position`] on these queues. Kernel: `position_in_queue()`.
    ///
    /// # Locking
    ///
    /// `exp_lock` (`&self`).
    pub fn position(&self, kind: QueueKind, qp: &R::Target) -> u32 {
        store::position(self, kind, qp)
    }

    /// [`store::dequeue`] on these queues. Kernel: `dequeue_tid_waiter()`.
    ///
    /// # Locking
    ///
    /// `exp_lock` (`&mut self`) and `qp`'s `s_lock` (`flags`).
    pub fn dequeue(&mut self, kind: QueueKind, qp: &R::Target, flags: &mut SFlags) -> bool {
        store::dequeue(self, kind, qp, flags)
    }
}

impl<R: QpRef> WaitStore<R> for WaitQueues<R>
where
    R::Target: Slotted,
{
    fn head(&self, kind: QueueKind) -> Option<R> {
        let head = self.queue(kind).head;
        self.links
            .get(head as usize)
            .and_then(|l| l.qp.as_ref())
            .map(QpRef::get)
    }

    fn head_is(&self, kind: QueueKind, qp: &R::Target) -> Option<bool> {
        let head = self.queue(kind).head;
        (head != NIL).then(|| head == qp.slot())
    }

    fn membership(&self, qp: &R::Target) -> Membership {
        self.membership(qp.slot())
    }

    fn push_tail(&mut self, kind: QueueKind, qp: &R) -> Result<(), WaitError> {
        let slot = qp.slot();
        let tail = self.queue(kind).tail;
        let link = self
            .links
            .get_mut(slot as usize)
            .ok_or(WaitError::BadSlot(slot))?;
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
        Ok(())
    }

    fn unlink(&mut self, qp: &R::Target) -> Option<(QueueKind, R)> {
        self.unlink_slot(qp.slot())
    }

    fn count_dequeue(&mut self, kind: QueueKind) {
        let q = self.queue_mut(kind);
        q.dequeue = q.dequeue.wrapping_add(1);
    }

    fn enqueue_ticket(&self, qp: &R::Target) -> u32 {
        // The driver's counters are `u32`: keep the low half.
        self.ticket(qp.slot()).unwrap_or(0) as u32
    }

    fn dequeue_count(&self, kind: QueueKind) -> u32 {
        self.queue(kind).dequeue as u32
    }
}
