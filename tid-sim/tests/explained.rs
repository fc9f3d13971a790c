// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The verdict on `RETRY_EXC_ERR`: a QP may end retry-exceeded only after
//! retries the faults on its pair explain (`tid_sim::explain`).

use tid_sim::cli::{Ops, Options};
use tid_sim::explain::{Fault, Ledger};
use tid_sim::scenario::{self, Report, RunFaults};

fn run(o: &Options) -> Report {
    scenario::run_observed(o, RunFaults::from_options(o), &mut ())
}

/// A dead link: every QP ends retry-exceeded, every retry behind a drop
/// of its resend, and the run passes with the summary saying why.
#[test]
fn a_dead_link_explains_every_retry() {
    for ops in [Ops::Read, Ops::Write] {
        let r = run(&Options {
            qps: 4,
            bytes: 4 << 20,
            drop: 1.0,
            ops,
            ..Options::default()
        });
        assert!(r.ok(), "{}", r.summary());
        let e = &r.explain;
        assert_eq!(e.judged_pairs, 4, "{}", r.summary());
        assert!(e.judged_retries >= 4 * 7 && e.judged_faults >= e.judged_retries);
        assert!(
            r.summary()
                .contains("4 QP pairs ended retry-exceeded, each of their"),
            "{}",
            r.summary()
        );
    }
}

/// A report whose ledger holds a retry with no fault behind it on a pair
/// that ended retry-exceeded fails, and its summary names the pair; the
/// same report with that retry explained passes.
#[test]
fn an_unexplained_retry_fails_the_run() {
    let r = run(&Options {
        qps: 2,
        bytes: 2 << 20,
        drop: 0.01,
        ..Options::default()
    });
    assert!(r.ok(), "{}", r.summary());
    let mut l = Ledger::new(2);
    l.fault(1, Fault::Drop);
    l.retries(1, 2);
    l.retry_exceeded(1);
    let failed = Report {
        explain: l.explained(),
        ..r.clone()
    };
    assert!(!failed.ok());
    let s = failed.summary();
    assert!(s.starts_with("tid-sim: FAIL"), "{s}");
    assert!(s.contains("pair 1 1 of 2 retries (1 drops"), "{s}");
    let mut l = Ledger::new(2);
    for n in 1..=2 {
        l.fault(1, Fault::Duplicate);
        l.retries(1, n);
    }
    l.retry_exceeded(1);
    let passed = Report {
        explain: l.explained(),
        ..r
    };
    assert!(passed.ok(), "{}", passed.summary());
}
