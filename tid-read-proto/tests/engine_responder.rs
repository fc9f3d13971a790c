// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder engine: every validation and its NAK on the wire, the ack
//! queue, the READ_RESP stream, duplicates, and memory-region references
//! (SPEC §5 "Responder", "Duplicate READ_REQ", §7 MR references).

use hfi1_hal::consts::ACK_QUEUE_ENTRIES;
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::{FlowIndex, Generation, Psn, TidCtrl, TidEntry};
use tid_harness::doubles::{Outbox, Region, Regions, pattern};
use tid_harness::platform::{SoftPlatform, SoftQp, new_qp};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, Parsed, Path};
use tid_read_proto::qp;
use tid_read_proto::rc::{Connection, QpState};
use tid_read_proto::responder::ReqVerdict;
use tid_read_proto::segment_request::{ReadReq, ReadReqFlow};
use tid_read_proto::wire::aeth::NakCode;
use tid_read_proto::wire::read_req;

const BASE: u64 = 0x10_0000;
const LEN: u64 = 1 << 20;
const RKEY: u32 = 0x77;

/// The responder's one memory region.
fn mrs() -> Regions {
    let mut r = Regions::new();
    r.add(Region {
        base: BASE,
        len: LEN,
        rkey: RKEY,
    });
    r
}

fn responder(remote_read: bool) -> SoftQp {
    let local = TidParams::local(2, 32, 14, false);
    let remote = TidParams::local(1, 32, 14, false);
    let conn = Connection {
        verbs_qpn: 0x400,
        remote_verbs_qpn: 0x100,
        local,
        remote,
        pmtu: 4096,
        path: Path { dlid: 1, slid: 2 },
        max_rd_atomic: 16,
        remote_read,
        ..Connection::default()
    };
    new_qp(0x400, 0, 0, conn, Psn::new(100))
}

/// A READ_REQ for `pages` one-page TID entries.
struct Req {
    hdr: read_req::Repr,
    payload: Vec<u8>,
    psn: Psn,
}

fn req(psn: u32, g: u32, pages: u32, len: u32, rkey: u32, vaddr: u64) -> Req {
    let entries: Vec<TidEntry> = (0..pages)
        .map(|i| {
            TidEntry::new(
                i / 2,
                if i % 2 == 0 {
                    TidCtrl::Even
                } else {
                    TidCtrl::Odd
                },
                1,
            )
            .unwrap()
        })
        .collect();
    let f = ReadReqFlow {
        entries: &entries,
        generation: Generation::new(g).unwrap(),
        spsn: 0,
        pkt: 0,
        sent: 0,
        ib_spsn: Psn::new(psn),
        flow: FlowIndex::new(3).unwrap(),
        local_qp: 0x80_0001,
        ctxt: 1,
        remote_qp: 0x80_0002,
        remote_jkey: 32,
        remote_verbs_qp: 0x400,
        remote_addr: vaddr,
        rkey,
        cur_seg: 0,
        seg_len: len,
        len,
    };
    let r = ReadReq::build(&f);
    let mut payload = vec![0u8; entries.len() * 4];
    tid_read_proto::wire::tid_entries::emit(&entries, &mut payload).unwrap();
    Req {
        hdr: r.header,
        payload,
        psn: r.bth_psn,
    }
}

/// One-page TID READs at PSN 100 on until the ack queue has no slot left
/// (one fewer than its entries); returns the next PSN.
fn fill_queue(qp: &SoftQp, mrs: &Regions) -> u32 {
    let mut psn = 100;
    for _ in 0..ACK_QUEUE_ENTRIES - 1 {
        assert_eq!(
            deliver(qp, &req(psn, 1, 1, 4096, RKEY, BASE), mrs),
            ReqVerdict::Accepted
        );
        psn += 1;
    }
    psn
}

fn deliver(qp: &SoftQp, r: &Req, mrs: &Regions) -> ReqVerdict {
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    qp::receive_read_req::<SoftPlatform>(&mut g, r.psn, &r.hdr, &r.payload, mrs)
}

fn send_all(qp: &SoftQp, mrs: &Regions) -> Vec<Vec<u8>> {
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let mut sink = Outbox::new();
    while qp::send_responses::<SoftPlatform>(&mut g, mrs, mrs, &mut sink, 4).unwrap() {}
    sink.drain().collect()
}

/// The PSN the responder expects next.
fn expected_psn(qp: &SoftQp) -> Psn {
    let mut root = LockToken::root();
    qp.s_lock.lock(&mut root).ext.responder.expected_psn()
}

fn nak_of(p: &[u8]) -> Option<(u8, Psn)> {
    match packet::parse(p).unwrap().1 {
        Parsed::Ack { bth, aeth } => Some((aeth.syndrome, bth.psn)),
        _ => None,
    }
}

#[test]
fn accepted_request_streams_one_resp_per_page_and_releases_its_mr() {
    let qp = responder(true);
    let mrs = mrs();
    let r = req(100, 5, 8, 8 * 4096, RKEY, BASE);
    assert_eq!(deliver(&qp, &r, &mrs), ReqVerdict::Accepted);
    assert_eq!(mrs.refs(), 1);
    let pkts = send_all(&qp, &mrs);
    assert_eq!(pkts.len(), 8);
    for (i, p) in pkts.iter().enumerate() {
        let Parsed::ReadResp { bth, hdr, payload } = packet::parse(p).unwrap().1 else {
            panic!("not a READ_RESP");
        };
        assert_eq!(hdr.verbs_psn, Psn::new(100 + i as u32));
        assert_eq!(bth.psn.get(), 5 << 11 | i as u32);
        assert_eq!(bth.dest_qp, 0x80_0001 | 3 << 11 | 1);
        assert_eq!(hdr.kdeth.kdeth0.sh(), i != 7, "SH on all but the last");
        assert_eq!(payload.len(), 4096);
        assert_eq!(payload[0], pattern(BASE + 4096 * i as u64));
    }
    assert_eq!(mrs.refs(), 0, "released when the entry is sent");
    assert_eq!(expected_psn(&qp), Psn::new(108));
}

#[test]
fn each_validation_earns_its_nak() {
    let mrs = mrs();
    let cases = [
        (
            responder(false),
            req(100, 1, 2, 8192, RKEY, BASE),
            NakCode::InvalidRequest,
        ),
        (
            responder(true),
            req(100, 1, 2, 8000, RKEY, BASE),
            NakCode::InvalidRequest,
        ),
        (
            responder(true),
            req(100, 1, 2, 8192, RKEY + 1, BASE),
            NakCode::RemoteAccessError,
        ),
        (
            responder(true),
            req(100, 1, 2, 8192, RKEY, BASE + LEN),
            NakCode::RemoteAccessError,
        ),
        (
            responder(true),
            req(100, 1, 1, 8192, RKEY, BASE),
            NakCode::InvalidRequest,
        ),
        (
            responder(true),
            req(105, 1, 2, 8192, RKEY, BASE),
            NakCode::PsnError,
        ),
    ];
    for (qp, r, code) in cases {
        assert_eq!(deliver(&qp, &r, &mrs), ReqVerdict::Refused(Some(code)));
        let pkts = send_all(&qp, &mrs);
        assert_eq!(pkts.len(), 1);
        assert_eq!(nak_of(&pkts[0]), Some((code.syndrome(), Psn::new(100))));
        assert_eq!(mrs.refs(), 0, "no MR reference kept by a refused request");
    }
}

#[test]
fn one_psn_nak_per_episode() {
    let qp = responder(true);
    let mrs = mrs();
    let ahead = req(110, 1, 2, 8192, RKEY, BASE);
    assert_eq!(
        deliver(&qp, &ahead, &mrs),
        ReqVerdict::Refused(Some(NakCode::PsnError))
    );
    assert_eq!(deliver(&qp, &ahead, &mrs), ReqVerdict::Refused(None));
    assert_eq!(send_all(&qp, &mrs).len(), 1);
    // An in-sequence request ends the episode.
    assert_eq!(
        deliver(&qp, &req(100, 1, 2, 8192, RKEY, BASE), &mrs),
        ReqVerdict::Accepted
    );
    assert_eq!(
        deliver(&qp, &req(110, 1, 2, 8192, RKEY, BASE), &mrs),
        ReqVerdict::Refused(Some(NakCode::PsnError))
    );
}

/// The responder errors its QP where the kernel calls `rvt_rc_error()`,
/// here for a full ack queue, and a NAK earned while responses are
/// pending is dropped in the error state. A request that finds the ack
/// queue full (24 entries not yet sent: the queue's 25 slots less the
/// one that stays free) is refused with a remote operational error and
/// the QP goes to the error state: every region reference is dropped;
/// its NAK, deferred behind the 24 pending responses, is dropped
/// (`naks_dropped`) rather than handed to the send engine; nothing more
/// is sent and every later request is dropped.
/// Kernel: the queue-full branch of `hfi1_rc_rcv_tid_rdma_read_req()`
/// (`nack_inv_unlock` → `rvt_rc_error()`, `rc_defered_ack()`), then
/// `hfi1_send_rc_ack()`, which with `RVT_S_RESP_PENDING` set goes to
/// `hfi1_queue_rc_ack()`, which drops the NAK for a QP not
/// `RVT_PROCESS_RECV_OK`. With no response pending the same error NAK is
/// sent at once (`invalid_read_req_errors_the_responder_qp`).
///
/// Fails with the refusal only queueing a NAK (checked: `rc_error` not
/// setting the error state, as the engine had it): the QP stays in RTS
/// and the next request is taken. Fails with the drop taken out
/// (checked: `defer_nak` handing the NAK to the send engine in the error
/// state): `naks_dropped` stays 0; the wire is the same, as the send
/// engine sends nothing in the error state (`make_rc_ack()` bails there
/// too). Dropping every NAK in the error state instead (checked) fails
/// `invalid_read_req_errors_the_responder_qp` and
/// `each_validation_earns_its_nak`, not this test.
#[test]
fn a_full_ack_queue_errors_the_qp_and_its_nak_is_dropped_behind_responses() {
    let qp = responder(true);
    let mrs = mrs();
    let psn = fill_queue(&qp, &mrs);
    assert_eq!(
        deliver(&qp, &req(psn, 1, 1, 4096, RKEY, BASE), &mrs),
        ReqVerdict::Refused(Some(NakCode::RemoteOperationalError))
    );
    let mut root = LockToken::root();
    {
        let g = qp.s_lock.lock(&mut root);
        assert_eq!(g.ext.state, QpState::Error);
        assert_eq!(g.ext.responder.stats.naks_dropped, 1);
        let full = g.ext.responder.last_queue_full().unwrap();
        assert_eq!((full.psn, full.blocker), (Psn::new(psn), Psn::new(100)));
    }
    assert_eq!(mrs.refs(), 0, "the error state drops every reference");
    assert!(send_all(&qp, &mrs).is_empty(), "nothing more is sent");
    assert_eq!(
        deliver(&qp, &req(psn, 1, 1, 4096, RKEY, BASE), &mrs),
        ReqVerdict::Refused(None)
    );
}

#[test]
fn duplicate_restarts_only_from_the_start_with_the_same_length() {
    let qp = responder(true);
    let mrs = mrs();
    let first = req(100, 1, 4, 4 * 4096, RKEY, BASE);
    let second = req(104, 1, 4, 4 * 4096, RKEY, BASE + 4 * 4096);
    assert_eq!(deliver(&qp, &first, &mrs), ReqVerdict::Accepted);
    assert_eq!(deliver(&qp, &second, &mrs), ReqVerdict::Accepted);
    assert_eq!(send_all(&qp, &mrs).len(), 8);
    // An exact copy restarts the entry (a requester restarts with the
    // same flow PSNs; a fabric copy looks the same): its 4 packets again.
    assert_eq!(deliver(&qp, &first, &mrs), ReqVerdict::Restarted);
    assert_eq!(send_all(&qp, &mrs).len(), 4);
    // Another length, or not the start of an entry: ignored.
    assert_eq!(
        deliver(&qp, &req(100, 2, 4, 2 * 4096, RKEY, BASE), &mrs),
        ReqVerdict::Refused(None)
    );
    assert_eq!(
        deliver(&qp, &req(101, 2, 4, 4 * 4096, RKEY, BASE), &mrs),
        ReqVerdict::Refused(None)
    );
    // A retransmit in a new generation: the entry (only) is sent again.
    assert_eq!(
        deliver(&qp, &req(100, 2, 4, 4 * 4096, RKEY, BASE), &mrs),
        ReqVerdict::Restarted
    );
    let again = send_all(&qp, &mrs);
    assert_eq!(again.len(), 4);
    let Parsed::ReadResp { bth, hdr, .. } = packet::parse(&again[0]).unwrap().1 else {
        panic!()
    };
    assert_eq!((bth.psn.get() >> 11, hdr.verbs_psn), (2, Psn::new(100)));
    assert_eq!(mrs.refs(), 0);
    assert_eq!(expected_psn(&qp), Psn::new(108));
}

/// SPEC §7: memory-region references are released when ack-queue
/// entries are reused (here already when an entry's last packet is sent,
/// and on reuse for an entry that still holds one), and on destroy.
///
/// Fails without the fix (checked): without the release at the last
/// packet (`send_responses`) and at reuse (`receive_read_req`), the first
/// request already leaves its reference held after it was sent.
#[test]
fn mr_references_are_released_on_reuse_and_destroy() {
    let qp = responder(true);
    let mrs = mrs();
    // 20 requests through the ring: entries are reused.
    for i in 0..20u32 {
        assert_eq!(
            deliver(&qp, &req(100 + 2 * i, 1, 2, 8192, RKEY, BASE), &mrs),
            ReqVerdict::Accepted,
            "request {i}"
        );
        assert_eq!(send_all(&qp, &mrs).len(), 2);
        let mut root = LockToken::root();
        let held = qp.s_lock.lock(&mut root).ext.responder.mr_refs();
        assert_eq!(mrs.refs(), held as u64, "request {i}");
        assert_eq!(held, 0, "request {i}: references left after sending");
    }
    let qp = responder(true);
    assert_eq!(
        deliver(&qp, &req(100, 1, 2, 8192, RKEY, BASE), &mrs),
        ReqVerdict::Accepted
    );
    assert_eq!(mrs.refs(), 1);
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    assert_eq!(g.ext.responder.mr_refs(), 1);
    g.ext.responder.release_all(&mrs);
    assert_eq!(g.ext.responder.mr_refs(), 0);
    assert_eq!(mrs.refs(), 0);
}

/// The PSNs of the READ_RESPs in `pkts`, in order.
fn resp_psns(pkts: &[Vec<u8>]) -> Vec<u32> {
    pkts.iter()
        .filter_map(|p| match packet::parse(p).unwrap().1 {
            Parsed::ReadResp { hdr, .. } => Some(hdr.verbs_psn.get()),
            _ => None,
        })
        .collect()
}

fn state(qp: &SoftQp) -> QpState {
    let mut root = LockToken::root();
    qp.s_lock.lock(&mut root).ext.state
}

/// A READ_REQ of a bad length (checked before its PSN) earns an invalid
/// request NAK, sent at once (no response is pending), and moves the QP
/// to the error state: every region reference dropped, the next valid
/// request dropped, nothing more sent. Kernel: `nack_inv` of
/// `hfi1_rc_rcv_tid_rdma_read_req()` → `rvt_rc_error()`, and
/// `hfi1_send_rc_ack()`.
///
/// Fails with the refusal only queueing its NAK (checked: `rc_error` not
/// setting the error state, as the engine had it): the QP stays in RTS.
#[test]
fn invalid_read_req_errors_the_responder_qp() {
    let qp = responder(true);
    let mrs = mrs();
    assert_eq!(
        deliver(&qp, &req(100, 1, 2, 8192, RKEY, BASE), &mrs),
        ReqVerdict::Accepted
    );
    assert_eq!(mrs.refs(), 1);
    let sent = send_all(&qp, &mrs);
    assert_eq!(sent.len(), 2);
    assert_eq!(
        deliver(&qp, &req(102, 1, 2, 4095, RKEY, BASE), &mrs),
        ReqVerdict::Refused(Some(NakCode::InvalidRequest))
    );
    assert_eq!(state(&qp), QpState::Error);
    let nak = send_all(&qp, &mrs);
    assert_eq!(nak.len(), 1);
    assert_eq!(nak_of(&nak[0]), Some((0x61, Psn::new(102))));
    assert_eq!(
        deliver(&qp, &req(102, 1, 2, 8192, RKEY, BASE), &mrs),
        ReqVerdict::Refused(None)
    );
    assert!(send_all(&qp, &mrs).is_empty());
    assert_eq!(mrs.refs(), 0);
}

/// A duplicate READ_REQ rewinds the send pointer to its entry: that entry
/// and every later one a duplicate re-armed are sent again, up to the
/// first entry no duplicate touched (sent before, its region released),
/// where the pointer parks at the head. Kernel: `tid_rdma_rcv_error()`
/// (READ: `find_prev_entry()`, the rewind of `s_tail_ack_queue`) and
/// `make_rc_ack()` (the `len && !mr` stop).
///
/// Fails with the park taken out (checked: the `len && !mr` stop ignored,
/// which is what the engine's old rule, re-armed entries served from a
/// set, came to): A's and C's packets go out at once after their
/// duplicates; with the rewind taken out (checked) nothing goes out.
#[test]
fn duplicate_read_req_rewinds_and_resends_up_to_the_first_untouched_entry() {
    let qp = responder(true);
    let mrs = mrs();
    let a = req(100, 1, 2, 8192, RKEY, BASE);
    let b = req(102, 1, 2, 8192, RKEY, BASE + 8192);
    let c = req(104, 1, 2, 8192, RKEY, BASE + 16384);
    for r in [&a, &b, &c] {
        assert_eq!(deliver(&qp, r, &mrs), ReqVerdict::Accepted);
    }
    assert_eq!(send_all(&qp, &mrs).len(), 6);
    assert_eq!(deliver(&qp, &a, &mrs), ReqVerdict::Restarted);
    assert_eq!(deliver(&qp, &c, &mrs), ReqVerdict::Restarted);
    assert_eq!(
        resp_psns(&send_all(&qp, &mrs)),
        [100, 101],
        "A, then the park at B"
    );
    assert_eq!(deliver(&qp, &b, &mrs), ReqVerdict::Restarted);
    assert_eq!(resp_psns(&send_all(&qp, &mrs)), [102, 103, 104, 105]);
    assert_eq!(mrs.refs(), 0);
}

/// A duplicate of an entry still waiting to be sent re-arms it in place
/// and rewinds nothing: the queue goes out once, in order. Kernel: the
/// `old_req` of `find_prev_entry()` / `tid_rdma_rcv_error()`.
///
/// Fails with the rewind done for it too (checked): the pointer jumps to
/// B and A's packets are never sent.
#[test]
fn duplicate_of_a_queued_entry_does_not_rewind() {
    let qp = responder(true);
    let mrs = mrs();
    let a = req(100, 1, 2, 8192, RKEY, BASE);
    let b = req(102, 1, 2, 8192, RKEY, BASE + 8192);
    assert_eq!(deliver(&qp, &a, &mrs), ReqVerdict::Accepted);
    assert_eq!(deliver(&qp, &b, &mrs), ReqVerdict::Accepted);
    assert_eq!(deliver(&qp, &b, &mrs), ReqVerdict::Restarted);
    assert_eq!(resp_psns(&send_all(&qp, &mrs)), [100, 101, 102, 103]);
}

/// The `read_pair` finding, at the responder: 12 entries sent, then a
/// stale duplicate of each (the requester had completed them all), then
/// new requests: the first duplicate rewinds the send pointer to entry 0
/// and re-arms it, so the thirteenth new request (the head has gone
/// round the 25 slots to the one before entry 0) needs the slot of an
/// unsent entry: refused with a remote operational error, and the QP
/// errors. No requester keeping `max_rd_atomic` (16) outstanding gets
/// there without the stale duplicates.
/// This is what Linux 6.1 does (the kernel does not survive this
/// sequence; the fuzz world accepts that outcome).
/// Kernel: `tid_rdma_rcv_error()`'s rewind and the queue-full rule of
/// `hfi1_rc_rcv_tid_rdma_read_req()` (`next == s_tail_ack_queue` with
/// `!sent`).
///
/// Fails with the rewind taken out (checked): the thirteenth new request
/// is accepted (without the rewind there is room for 24 new ones).
#[test]
fn stale_duplicates_fill_the_ack_queue_as_in_the_kernel() {
    let qp = responder(true);
    let mrs = mrs();
    let at = |k: u32| req(100 + k, 1, 1, 4096, RKEY, BASE + 4096 * u64::from(k));
    for k in 0..12 {
        assert_eq!(deliver(&qp, &at(k), &mrs), ReqVerdict::Accepted);
    }
    assert_eq!(send_all(&qp, &mrs).len(), 12);
    for k in 0..12 {
        assert_eq!(deliver(&qp, &at(k), &mrs), ReqVerdict::Restarted);
    }
    let last = ACK_QUEUE_ENTRIES as u32 - 1;
    for k in 12..last {
        assert_eq!(deliver(&qp, &at(k), &mrs), ReqVerdict::Accepted, "new {k}");
    }
    assert_eq!(
        deliver(&qp, &at(last), &mrs),
        ReqVerdict::Refused(Some(NakCode::RemoteOperationalError))
    );
    assert_eq!(state(&qp), QpState::Error);
    let mut root = LockToken::root();
    let g = qp.s_lock.lock(&mut root);
    let full = g.ext.responder.last_queue_full();
    assert_eq!(
        full.map(|f| f.blocker),
        Some(Psn::new(100)),
        "entry 0 blocked it"
    );
    assert_eq!(g.ext.responder.stats.queue_full, 1, "one refusal counted");
    drop(g);
    assert_eq!(mrs.refs(), 0);
}

/// A QP put in the error state by its requester side (the retry budget
/// spent: the requester's error path, which leaves the responder's ack
/// queue alone) still holds the region reference of a
/// READ it had accepted. The next request that reaches it is dropped and
/// counted, and the reference is given back then; the one after that is
/// counted too. Kernel: the receive path's state check
/// (`RVT_PROCESS_RECV_OK`).
#[test]
fn a_request_in_the_error_state_is_dropped_and_gives_the_references_back() {
    let qp = responder(true);
    let mrs = mrs();
    assert_eq!(
        deliver(&qp, &req(100, 1, 2, 8192, RKEY, BASE), &mrs),
        ReqVerdict::Accepted
    );
    assert_eq!(mrs.refs(), 1);
    let mut root = LockToken::root();
    // What the requester's error path does to the QP's state.
    qp.s_lock.lock(&mut root).ext.state = QpState::Error;
    assert_eq!(mrs.refs(), 1, "the responder's entry still holds it");
    for n in 1..=2 {
        assert_eq!(
            deliver(&qp, &req(101, 1, 2, 8192, RKEY, BASE), &mrs),
            ReqVerdict::Refused(None)
        );
        let g = qp.s_lock.lock(&mut root);
        assert_eq!(g.ext.responder.stats.dropped_in_error, n);
        assert_eq!(g.ext.responder.mr_refs(), 0);
    }
    assert_eq!(mrs.refs(), 0, "given back by the first dropped request");
    assert!(send_all(&qp, &mrs).is_empty(), "nothing is sent");
}

/// A plain RDMA READ of one page at PSN `psn`.
fn plain(qp: &SoftQp, psn: u32, mrs: &Regions) -> ReqVerdict {
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let r = tid_read_proto::wire::reth::Repr {
        vaddr: BASE,
        rkey: RKEY,
        length: 4096,
    };
    qp::receive_plain_read::<SoftPlatform>(&mut g, Psn::new(psn), &r, mrs)
}

/// The queue full of TID READs, every one answered: a duplicate of the
/// oldest re-arms it and moves the send pointer back to it, and with it
/// the acknowledged pointer (they were together), so the slot after the
/// head holds an entry waiting to be sent again. A new plain READ, whose
/// room is counted from the acknowledged pointer, then finds none and
/// errors the QP (INVALID_REQUEST), as 6.1's queue-full rule does.
/// Kernel: the end of `tid_rdma_rcv_error()` (`s_acked_ack_queue`
/// follows `s_tail_ack_queue` back when they were equal) and the RDMA
/// READ case of `hfi1_rc_rcv()` (`next == s_acked_ack_queue` with the
/// entry not sent). With the acknowledged pointer left where it was
/// (checked), the new READ was accepted into the slot being resent.
#[test]
fn a_duplicate_rewinds_the_acknowledged_pointer_with_the_send_pointer() {
    let qp = responder(true);
    let mrs = mrs();
    let psn = fill_queue(&qp, &mrs);
    assert_eq!(send_all(&qp, &mrs).len(), ACK_QUEUE_ENTRIES - 1);
    assert_eq!(
        deliver(&qp, &req(100, 1, 1, 4096, RKEY, BASE), &mrs),
        ReqVerdict::Restarted
    );
    assert_eq!(
        plain(&qp, psn, &mrs),
        ReqVerdict::Refused(Some(NakCode::InvalidRequest))
    );
}
