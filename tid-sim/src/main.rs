// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two-node TID RDMA READ simulator: the project's main job.
//!
//! Runs one scenario (see [`tid_sim::scenario`]), prints a summary or one
//! JSON object, and exits non-zero on any mismatch, leak or stuck QP.

use std::fs::File;
use std::io::BufWriter;
use std::process::ExitCode;

use tid_sim::cli::{self, Command};
use tid_sim::pcap::PcapWriter;
use tid_sim::scenario::{self, RunFaults, soak_options};

fn main() -> ExitCode {
    let opts = match cli::parse(std::env::args().skip(1)) {
        Ok(Command::Help) => {
            print!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Command::Run(o)) => o,
        Err(e) => {
            eprintln!("tid-sim: {e}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    if opts.soak > 0 {
        return soak(&opts);
    }
    let faults = RunFaults::from_options(&opts);
    let report = if let Some(path) = &opts.pcap {
        let file = match File::create(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("tid-sim: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        let mut w = match PcapWriter::new(BufWriter::new(file)) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("tid-sim: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        let r = scenario::run(&opts, faults, Some(&mut w));
        if let Err(e) = w.finish() {
            eprintln!("tid-sim: {}: {e}", path.display());
            return ExitCode::from(2);
        }
        r
    } else {
        scenario::run(&opts, faults, None::<&mut PcapWriter<std::io::Sink>>)
    };
    if opts.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.summary());
    }
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `--soak N`: N seeded scenarios from `--seed` on, each with its own
/// sizes and fault mix; stops at the first failing seed.
fn soak(opts: &cli::Options) -> ExitCode {
    let mut bytes = 0u64;
    let mut restarts = 0u64;
    for n in 0..opts.soak {
        let seed = opts.seed.wrapping_add(n);
        let o = soak_options(seed);
        let r = scenario::run(
            &o,
            RunFaults::from_options(&o),
            None::<&mut PcapWriter<std::io::Sink>>,
        );
        bytes += r.verified_bytes;
        restarts += r.restarts;
        if !r.ok() {
            println!(
                "tid-sim: soak: seed {seed} FAILED (run {} of {}): --qps {} --bytes {} --request {} --groups {} --mtu {} --seed {seed} --drop {} --dup {} --reorder {} --stale {}",
                n + 1,
                opts.soak,
                o.qps,
                o.bytes,
                o.request,
                o.groups,
                o.mtu,
                o.drop,
                o.dup,
                o.reorder,
                o.stale
            );
            print!("{}", r.summary());
            return ExitCode::FAILURE;
        }
    }
    println!(
        "tid-sim: soak: {} seeds from {} passed ({} bytes verified, {} restarts)",
        opts.soak, opts.seed, bytes, restarts
    );
    ExitCode::SUCCESS
}
