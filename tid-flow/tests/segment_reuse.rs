// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A flow record is reused: cleared records take the next segment's pages
//! when the ring comes round to them again, and a mapping that failed
//! part-way leaves nothing mapped and nothing to undo.
#![cfg(not(loom))]

use hfi1_hal::lock_order::LockToken;
use hfi1_hal::services::AllocContext;
use tid_flow::sim::{SimPlatform, new_ctxt, new_qp};
use tid_flow::{
    FlowError, QpLocked, Sge, TidRequest, clear_all_segments, clear_hw_flow, clear_segment,
    setup_hw_flow, setup_segment,
};

const PAGE: u32 = 4096;

/// Pages `0..n`, none contiguous with the next: one page set each.
fn scattered(base: u64, n: u64) -> Vec<Sge> {
    (0..n)
        .map(|i| Sge {
            vaddr: base + i * 2 * u64::from(PAGE),
            length: PAGE,
        })
        .collect()
}

/// `hfi1_kern_exp_rcv_clear()` forgets the segment's page sets
/// (`flow->npagesets = 0`), so the record that comes round again on the
/// ring walks the scatter list anew. Twenty segments of two pages go
/// through a ring of eight records one at a time: every segment holds the
/// two pages that follow the previous one's, and each is mapped while it
/// is set up, its mapped page sets counted. With the page sets kept after
/// the clear, the ninth segment would program the first segment's pages
/// again.
#[test]
fn a_record_the_ring_comes_back_to_takes_the_next_pages() {
    let rcd = new_ctxt(1, 0, 2, 1, 4).unwrap();
    let qp = new_qp(3, 0, 0);
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let base = 0x200_0000u64;
    let sges = scattered(base, 40);
    let mut req: TidRequest<SimPlatform> = TidRequest::new(2 * PAGE, 1, 4096);
    req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
    setup_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g)).unwrap();
    for s in 0..20u64 {
        let slot = req.setup_head;
        setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges).unwrap();
        let f = req.flow(slot).unwrap();
        let addrs: Vec<u64> = f.pagesets.iter().map(|p| p.addr).collect();
        let first = base + 4 * s * u64::from(PAGE);
        assert_eq!(
            addrs,
            [first, first + 2 * u64::from(PAGE)],
            "segment {s} in record {slot}"
        );
        assert_eq!(f.mapped_sets(), 2);
        clear_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g)).unwrap();
        let f = req.flow(slot).unwrap();
        assert!(f.pagesets.is_empty(), "the clear forgets the page sets");
        assert_eq!(f.mapped_sets(), 0);
    }
    clear_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g));
    req.free_flow_records().unwrap();
    assert_eq!((rcd.dma.live_mappings(), rcd.dma.bad_unmaps()), (0, 0));
}

/// `dma_map_flow()` failing at the third of four page sets: the two mapped
/// before it are unmapped again, the QP waits for memory with the page
/// sets kept for the retry, and giving the request up then unmaps nothing
/// more (no set is mapped; an unmap of a set never mapped would be a bad
/// unmap). The retry maps all four.
#[test]
fn a_mapping_that_failed_part_way_leaves_nothing_to_undo() {
    let rcd = new_ctxt(1, 0, 2, 1, 5).unwrap();
    let qp = new_qp(3, 0, 0);
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let sges = scattered(0x300_0000, 8);
    let mut req: TidRequest<SimPlatform> = TidRequest::new(4 * PAGE, 1, 4096);
    req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
    setup_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g)).unwrap();

    rcd.dma.fail_in(2);
    let r = setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges);
    assert_eq!(r, Err(FlowError::NoMemory));
    let f = req.flow(0).unwrap();
    assert_eq!((f.pagesets.len(), f.mapped_sets()), (4, 0));
    assert!(!f.is_mapped());
    assert_eq!((rcd.dma.live_mappings(), rcd.dma.bad_unmaps()), (0, 0));
    drop(rcd.sched.cancel_kmem(&qp));
    g.flags.remove(qp_wait::SFlags::WAIT_KMEM);

    // The retry maps the kept sets.
    setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges).unwrap();
    assert_eq!(req.flow(0).unwrap().mapped_sets(), 4);
    assert_eq!(rcd.dma.live_mappings(), 4);
    clear_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g)).unwrap();

    // Fails again at the next segment's third set, then is given up.
    rcd.dma.fail_in(2);
    let r = setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges);
    assert_eq!(r, Err(FlowError::NoMemory));
    drop(rcd.sched.cancel_kmem(&qp));
    g.flags.remove(qp_wait::SFlags::WAIT_KMEM);
    clear_all_segments(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g));
    assert!(req.flow(1).unwrap().pagesets.is_empty());
    clear_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g));
    req.free_flow_records().unwrap();
    assert_eq!((rcd.dma.live_mappings(), rcd.dma.bad_unmaps()), (0, 0));
}
