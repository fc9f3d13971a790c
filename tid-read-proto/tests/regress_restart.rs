// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The RC restart's bookkeeping, pinned where a mutation test found it
//! unwatched: which READ a restart in the middle of the send queue
//! resends and from which point (`reset_psn()`), what stays counted
//! outstanding across a restart (the `s_num_rd_atomic` limit, the TID
//! segments pending), what a retry-timer expiry does and does not do
//! (`rvt_rc_timeout()`), and the error state's completions and send
//! flags (`rvt_error_qp()`). Kernel: Linux 6.1's
//! `drivers/infiniband/hw/hfi1/{rc,tid_rdma}.c` and `sw/rdmavt/qp.c`. Everything is
//! observed through the public API: the packets sent, the completions,
//! the requester's counters and accessors, the QP's send flags.

mod common;

use common::{Kind, Pair, ack, kind};
use hfi1_hal::Psn;
use hfi1_hal::consts::{OP_TID_RDMA_WRITE_REQ, OP_TID_RDMA_WRITE_RESP};
use hfi1_hal::flags::SFlags;
use hfi1_hal::lock_order::LockToken;
use tid_harness::doubles::Regions;
use tid_harness::platform::SoftPlatform;
use tid_harness::world::Setup;
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::qp;
use tid_read_proto::rc::{QpState, WcStatus};
use tid_read_proto::responder::ReqVerdict;
use tid_read_proto::wire::aeth::NakCode;
use tid_read_proto::wire::{frame, reth, write_req};

/// The kinds of `pkts`, in order.
fn kinds(pkts: &[Vec<u8>]) -> Vec<Kind> {
    pkts.iter().map(|p| kind(p)).collect()
}

/// What a plain RDMA READ request asks for: its PSN, remote address and
/// length.
fn plain_req(p: &[u8]) -> (Psn, u64, u32) {
    match packet::parse(p).unwrap().1 {
        Parsed::ReadRequest { bth, reth } => (bth.psn, reth.vaddr, reth.length),
        other => panic!("not a plain READ request: {other:?}"),
    }
}

/// The remote address READ or WRITE `wr` of QP 0 was posted with.
fn remote(p: &Pair, wr: u64) -> u64 {
    p.n.posted(0)
        .find(|x| x.wr_id == wr)
        .map(|x| x.remote)
        .expect("a request posted")
}

/// A PSN sequence NAK for `psn` to requester QP 0.
fn psn_nak(psn: u32) -> Vec<u8> {
    ack(psn, 0x60)
}

/// Reads and TID segments the requester of QP 0 counts outstanding.
fn counts(p: &Pair) -> (u32, u32) {
    p.requester(0, |r| (r.reads_outstanding(), r.pending_segments()))
}

/// Plain READs only (nothing is a TID READ below 1 MiB), one page an
/// MTU, at most `max_rd_atomic` reads outstanding.
fn plain_pair(max_rd_atomic: u32) -> Pair {
    Pair::new(Setup {
        tid_read_min: 1 << 20,
        seg_len: 4096,
        max_rd_atomic,
        ..Setup::default()
    })
}

/// TID READs of two pages and more, one page a segment, at most
/// `max_rd_atomic` reads outstanding.
fn tid_pair(max_rd_atomic: u32) -> Pair {
    Pair::new(Setup {
        tid_read_min: 8192,
        seg_len: 4096,
        max_rd_atomic,
        ..Setup::default()
    })
}

/// A restart in the middle of the oldest READ, a three-packet plain READ
/// with two more READs sent behind it, resends the rest of that READ
/// (from the restart PSN, its remote address and length moved on by the
/// packet taken) and then each later READ whole, from its own first PSN.
/// Kernel: `reset_psn()` (the walk stops at the first WQE past the PSN;
/// `OP(RDMA_READ_RESPONSE_MIDDLE)` for a PSN inside a READ) via
/// `rdma_seq_err()` → `hfi1_restart_rc(qp, qp->s_last_psn + 1, 0)`.
#[test]
fn restart_inside_the_oldest_plain_read_resends_its_rest_then_the_later_reads() {
    let mut p = plain_pair(16);
    let a = p.post(0, 3);
    let b = p.post(0, 1);
    let c = p.post(0, 2);
    let reqs = p.send();
    assert_eq!(
        kinds(&reqs),
        [0x10, 0x13, 0x14].map(|x| Kind::PlainReq(Psn::new(x)))
    );
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 6);
    // A's MIDDLE (0x11) is lost: its LAST is out of sequence.
    p.give_requester(&[resps[0].clone(), resps[2].clone()]);
    assert_eq!(p.req_stats().restarts, 1);
    let again = p.send();
    let asked: Vec<_> = again.iter().map(|x| plain_req(x)).collect();
    assert_eq!(
        asked,
        [
            (Psn::new(0x11), remote(&p, a) + 4096, 8192),
            (Psn::new(0x13), remote(&p, b), 4096),
            (Psn::new(0x14), remote(&p, c), 8192),
        ]
    );
    p.finish_clean(0, &[a, b, c]);
}

/// A retry timeout after the FIRST response of the oldest READ (a plain
/// READ of three packets, two more READs behind it) asks for that READ's
/// rest only, from `s_last_psn + 1`, then waits for an ACK.
/// Kernel: `rvt_rc_timeout()` → `hfi1_restart_rc(qp, qp->s_last_psn + 1,
/// 1)` → `reset_psn()`, and `RVT_S_SEND_ONE`.
#[test]
fn timeout_inside_the_oldest_plain_read_asks_for_its_rest_only() {
    let mut p = plain_pair(16);
    let a = p.post(0, 3);
    let b = p.post(0, 1);
    let c = p.post(0, 1);
    let reqs = p.send();
    assert_eq!(reqs.len(), 3);
    let resps = p.answer(&reqs);
    p.give_requester(&resps[..1]);
    assert_eq!(p.requester(0, |r| r.last_psn()), Psn::new(0x10));
    assert!(p.expire(0));
    let one = p.send();
    let asked: Vec<_> = one.iter().map(|x| plain_req(x)).collect();
    assert_eq!(asked, [(Psn::new(0x11), remote(&p, a) + 4096, 8192)]);
    p.finish_clean(0, &[a, b, c]);
}

/// A PSN NAK for the second segment of the oldest READ (a TID READ of
/// two one-page segments, with a TID READ and a plain READ sent behind
/// it) resends that segment, then the later READs from their starts.
/// The NAK is the responder's own: it got segment 0's request and then
/// the next READ's, segment 1's being lost.
/// Kernel: `reset_psn()` (`TID_OP(READ_RESP)` for a PSN inside a TID
/// READ) from the `case 3` of `do_rc_ack()`.
#[test]
fn psn_nak_inside_the_oldest_tid_read_resends_from_its_segment() {
    let mut p = tid_pair(16);
    let a = p.post(0, 2);
    let b = p.post(0, 2);
    let c = p.post(0, 1);
    let reqs = p.send();
    assert_eq!(
        kinds(&reqs),
        [
            Kind::TidReq(Psn::new(0x10)),
            Kind::TidReq(Psn::new(0x11)),
            Kind::TidReq(Psn::new(0x12)),
            Kind::TidReq(Psn::new(0x13)),
            Kind::PlainReq(Psn::new(0x14)),
        ]
    );
    let mut kept = reqs.clone();
    kept.remove(1);
    let out = p.answer(&kept);
    let nak: Vec<_> = out
        .iter()
        .filter(|x| matches!(kind(x), Kind::Ack(..)))
        .cloned()
        .collect();
    assert_eq!(kinds(&nak), [Kind::Ack(Psn::new(0x11), 0x60)]);
    let resps: Vec<_> = out
        .iter()
        .filter(|x| matches!(kind(x), Kind::TidResp(q, _) if q == Psn::new(0x10)))
        .cloned()
        .collect();
    p.give_requester(&resps);
    p.give_requester(&nak);
    let again = p.send();
    assert_eq!(
        kinds(&again),
        [
            Kind::TidReq(Psn::new(0x11)),
            Kind::TidReq(Psn::new(0x12)),
            Kind::TidReq(Psn::new(0x13)),
            Kind::PlainReq(Psn::new(0x14)),
        ]
    );
    p.finish_clean(0, &[a, b, c]);
}

/// Across a restart inside the oldest READ the `s_num_rd_atomic` limit
/// holds: with at most three reads outstanding and four plain READs
/// posted (the fourth waiting), a restart inside the first keeps it
/// counted (its request stands; only its rest is asked for again) and
/// uncounts the two behind it until they are sent again, so the resend
/// is the first READ's rest and the next two, and the fourth still
/// waits. Once everything completed nothing is counted.
/// Kernel: `reset_psn()` with `update_num_rd_atomic()` (deviation: what
/// lies before the restart PSN stays counted, see `requester`'s module
/// doc) and the `RVT_S_WAIT_RDMAR` test of `hfi1_make_rc_req()`.
#[test]
fn restart_inside_a_plain_read_keeps_the_read_limit() {
    let mut p = plain_pair(3);
    let wrs = [p.post(0, 3), p.post(0, 1), p.post(0, 1), p.post(0, 1)];
    let reqs = p.send();
    assert_eq!(
        kinds(&reqs),
        [0x10, 0x13, 0x14].map(|x| Kind::PlainReq(Psn::new(x))),
        "the fourth READ waits for a read to finish"
    );
    assert_eq!(counts(&p), (3, 0));
    let resps = p.answer(&reqs);
    // The first READ's MIDDLE is lost: a restart from 0x11.
    p.give_requester(&[resps[0].clone(), resps[2].clone()]);
    assert_eq!(p.req_stats().restarts, 1);
    assert_eq!(counts(&p), (1, 0), "only the first READ's request stands");
    let again = p.send();
    assert_eq!(
        kinds(&again),
        [0x11, 0x13, 0x14].map(|x| Kind::PlainReq(Psn::new(x))),
        "the fourth READ still waits"
    );
    assert_eq!(counts(&p), (3, 0));
    p.finish(0);
    assert_eq!(counts(&p), (0, 0));
    p.finish_clean(0, &wrs);
}

/// Across a restart inside the oldest TID READ, the segment before the
/// restart PSN whose response is still to come stays counted, and the
/// segments and READs from the PSN on are counted again only as they are
/// sent again: with at most five reads outstanding, a TID READ of four
/// segments and three plain READs, a PSN NAK for segment 2 (its request
/// lost; segment 1's response lost too) leaves one read and one segment
/// counted, the resend is segments 2 and 3 and the next two READs, the
/// last READ waits, and at the end nothing is counted.
/// Kernel: `reset_psn()` with `update_num_rd_atomic()` (deviation: what
/// lies before the restart PSN stays counted) and the `RVT_S_WAIT_RDMAR`
/// test of `hfi1_make_rc_req()` / `hfi1_build_tid_rdma_read_req()`.
#[test]
fn restart_inside_a_tid_read_keeps_the_read_limit_and_the_segment_count() {
    let mut p = tid_pair(5);
    let wrs = [p.post(0, 4), p.post(0, 1), p.post(0, 1), p.post(0, 1)];
    let reqs = p.send();
    assert_eq!(
        kinds(&reqs),
        [
            Kind::TidReq(Psn::new(0x10)),
            Kind::TidReq(Psn::new(0x11)),
            Kind::TidReq(Psn::new(0x12)),
            Kind::TidReq(Psn::new(0x13)),
            Kind::PlainReq(Psn::new(0x14)),
        ]
    );
    assert_eq!(counts(&p), (5, 4));
    let mut kept = reqs.clone();
    kept.remove(2);
    let out = p.answer(&kept);
    let nak: Vec<_> = out
        .iter()
        .filter(|x| matches!(kind(x), Kind::Ack(..)))
        .cloned()
        .collect();
    assert_eq!(kinds(&nak), [Kind::Ack(Psn::new(0x12), 0x60)]);
    let seg0: Vec<_> = out
        .iter()
        .filter(|x| matches!(kind(x), Kind::TidResp(q, _) if q == Psn::new(0x10)))
        .cloned()
        .collect();
    p.give_requester(&seg0);
    assert_eq!(counts(&p), (4, 3));
    p.give_requester(&nak);
    assert_eq!(p.req_stats().restarts, 1);
    assert_eq!(counts(&p), (1, 1), "segment 1 is still outstanding");
    let again = p.send();
    assert_eq!(
        kinds(&again),
        [
            Kind::TidReq(Psn::new(0x12)),
            Kind::TidReq(Psn::new(0x13)),
            Kind::PlainReq(Psn::new(0x14)),
            Kind::PlainReq(Psn::new(0x15)),
        ],
        "the last READ waits"
    );
    assert_eq!(counts(&p), (5, 3));
    p.finish(0);
    assert_eq!(counts(&p), (0, 0));
    p.finish_clean(0, &wrs);
}

/// A retry-timer expiry that finds the timer stopped does nothing: a PSN
/// NAK restarted the READ and stopped the timer, and a late expiry then
/// counts no timeout, spends no retry and asks for no single send: the
/// resend is both segments. Kernel: `rvt_rc_timeout()` acts only with
/// `RVT_S_TIMER` set.
#[test]
fn expiry_with_the_timer_stopped_does_nothing() {
    let mut p = tid_pair(16);
    let retry = p.n.setup().retry_cnt;
    let wr = p.post(0, 2);
    assert_eq!(p.send().len(), 2);
    p.give_requester(&[psn_nak(0x10)]);
    assert_eq!(p.retry_timer(0), None, "the NAK stopped the timer");
    let before = p.req_stats();
    assert!(!p.expire(0));
    let after = p.req_stats();
    assert_eq!(
        (after.timeouts, after.restarts),
        (before.timeouts, before.restarts)
    );
    assert_eq!(p.requester(0, |r| r.retries_left()), retry);
    let again = p.send();
    assert_eq!(
        kinds(&again),
        [Kind::TidReq(Psn::new(0x10)), Kind::TidReq(Psn::new(0x11))],
        "no single send asked for"
    );
    p.finish_clean(0, &[wr]);
}

/// A QP whose responder half moved it to the error state stops its
/// requester's retry timer, as `rvt_error_qp()` does for the whole QP
/// whichever half raised the error; a late expiry then does nothing: it
/// reports the timer not acted on, counts no timeout, spends no retry and
/// restarts nothing, and the READ in flight completes flushed. Here the
/// responder half refuses a READ request (this QP takes no remote READs)
/// while the QP's own READ is in flight, through the receive path's entry
/// (`receive_plain_read_in`) and through the one without the context
/// (`receive_plain_read`, whose caller then unwinds the QP).
#[test]
fn expiry_in_the_error_state_does_nothing() {
    for with_context in [true, false] {
        let mut p = tid_pair(16);
        let retry = p.n.setup().retry_cnt;
        let wr = p.post(0, 2);
        assert_eq!(p.send().len(), 2);
        assert!(p.retry_timer(0).is_some(), "the READ's timer runs");
        {
            let mut root = LockToken::root();
            let q = &p.n.requesters[0];
            let mut g = q.s_lock.lock(&mut root);
            let r = reth::Repr {
                vaddr: 0x1000,
                rkey: 1,
                length: 4096,
            };
            let v = if with_context {
                qp::receive_plain_read_in(&p.n.rcd, q, &mut g, Psn::new(0x10), &r, &Regions::new())
            } else {
                qp::receive_plain_read::<SoftPlatform>(&mut g, Psn::new(0x10), &r, &Regions::new())
            };
            assert_eq!(v, ReqVerdict::Refused(Some(NakCode::InvalidRequest)));
        }
        assert_eq!(p.states(0).0, QpState::Error);
        assert_eq!(p.retry_timer(0), None, "the error state stops the timer");
        assert_eq!(p.rnr_timer(0), None);
        assert!(!p.expire(0));
        let st = p.req_stats();
        assert_eq!((st.timeouts, st.restarts), (0, 0));
        assert_eq!(p.requester(0, |r| r.retries_left()), retry);
        if !with_context {
            // Without the context the entry cannot schedule the send
            // engine; the caller unwinds the QP (its documented contract).
            let mut root = LockToken::root();
            let q = &p.n.requesters[0];
            let mut g = q.s_lock.lock(&mut root);
            qp::flush(&p.n.rcd, q, &mut g);
        }
        assert!(p.send().is_empty());
        p.poll_all();
        assert_eq!(p.done[0], [(wr, WcStatus::Flushed)]);
        p.teardown_clean();
    }
}

/// Every expiry of a running retry timer counts one timeout and spends
/// one retry; each restart asks for one request, then waits for an ACK.
/// Kernel: `rvt_rc_timeout()` (counting `n_rc_timeouts`) →
/// `hfi1_restart_rc(qp, qp->s_last_psn + 1, 1)`.
#[test]
fn each_expiry_counts_a_timeout() {
    let mut p = tid_pair(16);
    let retry = p.n.setup().retry_cnt;
    let wr = p.post(0, 2);
    assert_eq!(p.send().len(), 2);
    for n in 1..=2 {
        assert!(p.expire(0));
        assert_eq!(p.req_stats().timeouts, n);
        assert_eq!(p.requester(0, |r| r.retries_left()), retry - n as u8);
        assert_eq!(kinds(&p.send()), [Kind::TidReq(Psn::new(0x10))]);
    }
    p.finish_clean(0, &[wr]);
}

/// Deviation kept: an expiry restarts from the oldest segment whose
/// response is still to come when a PSN NAK's implicit acknowledgement
/// passed it, and `s_last_psn` goes back before that segment (the
/// responder had its request; its response was lost). Segment 2's request
/// is lost, the responder NAKs 0x12, segment 1's response is lost: the
/// NAK's restart resends segments 2 and 3, and the expiry then asks for
/// segment 1 (0x11), with `s_last_psn` at 0x10. Kernel: `rvt_rc_timeout()`
/// → `hfi1_restart_rc(qp, qp->s_last_psn + 1, 1)` restarts from 0x12 (see
/// `Requester::timeout`).
#[test]
fn expiry_behind_a_psn_nak_restarts_the_passed_segment_and_backs_up_last_psn() {
    let mut p = tid_pair(16);
    let wr = p.post(0, 4);
    let reqs = p.send();
    assert_eq!(reqs.len(), 4);
    let mut kept = reqs.clone();
    kept.remove(2);
    let out = p.answer(&kept);
    let nak: Vec<_> = out
        .iter()
        .filter(|x| matches!(kind(x), Kind::Ack(..)))
        .cloned()
        .collect();
    assert_eq!(kinds(&nak), [Kind::Ack(Psn::new(0x12), 0x60)]);
    let seg0: Vec<_> = out
        .iter()
        .filter(|x| matches!(kind(x), Kind::TidResp(q, _) if q == Psn::new(0x10)))
        .cloned()
        .collect();
    p.give_requester(&seg0);
    p.give_requester(&nak);
    assert_eq!(p.requester(0, |r| r.last_psn()), Psn::new(0x11));
    let again = p.send();
    assert_eq!(
        kinds(&again),
        [Kind::TidReq(Psn::new(0x12)), Kind::TidReq(Psn::new(0x13))]
    );
    assert!(p.expire(0));
    assert_eq!(p.req_stats().timeouts, 1);
    assert_eq!(p.requester(0, |r| r.last_psn()), Psn::new(0x10));
    assert_eq!(kinds(&p.send()), [Kind::TidReq(Psn::new(0x11))]);
    p.finish_clean(0, &[wr]);
}

/// A fatal NAK with several READs outstanding completes the oldest with
/// the NAK's status and every later one flushed, in posting order, each
/// counted as a completion in error; the QP is in the error state and
/// holds nothing. Kernel: the class-B end of `do_rc_ack()`
/// (`hfi1_trdma_send_complete()` with the NAK's status, then
/// `rvt_error_qp()`; the flush of `hfi1_make_rc_req()` completes the
/// rest `IB_WC_WR_FLUSH_ERR`).
#[test]
fn fatal_nak_fails_the_oldest_and_flushes_the_rest_in_order() {
    let mut p = tid_pair(16);
    let a = p.post(0, 2);
    let b = p.post(0, 2);
    let c = p.post(0, 1);
    assert_eq!(p.send().len(), 5, "every READ in flight");
    p.give_requester(&[ack(0x10, 0x63)]);
    p.poll_all();
    assert_eq!(
        p.done[0],
        [
            (a, WcStatus::RemoteOperational),
            (b, WcStatus::Flushed),
            (c, WcStatus::Flushed),
        ]
    );
    assert_eq!(p.req_stats().errors, 3);
    assert_eq!(p.states(0).0, QpState::Error);
    assert_eq!(p.held(), 0);
    p.teardown_clean();
}

/// The error state ends the TID WRITE waits in the QP's send flags and
/// keeps the other bits: a TID WRITE's WRITE_REQ went out (the QP waits
/// for its WRITE_RESP, `WAIT_TID_RESP`), the QP is also halted
/// (`WAIT_HALT`, set here by hand as the TID retry timer's expiry sets it)
/// and asks for a completion of every request (`SIGNAL_REQ_WR`, a QP
/// attribute); a fatal NAK for the WRITE moves it to the error state
/// with both waits cleared and the attribute kept. Kernel: 6.1 ends
/// these waits only where the TID WRITE goes on
/// (`hfi1_rc_rcv_tid_rdma_write_resp()`, `hfi1_rc_rcv_tid_rdma_ack()`;
/// `HFI1_S_WAIT_HALT` is set by `hfi1_tid_retry_timeout()`), which a QP in
/// the error state never reaches; the engine ends them with the error
/// state, and like `rvt_error_qp()` leaves `RVT_S_SIGNAL_REQ_WR` alone.
#[test]
fn error_state_clears_the_tid_write_waits_and_keeps_the_other_flags() {
    let mut p = Pair::new(Setup {
        write_region_len: 1 << 20,
        ..Setup::default()
    });
    let pages = p.n.pages.scattered(64);
    let wr =
        p.n.post_write(0, pages, &mut LockToken::root())
            .expect("the WRITE is posted");
    assert_eq!(p.send().len(), 1, "the WRITE_REQ");
    let flags = |p: &Pair| p.n.requesters[0].s_lock.lock(&mut LockToken::root()).flags;
    assert!(flags(&p).contains(SFlags::WAIT_TID_RESP));
    p.n.requesters[0]
        .s_lock
        .lock(&mut LockToken::root())
        .flags
        .insert(SFlags::WAIT_HALT | SFlags::SIGNAL_REQ_WR);
    p.give_requester(&[ack(0x10, 0x63)]);
    assert_eq!(p.states(0).0, QpState::Error);
    assert_eq!(p.done[0], [(wr, WcStatus::RemoteOperational)]);
    let f = flags(&p);
    assert!(
        !f.intersects(SFlags::WAIT_HALT | SFlags::WAIT_TID_RESP),
        "{f:?}"
    );
    assert!(f.contains(SFlags::SIGNAL_REQ_WR), "{f:?}");
    assert_eq!(p.req_stats().errors, 1);
    p.teardown_clean();
}

/// The opcode and PSN of every packet in `pkts`.
fn opcodes(pkts: &[Vec<u8>]) -> Vec<(u8, Psn)> {
    pkts.iter()
        .map(|p| {
            let f = frame::parse(p).expect("a packet an engine built parses");
            (f.bth.opcode, f.bth.psn)
        })
        .collect()
}

/// What a TID WRITE_REQ in `p` asks for: its PSN, remote address and
/// length; `None` for any other packet.
fn write_req_of(p: &[u8]) -> Option<(Psn, u64, u32)> {
    let f = frame::parse(p).expect("a packet an engine built parses");
    if f.bth.opcode != OP_TID_RDMA_WRITE_REQ {
        return None;
    }
    let r = write_req::Repr::parse(&write_req::Packet::new_checked(f.body).ok()?).ok()?;
    Some((f.bth.psn, r.reth.vaddr, r.reth.length))
}

/// A restart at a PSN past the oldest request picks the request whose
/// first PSN it is: three TID WRITEs of one segment each (PSNs 0x10,
/// 0x11, 0x12) are requested; the WRITE_RESPs of the first two arrive
/// (`s_last_psn` 0x11, the first WRITE still waiting for its TID ACK, the
/// oldest request), the third's is lost; the expiry restarts from 0x12
/// and the one request it sends is the third WRITE's WRITE_REQ (beside
/// the first two WRITEs' data); every WRITE then completes.
/// Kernel: `rvt_rc_timeout()` → `hfi1_restart_rc(qp, qp->s_last_psn + 1,
/// 1)` → `reset_psn()`, whose walk from `s_acked` stops at the WQE whose
/// first PSN is the restart PSN and starts it again (`OP(SEND_LAST)`).
#[test]
fn expiry_past_two_tid_writes_resends_the_third_write_req() {
    let mut p = Pair::new(Setup {
        resp_groups: 64,
        write_region_len: 4 << 20,
        ..Setup::default()
    });
    let wrs: Vec<u64> = (0..3)
        .map(|_| {
            let pages = p.n.pages.scattered(64);
            p.n.post_write(0, pages, &mut LockToken::root())
                .expect("the WRITE is posted")
        })
        .collect();
    let reqs = p.send();
    assert_eq!(
        opcodes(&reqs),
        [0x10, 0x11, 0x12].map(|x| (OP_TID_RDMA_WRITE_REQ, Psn::new(x)))
    );
    let resps = p.answer(&reqs);
    assert_eq!(
        opcodes(&resps),
        [0x10, 0x11, 0x12].map(|x| (OP_TID_RDMA_WRITE_RESP, Psn::new(x)))
    );
    p.give_requester(&resps[..2]);
    assert_eq!(p.requester(0, |r| r.last_psn()), Psn::new(0x11));
    assert!(p.expire(0));
    let again = p.send();
    let write_reqs: Vec<_> = again.iter().filter_map(|x| write_req_of(x)).collect();
    assert_eq!(
        write_reqs,
        [(Psn::new(0x12), remote(&p, wrs[2]), 64 * 4096)],
        "the third WRITE's request, whole"
    );
    p.give_responder(&again);
    p.finish(0);
    let want: Vec<_> = wrs.iter().map(|&w| (w, WcStatus::Success)).collect();
    assert_eq!(p.done[0], want);
    p.teardown_clean();
}
