// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A faulty run's capture: taken after the fault injector, so it holds
//! every packet the fabric delivered (duplicates and stale copies too) and
//! every one it dropped, each fault marked by the packet's comment in the
//! counts the report gives; wire times from the link model (no two
//! packets overlap on the wire at 100 Gb/s); and Wireshark (`tshark`)
//! decodes every frame as `erf:opa` with the opcode our parser reads and
//! no malformed frame or expert note above a comment.
//!
//! `tshark` runs when it is on `PATH`; with `HFI1_REQUIRE_TSHARK=1` its
//! absence fails the test (CI sets it).

mod common;

use std::collections::BTreeMap;

use tid_read_proto::packet;
use tid_read_proto::wire::erf;
use tid_sim::cli::Options;
use tid_sim::pcap::{PcapRecord, PcapWriter, read_all};
use tid_sim::scenario::{self, Report, RunFaults};

fn faulty_capture() -> (Report, Vec<u8>) {
    let o = Options {
        qps: 4,
        bytes: 4 << 20,
        drop: 0.03,
        dup: 0.02,
        reorder: 6,
        stale: 0.02,
        seed: 3,
        ..Options::default()
    };
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let rep = scenario::run(&o, RunFaults::from_options(&o), Some(&mut w));
    assert!(rep.ok(), "{}", rep.summary());
    (rep, w.finish().unwrap())
}

/// How many packets carry a comment containing `what`.
fn marked(recs: &[PcapRecord], what: &str) -> u64 {
    recs.iter()
        .filter(|r| r.comment.as_deref().is_some_and(|c| c.contains(what)))
        .count() as u64
}

#[test]
fn every_injected_fault_is_marked_and_wire_times_are_honest() {
    let (rep, bytes) = faulty_capture();
    let recs = read_all(&bytes[..]).unwrap();
    let fabric_drops: u64 = rep
        .drops
        .iter()
        .filter(|(k, _)| k.starts_with("fabric_"))
        .map(|(_, v)| v)
        .sum();
    assert!(fabric_drops > 0 && rep.duplicated > 0 && rep.stale_injected > 0 && rep.reordered > 0);
    assert_eq!(recs.len() as u64, rep.delivered + fabric_drops);
    assert_eq!(marked(&recs, "dropped"), fabric_drops);
    assert_eq!(marked(&recs, "duplicate"), rep.duplicated);
    assert_eq!(marked(&recs, "stale copy"), rep.stale_injected);
    assert_eq!(marked(&recs, "reordered"), rep.reordered);
    // Both directions are there, and every packet parses (the fault
    // injector never changes bytes).
    for link in 0..2 {
        assert!(recs.iter().any(|r| r.interface == link));
    }
    // One wire clock: a delivered packet starts after the one before it
    // was serialised at 12.5 bytes per ns (dropped packets take no wire
    // time).
    let mut free_at = 0.0f64;
    for r in &recs {
        let rec = erf::Record::new_checked(&r.data[..]).unwrap();
        packet::parse(rec.packet()).expect("every captured packet parses");
        if r.comment.as_deref().is_some_and(|c| c.contains("dropped")) {
            continue;
        }
        assert!(
            r.time_ns as f64 + 1.0 >= free_at,
            "{} < {free_at}",
            r.time_ns
        );
        free_at = r.time_ns as f64 + rec.packet().len() as f64 / 12.5;
    }
}

#[test]
fn tshark_decodes_every_frame_of_a_faulty_capture() {
    let (_, bytes) = faulty_capture();
    let recs = read_all(&bytes[..]).unwrap();
    let Some(comments) = common::tshark::check(&bytes, &recs, "tid-sim-faulty", &["frame.comment"])
    else {
        return;
    };
    let mut counts: BTreeMap<bool, u64> = BTreeMap::new();
    for (comment, r) in comments.iter().zip(&recs) {
        assert_eq!(comment.is_empty(), r.comment.is_none(), "{comment}");
        *counts.entry(!comment.is_empty()).or_default() += 1;
    }
    assert!(counts.get(&true).is_some_and(|&n| n > 0));
}
