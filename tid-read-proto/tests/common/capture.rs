// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the capture tests share: frames written as ERF records of a pcap
//! file, and Wireshark's reading of that file (through `tshark`) checked
//! against the values each frame was built from.
//!
//! `tshark` runs when it is on `PATH`; with `HFI1_REQUIRE_TSHARK=1` its
//! absence fails the test (CI sets it). `HFI1_PCAP_OUT=<path>` keeps the
//! capture.

use std::collections::BTreeMap;
use std::process::Command;

use tid_read_proto::wire::erf;

/// One frame, the tshark field values it must decode to, and the opcode
/// name Wireshark must show for it (if the test checks one).
pub struct Sent {
    /// The frame: LRH to ICRC.
    pub bytes: Vec<u8>,
    /// tshark field name → value.
    pub want: BTreeMap<&'static str, u64>,
    /// The opcode as Wireshark names it in its detail view.
    pub name: Option<&'static str>,
}

/// A pcap file of `frames`, one ERF record each, 1 us apart, on
/// alternating ports.
pub fn pcap(frames: &[Sent]) -> Vec<u8> {
    let mut pcap = erf::pcap_file_header(65535).to_vec();
    for (i, s) in frames.iter().enumerate() {
        let ts = erf::timestamp_from_nanos(1_000 * i as u64);
        let mut rec = vec![0u8; erf::pcap_record_len(s.bytes.len())];
        let n = erf::encode_pcap_record(ts, (i % 2) as u8, &s.bytes, &mut rec).unwrap();
        pcap.extend_from_slice(&rec[..n]);
    }
    pcap
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

/// Writes `pcap` (the capture of `frames`) to a file named from `stem`
/// (or `HFI1_PCAP_OUT`) and checks tshark's reading of it: no frame
/// malformed or with an expert note, every frame ERF over the `opa`
/// dissector, every frame's opcode name shown, and every field each frame
/// wants decoded to its value. Returns without checking if tshark is not
/// on `PATH` (unless `HFI1_REQUIRE_TSHARK` is set).
pub fn check_with_tshark(frames: &[Sent], pcap: &[u8], stem: &str) {
    let path = match std::env::var_os("HFI1_PCAP_OUT") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::temp_dir().join(format!("{stem}-{}.pcap", std::process::id())),
    };
    std::fs::write(&path, pcap).unwrap();
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
    if frames.iter().any(|s| s.name.is_some()) {
        let shown = tshark(&["-r", file, "-V"]);
        for name in frames.iter().filter_map(|s| s.name) {
            assert!(shown.contains(name), "{name} not shown:\n{shown}");
        }
    }
    check_fields(frames, file);
    if std::env::var_os("HFI1_PCAP_OUT").is_none() {
        let _ = std::fs::remove_file(&path);
    }
}

/// Every field a frame wants, as tshark decodes it from `file` (the
/// first occurrence in the frame).
fn check_fields(frames: &[Sent], file: &str) {
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
    for (i, (row, s)) in rows.iter().zip(frames).enumerate() {
        let got: BTreeMap<&str, Option<u64>> = names
            .iter()
            .copied()
            .zip(row.split('\t').map(value))
            .collect();
        for (k, v) in &s.want {
            assert_eq!(got[k], Some(*v), "frame {} field {k}: row {row:?}", i + 1);
        }
    }
}
