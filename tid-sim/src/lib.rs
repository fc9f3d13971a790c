// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two-node TID RDMA READ simulator (library part, so integration
//! tests can drive scenarios directly).
//!
//! - [`cli`]: the command-line contract;
//! - [`fabric`]: the link between the nodes, with seeded faults;
//! - [`rng`]: the one seeded random source;
//! - [`pcap`]: capture files of link type ERF;
//! - [`link`]: what a node ships onto its link and into the capture;
//! - [`soak`]: the seeded scenarios of `--soak`;
//! - [`scenario`]: one run of the harness's two nodes over the fabric;
//! - [`report`]: what a run reports.

pub mod cli;
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
