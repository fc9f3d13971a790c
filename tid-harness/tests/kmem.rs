// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The world's memory timer: a requester whose segment's DMA mapping
//! failed waits on the memory-wait list, and the world wakes it as the
//! kernel's `mem_timer()` does, so its READ completes; a QP still waiting
//! at teardown gives the list's reference back.
#![cfg(feature = "std")]

use hfi1_hal::lock_order::LockToken;
use tid_harness::platform::SoftPlatform;
use tid_harness::world::{Done, Setup, TwoNodes};
use tid_read_proto::rc::WcStatus;

/// One QP pair, TID READs from two pages, one-page segments, the next
/// DMA map call failing, and a two-page READ posted (its work-request id).
fn failing_map() -> (TwoNodes<SoftPlatform>, u64) {
    let mut n = TwoNodes::<SoftPlatform>::new(Setup {
        tid_read_min: 8192,
        seg_len: 4096,
        ..Setup::default()
    })
    .unwrap();
    n.rcd.dma.fail_in(0);
    let sges = n.pages.scattered(2);
    let wr = n.post(0, sges, &mut LockToken::root()).unwrap();
    (n, wr)
}

/// Requesters, responders, both ways, until nothing moves; the
/// completions taken.
fn run(n: &mut TwoNodes<SoftPlatform>) -> Vec<Done> {
    let mut root = LockToken::root();
    let mut done = Vec::new();
    for _ in 0..64 {
        let ran = n.run_requesters(&mut root);
        assert!(ran.iter().all(|r| r.result.is_ok()), "{ran:?}");
        let mut moved = !ran.is_empty();
        while let Some(p) = n.to_responders.pop() {
            n.deliver_to_responder(&p, &mut root);
            moved = true;
        }
        n.run_responders(64, &mut root);
        while let Some(p) = n.to_requesters.pop() {
            done.extend(n.deliver_to_requester(&p, &mut root).done);
            moved = true;
        }
        if !moved && n.pending_work() == 0 && n.pending_sends() == 0 {
            break;
        }
    }
    done
}

/// A segment whose DMA mapping fails puts its QP on the memory-wait list
/// (`RVT_S_WAIT_KMEM`, the list holding a reference); the world's memory
/// timer takes it off and schedules its send engine, the segment is set
/// up again and the READ completes with every byte. Kernel:
/// `hfi1_wait_kmem()` and `mem_timer()` → `hfi1_qp_wakeup(qp,
/// RVT_S_WAIT_KMEM)`.
///
/// Fails with the world's tick taken out (checked: neither
/// `run_trigger_work` nor `run_requesters` ticking the memory timer,
/// `pending_work` not counting its waiters): no wake-up is pending, no
/// completion comes and the READ stays outstanding.
#[test]
fn a_qp_waiting_for_memory_is_woken_and_its_read_completes() {
    let (mut n, wr) = failing_map();
    let mut root = LockToken::root();
    let first = n.run_requester_send(&mut root).unwrap();
    assert_eq!(first.result, Ok(()));
    assert!(n.to_responders.is_empty(), "the segment is not set up");
    assert_eq!(n.requester_stats(&mut root).no_memory, 1);
    assert_eq!(n.rcd.sched.kmem_waiters(), 1);
    assert_eq!(n.pending_work(), 1, "the memory timer's wake-up");
    let done = run(&mut n);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].completion.wr_id, wr);
    assert_eq!(done[0].completion.status, WcStatus::Success);
    let data = done[0].data.unwrap();
    assert_eq!((data.verified, data.mismatched), (8192, 0));
    assert_eq!(n.outstanding(), 0);
    let t = n.teardown(&mut root);
    assert_eq!(t.leaks.total(), 0, "{:?}", t.leaks);
}

/// A QP destroyed while it waits for memory leaves the memory-wait list,
/// and the reference the list held is given back. Kernel: the
/// `list_del_init(&priv->s_iowait.list)` and `rvt_put_qp()` of
/// `flush_qp_waiters()` at reset.
///
/// Fails with the teardown leaving the list alone (checked): one QP
/// reference is left held (`qp_refs` 1).
#[test]
fn teardown_takes_a_qp_off_the_memory_wait_list() {
    let (mut n, wr) = failing_map();
    let mut root = LockToken::root();
    n.run_requesters(&mut root);
    assert_eq!(n.rcd.sched.kmem_waiters(), 1);
    let t = n.teardown(&mut root);
    assert_eq!(t.flushed.len(), 1);
    assert_eq!(t.flushed[0].completion.wr_id, wr);
    assert_eq!(t.flushed[0].completion.status, WcStatus::Flushed);
    assert_eq!(t.leaks.total(), 0, "{:?}", t.leaks);
    assert_eq!(n.rcd.sched.kmem_waiters(), 0);
}
