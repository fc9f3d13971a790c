// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Scenarios on a faulty fabric: drops, duplicates, reordering,
//! stale replays, each alone and mixed, and a bounded soak. Every byte
//! must still be verified and nothing left held.

use tid_sim::cli::Options;
use tid_sim::pcap::PcapWriter;
use tid_sim::scenario::{self, Report, RunFaults, soak_options};

fn run(o: &Options) -> Report {
    scenario::run(
        o,
        RunFaults::from_options(o),
        None::<&mut PcapWriter<std::io::Sink>>,
    )
}

fn base(seed: u64) -> Options {
    Options {
        qps: 4,
        bytes: 8 << 20,
        request: 1 << 20,
        groups: 12,
        seed,
        ..Options::default()
    }
}

fn assert_clean(r: &Report) {
    assert_eq!(r.verified_bytes, r.requested_bytes, "{}", r.summary());
    assert_eq!(r.mismatched_bytes, 0, "{}", r.summary());
    assert!(r.leaked.values().all(|&v| v == 0), "{}", r.summary());
    assert!(r.ok(), "{}", r.summary());
}

#[test]
fn drops_are_recovered_by_timer_and_nak() {
    let r = run(&Options {
        drop: 0.05,
        ..base(1)
    });
    assert_clean(&r);
    assert!(r.restarts > 0 && r.retransmits > 0, "{}", r.summary());
    assert!(
        r.drops
            .iter()
            .any(|(k, v)| k.starts_with("fabric_") && *v > 0)
    );
}

#[test]
fn duplicates_and_reordering_need_no_restart() {
    let r = run(&Options {
        dup: 0.02,
        reorder: 8,
        ..base(2)
    });
    assert_clean(&r);
    assert!(r.duplicated > 0 && r.reordered > 0, "{}", r.summary());
    assert!(r.kdeth_errors > 0, "reordering shows as sequence errors");
}

#[test]
fn stale_replays_are_dropped_or_harmless() {
    let r = run(&Options {
        stale: 0.02,
        drop: 0.02,
        ..base(3)
    });
    assert_clean(&r);
    assert!(r.stale_injected > 0, "{}", r.summary());
}

#[test]
fn the_full_mix_with_8k_mtu() {
    let r = run(&Options {
        drop: 0.05,
        dup: 0.01,
        reorder: 8,
        stale: 0.01,
        mtu: 8192,
        ..base(4)
    });
    assert_clean(&r);
}

#[test]
fn a_short_soak() {
    for seed in 100..112 {
        let o = soak_options(seed);
        let r = run(&o);
        assert!(r.ok(), "seed {seed}: {o:?}\n{}", r.summary());
    }
}

#[test]
fn soak_options_vary_and_stay_valid() {
    let all: Vec<Options> = (0..50).map(soak_options).collect();
    assert!(all.iter().any(|o| o.mtu == 8192) && all.iter().any(|o| o.mtu == 4096));
    assert!(all.iter().any(|o| o.drop > 0.0) && all.iter().any(|o| o.drop == 0.0));
    assert!(all.iter().any(|o| o.reorder > 1));
    for o in &all {
        assert!(o.groups >= 9 && o.qps >= 1 && o.bytes % o.request == 0);
    }
    assert_eq!(soak_options(7), soak_options(7));
}

#[test]
fn restarts_keep_their_flows_when_flows_run_out() {
    // Regression: a restart that gave its flow back deadlocked QPs that
    // held TIDs against QPs that held the flows.
    let r = run(&Options {
        qps: 40,
        bytes: 40 * (512 << 10),
        request: 512 << 10,
        groups: 10,
        drop: 0.03,
        seed: 1,
        ..Options::default()
    });
    assert_clean(&r);
    assert!(r.flow_waits > 0 && r.restarts > 0, "{}", r.summary());
}
