// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A capture read back by Wireshark's `tshark`: no frame malformed or
//! warned beyond a packet comment, every frame ERF over the `opa`
//! dissector with the opcode our parser reads.
//!
//! `tshark` runs when it is on `PATH`; with `HFI1_REQUIRE_TSHARK=1` its
//! absence fails the test (CI sets it).

use std::process::Command;

use tid_read_proto::wire::erf;
use tid_sim::pcap::PcapRecord;

/// Runs `tshark` with `args`; its standard output.
pub fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tshark {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// True if `tshark` is on `PATH`; false (the check is skipped) if not,
/// unless `HFI1_REQUIRE_TSHARK` is set, which fails the test.
pub fn available() -> bool {
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
    }
    have
}

/// The BTH opcode of a captured record.
pub fn opcode(r: &PcapRecord) -> u8 {
    erf::Record::new_checked(&r.data[..]).unwrap().packet()[8]
}

/// Writes the capture `bytes` (whose records are `recs`) to a file named
/// from `stem` and checks tshark's reading: nothing malformed or warned
/// above a comment (severity 0x00100000), one row per frame, each
/// `erf:opa` with our opcode. Returns each row's fields after the opcode
/// (`extra` asks for them), or `None` if tshark is not there.
pub fn check(bytes: &[u8], recs: &[PcapRecord], stem: &str, extra: &[&str]) -> Option<Vec<String>> {
    if !available() {
        return None;
    }
    let path = std::env::temp_dir().join(format!("{stem}-{}.pcapng", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let file = path.to_str().unwrap();
    let bad = tshark(&[
        "-r",
        file,
        "-Y",
        "_ws.malformed || _ws.expert.severity > 0x00100000",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert_eq!(bad.trim(), "", "malformed or warned frames: {bad}");
    let mut args = vec![
        "-r",
        file,
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-e",
        "frame.protocols",
        "-e",
        "opa.bth.opcode",
    ];
    for e in extra {
        args.extend(["-e", e]);
    }
    let rows = tshark(&args);
    let rows: Vec<&str> = rows.lines().collect();
    assert_eq!(rows.len(), recs.len(), "tshark saw every frame");
    let mut rest = Vec::new();
    for (row, r) in rows.iter().zip(recs) {
        let mut f = row.splitn(3, '\t');
        assert_eq!(f.next(), Some("erf:opa"), "{row}");
        let got = f.next().unwrap_or("");
        let got = u8::from_str_radix(got.trim_start_matches("0x"), 16)
            .or_else(|_| got.parse())
            .unwrap();
        assert_eq!(got, opcode(r), "{row}");
        rest.push(f.next().unwrap_or("").to_string());
    }
    let _ = std::fs::remove_file(&path);
    Some(rest)
}
