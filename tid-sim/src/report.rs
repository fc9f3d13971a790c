// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a run reports: one [`Report`] (serde) that feeds the verdict
//! ([`Report::ok`]), the text summary ([`Report::summary`]), the JSON
//! ([`Report::to_json`]) and the picture ([`crate::picture`]).
//!
//! The JSON is the struct as it is, plus the verdict and the figures
//! derived from it (throughputs, ratios); it reads back into a `Report`
//! with `serde_json::from_str` (the derived fields are skipped).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::cli::{Options, show_size};
use crate::explain::Explained;
use crate::series::Series;

/// Link rate of the simulated wire, bits per second (100 Gb/s).
pub const LINK_BITS_PER_S: f64 = 100e9;

/// A rate in bytes per second, in GB/s, MB/s or kB/s (powers of 1000).
fn rate(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB/s", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB/s", b / 1e6)
    } else {
        format!("{:.1} kB/s", b / 1e3)
    }
}

/// One requester QP's share of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QpReport {
    /// Requester index (0-based).
    pub qp: u32,
    /// Bytes this QP read and found equal to the source.
    pub verified_bytes: u64,
    /// Bytes that differ.
    pub mismatched_bytes: u64,
    /// READs completed successfully.
    pub requests: u64,
    /// READs completed in error.
    pub failed_requests: u64,
    /// Segments requested.
    pub segments: u64,
    /// Setups that waited for RcvArray space.
    pub tid_waits: u64,
    /// Setups that waited for a hardware flow.
    pub flow_waits: u64,
    /// Restarts of its in-flight segments.
    pub restarts: u64,
    /// Its retry-timer expiries with segments outstanding.
    pub timeouts: u64,
    /// True if it had work left when the run ended.
    pub stuck: bool,
    /// The requester QP's final state (`RTS`, `ERR`, ...).
    pub requester_state: String,
    /// The responder QP's final state.
    pub responder_state: String,
}

/// What the TID RDMA WRITE half of a run counted (both nodes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WriteCounts {
    /// WRITEs posted as TID WRITEs.
    pub tid_writes: u64,
    /// WRITEs posted as plain RDMA WRITEs.
    pub plain_writes: u64,
    /// WRITEs completed successfully.
    pub requests: u64,
    /// Bytes of those found in the responder's pages equal to the source.
    pub verified_bytes: u64,
    /// WRITE_REQs sent, first sends and resends.
    pub write_reqs: u64,
    /// WRITE_RESPs the responder sent.
    pub write_resps: u64,
    /// Segments whose data the requester sent (first time or again).
    pub segments: u64,
    /// Segments acknowledged by TID ACKs.
    pub segments_acked: u64,
    /// WRITE_DATA / WRITE_DATA_LAST packets sent.
    pub data_packets: u64,
    /// WRITE_DATA packets the responder's chip placed without telling
    /// software.
    pub suppressed: u64,
    /// WRITE_DATA packets the responder's chip flagged with a KDETH
    /// error.
    pub kdeth_errors: u64,
    /// TID ACKs the responder sent (TID NAKs included).
    pub tid_acks: u64,
    /// TID NAKs among them.
    pub tid_naks: u64,
    /// RNR NAKs the responder sent (it could not allocate TIDs or a flow).
    pub rnr_naks: u64,
    /// RESYNCs the requester sent.
    pub resyncs: u64,
    /// RESYNCs the responder received.
    pub resyncs_received: u64,
    /// RESYNC ACKs the requester took.
    pub resync_acks: u64,
    /// Reap timer expiries on the responder (a WRITE_RESP's data never
    /// came: the QP errors).
    pub reap_expiries: u64,
    /// TID retry timer expiries.
    pub tid_retry_expiries: u64,
    /// Requester second-leg runs (passed `hfi1_send_tid_ok()`).
    pub second_leg_runs: u64,
    /// Responder second-leg runs (a TID ACK owed).
    pub responder_second_leg_runs: u64,
    /// Packets the responder has no receive path for yet (RESYNC, plain
    /// RDMA WRITE), dropped.
    pub not_received: u64,
}

/// The results of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Report {
    /// The program that wrote it.
    pub tool: String,
    /// Its version.
    pub version: String,
    /// What the run was asked to do.
    pub inputs: Options,
    /// Bytes the run was asked to read.
    pub requested_bytes: u64,
    /// Bytes read and found equal to the source.
    pub verified_bytes: u64,
    /// Bytes of the READs that completed successfully.
    pub succeeded_bytes: u64,
    /// Bytes read that differ from the source.
    pub mismatched_bytes: u64,
    /// READ requests completed successfully.
    pub requests: u64,
    /// READ requests completed in error.
    pub failed_requests: u64,
    /// Completions by work-completion status.
    pub completions: BTreeMap<String, u64>,
    /// Segments set up and requested.
    pub segments: u64,
    /// Setups that waited for RcvArray space.
    pub tid_waits: u64,
    /// Setups that waited for a hardware flow.
    pub flow_waits: u64,
    /// SYNC points passed.
    pub syncs: u64,
    /// Packets handed to the fabric.
    pub packets: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// READ_RESP packets placed by the chip without reaching software.
    pub suppressed: u64,
    /// Packets that did not parse (dropped).
    pub malformed: u64,
    /// NAKs sent by the responder.
    pub naks: u64,
    /// READ_RESPs delivered to software and dropped by the requester.
    pub resp_dropped: u64,
    /// Packets the chip flagged with a KDETH error.
    pub kdeth_errors: u64,
    /// Engine errors (bugs).
    pub engine_errors: u64,
    /// Requester QPs that did not finish.
    pub stuck_qps: u64,
    /// Scheduler steps.
    pub steps: u64,
    /// Simulated time in nanoseconds.
    pub sim_ns: u64,
    /// Wall-clock seconds of the run.
    pub wall_secs: f64,
    /// CPU seconds the run's thread spent (0: not measured; the binary
    /// measures it, the library does not).
    pub cpu_secs: f64,
    /// Resources still held at the end, by name.
    pub leaked: BTreeMap<String, u64>,
    /// READ_REQs sent again after a restart.
    pub retransmits: u64,
    /// Restarts of in-flight segments (timer or NAK).
    pub restarts: u64,
    /// Retry-timer expiries with segments outstanding.
    pub timeouts: u64,
    /// READ_RESPs of a stale generation dropped.
    pub stale_dropped: u64,
    /// Packets dropped, by reason: `fabric_<kind>` by the fault injector,
    /// `requester_*` / `responder_*` by a receiver's check, `malformed`.
    pub drops: BTreeMap<String, u64>,
    /// Duplicates the fabric injected.
    pub duplicated: u64,
    /// Stale copies the fabric injected.
    pub stale_injected: u64,
    /// Deliveries that overtook an earlier packet.
    pub reordered: u64,
    /// Lock acquisitions the runtime lock-order checker saw during the run
    /// (process-wide; a violation panics, so a finished run had none).
    pub lock_checks: u64,
    /// Completions with a status the fabric cannot explain (a local
    /// error, or a remote error without the responder's queue-full
    /// refusal): the engine is wrong.
    pub wrong_statuses: u64,
    /// READs started as plain RDMA READs.
    pub plain_reads: u64,
    /// READs started as TID READs.
    pub tid_reads: u64,
    /// `memcpy` bandwidth measured in the same process after the run,
    /// bytes per second (0: not measured).
    pub memcpy_bytes_per_s: f64,
    /// The buffer size that `memcpy` figure was measured on.
    pub memcpy_buffer_bytes: u64,
    /// Peak resident memory of the process, bytes (0: not measured).
    pub peak_rss_bytes: u64,
    /// Most destination pages holding memory at once.
    pub peak_resident_pages: u64,
    /// The WRITE half of the run (`--ops write` or `mix`).
    pub write: WriteCounts,
    /// Whether the faults on each QP pair that ended `RETRY_EXC_ERR`
    /// explain its retries.
    pub explain: Explained,
    /// Per requester QP.
    pub per_qp: Vec<QpReport>,
    /// The run over simulated time (with `--report` or `--json-series`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Series>,
}

/// What the JSON adds to the struct: the verdict and derived figures.
#[derive(Serialize)]
struct Json<'a> {
    verdict: &'static str,
    ok: bool,
    sim_bytes_per_us: f64,
    link_utilisation: f64,
    wall_bytes_per_s: f64,
    wall_mib_per_s: f64,
    wall_over_memcpy: f64,
    cpu_bytes_per_s: f64,
    #[serde(flatten)]
    report: &'a Report,
}

impl Report {
    /// True when nothing was lost or corrupt, nothing leaked, no QP
    /// stuck and every status is one the fabric explains: every byte of
    /// every READ that succeeded was verified, every READ posted
    /// completed, and a READ failed only as the kernel lets a faulty
    /// fabric fail it (retry exceeded, flushed behind it), a QP ending
    /// retry-exceeded only after retries the faults on its pair explain
    /// ([`crate::explain`]). A fabric that fails is a correct result when it is reported correctly; a fabric
    /// without faults gives no reason to fail, so there every READ must
    /// succeed.
    pub fn ok(&self) -> bool {
        let o = &self.inputs;
        let faulty = o.drop > 0.0 || o.dup > 0.0 || o.stale > 0.0 || o.reorder > 1;
        (faulty || self.failed_requests == 0)
            && self.mismatched_bytes == 0
            && self.verified_bytes == self.succeeded_bytes
            && self.engine_errors == 0
            && self.stuck_qps == 0
            && self.wrong_statuses == 0
            && self.explain.ok()
            && self.leaked.values().all(|&v| v == 0)
    }

    /// True if every READ succeeded (and [`Self::ok`]).
    pub fn all_succeeded(&self) -> bool {
        self.ok() && self.failed_requests == 0 && self.verified_bytes == self.requested_bytes
    }

    /// Simulated throughput in bytes per simulated microsecond.
    pub fn sim_bytes_per_us(&self) -> f64 {
        if self.sim_ns == 0 {
            0.0
        } else {
            self.verified_bytes as f64 * 1000.0 / self.sim_ns as f64
        }
    }

    /// Verified bytes per simulated second as a fraction of the link rate.
    pub fn link_utilisation(&self) -> f64 {
        self.sim_bytes_per_us() * 1e6 * 8.0 / LINK_BITS_PER_S
    }

    /// Verified bytes per wall-clock second.
    pub fn wall_bytes_per_s(&self) -> f64 {
        if self.wall_secs <= 0.0 {
            0.0
        } else {
            self.verified_bytes as f64 / self.wall_secs
        }
    }

    /// Verified bytes per CPU second of the run's thread (0 when not
    /// measured): the rate with the other processes' share of the CPU
    /// taken out.
    pub fn cpu_bytes_per_s(&self) -> f64 {
        if self.cpu_secs <= 0.0 {
            0.0
        } else {
            self.verified_bytes as f64 / self.cpu_secs
        }
    }

    /// Wall-clock throughput in MiB/s.
    pub fn wall_mib_per_s(&self) -> f64 {
        self.wall_bytes_per_s() / (1024.0 * 1024.0)
    }

    /// [`Report::wall_bytes_per_s`] over the measured `memcpy` bandwidth
    /// (0 when that was not measured).
    pub fn wall_over_memcpy(&self) -> f64 {
        if self.memcpy_bytes_per_s <= 0.0 {
            0.0
        } else {
            self.wall_bytes_per_s() / self.memcpy_bytes_per_s
        }
    }

    /// One JSON object: the struct, its verdict and derived figures.
    pub fn to_json(&self) -> String {
        let j = Json {
            verdict: if self.ok() { "PASS" } else { "FAIL" },
            ok: self.ok(),
            sim_bytes_per_us: self.sim_bytes_per_us(),
            link_utilisation: self.link_utilisation(),
            wall_bytes_per_s: self.wall_bytes_per_s(),
            wall_mib_per_s: self.wall_mib_per_s(),
            wall_over_memcpy: self.wall_over_memcpy(),
            cpu_bytes_per_s: self.cpu_bytes_per_s(),
            report: self,
        };
        serde_json::to_string(&j).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The inputs on one line, as a command line would give them.
    pub fn inputs_line(&self) -> String {
        let o = &self.inputs;
        let mut s = format!(
            "--qps {} --bytes {} --request {} --groups {} --mtu {} --seed {}",
            o.qps,
            show_size(o.bytes),
            show_size(o.request),
            o.groups,
            o.mtu,
            o.seed
        );
        if let Some(g) = o.resp_groups {
            let _ = write!(s, " --resp-groups {g}");
        }
        for (name, p) in [("drop", o.drop), ("dup", o.dup), ("stale", o.stale)] {
            if p > 0.0 {
                let _ = write!(s, " --{name} {p}");
            }
        }
        if o.reorder > 1 {
            let _ = write!(s, " --reorder {}", o.reorder);
        }
        if o.ops != crate::cli::Ops::Read {
            let _ = write!(s, " --ops {}", o.ops.name());
        }
        if let Some(r) = &o.read_sizes {
            let sizes: Vec<String> = r.0.iter().map(|&r| show_size(r)).collect();
            let _ = write!(s, " --read-sizes {}", sizes.join(","));
        }
        s
    }

    /// `k=v` pairs of the non-zero entries, or `none`.
    fn nonzero(m: &BTreeMap<String, u64>, prefix: &str) -> String {
        let v: Vec<String> = m
            .iter()
            .filter(|(k, v)| **v > 0 && k.starts_with(prefix))
            .map(|(k, v)| format!("{}={v}", k.trim_start_matches(prefix)))
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }

    /// A readable summary (the README explains every line).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let verdict = if self.ok() { "PASS" } else { "FAIL" };
        let _ = writeln!(s, "tid-sim: {verdict}  ({})", self.inputs_line());
        self.outcome_lines(&mut s);
        self.write_lines(&mut s);
        self.traffic_lines(&mut s);
        self.recovery_lines(&mut s);
        self.speed_line(&mut s);
        self.held_lines(&mut s);
        s
    }

    /// The `verified`, `requests` and `reads` lines: what was checked and
    /// how the requests ended.
    fn outcome_lines(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "  verified   {} of {} bytes, {} differ",
            self.verified_bytes, self.requested_bytes, self.mismatched_bytes
        );
        let _ = writeln!(
            s,
            "  requests   {} ok, {} in error; {} segments",
            self.requests, self.failed_requests, self.segments
        );
        let in_error = self
            .per_qp
            .iter()
            .filter(|q| q.requester_state == "ERR")
            .count();
        let _ = writeln!(
            s,
            "  reads      {} plain, {} TID; completions: {}; {} wrong statuses; \
             {in_error} requester QPs in error",
            self.plain_reads,
            self.tid_reads,
            Self::nonzero(&self.completions, ""),
            self.wrong_statuses
        );
    }

    /// The `waits`, `packets`, `faults` and `discarded` lines: what the
    /// engines waited for and what the fabric carried, injected and lost.
    fn traffic_lines(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "  waits      {} for TID space, {} for a hardware flow; {} SYNC points",
            self.tid_waits, self.flow_waits, self.syncs
        );
        let _ = writeln!(
            s,
            "  packets    {} sent, {} delivered, {} of them READ_RESPs the chip placed \
             without telling software",
            self.packets, self.delivered, self.suppressed
        );
        let injected = self.duplicated + self.stale_injected + self.reordered;
        let fabric = Self::nonzero(&self.drops, "fabric_");
        if injected == 0 && fabric == "none" {
            let _ = writeln!(s, "  faults     none injected");
        } else {
            let _ = writeln!(
                s,
                "  faults     dropped: {fabric}; {} duplicated, {} stale copies, {} reordered",
                self.duplicated, self.stale_injected, self.reordered
            );
        }
        let _ = writeln!(
            s,
            "  discarded  by the requester: {}; by the responder: {}; {} malformed; \
             {} KDETH errors",
            Self::nonzero(&self.drops, "requester_"),
            Self::nonzero(&self.drops, "responder_"),
            self.malformed,
            self.kdeth_errors
        );
    }

    /// The `recovery`, `explained` and `link` lines: how the QPs recovered,
    /// whether the faults explain it, and the simulated throughput.
    fn recovery_lines(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "  recovery   {} restarts ({} by timeout), {} READ_REQs resent, {} NAKs",
            self.restarts, self.timeouts, self.retransmits, self.naks
        );
        let _ = writeln!(s, "  explained  {}", self.explain.line());
        let _ = writeln!(
            s,
            "  link       {:.1} bytes per simulated us = {:.1}% of 100 Gb/s ({:.3} ms simulated)",
            self.sim_bytes_per_us(),
            100.0 * self.link_utilisation(),
            self.sim_ns as f64 / 1e6
        );
    }

    /// The `left held` and `locks` lines: what the run leaked, left stuck
    /// or got wrong, and the lock-order checks.
    fn held_lines(&self, s: &mut String) {
        let held = Self::nonzero(&self.leaked, "");
        let _ = writeln!(
            s,
            "  left held  {}; {} stuck QPs; {} engine errors",
            if held == "none" { "nothing" } else { &held },
            self.stuck_qps,
            self.engine_errors
        );
        let _ = writeln!(
            s,
            "  locks      {} acquisitions checked for order, no violation",
            self.lock_checks
        );
    }

    /// The WRITE lines of the summary, when the run wrote.
    fn write_lines(&self, s: &mut String) {
        let w = &self.write;
        if !self.inputs.ops.writes() && w.tid_writes + w.plain_writes == 0 {
            return;
        }
        let _ = writeln!(
            s,
            "  writes     {} TID, {} plain; {} ok, {} bytes checked in the responder's pages; \
             {} WRITE_REQs, {} WRITE_RESPs, {} segments sent ({} acked), {} data packets \
             ({} placed without software, {} KDETH errors)",
            w.tid_writes,
            w.plain_writes,
            w.requests,
            w.verified_bytes,
            w.write_reqs,
            w.write_resps,
            w.segments,
            w.segments_acked,
            w.data_packets,
            w.suppressed,
            w.kdeth_errors
        );
        let _ = writeln!(
            s,
            "  write recv {} TID ACKs ({} NAKs), {} RNR NAKs, {} RESYNCs ({} received, {} acked), \
             {} TID retry and {} reap expiries; second legs {} requester, {} responder runs; \
             {} packets without a receive path",
            w.tid_acks,
            w.tid_naks,
            w.rnr_naks,
            w.resyncs,
            w.resyncs_received,
            w.resync_acks,
            w.tid_retry_expiries,
            w.reap_expiries,
            w.second_leg_runs,
            w.responder_second_leg_runs,
            w.not_received
        );
    }

    fn speed_line(&self, s: &mut String) {
        let _ = write!(
            s,
            "  wall       {} verified ({:.3} s",
            rate(self.wall_bytes_per_s()),
            self.wall_secs
        );
        if self.cpu_secs > 0.0 {
            let _ = write!(
                s,
                "; {:.3} s on the CPU: {}",
                self.cpu_secs,
                rate(self.cpu_bytes_per_s())
            );
        }
        s.push(')');
        if self.memcpy_bytes_per_s > 0.0 {
            let _ = write!(
                s,
                "; memcpy {} on {}: {:.3} of it",
                rate(self.memcpy_bytes_per_s),
                show_size(self.memcpy_buffer_bytes),
                self.wall_over_memcpy()
            );
        }
        if self.peak_rss_bytes > 0 {
            let _ = write!(
                s,
                "; peak RSS {} MiB",
                self.peak_rss_bytes.div_ceil(1 << 20)
            );
        }
        s.push('\n');
    }
}
