// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder engine: every validation and its NAK on the wire, the ack
//! queue, the READ_RESP stream, duplicates, and memory-region references
//! (SPEC §5 "Responder", "Duplicate READ_REQ", §7 MR references).

use hfi1_hal::lock_order::LockToken;
use hfi1_hal::{FlowIndex, Generation, Psn, TidCtrl, TidEntry};
use tid_harness::doubles::{Outbox, Region, Regions, pattern};
use tid_harness::platform::{SoftPlatform, SoftQp, new_qp};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, Parsed, Path};
use tid_read_proto::qp;
use tid_read_proto::rc::Connection;
use tid_read_proto::read_req::{ReadReq, ReadReqFlow};
use tid_read_proto::responder::ReqVerdict;
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

#[test]
fn a_full_ack_queue_is_a_remote_operational_error() {
    let qp = responder(true);
    let mrs = mrs();
    let mut psn = 100;
    for _ in 0..16 {
        assert_eq!(
            deliver(&qp, &req(psn, 1, 1, 4096, RKEY, BASE), &mrs),
            ReqVerdict::Accepted
        );
        psn += 1;
    }
    assert_eq!(
        deliver(&qp, &req(psn, 1, 1, 4096, RKEY, BASE), &mrs),
        ReqVerdict::Refused(Some(NakCode::RemoteOperationalError))
    );
    assert_eq!(mrs.refs(), 16);
    // Sending frees the queue and the references.
    let pkts = send_all(&qp, &mrs);
    assert_eq!(pkts.len(), 17);
    assert_eq!(mrs.refs(), 0);
    assert_eq!(
        deliver(&qp, &req(psn, 1, 1, 4096, RKEY, BASE), &mrs),
        ReqVerdict::Accepted
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
