// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The QP's hardware flow outside setup and teardown: a requester that
//! restarts its segments moves its flow to the next generation and keeps
//! it; and what a context, a locked QP and a flow ring show of
//! themselves.
#![cfg(not(loom))]

use hfi1_hal::lock_order::LockToken;
use hfi1_hal::platform::FlowTable;
use hfi1_hal::services::{AllocContext, Memory};
use hfi1_hal::{FlowPsn, FlowTableReg, Generation};
use tid_flow::sim::{new_ctxt, new_qp};
use tid_flow::{FlowRing, QpLocked, clear_hw_flow, regenerate_hw_flow, setup_hw_flow};

/// The generation step of `hfi1_kern_clear_hw_flow()` and the arming of
/// `hfi1_kern_setup_hw_flow()` on the same flow: the QP keeps its flow
/// (still reserved, nobody else gets it), the flow and the QP move to the
/// next generation, the register is armed in it from sequence 0, and the
/// QP's flow PSN restarts. A QP without a flow is told so and nothing is
/// written. With the result forced either way, one of the two calls
/// answers wrongly.
#[test]
fn regenerate_keeps_the_flow_in_its_next_generation() {
    let rcd = new_ctxt(2, 0, 4, 2, 21).unwrap();
    let (qp, other) = (new_qp(1, 0, 0), new_qp(2, 1, 0));
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    assert!(!regenerate_hw_flow(&rcd, QpLocked::from_guard(&mut g)));
    assert_eq!(g.ext.flow.index, None);
    assert_eq!(g.ext.flow.generation, Generation::RESERVED);

    setup_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g)).unwrap();
    let f = g.ext.flow.index.unwrap();
    let old = g.ext.flow.generation;
    g.ext.flow.psn = 77;
    assert!(regenerate_hw_flow(&rcd, QpLocked::from_guard(&mut g)));
    let new = old.next();
    assert_eq!(g.ext.flow.index, Some(f));
    assert_eq!((g.ext.flow.generation, g.ext.flow.psn), (new, 0));
    {
        let e = rcd.exp_lock.lock(g.token());
        assert_eq!(e.flows.generation(f), new);
        assert!(e.flows.is_reserved(f));
        assert_eq!(e.flows.mask(), 1 << f.get());
        let reg = e.chip.read_flow(f);
        assert_eq!(reg.next_psn(), FlowPsn::new(new, 0));
        assert!(reg.has(FlowTableReg::FLOW_VALID));
    }
    drop(g);
    // The flow was not given back: another QP gets a different one.
    let mut h = other.s_lock.lock(&mut root);
    setup_hw_flow(&rcd, &other, QpLocked::from_guard(&mut h)).unwrap();
    assert_ne!(h.ext.flow.index, Some(f));
}

/// The context number a context was built with (the low byte of its
/// KDETH QPNs), and the debug output of a context, a locked QP and a flow
/// ring, which name what they are.
#[test]
fn a_context_and_a_locked_qp_show_themselves() {
    let rcd = new_ctxt(5, 0, 1, 1, 1).unwrap();
    assert_eq!(rcd.ctxt(), 5);
    assert_eq!(format!("{rcd:?}"), "RcvCtxt { ctxt: 5, .. }");
    let qp = new_qp(1, 0, 0);
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let shown = format!("{:?}", QpLocked::from_guard(&mut g));
    assert!(shown.starts_with("QpLocked { flags: "), "{shown}");
    // A request's flow ring shows its eight records.
    let ring = rcd
        .mem
        .try_box_in_place::<FlowRing>(AllocContext::Atomic)
        .unwrap();
    let shown = format!("{:?}", &*ring);
    assert!(shown.starts_with("[FlowRecord {"), "{shown}");
    assert_eq!(shown.matches("FlowRecord {").count(), 8);
}

/// `kern_reserve_flow()`'s preference: a QP that sets up a flow again gets
/// the one it held last when that is free, even with a lower one free. Two
/// QPs take flows 0 and 1 and give them back; the second then gets 1
/// again. With the last flow forgotten it would get 0.
#[test]
fn a_qp_gets_back_the_flow_it_held_last() {
    let rcd = new_ctxt(1, 0, 1, 2, 8).unwrap();
    let (a, b) = (new_qp(1, 0, 0), new_qp(2, 1, 0));
    let mut root = LockToken::root();
    let mut ga = a.s_lock.lock(&mut root);
    setup_hw_flow(&rcd, &a, QpLocked::from_guard(&mut ga)).unwrap();
    drop(ga);
    let mut gb = b.s_lock.lock(&mut root);
    setup_hw_flow(&rcd, &b, QpLocked::from_guard(&mut gb)).unwrap();
    let held = gb.ext.flow.index;
    assert_eq!(held.map(|f| f.get()), Some(1));
    drop(gb);
    for q in [&a, &b] {
        let mut g = q.s_lock.lock(&mut root);
        clear_hw_flow(&rcd, q, QpLocked::from_guard(&mut g));
    }
    let mut gb = b.s_lock.lock(&mut root);
    setup_hw_flow(&rcd, &b, QpLocked::from_guard(&mut gb)).unwrap();
    assert_eq!(gb.ext.flow.index, held);
    drop(gb);
    while rcd.sched.pop_work().is_some() {}
}
