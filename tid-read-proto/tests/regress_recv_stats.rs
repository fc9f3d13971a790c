// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID READ_RESP receive path's drop counters, each seen at an exact
//! count above one: a response to a QP that no longer receives, a TID
//! error, a flagged flow error outside the IB PSN window, and a response
//! that names no TID READ. These counters are the only record of why a
//! response went nowhere (the verdict is `Dropped` for all of them), so a
//! counter that stops counting, or counts the wrong way, hides which of
//! the kernel's drop paths a fabric took.

mod common;

use common::{Kind, Pair, for_qp, forge_resp, kind};
use hfi1_hal::flags::Kdeth0Flags;
use hfi1_hal::sim::RcvError;
use hfi1_hal::{FlowPsn, Psn};
use tid_harness::world::{Arrival, AtRequester, Setup};
use tid_read_proto::rc::{QpState, WcStatus};
use tid_read_proto::requester::RespVerdict;

/// The chip's error and the receive path's verdict for one arrival (a
/// TID READ_RESP).
fn seen(at: &AtRequester) -> (Option<RcvError>, Option<RespVerdict>) {
    match at.arrival {
        Arrival::ReadResp {
            outcome, verdict, ..
        } => (
            outcome.error,
            verdict.map(|v| v.expect("the receive path runs")),
        ),
        other => panic!("{other:?}"),
    }
}

/// A READ_RESP for a QP out of RTS is dropped and counted as a dropped
/// response, each time: two segment-last packets for a QP a stray
/// response moved to the error state give `resp_dropped == 2`. Kernel:
/// the `ib_rvt_state_ops[qp->state] & RVT_PROCESS_RECV_OK` test at the
/// top of `hfi1_rc_rcv_tid_rdma_read_resp()` and
/// `hfi1_handle_kdeth_eflags()`.
#[test]
fn responses_to_a_qp_not_receiving_are_dropped_and_counted() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    assert_eq!(resps.len(), 2, "two one-page segments");
    let bad = forge_resp(&resps[0], |_, _, h| h.verbs_psn = Psn::new(0x500));
    let at = p.give_requester(&[bad]);
    assert_eq!(seen(&at[0]).1, Some(RespVerdict::LostTrack));
    assert_eq!(p.states(0).0, QpState::Error);
    assert_eq!(p.done[0], [(wr, WcStatus::Flushed)]);
    let before = p.req_stats();
    assert_eq!(before.resp_dropped, 0);
    let at = p.give_requester(&resps);
    for a in &at {
        assert_eq!(seen(a).1, Some(RespVerdict::Dropped));
    }
    let s = p.req_stats();
    assert_eq!(s.resp_dropped, 2);
    // The state test comes before any KDETH error is looked at.
    assert_eq!(s.kdeth_errors, before.kdeth_errors);
    assert_eq!(s.tid_dropped, before.tid_dropped);
    assert_eq!(s.no_request, 1);
    assert_eq!(p.held(), 0);
    p.teardown_clean();
}

/// A READ_RESP the chip flagged with a TID error is dropped (nothing was
/// placed) and counted both as a KDETH error and as a TID drop: two
/// copies of a completed segment's last packet, whose entries were
/// unprogrammed, give `kdeth_errors == 2` and `tid_dropped == 2`, and the
/// READ still completes. Kernel: the `RHF_TID_ERR` case of
/// `handle_read_kdeth_eflags()` (counted in `hfi1_handle_kdeth_eflags()`).
#[test]
fn tid_errors_are_dropped_and_counted_each_time() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    assert_eq!(resps.len(), 2);
    let at = p.give_requester(&resps[..1]);
    assert_eq!(seen(&at[0]), (None, Some(RespVerdict::Completed)));
    let at = p.give_requester(&[resps[0].clone(), resps[0].clone()]);
    for a in &at {
        assert_eq!(seen(a), (Some(RcvError::Tid), Some(RespVerdict::Dropped)));
    }
    let s = p.req_stats();
    assert_eq!(s.kdeth_errors, 2);
    assert_eq!(s.tid_dropped, 2);
    assert_eq!(s.resp_dropped, 0, "a TID drop is its own count");
    p.give_requester(&resps[1..]);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    assert_eq!(p.req_stats().kdeth_errors, 2);
    p.teardown_clean();
}

/// A READ_RESP flagged with a flow sequence error whose IB PSN lies
/// outside `[s_last_psn, s_psn]` is dropped by the KDETH error path and
/// counted as a KDETH error and a dropped response: two such packets give
/// `kdeth_errors == 2`, `psn_dropped == 2`, `resp_dropped == 2`, and the
/// READ is not disturbed. Kernel: the IB PSN window test of
/// `handle_read_kdeth_eflags()`.
#[test]
fn flow_errors_the_eflags_path_drops_are_counted_each_time() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    assert_eq!(resps.len(), 2);
    let stray = forge_resp(&resps[1], |_, k, h| {
        *k = FlowPsn::from_raw(k.raw().wrapping_add(3));
        h.verbs_psn = Psn::new(0x500);
    });
    let at = p.give_requester(&[stray.clone(), stray]);
    for a in &at {
        assert_eq!(
            seen(a),
            (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
        );
    }
    let s = p.req_stats();
    assert_eq!(s.kdeth_errors, 2);
    assert_eq!(s.psn_dropped, 2);
    assert_eq!(s.resp_dropped, 2);
    assert_eq!(s.tid_dropped, 0);
    assert_eq!(s.seq_restarts, 0, "nothing restarted");
    p.give_requester(&resps);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    assert_eq!(p.req_stats().resp_dropped, 2);
    p.teardown_clean();
}

/// A READ_RESP taken in sequence whose IB PSN names no TID READ is
/// counted (`no_request`) as it errors its QP: one such packet on each of
/// two QPs gives `no_request == 2`. Kernel: the `ack_op_err` path of
/// `hfi1_rc_rcv_tid_rdma_read_resp()` (`find_tid_request()` finding
/// nothing).
#[test]
fn responses_for_no_request_are_counted_per_qp() {
    let mut p = Pair::new(Setup {
        qps: 2,
        groups: 16,
        seg_len: 4096,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let a = p.post(0, 2);
    let b = p.post(1, 2);
    let reqs = p.send();
    let resps = p.answer(&reqs);
    for (q, wr) in [(0, a), (1, b)] {
        let mine = common::for_qp(&resps, q);
        assert_eq!(mine.len(), 2, "QP {q}: two one-page segments");
        let bad = forge_resp(&mine[0], |_, _, h| h.verbs_psn = Psn::new(0x500));
        let at = p.give_requester(&[bad]);
        assert_eq!(seen(&at[0]).1, Some(RespVerdict::LostTrack));
        assert_eq!(p.states(q).0, QpState::Error);
        assert_eq!(p.done[q], [(wr, WcStatus::Flushed)]);
    }
    assert_eq!(p.req_stats().no_request, 2);
    assert_eq!(p.held(), 0);
    p.teardown_clean();
}

/// `p`, a suppressed READ_RESP, rebuilt with KDETH SH clear (so the chip
/// hands it to software once it took it in sequence) and, if given, a
/// different verbs PSN.
fn unsuppressed(p: &[u8], verbs_psn: Option<Psn>) -> Vec<u8> {
    forge_resp(p, |_, _, h| {
        h.kdeth.kdeth0 = h.kdeth.kdeth0.with_flags(Kdeth0Flags::SH, false);
        if let Some(v) = verbs_psn {
            h.verbs_psn = v;
        }
    })
}

/// A READ_RESP that is not its segment's last, reaching software with a
/// flow PSN other than the one software PSN checking expects next, is
/// dropped and counted as a dropped response: the second and third
/// packets of a four-packet segment, each delivered (SH clear) while
/// software still expects the first, give `resp_dropped == 2`; the
/// segment still completes at its last packet. Kernel: the
/// `flow->flow_state.r_next_psn` test in
/// `hfi1_rc_rcv_tid_rdma_read_resp()` for a packet that is not the
/// segment's last.
#[test]
fn out_of_order_middle_packets_are_dropped_and_counted_each_time() {
    let mut p = Pair::new(Setup {
        seg_len: 16384,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let (wr, resps) = p.serve(0, 4);
    assert_eq!(resps.len(), 4, "one segment of four packets");
    let at = p.give_requester(&[
        resps[0].clone(),
        unsuppressed(&resps[1], None),
        unsuppressed(&resps[2], None),
    ]);
    assert_eq!(seen(&at[0]), (None, None), "suppressed");
    for a in &at[1..] {
        assert_eq!(seen(a), (None, Some(RespVerdict::Dropped)));
    }
    assert_eq!(p.req_stats().resp_dropped, 2);
    let at = p.give_requester(&resps[3..]);
    assert_eq!(seen(&at[0]), (None, Some(RespVerdict::Completed)));
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    assert_eq!(p.req_stats().resp_dropped, 2);
    p.teardown_clean();
}

/// A READ_RESP that names a TID READ with no segment outstanding (the
/// READ waits for RcvArray space behind the one being received) is
/// dropped and counted as a dropped response, and the QP goes on: two
/// such packets give `resp_dropped == 2`, and both READs complete.
/// Kernel: the `!flow` case of `hfi1_rc_rcv_tid_rdma_read_resp()`
/// (`req->clear_tail == req->setup_head`).
#[test]
fn responses_for_a_read_with_no_segment_set_up_are_dropped_and_counted() {
    let mut p = Pair::new(Setup {
        groups: 1,
        seg_len: 32768,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let a = p.post(0, 8);
    let b = p.post(0, 4);
    let reqs = p.send();
    assert_eq!(reqs.len(), 1, "READ 2 waits for RcvArray space");
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 8);
    let Kind::TidResp(lpsn, true) = kind(&resps[7]) else {
        panic!("READ 1's last packet");
    };
    // READ 2's first two IB PSNs, carried by READ 1's packets 2 and 3
    // (their TIDs and flow PSNs valid: the chip takes them in sequence).
    let stray = [
        unsuppressed(&resps[1], Some(lpsn.add(1))),
        unsuppressed(&resps[2], Some(lpsn.add(2))),
    ];
    p.give_requester(&resps[..1]);
    let at = p.give_requester(&stray);
    for a in &at {
        assert_eq!(seen(a), (None, Some(RespVerdict::Dropped)));
    }
    assert_eq!(p.req_stats().resp_dropped, 2);
    assert_eq!(p.req_stats().no_request, 0, "READ 2 was found");
    let at = p.give_requester(&resps[3..]);
    assert_eq!(seen(&at[4]), (None, Some(RespVerdict::Completed)));
    assert_eq!(p.done[0], [(a, WcStatus::Success)]);
    p.finish(0);
    assert_eq!(p.done[0], [(a, WcStatus::Success), (b, WcStatus::Success)]);
    assert_eq!(p.req_stats().resp_dropped, 2);
    p.teardown_clean();
}

/// Two QPs, each with `reads` TID READs of two one-page segments
/// posted, requested and answered; the responses per QP, not delivered.
fn two_qps(reads: usize) -> (Pair, [Vec<Vec<u8>>; 2]) {
    let mut p = Pair::new(Setup {
        qps: 2,
        groups: 16,
        seg_len: 4096,
        tid_read_min: 8192,
        ..Setup::default()
    });
    for q in 0..2 {
        for _ in 0..reads {
            p.post(q, 2);
        }
    }
    let reqs = p.send();
    let resps = p.answer(&reqs);
    let per = [for_qp(&resps, 0), for_qp(&resps, 1)];
    for r in &per {
        assert_eq!(r.len(), 2 * reads, "one-packet segments");
    }
    (p, per)
}

/// Runs the pair to the end, both QPs' retry timers expiring whenever
/// nothing moves: every READ of both QPs completes
/// successfully and nothing is left held.
fn finish_both(mut p: Pair, reads: usize) {
    for _ in 0..32 {
        p.run(|_| true);
        if p.n.outstanding() == 0 {
            break;
        }
        // A restarted QP may wait for its retry timer.
        p.expire(0);
        p.expire(1);
    }
    for q in 0..2 {
        assert_eq!(p.done[q].len(), reads, "QP {q}");
        assert!(
            p.done[q].iter().all(|d| d.1 == WcStatus::Success),
            "QP {q}: {:?} {:?}",
            p.done[q],
            p.req_stats()
        );
    }
    p.teardown_clean();
}

/// A segment's last packet that names a later READ than the oldest
/// unfinished one (the earlier READ's response was lost) asks for a
/// restart and is dropped, counted as a dropped response: once on each of
/// two QPs gives `resp_dropped == 2`, and every READ then completes.
/// Kernel: the `i != qp->s_acked` restart of
/// `hfi1_rc_rcv_tid_rdma_read_resp()` (through `do_rc_ack()`).
#[test]
fn last_packets_of_a_later_read_are_dropped_and_counted() {
    let (mut p, per) = two_qps(2);
    for r in &per {
        let Kind::TidResp(later, true) = kind(&r[2]) else {
            panic!("READ 2's first segment's last packet");
        };
        // In sequence for the chip (READ 1's first packet), naming
        // READ 2's first segment for software.
        let stray = forge_resp(&r[0], |_, _, h| h.verbs_psn = later);
        let at = p.give_requester(&[stray]);
        assert_eq!(seen(&at[0]), (None, Some(RespVerdict::Dropped)));
    }
    let s = p.req_stats();
    assert_eq!(s.resp_dropped, 2);
    assert_eq!(s.no_request, 0);
    assert_eq!(s.segments_done, 0, "nothing completed");
    finish_both(p, 2);
}

/// A segment's last packet whose AETH is a NAK acts as that NAK and is
/// dropped, counted as a dropped response (the segment keeps its TIDs):
/// once on each of two QPs, each with one TID READ, gives
/// `resp_dropped == 2`, and both READs then complete. A deviation from 6.1 (the requester module's list), which
/// frees the segment's TIDs before `do_rc_ack()` in
/// `hfi1_rc_rcv_tid_rdma_read_resp()`.
#[test]
fn last_packets_carrying_a_nak_are_dropped_and_counted() {
    let (mut p, per) = two_qps(1);
    for r in &per {
        // A PSN sequence NAK for the packet's own PSN.
        let nak = forge_resp(&r[0], |_, _, h| h.aeth.syndrome = 0x60);
        let at = p.give_requester(&[nak]);
        assert_eq!(seen(&at[0]), (None, Some(RespVerdict::Dropped)));
    }
    let s = p.req_stats();
    assert_eq!(s.resp_dropped, 2);
    assert_eq!(s.segments_done, 0, "the segment kept");
    finish_both(p, 1);
}

/// The KDETH error path's IB PSN window starts at `s_last_psn` itself: a
/// stale-generation READ_RESP whose IB PSN is the last one acknowledged
/// is inside it and dropped as stale (`stale_dropped`), one PSN earlier is
/// outside it (`psn_dropped`); two of the first and one of the second
/// give `stale_dropped == 2`, `psn_dropped == 1`, and the READ completes.
/// Kernel: `cmp_psn(ibpsn, qp->s_last_psn) < 0` in
/// `handle_read_kdeth_eflags()`.
///
/// Fails with the window shut at `s_last_psn` (checked: `<= 0`): the two
/// packets at it are counted `psn_dropped` too.
#[test]
fn the_eflags_window_starts_at_the_last_psn_acknowledged() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    assert_eq!(resps.len(), 2);
    let Kind::TidResp(first, true) = kind(&resps[0]) else {
        panic!("segment 1's last packet");
    };
    let at = p.give_requester(&resps[..1]);
    assert_eq!(seen(&at[0]), (None, Some(RespVerdict::Completed)));
    // Segment 1 acknowledged: `s_last_psn` is its PSN.
    let stale = |ipsn: Psn| {
        forge_resp(&resps[1], |_, k, h| {
            *k = FlowPsn::new(k.generation().next(), k.seq());
            h.verbs_psn = ipsn;
        })
    };
    let at = p.give_requester(&[stale(first), stale(first), stale(first.sub(1))]);
    for a in &at {
        assert_eq!(
            seen(a),
            (Some(RcvError::FlowGen), Some(RespVerdict::Dropped))
        );
    }
    let s = p.req_stats();
    assert_eq!(s.stale_dropped, 2, "at s_last_psn: inside the window");
    assert_eq!(s.psn_dropped, 1, "before it: outside");
    assert_eq!(s.seq_restarts, 0);
    p.give_requester(&resps[1..]);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// A flagged READ_RESP inside the IB PSN window for a QP with no READ
/// outstanding is dropped before it is classified: two stale-generation
/// copies of a completed READ's last packet give `resp_dropped == 2` and
/// neither `stale_dropped` nor `seq_errors` moves (they count packets
/// that met a READ). Kernel: the `qp->s_acked == qp->s_tail` test of
/// `handle_read_kdeth_eflags()`.
#[test]
fn flagged_packets_with_nothing_outstanding_are_dropped_unclassified() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    assert_eq!(resps.len(), 2);
    let Kind::TidResp(last, true) = kind(&resps[1]) else {
        panic!("segment 2's last packet");
    };
    p.give_requester(&resps);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    let stale = forge_resp(&resps[1], |_, k, _| {
        *k = FlowPsn::new(k.generation().next(), k.seq());
    });
    let at = p.give_requester(&[stale.clone(), stale]);
    for a in &at {
        assert_eq!(
            seen(a),
            (Some(RcvError::FlowGen), Some(RespVerdict::Dropped))
        );
    }
    let s = p.req_stats();
    assert_eq!(s.kdeth_errors, 2);
    assert_eq!(s.resp_dropped, 2);
    assert_eq!(s.psn_dropped, 0, "IB PSN {last:?} is inside the window");
    assert_eq!(s.stale_dropped, 0);
    assert_eq!(s.seq_errors, 0);
    p.teardown_clean();
}

/// A flagged READ_RESP of a later READ than the oldest unfinished one
/// (the oldest READ's response was lost) restarts the oldest READ: a
/// stale-generation packet naming READ 2 is dropped as stale and READ 1's
/// first segment is requested again at the next send; both READs
/// complete. The restart moves `s_psn` back, so a second such packet is
/// then outside the IB PSN window.
/// Kernel: the `cmp_psn(ack_psn, wqe->lpsn) >= 0` test under
/// `HFI1_R_RDMAR_SEQ` in `handle_read_kdeth_eflags()`
/// (`restart_tid_rdma_read_req()`).
#[test]
fn a_flagged_packet_of_a_later_read_restarts_the_oldest_once() {
    let mut p = Pair::small(16, 8192, 7);
    let a = p.post(0, 2);
    let b = p.post(0, 2);
    let reqs = p.send();
    assert_eq!(reqs.len(), 4, "both READs' segments requested");
    let Kind::TidReq(first) = kind(&reqs[0]) else {
        panic!("READ 1's first READ_REQ");
    };
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 4);
    let Kind::TidResp(later, true) = kind(&resps[2]) else {
        panic!("READ 2's first segment's last packet");
    };
    let stale = forge_resp(&resps[2], |_, k, _| {
        *k = FlowPsn::new(k.generation().next(), k.seq());
    });
    let at = p.give_requester(&[stale.clone(), stale]);
    for a in &at {
        assert_eq!(
            seen(a),
            (Some(RcvError::FlowGen), Some(RespVerdict::Dropped))
        );
    }
    let s = p.req_stats();
    assert_eq!(s.seq_restarts, 1, "READ 1 restarted");
    assert_eq!(s.stale_dropped, 1, "IB PSN {later:?} inside the window");
    assert_eq!(s.psn_dropped, 1, "and outside it after the restart");
    let again = p.send();
    assert_eq!(
        again.first().map(|r| kind(r)),
        Some(Kind::TidReq(first)),
        "READ 1 requested again"
    );
    p.give_responder(&again);
    p.finish(0);
    assert_eq!(p.done[0], [(a, WcStatus::Success), (b, WcStatus::Success)]);
    p.teardown_clean();
}

/// The KDETH error path's IB PSN window ends at `s_psn` itself (the next
/// PSN the requester would send): with both segments of a READ requested,
/// a stale-generation packet one PSN past the window is dropped as out of
/// it (`psn_dropped`), one at `s_psn` is inside: its IB PSN is past the
/// oldest READ, so that READ's response counts as lost and it is
/// restarted (`seq_restarts == 1`), the packet dropped as stale. The READ
/// then completes. Kernel: `cmp_psn(ibpsn, qp->s_psn) > 0` in
/// `handle_read_kdeth_eflags()`.
///
/// Fails with the window shut at `s_psn` (checked: `>= 0`): the packet at
/// it is dropped out of window and nothing is restarted.
#[test]
fn the_eflags_window_ends_at_s_psn() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    assert_eq!(resps.len(), 2);
    let Kind::TidResp(last, true) = kind(&resps[1]) else {
        panic!("segment 2's last packet");
    };
    let stale = |ipsn: Psn| {
        forge_resp(&resps[1], |_, k, h| {
            *k = FlowPsn::new(k.generation().next(), k.seq());
            h.verbs_psn = ipsn;
        })
    };
    let at = p.give_requester(&[stale(last.add(2))]);
    assert_eq!(
        seen(&at[0]),
        (Some(RcvError::FlowGen), Some(RespVerdict::Dropped))
    );
    let s = p.req_stats();
    assert_eq!((s.psn_dropped, s.stale_dropped, s.seq_restarts), (1, 0, 0));
    let at = p.give_requester(&[stale(last.add(1))]);
    assert_eq!(
        seen(&at[0]),
        (Some(RcvError::FlowGen), Some(RespVerdict::Dropped))
    );
    let s = p.req_stats();
    assert_eq!((s.psn_dropped, s.stale_dropped, s.seq_restarts), (1, 1, 1));
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// At the first flow sequence error of an episode software PSN checking
/// starts where the chip's flow stands when the chip has not taken the
/// whole segment: segment 1's last packet lost, segment 2's packets are
/// ahead; the restart sends segment 1 again, and its first three packets,
/// behind the chip (which waits for packet 4), are dropped, not counted
/// as advancing software's checking; its last packet completes it and
/// the READ completes. Kernel: `read_r_next_psn()` in
/// `handle_read_kdeth_eflags()`.
///
/// Fails with a chip standing at the segment's last packet taken as past
/// the segment (checked: `>=`): software expects the first packet, and
/// the three resent packets are counted.
#[test]
fn first_sequence_error_starts_from_the_chips_flow() {
    let mut p = Pair::new(Setup {
        seg_len: 16384,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let (wr, resps) = p.serve(0, 8);
    assert_eq!(resps.len(), 8, "two segments of four packets");
    // Segment 1's last packet is lost.
    let mut at = p.give_requester(&resps[..3]);
    at.extend(p.give_requester(&resps[4..]));
    assert!(
        at[3..]
            .iter()
            .all(|a| seen(a) == (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))),
        "segment 2 is ahead of the chip's flow"
    );
    assert_eq!(p.req_stats().seq_restarts, 1);
    let again = p.send();
    assert!(!again.is_empty(), "segment 1 requested again");
    let r = p.answer(&again);
    let first = &r[..4];
    let at = p.give_requester(first);
    for a in &at[..3] {
        assert_eq!(
            seen(a),
            (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped)),
            "behind the chip's flow"
        );
    }
    assert_eq!(seen(&at[3]), (None, Some(RespVerdict::Completed)));
    p.give_requester(&r[4..]);
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}
