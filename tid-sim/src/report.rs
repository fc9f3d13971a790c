// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a run reports: the counts, the verdict ([`Report::ok`]), one JSON
//! object and a readable summary.

use std::collections::BTreeMap;

/// The results of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Bytes the run was asked to read.
    pub requested_bytes: u64,
    /// Bytes read and found equal to the source.
    pub verified_bytes: u64,
    /// Bytes read that differ from the source.
    pub mismatched_bytes: u64,
    /// READ requests completed successfully.
    pub requests: u64,
    /// READ requests completed in error.
    pub failed_requests: u64,
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
    /// Packets dropped, by reason (the fabric's by packet kind, the
    /// receivers' by check).
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
}

impl Report {
    /// True when every byte was verified and nothing leaked or stuck.
    pub fn ok(&self) -> bool {
        self.mismatched_bytes == 0
            && self.verified_bytes == self.requested_bytes
            && self.failed_requests == 0
            && self.engine_errors == 0
            && self.stuck_qps == 0
            && self.leaked.values().all(|&v| v == 0)
    }

    /// Simulated throughput in bytes per simulated microsecond.
    pub fn sim_bytes_per_us(&self) -> f64 {
        if self.sim_ns == 0 {
            0.0
        } else {
            self.verified_bytes as f64 * 1000.0 / self.sim_ns as f64
        }
    }

    /// Wall-clock throughput in MiB/s.
    pub fn wall_mib_per_s(&self) -> f64 {
        if self.wall_secs <= 0.0 {
            0.0
        } else {
            self.verified_bytes as f64 / (1024.0 * 1024.0) / self.wall_secs
        }
    }

    /// One JSON object.
    pub fn to_json(&self) -> String {
        let obj = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("\"{k}\":{v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            concat!(
                "{{\"ok\":{},\"requested_bytes\":{},\"verified_bytes\":{},",
                "\"mismatched_bytes\":{},\"requests\":{},\"failed_requests\":{},",
                "\"segments\":{},\"tid_waits\":{},\"flow_waits\":{},\"syncs\":{},",
                "\"packets\":{},\"delivered\":{},\"suppressed\":{},\"malformed\":{},",
                "\"naks\":{},\"resp_dropped\":{},\"kdeth_errors\":{},",
                "\"engine_errors\":{},\"stuck_qps\":{},\"steps\":{},\"sim_ns\":{},",
                "\"sim_bytes_per_us\":{:.1},\"wall_secs\":{:.3},",
                "\"wall_mib_per_s\":{:.1},\"retransmits\":{},\"restarts\":{},",
                "\"timeouts\":{},\"stale_dropped\":{},\"duplicated\":{},",
                "\"stale_injected\":{},\"reordered\":{},\"drops\":{{{}}},",
                "\"lock_checks\":{},\"leaked\":{{{}}}}}"
            ),
            self.ok(),
            self.requested_bytes,
            self.verified_bytes,
            self.mismatched_bytes,
            self.requests,
            self.failed_requests,
            self.segments,
            self.tid_waits,
            self.flow_waits,
            self.syncs,
            self.packets,
            self.delivered,
            self.suppressed,
            self.malformed,
            self.naks,
            self.resp_dropped,
            self.kdeth_errors,
            self.engine_errors,
            self.stuck_qps,
            self.steps,
            self.sim_ns,
            self.sim_bytes_per_us(),
            self.wall_secs,
            self.wall_mib_per_s(),
            self.retransmits,
            self.restarts,
            self.timeouts,
            self.stale_dropped,
            self.duplicated,
            self.stale_injected,
            self.reordered,
            obj(&self.drops),
            self.lock_checks,
            obj(&self.leaked)
        )
    }

    /// A readable summary.
    pub fn summary(&self) -> String {
        let leaked: Vec<String> = self
            .leaked
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            concat!(
                "tid-sim: {}\n",
                "  verified   {} of {} bytes ({} mismatched)\n",
                "  requests   {} ok, {} failed; segments {}\n",
                "  waits      {} for TID space, {} for a flow; {} SYNCs\n",
                "  packets    {} sent, {} delivered, {} placed silently by the chip\n",
                "  drops      {} malformed, {} READ_RESP dropped, {} KDETH errors, {} NAKs\n",
                "  throughput {:.1} bytes/simulated us ({:.3} ms simulated), ",
                "{:.1} MiB/s wall clock ({:.3} s)\n",
                "  recovery   {} restarts ({} timeouts), {} READ_REQs resent; ",
                "{} stale dropped\n",
                "  faults     {} duplicated, {} stale injected, {} reordered; drops: {}\n",
                "  left       {}; stuck QPs {}; engine errors {}\n",
                "  locks      {} acquisitions checked for order, no violation\n"
            ),
            if self.ok() { "PASS" } else { "FAIL" },
            self.verified_bytes,
            self.requested_bytes,
            self.mismatched_bytes,
            self.requests,
            self.failed_requests,
            self.segments,
            self.tid_waits,
            self.flow_waits,
            self.syncs,
            self.packets,
            self.delivered,
            self.suppressed,
            self.malformed,
            self.resp_dropped,
            self.kdeth_errors,
            self.naks,
            self.sim_bytes_per_us(),
            self.sim_ns as f64 / 1e6,
            self.wall_mib_per_s(),
            self.wall_secs,
            self.restarts,
            self.timeouts,
            self.retransmits,
            self.stale_dropped,
            self.duplicated,
            self.stale_injected,
            self.reordered,
            self.drops
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
            leaked.join(", "),
            self.stuck_qps,
            self.engine_errors,
            self.lock_checks,
        )
    }
}
