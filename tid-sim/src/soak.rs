// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The seeded scenarios of `--soak`, and the soak itself: its seeds run
//! on several threads at once ([`run_soak`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cli::{MIXED_READ_SIZES, Options, ReadSizes};
use crate::report::Report;
use crate::rng::Rng;
use crate::scenario::{self, RunFaults};

/// The scenario a soak run with `seed` uses: sizes and a fault mix drawn
/// from the seed (1..=6 QPs with 1..=3 requests each, or one run in five
/// 8..=47 QPs with one request each, so flows run out too; requests of
/// 256 KiB, 260 KiB, 512 KiB or 1 MiB; 9..=40 TID groups; either MTU;
/// drop up to 5 %, duplicates up to 2 %, reorder window 0 or 2..=8, stale
/// replays up to 1 %, each fault present half the time; one run in three
/// cycles through the mixed READ sizes, so plain READs run too).
pub fn soak_options(seed: u64) -> Options {
    let mut r = Rng::new(seed ^ 0x50AC_50AC);
    let many = r.chance(0.2);
    let qps = if many {
        8 + r.below(40) as u32
    } else {
        1 + r.below(6) as u32
    };
    let request = [256u64 << 10, 260 << 10, 512 << 10, 1 << 20][r.below(4) as usize];
    let per_qp = if many {
        request
    } else {
        (1 + r.below(3)) * request
    };
    let mut pick = |max: f64| {
        if r.chance(0.5) {
            (r.below(1001) as f64 / 1000.0) * max
        } else {
            0.0
        }
    };
    let drop = pick(0.05);
    let dup = pick(0.02);
    let stale = pick(0.01);
    let read_sizes = (r.below(3) == 0).then(|| ReadSizes(MIXED_READ_SIZES.to_vec()));
    Options {
        qps,
        bytes: per_qp * u64::from(qps),
        request,
        groups: 9 + r.below(32) as u32,
        mtu: if r.chance(0.5) { 4096 } else { 8192 },
        seed,
        drop,
        dup,
        reorder: if r.chance(0.5) {
            0
        } else {
            2 + r.below(7) as usize
        },
        stale,
        read_sizes,
        ..Options::default()
    }
}

/// What a soak found.
#[derive(Debug)]
pub struct SoakOutcome {
    /// Seeds counted: all of them, or those up to and including the first
    /// failing one.
    pub runs: u64,
    /// Bytes the counted runs verified.
    pub verified_bytes: u64,
    /// Restarts in the counted runs.
    pub restarts: u64,
    /// Threads the seeds ran on.
    pub jobs: usize,
    /// The first failing seed in seed order: its place (from 1), its
    /// scenario and its report.
    pub failed: Option<(u64, Options, Report)>,
}

/// One finished seed: its place, bytes, restarts, and its scenario and
/// report if it failed.
type Finished = (u64, u64, u64, Option<(Options, Report)>);

/// Runs the soak `opts` asks for (`opts.soak` seeds from `opts.seed` on,
/// each with [`soak_options`], `opts.read_sizes` overriding the drawn
/// ones) on `jobs` threads (0: one per CPU), calling `progress(done,
/// failed, verified_bytes)` after each seed.
///
/// Every run is a function of its seed alone, and threads take the seeds
/// in order, so the outcome is the one a single thread gives: once a seed
/// fails no later seed is started, the seeds before it (all started
/// already) still finish, and the first failing seed in seed order is the
/// one reported; runs and bytes count the seeds up to it.
pub fn run_soak(
    opts: &Options,
    jobs: usize,
    progress: &(dyn Fn(u64, u64, u64) + Sync),
) -> SoakOutcome {
    let jobs = match jobs {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let next = AtomicU64::new(0);
    let first_failure = AtomicU64::new(u64::MAX);
    let (done, failures, bytes) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let finished: Mutex<Vec<Finished>> = Mutex::new(Vec::new());
    let worker = || {
        let mut mine: Vec<Finished> = Vec::new();
        loop {
            let n = next.fetch_add(1, Ordering::Relaxed);
            if n >= opts.soak || n > first_failure.load(Ordering::Relaxed) {
                break;
            }
            let mut o = soak_options(opts.seed.wrapping_add(n));
            if opts.read_sizes.is_some() {
                o.read_sizes.clone_from(&opts.read_sizes);
            }
            o.ops = opts.ops;
            if o.ops.writes() {
                // Plain RDMA WRITEs (the mixed sizes below 256K) have no
                // responder yet.
                o.read_sizes = None;
            }
            let r = scenario::run_observed(&o, RunFaults::from_options(&o), &mut ());
            let (verified, restarts) = (r.verified_bytes, r.restarts);
            let total = bytes.fetch_add(verified, Ordering::Relaxed) + verified;
            let failed = u64::from(!r.ok());
            progress(
                done.fetch_add(1, Ordering::Relaxed) + 1,
                failures.fetch_add(failed, Ordering::Relaxed) + failed,
                total,
            );
            let bad = (failed == 1).then_some((o, r));
            if bad.is_some() {
                first_failure.fetch_min(n, Ordering::Relaxed);
            }
            mine.push((n, verified, restarts, bad));
        }
        if let Ok(mut f) = finished.lock() {
            f.append(&mut mine);
        }
    };
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(worker);
        }
    });
    let mut all = finished.into_inner().unwrap_or_default();
    all.sort_by_key(|f| f.0);
    let last = first_failure.load(Ordering::Relaxed);
    let mut out = SoakOutcome {
        runs: 0,
        verified_bytes: 0,
        restarts: 0,
        jobs,
        failed: None,
    };
    for (n, b, r, bad) in all.into_iter().filter(|f| f.0 <= last) {
        out.runs += 1;
        out.verified_bytes += b;
        out.restarts += r;
        if let Some((o, rep)) = bad {
            out.failed.get_or_insert((n + 1, o, rep));
        }
    }
    out
}
