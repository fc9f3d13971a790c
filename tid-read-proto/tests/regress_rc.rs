// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The RC layer of the READ requester as Linux 6.1 runs it: the retry
//! budget and the error state, posts to a QP in the error state, the NAK
//! classes and codes, the RNR timer, the retry timer's arming and
//! `SEND_ONE`, and no completion ever lost. Each test's doc names the
//! kernel function it pins and what it showed with the rule taken out
//! (checked).

mod common;

use common::{Kind, Pair, ack, kind};
use hfi1_hal::Psn;
use hfi1_hal::lock_order::LockToken;
use tid_harness::world::Setup;
use tid_read_proto::qp;
use tid_read_proto::rc::retry::{retry_ns, rnr_ns};
use tid_read_proto::rc::{EngineError, QpState, WcStatus};

/// The lowest-PSN request among `pkts`.
fn first_request(pkts: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let psn = |p: &Vec<u8>| match kind(p) {
        Kind::TidReq(s) | Kind::PlainReq(s) => s.get(),
        _ => u32::MAX,
    };
    pkts.iter()
        .min_by_key(|p| psn(p))
        .cloned()
        .into_iter()
        .collect()
}

/// With the retry budget spent the oldest READ completes
/// `RETRY_EXC_ERR`, the QP goes to the error state, the others are
/// flushed and everything the QP held comes back at once.
/// Kernel: `hfi1_restart_rc()` and `rvt_error_qp()`.
///
/// Fails with the budget taken out (checked, `spend_retry` always
/// succeeding): no completion after 20 expiries, the timer armed again
/// each time.
#[test]
fn retry_exhausted_completes_retry_exc_err_and_flushes_the_rest() {
    let mut p = Pair::small(16, 8192, 2);
    let wrs: Vec<u64> = (0..3).map(|_| p.post(0, 2)).collect();
    assert!(!p.send().is_empty());
    let mut expiries = 0;
    while p.expire(0) {
        expiries += 1;
        assert!(expiries < 20, "the budget never ran out");
        // The fabric is dead: every request is lost.
        assert_eq!(p.send().len(), usize::from(p.states(0).0 == QpState::Rts));
    }
    assert_eq!(
        expiries, 3,
        "retry_cnt 2: two restarts, the third expiry fails"
    );
    assert_eq!(
        p.done[0],
        [
            (wrs[0], WcStatus::RetryExceeded),
            (wrs[1], WcStatus::Flushed),
            (wrs[2], WcStatus::Flushed)
        ]
    );
    assert_eq!(p.states(0).0, QpState::Error);
    assert_eq!(p.held(), 0, "the error state released everything");
    p.teardown_clean();
}

/// Progress refills the budget: with `retry_cnt` 1, ten rounds of an
/// expiry followed by one segment completing never run it out.
/// Kernel: the `s_retry = s_retry_cnt` of `do_rc_ack()` (ACK) and
/// `do_rc_completion()`.
///
/// Fails with the refill taken out of the ACK branch of `do_rc_ack`
/// (checked): the second expiry completes the READ `RETRY_EXC_ERR`.
#[test]
fn progress_refills_the_retry_budget() {
    let mut p = Pair::small(16, 8192, 1);
    let wr = p.post(0, 12);
    // Only the first request of each burst reaches the responder.
    let reqs = p.send();
    p.give_responder(&first_request(&reqs));
    let resps = p.respond();
    p.give_requester(&resps);
    for round in 0..10 {
        assert!(p.expire(0), "round {round}: the timer runs");
        let reqs = p.send();
        assert_eq!(reqs.len(), 1, "round {round}: one request after an expiry");
        p.give_responder(&reqs);
        let resps = p.respond();
        p.give_requester(&resps);
        // The ACK let the rest go again: lost once more.
        let _ = p.send();
        assert_eq!(p.states(0).0, QpState::Rts, "round {round}");
    }
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// Deviation kept: with the budget spent while two TID READs have
/// segments set up, every READ's RcvArray entries, DMA mappings and flow
/// records come back with the error state.
/// Kernel: `hfi1_restart_rc()` releases only the oldest READ's TIDs
/// (`hfi1_kern_exp_rcv_clear_all()` of `s_acked`'s request); the flush
/// that follows frees the others' flow records (`trdma_clean_swqe()`)
/// with their entries still programmed and their pages mapped.
///
/// Fails with 6.1's rule (checked: `release_everything` clearing only the
/// READ at `s_acked`): READ 2's two segments keep their RcvArray entries
/// (a pair each) and DMA mappings after the error (`held()` 7: entries
/// 4, group 1, mappings 2).
#[test]
fn exhausted_budget_releases_every_reads_tids() {
    let mut p = Pair::small(16, 8192, 0);
    p.post(0, 2);
    p.post(0, 2);
    assert_eq!(p.send().len(), 4, "both READs have their segments set up");
    assert!(p.expire(0));
    assert_eq!(p.states(0).0, QpState::Error);
    assert_eq!(p.held(), 0, "{:?}", p.n.leaks(&mut LockToken::root()));
    p.teardown_clean();
}

/// A QP in the error state accepts posts, starts nothing, and completes
/// them `WR_FLUSH_ERR`: never lost, never refused.
/// Kernel: `rvt_post_send()` with `ib_rvt_state_ops[IB_QPS_ERR]`
/// (`RVT_POST_SEND_OK | RVT_FLUSH_SEND`) and the flush of
/// `hfi1_make_rc_req()`.
///
/// Fails with the post refused in the error state (checked: `post_read`
/// returning `QueueFull` there): the post is not accepted; with both
/// flushes taken out (checked: the WQE queued as in RTS and the send
/// engine's error-state branch removed) the READ is started (a request
/// goes out).
#[test]
fn post_on_errored_qp_completes_flushed() {
    let mut p = Pair::small(16, 8192, 0);
    p.post(0, 1);
    let _ = p.send();
    assert!(p.expire(0));
    assert_eq!(p.states(0).0, QpState::Error);
    let wr = p.post(0, 2);
    assert!(p.send().is_empty(), "nothing is sent in the error state");
    p.poll_all();
    assert_eq!(p.done[0].last(), Some(&(wr, WcStatus::Flushed)));
    p.teardown_clean();
}

/// Each fatal NAK code gives the oldest READ the kernel's status and
/// flushes the rest; codes 4 (invalid RD request) and the reserved ones
/// are ignored. Kernel: `do_rc_ack()`, `case 3`.
///
/// Fails with every fatal NAK mapped to one status (checked: codes 1 and
/// 2 giving `REM_OP_ERR`, as the engine's single status did): code 1's
/// READ completes `REM_OP_ERR`, not `REM_INV_REQ_ERR`.
#[test]
fn fatal_nak_codes_give_the_kernels_statuses() {
    for (code, want) in [
        (1u8, Some(WcStatus::RemoteInvalidRequest)),
        (2, Some(WcStatus::RemoteAccess)),
        (3, Some(WcStatus::RemoteOperational)),
        (4, None),
        (5, None),
        (31, None),
    ] {
        let mut p = Pair::small(16, 8192, 7);
        let a = p.post(0, 2);
        let b = p.post(0, 2);
        let _ = p.send();
        p.give_requester(&[ack(0x10, 0x60 | code)]);
        match want {
            Some(s) => {
                assert_eq!(p.done[0], [(a, s), (b, WcStatus::Flushed)], "code {code}");
                assert_eq!(p.states(0).0, QpState::Error);
            }
            None => {
                assert!(p.done[0].is_empty(), "code {code} is ignored");
                assert_eq!(p.states(0).0, QpState::Rts);
            }
        }
        p.teardown_clean();
    }
}

/// A NAK whose PSN lies past the oldest READ (a later request was
/// NAKed) means the oldest READ's response was lost: the QP restarts from
/// `s_last_psn + 1`; nothing fails. Kernel: the loop of `do_rc_ack()`
/// (`set_restart_qp()`).
///
/// Fails with the loop taken out (checked): READ 1 completes
/// `REM_OP_ERR`.
#[test]
fn nak_for_a_later_read_restarts_the_earlier_one() {
    let mut p = Pair::small(16, 8192, 7);
    let a = p.post(0, 2);
    let b = p.post(0, 2);
    let reqs = p.send();
    assert_eq!(reqs.len(), 4);
    // READ 1 spans 0x10..=0x11; a NAK at 0x13 names READ 2's segment.
    p.give_requester(&[ack(0x13, 0x63)]);
    assert!(p.done[0].is_empty());
    assert_eq!(p.req_stats().restarts, 1);
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x10)));
    p.give_responder(&again);
    p.finish(0);
    assert_eq!(p.done[0], [(a, WcStatus::Success), (b, WcStatus::Success)]);
    p.teardown_clean();
}

/// A PSN NAK restarts at the PSN it names (the responder's `r_psn`), not
/// at the oldest segment. Kernel: `case 0` of the NAK branch of
/// `do_rc_ack()` (`hfi1_restart_rc(qp, psn, 0)`).
///
/// Fails with the restart taken from `s_last_psn + 1` (checked): the
/// first request sent again is 0x10, not 0x11.
#[test]
fn psn_nak_restarts_at_the_naks_psn() {
    let mut p = Pair::small(16, 8192, 7);
    p.post(0, 3);
    let reqs = p.send();
    assert_eq!(reqs.len(), 3);
    // The responder took 0x10 and lost 0x11.
    p.give_responder(&reqs[..1]);
    p.give_requester(&[ack(0x11, 0x60)]);
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x11)));
    p.give_responder(&again);
    let r = p.respond();
    p.give_requester(&r);
    p.finish(0);
    assert_eq!(p.done[0].len(), 1);
    assert_eq!(p.done[0][0].1, WcStatus::Success);
    p.teardown_clean();
}

/// An RNR NAK stops sending for its timer's time (the AETH's timer code
/// 14: 1.28 ms), then the READ is resent from the NAK's PSN; with the RNR
/// budget spent the READ completes `RNR_RETRY_EXC_ERR`.
/// Kernel: `case 1` of `do_rc_ack()`, `rvt_add_rnr_timer()`,
/// `rvt_rc_rnr_retry()`.
///
/// Fails with RNR NAKs taken for ACKs (checked: the old `is_nak` test of
/// the top two bits): the NAK is taken for an ACK and no RNR timer runs.
#[test]
fn rnr_nak_waits_its_timer_then_resends_from_the_nak_psn() {
    let mut p = Pair::new(Setup {
        rnr_retry: 1,
        tid_read_min: 8192,
        seg_len: 4096,
        ..Setup::default()
    });
    let wr = p.post(0, 2);
    assert_eq!(p.send().len(), 2);
    p.give_requester(&[ack(0x10, 0x20 | 14)]);
    assert_eq!(p.rnr_timer(0), Some(rnr_ns(14)));
    assert_eq!(
        p.retry_timer(0),
        None,
        "the RNR timer replaces the retry timer"
    );
    assert!(p.send().is_empty(), "nothing goes before the RNR timer");
    assert!(p.n.fire_rnr_timer(0, &mut LockToken::root()));
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::TidReq(Psn::new(0x10)));
    // rnr_retry 1: the second RNR NAK finds the budget spent.
    p.give_requester(&[ack(0x10, 0x20 | 14)]);
    assert_eq!(p.done[0], [(wr, WcStatus::RnrRetryExceeded)]);
    p.teardown_clean();
}

/// Deviation kept: a reserved AETH class (and an ignored NAK code) keeps
/// the retry timer running. Kernel: `do_rc_ack()`'s `bail_stop` stops it;
/// with the segment's last response lost nothing arms it again (only
/// forged packets carry these codes: in 6.1 a forged packet hangs the
/// QP).
///
/// Fails with 6.1's rule (checked: the timers stopped for
/// `AethKind::Reserved`, and again for the ignored code): the timer is
/// stopped (with the READ's responses lost nothing would arm it again).
#[test]
fn reserved_aeth_code_does_not_stop_the_retry_timer() {
    let mut p = Pair::small(16, 8192, 7);
    let wr = p.post(0, 2);
    let _ = p.send();
    assert!(p.retry_timer(0).is_some());
    p.give_requester(&[ack(0x10, 0x40)]);
    p.give_requester(&[ack(0x10, 0x64)]);
    assert!(p.retry_timer(0).is_some(), "the timer still runs");
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// The retry timer starts with the first request's send completion, for
/// `4.096 us << timeout << timeout_shift` with a TID READ_REQ (the OPFN
/// shift: 64-packet segments at a 4 KiB MTU shift by 6) and without the
/// shift for a plain READ; every segment ACK while segments are
/// outstanding pushes it back, the last stops it; a NAK stops it.
/// Kernel: `hfi1_rc_send_complete()` → `rvt_add_retry_timer_ext()`, the
/// `case 0` of `do_rc_ack()` (`rvt_mod_retry_timer_ext()` /
/// `rvt_stop_rc_timers()`), `bail_stop`.
///
/// Fails with the shift left out (checked: `timeout_shift` unused, as
/// the engine had it): the TID READ's timer is `4096 << 10`.
#[test]
fn retry_timer_is_armed_by_the_first_read_req_with_the_segment_shift() {
    let mut p = Pair::new(Setup {
        timeout: 10,
        ..Setup::default()
    });
    let a = p.post(0, 128);
    assert_eq!(p.retry_timer(0), None);
    let reqs = p.send();
    assert_eq!(reqs.len(), 2);
    assert_eq!(p.retry_timer(0), Some(retry_ns(10, 6)));
    assert_eq!(retry_ns(10, 6), 4096 << 16);
    p.give_responder(&reqs);
    let resps = p.respond();
    let epoch = |p: &Pair| p.n.timers(0, &mut LockToken::root()).unwrap().0.epoch();
    let before = epoch(&p);
    // The first segment's last response: the timer is pushed back.
    p.give_requester(&resps[..64]);
    assert_ne!(epoch(&p), before);
    assert!(p.retry_timer(0).is_some());
    p.give_requester(&resps[64..]);
    assert_eq!(p.retry_timer(0), None, "stopped with nothing outstanding");
    assert_eq!(p.done[0], [(a, WcStatus::Success)]);
    // A plain READ: no shift.
    p.post(0, 1);
    let _ = p.send();
    assert_eq!(p.retry_timer(0), Some(retry_ns(10, 0)));
    p.give_requester(&[ack(0x90, 0x60)]);
    assert_eq!(p.retry_timer(0), None, "a NAK stops it");
    p.finish(0);
    p.teardown_clean();
}

/// After an expiry exactly one request goes out, the rest only after an
/// ACK. Kernel: `rvt_rc_timeout()` → `hfi1_restart_rc(..., 1)`
/// (`RVT_S_SEND_ONE`), `RVT_S_WAIT_ACK` in `hfi1_make_rc_req()`.
///
/// Fails without `SEND_ONE` (checked): the three READ_REQs go out at
/// once.
#[test]
fn expiry_resends_one_read_req_then_waits_for_an_ack() {
    let mut p = Pair::small(16, 8192, 7);
    let wr = p.post(0, 3);
    assert_eq!(p.send().len(), 3);
    assert!(p.expire(0));
    let one = p.send();
    assert_eq!(one.len(), 1);
    assert!(p.send().is_empty(), "waiting for an ACK");
    p.give_responder(&one);
    let r = p.respond();
    p.give_requester(&r);
    let rest = p.send();
    assert_eq!(rest.len(), 2, "the ACK lets the rest go");
    p.give_responder(&rest);
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// No completion is ever lost: a READ keeps its send-queue slot until its
/// completion is polled, so with 16 completions unpolled the next post is
/// refused; once one is polled a READ that then fails by a NAK still
/// completes, after the 15 others. Kernel: the slot accounting of
/// `rvt_qp_complete_swqe()` (the kernel's CQ, sized by the application,
/// reports an overflow; here the queue is the CQ).
///
/// Fails with the gate taken out (checked: `can_post` counting only
/// READs not completed): with 16 completions unpolled the queue still
/// takes a post, which would go into the slot of READ 1's completion.
#[test]
fn full_completion_queue_loses_no_completion() {
    let mut p = Pair::small(16, 1 << 20, 7);
    let mut root = LockToken::root();
    let wrs: Vec<u64> = (0..16).map(|_| p.post(0, 1)).collect();
    let reqs = p.send();
    p.give_responder(&reqs);
    let resps = p.respond();
    // The responses reach the QP without its completions being polled.
    {
        let n = &mut p.n;
        let qp = &n.requesters[0];
        let mut g = qp.s_lock.lock(&mut root);
        for r in &resps {
            let (
                _,
                tid_read_proto::packet::Parsed::ReadResponse {
                    bth,
                    kind,
                    aeth,
                    payload,
                },
            ) = tid_read_proto::packet::parse(r).unwrap()
            else {
                panic!("plain READ responses");
            };
            let mut mem = tid_harness::chip::DestMemory(&mut n.mem);
            assert!(qp::receive_read_response(
                &n.rcd, qp, &mut g, bth.psn, kind, aeth, payload, &mut mem
            ));
        }
        assert!(!g.ext.requester.can_post());
    }
    let extra = p.n.pages.scattered(1);
    assert_eq!(
        p.n.post(0, extra.clone(), &mut root),
        Err(EngineError::QueueFull)
    );
    // One is polled: READ 17 fits, and a NAK fails it.
    {
        let mut g = p.n.requesters[0].s_lock.lock(&mut root);
        assert_eq!(g.ext.requester.poll().map(|c| c.wr_id), Some(wrs[0]));
    }
    let last = p.post_sges(0, extra);
    let _ = p.send();
    p.give_requester(&[ack(0x20, 0x62)]);
    p.poll_all();
    let statuses: Vec<_> = p.done[0].iter().map(|d| d.1).collect();
    assert_eq!(statuses.len(), 16, "15 unpolled successes and READ 17");
    assert_eq!(p.done[0].last(), Some(&(last, WcStatus::RemoteAccess)));
    p.teardown_clean();
}

/// Deviation kept: an ACK that stops a running RNR timer (the send
/// engine was waiting for it) schedules the send engine. Kernel:
/// `do_rc_ack()`'s `bail_stop` → `rvt_stop_rc_timers()` clears
/// `RVT_S_WAIT_RNR`, and nothing wakes the send engine: the READs that
/// the RNR NAK's `reset_psn()` took back are never sent again (only a
/// forged RNR NAK gets there: no responder sends one for a READ).
///
/// Fails with 6.1's rule (checked: no schedule when the timer goes): READ
/// 2 is never sent again, and with no timer running it never completes.
#[test]
fn ack_stopping_an_rnr_wait_schedules_the_send_engine() {
    let mut p = Pair::small(16, 1 << 20, 7);
    let a = p.post(0, 1);
    let b = p.post(0, 1);
    let reqs = p.send();
    assert_eq!(reqs.len(), 2);
    p.give_responder(&reqs);
    let resps = p.respond();
    assert_eq!(resps.len(), 2);
    // A forged RNR NAK for READ 1, then READ 1's real response.
    p.give_requester(&[ack(0x10, 0x20 | 14)]);
    assert!(p.rnr_timer(0).is_some());
    p.give_requester(&resps[..1]);
    assert_eq!(p.done[0], [(a, WcStatus::Success)]);
    assert_eq!(p.rnr_timer(0), None, "the ACK stopped the RNR timer");
    let again = p.send();
    assert_eq!(kind(&again[0]), Kind::PlainReq(Psn::new(0x11)));
    p.give_responder(&again);
    p.finish(0);
    assert_eq!(p.done[0], [(a, WcStatus::Success), (b, WcStatus::Success)]);
    p.teardown_clean();
}

/// Deviation kept: a READ_REQ whose R_Key check fails (here: a segment
/// past the end of the region, requested once the segment before it
/// completed) errors the responder's QP and is NAKed with a remote access
/// error under the NAK rule (at once: no response is pending), so the
/// requester's READ completes `REM_ACCESS_ERR` and its QP goes to the
/// error state.
/// Kernel: the `nack_acc` of `hfi1_rc_rcv_tid_rdma_read_req()` calls
/// `rvt_rc_error()` and sets `r_nak_state` but never queues the NAK
/// (`rc_defered_ack()` is only on the `nack_inv` path): the requester
/// learns nothing and its retry budget runs out.
///
/// Fails with 6.1's rule (checked: no NAK for a remote access error): the
/// READ completes `RETRY_EXC_ERR` after its eight expiries.
#[test]
fn bad_rkey_read_req_is_naked_as_a_remote_access_error() {
    let mut p = Pair::new(Setup {
        region_len: 8192,
        seg_len: 4096,
        max_read: 1,
        tid_read_min: 8192,
        ..Setup::default()
    });
    let wr = p.post(0, 3);
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::RemoteAccess)]);
    assert_eq!(p.states(0), (QpState::Error, QpState::Error));
    assert_eq!(p.req_stats().timeouts, 0);
    p.teardown_clean();
}

/// The retry timer's duration doubles with each step of `timeout +
/// shift` up to 2^39 units and stays at 2^40 units beyond (a QP timeout
/// of 31 with the largest shift still gives a finite timer).
#[test]
fn retry_duration_is_capped_at_2_pow_40_units() {
    assert_eq!(retry_ns(0, 0), 4096);
    assert_eq!(retry_ns(31, 8), 4096 << 39);
    for (timeout, shift) in [(31, 9), (31, 31), (40, 0), (255, 255)] {
        assert_eq!(retry_ns(timeout, shift), 4096 << 40, "{timeout} {shift}");
    }
}
