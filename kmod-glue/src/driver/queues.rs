// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A receive context's two wait queues where the driver keeps them: the
//! `struct tid_queue`s `rcd->flow_queue` and `rcd->rarr_queue`, linked
//! through each QP's `qpriv->tid_wait`, counted in `queue->enqueue` /
//! `queue->dequeue` and `qpriv->tid_enqueue`, each queued QP holding a
//! reference (`rvt_get_qp()`). [`DrvQueues`] is a `qp_wait::WaitStore`
//! over them, so the engine's queue logic (`qp_wait::store`) runs on the
//! driver's own lists, which the rest of the driver reads.
//!
//! # Locking
//!
//! The context's `exp_lock`, held for the life of a [`DrvQueues`] (its
//! constructor's contract).

use core::marker::PhantomData;
use core::ptr::NonNull;

use hfi1_hal::layout::{CListHead, CTidQueue};
use hfi1_hal::services::QpRef;
use qp_wait::{Membership, QueueKind, WaitError, WaitStore};

use super::list;

/// A list longer than this is not a wait queue (every QP of a context on
/// one queue is a few thousand at most).
const LIST_LIMIT: usize = 1 << 20;

/// A QP of the driver as its wait queues see it.
///
/// # Safety
///
/// For a live QP, [`DrvWaiter::tid_wait`] and [`DrvWaiter::tid_enqueue`]
/// point to its `qpriv->tid_wait` and `qpriv->tid_enqueue`, valid while
/// the QP lives; [`DrvWaiter::get_waiter`] and [`DrvWaiter::adopt_waiter`]
/// turn such a `tid_wait` pointer back into a reference to its QP.
pub unsafe trait DrvWaiter {
    /// A counted reference to such a QP. Kernel: `struct rvt_qp *` with a
    /// reference held.
    type Ref: QpRef<Target = Self>;
    /// What turning a link back into a QP needs (the driver's services).
    type Ctx;

    /// Its `qpriv->tid_wait`.
    fn tid_wait(&self) -> *mut CListHead;

    /// Its `qpriv->tid_enqueue`.
    fn tid_enqueue(&self) -> *mut u32;

    /// A new reference to the QP whose `tid_wait` is `link`. Kernel:
    /// `rvt_get_qp(priv->owner)` after `list_first_entry()`.
    ///
    /// # Safety
    ///
    /// `link` is the `tid_wait` of a live QP of this type.
    unsafe fn get_waiter(ctx: &Self::Ctx, link: *mut CListHead) -> Self::Ref;

    /// The reference a queue holds to the QP whose `tid_wait` is `link`,
    /// handed back as the QP leaves the queue.
    ///
    /// # Safety
    ///
    /// `link` is the `tid_wait` of a QP of this type on a queue, which
    /// holds a reference to it; the caller owns that reference from now on.
    unsafe fn adopt_waiter(ctx: &Self::Ctx, link: *mut CListHead) -> Self::Ref;
}

/// A context's two wait queues in the driver's structures.
///
/// # Invariants
///
/// `flow` and `rarr` point to the context's initialised `tid_queue`s,
/// whose `exp_lock` is held while this value lives; every link on them is
/// the `tid_wait` of a `Q` and holds a reference to it.
pub struct DrvQueues<Q: DrvWaiter> {
    flow: NonNull<CTidQueue>,
    rarr: NonNull<CTidQueue>,
    ctx: Q::Ctx,
    _qp: PhantomData<fn() -> Q>,
}

impl<Q: DrvWaiter> core::fmt::Debug for DrvQueues<Q> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DrvQueues")
    }
}

impl<Q: DrvWaiter> DrvQueues<Q> {
    /// The queues at `flow` (`&rcd->flow_queue`) and `rarr`
    /// (`&rcd->rarr_queue`).
    ///
    /// # Safety
    ///
    /// Both point to initialised `struct tid_queue`s of one context, whose
    /// `exp_lock` the caller holds for the life of the value, and every QP
    /// on them is a `Q` holding a queue reference.
    pub unsafe fn new(flow: NonNull<CTidQueue>, rarr: NonNull<CTidQueue>, ctx: Q::Ctx) -> Self {
        // INVARIANT: by the caller.
        Self {
            flow,
            rarr,
            ctx,
            _qp: PhantomData,
        }
    }

    fn queue(&self, kind: QueueKind) -> *mut CTidQueue {
        match kind {
            QueueKind::Flow => self.flow.as_ptr(),
            QueueKind::RcvArray => self.rarr.as_ptr(),
        }
    }

    fn head_of(&self, kind: QueueKind) -> *mut CListHead {
        // SAFETY: the queue is live (type invariant); only its address is
        // taken.
        unsafe { &raw mut (*self.queue(kind)).queue_head }
    }

    /// The queue holding `link`, if any.
    fn kind_of(&self, link: *const CListHead) -> Option<QueueKind> {
        let heads = [
            self.head_of(QueueKind::Flow).cast_const(),
            self.head_of(QueueKind::RcvArray).cast_const(),
        ];
        // SAFETY: `link` is a live QP's `tid_wait`, on one of these lists
        // or empty; the lists are well formed and locked (type invariant).
        match unsafe { list::which_head(link, &heads, LIST_LIMIT) } {
            Some(0) => Some(QueueKind::Flow),
            Some(_) => Some(QueueKind::RcvArray),
            None => None,
        }
    }

    /// `queue->enqueue` / `queue->dequeue` of `kind`.
    pub fn counts(&self, kind: QueueKind) -> (u32, u32) {
        // SAFETY: the queue is live and locked (type invariant).
        let q = unsafe { &*self.queue(kind) };
        (q.enqueue, q.dequeue)
    }
}

impl<Q: DrvWaiter> WaitStore<Q::Ref> for DrvQueues<Q> {
    fn head(&self, kind: QueueKind) -> Option<Q::Ref> {
        // SAFETY: the queue is live and locked (type invariant).
        let first = unsafe { list::first(self.head_of(kind)) }?;
        // SAFETY: every link on the queue is a live `Q`'s `tid_wait`.
        Some(unsafe { Q::get_waiter(&self.ctx, first) })
    }

    fn head_is(&self, kind: QueueKind, qp: &Q) -> Option<bool> {
        // SAFETY: the queue is live and locked (type invariant).
        let first = unsafe { list::first(self.head_of(kind)) }?;
        Some(core::ptr::eq(first, qp.tid_wait()))
    }

    fn membership(&self, qp: &Q) -> Membership {
        let link = qp.tid_wait();
        // SAFETY: a live QP's `tid_wait`, locked with the queues.
        if unsafe { list::is_empty(link) } {
            return Membership::Idle;
        }
        self.kind_of(link)
            .map_or(Membership::Idle, Membership::Queued)
    }

    fn push_tail(&mut self, kind: QueueKind, qp: &Q::Ref) -> Result<(), WaitError> {
        let q = self.queue(kind);
        // The queue's reference: given back by `adopt_waiter` on unlink.
        core::mem::forget(QpRef::get(qp));
        // SAFETY: the queue is live and locked, `tid_wait` is idle (the
        // caller checked its membership) and both are well formed; the
        // QP's `tid_enqueue` is live.
        unsafe {
            list::add_tail(qp.tid_wait(), &raw mut (*q).queue_head);
            (*q).enqueue = (*q).enqueue.wrapping_add(1);
            *qp.tid_enqueue() = (*q).enqueue;
        }
        Ok(())
    }

    fn unlink(&mut self, qp: &Q) -> Option<(QueueKind, Q::Ref)> {
        let link = qp.tid_wait();
        // SAFETY: a live QP's `tid_wait`, locked with the queues.
        if unsafe { list::is_empty(link) } {
            return None;
        }
        let kind = self.kind_of(link)?;
        // SAFETY: `link` is on one of the locked queues, which holds a
        // reference to the QP; unlinking hands that reference to us.
        unsafe {
            list::del_init(link);
            Some((kind, Q::adopt_waiter(&self.ctx, link)))
        }
    }

    fn count_dequeue(&mut self, kind: QueueKind) {
        let q = self.queue(kind);
        // SAFETY: the queue is live and locked (type invariant).
        unsafe { (*q).dequeue = (*q).dequeue.wrapping_add(1) };
    }

    fn enqueue_ticket(&self, qp: &Q) -> u32 {
        // SAFETY: a live QP's `tid_enqueue`, locked with the queues.
        unsafe { *qp.tid_enqueue() }
    }

    fn dequeue_count(&self, kind: QueueKind) -> u32 {
        self.counts(kind).1
    }
}

#[cfg(test)]
mod tests {
    //! The driver's lists against the sim's table: the same operations
    //! through `qp_wait::store` on both must leave the same queues, counts,
    //! flags, wake-ups and references.

    use std::boxed::Box;
    use std::cell::Cell;
    use std::vec::Vec;

    use hfi1_hal::services::RandomSource;
    use hfi1_hal::sim::SimRandom;
    use qp_wait::store::{self, WaitCounter};
    use qp_wait::{SFlags, Slotted, WaitQueues};

    use super::*;

    /// A QP's private part as the driver lays out the two fields the
    /// queues use.
    #[repr(C)]
    struct TQp {
        slot: u32,
        refs: Cell<u32>,
        tid_wait: CListHead,
        tid_enqueue: u32,
    }

    impl Slotted for TQp {
        fn slot(&self) -> u32 {
            self.slot
        }
    }

    struct TRef(NonNull<TQp>);

    impl core::ops::Deref for TRef {
        type Target = TQp;
        fn deref(&self) -> &TQp {
            // SAFETY: test QPs are leaked boxes, alive for the test.
            unsafe { self.0.as_ref() }
        }
    }

    impl QpRef for TRef {
        fn get(this: &Self) -> Self {
            this.refs.set(this.refs.get() + 1);
            TRef(this.0)
        }
        fn same(a: &Self, b: &Self) -> bool {
            a.0 == b.0
        }
    }

    impl Drop for TRef {
        fn drop(&mut self) {
            self.refs.set(self.refs.get() - 1);
        }
    }

    fn owner(link: *mut CListHead) -> NonNull<TQp> {
        let at = link
            .cast::<u8>()
            .wrapping_sub(core::mem::offset_of!(TQp, tid_wait));
        NonNull::new(at.cast::<TQp>()).unwrap()
    }

    // SAFETY: `tid_wait`/`tid_enqueue` are the QP's own fields; a link is
    // turned back into its QP by the field's offset (`container_of`).
    unsafe impl DrvWaiter for TQp {
        type Ref = TRef;
        type Ctx = ();
        fn tid_wait(&self) -> *mut CListHead {
            (&raw const self.tid_wait).cast_mut()
        }
        fn tid_enqueue(&self) -> *mut u32 {
            (&raw const self.tid_enqueue).cast_mut()
        }
        unsafe fn get_waiter(_: &(), link: *mut CListHead) -> TRef {
            let r = TRef(owner(link));
            r.refs.set(r.refs.get() + 1);
            r
        }
        unsafe fn adopt_waiter(_: &(), link: *mut CListHead) -> TRef {
            TRef(owner(link))
        }
    }

    struct Count(Cell<u64>);
    impl WaitCounter for Count {
        fn count_wait(&self) {
            self.0.set(self.0.get() + 1);
        }
    }

    fn qp(slot: u32) -> TRef {
        let b = Box::new(TQp {
            slot,
            refs: Cell::new(1),
            tid_wait: CListHead {
                next: core::ptr::null_mut(),
                prev: core::ptr::null_mut(),
            },
            tid_enqueue: 0,
        });
        let p = NonNull::from(Box::leak(b));
        // SAFETY: the field is ours and writable.
        unsafe { list::init(&raw mut (*p.as_ptr()).tid_wait) };
        TRef(p)
    }

    fn queue() -> Box<CTidQueue> {
        let mut q = Box::new(CTidQueue {
            queue_head: CListHead {
                next: core::ptr::null_mut(),
                prev: core::ptr::null_mut(),
            },
            enqueue: 0,
            dequeue: 0,
        });
        // SAFETY: the field is ours and writable.
        unsafe { list::init(&raw mut q.queue_head) };
        q
    }

    /// The slots of `kind`, head first, walking the driver's list.
    fn order(d: &DrvQueues<TQp>, kind: QueueKind) -> Vec<u32> {
        let head = d.head_of(kind);
        let mut out = Vec::new();
        // SAFETY: a well-formed list of test QPs.
        let mut at = unsafe { (*head).next };
        while at != head {
            // SAFETY: every link is a live test QP's `tid_wait`.
            out.push(unsafe { owner(at).as_ref() }.slot);
            // SAFETY: as above.
            at = unsafe { (*at).next };
        }
        out
    }

    /// After each step of [`the_driver_lists_behave_as_the_sim_table`]: both
    /// stores hold the same QPs in the same order with the same counts,
    /// flags, positions, memberships, tickets and references.
    fn same_state(
        step: u32,
        drv: &DrvQueues<TQp>,
        sim: &WaitQueues<TRef>,
        qps: &[TRef],
        fd: &[SFlags],
        fs: &[SFlags],
    ) {
        for k in [QueueKind::Flow, QueueKind::RcvArray] {
            let o = order(drv, k);
            assert_eq!(o, sim.iter(k).collect::<Vec<_>>(), "step {step}: {k:?}");
            let (enq, deq) = drv.counts(k);
            assert_eq!(u64::from(enq), sim.enqueued(k), "step {step}");
            assert_eq!(u64::from(deq), sim.dequeued(k), "step {step}");
        }
        for (j, q) in qps.iter().enumerate() {
            assert_eq!(fd[j], fs[j], "step {step}: flags of {j}");
            for k in [QueueKind::Flow, QueueKind::RcvArray] {
                assert_eq!(
                    store::position(drv, k, q),
                    store::position(sim, k, q),
                    "step {step}: position of {j} on {k:?}"
                );
            }
            assert_eq!(
                store::WaitStore::membership(drv, q),
                sim.membership(j as u32)
            );
            if sim.membership(j as u32) != Membership::Idle {
                assert_eq!(u64::from(q.tid_enqueue), sim.ticket(j as u32).unwrap());
            }
        }
        // Each queued QP holds one reference besides ours; both stores
        // share the QPs, so a queued QP has three.
        for (j, q) in qps.iter().enumerate() {
            let queued = sim.membership(j as u32) != Membership::Idle;
            assert_eq!(
                q.refs.get(),
                1 + 2 * u32::from(queued),
                "step {step}: refs of {j}"
            );
        }
    }

    #[test]
    fn the_driver_lists_behave_as_the_sim_table() {
        const N: u32 = 6;
        let qps: Vec<TRef> = (0..N).map(qp).collect();
        let (mut fq, mut rq) = (queue(), queue());
        // SAFETY: both queues are ours; this thread is their only user (the
        // "exp_lock"); only test QPs go on them.
        let mut drv =
            unsafe { DrvQueues::<TQp>::new(NonNull::from(&mut *fq), NonNull::from(&mut *rq), ()) };
        let mut sim: WaitQueues<TRef> = WaitQueues::new(N).unwrap();
        let (mut fd, mut fs) = (
            vec![SFlags::default(); N as usize],
            vec![SFlags::default(); N as usize],
        );
        let (cd, cs) = (Count(Cell::new(0)), Count(Cell::new(0)));
        let mut rng = SimRandom::new(11);
        let mut woken = (0u64, 0u64);
        for step in 0..20_000 {
            let i = (rng.next_u32() % N) as usize;
            let kind = if rng.next_u32() % 2 == 0 {
                QueueKind::Flow
            } else {
                QueueKind::RcvArray
            };
            let q = &qps[i];
            match rng.next_u32() % 5 {
                0 | 1 => {
                    store::enqueue(&mut drv, kind, q, &mut fd[i], &cd).unwrap();
                    store::enqueue(&mut sim, kind, q, &mut fs[i], &cs).unwrap();
                }
                2 => {
                    let a = store::dequeue(&mut drv, kind, q, &mut fd[i]);
                    let b = store::dequeue(&mut sim, kind, q, &mut fs[i]);
                    assert_eq!(a, b, "step {step}: dequeue");
                }
                3 => {
                    let a = store::flush(&mut drv, q);
                    let b = store::flush(&mut sim, q);
                    fd[i] = SFlags::default();
                    fs[i] = SFlags::default();
                    assert_eq!(
                        a.qp().map(|r| r.slot),
                        b.qp().map(|r| r.slot),
                        "step {step}: flush wake-up"
                    );
                    woken.0 += u64::from(a.qp().is_some());
                    drop((a, b));
                }
                _ => {
                    let a = store::waiters(&drv, kind, q, &fd[i]);
                    let b = store::waiters(&sim, kind, q, &fs[i]);
                    assert_eq!(a, b, "step {step}: waiters");
                    let (a, b) = (store::first(&drv, kind), store::first(&sim, kind));
                    assert_eq!(a.qp().map(|r| r.slot), b.qp().map(|r| r.slot));
                    woken.1 += u64::from(a.qp().is_some());
                    drop((a, b));
                }
            }
            same_state(step, &drv, &sim, &qps, &fd, &fs);
        }
        assert_eq!(cd.0.get(), cs.0.get());
        assert!(
            cd.0.get() > 1000 && woken.0 > 100 && woken.1 > 1000,
            "{woken:?}"
        );
    }
}
