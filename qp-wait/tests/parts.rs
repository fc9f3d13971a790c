// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The parts of a QP and a wake-up the other crates read, and the
//! memory-wait round trip, on the sim platform.

use hfi1_hal::flags::SFlags;
use hfi1_hal::lock_order::Lock;
use hfi1_hal::services::QpRef;
use hfi1_hal::sim::lockdep::CheckedSpinLock;
use hfi1_hal::sim::{SimRef, SimScheduler};
use qp_wait::{
    Cpu, Qp, QueueKind, SendState, Slotted, WaitPlatform, WaitQueues, kmem_wakeup, wait_kmem,
};

#[derive(Debug)]
enum T {}

impl WaitPlatform for T {
    type Lock = CheckedSpinLock;
    type Ext = ();
    type Ref = SimRef<Qp<T>>;
    type Sched = SimScheduler<SimRef<Qp<T>>>;
}

fn qp(qpn: u32, slot: u32, cpu: u32) -> SimRef<Qp<T>> {
    SimRef::new(Qp::new(qpn, slot, cpu, Lock::new(SendState::default())))
}

/// A QP gives back the number, slot and CPU it was made with, through its
/// own accessors and through the traits the queues and the scheduler use;
/// its Debug output shows the number and slot.
#[test]
fn a_qp_gives_back_what_it_was_made_with() {
    let q = qp(0x1234, 7, 3);
    assert_eq!((q.qpn(), q.slot(), q.cpu()), (0x1234, 7, 3));
    assert_eq!((Slotted::slot(&*q), Cpu::cpu(&*q)), (7, 3));
    assert_eq!(format!("{:?}", *q), "Qp { qpn: 4660, slot: 7 }");
}

/// A wake-up names the queue's head (with a reference of its own, which
/// dropping it gives back); an empty queue's names nobody.
#[test]
fn a_wakeup_names_the_head_or_nobody() {
    let a = qp(1, 0, 2);
    let mut w: WaitQueues<SimRef<Qp<T>>> = WaitQueues::new(2).unwrap();
    let none = w.first(QueueKind::Flow);
    assert!(none.is_none() && none.qp().is_none());
    assert_eq!(format!("{none:?}"), "Wakeup(none)");
    drop(none);
    let mut flags = SFlags::empty();
    let dev = qp_wait::DevCounters::new();
    qp_wait::store::enqueue(&mut w, QueueKind::Flow, &a, &mut flags, &dev).unwrap();
    let head = w.first(QueueKind::Flow);
    assert!(!head.is_none());
    assert!(head.qp().is_some_and(|h| QpRef::same(h, &a)));
    assert_eq!(format!("{head:?}"), "Wakeup(qp)");
    assert_eq!(a.live_refs(), 3, "creator, queue, wake-up");
    drop(head);
    assert_eq!(a.live_refs(), 2);
    assert!(qp_wait::store::dequeue(
        &mut w,
        QueueKind::Flow,
        &*a,
        &mut flags
    ));
    assert_eq!(a.live_refs(), 1);
}

/// After a failed DMA mapping the QP waits for memory once (a second wait
/// does not queue it twice); the timer's tick hands it out, and the
/// wake-up clears the flag and runs its send engine once.
#[test]
fn a_memory_wait_round_trip() {
    let a = qp(1, 0, 0);
    let sched: SimScheduler<SimRef<Qp<T>>> = SimScheduler::new();
    let mut flags = SFlags::empty();
    wait_kmem(&a, &mut flags, &sched);
    wait_kmem(&a, &mut flags, &sched);
    assert!(flags.waiting_kmem());
    assert_eq!(sched.kmem_waiters(), 1);
    let r = sched.kmem_tick().unwrap();
    assert!(QpRef::same(&r, &a));
    kmem_wakeup(&r, &mut flags, &sched);
    assert!(!flags.waiting_kmem());
    kmem_wakeup(&r, &mut flags, &sched);
    assert_eq!(sched.pending_sends(), 1, "woken once");
    drop(r);
    drop(sched.pop_send());
    assert_eq!(a.live_refs(), 1);
}

/// Leaving from the middle, the tail and the head of a queue keeps the
/// others in order, joins after the right tail and hands the head on;
/// the lengths and the empty test follow each queue on its own.
#[test]
fn leaving_anywhere_keeps_the_queue_in_order() {
    let qps: Vec<_> = (0..5).map(|i| qp(10 + i, i, 0)).collect();
    let mut flags = [SFlags::empty(); 5];
    let dev = qp_wait::DevCounters::new();
    let mut w: WaitQueues<SimRef<Qp<T>>> = WaitQueues::new(5).unwrap();
    assert_eq!(w.slots(), 5);
    assert!(w.is_empty());
    assert!(format!("{w:?}").starts_with("WaitQueues { slots: 5, flow: "));
    let join = |w: &mut WaitQueues<_>, f: &mut SFlags, i: usize, k| {
        qp_wait::store::enqueue(w, k, &qps[i], f, &dev).unwrap();
    };
    for (i, f) in flags.iter_mut().enumerate().take(4) {
        join(&mut w, f, i, QueueKind::Flow);
    }
    assert!(!w.is_empty());
    assert_eq!((w.len(QueueKind::Flow), w.len(QueueKind::RcvArray)), (4, 0));
    let order = |w: &WaitQueues<_>| w.iter(QueueKind::Flow).collect::<Vec<_>>();
    let leave = |w: &mut WaitQueues<_>, f: &mut SFlags, i: usize| {
        assert!(qp_wait::store::dequeue(w, QueueKind::Flow, &*qps[i], f));
    };
    leave(&mut w, &mut flags[1], 1);
    assert_eq!(order(&w), [0, 2, 3]);
    join(&mut w, &mut flags[4], 4, QueueKind::Flow);
    assert_eq!(order(&w), [0, 2, 3, 4], "the tail stayed where it was");
    leave(&mut w, &mut flags[4], 4);
    leave(&mut w, &mut flags[3], 3);
    assert_eq!(order(&w), [0, 2]);
    join(&mut w, &mut flags[3], 3, QueueKind::Flow);
    assert_eq!(order(&w), [0, 2, 3], "joined after the new tail");
    leave(&mut w, &mut flags[0], 0);
    assert_eq!(order(&w), [2, 3]);
    let head = w.first(QueueKind::Flow);
    assert!(head.qp().is_some_and(|h| QpRef::same(h, &qps[2])));
    drop(head);
    join(&mut w, &mut flags[4], 4, QueueKind::RcvArray);
    leave(&mut w, &mut flags[2], 2);
    leave(&mut w, &mut flags[3], 3);
    assert_eq!((w.len(QueueKind::Flow), w.len(QueueKind::RcvArray)), (0, 1));
    assert!(!w.is_empty(), "the RcvArray queue still holds one");
    assert!(qp_wait::store::dequeue(
        &mut w,
        QueueKind::RcvArray,
        &*qps[4],
        &mut flags[4]
    ));
    assert!(w.is_empty());
    join(&mut w, &mut flags[0], 0, QueueKind::Flow);
    assert!(!w.is_empty(), "the flow queue holds one");
    leave(&mut w, &mut flags[0], 0);
    assert!(qps.iter().all(|q| q.live_refs() == 1));
}
