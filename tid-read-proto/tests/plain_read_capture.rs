// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Scenario: the plain RDMA READ on the wire, as the engines build it for
//! every READ that does not go as a TID READ: an `RDMA_READ_REQUEST` and
//! its `READ_RESPONSE_FIRST`, `MIDDLE` and `LAST`, then a second READ
//! answered by a `READ_RESPONSE_ONLY` with a payload that needs padding,
//! in ERF records of a pcap file. Our parser reads every frame back, and
//! Wireshark's `opa` dissector (through `tshark`) decodes every field to
//! the values it was built from, names each opcode as InfiniBand does,
//! and finds no malformed frame and no expert warning.
//!
//! `tshark` runs when it is on `PATH`; with `HFI1_REQUIRE_TSHARK=1` its
//! absence fails the test (CI sets it). `HFI1_PCAP_OUT=<path>` keeps the
//! capture.

use std::collections::BTreeMap;
use std::process::Command;

use hfi1_hal::Psn;
use tid_read_proto::packet::{self, Parsed, Path};
use tid_read_proto::plain_read::{self, RespKind};
use tid_read_proto::wire::{aeth, erf, reth};

const REQ_LID: u16 = 0x0011;
const RESP_LID: u16 = 0x0022;
const REQ_VQP: u32 = 0x00_0123;
const RESP_VQP: u32 = 0x00_0456;
const PMTU: usize = 4096;

/// One frame, the tshark field values it must decode to, and the opcode
/// name Wireshark must give it.
struct Sent {
    bytes: Vec<u8>,
    want: BTreeMap<&'static str, u64>,
    name: &'static str,
}

fn common(
    bytes: &[u8],
    dlid: u16,
    slid: u16,
    dest_qp: u32,
    psn: u32,
    op: u8,
) -> BTreeMap<&'static str, u64> {
    let icrc = u32::from_be_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
    BTreeMap::from([
        ("opa.9b.dlid", u64::from(dlid)),
        ("opa.9b.slid", u64::from(slid)),
        ("opa.9b.icrc", u64::from(icrc)),
        ("opa.bth.opcode", u64::from(op)),
        ("opa.bth.destqp", u64::from(dest_qp)),
        ("opa.bth.psn", u64::from(psn)),
    ])
}

fn request(psn: u32, r: reth::Repr) -> Sent {
    let mut buf = vec![0u8; packet::MAX_PACKET];
    let path = Path {
        dlid: RESP_LID,
        slid: REQ_LID,
    };
    let n = plain_read::write_request(&mut buf, path, RESP_VQP, Psn::new(psn), &r).unwrap();
    buf.truncate(n);
    let mut want = common(
        &buf,
        RESP_LID,
        REQ_LID,
        RESP_VQP,
        psn,
        plain_read::OP_READ_REQUEST,
    );
    want.extend([
        ("opa.bth.a", 1),
        ("opa.reth.va", r.vaddr),
        ("opa.reth.r_key", u64::from(r.rkey)),
        ("opa.reth.dmalen", u64::from(r.length)),
    ]);
    Sent {
        bytes: buf,
        want,
        name: "RC RDMA Read Request (0x0c)",
    }
}

fn response(psn: u32, kind: RespKind, msn: u32, data: &[u8]) -> Sent {
    let mut buf = vec![0u8; packet::MAX_PACKET];
    let path = Path {
        dlid: REQ_LID,
        slid: RESP_LID,
    };
    let a = aeth::Repr {
        syndrome: 0x1F,
        msn,
    };
    let n = plain_read::write_response(
        &mut buf,
        path,
        REQ_VQP,
        Psn::new(psn),
        kind,
        a,
        data.len(),
        |o| {
            o.copy_from_slice(data);
            true
        },
    )
    .unwrap();
    buf.truncate(n);
    let mut want = common(&buf, REQ_LID, RESP_LID, REQ_VQP, psn, kind.opcode());
    want.insert("opa.bth.padcnt", (data.len().wrapping_neg() & 3) as u64);
    if kind.has_aeth() {
        want.extend([
            ("opa.aeth.syndrome", u64::from(a.syndrome)),
            ("opa.aeth.msn", u64::from(a.msn)),
        ]);
    }
    let name = match kind {
        RespKind::First => "RC RDMA Read Response First (0x0d)",
        RespKind::Middle => "RC RDMA Read Response Middle (0x0e)",
        RespKind::Last => "RC RDMA Read Response Last (0x0f)",
        RespKind::Only => "RC RDMA Read Response Only (0x10)",
    };
    Sent {
        bytes: buf,
        want,
        name,
    }
}

/// Two READs: 3 MTUs less 100 bytes (FIRST, MIDDLE, LAST) and 1001 bytes
/// (ONLY, three bytes of pad).
fn frames() -> Vec<Sent> {
    let data: Vec<u8> = (0..3 * PMTU).map(|i| (i * 7 % 253) as u8).collect();
    let len = 3 * PMTU - 100;
    vec![
        request(
            0x10,
            reth::Repr {
                vaddr: 0x7F00_4000_0000,
                rkey: 0xBEEF_0001,
                length: len as u32,
            },
        ),
        response(0x10, RespKind::First, 1, &data[..PMTU]),
        response(0x11, RespKind::Middle, 1, &data[PMTU..2 * PMTU]),
        response(0x12, RespKind::Last, 1, &data[2 * PMTU..len]),
        request(
            0x13,
            reth::Repr {
                vaddr: 0x7F00_4000_3000,
                rkey: 0xBEEF_0001,
                length: 1001,
            },
        ),
        response(0x13, RespKind::Only, 2, &data[..1001]),
    ]
}

fn capture() -> (Vec<Sent>, Vec<u8>) {
    let frames = frames();
    let mut pcap = erf::pcap_file_header(65535).to_vec();
    for (i, s) in frames.iter().enumerate() {
        let ts = erf::timestamp_from_nanos(1_000 * i as u64);
        let mut rec = vec![0u8; erf::pcap_record_len(s.bytes.len())];
        let n = erf::encode_pcap_record(ts, (i % 2) as u8, &s.bytes, &mut rec).unwrap();
        pcap.extend_from_slice(&rec[..n]);
    }
    (frames, pcap)
}

#[test]
fn plain_read_frames_parse_back() {
    for s in frames() {
        let (lrh, p) = packet::parse(&s.bytes).unwrap();
        assert_eq!(u64::from(lrh.dlid), s.want["opa.9b.dlid"]);
        match p {
            Parsed::ReadRequest { bth, reth } => {
                assert_eq!(u64::from(bth.psn.get()), s.want["opa.bth.psn"]);
                assert_eq!(reth.vaddr, s.want["opa.reth.va"]);
                assert_eq!(u64::from(reth.length), s.want["opa.reth.dmalen"]);
            }
            Parsed::ReadResponse {
                bth,
                kind,
                aeth,
                payload,
            } => {
                assert_eq!(u64::from(kind.opcode()), s.want["opa.bth.opcode"]);
                assert_eq!(u64::from(bth.psn.get()), s.want["opa.bth.psn"]);
                assert_eq!(aeth.is_some(), kind.has_aeth());
                assert!(!payload.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }
}

fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tshark {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A tshark field value: hex with 0x, else decimal; booleans as 0/1 or
/// True/False.
fn value(s: &str) -> Option<u64> {
    match s {
        "" => None,
        "True" => Some(1),
        "False" => Some(0),
        _ => match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => s.parse().ok(),
        },
    }
}

#[test]
fn tshark_decodes_every_plain_read_frame_as_built() {
    let (frames, pcap) = capture();
    let path = match std::env::var_os("HFI1_PCAP_OUT") {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            std::env::temp_dir().join(format!("plain-read-capture-{}.pcap", std::process::id()))
        }
    };
    std::fs::write(&path, &pcap).unwrap();
    let have = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var_os("HFI1_REQUIRE_TSHARK").is_none(),
            "HFI1_REQUIRE_TSHARK is set but tshark is not on PATH"
        );
        eprintln!("tshark not on PATH: the Wireshark check did not run");
        return;
    }
    let file = path.to_str().unwrap();
    let bad = tshark(&[
        "-r",
        file,
        "-Y",
        "_ws.malformed || _ws.expert",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert_eq!(bad.trim(), "", "malformed or expert frames: {bad}");
    let protos = tshark(&["-r", file, "-T", "fields", "-e", "frame.protocols"]);
    let protos: Vec<_> = protos.lines().collect();
    assert_eq!(protos.len(), frames.len());
    assert!(protos.iter().all(|p| *p == "erf:opa"), "{protos:?}");
    // The opcode as Wireshark names it.
    let shown = tshark(&["-r", file, "-V"]);
    for s in &frames {
        assert!(shown.contains(s.name), "{} not shown:\n{shown}", s.name);
    }

    let mut names: Vec<&str> = frames.iter().flat_map(|s| s.want.keys().copied()).collect();
    names.sort_unstable();
    names.dedup();
    let mut args = vec![
        "-r",
        file,
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=f",
    ];
    for n in &names {
        args.extend(["-e", n]);
    }
    let out = tshark(&args);
    let rows: Vec<_> = out.lines().collect();
    assert_eq!(rows.len(), frames.len());
    for (i, (row, s)) in rows.iter().zip(&frames).enumerate() {
        let got: BTreeMap<&str, Option<u64>> = names
            .iter()
            .copied()
            .zip(row.split('\t').map(value))
            .collect();
        for (k, v) in &s.want {
            assert_eq!(got[k], Some(*v), "frame {} field {k}: row {row:?}", i + 1);
        }
    }
    if std::env::var_os("HFI1_PCAP_OUT").is_none() {
        let _ = std::fs::remove_file(&path);
    }
}
