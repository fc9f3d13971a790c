// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a run tells whoever watches it while it runs: progress, samples
//! of its state over simulated time, and every packet the fabric carried
//! (after the fault injector, with what it did).
//!
//! [`crate::scenario::run_observed`] calls an [`Observer`]; `()` watches
//! nothing. The binary's observer ([`Taps`]) feeds the progress bar, the
//! capture file and the series the picture is drawn from.

use std::io::Write;

use crate::fabric::Origin;
use crate::pcap::PcapWriter;
use crate::progress::ProgressBar;
use crate::series::{Sample, Series};

/// Where a run stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes verified so far.
    pub verified_bytes: u64,
    /// Bytes the run reads in all.
    pub requested_bytes: u64,
    /// READs completed (either way).
    pub requests_done: u64,
    /// Requester QPs with nothing left to do.
    pub qps_done: u32,
    /// Requester QPs.
    pub qps: u32,
    /// Restarts so far.
    pub restarts: u64,
    /// Simulated nanoseconds so far.
    pub sim_ns: u64,
}

/// What became of a packet the fabric carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// It reached the other node: which copy, and how many earlier
    /// packets it overtook.
    Delivered {
        /// Which copy.
        origin: Origin,
        /// Earlier packets overtaken (0: in order).
        overtook: usize,
    },
    /// The fault injector dropped it.
    Dropped,
}

impl Fate {
    /// The capture comment for it: `None` for a packet delivered as sent,
    /// in order.
    pub fn comment(self) -> Option<String> {
        match self {
            Fate::Dropped => Some("fault injector: dropped (never delivered)".into()),
            Fate::Delivered { origin, overtook } => {
                let what = match origin {
                    Origin::Sent => None,
                    Origin::Duplicate => Some("duplicate (second delivery)"),
                    Origin::Stale => Some("stale copy of an earlier packet"),
                };
                match (what, overtook) {
                    (None, 0) => None,
                    (Some(w), 0) => Some(format!("fault injector: {w}")),
                    (None, n) => Some(format!("fault injector: reordered, overtook {n}")),
                    (Some(w), n) => Some(format!("fault injector: {w}; reordered, overtook {n}")),
                }
            }
        }
    }
}

/// One packet the fabric carried.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// Wire time: when its first byte went on the wire (delivered), or
    /// when it was handed to the fabric (dropped).
    pub time_ns: u64,
    /// The link: 0 requester to responder, 1 back.
    pub link: u8,
    /// LRH through ICRC.
    pub bytes: &'a [u8],
    /// What became of it.
    pub fate: Fate,
}

/// Watches a run. Every method has a default that does nothing.
pub trait Observer {
    /// Called now and then (every few thousand scheduler steps) and once
    /// at the end.
    fn progress(&mut self, _p: &Progress) {}
    /// When the next sample is due (simulated ns), `None` for no samples.
    fn sample_due_ns(&self) -> Option<u64> {
        None
    }
    /// A sample, when it was due.
    fn sample(&mut self, _s: Sample) {}
    /// True if [`Observer::packet`] wants packets.
    fn wants_packets(&self) -> bool {
        false
    }
    /// Every packet the fabric carried.
    fn packet(&mut self, _p: &Seen<'_>) {}
}

impl Observer for () {}

/// The binary's observer: any of a capture, a series and a progress bar.
pub struct Taps<'a, W: Write> {
    /// The capture file.
    pub pcap: Option<&'a mut PcapWriter<W>>,
    /// Capture write errors.
    pub pcap_errors: u64,
    /// The series being recorded.
    pub series: Option<Series>,
    /// The progress bar.
    pub bar: Option<ProgressBar>,
}

impl<W: Write> Taps<'_, W> {
    /// Nothing watched.
    pub fn none() -> Self {
        Self {
            pcap: None,
            pcap_errors: 0,
            series: None,
            bar: None,
        }
    }
}

impl<W: Write> Observer for Taps<'_, W> {
    fn progress(&mut self, p: &Progress) {
        if let Some(b) = &self.bar {
            b.update(p);
        }
    }

    fn sample_due_ns(&self) -> Option<u64> {
        self.series.as_ref().map(Series::next_due_ns)
    }

    fn sample(&mut self, s: Sample) {
        if let Some(series) = &mut self.series {
            series.push(s);
        }
    }

    fn wants_packets(&self) -> bool {
        self.pcap.is_some()
    }

    fn packet(&mut self, p: &Seen<'_>) {
        if let Some(w) = self.pcap.as_deref_mut() {
            let c = p.fate.comment();
            if w.packet(p.time_ns, p.link, p.bytes, c.as_deref()).is_err() {
                self.pcap_errors += 1;
            }
        }
    }
}
