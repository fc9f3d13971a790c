// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The sim scheduler ([`SimScheduler`]): trigger work, send-engine
//! requests, second-leg work and the memory-wait list as FIFOs the test
//! pops.

use alloc::collections::VecDeque;

use super::Inner;
use crate::flags::SFlags;
use crate::services::{MemoryWait, QpRef, Scheduler, TidScheduler};
use crate::sync::atomic::{AtomicU64, Ordering};

struct SchedState<R> {
    work: VecDeque<(u32, R)>,
    sends: VecDeque<R>,
    tid_sends: VecDeque<(u32, R)>,
    kmem: VecDeque<R>,
}

/// The sim scheduler: a FIFO of trigger work items (each holding its QP
/// reference), a FIFO of send-engine requests, a FIFO of second-leg work
/// items (each QP at most once) and the device's memory-wait list (each
/// waiter holding its QP reference).
pub struct SimScheduler<R> {
    state: Inner<SchedState<R>>,
    queued: AtomicU64,
    coalesced: AtomicU64,
    sends: AtomicU64,
    tid_queued: AtomicU64,
    tid_coalesced: AtomicU64,
}

impl<R> Default for SimScheduler<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> core::fmt::Debug for SimScheduler<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimScheduler")
            .field("queued", &self.triggers_queued())
            .field("coalesced", &self.triggers_coalesced())
            .field("sends", &self.sends_scheduled())
            .field("tid_sends", &self.tid_sends_queued())
            .finish()
    }
}

impl<R> SimScheduler<R> {
    /// No work, no counts.
    pub fn new() -> Self {
        Self {
            state: Inner::new(SchedState {
                work: VecDeque::new(),
                sends: VecDeque::new(),
                tid_sends: VecDeque::new(),
                kmem: VecDeque::new(),
            }),
            queued: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
            sends: AtomicU64::new(0),
            tid_queued: AtomicU64::new(0),
            tid_coalesced: AtomicU64::new(0),
        }
    }

    /// Takes the oldest pending second-leg work item (its CPU and a
    /// reference to the QP); it stops being pending, so the next
    /// `schedule_tid_send` queues it again. Kernel: the workqueue starting
    /// `_hfi1_do_tid_send()` (a work item is no longer pending once it
    /// runs).
    pub fn pop_tid_send(&self) -> Option<(u32, R)> {
        self.state.with(|s| s.tid_sends.pop_front())
    }

    /// Second-leg work items pending now.
    pub fn pending_tid_sends(&self) -> usize {
        self.state.with(|s| s.tid_sends.len())
    }

    /// Second-leg work items queued so far (calls that returned true).
    pub fn tid_sends_queued(&self) -> u64 {
        self.tid_queued.load(Ordering::Relaxed)
    }

    /// `schedule_tid_send` calls that found the work already pending.
    pub fn tid_sends_coalesced(&self) -> u64 {
        self.tid_coalesced.load(Ordering::Relaxed)
    }

    /// Takes the oldest pending trigger work item (its CPU and the QP
    /// reference it carries); it stops being pending.
    pub fn pop_work(&self) -> Option<(u32, R)> {
        self.state.with(|s| s.work.pop_front())
    }

    /// Takes the oldest send-engine request (a reference to the QP).
    pub fn pop_send(&self) -> Option<R> {
        self.state.with(|s| s.sends.pop_front())
    }

    /// One tick of the memory-wait timer: takes the oldest QP off the
    /// memory-wait list, with the reference the list held. The caller
    /// wakes it (clears `RVT_S_WAIT_KMEM` under its `s_lock` and schedules
    /// its send engine). Kernel: `mem_timer()` (one QP per tick, the timer
    /// re-armed while the list is not empty).
    pub fn kmem_tick(&self) -> Option<R> {
        self.state.with(|s| s.kmem.pop_front())
    }

    /// QPs on the memory-wait list now.
    pub fn kmem_waiters(&self) -> usize {
        self.state.with(|s| s.kmem.len())
    }

    /// Trigger work items pending now.
    pub fn pending_work(&self) -> usize {
        self.state.with(|s| s.work.len())
    }

    /// Send-engine requests not yet taken.
    pub fn pending_sends(&self) -> usize {
        self.state.with(|s| s.sends.len())
    }

    /// Trigger work items queued so far.
    pub fn triggers_queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// `queue_trigger` calls that found the work already pending.
    pub fn triggers_coalesced(&self) -> u64 {
        self.coalesced.load(Ordering::Relaxed)
    }

    /// `schedule_send` calls so far.
    pub fn sends_scheduled(&self) -> u64 {
        self.sends.load(Ordering::Relaxed)
    }
}

impl<R: QpRef + Send> Scheduler<R> for SimScheduler<R> {
    fn schedule_send(&self, qp: &R) {
        self.sends.fetch_add(1, Ordering::Relaxed);
        let r = QpRef::get(qp);
        self.state.with(|s| s.sends.push_back(r));
    }

    fn queue_trigger(&self, cpu: u32, qp: R) -> Result<(), R> {
        let r = self.state.with(|s| {
            if s.work.iter().any(|(_, w)| QpRef::same(w, &qp)) {
                Err(qp)
            } else {
                s.work.push_back((cpu, qp));
                Ok(())
            }
        });
        match &r {
            Ok(()) => self.queued.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.coalesced.fetch_add(1, Ordering::Relaxed),
        };
        r
    }
}

impl<R: QpRef + Send> TidScheduler<R> for SimScheduler<R> {
    fn schedule_tid_send(&self, cpu: u32, qp: &R) -> bool {
        let queued = self.state.with(|s| {
            if s.tid_sends.iter().any(|(_, w)| QpRef::same(w, qp)) {
                false
            } else {
                s.tid_sends.push_back((cpu, QpRef::get(qp)));
                true
            }
        });
        if queued {
            self.tid_queued.fetch_add(1, Ordering::Relaxed);
        } else {
            self.tid_coalesced.fetch_add(1, Ordering::Relaxed);
        }
        queued
    }
}

impl<R: QpRef + Send> SimScheduler<R> {
    /// Takes `qp`'s pending second-leg work item off the FIFO (QP reset or
    /// destroy), giving back the reference it held. Kernel:
    /// `iowait_cancel_work()` in `flush_qp_waiters()`'s caller
    /// (`cancel_work_sync()` of the TID work).
    pub fn cancel_tid_send(&self, qp: &R) -> Option<R> {
        self.state.with(|s| {
            let at = s.tid_sends.iter().position(|(_, w)| QpRef::same(w, qp))?;
            s.tid_sends.remove(at).map(|(_, r)| r)
        })
    }

    /// Takes `qp` off the memory-wait list if it is there (QP reset or
    /// destroy), giving back the list's reference; true if it was there.
    /// Kernel: the `list_del_init(&priv->s_iowait.list)` of
    /// `flush_qp_waiters()`, with its `rvt_put_qp()`.
    pub fn cancel_kmem(&self, qp: &R) -> Option<R> {
        self.state.with(|s| {
            let at = s.kmem.iter().position(|w| QpRef::same(w, qp))?;
            s.kmem.remove(at)
        })
    }
}

impl<R: QpRef + Send> MemoryWait<R> for SimScheduler<R> {
    fn wait_kmem(&self, qp: &R, s_flags: &mut SFlags) {
        let joined = self.state.with(|s| {
            if s.kmem.iter().any(|w| QpRef::same(w, qp)) {
                false
            } else {
                s.kmem.push_back(QpRef::get(qp));
                true
            }
        });
        if joined {
            s_flags.insert(SFlags::WAIT_KMEM);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sim::SimRef;

    /// Every scheduler counter and list length follows what was queued and
    /// taken, one by one; the memory-wait list takes a QP once, hands it
    /// out in order and gives it back on cancel; Debug shows the counts.
    #[test]
    fn scheduler_counts_follow_each_call() {
        let a = SimRef::new(1u32);
        let b = SimRef::new(2u32);
        let s = SimScheduler::new();
        assert_eq!(
            (s.pending_work(), s.pending_sends(), s.kmem_waiters()),
            (0, 0, 0)
        );
        for q in [&a, &b] {
            assert!(s.queue_trigger(0, QpRef::get(q)).is_ok());
        }
        drop(s.queue_trigger(0, QpRef::get(&a)));
        drop(s.queue_trigger(0, QpRef::get(&b)));
        s.schedule_send(&a);
        s.schedule_send(&b);
        assert_eq!(
            (
                s.triggers_queued(),
                s.triggers_coalesced(),
                s.sends_scheduled()
            ),
            (2, 2, 2)
        );
        assert_eq!((s.pending_work(), s.pending_sends()), (2, 2));
        assert!(s.schedule_tid_send(1, &a) && s.schedule_tid_send(1, &b));
        assert!(!s.schedule_tid_send(1, &a) && !s.schedule_tid_send(1, &b));
        assert_eq!(s.tid_sends_coalesced(), 2);
        assert_eq!(
            alloc::format!("{s:?}"),
            "SimScheduler { queued: 2, coalesced: 2, sends: 2, tid_sends: 2 }"
        );
        assert!(s.pop_send().is_some_and(|r| QpRef::same(&r, &a)));
        assert_eq!(s.pending_sends(), 1);
        let (mut fa, mut fb) = (SFlags::empty(), SFlags::empty());
        s.wait_kmem(&a, &mut fa);
        s.wait_kmem(&a, &mut fa);
        s.wait_kmem(&b, &mut fb);
        assert!(fa.waiting_kmem() && fb.waiting_kmem());
        assert_eq!(s.kmem_waiters(), 2);
        assert!(s.cancel_kmem(&b).is_some_and(|r| QpRef::same(&r, &b)));
        assert!(s.cancel_kmem(&b).is_none());
        assert!(s.kmem_tick().is_some_and(|r| QpRef::same(&r, &a)));
        assert!(s.kmem_tick().is_none());
        drop(s);
        assert_eq!((a.live_refs(), b.live_refs()), (1, 1));
    }

    #[test]
    fn refs_count_and_scheduler_coalesces() {
        let a = SimRef::new(1u32);
        let b = SimRef::new(2u32);
        let sched = SimScheduler::new();
        assert!(sched.queue_trigger(0, QpRef::get(&a)).is_ok());
        let back = sched.queue_trigger(0, QpRef::get(&a));
        assert!(back.is_err());
        drop(back);
        assert!(sched.queue_trigger(1, QpRef::get(&b)).is_ok());
        assert_eq!(a.live_refs(), 2);
        sched.schedule_send(&b);
        assert_eq!(b.live_refs(), 3);
        let (cpu, w) = sched.pop_work().unwrap();
        assert!(QpRef::same(&w, &a) && cpu == 0);
        drop(w);
        drop(sched);
        assert_eq!((a.live_refs(), b.live_refs()), (1, 1));
    }

    /// `queue_work_on()` semantics for the second leg: pending at most
    /// once per QP, independent of the first leg's requests, runnable again
    /// once popped; cancel gives the reference back.
    #[test]
    fn tid_send_is_pending_at_most_once() {
        let a = SimRef::new(1u32);
        let b = SimRef::new(2u32);
        let sched = SimScheduler::new();
        assert!(sched.schedule_tid_send(3, &a));
        assert!(!sched.schedule_tid_send(3, &a), "already pending");
        sched.schedule_send(&a);
        assert!(sched.schedule_tid_send(0, &b));
        assert_eq!((sched.pending_tid_sends(), sched.pending_sends()), (2, 1));
        assert_eq!(
            (sched.tid_sends_queued(), sched.tid_sends_coalesced()),
            (2, 1)
        );
        assert_eq!(a.live_refs(), 3, "one for the TID work, one for the send");
        let (cpu, w) = sched.pop_tid_send().unwrap();
        assert!(QpRef::same(&w, &a) && cpu == 3);
        assert!(
            sched.schedule_tid_send(3, &a),
            "popped: it may be queued again"
        );
        drop(w);
        let c = sched.cancel_tid_send(&b).unwrap();
        assert!(QpRef::same(&c, &b));
        drop(c);
        assert!(sched.cancel_tid_send(&b).is_none());
        assert_eq!(b.live_refs(), 1);
        drop(sched);
        assert_eq!(a.live_refs(), 1);
    }
}
