// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's handling of a TID READ_RESP the chip flagged with a
//! KDETH flow sequence or generation error (kernel
//! `handle_read_kdeth_eflags()`), pinned through what software can see:
//! the requester's counters, each packet's verdict, the request sent
//! next and the completions. The IB PSN window's lower edge, the walk
//! that restarts an earlier READ a later packet shows lost, the drop
//! when nothing is outstanding, the stale-generation count and the
//! expected PSN software PSN checking starts from each decide which
//! counter a packet lands in and what is asked for again; a slip in any
//! of them either hides a loss or restarts (and spends the retry budget)
//! for nothing.

mod common;

use common::{Kind, Pair, kind};
use hfi1_hal::sim::RcvError;
use hfi1_hal::{FlowPsn, Psn};
use tid_harness::world::{Arrival, Setup};
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::requester::RespVerdict;

/// Four-packet segments (16 KiB at a 4 KiB MTU), so a segment has packets
/// the chip places silently before its last; READs of two pages and more
/// are TID READs; retry count 7.
fn pair() -> Pair {
    Pair::new(Setup {
        seg_len: 16384,
        tid_read_min: 8192,
        retry_cnt: 7,
        ..Setup::default()
    })
}

/// Delivers one READ_RESP to the requester node: the chip's error and
/// the requester's verdict, if the chip handed the packet to software.
fn give(p: &mut Pair, pkt: &[u8]) -> (Option<RcvError>, Option<RespVerdict>) {
    let at = p.give_requester(&[pkt.to_vec()]);
    match &at[0].arrival {
        Arrival::ReadResp {
            outcome, verdict, ..
        } => (
            outcome.error,
            verdict
                .as_ref()
                .map(|v| *v.as_ref().expect("the engine runs")),
        ),
        other => panic!("{other:?}"),
    }
}

/// The BTH (flow) PSN of a TID READ_RESP.
fn flow_psn(p: &[u8]) -> FlowPsn {
    match packet::parse(p).unwrap().1 {
        Parsed::ReadResp { bth, .. } => FlowPsn::from_raw(bth.psn.get()),
        _ => panic!("not a READ_RESP"),
    }
}

/// At the first sequence error of an episode, software PSN checking
/// starts from the chip's own next expected flow PSN when the chip stands
/// at the segment's last packet (it placed every packet but the last):
/// the restart's copies of the packets the chip already placed are
/// behind and dropped, and only the last packet, in sequence for the
/// chip, completes the segment. Kernel: `read_r_next_psn()` read into
/// the oldest segment's `r_next_psn` when `HFI1_R_TID_SW_PSN` is not yet
/// set, in `handle_read_kdeth_eflags()`; the engine keeps the segment's
/// own expectation only once the chip has passed the segment's last
/// packet.
///
/// Fails with that exception widened to a chip standing at the last
/// packet (`>=`): software keeps expecting the segment's first packet,
/// and the restart's copies of packets 0..=2 are taken (`Counted`).
#[test]
fn first_seq_error_with_the_chip_at_the_last_packet_takes_the_chips_psn() {
    let mut p = pair();
    let wr = p.post(0, 8);
    let reqs = p.send();
    assert_eq!(reqs.len(), 2, "two segments requested");
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 8);
    // Segment 0's packets 0..=2 in sequence, placed silently; its last
    // packet is lost; segment 1's first arrives ahead of the chip.
    for r in &resps[..3] {
        assert_eq!(give(&mut p, r), (None, None));
    }
    let before = p.req_stats();
    assert_eq!(
        give(&mut p, &resps[4]),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
    );
    let st = p.req_stats();
    assert_eq!(st.seq_errors, before.seq_errors + 1);
    assert_eq!(st.sw_dropped, before.sw_dropped + 1);
    assert_eq!(st.seq_restarts, before.seq_restarts + 1);
    // The restart asks for segment 0 again, from its first IB PSN.
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x10)));
    let resent = p.answer(&again[..1]);
    assert_eq!(resent.len(), 4);
    assert_eq!(
        flow_psn(&resent[0]),
        flow_psn(&resps[0]),
        "the same flow PSNs"
    );
    // Packets 0..=2 again: behind the chip (it expects 3) and behind
    // software, which took the chip's PSN.
    let before = p.req_stats();
    for (i, r) in resent[..3].iter().enumerate() {
        assert_eq!(
            give(&mut p, r),
            (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped)),
            "copy of packet {i}"
        );
    }
    let st = p.req_stats();
    assert_eq!(st.sw_dropped, before.sw_dropped + 3);
    assert_eq!(st.segments_done, 0);
    // The last packet is in sequence for the chip: it completes segment 0.
    assert_eq!(
        give(&mut p, &resent[3]),
        (None, Some(RespVerdict::Completed))
    );
    assert_eq!(p.req_stats().segments_done, 1);
    p.finish_clean(0, &[wr]);
}

/// Runs one single-segment READ of four pages to completion, every
/// packet in sequence; returns its `wr_id` and its responses (a late
/// copy of which the tests deliver).
fn complete_one(p: &mut Pair) -> (u64, Vec<Vec<u8>>) {
    let wr = p.post(0, 4);
    let reqs = p.send();
    assert_eq!(reqs.len(), 1);
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 4);
    for r in &resps[..3] {
        assert_eq!(give(p, r), (None, None));
    }
    assert_eq!(give(p, &resps[3]), (None, Some(RespVerdict::Completed)));
    p.poll_all();
    assert_eq!(p.done[0].len(), 1);
    (wr, resps)
}

/// With nothing outstanding, a flagged READ_RESP inside the IB PSN
/// window (a late copy of the completed READ's last packet: its IB PSN is
/// `s_last_psn`, its generation the one the flow left) is dropped before
/// anything is counted against a request: no stale-generation drop, no
/// sequence error, no PSN-window drop, no restart. Kernel: the
/// `qp->s_acked == qp->s_tail` exit after the walk over earlier READs in
/// `handle_read_kdeth_eflags()`; the window's lower edge is
/// `cmp_psn(ibpsn, qp->s_last_psn) < 0`, so `s_last_psn` itself is inside.
///
/// Fails with the empty-queue exit requiring the QP out of the receive
/// states as well (`&&`): the copy is counted `stale_dropped`. Fails with
/// the window's lower edge exclusive (`<=`): it is counted `psn_dropped`.
#[test]
fn flagged_copy_with_nothing_outstanding_is_dropped_uncounted() {
    let mut p = pair();
    let (wr, resps) = complete_one(&mut p);
    let before = p.req_stats();
    for _ in 0..2 {
        assert_eq!(
            give(&mut p, &resps[3]),
            (Some(RcvError::FlowGen), Some(RespVerdict::Dropped))
        );
    }
    let st = p.req_stats();
    assert_eq!(
        st.kdeth_errors,
        before.kdeth_errors + 2,
        "both reached software"
    );
    assert_eq!(st.resp_dropped, before.resp_dropped + 2);
    assert_eq!(
        st.stale_dropped, before.stale_dropped,
        "no request to be stale for"
    );
    assert_eq!(st.seq_errors, before.seq_errors);
    assert_eq!(
        st.psn_dropped, before.psn_dropped,
        "s_last_psn is in the window"
    );
    assert_eq!(st.restarts, before.restarts);
    assert!(p.send().is_empty(), "nothing asked for again");
    p.finish_clean(0, &[wr]);
}

/// With a later READ outstanding, each late copy of the completed READ's
/// last packet (IB PSN `s_last_psn`, the flow's old generation) passes
/// the IB PSN window and is dropped as a stale generation, counted once
/// each; the outstanding READ is neither restarted nor disturbed and
/// completes. Kernel: the generation-error case of
/// `hfi1_handle_kdeth_eflags()` after `handle_read_kdeth_eflags()`'s
/// window (`s_last_psn` inclusive) and its walk.
///
/// Fails with the stale count decremented or multiplied (`-=`: underflow;
/// `*=`: stays 0, not 2). Fails with the window's lower edge exclusive
/// (`<=`): the copies are counted `psn_dropped`, not `stale_dropped`.
#[test]
fn stale_generation_copies_are_counted_each_while_a_read_is_outstanding() {
    let mut p = pair();
    let (a, old) = complete_one(&mut p);
    let b = p.post(0, 4);
    let reqs = p.send();
    assert_eq!(reqs.len(), 1, "B's one segment");
    let before = p.req_stats();
    for _ in 0..2 {
        assert_eq!(
            give(&mut p, &old[3]),
            (Some(RcvError::FlowGen), Some(RespVerdict::Dropped))
        );
    }
    let st = p.req_stats();
    assert_eq!(st.stale_dropped, before.stale_dropped + 2);
    assert_eq!(
        st.psn_dropped, before.psn_dropped,
        "s_last_psn is in the window"
    );
    assert_eq!(st.seq_errors, before.seq_errors);
    assert_eq!(
        (st.restarts, st.seq_restarts),
        (before.restarts, before.seq_restarts)
    );
    let resps = p.answer(&reqs);
    for r in &resps[..3] {
        assert_eq!(give(&mut p, r), (None, None));
    }
    assert_eq!(
        give(&mut p, &resps[3]),
        (None, Some(RespVerdict::Completed))
    );
    p.finish_clean(0, &[a, b]);
}

/// A flagged packet of a later READ than the oldest unfinished one shows
/// the oldest READ's response lost and restarts that READ at once, even
/// in the middle of software PSN checking, as soon as the episode's
/// restart mark is gone: here a copy behind the expected PSN (the
/// restart's first packet) ends the first episode, and the next packet
/// of the later READ B restarts A again, from A's first IB PSN, spending
/// the retry budget a second time; both READs then complete. Kernel: the
/// walk over `s_acked`'s WQE ahead of the software PSN check in
/// `handle_read_kdeth_eflags()` (`RVT_R_RDMAR_SEQ` tested, then
/// `restart_tid_rdma_read_req()`), and the behind branch clearing
/// `RVT_R_RDMAR_SEQ`.
///
/// Fails with the walk skipped while something is outstanding (`==`):
/// only software PSN checking is left, which takes B's packet for one
/// ahead of A's expected PSN and drops it; A is restarted once, not twice.
#[test]
fn later_reads_packet_restarts_the_oldest_read_once_the_episode_ended() {
    let mut p = pair();
    let a = p.post(0, 4);
    let b = p.post(0, 4);
    let reqs = p.send();
    assert_eq!(
        reqs.iter().map(|r| kind(r)).collect::<Vec<_>>(),
        [Kind::TidReq(Psn::new(0x10)), Kind::TidReq(Psn::new(0x14))]
    );
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 8);
    // A's packets 0..=2 in sequence; A's last packet is lost; B's first
    // arrives ahead of the chip: the episode starts with one restart.
    for r in &resps[..3] {
        assert_eq!(give(&mut p, r), (None, None));
    }
    assert_eq!(
        give(&mut p, &resps[4]),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
    );
    let st = p.req_stats();
    assert_eq!((st.seq_restarts, st.restarts), (1, 1));
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x10)), "A again");
    let resent = p.answer(&again);
    // The restart's copy of A's packet 0 is behind: dropped, the
    // episode's restart mark cleared.
    assert_eq!(
        give(&mut p, &resent[0]),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
    );
    assert_eq!(
        p.req_stats().seq_restarts,
        1,
        "a packet behind restarts nothing"
    );
    // B's second packet of the first stream: A is restarted again.
    assert_eq!(
        give(&mut p, &resps[5]),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
    );
    let st = p.req_stats();
    assert_eq!((st.seq_restarts, st.restarts), (2, 2));
    let third = p.send();
    assert_eq!(kind(&third[0]), Kind::TidReq(Psn::new(0x10)), "A once more");
    p.give_responder(&third);
    p.finish_clean(0, &[a, b]);
}
