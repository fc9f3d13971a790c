// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA WRITE between two nodes, both halves real, on the harness's
//! two-node world (`tid_harness::TwoNodes`): the requester node's QP
//! (first leg, second leg from its scheduler's TID work, TID ACK receive)
//! against the responder node's (WRITE_REQ receive, allocation,
//! WRITE_RESP, its software chip placing WRITE_DATA into scattered region
//! pages, TID ACK), on a clean fabric. Every WRITE's bytes are checked in
//! the responder's pages when it completes, and after teardown nothing is
//! held on either node (TIDs, flows, queue places, QP references, region
//! references, DMA mappings, flow records).

use hfi1_hal::Psn;
use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST, OP_TID_RDMA_WRITE_REQ,
    OP_TID_RDMA_WRITE_RESP,
};
use hfi1_hal::lock_order::LockToken;
use tid_harness::platform::SoftPlatform;
use tid_harness::world::{Arrival, AtResponder, Done, Setup, TwoNodes};
use tid_read_proto::rc::WcStatus;
use tid_read_proto::wire::frame;
use tid_read_proto::write::requester::{TidAckVerdict, WriteRespVerdict};

const SEG: u32 = 256 * 1024;
/// The RC ACK opcode.
const OP_ACK: u8 = 0x11;

/// Packets carried, by kind, and the RNR timer expiries.
#[derive(Debug, Default)]
struct Counts {
    write_reqs: u64,
    data: u64,
    write_resps: u64,
    tid_acks: u64,
    rnr_waits: u64,
}

/// The two nodes: the responder node's context with `resp_groups` TID
/// groups, a writable region of `region_segs` segments.
fn pair(resp_groups: usize, region_segs: u64) -> TwoNodes<SoftPlatform> {
    TwoNodes::new(Setup {
        qps: 1,
        groups: 8,
        resp_groups,
        first_psn: Psn::new(100),
        write_region_len: region_segs * u64::from(SEG),
        ..Setup::default()
    })
    .unwrap()
}

/// Runs every engine of both nodes and carries every packet in order,
/// until nothing moves; then the requester's running timer fires (RNR
/// first, then the TID retry, then the RC retry, as simulated time would
/// reach it), and again, until none runs. Returns the completions.
fn run(n: &mut TwoNodes<SoftPlatform>, c: &mut Counts) -> Vec<Done> {
    let mut root = LockToken::root();
    let mut done = Vec::new();
    for _ in 0..10_000 {
        for r in n.run_requesters(&mut root) {
            r.result.unwrap();
        }
        let mut moved = false;
        while let Some(p) = n.to_responders.pop() {
            moved = true;
            match frame::parse(&p).unwrap().bth.opcode {
                OP_TID_RDMA_WRITE_REQ => c.write_reqs += 1,
                OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST => c.data += 1,
                op => panic!("the requester sent opcode {op:#x}"),
            }
            match n.deliver_to_responder(&p, &mut root) {
                AtResponder::WriteReq { .. } => {}
                AtResponder::WriteData { outcome, .. } => {
                    assert!(outcome.placed && outcome.error.is_none(), "{outcome:?}");
                }
                other => panic!("the responder did not take it: {other:?}"),
            }
        }
        for (_, r) in n.run_responders(64, &mut root) {
            r.unwrap();
        }
        while let Some(p) = n.to_requesters.pop() {
            moved = true;
            let op = frame::parse(&p).unwrap().bth.opcode;
            let at = n.deliver_to_requester(&p, &mut root);
            match (op, at.arrival) {
                (OP_TID_RDMA_WRITE_RESP, Arrival::WriteResp { verdict, .. }) => {
                    c.write_resps += 1;
                    assert_eq!(verdict, WriteRespVerdict::Taken);
                }
                (OP_TID_RDMA_ACK, Arrival::TidAck { verdict, .. }) => {
                    c.tid_acks += 1;
                    assert!(
                        matches!(verdict, TidAckVerdict::Acked { .. }),
                        "{verdict:?}"
                    );
                }
                (OP_ACK, Arrival::Ack { .. }) => {}
                (op, a) => panic!("the responder sent opcode {op:#x}: {a:?}"),
            }
            done.extend(at.done);
        }
        done.extend(n.poll(0, &mut root));
        if !moved && !fire_timer(n, c) {
            return done;
        }
    }
    panic!("no end after 10,000 rounds");
}

/// The requester's first running timer fires; false if none runs.
fn fire_timer(n: &mut TwoNodes<SoftPlatform>, c: &mut Counts) -> bool {
    let mut root = LockToken::root();
    let (retry, rnr) = n.timers(0, &mut root).unwrap();
    let tid = n.tid_retry_timer(0, &mut root).unwrap();
    if rnr.is_armed() {
        c.rnr_waits += 1;
        n.fire_rnr_timer(0, &mut root)
    } else if tid.is_armed() {
        n.fire_tid_retry_timer(0, &mut root)
    } else if retry.is_armed() {
        n.fire_timer(0, &mut root)
    } else {
        false
    }
}

/// Every completion a success of its length with every byte in the
/// responder's pages, in `want` order.
fn assert_landed(done: &[Done], want: &[(u64, u32)]) {
    let got: Vec<_> = done
        .iter()
        .map(|d| (d.completion.wr_id, d.completion.length, d.completion.status))
        .collect();
    let want: Vec<_> = want
        .iter()
        .map(|&(id, len)| (id, len, WcStatus::Success))
        .collect();
    assert_eq!(got, want);
    for d in done {
        let c = d.data.expect("a successful WRITE is checked");
        assert_eq!(
            (c.verified, c.mismatched),
            (u64::from(d.completion.length), 0),
            "{c:?}"
        );
    }
}

/// Teardown: nothing flushed, nothing held on either node.
fn assert_clean(n: &mut TwoNodes<SoftPlatform>) {
    let t = n.teardown(&mut LockToken::root());
    assert!(t.flushed.is_empty(), "{:?}", t.flushed);
    let held: Vec<_> = t.leaks.iter().filter(|&(_, v)| v != 0).collect();
    assert!(held.is_empty(), "{held:?}");
}

/// Kernel: the whole TID WRITE walk (`hfi1_make_rc_req()`,
/// `hfi1_rc_rcv_tid_rdma_write_req()`, `hfi1_build_tid_rdma_write_resp()`,
/// `hfi1_rc_rcv_tid_rdma_write_resp()`, `hfi1_do_tid_send()`,
/// `hfi1_rc_rcv_tid_rdma_write_data()`, `make_tid_rdma_ack()`,
/// `hfi1_rc_rcv_tid_rdma_ack()`). Three WRITEs (1, 2 and 5 segments of
/// 256 KiB) into the responder's scattered region complete successfully
/// with their byte counts, every byte in the responder's pages is the
/// source pattern, and after teardown nothing is held on either node.
#[test]
fn tid_writes_between_two_nodes_land_byte_for_byte() {
    let mut n = pair(64, 9);
    let mut root = LockToken::root();
    let mut want = Vec::new();
    for segs in [1, 2, 5] {
        let pages = n.pages.scattered(u64::from(segs * SEG / 4096));
        want.push((n.post_write(0, pages, &mut root).unwrap(), segs * SEG));
    }
    let mut c = Counts::default();
    let done = run(&mut n, &mut c);
    assert_landed(&done, &want);
    // 3 WRITE_REQs, 8 x 64 data packets (all from the second leg), 8
    // WRITE_RESPs; TID ACKs are coalesced (one may cover segments of
    // several WRITEs).
    assert_eq!(c.write_reqs, 3);
    assert_eq!(c.data, 8 * 64);
    assert_eq!(c.write_resps, 8);
    assert!((1..=8).contains(&c.tid_acks), "{c:?}");
    let w = n.requesters[0]
        .s_lock
        .lock(&mut root)
        .ext
        .requester
        .write_state()
        .stats;
    assert!(w.second_leg_runs > 0, "{w:?}");
    assert_clean(&mut n);
}

/// Kernel: `hfi1_tid_write_alloc_resources()`'s RNR NAK and the
/// requester's RNR case of `do_rc_ack()`. The responder has room for one
/// scattered segment at a time (8 groups, 64 entries): a 4-segment WRITE
/// is RNR-NAKed at each segment it cannot allocate, the requester waits
/// its RNR timer and sends the WRITE_REQ for the rest, and the WRITE
/// completes with every byte placed and nothing held.
#[test]
fn rnr_heavy_write_completes_one_segment_at_a_time() {
    let mut n = pair(8, 4);
    let mut root = LockToken::root();
    let pages = n.pages.scattered(u64::from(4 * SEG / 4096));
    let id = n.post_write(0, pages, &mut root).unwrap();
    let mut c = Counts::default();
    let done = run(&mut n, &mut c);
    assert_landed(&done, &[(id, 4 * SEG)]);
    assert!(c.rnr_waits > 0, "no RNR wait: {c:?}");
    assert_clean(&mut n);
}
