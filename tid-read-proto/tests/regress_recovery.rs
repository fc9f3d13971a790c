// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID READ recovery and completion as Linux 6.1 runs them, and the
//! deviations kept where its rule leaves a hole: segment completion and
//! TID release, the RcvArray quarantine, the flow's release points, the
//! SYNC check, the KDETH error path (oldest segment, own flow register,
//! IB PSN window, budget), the error state leaving the wait queues, and
//! the restarts' bookkeeping. Each test's doc names the kernel function
//! it pins and what it showed with the rule taken out (checked).

mod common;

use common::{Kind, Pair, ack, for_qp, forge_resp, kind, split_last};
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::sim::RcvError;
use hfi1_hal::{FlowPsn, Psn};
use tid_harness::world::{Arrival, REQUESTER, Setup};
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::rc::{QpState, WcStatus};

/// The chip's outcome for the first of `at`, a TID READ_RESP.
fn outcome(at: &[tid_harness::world::AtRequester]) -> (bool, Option<RcvError>) {
    match at[0].arrival {
        Arrival::ReadResp { outcome, .. } => (outcome.placed, outcome.error),
        other => panic!("{other:?}"),
    }
}

/// The remote address a READ_REQ asks for.
fn vaddr(p: &[u8]) -> u64 {
    match packet::parse(p).unwrap().1 {
        Parsed::ReadReq { hdr, .. } => hdr.reth.vaddr,
        _ => panic!("not a READ_REQ"),
    }
}

/// A PSN NAK for `psn` to requester QP 0.
fn psn_nak(psn: u32) -> Vec<u8> {
    ack(psn, 0x60)
}

/// Deviation kept: a completed segment's TIDs are unprogrammed at its
/// last packet as in 6.1, but its RcvArray entries go to no other
/// request until the QP's flow leaves the generation they served, so a
/// late copy of its packets meets a TID error and is placed nowhere.
/// Kernel: `hfi1_kern_exp_rcv_clear()` in
/// `hfi1_rc_rcv_tid_rdma_read_resp()` frees them at once while the flow
/// keeps its generation; the chip places a sequence-error packet whenever
/// its TID is valid.
///
/// Fails with 6.1's rule (checked: `retire_oldest` giving the entries
/// back at once): B is given A's entries, and the late copy of A's
/// packet is placed into B's page (`placed` true, a sequence error).
#[test]
fn late_copy_of_a_completed_segment_never_lands_in_a_reused_tid() {
    let mut p = Pair::new(Setup {
        qps: 2,
        groups: 1,
        seg_len: 16384,
        tid_read_min: 8192,
        ..Setup::default()
    });
    p.post(0, 8);
    p.post(0, 4);
    p.post(1, 4);
    let reqs = p.send();
    assert_eq!(reqs.len(), 2, "A's two segments take the whole context");
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 8);
    let late = resps[1].clone();
    p.give_requester(&resps[..4]);
    // B runs now: with 6.1's rule it has A's first segment's entries.
    let b = p.send();
    let rb = p.answer(&b);
    let half = rb.len().min(2);
    p.give_requester(&rb[..half]);
    let at = p.give_requester(&[late]);
    assert_eq!(outcome(&at), (false, Some(RcvError::Tid)));
    p.give_requester(&rb[half..]);
    p.give_requester(&resps[4..]);
    p.finish(0);
    assert!(p.done.iter().flatten().all(|d| d.1 == WcStatus::Success));
    assert_eq!(p.done.iter().flatten().count(), 3);
    p.teardown_clean();
}

/// A segment's TIDs are released at its last packet: its DMA mapping
/// goes, its RcvArray entries are unprogrammed (a copy of its packet
/// meets a TID error) and kept in the quarantine until the flow moves
/// on. Kernel: `hfi1_kern_exp_rcv_clear()` in
/// `hfi1_rc_rcv_tid_rdma_read_resp()`.
///
/// Fails with the release taken out (checked: `retire_oldest` not
/// called, the TIDs held until the READ is cleared, as the engine had
/// it): segment 1's DMA mapping is still there after its last packet.
#[test]
fn segment_tids_are_released_at_its_last_packet() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    assert_eq!(resps.len(), 2, "two one-page segments");
    assert_eq!(p.n.rcd.dma.live_mappings(), 2);
    p.give_requester(&resps[..1]);
    assert_eq!(p.n.rcd.dma.live_mappings(), 1, "segment 1's mapping went");
    // A one-page segment reserves a pair of RcvArray entries, as the
    // kernel's `kern_alloc_tids()` allocates them in pairs.
    assert_eq!(p.requester(0, |r| r.quarantined_entries()), 2);
    let at = p.give_requester(&resps[..1]);
    assert_eq!(outcome(&at), (false, Some(RcvError::Tid)));
    p.give_requester(&resps[1..]);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    assert_eq!(
        p.held(),
        0,
        "flow and quarantine released with the last READ"
    );
    p.teardown_clean();
}

/// The hardware flow stays with the QP while a TID READ it posted is
/// unfinished, even with nothing in flight, and is released once every
/// TID READ posted has completed. Kernel: the `tid_r_comp ==
/// tid_r_reqs` test of `hfi1_rc_rcv_tid_rdma_read_resp()`.
///
/// Fails with the engine's old rule (checked: the flow released whenever
/// no segment is set up): the flow is gone after READ 1 while READ 2
/// waits.
#[test]
fn flow_kept_while_a_posted_read_is_unfinished() {
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
    let r = p.answer(&reqs);
    p.give_requester(&r);
    assert_eq!(p.done[0], [(a, WcStatus::Success)]);
    assert_eq!(
        p.n.leaks(&mut LockToken::root()).flows,
        1,
        "the flow is kept"
    );
    p.finish(0);
    assert_eq!(p.done[0], [(a, WcStatus::Success), (b, WcStatus::Success)]);
    assert_eq!(
        p.n.leaks(&mut LockToken::root()).flows,
        0,
        "released at the end"
    );
    p.teardown_clean();
}

/// A READ_RESP taken in sequence whose IB PSN names no READ moves the QP
/// to the error state: every READ is flushed. Kernel: `ack_op_err` of
/// `hfi1_rc_rcv_tid_rdma_read_resp()` (`rvt_error_qp(qp,
/// IB_WC_WR_FLUSH_ERR)`).
///
/// Fails with the error state taken out (checked: the packet only
/// dropped): the READ is not completed.
#[test]
fn read_resp_for_no_request_errors_the_qp() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    let bad = forge_resp(&resps[0], |_, _, h| h.verbs_psn = Psn::new(0x500));
    p.give_requester(&[bad]);
    assert_eq!(p.done[0], [(wr, WcStatus::Flushed)]);
    assert_eq!(p.states(0).0, QpState::Error);
    assert_eq!(p.held(), 0);
    p.teardown_clean();
}

/// The SYNC check counts a segment's packets as the kernel does,
/// `rvt_div_round_up_mtu(len)`: at an 8 KiB MTU a 256 KiB segment takes
/// 32 flow PSNs, so the last segment of a generation starts at 1984 (the
/// next would pass 2047). Kernel: the SYNC test of
/// `hfi1_build_tid_rdma_read_req()`.
///
/// Fails with the engine's old estimate (checked: the segment's pages):
/// the generation ends after the segment at 1952.
#[test]
fn sync_check_counts_packets_as_the_kernel_does() {
    let mut p = Pair::new(Setup {
        pmtu: 8192,
        groups: 64,
        ..Setup::default()
    });
    for _ in 0..16 {
        // 1 MiB contiguous, 256 KiB aligned: a few RcvArray entries a
        // segment, so a whole generation's segments fit beside the
        // quarantine.
        let gap = 64 - (p.n.pages.run(0, 0).vaddr >> 12) % 64;
        let sge = p.n.pages.run(gap, 256);
        p.post_sges(0, vec![sge]);
    }
    let mut starts: Vec<FlowPsn> = Vec::new();
    loop {
        let reqs = p.send();
        for r in &reqs {
            if let Parsed::ReadReq { hdr, .. } = packet::parse(r).unwrap().1 {
                starts.push(hdr.flow_psn);
            }
        }
        p.give_responder(&reqs);
        let resps = p.respond();
        p.give_requester(&resps);
        if reqs.is_empty() && resps.is_empty() {
            break;
        }
    }
    assert_eq!(p.done[0].len(), 16);
    assert!(p.done[0].iter().all(|d| d.1 == WcStatus::Success));
    let first_gen = starts[0].generation();
    let last = starts
        .iter()
        .filter(|f| f.generation() == first_gen)
        .map(|f| f.seq())
        .max();
    assert_eq!(last, Some(1984));
    assert!(starts.iter().any(|f| f.generation() != first_gen), "a SYNC");
    assert!(p.req_stats().syncs >= 1);
    p.teardown_clean();
}

/// The flow generation a TID READ_REQ names.
fn generation(p: &[u8]) -> hfi1_hal::Generation {
    match packet::parse(p).unwrap().1 {
        Parsed::ReadReq { hdr, .. } => hdr.flow_psn.generation(),
        _ => panic!("not a TID READ_REQ"),
    }
}

/// Takes `n` of the requester context's hardware flows, as other QPs
/// would hold them.
fn take_flows(p: &mut Pair, n: usize) -> Vec<hfi1_hal::FlowIndex> {
    p.requester_ctxt(|e| (0..n).map(|_| e.flows.reserve(None).unwrap()).collect())
}

/// Gives back flows [`take_flows`] took.
fn give_flows(p: &mut Pair, flows: &[hfi1_hal::FlowIndex]) {
    p.requester_ctxt(|e| flows.iter().for_each(|&f| e.flows.release(f)));
}

/// At a SYNC point the requester gives its hardware flow back to the
/// receive context and wakes the head of the flow queue: with every other
/// flow taken, QP B, queued for a flow behind QP A's one long READ, gets
/// A's flow when A's first generation is used up, and its READ completes
/// while A's is still unfinished (A queues behind B for a flow and goes
/// on when B's last READ gives it back). Kernel:
/// `hfi1_kern_clear_hw_flow()` at the SYNC of
/// `hfi1_rc_rcv_tid_rdma_read_resp()` (bit freed, generation advanced,
/// `first_qp()` of `rcd->flow_queue` woken).
///
/// Fails with the wake-up taken out (checked: `clear_hw_flow_with` not
/// delivering to the queue's head): B is never woken, A queues behind it
/// and neither READ completes. Fails with the flow kept over the SYNC
/// (checked: `regenerate_hw_flow` instead of `clear_flow` at both SYNC
/// sites): B gets a flow only after A's READ completed. Fails with the
/// generation step taken out of `clear_flow` (checked): B's READ_REQ
/// names A's old generation.
#[test]
fn sync_point_releases_the_flow_and_wakes_the_flow_queue() {
    let mut p = Pair::new(Setup {
        qps: 2,
        groups: 64,
        ..Setup::default()
    });
    let others = take_flows(&mut p, hfi1_hal::consts::NUM_TID_FLOWS - 1);
    // 36 segments of 256 KiB at a 4 KiB MTU: 64 flow PSNs each, so the
    // first generation ends after 31 and a SYNC follows.
    let gap = 64 - (p.n.pages.run(0, 0).vaddr >> 12) % 64;
    let sge = p.n.pages.run(gap, 36 * 64);
    let a = p.post_sges(0, vec![sge]);
    let sge = p.n.pages.run(0, 64);
    let b = p.post_sges(1, vec![sge]);
    let first = p.send();
    assert!(!first.is_empty(), "A has the last flow");
    assert!(for_qp(&first, 1).is_empty(), "B waits for a flow");
    assert_eq!(p.n.leaks(&mut LockToken::root()).queued_qps, 1);
    let a_gen = generation(&first[0]);
    p.give_responder(&first);
    // Round by round, until nothing moves: when B's READ completes, A's
    // is still open.
    let (mut a_open_at_b, mut b_gen) = (None, None);
    for _ in 0..256 {
        let reqs = p.send();
        b_gen = b_gen.or_else(|| for_qp(&reqs, 1).first().map(|r| generation(r)));
        p.give_responder(&reqs);
        let resps = p.respond();
        p.give_requester(&resps);
        if a_open_at_b.is_none() && !p.done[1].is_empty() {
            a_open_at_b = Some(p.done[0].is_empty());
        }
        if reqs.is_empty() && resps.is_empty() && p.n.pending_work() == 0 {
            break;
        }
    }
    assert_eq!(p.req_stats().syncs, 1, "A passed one SYNC point");
    assert_eq!(p.done[1], [(b, WcStatus::Success)]);
    assert_eq!(p.done[0], [(a, WcStatus::Success)]);
    assert_eq!(a_open_at_b, Some(true), "B got the flow at A's SYNC");
    assert_eq!(b_gen, Some(a_gen.next()), "the flow's generation moved on");
    assert_eq!(p.req_stats().flow_waits, 2, "B, then A, waited for a flow");
    give_flows(&mut p, &others);
    p.teardown_clean();
}

/// The IB PSN window of the KDETH error path ends at `s_psn` inclusive:
/// a sequence-error READ_RESP naming exactly `s_psn` (the next segment's
/// first PSN, not requested yet) is taken into software PSN checking.
/// Kernel: `cmp_psn(ibpsn, qp->s_psn) > 0` in `handle_read_kdeth_eflags()`.
///
/// Fails with the window ending before `s_psn` (checked): the packet is
/// counted `psn_dropped`.
#[test]
fn seq_error_resp_at_s_psn_passes_the_ib_psn_check() {
    let mut p = Pair::new(Setup {
        max_read: 1,
        seg_len: 4096,
        tid_read_min: 8192,
        ..Setup::default()
    });
    p.post(0, 2);
    let reqs = p.send();
    assert_eq!(reqs.len(), 1, "one segment in flight");
    let resps = p.answer(&reqs);
    // Segment 1 starts at 0x11 = s_psn; a copy ahead of the chip.
    let ahead = forge_resp(&resps[0], |_, psn, h| {
        h.verbs_psn = Psn::new(0x11);
        *psn = FlowPsn::new(psn.generation(), psn.seq() + 5);
    });
    let before = p.req_stats();
    let at = p.give_requester(&[ahead]);
    assert_eq!(outcome(&at).1, Some(RcvError::FlowSeq));
    let after = p.req_stats();
    assert_eq!(after.psn_dropped, before.psn_dropped);
    assert_eq!(after.seq_errors, before.seq_errors + 1);
    p.finish(0);
    p.teardown_clean();
}

/// A sequence error is judged against the oldest unfinished segment of
/// the oldest READ, whatever segment the packet belongs to: segment 1's
/// packet arriving while segment 0's is lost restarts segment 0.
/// Kernel: `req->flows[req->clear_tail]` in `handle_read_kdeth_eflags()`.
///
/// Fails with the packet's own segment taken (checked: the restart from
/// the segment after the oldest, the packet's): the first request sent
/// again is 0x11.
#[test]
fn sw_psn_check_uses_the_oldest_segment() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    // Segment 0's packet is lost; segment 1's arrives ahead of the chip.
    let at = p.give_requester(&resps[1..]);
    assert_eq!(outcome(&at).1, Some(RcvError::FlowSeq));
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x10)));
    p.give_responder(&again);
    p.finish_clean(0, &[wr]);
}

/// A sequence-error packet the chip checked against another QP's flow
/// (forged: its destination QP names B's flow, its `verbs_qp` A) is
/// judged against A's own oldest segment and A's own flow register: A
/// restarts and completes; nothing is killed. The generation comparison
/// the engine's old segment search made is gone: for real packets it was
/// always true (a sequence error is reported only in the current
/// generation of the QP's flow), and for this one it made A lose track.
/// Kernel: `read_r_next_psn(dd, rcd->ctxt, flow->idx)` in
/// `handle_read_kdeth_eflags()`.
///
/// Fails with the comparison put back (checked: a packet whose generation
/// is not its oldest segment's errors the QP): A's READ is flushed.
#[test]
fn seq_error_checked_against_another_qps_flow_restarts_never_kills() {
    let mut p = Pair::new(Setup {
        qps: 2,
        seg_len: 4096,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let a = p.post(0, 4);
    let b = p.post(1, 4);
    let reqs = p.send();
    let resps = p.answer(&reqs);
    let rb = for_qp(&resps, 1);
    // B's segment 2, its headers naming A.
    let forged = forge_resp(&rb[2], |_, _, h| {
        h.verbs_qp = REQUESTER.qpn;
        h.verbs_psn = Psn::new(0x11);
    });
    let at = p.give_requester(&[forged]);
    assert_eq!(outcome(&at).1, Some(RcvError::FlowSeq));
    assert_eq!(p.states(0).0, QpState::Rts, "A is not killed");
    assert_eq!(p.req_stats().seq_restarts, 1);
    p.give_requester(&resps);
    p.finish(0);
    assert_eq!(p.done[0], [(a, WcStatus::Success)]);
    assert_eq!(p.done[1], [(b, WcStatus::Success)]);
    p.teardown_clean();
}

/// A restart after a sequence error goes through the RC restart and
/// spends the retry budget: with `retry_cnt` 0 the first one completes
/// the READ `RETRY_EXC_ERR`. Kernel: `restart_tid_rdma_read_req()` →
/// `hfi1_restart_rc()`.
///
/// Fails with the restart outside the budget (checked: `reset_psn`
/// called directly, as the engine's old restart was): the READ is
/// restarted without spending anything and does not complete.
#[test]
fn sequence_error_restart_spends_the_retry_budget() {
    let mut p = Pair::small(16, 8192, 0);
    let (wr, resps) = p.serve(0, 2);
    p.give_requester(&resps[1..]);
    assert_eq!(p.done[0], [(wr, WcStatus::RetryExceeded)]);
    p.teardown_clean();
}

/// Deviation kept: an ACK for a TID READ segment at or past the send
/// cursor moves the cursor past it (6.1 does this for every other
/// operation, `reset_psn(qp, psn + 1)`). Kernel: the `case 0` of
/// `do_rc_ack()` skips it for a TID READ; a restart at the READ's first
/// PSN whose first segment then completes from the old stream re-sends
/// the READ from its start with `comp_seg` reset, naming the second
/// segment's TIDs with the first segment's address.
///
/// Fails with 6.1's rule (checked: no cursor move for a TID READ): the
/// request sent again carries segment 1's PSN with the READ's first
/// address (segment 0's bytes asked for into segment 1's TIDs).
#[test]
fn ack_for_a_tid_segment_moves_the_send_cursor_past_it() {
    let mut p = Pair::small(16, 8192, 7);
    let wr = p.post(0, 2);
    let reqs = p.send();
    let base = vaddr(&reqs[0]);
    let r0 = p.answer(&reqs[..1]);
    assert!(p.expire(0));
    let _lost = p.send();
    p.give_requester(&[psn_nak(0x10)]);
    p.give_requester(&r0);
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x11)));
    assert_eq!(vaddr(&again[0]), base + 4096, "segment 1's bytes");
    p.give_responder(&again);
    p.finish_clean(0, &[wr]);
}

/// Deviation kept: a restart at a PSN past every segment set up (the
/// cursor moved past a segment an ACK covered, and the next is not set up
/// yet) goes on with the next segment. Kernel:
/// `hfi1_tid_rdma_restart_req()` finds no flow and the READ completes
/// `IB_WC_LOC_QP_OP_ERR`.
///
/// Fails with 6.1's rule (checked: the "past every segment" branch taken
/// out): the READ completes `LOC_QP_OP_ERR`.
#[test]
fn restart_past_every_set_up_segment_goes_on_with_the_next() {
    let mut p = Pair::new(Setup {
        max_read: 1,
        seg_len: 4096,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let wr = p.post(0, 2);
    let reqs = p.send();
    assert_eq!(reqs.len(), 1);
    let r0 = p.answer(&reqs);
    p.give_requester(&[psn_nak(0x10)]);
    p.give_requester(&r0);
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x11)));
    p.give_responder(&again);
    p.finish_clean(0, &[wr]);
}

/// Deviation kept: when a restart re-sends a READ from its start and
/// reaches a segment whose pages an earlier try found (it then waited for
/// RcvArray space), the walk over the scatter list resumes after those
/// pages. Kernel: `restart_sge()` in `hfi1_build_tid_rdma_read_req()`
/// puts the walk back at that segment's start while
/// `hfi1_kern_exp_rcv_setup()` keeps its pages, so the next segment walks
/// them again.
///
/// Fails with 6.1's rule (checked: the walk put back at the segment's
/// start): segment 3 is read into segment 2's pages, and the READ
/// completes with the wrong bytes.
#[test]
fn resend_resumes_the_walk_after_a_queued_segments_pages() {
    let mut p = Pair::new(Setup {
        groups: 1,
        seg_len: 16384,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let wr = p.post(0, 16);
    let lost = p.send();
    assert_eq!(lost.len(), 2, "two segments fit, the third waits");
    assert!(p.expire(0));
    let one = p.send();
    assert_eq!(one.len(), 1, "segment 0 again");
    let r = p.answer(&one);
    p.give_requester(&r);
    // Segment 1 again; segment 2 (its pages found) still waits.
    let more = p.send();
    assert_eq!(more.len(), 1);
    assert_eq!(kind(&more[0]), Kind::TidReq(Psn::new(0x14)));
    p.finish_clean(0, &[wr]);
}

/// Deviation kept: a QP that goes to the error state leaves the TID wait
/// queues, so the QP behind it is woken when RcvArray space comes back.
/// Kernel: `rvt_error_qp()` → `notify_error_qp()` leaves only the iowait
/// list; `hfi1_tid_rdma_flush_wait()` runs only at reset, so an errored
/// QP at the head of the RcvArray queue (woken, it only flushes) blocks
/// every QP behind it until it is reset or destroyed.
///
/// Fails with 6.1's rule (checked: no `flush_wait` when a call errors
/// the QP): B never gets RcvArray space and its READ never completes.
#[test]
fn errored_qp_leaves_the_rcvarray_queue_and_wakes_the_next() {
    let mut p = Pair::new(Setup {
        qps: 3,
        groups: 2,
        seg_len: 16384,
        tid_read_min: 8192,
        ..Setup::default()
    });
    // C (QP 2) takes 12 of the 16 entries; A (QP 0) one segment, then
    // waits at the head of the RcvArray queue; B (QP 1) waits behind it.
    let c = p.post(2, 12);
    let rc = p.send();
    assert_eq!(rc.len(), 3);
    let a = p.post(0, 8);
    let ra = p.send();
    assert_eq!(ra.len(), 1);
    let b = p.post(1, 4);
    assert!(p.send().is_empty());
    // A fatal NAK (remote operational error) for A's READ.
    p.give_requester(&[ack(0x10, 0x63)]);
    assert_eq!(p.done[0], [(a, WcStatus::RemoteOperational)]);
    let r = p.answer(&rc);
    p.give_requester(&r);
    p.finish(1);
    assert_eq!(p.done[2], [(c, WcStatus::Success)]);
    assert_eq!(p.done[1], [(b, WcStatus::Success)]);
    p.teardown_clean();
}

/// Deviation kept: after a restart a segment is counted outstanding only
/// once its request is sent again, so the old stream's last packet of a
/// segment not yet requested again completes it without taking a read
/// off the count. Kernel: `hfi1_rc_rcv_tid_rdma_read_resp()` decrements
/// `s_num_rd_atomic` (a `u8`) for every completing last packet, while
/// `reset_psn()` zeroed it: the count wraps to 255 and the QP parks in
/// `RVT_S_WAIT_RDMAR` for good.
///
/// Fails with 6.1's rule (checked: the decrement unconditional on a `u8`,
/// with the cursor move of
/// `ack_for_a_tid_segment_moves_the_send_cursor_past_it` taken out too,
/// as 6.1 has neither; that move's recount alone repairs the count): the
/// count wraps to 255 and nothing is sent after the late packets (with
/// only the cursor move taken out, two requests go).
#[test]
fn late_last_packet_after_a_restart_does_not_wrap_the_read_count() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 3);
    let (last, _) = split_last(&resps);
    assert_eq!(last.len(), 3);
    assert!(p.expire(0));
    let one = p.send();
    assert_eq!(one.len(), 1, "segment 0 requested again");
    // The old stream's segments 0 and 1 arrive before segment 1 is
    // requested again.
    p.give_requester(&last[..2]);
    let rest = p.send();
    assert_eq!(rest.len(), 1, "segment 2 requested again");
    assert_eq!(kind(&rest[0]), Kind::TidReq(Psn::new(0x12)));
    assert_eq!(p.requester(0, |r| r.reads_outstanding()), 1);
    p.give_responder(&one);
    p.give_responder(&rest);
    p.finish_clean(0, &[wr]);
}

/// Deviation kept: an expiry restarts from the oldest TID READ's oldest
/// unfinished segment when a PSN NAK's implicit acknowledgement passed
/// it (the responder had its request; its last packet never arrived).
/// Kernel: `rvt_rc_timeout()` → `hfi1_restart_rc(qp, qp->s_last_psn + 1,
/// 1)`: once software PSN checking is on (`HFI1_R_TID_SW_PSN`, set by the
/// first sequence error, whose `restart_tid_rdma_read_req()` request was
/// lost too), every packet of the later segments is ahead of that
/// segment and dropped, and each expiry asks for the later segments only,
/// until the budget runs out.
///
/// Fails with 6.1's rule (checked: the expiry restarting from
/// `s_last_psn + 1`): the READ completes `RETRY_EXC_ERR` on a fabric that
/// lost four packets.
#[test]
fn expiry_restarts_from_a_segment_a_psn_nak_passed() {
    let mut p = Pair::small(16, 8192, 7);
    let wr = p.post(0, 4);
    let reqs = p.send();
    assert_eq!(reqs.len(), 4);
    // 0x12's request is lost: the responder NAKs 0x12 on 0x13.
    p.give_responder(&[reqs[0].clone(), reqs[1].clone(), reqs[3].clone()]);
    let out = p.respond();
    let resps: Vec<_> = out
        .iter()
        .filter(|x| matches!(kind(x), Kind::TidResp(..)))
        .cloned()
        .collect();
    let nak: Vec<_> = out
        .iter()
        .filter(|x| matches!(kind(x), Kind::Ack(..)))
        .cloned()
        .collect();
    assert_eq!(kind(&nak[0]), Kind::Ack(Psn::new(0x12), 0x60));
    // Segment 1's response (0x11) is lost; the NAK passes it.
    p.give_requester(&resps[..1]);
    p.give_requester(&nak);
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x12)));
    let later = p.answer(&again);
    // The first sequence error restarts from segment 1; that request is
    // lost as well.
    p.give_requester(&later[..1]);
    let lost = p.send();
    assert_eq!(kind(&lost[0]), Kind::TidReq(Psn::new(0x11)));
    p.give_requester(&later[1..]);
    p.finish_clean(0, &[wr]);
}

/// Deviation kept: a segment's last READ_RESP whose AETH is not an ACK
/// (only a forged packet carries one) acts as the NAK it carries and the
/// segment keeps its TIDs. Kernel: `hfi1_rc_rcv_tid_rdma_read_resp()`
/// frees them (`hfi1_kern_exp_rcv_clear()`) before `do_rc_ack()`; the
/// NAK's restart then finds no segment to send again
/// (`hfi1_tid_rdma_restart_req()`) and the READ completes
/// `IB_WC_LOC_QP_OP_ERR`.
///
/// Fails with 6.1's rule (checked: the segment retired before the AETH is
/// looked at): the request sent again is segment 1's (0x11) and the READ
/// ends `WR_FLUSH_ERR` with the QP in error; with the resend of a set-up
/// segment also taking the cursor's segment index rather than its own
/// (checked) it completes with 4083 wrong bytes.
///
/// Kernel, for the second rule: `hfi1_build_tid_rdma_read_packet()`
/// names `req->cur_seg`'s bytes.
#[test]
fn last_packet_with_a_nak_aeth_keeps_its_segment() {
    let mut p = Pair::small(16, 8192, 7);
    let (wr, resps) = p.serve(0, 2);
    let forged = forge_resp(&resps[0], |_, _, h| h.aeth.syndrome = 0x60);
    p.give_requester(&[forged]);
    assert!(p.done[0].is_empty());
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x10)));
    p.give_responder(&again);
    p.finish_clean(0, &[wr]);
}
