// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the TID RDMA WRITE responder needs of a receive context: the
//! RESYNC re-arm of its flow, the queue and position after an `Again`,
//! and a page walk that starts at the write's offset into a region.
#![cfg(not(loom))]

use hfi1_hal::lock_order::LockToken;
use hfi1_hal::platform::FlowTable;
use hfi1_hal::{FlowPsn, FlowTableReg, Generation};
use qp_wait::QueueKind;
use tid_flow::sim::{SimPlatform, new_ctxt, new_qp};
use tid_flow::{
    FlowError, QpLocked, Sge, SgeCursor, TidRequest, clear_hw_flow, resync_hw_flow, setup_hw_flow,
    setup_segment, wait_position,
};

/// `hfi1_rc_rcv_tid_rdma_resync()`'s `exp_lock` block: with a flow, the
/// register is armed in the RESYNC's generation from sequence 0 (header
/// suppression on) and the QP's flow PSN restarts; without one, the
/// generation is saved and the next setup arms the flow in it. With the
/// save taken out (the no-flow branch doing nothing) the second QP keeps
/// the reserved generation and the test fails at its first check.
#[test]
fn resync_rearms_the_held_flow_or_saves_the_generation() {
    let rcd = new_ctxt(1, 0, 4, 2, 3).unwrap();
    let (a, b) = (new_qp(1, 0, 0), new_qp(2, 1, 0));
    let mut root = LockToken::root();
    let g9 = Generation::new(9).unwrap();
    {
        let mut g = a.s_lock.lock(&mut root);
        setup_hw_flow(&rcd, &a, QpLocked::from_guard(&mut g)).unwrap();
        g.ext.flow.psn = 300;
        let f = g.ext.flow.index.unwrap();
        assert!(resync_hw_flow(&rcd, QpLocked::from_guard(&mut g), g9));
        assert_eq!((g.ext.flow.generation, g.ext.flow.psn), (g9, 0));
        let e = rcd.exp_lock.lock(g.token());
        assert_eq!(e.flows.generation(f), g9);
        let reg = e.chip.read_flow(f);
        assert_eq!(reg.next_psn(), FlowPsn::new(g9, 0));
        assert!(reg.has(FlowTableReg::HDR_SUPP_EN) && reg.has(FlowTableReg::FLOW_VALID));
    }
    let g5 = Generation::new(5).unwrap();
    let mut g = b.s_lock.lock(&mut root);
    assert!(!resync_hw_flow(&rcd, QpLocked::from_guard(&mut g), g5));
    assert_eq!(g.ext.flow.generation, g5);
    assert!(g.ext.flow.index.is_none());
    setup_hw_flow(&rcd, &b, QpLocked::from_guard(&mut g)).unwrap();
    let f = g.ext.flow.index.unwrap();
    assert_eq!(g.ext.flow.generation, g5);
    let e = rcd.exp_lock.lock(g.token());
    assert_eq!(e.chip.read_flow(f).next_psn(), FlowPsn::new(g5, 0));
}

/// After an `Again` the caller learns which queue holds the QP and its
/// position there, read under `exp_lock`: the head is at 1, the next at 2,
/// and a QP that waits nowhere has none.
#[test]
fn again_reports_the_queue_and_position() {
    // 32 flows: hold them all with one QP each so two more must wait.
    let rcd = new_ctxt(1, 0, 4, 40, 4).unwrap();
    let holders: Vec<_> = (0..32).map(|i| new_qp(100 + i, i, 0)).collect();
    let mut root = LockToken::root();
    for q in &holders {
        let mut g = q.s_lock.lock(&mut root);
        setup_hw_flow(&rcd, q, QpLocked::from_guard(&mut g)).unwrap();
    }
    let (x, y) = (new_qp(1, 32, 0), new_qp(2, 33, 0));
    for (q, want) in [(&x, 1), (&y, 2)] {
        let mut g = q.s_lock.lock(&mut root);
        assert_eq!(
            setup_hw_flow(&rcd, q, QpLocked::from_guard(&mut g)),
            Err(FlowError::Again)
        );
        assert_eq!(
            wait_position(&rcd, q, QpLocked::from_guard(&mut g)),
            Some((QueueKind::Flow, want))
        );
    }
    {
        let mut g = holders[0].s_lock.lock(&mut root);
        assert_eq!(
            wait_position(&rcd, &holders[0], QpLocked::from_guard(&mut g)),
            None
        );
        clear_hw_flow(&rcd, &holders[0], QpLocked::from_guard(&mut g));
    }
    // x, woken, takes the flow and leaves; y moves up to 1.
    {
        let mut g = x.s_lock.lock(&mut root);
        setup_hw_flow(&rcd, &x, QpLocked::from_guard(&mut g)).unwrap();
    }
    let mut g = y.s_lock.lock(&mut root);
    assert_eq!(
        wait_position(&rcd, &y, QpLocked::from_guard(&mut g)),
        Some((QueueKind::Flow, 1))
    );
    drop(g);
    while rcd.sched.pop_work().is_some() {}
}

/// `rvt_skip_sge()`: the cursor lands in the SGE holding the offset; an
/// offset at an SGE's end is the next one's start, and the very end of the
/// list has nothing left. A segment set up from that cursor starts at that
/// page.
#[test]
fn a_walk_starts_at_a_byte_offset_into_the_sges() {
    let sges = [
        Sge {
            vaddr: 0x10_0000,
            length: 2 * 4096,
        },
        Sge {
            vaddr: 0x40_0000,
            length: 64 * 4096,
        },
    ];
    assert_eq!(
        SgeCursor::at_offset(&sges, 4096),
        Some(SgeCursor {
            isge: 0,
            offset: 4096
        })
    );
    assert_eq!(
        SgeCursor::at_offset(&sges, 2 * 4096),
        Some(SgeCursor { isge: 1, offset: 0 })
    );
    assert_eq!(SgeCursor::at_offset(&sges, 66 * 4096), None);
    let rcd = new_ctxt(1, 0, 16, 1, 5).unwrap();
    let qp = new_qp(1, 0, 0);
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let mut req: TidRequest<SimPlatform> = TidRequest::new(16 * 4096, 4, 4096);
    req.alloc_flows(&rcd.mem, hfi1_hal::services::AllocContext::Atomic)
        .unwrap();
    req.cursor = SgeCursor::at_offset(&sges, 3 * 4096).unwrap();
    setup_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g)).unwrap();
    setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges).unwrap();
    let first = req.flow(0).unwrap().pagesets.first().copied().unwrap();
    assert_eq!(first.addr, 0x40_1000, "the walk began one page into SGE 1");
    tid_flow::clear_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g)).unwrap();
}
