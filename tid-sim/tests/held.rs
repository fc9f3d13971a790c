// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a run may still hold at its end: region references a responder's
//! ack queue holds are counted when its QP is destroyed.

use tid_sim::pcap::PcapWriter;
use tid_sim::scenario::{self, RunFaults, soak_options};

/// The first two failures of the 10,000-seed soak from 500000, each a
/// region reference held in a responder's ack entry at the end of the
/// run, which Linux 6.1 holds there until the QP is destroyed
/// (`hfi1_make_rc_ack()` parks its send pointer past a re-armed entry;
/// `rvt_reset_qp()` releases it): seed 500326 on a lossy link, where the
/// requester then ran out of retries and went to the error state, and
/// seed 501596 with stale copies only, where every READ succeeded. With
/// the end-of-run check counting every held reference (the check before
/// this rule) both failed with `mr_refs=1` left held; after the destroy
/// nothing is held.
#[test]
fn a_parked_ack_entrys_region_reference_is_released_at_destroy() {
    for (seed, dies) in [(500_326, true), (501_596, false)] {
        let o = soak_options(seed);
        let r = scenario::run(
            &o,
            RunFaults::from_options(&o),
            None::<&mut PcapWriter<std::io::Sink>>,
        );
        let died = r.per_qp.iter().any(|q| q.requester_state == "ERR");
        assert_eq!(died, dies, "seed {seed}: {:?}", r.per_qp);
        assert!(r.ok(), "seed {seed}: {}", r.summary());
        assert!(r.leaked.values().all(|&v| v == 0), "{:?}", r.leaked);
        assert!(!r.leaked.keys().any(|k| k.starts_with("after_destroy_")));
    }
}
