// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Small two-node scenarios: both MTUs, tight and roomy TID space, one and
//! many QPs, odd lengths; the default scenario; a run that cannot finish.

use tid_sim::cli::Options;
use tid_sim::pcap::PcapWriter;
use tid_sim::scenario::{self, Report, RunFaults};

fn run(o: &Options) -> Report {
    scenario::run(
        o,
        RunFaults::default(),
        None::<&mut PcapWriter<std::io::Sink>>,
    )
}

/// A segment of scattered pages takes one RcvArray entry per page, 64 for
/// a full 256 KiB segment: a context needs at least 8 groups to hold one
/// (`cli::min_groups`).
fn opts(qps: u32, bytes: u64, request: u64, groups: u32, mtu: u32, seed: u64) -> Options {
    Options {
        qps,
        bytes,
        request,
        groups,
        mtu,
        seed,
        ..Options::default()
    }
}

/// Every byte verified, nothing left held, nothing stuck.
fn assert_clean(r: &Report) {
    assert!(r.requested_bytes > 0);
    assert_eq!(r.verified_bytes, r.requested_bytes, "{}", r.summary());
    assert_eq!(r.mismatched_bytes, 0, "{}", r.summary());
    assert_eq!(r.stuck_qps, 0, "{}", r.summary());
    assert_eq!(r.engine_errors, 0, "{}", r.summary());
    for key in [
        "tid_entries",
        "flows",
        "qp_refs",
        "dma_mappings",
        "flow_records",
        "mr_refs",
        "queued_qps",
    ] {
        assert_eq!(r.leaked.get(key), Some(&0), "{key}: {}", r.summary());
    }
    assert!(r.all_succeeded(), "{}", r.summary());
    assert!(r.packets > 0 && (r.segments > 0 || r.plain_reads > 0));
}

#[test]
fn default_scenario_verifies_every_byte_and_leaks_nothing() {
    let r = run(&Options::default());
    assert_clean(&r);
    assert_eq!(r.requested_bytes, 64 << 20);
    assert_eq!(r.requests, 64);
    assert!(
        r.tid_waits > 0,
        "the default context is tight: {}",
        r.summary()
    );
}

#[test]
fn one_qp_4k_mtu_roomy() {
    let r = run(&opts(1, 2 << 20, 1 << 20, 64, 4096, 3));
    assert_clean(&r);
    assert_eq!(r.requests, 2);
    assert_eq!(r.segments, 8);
    assert_eq!(r.tid_waits, 0);
    // 4 KiB MTU: one READ_RESP per page, one READ_REQ per segment.
    assert_eq!(r.packets, 512 + 8);
}

#[test]
fn many_qps_8k_mtu_tight() {
    let r = run(&opts(8, 4 << 20, 512 << 10, 9, 8192, 5));
    assert_clean(&r);
    assert!(r.tid_waits > 0, "{}", r.summary());
}

#[test]
fn many_qps_4k_mtu_tight() {
    let r = run(&opts(12, 6 << 20, 1 << 20, 9, 4096, 11));
    assert_clean(&r);
    assert!(r.tid_waits > 0, "{}", r.summary());
}

#[test]
fn last_segment_of_4k_with_8k_mtu() {
    // 256 KiB + 4 KiB requests: the second segment is one page.
    let r = run(&opts(2, 2 * (260 << 10), 260 << 10, 16, 8192, 7));
    assert_clean(&r);
    assert_eq!(r.requests, 2);
    assert_eq!(r.segments, 4);
}

#[test]
fn odd_request_sizes_and_qps() {
    let r = run(&opts(3, 3 * (300 << 10), 300 << 10, 10, 4096, 9));
    assert_clean(&r);
    let r = run(&opts(5, 5 * (12 << 10), 12 << 10, 2, 8192, 10));
    assert_clean(&r);
}

#[test]
fn long_pipeline_passes_sync_points() {
    // One QP with a deep send queue keeps its flow across requests: the
    // generation runs out of sequence numbers and the QP must SYNC.
    let r = run(&opts(1, 16 << 20, 1 << 20, 64, 4096, 13));
    assert_clean(&r);
    assert!(r.syncs > 0, "{}", r.summary());
}

#[test]
fn same_seed_same_run() {
    let o = opts(4, 2 << 20, 256 << 10, 9, 4096, 21);
    let mut a = run(&o);
    let mut b = run(&o);
    // Wall-clock time and the process-wide lock counter vary.
    a.wall_secs = 0.0;
    b.wall_secs = 0.0;
    a.lock_checks = 0;
    b.lock_checks = 0;
    assert_eq!(a, b);
    let mut c = run(&Options { seed: 22, ..o });
    c.wall_secs = 0.0;
    assert_ne!(a.steps, 0);
    assert_clean(&c);
}

#[test]
fn a_segment_larger_than_the_context_is_reported_stuck() {
    // One group (8 entries) cannot hold a segment of scattered pages: the
    // QP waits for space that never comes, and the run must say so.
    let r = run(&opts(1, 1 << 20, 1 << 20, 1, 4096, 1));
    assert!(!r.ok(), "{}", r.summary());
    assert_eq!(r.stuck_qps, 1);
    assert!(r.verified_bytes < r.requested_bytes);
}

#[test]
fn json_has_the_promised_fields() {
    let r = run(&opts(2, 1 << 20, 512 << 10, 8, 4096, 4));
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    for k in [
        "verified_bytes",
        "mismatched_bytes",
        "segments",
        "tid_waits",
        "flow_waits",
        "syncs",
        "requests",
        "packets",
    ] {
        assert!(v.get(k).is_some_and(|x| x.is_u64()), "{k}");
    }
    assert_eq!(v["verified_bytes"].as_u64(), Some(1 << 20));
    let leaked = v["leaked"].as_object().unwrap();
    assert!(leaked.len() >= 6);
    assert!(leaked.values().all(|x| x.as_u64() == Some(0)));
}

#[test]
fn more_qps_than_flows() {
    // 40 QPs share 32 hardware flows: some wait on the flow queue.
    let r = run(&opts(40, 40 * (256 << 10), 256 << 10, 20, 4096, 17));
    assert_clean(&r);
    assert!(r.flow_waits > 0, "{}", r.summary());
}
