// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A QP that waits for TID space as a requester and is moved to the error
//! state by a request it receives as a responder (`rvt_rc_error()` from
//! the READ responder's receive path).
//!
//! 6.1 leaves the TID wait queues only at reset (`flush_qp_waiters()` from
//! `_rvt_reset_qp()`; `rvt_error_qp()` → `notify_error_qp()` unwinds the
//! send-DMA wait only), so an errored QP at the head of the RcvArray queue
//! blocks the QPs behind it until then. The engine unwinds the TID wait as
//! soon as an entry errors the QP; these tests pin that the READ
//! responder's receive entries given the context do too, and that the
//! entries without it leave the wait to `flush`, which releases it.

mod common;

use common::lone;
use hfi1_hal::Psn;
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::sim::SimMemory;
use qp_wait::{QueueKind, SGuard};
use tid_flow::{RcvCtxt, Sge};
use tid_harness::doubles::{self, Outbox, PageAllocator, Regions};
use tid_harness::platform::{SoftPlatform, SoftQp, new_ctxt, new_qp};
use tid_read_proto::qp;
use tid_read_proto::rc::{QpState, WcStatus};
use tid_read_proto::responder::ReqVerdict;
use tid_read_proto::wire::aeth::NakCode;
use tid_read_proto::wire::{read_req, reth};

/// Two QPs on a context of one group; `a` refuses remote READs, so any
/// READ request it receives errors it.
struct World {
    rcd: Box<RcvCtxt<SoftPlatform>>,
    a: SoftQp,
    b: SoftQp,
    mem: SimMemory,
}

/// `a` and then `b` post a READ of 16 scattered pages (more RcvArray
/// entries than the one group has): both wait, `a` at the head.
fn both_waiting() -> World {
    let mut w = World {
        rcd: new_ctxt(1, 1, 4, 9).unwrap(),
        a: new_qp(0x100, 0, 0, lone::requester_conn(0x100), Psn::new(7)),
        b: new_qp(0x101, 1, 0, lone::requester_conn(0x101), Psn::new(7)),
        mem: SimMemory::new(),
    };
    for (qp, pfn) in [(&w.a, 0x100), (&w.b, 0x1000)] {
        let sges: Vec<Sge> = PageAllocator::new(pfn).scattered(16);
        doubles::map(&mut w.mem, &sges);
        lone::post_read(&w.rcd, qp, 5, &sges).unwrap();
    }
    let mut root = LockToken::root();
    while let Some(qp) = w.rcd.sched.pop_send() {
        let mut out = Outbox::new();
        qp::send_engine(&w.rcd, &qp, &mut root, &mut out).unwrap();
        assert_eq!(out.drain().count(), 0, "no segment fits one group");
    }
    assert_eq!(w.queue(), vec![0, 1]);
    w
}

impl World {
    /// The slots on the RcvArray queue, head first.
    fn queue(&self) -> Vec<u32> {
        let mut root = LockToken::root();
        let mut g = self.a.s_lock.lock(&mut root);
        let (_, tok) = g.parts();
        let e = self.rcd.exp_lock.lock(tok);
        assert_eq!(e.waiters.len(QueueKind::Flow), 0);
        e.waiters.iter(QueueKind::RcvArray).collect()
    }

    fn a_waits(&self) -> bool {
        self.a.s_lock.lock(&mut LockToken::root()).waiting()
    }

    /// Destroys both QPs the way the driver does and checks that nothing
    /// is held: no waiter, no QP reference, no mapping. Returns the
    /// completions the flushes gave, as (QP number, status).
    fn teardown(self, base: (usize, usize)) -> Vec<(u32, WcStatus)> {
        let mut done = Vec::new();
        for qp in [&self.a, &self.b] {
            let mut root = LockToken::root();
            let mut g = qp.s_lock.lock(&mut root);
            qp::flush(&self.rcd, qp, &mut g);
            assert!(!g.waiting());
            while let Some(c) = g.ext.requester.poll() {
                done.push((qp.qpn(), c.status));
            }
        }
        assert!(self.queue().is_empty());
        while self.rcd.sched.pop_work().is_some() {}
        while self.rcd.sched.pop_send().is_some() {}
        assert_eq!((self.a.live_refs(), self.b.live_refs()), base);
        assert_eq!(self.rcd.dma.live_mappings(), 0);
        assert_eq!(self.rcd.mem.live_allocations(), 0);
        done
    }

    /// Delivers to `a` a request (`deliver`) that its connection refuses
    /// (no remote READ): the QP goes to the error state with an
    /// INVALID_REQUEST NAK. Returns the QP references both QPs hold
    /// besides the wait queue's.
    fn error_a(
        &self,
        deliver: impl FnOnce(
            &RcvCtxt<SoftPlatform>,
            &SoftQp,
            &mut SGuard<'_, SoftPlatform>,
        ) -> ReqVerdict,
    ) -> (usize, usize) {
        let base = (self.a.live_refs() - 1, self.b.live_refs() - 1);
        let mut root = LockToken::root();
        let mut g = self.a.s_lock.lock(&mut root);
        let v = deliver(&self.rcd, &self.a, &mut g);
        assert_eq!(v, ReqVerdict::Refused(Some(NakCode::InvalidRequest)));
        assert_eq!(g.ext.state, QpState::Error);
        base
    }
}

/// The errored QP is off the queue at once and the queue's reference is
/// back; the QP behind it is the head now. Its send engine was scheduled
/// (`rvt_error_qp()` → `hfi1_schedule_send()`) and, run, completes the
/// READ it had posted flushed.
fn check_unwound(w: &World, base_a: usize) {
    assert!(!w.a_waits());
    assert_eq!(w.queue(), vec![1]);
    let sends: Vec<u32> = std::iter::from_fn(|| w.rcd.sched.pop_send())
        .map(|q| q.qpn())
        .collect();
    assert_eq!(sends, vec![0x100]);
    while w.rcd.sched.pop_work().is_some() {}
    assert_eq!(w.a.live_refs(), base_a);
    let mut root = LockToken::root();
    let mut out = Outbox::new();
    qp::send_engine(&w.rcd, &w.a, &mut root, &mut out).unwrap();
    assert_eq!(out.drain().count(), 0);
    let mut g = w.a.s_lock.lock(&mut root);
    assert_eq!(
        g.ext.requester.poll().map(|c| (c.wr_id, c.status)),
        Some((5, WcStatus::Flushed))
    );
    assert_eq!(g.ext.requester.outstanding(), 0);
}

/// Pins `hfi1_rc_rcv_tid_rdma_read_req()` → `rvt_rc_error()` on a QP at
/// the head of the RcvArray queue: with the context, the entry takes the
/// errored QP off the queue (the engine's rule for every entry that errors
/// the QP), so the QP behind it is not blocked until the errored one is
/// reset.
///
/// Fails with the unwind taken out (checked: `receive_read_req_in` lending
/// the guard's parts as `receive_read_req` does): `a` still waits at the
/// head of the queue, holding the queue's reference; with only the
/// schedule taken out (checked): no send engine is scheduled, and the
/// READ `a` posted stays outstanding until the destroy.
#[test]
fn a_read_req_that_errors_a_waiting_qp_takes_it_off_the_tid_queue() {
    let w = both_waiting();
    let base = w.error_a(|rcd, a, g| {
        let hdr = read_req::Repr::default();
        qp::receive_read_req_in(rcd, a, g, Psn::new(7), &hdr, &[], &Regions::new())
    });
    check_unwound(&w, base.0);
    assert_eq!(w.teardown(base), vec![(0x101, WcStatus::Flushed)]);
}

/// As the TID READ_REQ, for a plain RDMA READ request (`hfi1_rc_rcv()` →
/// `rvt_rc_error()`).
///
/// Fails with the unwind taken out (checked, as above): `a` still waits;
/// with only the schedule taken out (checked): no send engine scheduled.
#[test]
fn a_plain_read_that_errors_a_waiting_qp_takes_it_off_the_tid_queue() {
    let w = both_waiting();
    let base = w.error_a(|rcd, a, g| {
        let r = reth::Repr {
            vaddr: 0x1000,
            rkey: 1,
            length: 4096,
        };
        qp::receive_plain_read_in(rcd, a, g, Psn::new(7), &r, &Regions::new())
    });
    check_unwound(&w, base.0);
    assert_eq!(w.teardown(base), vec![(0x101, WcStatus::Flushed)]);
}

/// The entries without the context (`receive_read_req`,
/// `receive_plain_read`) leave the errored QP on the queue, as 6.1 does
/// until reset, and schedule no send engine; the destroy's `flush`
/// (`hfi1_tid_rdma_flush_wait()`) then takes it off, gives back the
/// queue's reference and completes the READ: nothing is held.
#[test]
fn without_the_context_the_wait_is_left_to_the_flush_which_releases_it() {
    let w = both_waiting();
    let base = w.error_a(|_, _, g| {
        let hdr = read_req::Repr::default();
        qp::receive_read_req::<SoftPlatform>(g, Psn::new(7), &hdr, &[], &Regions::new())
    });
    assert!(w.a_waits());
    assert_eq!(w.queue(), vec![0, 1]);
    assert_eq!(w.a.live_refs(), base.0 + 1, "the queue's reference");
    assert!(w.rcd.sched.pop_send().is_none());
    assert_eq!(
        w.teardown(base),
        vec![(0x100, WcStatus::Flushed), (0x101, WcStatus::Flushed)]
    );
}
