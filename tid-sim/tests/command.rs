// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The binary as a user meets it: `--help` and `--version`, refusals (one
//! line and a hint, exit 2), a failed run (exit 1), a passing one (exit 0)
//! whose JSON reads back into a `Report` with its inputs, and `--report`.

use std::process::{Command, Output};

use tid_sim::report::Report;

fn tid_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tid-sim"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_names_ranges_defaults_and_exit_codes() {
    let o = tid_sim(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = text(&o.stdout);
    for want in [
        "1..=1024",
        "[default: 16]",
        "[default: 64M]",
        "0..=0.5",
        "2..=64",
        "Exit status: 0",
        "2 the command line was refused",
        "--report",
        "--json-series",
        "--quiet",
    ] {
        assert!(h.contains(want), "--help lacks {want:?}:\n{h}");
    }
    let v = tid_sim(&["--version"]);
    assert_eq!(v.status.code(), Some(0));
    assert_eq!(
        text(&v.stdout).trim(),
        format!("tid-sim {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn bad_invocations_are_one_line_and_a_hint_with_exit_2() {
    for args in [
        &["--mtu", "2048"][..],
        &["--bytes", "1000"][..],
        &["--request", "2G", "--bytes", "16M"][..],
        &["--reorder", "1"][..],
        &["--soak", "3", "--json", "--pcap", "f.pcapng"][..],
        &["--groups", "1", "--qps", "1", "--bytes", "1M"][..],
        &["--frobnicate"][..],
    ] {
        let o = tid_sim(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
        let e = text(&o.stderr);
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 2, "{args:?}: {e}");
        assert!(lines[0].starts_with("tid-sim: "), "{e}");
        assert!(lines[1].starts_with("  hint: "), "{e}");
    }
    let e = text(&tid_sim(&["--groups", "1"]).stderr);
    assert!(e.contains("8 groups") && e.contains("--groups 8"), "{e}");
}

#[test]
fn a_passing_run_exits_0_and_its_json_describes_itself() {
    let args = [
        "--qps",
        "2",
        "--bytes",
        "2M",
        "--request",
        "512K",
        "--seed",
        "5",
        "--drop",
        "0.01",
        "--json",
        "--json-series",
    ];
    let o = tid_sim(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let json = text(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["verdict"], "PASS");
    for k in [
        "wall_bytes_per_s",
        "memcpy_bytes_per_s",
        "cpu_bytes_per_s",
        "peak_rss_bytes",
        "sim_bytes_per_us",
    ] {
        assert!(v[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {}", v[k]);
    }
    assert_eq!(v["inputs"]["qps"], 2);
    assert_eq!(v["inputs"]["drop"], 0.01);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["completions"]["SUCCESS"], 4);
    assert_eq!(v["per_qp"].as_array().map(Vec::len), Some(2));
    assert!(
        v["series"]["samples"]
            .as_array()
            .is_some_and(|s| s.len() > 10)
    );
    // The JSON reads back into the struct it came from, inputs and all.
    let r: Report = serde_json::from_str(&json).unwrap();
    assert!(r.ok());
    assert_eq!(r.inputs.seed, 5);
    assert_eq!((r.inputs.bytes, r.inputs.request), (2 << 20, 512 << 10));
    assert_eq!(
        r.per_qp.iter().map(|q| q.verified_bytes).sum::<u64>(),
        2 << 20
    );
    assert_eq!(serde_json::from_str::<Report>(&r.to_json()).unwrap(), r);
}

#[test]
fn an_unwritable_capture_is_refused_before_the_run() {
    // (Exit 1, a failed run, cannot be reached from a valid command line
    // while the engines are right; `scenarios.rs` fails runs through the
    // library, below the CLI's minimum.)
    let o = tid_sim(&["--pcap", "/nonexistent-dir/x.pcapng"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("/nonexistent-dir/x.pcapng"));
}

#[test]
fn the_report_picture_has_every_series() {
    let dir = std::env::temp_dir().join(format!("tid-sim-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("run.svg");
    let o = tid_sim(&[
        "--qps",
        "8",
        "--bytes",
        "8M",
        "--drop",
        "0.02",
        "--report",
        svg.to_str().unwrap(),
        "-q",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg"), "{}", &s[..80]);
    for label in tid_sim::picture::LABELS {
        assert!(s.contains(label), "no {label:?} in the SVG");
    }
    // Every line has points (a polyline of more than its two ends), and
    // the restart marks count what the run counted.
    assert!(
        s.matches("<polyline").count() >= 8,
        "{}",
        s.matches("<polyline").count()
    );
    let restarts = v["restarts"].as_u64().unwrap();
    assert!(restarts > 0);
    assert!(
        s.contains(&format!("restart: {restarts}")),
        "the marks count every restart"
    );
    let timeouts = v["timeouts"].as_u64().unwrap();
    assert!(s.contains(&format!("timeout: {timeouts}")));
    assert!(
        v.get("series").is_none(),
        "the series is in the JSON only with --json-series"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
