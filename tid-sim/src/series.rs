// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The run over simulated time: what `--report` draws and
//! `--json-series` adds to the JSON.
//!
//! A [`Sample`] is read from the real state (the receive context's
//! RcvArray, flows and wait queues under its locks, the requesters'
//! counters) every [`Series::interval_ns`] of simulated time. Counters are
//! cumulative, so the restarts, NAKs and timeouts between two samples are
//! their difference; the bytes the responder-to-requester link carried
//! between two samples, over the time between them, are its throughput.
//! At most [`MAX_SAMPLES`] are kept: when full, every other sample goes
//! and the interval doubles, so a long run keeps its whole span.

use serde::{Deserialize, Serialize};

/// Samples kept at most.
pub const MAX_SAMPLES: usize = 2048;
/// The first sampling interval, simulated nanoseconds.
pub const FIRST_INTERVAL_NS: u64 = 1_000;

/// The state at one moment of simulated time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Simulated time, nanoseconds.
    pub t_ns: u64,
    /// TID (RcvArray) entries in use, per receive context.
    pub tid_entries: Vec<u32>,
    /// Hardware flows in use (of the one requester context).
    pub flows: u32,
    /// QPs waiting on the context's flow queue.
    pub wait_flow: u32,
    /// QPs waiting on the context's RcvArray (TID space) queue.
    pub wait_tid: u32,
    /// Bytes the responder-to-requester link carried so far.
    pub wire_bytes_to_requester: u64,
    /// Bytes verified so far.
    pub verified_bytes: u64,
    /// Restarts of in-flight segments so far.
    pub restarts: u64,
    /// NAKs the requesters received so far.
    pub naks: u64,
    /// Retry-timer expiries so far.
    pub timeouts: u64,
}

/// A run's samples and what their values are out of.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The interval between samples now, simulated nanoseconds.
    pub interval_ns: u64,
    /// RcvArray entries of each receive context.
    pub tid_capacity: Vec<u32>,
    /// Hardware flows of a context.
    pub flow_capacity: u32,
    /// Requester QPs (the most that can wait).
    pub qps: u32,
    /// The samples, oldest first.
    pub samples: Vec<Sample>,
}

impl Series {
    /// An empty series for contexts of `tid_capacity` entries.
    pub fn new(tid_capacity: Vec<u32>, flow_capacity: u32, qps: u32) -> Self {
        Self {
            interval_ns: FIRST_INTERVAL_NS,
            tid_capacity,
            flow_capacity,
            qps,
            samples: Vec::new(),
        }
    }

    /// When the next sample is due.
    pub fn next_due_ns(&self) -> u64 {
        self.samples
            .last()
            .map_or(0, |s| s.t_ns.saturating_add(self.interval_ns))
    }

    /// Adds a sample; past [`MAX_SAMPLES`], halves the samples kept (the
    /// first and then every other one) and doubles the interval.
    pub fn push(&mut self, s: Sample) {
        self.samples.push(s);
        if self.samples.len() > MAX_SAMPLES {
            let mut i = 0;
            self.samples.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.interval_ns *= 2;
        }
    }

    /// Throughput on the responder-to-requester link between each sample
    /// and the one before, in bits per second, at the later sample's time.
    pub fn throughput_bps(&self) -> Vec<(u64, f64)> {
        self.samples
            .windows(2)
            .filter_map(|w| match w {
                [a, b] if b.t_ns > a.t_ns => {
                    let bytes = b.wire_bytes_to_requester - a.wire_bytes_to_requester;
                    Some((b.t_ns, bytes as f64 * 8.0 * 1e9 / (b.t_ns - a.t_ns) as f64))
                }
                _ => None,
            })
            .collect()
    }

    /// The moments where a counter rose, with how much: `counter` picks
    /// it from a sample.
    pub fn marks(&self, counter: impl Fn(&Sample) -> u64) -> Vec<(u64, u64)> {
        self.samples
            .windows(2)
            .filter_map(|w| match w {
                [a, b] if counter(b) > counter(a) => Some((b.t_ns, counter(b) - counter(a))),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_series_halves_and_keeps_its_span() {
        let mut s = Series::new(vec![96], 32, 4);
        let mut t = 0;
        while s.samples.len() < MAX_SAMPLES || s.interval_ns == FIRST_INTERVAL_NS {
            assert!(s.next_due_ns() <= t);
            s.push(Sample {
                t_ns: t,
                restarts: t / 10_000,
                wire_bytes_to_requester: t * 12,
                ..Sample::default()
            });
            t += s.interval_ns;
        }
        assert_eq!(s.interval_ns, 2 * FIRST_INTERVAL_NS);
        assert_eq!(s.samples[0].t_ns, 0);
        assert!(s.samples.len() <= MAX_SAMPLES);
        // 12 bytes per ns is 96 Gb/s wherever it is read.
        for (_, bps) in s.throughput_bps() {
            assert!((bps - 96e9).abs() < 1.0, "{bps}");
        }
        let marks = s.marks(|x| x.restarts);
        assert_eq!(
            marks.iter().map(|m| m.1).sum::<u64>(),
            s.samples.last().unwrap().restarts
        );
    }
}
