// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the READ requester does with an RC ACK or NAK, as `do_rc_ack()`
//! in Linux 6.1's `drivers/infiniband/hw/hfi1/rc.c` rules it, seen from
//! outside: the verdict of each AETH class and NAK code, the status a
//! fatal NAK or a spent budget completes the oldest READ with, the
//! counters, the retry timer's duration after an ACK, where the send
//! cursor stands after an expiry and the responses that follow it (and
//! after a WRITE being resent completes), an RNR NAK while the RNR timer
//! runs, and the 2 GiB limit of a post.
//!
//! Mutation testing left these rules with no test that notices them
//! broken; each test here fails with its rule changed.

mod common;

use common::{Kind, Pair, ack, kind, lone};
use hfi1_hal::Psn;
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::sim::SimMemory;
use tid_flow::Sge;
use tid_harness::doubles::{self, Outbox, PageAllocator};
use tid_harness::platform::{new_ctxt, new_qp};
use tid_harness::world::{Arrival, Setup};
use tid_read_proto::opfn::timeout_shift;
use tid_read_proto::qp;
use tid_read_proto::rc::retry::{retry_ns, rnr_ns};
use tid_read_proto::rc::{DEFAULT_TIMEOUT, EngineError, QpState, SourceData, WcStatus};
use tid_read_proto::requester::AckVerdict;
use tid_read_proto::wire::aeth::{self, NakCode};
use tid_read_proto::wire::frame;
use tid_read_proto::write::requester::{OP_RDMA_WRITE_FIRST, OP_RDMA_WRITE_LAST, WriteWr};

/// The AETH syndrome of an ACK (credit field "invalid").
const ACK: u8 = 0x1F;

/// Delivers an ACK or NAK with `syndrome` for IB PSN `psn` to requester
/// QP 0 and returns what the requester made of it.
fn verdict(p: &mut Pair, psn: u32, syndrome: u8) -> AckVerdict {
    let mut at = p.give_requester(&[ack(psn, syndrome)]);
    assert_eq!(at.len(), 1);
    match at.remove(0).arrival {
        Arrival::Ack { verdict, .. } => verdict,
        other => panic!("not taken as an ACK: {other:?}"),
    }
}

/// Requester 0's send cursor (`s_psn`).
fn send_psn(p: &Pair) -> u32 {
    p.requester(0, |r| r.send_psn().get())
}

/// Requester 0's `s_last_psn`.
fn last_psn(p: &Pair) -> u32 {
    p.requester(0, |r| r.last_psn().get())
}

/// The retry timer's epoch (it changes with every arm and stop).
fn retry_epoch(p: &Pair) -> u32 {
    p.n.timers(0, &mut LockToken::root()).unwrap().0.epoch()
}

/// The kinds of `pkts`, in order.
fn kinds(pkts: &[Vec<u8>]) -> Vec<Kind> {
    pkts.iter().map(|p| kind(p)).collect()
}

/// A pair whose READs of two pages and more are TID READs with 4 KiB
/// segments (one packet each): a READ of `pages` pages is posted and its
/// segments requested, none delivered. PSNs from 0x10, one per page.
fn tid_read_sent(pages: u64, retry_cnt: u8) -> (Pair, u64) {
    let mut p = Pair::small(16, 8192, retry_cnt);
    let wr = p.post(0, pages);
    assert_eq!(p.send().len(), pages as usize, "one READ_REQ per segment");
    (p, wr)
}

/// A pair whose READs are all plain RDMA READs: a READ of `pages` pages
/// (PSNs from 0x10, one response per page) posted and its request sent,
/// not delivered.
fn plain_read_sent(pages: u64) -> (Pair, u64, Vec<Vec<u8>>) {
    let mut p = Pair::small(16, 1 << 30, 7);
    let wr = p.post(0, pages);
    let reqs = p.send();
    assert_eq!(kinds(&reqs), [Kind::PlainReq(Psn::new(0x10))]);
    (p, wr, reqs)
}

/// A NAK with a fatal code (invalid request, remote access, remote
/// operational) completes the oldest READ with that code's status, flushes
/// the READ behind it, puts the QP in the error state, and says so in its
/// verdict; the NAK is counted. Kernel: the `case 3` of `do_rc_ack()`
/// (`class_b`: `IB_WC_REM_INV_REQ_ERR`, `IB_WC_REM_ACCESS_ERR`,
/// `IB_WC_REM_OP_ERR`) and `rvt_error_qp()`.
#[test]
fn each_fatal_nak_code_fails_the_oldest_read_with_its_status() {
    for (code, status) in [
        (NakCode::InvalidRequest, WcStatus::RemoteInvalidRequest),
        (NakCode::RemoteAccessError, WcStatus::RemoteAccess),
        (NakCode::RemoteOperationalError, WcStatus::RemoteOperational),
    ] {
        let (mut p, a) = tid_read_sent(2, 7);
        let b = p.post(0, 2);
        let _ = p.send();
        assert_eq!(
            verdict(&mut p, 0x10, code.syndrome()),
            AckVerdict::Fatal(status)
        );
        assert_eq!(p.done[0], [(a, status), (b, WcStatus::Flushed)], "{code:?}");
        assert_eq!(p.states(0).0, QpState::Error);
        let st = p.req_stats();
        assert_eq!((st.naks, st.rnr_naks, st.errors), (1, 0, 2), "{code:?}");
        assert_eq!(p.held(), 0, "the error state released everything");
        p.teardown_clean();
    }
}

/// A PSN sequence NAK with the retry budget spent completes the oldest
/// READ `RETRY_EXC_ERR`, and the NAK's verdict carries that status.
/// Kernel: the `case 3` of `do_rc_ack()` → `hfi1_restart_rc()` with
/// `s_retry` 0.
#[test]
fn a_psn_nak_with_the_retry_budget_spent_is_fatal() {
    let (mut p, wr) = tid_read_sent(2, 0);
    let nak = NakCode::PsnError.syndrome();
    assert_eq!(
        verdict(&mut p, 0x10, nak),
        AckVerdict::Fatal(WcStatus::RetryExceeded)
    );
    assert_eq!(p.done[0], [(wr, WcStatus::RetryExceeded)]);
    assert_eq!(p.states(0).0, QpState::Error);
    p.teardown_clean();
}

/// An RNR NAK with the RNR budget spent completes the oldest READ
/// `RNR_RETRY_EXC_ERR`, and the NAK's verdict carries that status; both
/// NAKs are counted as NAKs and as RNR NAKs. Kernel: the `case 1` of
/// `do_rc_ack()` (`s_rnr_retry` 0: `class_b`).
#[test]
fn an_rnr_nak_with_the_rnr_budget_spent_is_fatal() {
    let mut p = Pair::new(Setup {
        rnr_retry: 1,
        tid_read_min: 8192,
        seg_len: 4096,
        ..Setup::default()
    });
    let wr = p.post(0, 2);
    assert_eq!(p.send().len(), 2);
    assert_eq!(verdict(&mut p, 0x10, 0x20 | 14), AckVerdict::Restart);
    assert!(p.n.fire_rnr_timer(0, &mut LockToken::root()));
    assert!(!p.send().is_empty());
    assert_eq!(
        verdict(&mut p, 0x10, 0x20 | 14),
        AckVerdict::Fatal(WcStatus::RnrRetryExceeded)
    );
    assert_eq!(p.done[0], [(wr, WcStatus::RnrRetryExceeded)]);
    let st = p.req_stats();
    assert_eq!((st.naks, st.rnr_naks), (2, 2));
    p.teardown_clean();
}

/// Each AETH class gets its verdict: an ignored NAK code and a reserved
/// class are not acted on (and the READ goes on), a PSN NAK and an RNR
/// NAK restart, an ACK outside the outstanding PSNs is dropped; every
/// class but ACK counts as a NAK, an RNR NAK also as an RNR NAK, and the
/// PSN NAK restarts the READ from its PSN. Kernel: `rc_rcv_resp()`'s PSN
/// filter and the `switch` of `do_rc_ack()`.
#[test]
fn each_aeth_class_gets_its_verdict_and_is_counted() {
    let (mut p, wr) = tid_read_sent(2, 7);
    let ignored = NakCode::InvalidRdRequest.syndrome();
    assert_eq!(verdict(&mut p, 0x10, ignored), AckVerdict::NotActed);
    assert_eq!(verdict(&mut p, 0x10, 0x40), AckVerdict::NotActed);
    assert_eq!(p.states(0).0, QpState::Rts);
    assert_eq!(verdict(&mut p, 0x0F, ACK), AckVerdict::Ignored, "stale");
    assert_eq!(verdict(&mut p, 0x12, ACK), AckVerdict::Ignored, "ahead");
    let st = p.req_stats();
    assert_eq!((st.naks, st.rnr_naks, st.restarts), (2, 0, 0));
    assert_eq!(
        verdict(&mut p, 0x10, NakCode::PsnError.syndrome()),
        AckVerdict::Restart
    );
    assert_eq!(p.req_stats().restarts, 1);
    assert_eq!(kinds(&p.send())[0], Kind::TidReq(Psn::new(0x10)));
    assert_eq!(verdict(&mut p, 0x10, 0x20 | 3), AckVerdict::Restart);
    assert_eq!(p.rnr_timer(0), Some(rnr_ns(3)));
    let st = p.req_stats();
    assert_eq!((st.naks, st.rnr_naks), (4, 1));
    assert!(p.n.fire_rnr_timer(0, &mut LockToken::root()));
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// A second RNR NAK while the RNR timer runs spends nothing and does not
/// restart the wait: with an RNR budget of one it does not fail the READ,
/// which then completes. Kernel: the `case 1` of `do_rc_ack()`
/// (`RVT_S_WAIT_RNR` set: `bail_stop`).
#[test]
fn a_second_rnr_nak_while_the_rnr_timer_runs_is_not_acted_on() {
    let mut p = Pair::new(Setup {
        rnr_retry: 1,
        tid_read_min: 8192,
        seg_len: 4096,
        ..Setup::default()
    });
    let wr = p.post(0, 2);
    assert_eq!(p.send().len(), 2);
    assert_eq!(verdict(&mut p, 0x10, 0x20 | 14), AckVerdict::Restart);
    let _ = verdict(&mut p, 0x10, 0x20 | 14);
    assert_eq!(p.states(0).0, QpState::Rts, "the budget is not spent");
    assert!(p.done[0].is_empty());
    assert_eq!(p.req_stats().rnr_naks, 2);
    let _ = p.n.fire_rnr_timer(0, &mut LockToken::root());
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// A plain ACK at a TID READ's last PSN means the READ's own last response
/// was lost (only a READ_RESP completes a TID READ): the READ is not
/// completed, the QP restarts from `s_last_psn + 1` (the READ's first
/// segment is requested again) and the verdict says the ACK was not
/// acted on as an ACK; the READ then completes. Kernel: the `while` loop
/// of `do_rc_ack()` (`opcode != TID_OP(READ_RESP)`: `set_restart_qp()`).
#[test]
fn an_ack_at_a_tid_reads_last_psn_restarts_it() {
    let (mut p, wr) = tid_read_sent(2, 7);
    assert_eq!(verdict(&mut p, 0x11, ACK), AckVerdict::NotActed);
    assert!(p.done[0].is_empty(), "not completed by an ACK");
    assert_eq!(p.req_stats().restarts, 1);
    assert_eq!(last_psn(&p), 0x0F);
    assert_eq!(kinds(&p.send())[0], Kind::TidReq(Psn::new(0x10)));
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// An ACK before the oldest TID READ's last PSN, with its segments
/// outstanding, is taken: `s_last_psn` moves to it, the retry timer is
/// pushed back with the TID READ_REQ's timeout shift (64-packet segments
/// at a 4 KiB MTU: 6), the send cursor stays where it is and nothing is
/// sent again. Kernel: the `case 0` of `do_rc_ack()`
/// (`rvt_mod_retry_timer_ext(qp, timeout_shift)`).
#[test]
fn an_ack_inside_a_tid_read_pushes_the_timer_back_with_the_shift() {
    let mut p = Pair::new(Setup::default());
    let wr = p.post(0, 128);
    assert_eq!(p.send().len(), 2);
    let shift = timeout_shift(256 * 1024, 4096);
    assert_eq!(shift, 6);
    let before = retry_epoch(&p);
    assert_eq!(verdict(&mut p, 0x4F, ACK), AckVerdict::Acked);
    assert_ne!(retry_epoch(&p), before, "pushed back");
    assert_eq!(p.retry_timer(0), Some(retry_ns(DEFAULT_TIMEOUT, shift)));
    assert_eq!(last_psn(&p), 0x4F);
    assert_eq!(send_psn(&p), 0x90);
    assert!(p.send().is_empty(), "nothing sent again");
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// After an expiry (no segment of the TID READ outstanding any more) an
/// ACK stops the retry timer, and the send cursor moves past what the ACK
/// covers, so only the segment after it is requested again.
/// Kernel: the `case 0` of `do_rc_ack()` (a TID READ with no
/// `ack_pending`: `rvt_stop_rc_timers()`); the cursor is this engine's
/// deviation (`ack_for_a_tid_segment_moves_the_send_cursor_past_it`).
#[test]
fn an_ack_with_no_segment_outstanding_stops_the_timer_and_moves_the_cursor() {
    let (mut p, wr) = tid_read_sent(2, 7);
    assert!(p.expire(0));
    assert_eq!(send_psn(&p), 0x10, "the restart backs up");
    assert_eq!(verdict(&mut p, 0x10, ACK), AckVerdict::Acked);
    assert_eq!(p.retry_timer(0), None, "stopped");
    assert_eq!(send_psn(&p), 0x11, "at the cursor: moved past it");
    assert_eq!(kinds(&p.send()), [Kind::TidReq(Psn::new(0x11))]);
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// The same for 64-packet segments, where the ACK lies past the cursor:
/// after an expiry, the first segment's responses (its last one, the
/// only one software sees, acknowledges through it) move the send cursor
/// to the second segment, which alone is requested again.
/// Kernel: the `case 0` of `do_rc_ack()`; the cursor is this engine's
/// deviation (`ack_for_a_tid_segment_moves_the_send_cursor_past_it`).
#[test]
fn responses_after_an_expiry_move_the_cursor_past_them() {
    let mut p = Pair::new(Setup::default());
    let wr = p.post(0, 128);
    let reqs = p.send();
    assert_eq!(reqs.len(), 2);
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 128);
    assert!(p.expire(0));
    assert_eq!(send_psn(&p), 0x10);
    p.give_requester(&resps[..64]);
    assert_eq!(send_psn(&p), 0x50);
    assert_eq!(last_psn(&p), 0x4F);
    assert_eq!(kinds(&p.send()), [Kind::TidReq(Psn::new(0x50))]);
    p.give_requester(&resps[64..]);
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// An ACK inside a plain READ pushes the retry timer back, with no shift,
/// and leaves the send cursor alone when it is past the ACK. Kernel: the
/// `case 0` of `do_rc_ack()` (`s_acked != s_tail`:
/// `rvt_mod_retry_timer()`).
#[test]
fn an_ack_inside_a_plain_read_pushes_the_timer_back() {
    let (mut p, _, _) = plain_read_sent(4);
    let before = retry_epoch(&p);
    assert_eq!(verdict(&mut p, 0x11, ACK), AckVerdict::Acked);
    assert_ne!(retry_epoch(&p), before, "pushed back");
    assert_eq!(p.retry_timer(0), Some(retry_ns(DEFAULT_TIMEOUT, 0)));
    assert_eq!((last_psn(&p), send_psn(&p)), (0x11, 0x14));
    assert!(p.send().is_empty(), "nothing sent again");
    p.teardown_clean();
}

/// After an expiry, ACKs inside a plain READ move the send cursor past
/// what they cover, whether they lie past the cursor or at it, and the
/// rest of the READ is requested from there. Kernel: the `case 0` of
/// `do_rc_ack()` (`cmp_psn(s_psn, psn) <= 0`: `reset_psn(psn + 1)`).
#[test]
fn acks_after_an_expiry_move_a_plain_reads_cursor() {
    let (mut p, _, _) = plain_read_sent(4);
    assert!(p.expire(0));
    assert_eq!(send_psn(&p), 0x10);
    assert_eq!(verdict(&mut p, 0x11, ACK), AckVerdict::Acked);
    assert_eq!(send_psn(&p), 0x12, "past the cursor");
    assert!(p.retry_timer(0).is_some());
    assert_eq!(verdict(&mut p, 0x12, ACK), AckVerdict::Acked);
    assert_eq!(send_psn(&p), 0x13, "at the cursor");
    assert_eq!(kinds(&p.send()), [Kind::PlainReq(Psn::new(0x13))]);
    p.teardown_clean();
}

/// After an expiry, the responses of a plain READ of one page (ONLY)
/// complete it and leave the send cursor past it, so nothing is sent
/// again and the next READ starts at the next PSN. Kernel: the `case 0`
/// of `do_rc_ack()` (`s_acked == s_tail`: `s_psn = psn + 1`).
#[test]
fn a_read_completed_after_an_expiry_leaves_the_cursor_past_it() {
    let (mut p, wr, reqs) = plain_read_sent(1);
    let resps = p.answer(&reqs);
    assert!(p.expire(0));
    assert_eq!(send_psn(&p), 0x10);
    p.give_requester(&resps);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    assert_eq!(send_psn(&p), 0x11);
    assert_eq!(p.retry_timer(0), None);
    assert!(p.send().is_empty(), "nothing sent again");
    let next = p.post(0, 1);
    assert_eq!(kinds(&p.send()), [Kind::PlainReq(Psn::new(0x11))]);
    p.finish(0);
    assert_eq!(p.done[0][1], (next, WcStatus::Success));
    p.teardown_clean();
}

/// A TID READ whose last segment completes after an expiry leaves the
/// send cursor past its last PSN, nothing sent again. Kernel: the
/// `case 0` of `do_rc_ack()` (`s_acked == s_tail`: `s_psn = psn + 1`).
#[test]
fn a_tid_read_completed_after_an_expiry_leaves_the_cursor_past_it() {
    let mut p = Pair::new(Setup {
        tid_read_min: 8192,
        seg_len: 8192,
        ..Setup::default()
    });
    let wr = p.post(0, 2);
    let reqs = p.send();
    assert_eq!(kinds(&reqs), [Kind::TidReq(Psn::new(0x10))]);
    let resps = p.answer(&reqs);
    assert_eq!(resps.len(), 2);
    assert!(p.expire(0));
    assert_eq!(send_psn(&p), 0x10);
    p.give_requester(&resps);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    assert_eq!(send_psn(&p), 0x12);
    assert_eq!(p.retry_timer(0), None);
    assert!(p.send().is_empty(), "nothing sent again");
    p.teardown_clean();
}

/// A post whose elements add up to exactly 2 GiB is accepted; one byte
/// more is refused `BadSgl` and leaves nothing queued. The limit is the
/// message size rdmavt advertises (`max_msg_sz` 2^31 in
/// `rvt_query_device()`, `drivers/infiniband/sw/rdmavt/vt.c`); 6.1's
/// `rvt_post_one_wr()` sums the lengths into its 32-bit `wqe->length`
/// without a check, the engine refuses what the device says it cannot
/// carry.
#[test]
fn a_post_of_exactly_2_gib_is_taken_and_one_byte_more_refused() {
    let rcd = new_ctxt(1, 16, 4, 9).unwrap();
    let qp = new_qp(0x100, 0, 0, lone::requester_conn(0x100), Psn::new(7));
    let outstanding = || {
        let mut root = LockToken::root();
        qp.s_lock.lock(&mut root).ext.requester.outstanding()
    };
    // Nothing is sent, so no page is ever touched: the addresses need no
    // memory behind them.
    let gib = |vaddr: u64| Sge {
        vaddr,
        length: 1 << 30,
    };
    let over = [
        gib(0x1_0000_0000),
        gib(0x2_0000_0000),
        Sge {
            vaddr: 0x3_0000_0000,
            length: 1,
        },
    ];
    assert_eq!(
        lone::post_read(&rcd, &qp, 1, &over),
        Err(EngineError::BadSgl)
    );
    assert_eq!(outstanding(), 0);
    let exact = [gib(0x1_0000_0000), gib(0x2_0000_0000)];
    assert_eq!(lone::post_read(&rcd, &qp, 2, &exact), Ok(()));
    assert_eq!(outstanding(), 1);
    // The flow records the 2 GiB TID READ took come back at the flush.
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    tid_read_proto::qp::flush(&rcd, &qp, &mut g);
    drop(g);
    assert_eq!(rcd.mem.live_allocations(), 0);
}

/// The local memory as the send engine's source of WRITE payloads.
struct Src<'a>(&'a SimMemory);

impl SourceData for Src<'_> {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        self.0.read(vaddr, out).is_ok()
    }
}

/// The RDMA READ request opcode.
const OP_RDMA_READ_REQUEST: u8 = 0x0C;

/// A plain RDMA WRITE (IB PSNs 7 to 9) and a plain READ behind it (PSN
/// 10) are sent; the retry timer expires, backing the send state up to
/// the WRITE. A NAK with an ignored code for PSN 10 then acknowledges the
/// whole WRITE, which completes; the READ it has already started is sent
/// again from its own first PSN, not from where the restart had put the
/// cursor. Kernel: `do_rc_completion()` (`s_acked == s_cur`: `s_cur`
/// moves on and `s_psn = wqe->psn` for the request started after it),
/// with the `case 3` of `do_rc_ack()` ignoring the code (`reserved`:
/// nothing else moves the cursor).
#[test]
fn a_write_completed_during_its_resend_resends_the_next_from_its_psn() {
    let rcd = new_ctxt(1, 16, 4, 9).unwrap();
    let qp = new_qp(0x100, 0, 0, lone::requester_conn(0x100), Psn::new(7));
    let mut mem = SimMemory::new();
    let src = PageAllocator::new(0x100).scattered(3);
    doubles::map(&mut mem, &src);
    let dst = PageAllocator::new(0x200).scattered(1);
    let mut root = LockToken::root();
    {
        let mut g = qp.s_lock.lock(&mut root);
        let wr = WriteWr {
            wr_id: 1,
            // Not page-aligned: a plain RDMA WRITE.
            remote_addr: lone::REMOTE + 0x200,
            rkey: 9,
            sges: &src,
        };
        qp::post_write(&rcd, &qp, &mut g, &wr).unwrap();
    }
    lone::post_read(&rcd, &qp, 2, &dst).unwrap();
    // The send engine once per schedule, bounded.
    let send = |root: &mut LockToken<'_, _>| {
        let mut out = Outbox::new();
        for _ in 0..8 {
            let Some(q) = rcd.sched.pop_send() else { break };
            qp::send_engine_with(&rcd, &q, root, &mut out, &Src(&mem)).unwrap();
        }
        let sent: Vec<(u8, u32)> = out
            .drain()
            .map(|p| {
                let f = frame::parse(&p).unwrap();
                (f.bth.opcode, f.bth.psn.get())
            })
            .collect();
        sent
    };
    let first = send(&mut root);
    assert_eq!(first.len(), 4, "{first:x?}");
    assert_eq!(first[0], (OP_RDMA_WRITE_FIRST, 7));
    assert_eq!(first[2], (OP_RDMA_WRITE_LAST, 9));
    assert_eq!(first[3], (OP_RDMA_READ_REQUEST, 10));
    let mut g = qp.s_lock.lock(&mut root);
    assert!(qp::timeout(&rcd, &qp, &mut g), "the timer ran");
    assert_eq!(g.ext.requester.send_psn(), Psn::new(7), "backed up");
    let ignored = aeth::Repr {
        syndrome: NakCode::InvalidRdRequest.syndrome(),
        msn: 0,
    };
    let v = qp::receive_ack(&rcd, &qp, &mut g, Psn::new(10), &ignored);
    assert_eq!(v, AckVerdict::NotActed);
    let c = g.ext.requester.poll().map(|c| (c.wr_id, c.status));
    assert_eq!(c, Some((1, WcStatus::Success)), "the WRITE is acknowledged");
    assert_eq!(g.ext.requester.send_psn(), Psn::new(10));
    drop(g);
    assert_eq!(send(&mut root), [(OP_RDMA_READ_REQUEST, 10)]);
    let mut g = qp.s_lock.lock(&mut root);
    qp::flush(&rcd, &qp, &mut g);
}
