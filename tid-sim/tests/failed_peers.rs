// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Soak seeds whose fabric fails a requester (retry exceeded): the run
//! must still pass, and the failed requester's peer responder must give
//! back everything it held for it. Each test is a soak seed that once
//! failed, named for the behaviour it pins.

use tid_sim::cli::{Ops, Options};
use tid_sim::scenario::{self, Report, RunFaults};
use tid_sim::soak::soak_options;

/// The soak's scenario for `seed` with `ops`, run.
fn soak_seed(seed: u64, ops: Ops) -> Report {
    let o = Options {
        ops,
        read_sizes: None,
        ..soak_options(seed)
    };
    scenario::run_observed(&o, RunFaults::from_options(&o), &mut ())
}

/// Kernel: `hfi1_qp_kern_exp_rcv_clear_all()` on the QP's reset path,
/// the only place a responder gives back a WRITE segment no WRITE_RESP
/// went out for (the reap timer runs only once one did). WRITE soak seeds
/// 337 and 20066 (and 171 before the 8K timeout grew): a requester ended
/// RETRY_EXC_ERR while its responder held a segment it had RNR-NAKed;
/// with the peer never reset the run ended holding that segment's 64 TID
/// entries and its hardware flow (and the other responders stayed queued
/// for TIDs behind it).
#[test]
fn a_failed_requester_s_peer_gives_back_its_write_resources() {
    for seed in [337, 20066] {
        let r = soak_seed(seed, Ops::Write);
        assert!(r.ok(), "seed {seed}: {}", r.summary());
        assert!(r.failed_requests > 0, "seed {seed}: no requester failed");
        for k in ["resp_tid_entries", "resp_flows", "resp_tid_groups"] {
            assert_eq!(r.leaked.get(k).copied().unwrap_or(0), 0, "seed {seed}: {k}");
        }
    }
}
