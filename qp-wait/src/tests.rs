// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Unit tests of the wait queues on the sim platform (lock-order checker
//! on).

use super::*;
use hfi1_hal::lock_order::{ExpLock, Lock, LockToken};
use hfi1_hal::sim::lockdep::{self, CheckedSpinLock};
use hfi1_hal::sim::{SimRef, SimScheduler};

struct T;

impl WaitPlatform for T {
    type Lock = CheckedSpinLock;
    type Ext = ();
    type Ref = SimRef<Qp<T>>;
    type Sched = SimScheduler<SimRef<Qp<T>>>;
}

struct Ctx {
    exp: Lock<ExpLock, CheckedSpinLock, WaitQueues<SimRef<Qp<T>>>>,
}

struct Q(WaitQueues<SimRef<Qp<T>>>);

impl AsMut<WaitQueues<SimRef<Qp<T>>>> for Q {
    fn as_mut(&mut self) -> &mut WaitQueues<SimRef<Qp<T>>> {
        &mut self.0
    }
}

fn qp(n: u32) -> SimRef<Qp<T>> {
    SimRef::new(Qp::new(n + 100, n, n % 2, Lock::new(SendState::default())))
}

fn ctx(slots: u32) -> Ctx {
    Ctx {
        exp: Lock::new(WaitQueues::new(slots).unwrap()),
    }
}

/// `position_in_queue()`: ticket minus the queue's dequeues, so the head
/// is at 1 once everyone before it left, and a QP's position is asked of
/// the queue named, not the one it waits on (the driver's arithmetic).
#[test]
fn position_counts_from_the_head() {
    let c = ctx(4);
    let dev = DevCounters::new();
    let qps: Vec<_> = (0..4).map(qp).collect();
    let mut root = LockToken::root();
    for q in &qps[..3] {
        let mut s = q.s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        c.exp
            .lock(tok)
            .enqueue(QueueKind::RcvArray, q, &mut st.flags, &dev)
            .unwrap();
    }
    let pos = |root: &mut LockToken<'_, hfi1_hal::lock_order::Unlocked>, i: usize, k| {
        let mut s = qps[i].s_lock.lock(root);
        c.exp.lock(s.token()).position(k, &qps[i])
    };
    assert_eq!(
        [0, 1, 2].map(|i| pos(&mut root, i, QueueKind::RcvArray)),
        [1, 2, 3]
    );
    {
        let mut s = qps[0].s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        assert!(
            c.exp
                .lock(tok)
                .dequeue(QueueKind::RcvArray, &qps[0], &mut st.flags)
        );
    }
    assert_eq!(
        [1, 2].map(|i| pos(&mut root, i, QueueKind::RcvArray)),
        [1, 2]
    );
    // Its ticket (3) against the flow queue's dequeues (0): 3, although it
    // waits on the RcvArray queue.
    assert_eq!(pos(&mut root, 2, QueueKind::Flow), 3);
    // Never queued: ticket 0, minus one RcvArray dequeue, wraps.
    assert_eq!(pos(&mut root, 3, QueueKind::RcvArray), u32::MAX);
}

#[test]
fn enqueue_is_fifo_idempotent_and_holds_a_reference() {
    let c = ctx(4);
    let dev = DevCounters::new();
    let qps: Vec<_> = (0..3).map(qp).collect();
    let mut root = LockToken::root();
    for q in &qps {
        let mut s = q.s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        let mut e = c.exp.lock(tok);
        e.enqueue(QueueKind::RcvArray, q, &mut st.flags, &dev)
            .unwrap();
        e.enqueue(QueueKind::RcvArray, q, &mut st.flags, &dev)
            .unwrap();
        e.enqueue(QueueKind::Flow, q, &mut st.flags, &dev).unwrap();
        assert!(st.waiting());
    }
    {
        let mut s = qps[0].s_lock.lock(&mut root);
        let e = c.exp.lock(s.token());
        assert_eq!(e.iter(QueueKind::RcvArray).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(e.len(QueueKind::Flow), 0);
        assert_eq!(e.enqueued(QueueKind::RcvArray), 3);
        assert_eq!(e.membership(1), Membership::Queued(QueueKind::RcvArray));
        assert_eq!(e.ticket(2), Some(3));
    }
    assert_eq!(dev.tid_waits(), 3);
    assert!(qps.iter().all(|q| q.live_refs() == 2));

    // Waiters: the head that waits sees nobody ahead; the others do.
    {
        let mut s = qps[0].s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        let e = c.exp.lock(tok);
        assert!(!e.waiters(QueueKind::RcvArray, &qps[0], &st.flags));
        assert!(!e.waiters(QueueKind::Flow, &qps[0], &st.flags));
    }
    {
        let mut s = qps[1].s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        let e = c.exp.lock(tok);
        assert!(e.waiters(QueueKind::RcvArray, &qps[1], &st.flags));
    }

    // Dequeue from the middle, then the head. One link serves both
    // queues, as the driver's `tid_wait`: naming the flow queue takes the
    // QP off the RcvArray queue it waits on, and the dequeue is counted on
    // the queue named (`dequeue_tid_waiter()`).
    for (i, kind) in [(1usize, QueueKind::Flow), (0, QueueKind::RcvArray)] {
        let mut s = qps[i].s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        let mut e = c.exp.lock(tok);
        assert!(e.dequeue(kind, &qps[i], &mut st.flags));
        assert!(!st.waiting());
        assert!(!e.dequeue(QueueKind::RcvArray, &qps[i], &mut st.flags));
        assert!(!e.dequeue(QueueKind::Flow, &qps[i], &mut st.flags));
    }
    {
        let mut s = qps[2].s_lock.lock(&mut root);
        let e = c.exp.lock(s.token());
        assert_eq!(e.iter(QueueKind::RcvArray).collect::<Vec<_>>(), [2]);
        assert_eq!(e.dequeued(QueueKind::RcvArray), 1);
        assert_eq!(e.dequeued(QueueKind::Flow), 1);
    }
    assert_eq!(
        qps.iter().map(|q| q.live_refs()).collect::<Vec<_>>(),
        [1, 1, 2]
    );
    assert_eq!(lockdep::violations(), 0);
}

#[test]
fn first_and_deliver_wake_the_right_way() {
    let c = ctx(2);
    let dev = DevCounters::new();
    let sched: SimScheduler<SimRef<Qp<T>>> = SimScheduler::new();
    let a = qp(0);
    let b = qp(1);
    let mut root = LockToken::root();
    for q in [&a, &b] {
        let mut s = q.s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        let mut e = c.exp.lock(tok);
        e.enqueue(QueueKind::Flow, q, &mut st.flags, &dev).unwrap();
    }
    // `a` is the head: delivering from `a` triggers it directly.
    {
        let mut s = a.s_lock.lock(&mut root);
        let w = {
            let e = c.exp.lock(s.token());
            e.first(QueueKind::Flow)
        };
        assert_eq!(a.live_refs(), 3);
        let (st, tok) = s.parts();
        w.deliver(&a, &st.flags, tok, &sched);
    }
    assert_eq!((sched.pending_sends(), sched.pending_work()), (1, 0));
    assert_eq!(a.live_refs(), 3, "queue + own + the send request");
    drop(sched.pop_send());
    // From `b`, the head `a` gets deferred work; twice coalesces.
    for _ in 0..2 {
        let mut s = b.s_lock.lock(&mut root);
        let w = {
            let e = c.exp.lock(s.token());
            e.first(QueueKind::Flow)
        };
        let (st, tok) = s.parts();
        w.deliver(&b, &st.flags, tok, &sched);
    }
    assert_eq!((sched.pending_work(), sched.triggers_coalesced()), (1, 1));
    assert_eq!(a.live_refs(), 3, "queue + own + the pending work");
    let (cpu, r) = sched.pop_work().unwrap();
    assert_eq!(cpu, 0);
    assert!(trigger_resume::<T>(r, &mut root, |q, _| {
        assert!(QpRef::same(q, &a));
    }));
    assert_eq!(a.live_refs(), 2);
    assert_eq!(lockdep::violations(), 0);
}

#[test]
fn flush_leaves_the_queue_and_drops_the_reference() {
    let c = Lock::<ExpLock, CheckedSpinLock, _>::new(Q(WaitQueues::new(2).unwrap()));
    let dev = DevCounters::new();
    let sched: SimScheduler<SimRef<Qp<T>>> = SimScheduler::new();
    let a = qp(0);
    let b = qp(1);
    let mut root = LockToken::root();
    {
        let mut s = a.s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        let mut e = c.lock(tok);
        e.0.enqueue(QueueKind::RcvArray, &a, &mut st.flags, &dev)
            .unwrap();
    }
    {
        let mut s = b.s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        let mut e = c.lock(tok);
        e.0.enqueue(QueueKind::RcvArray, &b, &mut st.flags, &dev)
            .unwrap();
    }
    assert_eq!(a.live_refs(), 2);
    {
        let mut s = a.s_lock.lock(&mut root);
        flush_wait::<T, Q>(&a, &mut s, &c, &sched);
        assert!(!s.waiting());
        flush_wait::<T, Q>(&a, &mut s, &c, &sched);
    }
    assert_eq!(a.live_refs(), 1);
    // `a` was the head: `b`, now the head, got its wake-up.
    assert_eq!(sched.pending_work(), 1);
    let (_, w) = sched.pop_work().unwrap();
    assert!(QpRef::same(&w, &b));
    drop(w);
    let mut s = a.s_lock.lock(&mut root);
    let e = c.lock(s.token());
    assert_eq!(e.0.iter(QueueKind::RcvArray).collect::<Vec<_>>(), [1]);
    // Counted on the flow queue, as the driver's first
    // `_tid_rdma_flush_wait()` call does whichever list held the QP.
    assert_eq!(e.0.dequeued(QueueKind::Flow), 1);
    assert_eq!(e.0.dequeued(QueueKind::RcvArray), 0);
}

#[test]
fn bad_slot_is_an_error_and_trigger_resume_skips_non_waiters() {
    let c = ctx(1);
    let dev = DevCounters::new();
    let far = qp(5);
    let mut root = LockToken::root();
    {
        let mut s = far.s_lock.lock(&mut root);
        let (st, tok) = s.parts();
        let mut e = c.exp.lock(tok);
        assert_eq!(
            e.enqueue(QueueKind::Flow, &far, &mut st.flags, &dev),
            Err(WaitError::BadSlot(5))
        );
        assert!(!st.waiting());
    }
    let mut ran = false;
    assert!(!trigger_resume::<T>(QpRef::get(&far), &mut root, |_, _| {
        ran = true
    }));
    assert!(!ran);
    assert_eq!(far.live_refs(), 1);
}

/// `qp_to_rcd` reads the device's QP map with the kernel's `u8` index.
/// Kernel: `qp_to_rcd()` (`hfi1_get_qp_map(dd, qpn >> dd->qos_shift)`,
/// whose index is a `u8`). Three kernel contexts (1, 2, 3) fill the map as
/// `init_qpmap_table()` does, `qos_shift` 1: QP 513 reads entry
/// `256 & 0xff = 0`, context 1 (a lookup without the `u8` truncation
/// runs past the map on QP 513, and a modulo over the kernel contexts
/// without the map would give context 2); under QoS every entry is
/// context 0.
#[test]
fn qp_to_rcd_reads_the_map_with_a_u8_index() {
    let mut map = [0u8; 256];
    for (i, m) in map.iter_mut().enumerate() {
        *m = 1 + (i % 3) as u8;
    }
    assert_eq!(qp_to_rcd(0, 1, &map), 0);
    assert_eq!(qp_to_rcd(2, 1, &map), 2);
    assert_eq!(qp_to_rcd(7, 1, &map), 1);
    assert_eq!(qp_to_rcd(513, 1, &map), 1);
    assert_eq!(qp_to_rcd(1 << 20, 40, &map), 1);
    let qos = [0u8; 256];
    assert!((1..2000).all(|q| qp_to_rcd(q, 3, &qos) == 0));
}

/// `dequeue` takes the QP off whichever queue holds it (one wait link
/// serves both, `list_del_init(&priv->tid_wait)`), counts the dequeue on
/// the queue named, clears `WAIT_TID_SPACE` and drops the queue's
/// reference. Kernel: `dequeue_tid_waiter()`. A dequeue that looked only
/// at the queue named would return false below and leave the QP queued.
#[test]
fn dequeue_takes_the_qp_off_whichever_queue_holds_it() {
    let c = ctx(2);
    let dev = DevCounters::new();
    let a = qp(0);
    let mut root = LockToken::root();
    let mut s = a.s_lock.lock(&mut root);
    let (st, tok) = s.parts();
    let mut e = c.exp.lock(tok);
    e.enqueue(QueueKind::RcvArray, &a, &mut st.flags, &dev)
        .unwrap();
    assert_eq!(a.live_refs(), 2);
    assert!(e.dequeue(QueueKind::Flow, &a, &mut st.flags));
    assert_eq!(e.membership(0), Membership::Idle);
    assert!(!st.waiting());
    assert_eq!(a.live_refs(), 1);
    assert_eq!(
        (e.dequeued(QueueKind::Flow), e.dequeued(QueueKind::RcvArray)),
        (1, 0)
    );
}
