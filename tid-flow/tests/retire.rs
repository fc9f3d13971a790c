// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Retiring a segment writes INVALID into exactly the RcvArray entries its
//! groups took, partial groups included, and leaves another segment's
//! entries programmed; the release gives the entries back. Kernel: the
//! unprogramming step of `hfi1_kern_exp_rcv_clear()`.
#![cfg(not(loom))]

use hfi1_hal::RcvType;
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::services::AllocContext;
use tid_flow::sim::{SimPlatform, new_ctxt, new_qp};
use tid_flow::{
    QpLocked, Retired, Sge, TidRequest, release_retired, retire_segment, setup_hw_flow,
    setup_segment,
};

const PAGE: u32 = 4096;

/// Absolute RcvArray indices programmed EXPECTED now.
fn expected(e: &hfi1_hal::sim::SimContext) -> Vec<u32> {
    let base = e.expected_base();
    (base..base + e.entry_count())
        .filter(|&i| e.entry(i).is_some_and(|x| x.ty == RcvType::Expected))
        .collect()
}

/// Fails when the walk over a group's taken mask misses an entry
/// (checked: the loop stopped before each mask's last bit).
#[test]
fn retire_invalidates_exactly_the_segments_entries() {
    let rcd = new_ctxt(2, 0, 16, 2, 3).unwrap();
    let qp = new_qp(5, 0, 0);
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    // Segments of 13 pages: runs of 1, 3, 2, 1, 5 and 1 pages, so the
    // groups are left with partial, non-contiguous masks.
    let runs = [1u64, 3, 2, 1, 5, 1];
    let mut sges = Vec::new();
    let mut pfn = 0x1000u64;
    for _ in 0..2 {
        for &n in &runs {
            sges.push(Sge {
                vaddr: pfn << 12,
                length: n as u32 * PAGE,
            });
            pfn += n + 3;
        }
    }
    let seg = 13 * PAGE;
    let mut req: TidRequest<SimPlatform> = TidRequest::new(seg, 3, 4096);
    req.alloc_flows(&rcd.mem, AllocContext::Atomic).unwrap();
    setup_hw_flow(&rcd, &qp, QpLocked::from_guard(&mut g)).unwrap();
    setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges).unwrap();
    let first = {
        let (_, tok) = g.parts();
        expected(&rcd.exp_lock.lock(tok).chip)
    };
    setup_segment(&rcd, &mut req, &qp, QpLocked::from_guard(&mut g), &sges).unwrap();
    let both = {
        let (_, tok) = g.parts();
        expected(&rcd.exp_lock.lock(tok).chip)
    };
    let second: Vec<u32> = both
        .iter()
        .copied()
        .filter(|i| !first.contains(i))
        .collect();
    assert!(!first.is_empty() && !second.is_empty());

    let r = retire_segment(&*rcd, &mut req, QpLocked::from_guard(&mut g)).unwrap();
    assert_eq!(r.entries() as usize, first.len());
    assert!(!r.is_empty(), "a retired segment reserves its entries");
    assert!(Retired::default().is_empty());
    {
        let (_, tok) = g.parts();
        let e = rcd.exp_lock.lock(tok);
        assert_eq!(
            expected(&e.chip),
            second,
            "only the second segment's entries stay"
        );
        assert_eq!(
            e.groups.entries_in_use() as usize,
            both.len(),
            "still reserved"
        );
    }
    release_retired(&*rcd, &qp, QpLocked::from_guard(&mut g), r);
    let (_, tok) = g.parts();
    let e = rcd.exp_lock.lock(tok);
    assert_eq!(e.groups.entries_in_use() as usize, second.len());
}
