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
use tid_sim::scenario::{self, RunFaults};

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
    let faults = RunFaults::default();
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
