// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! `--ops write` and `--ops mix` on a clean fabric: every WRITE lands in
//! the responder's scattered pages byte for byte, nothing is held on
//! either node, and the report counts the WRITE half (segments, TID ACKs,
//! RNR NAKs, second legs); with the responder's TIDs scarce (room for one
//! scattered segment) the WRITEs go through RNR NAKs and still complete.
//! A mixed run's capture decodes in Wireshark with every TID RDMA opcode
//! in it and no malformed frame.
//!
//! `tshark` runs when it is on `PATH`; with `HFI1_REQUIRE_TSHARK=1` its
//! absence fails the test (CI sets it).

mod common;

use std::collections::BTreeSet;

use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_READ_REQ, OP_TID_RDMA_READ_RESP, OP_TID_RDMA_RESYNC,
    OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST, OP_TID_RDMA_WRITE_REQ,
    OP_TID_RDMA_WRITE_RESP,
};
use tid_sim::cli::{Ops, Options};
use tid_sim::fabric::{Faults, PacketKind};
use tid_sim::pcap::{PcapWriter, read_all};
use tid_sim::scenario::{self, Report, RunFaults};

fn run(o: &Options) -> Report {
    scenario::run_observed(o, RunFaults::from_options(o), &mut ())
}

fn small(ops: Ops) -> Options {
    Options {
        qps: 4,
        bytes: 8 << 20,
        ops,
        ..Options::default()
    }
}

/// Kernel: the TID WRITE walk end to end (`hfi1_rc_rcv_tid_rdma_write_req()`
/// through `hfi1_rc_rcv_tid_rdma_ack()`). Every byte written is checked in
/// the responder's pages, every WRITE succeeds, nothing is left held, and
/// every segment went out on the second leg and was acknowledged.
#[test]
fn clean_write_run_checks_every_byte_and_holds_nothing() {
    let r = run(&small(Ops::Write));
    assert!(r.all_succeeded(), "{}", r.summary());
    let w = &r.write;
    assert_eq!(w.verified_bytes, 8 << 20);
    assert_eq!(w.tid_writes, w.requests);
    assert_eq!(w.segments, 32, "8M of 256K segments");
    assert_eq!(w.segments_acked, 32);
    assert_eq!(w.write_resps, 32);
    assert_eq!(w.data_packets, 32 * 64);
    assert!(w.tid_acks > 0 && w.second_leg_runs > 0 && w.responder_second_leg_runs > 0);
    assert_eq!(r.tid_reads + r.plain_reads, 0);
    assert!(r.leaked.values().all(|&v| v == 0), "{:?}", r.leaked);
    // The JSON carries the WRITE counters.
    let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(j["write"]["segments_acked"], 32);
    assert_eq!(j["inputs"]["ops"], "write");
}

/// READs and WRITEs on the same QPs: both kinds complete with their bytes
/// checked (READs in the requester's pages, WRITEs in the responder's).
#[test]
fn clean_mix_run_checks_reads_and_writes() {
    let r = run(&small(Ops::Mix));
    assert!(r.all_succeeded(), "{}", r.summary());
    assert!(r.write.requests > 0 && r.tid_reads > 0, "{}", r.summary());
    assert!(r.write.verified_bytes < r.verified_bytes);
    assert_eq!(r.verified_bytes, 8 << 20);
}

/// Kernel: `hfi1_tid_write_alloc_resources()`'s RNR NAK and its revive.
/// 8 TID groups hold one scattered 256K segment: 32 QPs writing go
/// through RNR NAKs, and every WRITE still completes with its bytes.
#[test]
fn rnr_heavy_write_run_completes() {
    let o = Options {
        qps: 32,
        groups: 8,
        bytes: 32 << 20,
        ops: Ops::Write,
        ..Options::default()
    };
    let r = run(&o);
    assert!(r.all_succeeded(), "{}", r.summary());
    assert!(r.write.rnr_naks > 0, "{}", r.summary());
}

/// A WRITE below 256K would go as a plain RDMA WRITE, which no responder
/// receives yet: the command line is refused, not left to hang.
#[test]
fn writes_below_the_tid_minimum_are_refused() {
    let o = Options {
        request: 64 << 10,
        ..small(Ops::Write)
    };
    assert!(o.check().is_err());
    assert!(small(Ops::Write).check().is_ok());
}

/// A mixed run's capture, with segment tails dropped on the way to the
/// responder so the requester's TID retry sends RESYNCs: every TID RDMA
/// opcode is in it, and the run passes (the responder takes the RESYNC
/// and every WRITE completes with its bytes checked).
fn mixed_capture() -> Vec<u8> {
    let o = Options {
        qps: 2,
        bytes: 4 << 20,
        ops: Ops::Mix,
        seed: 5,
        ..Options::default()
    };
    let mut to_responder = Faults::default();
    to_responder.drop[PacketKind::WriteDataTail as usize] = 0.2;
    let faults = RunFaults {
        to_responder,
        to_requester: Faults::default(),
    };
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let r = scenario::run(&o, faults, Some(&mut w));
    assert!(r.ok(), "{}", r.summary());
    assert!(
        r.write.resyncs_received > 0,
        "no RESYNC reached the responder"
    );
    w.finish().unwrap()
}

#[test]
fn a_mixed_capture_has_every_tid_opcode_and_decodes_in_tshark() {
    let bytes = mixed_capture();
    let recs = read_all(&bytes[..]).unwrap();
    let ops: BTreeSet<u8> = recs.iter().map(common::tshark::opcode).collect();
    for op in [
        OP_TID_RDMA_WRITE_REQ,
        OP_TID_RDMA_WRITE_RESP,
        OP_TID_RDMA_WRITE_DATA,
        OP_TID_RDMA_WRITE_DATA_LAST,
        OP_TID_RDMA_READ_REQ,
        OP_TID_RDMA_READ_RESP,
        OP_TID_RDMA_RESYNC,
        OP_TID_RDMA_ACK,
    ] {
        assert!(ops.contains(&op), "opcode {op:#x} missing: {ops:x?}");
    }
    // It asserts what it reads; `None` if tshark is not there.
    let _ = common::tshark::check(&bytes, &recs, "tid-sim-mixed", &[]);
}
