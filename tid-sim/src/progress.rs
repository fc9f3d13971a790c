// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The progress bar (`indicatif`), on stderr and only when stderr is a
//! terminal and `--quiet` is not given: bytes verified of the run's
//! total, QPs done, restarts so far and the time left; for `--soak`,
//! seeds done and failures.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressDrawTarget, ProgressStyle};

use crate::observe::Progress;

/// A progress bar on stderr.
#[derive(Debug, Clone)]
pub struct ProgressBar(indicatif::ProgressBar);

/// True when a bar should be drawn: stderr is a terminal and the user did
/// not ask for quiet.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl ProgressBar {
    /// A bar on stderr over `total`, drawn with `template`, redrawn five
    /// times a second.
    fn new(total: u64, template: &str) -> Self {
        let b = indicatif::ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        b.set_style(style(template));
        b.enable_steady_tick(Duration::from_millis(200));
        Self(b)
    }

    /// A bar over `total` bytes of one run.
    pub fn run(total: u64) -> Self {
        Self::new(
            total,
            "{spinner} [{bar:30}] {bytes}/{total_bytes} verified, {msg}, ETA {eta}",
        )
    }

    /// A bar over `seeds` soak seeds.
    pub fn soak(seeds: u64) -> Self {
        Self::new(
            seeds,
            "{spinner} [{bar:30}] seed {pos}/{len}, {msg}, ETA {eta}",
        )
    }

    /// Shows where a run stands.
    pub fn update(&self, p: &Progress) {
        self.0.set_position(p.verified_bytes);
        self.0.set_message(format!(
            "{}/{} QPs done, {} restarts",
            p.qps_done, p.qps, p.restarts
        ));
    }

    /// Shows where a soak stands.
    pub fn soak_update(&self, done: u64, failures: u64, bytes: u64) {
        self.0.set_position(done);
        self.0.set_message(format!(
            "{failures} failed, {:.1} GiB verified",
            bytes as f64 / f64::from(1u32 << 30)
        ));
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
