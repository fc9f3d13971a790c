// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the engines report to their callers (tid-sim's report, the kernel
//! module's trace and `/proc` lines): the kernel's names of completion
//! statuses and QP states, and the requester's counters as one READ goes
//! through a timeout and completes. Each is read by code outside this
//! crate; these tests pin what they mean here.

mod common;

use common::Pair;
use hfi1_hal::lock_order::LockToken;
use tid_harness::world::Setup;
use tid_read_proto::rc::{QpState, WcStatus};

/// Each status by its kernel name (`IB_WC_` left off), each state by
/// `ib_qp_state`'s short name.
#[test]
fn statuses_and_states_have_the_kernels_names() {
    let names: Vec<&str> = WcStatus::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(
        names,
        [
            "SUCCESS",
            "LOC_LEN_ERR",
            "LOC_QP_OP_ERR",
            "WR_FLUSH_ERR",
            "REM_INV_REQ_ERR",
            "REM_ACCESS_ERR",
            "REM_OP_ERR",
            "RETRY_EXC_ERR",
            "RNR_RETRY_EXC_ERR",
        ]
    );
    assert_eq!((QpState::Rts.name(), QpState::Error.name()), ("RTS", "ERR"));
}

/// One TID READ of a 256 KiB segment: posted, it is outstanding and the
/// queue still has room; sent, its segment is pending and one read is
/// outstanding; a retry timeout spends one retry; the response completes
/// it, acknowledges its last PSN and refills the budget. The requester's and
/// the responder's `Debug` lines name the pointers a stuck report needs.
#[test]
fn a_reads_counters_follow_it_through_a_timeout() {
    let setup = Setup::default();
    let retry = setup.retry_cnt;
    let first = setup.first_psn;
    let mut p = Pair::new(setup);
    let wr = p.post(0, 64);
    let (outstanding, room) = p.requester(0, |r| (r.outstanding(), r.can_post()));
    assert_eq!((outstanding, room), (1, true));
    assert_eq!(p.requester(0, |r| r.last_psn()), first.sub(1));
    let psns = p.requester(0, |r| (r.send_psn(), r.next_psn()));
    assert_eq!(psns, (first, first), "nothing sent yet");
    let reqs = p.send();
    let counts = p.requester(0, |r| (r.pending_segments(), r.reads_outstanding()));
    assert_eq!(counts, (1, 1));
    assert_eq!(p.requester(0, |r| r.retries_left()), retry);
    assert!(p.expire(0), "the retry timer was running");
    assert_eq!(p.requester(0, |r| r.retries_left()), retry - 1);
    let line = p.requester(0, |r| format!("{r:?}"));
    assert!(line.contains("acked 0") && line.contains("s_psn"), "{line}");
    let again = p.send();
    assert!(!again.is_empty(), "the READ_REQ again");
    p.give_responder(&reqs);
    let line = {
        let mut root = LockToken::root();
        let g = p.n.responders[0].s_lock.lock(&mut root);
        format!("{:?}", g.ext.responder)
    };
    assert!(line.contains("r_psn") && line.contains("head"), "{line}");
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    let after = p.requester(0, |r| {
        (
            r.pending_segments(),
            r.reads_outstanding(),
            r.retries_left(),
            r.last_psn(),
        )
    });
    // 64 packets of 4 KiB: the READ's PSNs run from `first` to `first + 63`.
    assert_eq!(after, (0, 0, retry, first.add(63)));
    p.teardown_clean();
}

/// A requester QP's queue is full when every slot holds a posted or
/// unpolled request: `can_post` turns false at that point, never before.
#[test]
fn can_post_turns_false_when_the_queue_is_full() {
    let mut p = Pair::new(Setup::default());
    let mut posted = 0u32;
    while p.requester(0, |r| r.can_post()) {
        p.post(0, 1);
        posted += 1;
        assert!(posted < 1024, "the queue never fills");
    }
    assert_eq!(p.requester(0, |r| r.outstanding()), posted);
    assert!(posted > 1);
}
