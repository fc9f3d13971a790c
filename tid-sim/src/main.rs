// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two-node TID RDMA READ simulator: the project's main job.
//!
//! Not built yet: it arrives with the READ issue. Until then it says so and
//! exits with a failure, so nobody mistakes it for a passing run.

fn main() -> std::process::ExitCode {
    eprintln!("tid-sim: the simulator is not built yet (see the READ issue)");
    std::process::ExitCode::FAILURE
}
