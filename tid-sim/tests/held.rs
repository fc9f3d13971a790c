// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a run may still hold at its end: region references a responder
//! parked for a requester that died are counted when its QP is destroyed.

use tid_sim::pcap::PcapWriter;
use tid_sim::scenario::{self, RunFaults, soak_options};

/// Soak seed 500326 (the first failure of the 10,000-seed soak from
/// 500000): on a lossy link a requester asks for four READs again; the
/// responder re-arms the last one (taking its region reference) while its
/// send pointer is back at an earlier entry, then stops at an entry it
/// sent before and was not asked for again, moving the pointer to the head
/// past the re-armed one (`hfi1_make_rc_ack()`); the requester then runs
/// out of retries and goes to the error state, so it never asks again and
/// the reference stays in the ack entry until the responder QP is
/// destroyed (`rvt_reset_qp()`), as in Linux 6.1. With the end-of-run
/// check counting it as a leak (the check before this rule), the run
/// failed with `mr_refs=1` left held; after the destroy nothing is held.
#[test]
fn a_dead_requesters_parked_region_reference_is_released_at_destroy() {
    let o = soak_options(500_326);
    let r = scenario::run(
        &o,
        RunFaults::from_options(&o),
        None::<&mut PcapWriter<std::io::Sink>>,
    );
    assert!(r.failed_requests > 0, "the requester must end in error");
    assert!(
        r.per_qp.iter().any(|q| q.requester_state == "ERR"),
        "{:?}",
        r.per_qp
    );
    assert!(r.ok(), "{}", r.summary());
    assert!(r.leaked.values().all(|&v| v == 0), "{:?}", r.leaked);
    assert!(!r.leaked.keys().any(|k| k.starts_with("after_destroy_")));
}
