// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A request's flow ring on its own: lazily allocated records start zeroed
//! (SPEC §7), `find_flow_ib` finds the segment holding an IB PSN, the ring
//! refuses what SPEC says it must, and `free_flow_records` frees the records.
#![cfg(not(loom))]

use hfi1_hal::lock_order::LockToken;
use hfi1_hal::services::AllocContext;
use hfi1_hal::{FlowPsn, Psn};
use tid_flow::sim::{SimPlatform, new_ctxt, new_qp};
use tid_flow::{
    FlowError, FlowRing, QpLocked, Sge, TidRequest, clear_all_segments, clear_segment,
    setup_hw_flow, setup_segment,
};

const PAGE: u32 = 4096;

#[test]
fn records_start_zeroed_and_allocation_failure_is_enomem() {
    let rcd = new_ctxt(1, 0, 4, 2, 1).unwrap();
    let mut req: TidRequest<SimPlatform> = TidRequest::new(8 * PAGE, 6, 4096);
    assert!(!req.has_flows());
    rcd.mem.fail_in(0);
    assert_eq!(
        req.alloc_flows(&rcd.mem, AllocContext::Atomic),
        Err(FlowError::NoMemory)
    );
    assert!(!req.has_flows());
    req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
    req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
    assert_eq!(rcd.mem.live_allocations(), 1, "allocated once");
    assert_eq!(rcd.mem.atomic_allocations(), 1);
    for i in 0..8 {
        let f = req.flow(i).unwrap();
        assert_eq!(
            (
                f.pkt,
                f.tid_idx,
                f.tid_offset,
                f.sent,
                f.resync_npkts,
                f.npkts
            ),
            (0, 0, 0, 0, 0, 0)
        );
        assert!(f.pagesets.is_empty() && f.tid_entries.is_empty() && !f.is_programmed());
    }
    req.free_flow_records().unwrap();
    assert_eq!(rcd.mem.live_allocations(), 0);
    println!("flow ring: {} bytes", core::mem::size_of::<FlowRing>());
}

#[test]
fn ring_limits_and_find_flow_ib() {
    let rcd = new_ctxt(2, 0, 8, 2, 2).unwrap();
    let qp = new_qp(5, 0, 0);
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let mut req: TidRequest<SimPlatform> = TidRequest::new(4 * PAGE, 3, 4096);
    let sges: Vec<Sge> = (0..8u64)
        .map(|i| Sge {
            vaddr: 0x100_0000 + i * 0x10_0000,
            length: 4 * PAGE,
        })
        .collect();
    // No records yet: the setup refuses.
    assert_eq!(
        setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges),
        Err(FlowError::NoFlowRecords)
    );
    req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
    // Empty ring: clear refuses.
    assert_eq!(
        clear_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g)),
        Err(FlowError::Invalid)
    );
    setup_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g)).unwrap();
    let mut ib = Psn::new(0x7FFF_FFF0);
    for seg in 0..3u16 {
        setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges).unwrap();
        let rec = req.flow_mut(seg).unwrap();
        // 4 contiguous pages: one set + filler, 4 packets at 4 KiB.
        assert_eq!(rec.npkts, 4);
        assert_eq!(rec.psns.spsn, u32::from(seg) * 4);
        assert_eq!(rec.psns.lpsn, u32::from(seg) * 4 + 3);
        assert_eq!(
            rec.psns.r_next_psn,
            FlowPsn::new(rec.psns.generation, rec.psns.spsn)
        );
        assert_eq!(rec.length, 4 * PAGE);
        rec.psns.ib_spsn = ib;
        rec.psns.ib_lpsn = ib.add(3);
        ib = ib.add(4);
    }
    assert_eq!(g.ext.flow.psn, 12);
    // n_flows (3) segments in flight: the fourth is refused.
    assert_eq!(
        setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges),
        Err(FlowError::Invalid)
    );
    // PSNs across the 31-bit wrap find their segment.
    assert_eq!(
        req.find_flow_ib(Psn::new(0x7FFF_FFF0)).map(|f| f.0),
        Some(0)
    );
    assert_eq!(
        req.find_flow_ib(Psn::new(0x7FFF_FFF7)).map(|f| f.0),
        Some(1)
    );
    assert_eq!(
        req.find_flow_ib(Psn::new(0x7FFF_FFF8)).map(|f| f.0),
        Some(2)
    );
    assert_eq!(req.find_flow_ib(Psn::new(0x0000_0001)).map(|f| f.0), None);
    assert_eq!(req.find_flow_ib(Psn::new(0x7FFF_FFEF)).map(|f| f.0), None);
    // Cleared segments are not searched.
    clear_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g)).unwrap();
    assert_eq!(req.find_flow_ib(Psn::new(0x7FFF_FFF0)).map(|f| f.0), None);
    clear_all_segments(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g));
    assert_eq!(req.in_flight(), 0);
    req.free_flow_records().unwrap();
    drop(g);
    assert_eq!(rcd.dma.live_mappings(), 0);
    let mut s = qp.s_lock.lock(&mut root);
    let e = rcd.exp_lock.lock(s.token());
    assert_eq!(e.groups.entries_in_use(), 0);
    assert_eq!(e.chip.expected_entries(), 0);
}

/// `free_flow_records` frees the flow records whatever they hold, as the driver's
/// `__trdma_clean_swqe()` / `hfi1_kern_exp_rcv_free_flows()` do
/// (`kfree(req->flows)`), and reports a set-up segment it freed as
/// [`FlowError::Busy`]: a release its caller missed. The segment's RcvArray
/// entries then stay taken, as in the driver. (The crate used to refuse
/// and keep the records; the driver frees.)
#[test]
fn free_flow_records_frees_like_the_driver_and_reports_a_missed_release() {
    let rcd = new_ctxt(2, 0, 8, 2, 2).unwrap();
    let qp = new_qp(5, 0, 0);
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let mut req: TidRequest<SimPlatform> = TidRequest::new(4 * PAGE, 3, 4096);
    let sges = [Sge {
        vaddr: 0x100_0000,
        length: 8 * PAGE,
    }];
    req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
    setup_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g)).unwrap();
    setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges).unwrap();
    assert_eq!(req.free_flow_records(), Err(FlowError::Busy));
    assert!(!req.has_flows());
    assert_eq!(rcd.mem.live_allocations(), 0);
    // An empty request is freed without complaint.
    req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
    assert_eq!(req.free_flow_records(), Ok(()));
    let e = rcd.exp_lock.lock(g.token());
    assert_eq!(e.groups.entries_in_use(), 2, "lost with the records");
}

/// A setup that had to wait for RcvArray space keeps its page sets mapped
/// for the retry with nothing in the ring: `free_flow_records` reports that
/// mapping as a missed release too (the ring alone would look empty).
/// The debug output names the request and its cursors.
#[test]
fn free_flow_records_reports_the_mapping_of_a_setup_that_waited() {
    let rcd = new_ctxt(2, 0, 1, 2, 2).unwrap();
    let (a, b) = (new_qp(5, 0, 0), new_qp(6, 1, 0));
    let mut root = LockToken::root();
    let scattered = |base: u64| -> Vec<Sge> {
        (0..8u64)
            .map(|i| Sge {
                vaddr: base + i * 2 * u64::from(PAGE),
                length: PAGE,
            })
            .collect()
    };
    let mut reqs = Vec::new();
    for (qp, base) in [(&a, 0x100_0000u64), (&b, 0x800_0000)] {
        let mut g = qp.s_lock.lock(&mut root);
        let mut req: TidRequest<SimPlatform> = TidRequest::new(8 * PAGE, 1, 4096);
        req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
        setup_hw_flow(&rcd, qp, QpLocked::from_guard(&mut g)).unwrap();
        let r = setup_segment(
            &rcd,
            &mut req,
            qp,
            QpLocked::from_guard(&mut g),
            &scattered(base),
        );
        reqs.push((r, req));
    }
    let (ra, mut rb) = (reqs.remove(0), reqs.remove(0));
    assert_eq!(ra.0, Ok(()));
    assert_eq!(rb.0, Err(FlowError::Again), "b waits for the one group");
    assert_eq!(rb.1.in_flight(), 0);
    assert!(ra.1.holds_mappings(), "a's set-up segment is mapped");
    assert!(rb.1.holds_mappings());
    let shown = format!("{:?}", rb.1);
    assert!(
        shown.starts_with("TidRequest { allocated: true, setup_head: 0,"),
        "{shown}"
    );
    assert_eq!(rb.1.free_flow_records(), Err(FlowError::Busy));
    assert!(!rb.1.has_flows() && !rb.1.holds_mappings());
    // The driver loses that mapping with the records; the sim sees it.
    assert_eq!(rcd.dma.live_mappings(), 16);
    while rcd.sched.pop_work().is_some() {}
}
