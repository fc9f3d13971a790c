// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two-node TID RDMA READ simulator: the project's main job.
//!
//! Runs one scenario (see [`tid_sim::scenario`]) or a soak, prints a
//! summary or one JSON object, and exits with 0 (pass), 1 (a failed run)
//! or 2 (a refused command line); see `tid-sim --help`.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::process::ExitCode;

use tid_sim::cli::{self, Command, EXIT_FAIL, EXIT_PASS, EXIT_USAGE, Options};
use tid_sim::observe::Taps;
use tid_sim::pcap::PcapWriter;
use tid_sim::progress::{self, ProgressBar};
use tid_sim::report::Report;
use tid_sim::scenario::{self, RunFaults, Scenario};
use tid_sim::soak::run_soak;
use tid_sim::{picture, speed};

fn main() -> ExitCode {
    let opts = match cli::parse(std::env::args_os()) {
        Ok(Command::Print(text)) => {
            println!("{}", text.trim_end());
            return ExitCode::from(EXIT_PASS);
        }
        Ok(Command::Run(o)) => o,
        Err(e) => {
            eprintln!("tid-sim: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if opts.soak > 0 {
        return soak(&opts);
    }
    match run(&opts) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("tid-sim: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Opens an output file, naming it in the error.
fn create(path: &Path) -> Result<BufWriter<File>, String> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// One run with its outputs; the exit code, or an error about an output
/// file.
fn run(opts: &Options) -> Result<u8, String> {
    let mut pcap = match &opts.pcap {
        Some(path) => {
            Some(PcapWriter::new(create(path)?).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    // Opened before the run so a bad path is refused before the work.
    let mut svg = opts.report.as_deref().map(create).transpose()?;
    let mut taps = Taps::none();
    taps.pcap = pcap.as_mut();
    if opts.report.is_some() || opts.json_series {
        taps.series = Some(Scenario::<()>::new_series(opts));
    }
    if progress::wanted(opts.quiet) {
        taps.bar = Some(ProgressBar::run(opts.bytes));
    }
    let cpu = speed::thread_cpu_ns();
    let mut rep = scenario::run_observed(opts, RunFaults::from_options(opts), &mut taps);
    if let (Some(a), Some(b)) = (cpu, speed::thread_cpu_ns()) {
        rep.cpu_secs = b.saturating_sub(a) as f64 / 1e9;
    }
    if let Some(b) = &taps.bar {
        b.finish();
    }
    rep.engine_errors += taps.pcap_errors;
    rep.series = taps.series.take();
    rep.peak_rss_bytes = speed::peak_rss_bytes();
    (rep.memcpy_bytes_per_s, rep.memcpy_buffer_bytes) = speed::memcpy_bandwidth(opts.bytes);
    if let (Some(w), Some(path)) = (pcap, &opts.pcap) {
        w.finish().map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let (Some(f), Some(path)) = (svg.as_mut(), &opts.report) {
        let text = picture::render(&rep)?;
        std::io::Write::write_all(f, text.as_bytes())
            .and_then(|()| std::io::Write::flush(f))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if !opts.json_series {
        rep.series = None;
    }
    if opts.json {
        println!("{}", rep.to_json());
    } else {
        print!("{}", rep.summary());
    }
    Ok(if rep.ok() { EXIT_PASS } else { EXIT_FAIL })
}

/// The command line that reruns one soak seed alone.
fn soak_command(o: &Options) -> String {
    let r = Report {
        inputs: o.clone(),
        ..Report::default()
    };
    format!("tid-sim {}", r.inputs_line())
}

/// `--soak N`: N seeded scenarios from `--seed` on, each with its own
/// sizes and fault mix, on `--jobs` threads; stops at the first failing
/// seed.
fn soak(opts: &Options) -> ExitCode {
    let bar = progress::wanted(opts.quiet).then(|| ProgressBar::soak(opts.soak));
    let out = run_soak(opts, opts.jobs, &|done, failed, bytes| {
        if let Some(b) = &bar {
            b.soak_update(done, failed, bytes);
        }
    });
    if let Some(b) = &bar {
        b.finish();
    }
    let (bytes, restarts, failed) = (out.verified_bytes, out.restarts, &out.failed);
    let summary = match &failed {
        Some((n, o, _)) => format!(
            "tid-sim: soak: seed {} FAILED (run {n} of {}); rerun it alone: {}",
            o.seed,
            opts.soak,
            soak_command(o)
        ),
        None => format!(
            "tid-sim: soak: {} seeds from {} passed ({bytes} bytes verified, {restarts} restarts, \
             {} threads)",
            opts.soak, opts.seed, out.jobs
        ),
    };
    if opts.json {
        let v = serde_json::json!({
            "tool": "tid-sim",
            "version": env!("CARGO_PKG_VERSION"),
            "soak": opts.soak,
            "first_seed": opts.seed,
            "jobs": out.jobs,
            "verdict": if failed.is_none() { "PASS" } else { "FAIL" },
            "verified_bytes": bytes,
            "restarts": restarts,
            "summary": summary,
            "failed": failed.as_ref().map(|(_, _, r)| {
                serde_json::from_str::<serde_json::Value>(&r.to_json()).unwrap_or_default()
            }),
        });
        println!("{v}");
    } else {
        println!("{summary}");
        if let Some((_, _, r)) = &failed {
            print!("{}", r.summary());
        }
    }
    ExitCode::from(if failed.is_none() {
        EXIT_PASS
    } else {
        EXIT_FAIL
    })
}
