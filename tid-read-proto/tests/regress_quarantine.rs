// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The RcvArray quarantine's drain (a deviation from Linux 6.1, listed in
//! the requester module's deviations): a QP that keeps its hardware flow
//! (a TID READ it posted is unfinished) but has no segment set up gives
//! its quarantined entries back, the flow moving to a fresh generation,
//! as soon as another QP waits on the RcvArray queue. Without the drain
//! that QP waits for entries nobody will release until the holder's next
//! segment or its last READ happens to move the flow on; 6.1 has no
//! quarantine (it frees the entries at once, the late-copy hole).

mod common;

use common::{Kind, Pair, for_qp, kind};
use tid_harness::world::Setup;
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::rc::WcStatus;

/// The scenario: QP A (0) holds the whole context with a one-segment TID
/// READ, then posts a plain READ and a second TID READ, which the
/// interlock holds back until the plain READ is acknowledged; QP B (1)
/// waits on the RcvArray queue. With `seg_len` under 32 KiB A's first
/// READ is several segments, set up at once. Returns the pair, the
/// responses to A's first requests, and the `wr_id`s (A's three, B's
/// one).
fn holder_and_waiter(seg_len: u32) -> (Pair, Vec<Vec<u8>>, [u64; 4]) {
    let mut p = Pair::new(Setup {
        qps: 2,
        groups: 1,
        seg_len,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let a1 = p.post(0, 8);
    let a2 = p.post(0, 1);
    let a3 = p.post(0, 2);
    let b = p.post(1, 4);
    let reqs = p.send();
    let kinds: Vec<_> = reqs.iter().map(|r| kind(r)).collect();
    let segs = (32768 / seg_len) as usize;
    assert!(
        kinds.len() == segs + 1
            && kinds[..segs].iter().all(|k| matches!(k, Kind::TidReq(_)))
            && matches!(kinds[segs], Kind::PlainReq(_)),
        "A's TID READ takes every entry, its plain READ follows, its second \
         TID READ waits behind it, B waits for RcvArray space: {kinds:?}"
    );
    assert_eq!(for_qp(&reqs, 1).len(), 0);
    let resps = p.answer(&reqs);
    (p, resps, [a1, a2, a3, b])
}

/// Deviation kept: when a TID READ's last segment completes while the
/// QP keeps its flow for a later TID READ not yet set up, and another QP
/// waits on the RcvArray queue, the flow moves to a fresh generation
/// (`drain_regenerations`) and the quarantined entries go back at once:
/// the waiting QP B sends its READ_REQ at the very next send, while A's
/// plain READ is still unanswered. Kernel: none; 6.1 frees the entries
/// in `hfi1_rc_rcv_tid_rdma_read_resp()` (`hfi1_kern_exp_rcv_clear()`)
/// and wakes the RcvArray queue's head there.
///
/// Fails with the RcvArray queue not looked at (checked: its length
/// tested `< 0`, and the queue asked only when the QP itself waits): B
/// sends nothing at the next send, A's entries still quarantined. Fails
/// with the regeneration not counted (checked: `*=`):
/// `drain_regenerations` stays 0.
#[test]
fn a_waiter_on_the_rcvarray_queue_gets_the_holders_quarantine() {
    let (mut p, resps, [a1, a2, a3, b]) = holder_and_waiter(32768);
    let (tid, plain): (Vec<_>, Vec<_>) = resps
        .into_iter()
        .partition(|r| matches!(kind(r), Kind::TidResp(..)));
    assert_eq!(plain.len(), 1);
    p.give_requester(&tid);
    assert_eq!(p.done[0], [(a1, WcStatus::Success)]);
    assert_eq!(p.req_stats().drain_regenerations, 1);
    assert_eq!(p.requester(0, |r| r.quarantined_entries()), 0);
    let next = p.send();
    let bs = for_qp(&next, 1);
    assert!(
        matches!(bs[..], [ref r] if matches!(kind(r), Kind::TidReq(_))),
        "B requests its READ now: {:?}",
        next.iter().map(|r| kind(r)).collect::<Vec<_>>()
    );
    assert_eq!(for_qp(&next, 0).len(), 0, "A's second TID READ still waits");
    p.give_requester(&plain);
    let rb = p.answer(&next);
    p.give_requester(&rb);
    p.finish(0);
    assert_eq!(
        p.done[0],
        [
            (a1, WcStatus::Success),
            (a2, WcStatus::Success),
            (a3, WcStatus::Success)
        ]
    );
    assert_eq!(p.done[1], [(b, WcStatus::Success)]);
    p.teardown_clean();
}

/// While the holder still has a segment set up its quarantine stays: the
/// flow cannot move to a fresh generation under a live segment, so after
/// the first of A's two segments completes B still waits and nothing is
/// regenerated; B is served at the next send after A's second segment
/// completes (A's READ done, its next TID READ still held back).
///
/// Fails with the set-up segments not looked at (checked): A's entries
/// are released after its first segment.
#[test]
fn a_holder_with_a_segment_set_up_keeps_its_quarantine() {
    let (mut p, resps, [a1, a2, a3, b]) = holder_and_waiter(16384);
    let (tid, plain): (Vec<_>, Vec<_>) = resps
        .into_iter()
        .partition(|r| matches!(kind(r), Kind::TidResp(..)));
    assert_eq!(tid.len(), 8, "two segments of four packets");
    p.give_requester(&tid[..4]);
    assert!(p.done[0].is_empty());
    assert_eq!(p.requester(0, |r| r.quarantined_entries()), 4);
    assert_eq!(p.req_stats().drain_regenerations, 0);
    assert_eq!(p.send().len(), 0, "B still waits");
    p.give_requester(&tid[4..]);
    assert_eq!(p.done[0], [(a1, WcStatus::Success)]);
    assert_eq!(p.req_stats().drain_regenerations, 1);
    let next = p.send();
    assert!(
        matches!(for_qp(&next, 1)[..], [ref r] if matches!(kind(r), Kind::TidReq(_))),
        "B requests its READ now"
    );
    p.give_requester(&plain);
    let rb = p.answer(&next);
    p.give_requester(&rb);
    p.finish(0);
    assert_eq!(
        p.done[0],
        [
            (a1, WcStatus::Success),
            (a2, WcStatus::Success),
            (a3, WcStatus::Success)
        ]
    );
    assert_eq!(p.done[1], [(b, WcStatus::Success)]);
    p.teardown_clean();
}

/// The flow generation a TID READ_REQ names.
fn generation(p: &[u8]) -> hfi1_hal::Generation {
    match packet::parse(p).unwrap().1 {
        Parsed::ReadReq { hdr, .. } => hdr.flow_psn.generation(),
        _ => panic!("not a TID READ_REQ"),
    }
}

/// With nobody waiting for RcvArray space the holder's quarantine stays
/// and its flow keeps its generation: A's second TID READ, which fits in
/// the entries left free, is requested in the same generation as the
/// first, and no regeneration is counted. Kernel: the flow's generation
/// moves only when it is released (`hfi1_kern_clear_hw_flow()`); the
/// drain is this engine's, for a waiter only.
///
/// Fails with the drain run without a waiter (checked: the queue's
/// length tested `>= 0`): the second READ_REQ names the next generation.
#[test]
fn without_a_waiter_the_flow_keeps_its_generation() {
    let mut p = Pair::new(Setup {
        groups: 2,
        seg_len: 32768,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let a1 = p.post(0, 8);
    let a2 = p.post(0, 1);
    let a3 = p.post(0, 2);
    let reqs = p.send();
    let kinds: Vec<_> = reqs.iter().map(|r| kind(r)).collect();
    assert!(
        matches!(kinds[..], [Kind::TidReq(_), Kind::PlainReq(_)]),
        "the second TID READ waits behind the plain READ: {kinds:?}"
    );
    let first = generation(&reqs[0]);
    let resps = p.answer(&reqs);
    let (tid, plain): (Vec<_>, Vec<_>) = resps
        .into_iter()
        .partition(|r| matches!(kind(r), Kind::TidResp(..)));
    p.give_requester(&tid);
    assert_eq!(p.done[0], [(a1, WcStatus::Success)]);
    assert_eq!(p.requester(0, |r| r.quarantined_entries()), 8);
    p.give_requester(&plain);
    let next = p.send();
    assert!(
        matches!(next[..], [ref r] if matches!(kind(r), Kind::TidReq(_))),
        "the second TID READ goes"
    );
    assert_eq!(generation(&next[0]), first);
    assert_eq!(p.req_stats().drain_regenerations, 0);
    let r = p.answer(&next);
    p.give_requester(&r);
    assert_eq!(
        p.done[0],
        [
            (a1, WcStatus::Success),
            (a2, WcStatus::Success),
            (a3, WcStatus::Success)
        ]
    );
    assert_eq!(
        p.held(),
        0,
        "flow and quarantine released with the last READ"
    );
    p.teardown_clean();
}
