// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A bounded smoke run of the READ state-machine fuzz interpreter
//! ([`tid_harness::fuzz`], shared with the cargo-fuzz targets
//! `requester_rx`, `responder_rx` and `read_pair` of `tid-read-proto/fuzz`)
//! on inputs from a seeded generator, so `cargo test` exercises it too.
//! Each input must pass every check of the interpreter (no panic, invariants after every step, every
//! request completed, nothing left after destroy), and the inputs together
//! must really have driven the engines.
#![cfg(feature = "std")]

use tid_harness::fuzz::{Mode, Summary, run};

/// xorshift64*: a fixed, dependency-free byte source.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn input(&mut self) -> Vec<u8> {
        let len = 2 + (self.next() % 160) as usize;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn smoke(mode: Mode, seed: u64, inputs: usize) -> Summary {
    let mut g = Gen(seed);
    let mut total = Summary::default();
    for _ in 0..inputs {
        let data = g.input();
        total += run(mode, &data);
    }
    println!("{mode:?}: {inputs} inputs, {total:?}");
    // The generator must have reached the engines, or the run proves
    // nothing.
    assert!(total.steps > 0 && total.delivered > 0, "{total:?}");
    assert!(
        total.completed_ok > 0,
        "no request ever completed: {total:?}"
    );
    total
}

#[test]
fn requester_rx_smoke() {
    let s = smoke(Mode::RequesterRx, 0x5EED_0001, 100);
    assert!(s.injected > 0, "no forged packet reached the requester");
}

#[test]
fn responder_rx_smoke() {
    let s = smoke(Mode::ResponderRx, 0x5EED_0002, 100);
    assert!(s.injected > 0, "no forged packet reached the responder");
}

#[test]
fn read_pair_smoke() {
    let s = smoke(Mode::Pair, 0x5EED_0003, 100);
    assert!(
        s.restarts > 0,
        "the schedules never made a requester restart"
    );
}

/// Replays the inputs under `tid-read-proto/fuzz/regressions/<target>/` whose name
/// starts with `open-` (`open`) or not (`fixed`); returns how many ran.
fn replay(open: bool) -> usize {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tid-read-proto/fuzz/regressions");
    let mut ran = 0;
    for (target, mode) in [
        ("requester_rx", Mode::RequesterRx),
        ("responder_rx", Mode::ResponderRx),
        ("read_pair", Mode::Pair),
    ] {
        let Ok(files) = std::fs::read_dir(dir.join(target)) else {
            continue;
        };
        let mut files: Vec<_> = files.map(|f| f.unwrap().path()).collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("open-") != open {
                continue;
            }
            let data = std::fs::read(&f).unwrap();
            println!("{target}: {}", f.display());
            run(mode, &data);
            ran += 1;
        }
    }
    assert!(ran > 0, "no regression input found under {}", dir.display());
    ran
}

/// Replays every fixed finding kept under
/// `tid-read-proto/fuzz/regressions/<target>/`: the responder serves a
/// re-armed ack-queue entry without moving its send pointer back
/// (`tid_rdma_rcv_error()`: the `read_pair` ack-queue-full inputs fail
/// with the pointer rewound as the driver rewinds it), and the requester
/// reads the chip's flow register for dropped packets too
/// (`hfi1_rc_rcv_tid_rdma_read_resp()`:
/// `requester_rx/stuck-register-past-segment-end`, a forged copy of a
/// one-packet segment taken in sequence by the chip but dropped by the IB
/// PSN check, sticks with both of those reads taken out).
#[test]
fn fuzz_regressions() {
    replay(false);
}

/// Replays the open findings (`fuzz/regressions/<target>/open-*`): run it
/// with `cargo test -p tid-harness --all-features --test fuzz_smoke --
/// --ignored`; once one passes, drop its `open-` prefix so
/// `fuzz_regressions` keeps it fixed.
#[test]
#[ignore = "replays open fuzz findings; fails until they are fixed"]
fn open_fuzz_findings() {
    replay(true);
}
