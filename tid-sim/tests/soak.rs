// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The soak on several threads gives what one thread gives.

use std::sync::atomic::{AtomicU64, Ordering};

use tid_sim::cli::Options;
use tid_sim::soak::run_soak;

/// Twelve seeds on one thread and on three: the same runs, bytes and
/// restarts, no failure, and a progress call per seed that ends at twelve.
#[test]
fn a_soak_on_three_threads_counts_what_one_thread_counts() {
    let opts = Options {
        soak: 12,
        seed: 100,
        ..Options::default()
    };
    let outcome = |jobs| {
        let calls = AtomicU64::new(0);
        let top = AtomicU64::new(0);
        let out = run_soak(&opts, jobs, &|done, failed, _| {
            calls.fetch_add(1, Ordering::Relaxed);
            top.fetch_max(done, Ordering::Relaxed);
            assert_eq!(failed, 0);
        });
        assert_eq!(out.jobs, jobs);
        assert!(out.failed.is_none(), "{:?}", out.failed.map(|f| f.1));
        assert_eq!((calls.into_inner(), top.into_inner()), (12, 12));
        (out.runs, out.verified_bytes, out.restarts)
    };
    let one = outcome(1);
    assert_eq!(one.0, 12);
    assert!(one.1 > 0);
    assert_eq!(outcome(3), one);
}
