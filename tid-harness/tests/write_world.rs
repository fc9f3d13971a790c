// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA WRITE in the two-node world: WRITEs posted on the requester
//! node land in the responder node's scattered pages through its chip,
//! both second legs run from their schedulers, and every completion is
//! checked byte for byte against the responder's memory; afterwards
//! nothing is held on either node. READs and WRITEs mix on one QP.
#![cfg(feature = "std")]

use hfi1_hal::Psn;
use hfi1_hal::lock_order::LockToken;
use tid_harness::platform::SoftPlatform;
use tid_harness::world::{AtResponder, Done, Setup, TwoNodes};
use tid_read_proto::rc::WcStatus;

const SEG: u32 = 256 << 10;

fn nodes(qps: usize, resp_groups: usize, write_region: u64) -> TwoNodes<SoftPlatform> {
    TwoNodes::new(Setup {
        qps,
        groups: 16,
        resp_groups,
        first_psn: Psn::new(0x10),
        region_len: 64 << 20,
        write_region_len: write_region,
        ..Setup::default()
    })
    .unwrap()
}

/// Carries every packet over in order and runs every engine until nothing
/// moves; when nothing else can happen, every running timer fires (all
/// are due once the system is idle; firing only the first QP's would let
/// one QP's RNR retries starve another's). Returns the completions and how many deliveries the responder
/// did not take.
fn run(n: &mut TwoNodes<SoftPlatform>) -> (Vec<Done>, u64) {
    let mut root = LockToken::root();
    let mut done = Vec::new();
    let mut refused = 0;
    for _ in 0..100_000 {
        let mut moved = !n.run_requesters(&mut root).is_empty();
        while let Some(p) = n.to_responders.pop() {
            moved = true;
            match n.deliver_to_responder(&p, &mut root) {
                AtResponder::Received { .. }
                | AtResponder::WriteReq { .. }
                | AtResponder::WriteData { .. } => {}
                other => {
                    refused += 1;
                    eprintln!("not taken: {other:?}");
                }
            }
        }
        moved |= !n.run_responders(64, &mut root).is_empty();
        while let Some(p) = n.to_requesters.pop() {
            moved = true;
            done.extend(n.deliver_to_requester(&p, &mut root).done);
        }
        if !moved && !fire_one(n) {
            break;
        }
        if n.outstanding() == 0 && !moved {
            break;
        }
    }
    (done, refused)
}

fn fire_one(n: &mut TwoNodes<SoftPlatform>) -> bool {
    let mut root = LockToken::root();
    n.fire_timers(&mut root) > 0
}

fn assert_clean(n: &mut TwoNodes<SoftPlatform>) {
    let mut root = LockToken::root();
    let t = n.teardown(&mut root);
    assert!(t.flushed.is_empty(), "{:?}", t.flushed);
    let held: Vec<_> = t.leaks.iter().filter(|&(_, v)| v != 0).collect();
    assert!(held.is_empty(), "{held:?}");
}

/// Kernel: the TID WRITE walk between two engines
/// (`hfi1_rc_rcv_tid_rdma_write_req()`, `hfi1_build_tid_rdma_write_resp()`,
/// `hfi1_do_tid_send()`, `hfi1_rc_rcv_tid_rdma_write_data()`,
/// `make_tid_rdma_ack()`, `hfi1_rc_rcv_tid_rdma_ack()`), entered from the
/// world's actions. Three WRITEs of 1, 2 and 3 segments on two QPs land
/// byte for byte in the responder's scattered pages; nothing is held
/// after.
#[test]
fn writes_land_byte_for_byte_in_the_responder_pages() {
    let mut n = nodes(2, 64, 8 << 20);
    let mut root = LockToken::root();
    let mut want = 0u64;
    for (i, segs) in [(0, 1u32), (1, 2), (0, 3)] {
        let pages = n.pages.scattered(u64::from(segs * SEG / 4096));
        assert!(n.can_post_write(i, segs * SEG, &mut root));
        n.post_write(i, pages, &mut root).unwrap();
        want += u64::from(segs * SEG);
    }
    let (done, refused) = run(&mut n);
    assert_eq!(refused, 0);
    assert_eq!(done.len(), 3);
    let mut got = 0;
    for d in &done {
        assert_eq!(d.completion.status, WcStatus::Success, "{d:?}");
        assert!(d.posted.as_ref().unwrap().write);
        let c = d.data.unwrap();
        assert_eq!(c.mismatched, 0, "{c:?}");
        got += c.verified;
    }
    assert_eq!(got, want);
    let mut root = LockToken::root();
    let s = n.requester_stats(&mut root);
    let w = n.requesters[0]
        .s_lock
        .lock(&mut root)
        .ext
        .requester
        .write_state()
        .stats;
    assert_eq!(w.tid_writes, 2);
    assert!(w.second_leg_runs > 0, "{w:?} {s:?}");
    assert_clean(&mut n);
}

/// Kernel: `hfi1_tid_write_alloc_resources()` queueing and RNR-NAKing,
/// `do_rc_ack()`'s RNR case and the RNR timer, on the world's actions.
/// The responder context has room for one scattered segment (8 groups,
/// 64 entries): four QPs' 2-segment WRITEs go one segment at a time,
/// each completes with its bytes, nothing is held after.
#[test]
fn rnr_heavy_writes_complete_one_segment_at_a_time() {
    let mut n = nodes(4, 8, 1 << 20);
    let mut root = LockToken::root();
    for i in 0..4 {
        let pages = n.pages.scattered(u64::from(2 * SEG / 4096));
        n.post_write(i, pages, &mut root).unwrap();
    }
    let (done, refused) = run(&mut n);
    assert_eq!(refused, 0);
    assert_eq!(done.len(), 4);
    for d in &done {
        assert_eq!(d.completion.status, WcStatus::Success, "{d:?}");
        let c = d.data.unwrap();
        assert_eq!((c.verified, c.mismatched), (u64::from(2 * SEG), 0));
    }
    let mut root = LockToken::root();
    let rnr: u64 = n
        .responders
        .iter()
        .map(|q| q.s_lock.lock(&mut root).ext.write_responder.stats.rnr_sent)
        .sum();
    assert!(rnr > 0, "no RNR NAK with room for one segment");
    assert_clean(&mut n);
}

/// READs and WRITEs on one QP share its send queue, IB PSNs and ack
/// queue: each completes in order with its bytes checked (READ: its
/// destination; WRITE: the responder's pages), nothing held after.
#[test]
fn reads_and_writes_mix_on_one_qp() {
    let mut n = nodes(1, 32, 4 << 20);
    let mut root = LockToken::root();
    let mut order = Vec::new();
    for k in 0..4 {
        let pages = n.pages.scattered(u64::from(SEG / 4096));
        let id = if k % 2 == 0 {
            n.post_write(0, pages, &mut root).unwrap()
        } else {
            n.post(0, pages, &mut root).unwrap()
        };
        order.push(id);
    }
    let (done, refused) = run(&mut n);
    assert_eq!(refused, 0);
    let ids: Vec<_> = done.iter().map(|d| d.completion.wr_id).collect();
    assert_eq!(ids, order);
    for d in &done {
        assert_eq!(d.completion.status, WcStatus::Success, "{d:?}");
        let c = d.data.unwrap();
        assert_eq!((c.verified, c.mismatched), (u64::from(SEG), 0), "{d:?}");
    }
    assert_clean(&mut n);
}

/// The writable region is reused only behind completed WRITEs: a WRITE
/// that would overlap one in flight is refused, and one after the
/// earlier completed lands (the pages were wiped in between, so its
/// check sees only its own bytes).
#[test]
fn the_writable_region_wraps_only_behind_completed_writes() {
    let mut n = nodes(1, 32, u64::from(2 * SEG));
    let mut root = LockToken::root();
    for _ in 0..2 {
        let pages = n.pages.scattered(u64::from(SEG / 4096));
        n.post_write(0, pages, &mut root).unwrap();
    }
    assert!(!n.can_post_write(0, SEG, &mut root), "the region is full");
    let (done, _) = run(&mut n);
    assert_eq!(done.len(), 2);
    let mut root = LockToken::root();
    assert!(n.can_post_write(0, SEG, &mut root));
    let pages = n.pages.scattered(u64::from(SEG / 4096));
    n.post_write(0, pages, &mut root).unwrap();
    let (done, _) = run(&mut n);
    let c = done[0].data.unwrap();
    assert_eq!((c.verified, c.mismatched), (u64::from(SEG), 0));
    assert_clean(&mut n);
}
