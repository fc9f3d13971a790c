// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The command line's parsing and refusals.

use super::*;

fn run(args: &[&str]) -> Result<Options, CliError> {
    let argv = std::iter::once("tid-sim").chain(args.iter().copied());
    match parse(argv)? {
        Command::Run(o) => Ok(o),
        Command::Print(t) => Err(refuse(t, "")),
    }
}

#[test]
fn sizes() {
    assert_eq!(parse_size("4096").unwrap(), 4096);
    assert_eq!(parse_size("256K").unwrap(), 256 << 10);
    assert_eq!(parse_size("64m").unwrap(), 64 << 20);
    assert_eq!(parse_size("2G").unwrap(), 2 << 30);
    assert!(parse_size("").is_err());
    assert!(parse_size("K").is_err());
    assert!(parse_size("1T").is_err());
    assert!(parse_size("99999999999999999999G").is_err());
    assert_eq!(show_size(64 << 20), "64M");
    assert_eq!(show_size(260 << 10), "260K");
    assert_eq!(show_size(1000), "1000");
}

#[test]
fn the_defaults_are_the_documented_ones() {
    assert_eq!(run(&[]).unwrap(), Options::default());
}

#[test]
fn flags() {
    let o = run(&[
        "--qps",
        "4",
        "--bytes=8M",
        "--request",
        "512K",
        "--mtu",
        "8192",
        "--json",
    ])
    .unwrap();
    assert_eq!(
        (o.qps, o.bytes, o.request, o.mtu, o.json),
        (4, 8 << 20, 512 << 10, 8192, true)
    );
    let f = run(&[
        "--drop",
        "0.05",
        "--dup",
        "0.01",
        "--reorder",
        "8",
        "--stale",
        "0.01",
        "--soak",
        "20",
    ])
    .unwrap();
    assert_eq!(
        (f.drop, f.dup, f.reorder, f.stale, f.soak),
        (0.05, 0.01, 8, 0.01, 20)
    );
    assert_eq!(run(&["--drop", "1"]).unwrap().drop, 1.0);
    assert_eq!(
        run(&["--read-sizes", "mixed"]).unwrap().read_cycle(),
        MIXED_READ_SIZES
    );
    assert_eq!(
        run(&["--read-sizes", "4K,1M"]).unwrap().read_cycle(),
        [4096, 1 << 20]
    );
    assert!(matches!(
        parse(["tid-sim", "--help"]),
        Ok(Command::Print(t)) if t.contains("Exit status")
    ));
    assert!(matches!(
        parse(["tid-sim", "--version"]),
        Ok(Command::Print(t)) if t.contains(env!("CARGO_PKG_VERSION"))
    ));
}

/// Every refusal is one line and a hint; none is the usage text.
#[test]
fn refusals_are_one_line_with_a_hint() {
    for (args, says) in [
        (&["--mtu", "2048"][..], "4096 and 8192"),
        (&["--qps"][..], "--qps"),
        (&["--qps", "0"][..], "1..=1024"),
        (&["--frobnicate"][..], "--frobnicate"),
        (&["--drop", "0.9"][..], "0..=0.5"),
        (&["--drop", "1.5"][..], "dead link"),
        (&["--dup", "1"][..], "0..=0.5"),
        (&["--read-sizes", "1000"][..], "not a READ size"),
        (&["--read-sizes", "4K,x"][..], "not a size"),
        (&["--dup", "x"][..], "not a probability"),
        (&["--reorder", "1"][..], "window of 1 is in order"),
        (&["--reorder", "65"][..], "2..=64"),
        (&["--request", "1000"][..], "not a multiple of 4K"),
        (&["--bytes", "1000"][..], "whole pages over 16 QPs"),
        (
            &["--request", "2G", "--bytes", "16M"][..],
            "more than each QP's share",
        ),
        (&["--request", "8M"][..], "more than each QP's share"),
        (&["--request", "768K"][..], "not a whole number"),
        (&["--groups", "1"][..], "8 groups"),
        (&["--soak", "3", "--pcap", "f"][..], "--soak runs many"),
        (
            &["--soak", "3", "--report", "f.svg"][..],
            "--soak runs many",
        ),
        (&["--json-series"][..], "adds to the JSON"),
    ] {
        let e = run(args).expect_err(&format!("{args:?} must be refused"));
        assert!(e.message.contains(says), "{args:?}: {e}");
        assert!(!e.message.contains('\n') && !e.hint.contains('\n'), "{e}");
        assert!(!e.hint.is_empty() && !e.message.contains("Usage"), "{e}");
    }
    assert!(
        run(&["--bytes", "1000"])
            .unwrap_err()
            .hint
            .contains("--bytes 64K")
    );
    assert!(
        run(&["--groups", "7"])
            .unwrap_err()
            .hint
            .contains("--groups 8")
    );
}

#[test]
fn the_minimum_groups_follow_the_segment() {
    assert_eq!(min_groups(1 << 20), 8);
    assert_eq!(min_groups(256 << 10), 8);
    // Below 256 KiB a READ is a plain RDMA READ: no RcvArray entries.
    assert_eq!(min_groups(12 << 10), 1);
    assert_eq!(min_groups(60 << 10), 1);
    assert_eq!(min_groups(252 << 10), 1);
    assert_eq!(min_groups(260 << 10), 8);
    assert!(run(&["--groups", "8"]).is_ok());
    assert!(
        run(&[
            "--qps",
            "5",
            "--bytes",
            "60K",
            "--request",
            "12K",
            "--groups",
            "1"
        ])
        .is_ok()
    );
}

#[test]
fn the_responder_groups_default_to_the_requesters() {
    let o = run(&["--groups", "20"]).unwrap();
    assert_eq!((o.resp_groups, o.responder_groups()), (None, 20));
    let o = run(&["--groups", "20", "--resp-groups", "64"]).unwrap();
    assert_eq!((o.resp_groups, o.responder_groups()), (Some(64), 64));
    assert!(run(&["--resp-groups", "0"]).is_err());
    assert!(run(&["--resp-groups", "257"]).is_err());
    // READs place nothing on the responder's RcvArray: any size will do.
    assert!(run(&["--resp-groups", "1"]).is_ok());
    let e = run(&["--ops", "write", "--resp-groups", "7"]).unwrap_err();
    assert!(e.message.contains("one WRITE segment"), "{e}");
    assert!(e.hint.contains("--resp-groups 8"), "{e}");
    assert!(run(&["--ops", "mix", "--groups", "7", "--resp-groups", "8"]).is_err());
    assert!(run(&["--ops", "mix", "--resp-groups", "8"]).is_ok());
}
