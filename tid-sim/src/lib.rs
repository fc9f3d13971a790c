// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two-node TID RDMA READ simulator (library part, so integration
//! tests can drive scenarios directly).
//!
//! - [`cli`]: the command-line contract (clap), its refusals and exit
//!   codes;
//! - [`fabric`]: the link between the nodes, with seeded faults;
//! - [`rng`]: the one seeded random source;
//! - [`link`]: what a node ships onto its link;
//! - [`soak`]: the seeded scenarios of `--soak`;
//! - [`explain`]: whether the faults on a QP pair explain its retries
//!   (the rule behind a passing `RETRY_EXC_ERR`);
//! - [`scenario`]: one run of the harness's two nodes over the fabric;
//! - [`observe`]: what a run shows while it runs (progress, samples,
//!   every packet after the fault injector);
//! - [`pcap`]: pcapng captures (ERF records, fault comments);
//! - [`series`], [`picture`]: the run over simulated time, and its SVG;
//! - [`progress`]: the progress bar;
//! - [`speed`]: `memcpy` bandwidth and peak RSS, measured in-process;
//! - [`report`]: what a run reports (one serde struct: summary, JSON,
//!   picture).
//!
//! # Example
//!
//! A small run on a hostile fabric, through the library as the binary
//! runs it; its report reads as the summary, and as JSON that reads back:
//!
//! ```
//! use tid_sim::cli::Options;
//! use tid_sim::report::Report;
//! use tid_sim::scenario::{RunFaults, run_observed};
//!
//! let o = Options { qps: 2, bytes: 2 << 20, drop: 0.02, reorder: 4, ..Options::default() };
//! o.check().unwrap(); // what the command line would refuse
//! let r = run_observed(&o, RunFaults::from_options(&o), &mut ());
//! assert!(r.ok(), "{}", r.summary());
//! assert_eq!(r.verified_bytes, 2 << 20);
//! assert!(r.summary().starts_with("tid-sim: PASS"));
//! let back: Report = serde_json::from_str(&r.to_json()).unwrap();
//! assert_eq!(back.inputs, o);
//! ```

pub mod cli;
pub mod explain;
pub mod fabric;
pub mod link;
pub mod observe;
pub mod pcap;
pub mod picture;
pub mod progress;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod series;
pub mod soak;
pub mod speed;
