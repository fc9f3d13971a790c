// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The plain RDMA READ (IB `RDMA_READ_REQUEST`, `READ_RESPONSE_FIRST /
//! MIDDLE / LAST / ONLY`), as Linux 6.1's RC code runs it for every READ
//! that is not a TID READ: the requester's receive in sequence, its
//! restart in the middle of a READ, the length check, and the responder's
//! resend from a duplicate's PSN. Each test's doc names the kernel
//! function it pins and what it showed with the rule taken out (checked).

mod common;

use common::{Kind, Pair, kind};
use hfi1_hal::Psn;
use tid_harness::world::REQUESTER;
use tid_read_proto::packet::{self, Parsed, Path};
use tid_read_proto::plain_read::{self, RespKind};
use tid_read_proto::rc::{QpState, WcStatus};
use tid_read_proto::wire::aeth;

/// A plain READ's response packet rebuilt with its payload cut to `len`
/// bytes.
fn shortened(p: &[u8], len: usize) -> Vec<u8> {
    let (
        _,
        Parsed::ReadResponse {
            bth,
            kind,
            aeth,
            payload,
        },
    ) = packet::parse(p).unwrap()
    else {
        panic!("not a READ response");
    };
    let mut buf = vec![0u8; packet::MAX_PACKET];
    let n = plain_read::write_response(
        &mut buf,
        Path::default(),
        REQUESTER.qpn,
        bth.psn,
        kind,
        aeth.unwrap_or(aeth::Repr {
            syndrome: 0,
            msn: 0,
        }),
        len,
        |o| {
            o.copy_from_slice(&payload[..len]);
            true
        },
    )
    .unwrap();
    buf.truncate(n);
    buf
}

/// The response kinds of `pkts`, with their PSNs.
fn responses(pkts: &[Vec<u8>]) -> Vec<(Psn, RespKind)> {
    pkts.iter()
        .filter_map(|p| match packet::parse(p).unwrap().1 {
            Parsed::ReadResponse { bth, kind, .. } => Some((bth.psn, kind)),
            _ => None,
        })
        .collect()
}

/// The responder answers the request `again` for the last two packets
/// of a three-packet READ from PSN 0x11 with a FIRST and a LAST, and READ
/// `wr` completes with them.
fn completes_from_0x11(p: &mut Pair, again: &[Vec<u8>], wr: u64) {
    let r = p.answer(again);
    assert_eq!(
        responses(&r),
        [
            (Psn::new(0x11), RespKind::First),
            (Psn::new(0x12), RespKind::Last)
        ]
    );
    p.give_requester(&r);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
}

/// A three-packet plain READ whose MIDDLE is lost: the LAST is out of
/// sequence, the READ is asked for again from `s_last_psn + 1` (the lost
/// MIDDLE's PSN, its remote address and length moved on by the packet
/// taken), and completes with every byte right.
/// Kernel: `rc_rcv_resp()` (`ack_seq_err` → `rdma_seq_err()` →
/// `hfi1_restart_rc(qp, qp->s_last_psn + 1, 0)`) and the
/// `OP(RDMA_READ_RESPONSE_MIDDLE)` case of `hfi1_make_rc_req()`.
///
/// Fails with the sequence check taken out of the MIDDLE/LAST receive
/// (checked): the LAST is taken in the MIDDLE's place and the READ
/// completes `LOC_LEN_ERR`.
#[test]
fn plain_read_middle_lost_restarts_from_s_last_psn() {
    let mut p = Pair::small(16, 1 << 20, 7);
    let (wr, resps) = p.serve(0, 3);
    assert_eq!(
        responses(&resps),
        [
            (Psn::new(0x10), RespKind::First),
            (Psn::new(0x11), RespKind::Middle),
            (Psn::new(0x12), RespKind::Last)
        ]
    );
    p.give_requester(&[resps[0].clone(), resps[2].clone()]);
    assert!(p.done[0].is_empty());
    let again = p.send();
    assert_eq!(again.len(), 1);
    let Parsed::ReadRequest { bth, reth } = packet::parse(&again[0]).unwrap().1 else {
        panic!("a READ request");
    };
    assert_eq!(bth.psn, Psn::new(0x11));
    assert_eq!(reth.length, 8192, "the two packets not taken");
    completes_from_0x11(&mut p, &again, wr);
    p.teardown_clean();
}

/// A plain READ's LAST that leaves bytes of the READ missing completes it
/// `LOC_LEN_ERR` and moves the QP to the error state.
/// Kernel: `rc_rcv_resp()` (`tlen != qp->s_rdma_read_len` → `ack_len_err`
/// → `IB_WC_LOC_LEN_ERR`).
///
/// Fails with the length check taken out (checked: a short LAST taken as
/// the end): the READ completes successfully with bytes never written.
#[test]
fn plain_read_short_last_completes_loc_len_err() {
    let mut p = Pair::small(16, 1 << 20, 7);
    let (wr, resps) = p.serve(0, 2);
    assert_eq!(kind(&resps[1]), Kind::PlainResp(Psn::new(0x11)));
    p.give_requester(&resps[..1]);
    p.give_requester(&[shortened(&resps[1], 1024)]);
    assert_eq!(p.done[0], [(wr, WcStatus::LocalLength)]);
    assert_eq!(p.states(0).0, QpState::Error);
    p.teardown_clean();
}

/// A duplicate plain READ request for the middle of a READ already served
/// makes the responder send the READ again from the duplicate's PSN (the
/// offset it names), starting with a FIRST.
/// Kernel: the `OP(RDMA_READ_REQUEST)` case of `rc_rcv_error()`
/// (`find_prev_entry()`, `offset = delta_psn(psn, e->psn) * pmtu`, the
/// rewind of `s_tail_ack_queue`) and `make_rc_ack()`.
///
/// Fails with the offset taken out (checked: the entry re-sent from its
/// first PSN): the responses start at 0x10.
#[test]
fn duplicate_plain_read_request_resends_from_its_psn() {
    let mut p = Pair::small(16, 1 << 20, 7);
    let (wr, resps) = p.serve(0, 3);
    p.give_requester(&resps[..1]);
    // The MIDDLE and LAST are lost; the timer asks for the rest.
    assert!(p.expire(0));
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::PlainReq(Psn::new(0x11)));
    completes_from_0x11(&mut p, &again, wr);
    assert_eq!(p.resp_stats().duplicates, 1);
    p.teardown_clean();
}
