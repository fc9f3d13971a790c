// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! One simulated run: a requester node and a responder node, a fabric
//! between them, one seeded scheduler, and a byte-for-byte check of
//! everything read.
//!
//! - **Requester node**: one receive context (the software chip with
//!   `--groups` TID groups, its flows and wait queues) and `--qps` QPs.
//!   Each QP reads its share of `--bytes` in `--request`-sized RDMA READs
//!   into destination buffers made of deliberately fragmented physical
//!   pages (seeded mix of contiguous runs and scattered pages), kept in a
//!   sparse [`SimMemory`]. READ_RESP payloads are placed by the chip
//!   ([`hfi1_hal::sim::SimContext::receive_expected`]) through RcvArray
//!   entry, TID entry and OFFSET, with generation and sequence checks and
//!   header suppression; software sees a segment's last packet only.
//! - **Responder node**: the peer QPs, a tiny memory-region table (one
//!   region and R_Key per QP) and source data that is a pure function of
//!   the address, so every byte read can be checked.
//! - **Scheduler**: at each step one of the ready actions is drawn with
//!   the seeded [`Rng`]: a requester QP's send engine, a trigger work item
//!   (a wake-up), a responder QP's send engine, or one delivery on either
//!   link.
//!
//! Simulated time advances with each packet delivered (a 100 Gb/s wire),
//! for pcap timestamps and the simulated throughput.
//!
//! Faults (`--drop`, `--dup`, `--reorder`, `--stale`) act on both links
//! ([`crate::fabric`]). The requester's retry timer runs on simulated
//! time: a QP with segments outstanding that has neither sent nor received
//! for `RETRY_NS` restarts them; when nothing else can happen, simulated
//! time jumps to the next expiry. A run ends when nothing is left to do;
//! QPs with work left are reported stuck.
//!
//! At the end the resources still held are read from the real state (TID
//! entries in use, flows reserved, QP references above the baseline, live
//! DMA mappings, flow records allocated, MR references, QPs still queued)
//! and reported as leaks; then every QP is flushed.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::time::Instant;

use hfi1_hal::consts::{PAGE_SIZE, TID_RDMA_JKEY};
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::sim::SimMemory;
use hfi1_hal::{FlowPsn, Psn};
use tid_flow::{RcvCtxt, Sge};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, MAX_PACKET, Parsed, Path};
use tid_read_proto::rc::{Connection, MAX_RD_ATOMIC, MrTable, PacketSink, SourceData, WcStatus};
use tid_read_proto::requester::{self, ReadWr};
use tid_read_proto::responder;
use tid_read_proto::sim::{EnginePlatform, EngineQp, new_ctxt, new_qp};
use tid_read_proto::sim_chip;

use crate::cli::Options;
use crate::fabric::{Faults, Link, Packet, PacketKind};
use crate::pcap::PcapWriter;
use crate::rng::Rng;

/// Requester node's receive context number.
const REQ_CTXT: u8 = 1;
/// Responder node's receive context number.
const RESP_CTXT: u8 = 2;
/// LIDs.
const REQ_LID: u16 = 1;
const RESP_LID: u16 = 2;
/// First verbs QP numbers.
const REQ_QPN_BASE: u32 = 0x100;
const RESP_QPN_BASE: u32 = 0x400;
/// First IB PSN of every connection.
const FIRST_PSN: u32 = 0x10;
/// READ_RESP packets a responder send-engine run builds before yielding.
const RESP_BUDGET: u32 = 8;
/// Scheduler steps without a completion before a run is declared stuck.
const STUCK_STEPS: u64 = 2_000_000;
/// Scheduler steps after which a run is cut short (a default run takes
/// about 20 000).
const MAX_STEPS: u64 = 20_000_000;
/// Send-engine requests or packets in flight beyond which a run is cut
/// short.
const MAX_QUEUED: usize = 100_000;
/// The requester's retry timeout in simulated nanoseconds (a segment
/// waits at most `LINK_CREDITS` packets, about 85 us, behind others).
const RETRY_NS: f64 = 1_000_000.0;
/// Packets a link holds before its sender must wait (flow control).
const LINK_CREDITS: usize = 256;
/// Timer expiries on an idle system without a completion before the run
/// is declared stuck.
const MAX_IDLE_FIRES: u32 = 50;
/// Wire speed for simulated time: bytes per nanosecond (100 Gb/s).
const WIRE_BYTES_PER_NS: f64 = 12.5;

/// A packet on the fabric.
#[derive(Debug, Clone)]
pub struct WirePacket {
    /// The bytes, LRH through ICRC.
    pub bytes: Vec<u8>,
    kind: PacketKind,
}

impl Packet for WirePacket {
    fn kind(&self) -> PacketKind {
        self.kind
    }
}

/// The kind of a built packet, for fault injection.
fn kind_of(bytes: &[u8]) -> PacketKind {
    match packet::parse(bytes) {
        Ok((_, Parsed::ReadReq { .. })) => PacketKind::ReadReq,
        Ok((_, Parsed::ReadResp { hdr, .. })) => {
            if hdr.kdeth.kdeth0.raw() & (1 << 29) != 0 {
                PacketKind::ReadRespMiddle
            } else {
                PacketKind::ReadRespLast
            }
        }
        Ok((_, Parsed::Ack { .. })) => PacketKind::Ack,
        Err(_) => PacketKind::Other,
    }
}

/// Collects what an engine sends.
struct Outbox {
    buf: Vec<u8>,
    out: Vec<Vec<u8>>,
}

impl Outbox {
    fn new() -> Self {
        Self {
            buf: vec![0; MAX_PACKET],
            out: Vec::new(),
        }
    }
}

impl PacketSink for Outbox {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn send(&mut self, len: usize) {
        self.out.push(self.buf[..len.min(self.buf.len())].to_vec());
    }
}

/// The byte at remote address `addr`: a hash of the address (which holds
/// the QP in its high bits), so every byte is checkable.
pub fn pattern_word(addr8: u64) -> u64 {
    let mut z = addr8.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `out` with the source pattern starting at `addr`.
pub fn fill_pattern(addr: u64, out: &mut [u8]) {
    let mut a = addr;
    let mut rest = out;
    // Unaligned head, byte by byte; then whole words.
    while a & 7 != 0 {
        let Some((b, tail)) = rest.split_first_mut() else {
            return;
        };
        *b = pattern_word(a >> 3).to_le_bytes()[(a & 7) as usize];
        rest = tail;
        a += 1;
    }
    let mut chunks = rest.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&pattern_word(a >> 3).to_le_bytes());
        a += 8;
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b = pattern_word(a >> 3).to_le_bytes()[i];
    }
}

/// One memory region of the responder.
#[derive(Debug, Clone)]
struct Mr {
    base: u64,
    len: u64,
    rkey: u32,
    refs: std::cell::Cell<i64>,
}

/// The responder's memory regions and their reference counts.
#[derive(Debug, Default)]
struct Mrs {
    regions: Vec<Mr>,
}

impl MrTable for Mrs {
    fn get(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        let (i, mr) = self
            .regions
            .iter()
            .enumerate()
            .find(|(_, m)| m.rkey == rkey)?;
        let end = vaddr.checked_add(u64::from(len))?;
        if vaddr < mr.base || end > mr.base + mr.len {
            return None;
        }
        mr.refs.set(mr.refs.get() + 1);
        u32::try_from(i).ok()
    }

    fn put(&self, mr: u32) {
        if let Some(m) = self.regions.get(mr as usize) {
            m.refs.set(m.refs.get() - 1);
        }
    }
}

impl SourceData for Mrs {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        let end = vaddr.saturating_add(out.len() as u64);
        if !self
            .regions
            .iter()
            .any(|m| vaddr >= m.base && end <= m.base + m.len)
        {
            return false;
        }
        fill_pattern(vaddr, out);
        true
    }
}

/// One request a requester QP has posted.
#[derive(Debug, Clone)]
struct Posted {
    remote_addr: u64,
    sges: Vec<Sge>,
}

/// Per requester QP bookkeeping of the driver program.
#[derive(Debug, Default)]
struct QpWork {
    /// Request sizes still to post.
    to_post: VecDeque<u32>,
    /// Remote address of the next request.
    next_remote: u64,
    /// Posted and not completed, by wr_id.
    posted: HashMap<u64, Posted>,
    next_wr: u64,
}

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

/// Hands out fragmented destination pages: a seeded mix of contiguous
/// runs (2..=64 pages) and single scattered pages, never adjacent to the
/// previous run, sometimes handed out in descending address order.
struct PageAllocator {
    next_pfn: u64,
}

impl PageAllocator {
    fn new() -> Self {
        Self { next_pfn: 0x1000 }
    }

    /// Page-aligned SGEs covering `bytes`.
    fn buffer(&mut self, rng: &mut Rng, bytes: u32) -> Vec<Sge> {
        let mut left = u64::from(bytes.div_ceil(PAGE_SIZE));
        let mut runs = Vec::new();
        while left > 0 {
            let len = if rng.chance(0.4) {
                1
            } else {
                (2 + rng.below(63)).min(left)
            }
            .min(left);
            let start = self.next_pfn + 1 + rng.below(7);
            self.next_pfn = start + len;
            runs.push((start, len));
            left -= len;
        }
        if rng.chance(0.3) {
            runs.reverse();
        }
        runs.into_iter()
            .map(|(pfn, len)| Sge {
                vaddr: pfn << 12,
                length: (len as u32) * PAGE_SIZE,
            })
            .collect()
    }
}

/// Where the run reads: one per requester QP.
struct Pair {
    req: EngineQp,
    resp: EngineQp,
}

/// A run's faults (none in the default scenario).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunFaults {
    /// Faults of the requester→responder link.
    pub to_responder: Faults,
    /// Faults of the responder→requester link.
    pub to_requester: Faults,
}

impl RunFaults {
    /// The same faults on both links, from the command line.
    pub fn from_options(o: &Options) -> Self {
        let f = Faults {
            drop: Faults::drop_all(o.drop),
            dup: o.dup,
            reorder: o.reorder,
            stale: o.stale,
        };
        Self {
            to_responder: f,
            to_requester: f,
        }
    }
}

/// Runs one scenario. `pcap` receives every packet handed to the fabric.
pub fn run(
    opts: &Options,
    faults: RunFaults,
    mut pcap: Option<&mut PcapWriter<impl Write>>,
) -> Report {
    let wall = Instant::now();
    let checks_before = hfi1_hal::sim::lockdep::acquisitions();
    let mut rep = Report::default();
    let mut rng = Rng::new(opts.seed);
    let nqps = opts.qps;
    let per_qp = (opts.bytes.div_ceil(u64::from(nqps))).div_ceil(u64::from(PAGE_SIZE))
        * u64::from(PAGE_SIZE);
    rep.requested_bytes = per_qp * u64::from(nqps);

    let req_rcd = match new_ctxt(
        u32::from(REQ_CTXT),
        0,
        opts.groups as usize,
        nqps,
        opts.seed ^ 0xA5A5,
    ) {
        Ok(r) => r,
        Err(_) => {
            rep.engine_errors += 1;
            return rep;
        }
    };
    let resp_rcd = match new_ctxt(u32::from(RESP_CTXT), 0, 1, nqps, opts.seed ^ 0x5A5A) {
        Ok(r) => r,
        Err(_) => {
            rep.engine_errors += 1;
            return rep;
        }
    };
    let req_params = TidParams::local(REQ_CTXT, TID_RDMA_JKEY, 14, false);
    let resp_params = TidParams::local(RESP_CTXT, TID_RDMA_JKEY, 14, false);
    let mut mrs = Mrs::default();
    let mut pairs = Vec::new();
    let mut work: Vec<QpWork> = Vec::new();
    let mut by_req_qpn = HashMap::new();
    let mut by_resp_qpn = HashMap::new();
    for i in 0..nqps {
        let rq = REQ_QPN_BASE + i;
        let sq = RESP_QPN_BASE + i;
        let req_conn = Connection {
            verbs_qpn: rq,
            remote_verbs_qpn: sq,
            local: req_params,
            remote: resp_params,
            pmtu: opts.mtu,
            path: Path {
                dlid: RESP_LID,
                slid: REQ_LID,
            },
            max_rd_atomic: MAX_RD_ATOMIC,
            remote_read: false,
        };
        let resp_conn = Connection {
            verbs_qpn: sq,
            remote_verbs_qpn: rq,
            local: resp_params,
            remote: req_params,
            pmtu: opts.mtu,
            path: Path {
                dlid: REQ_LID,
                slid: RESP_LID,
            },
            max_rd_atomic: MAX_RD_ATOMIC,
            remote_read: true,
        };
        let base = (u64::from(i) + 1) << 40;
        mrs.regions.push(Mr {
            base,
            len: per_qp,
            rkey: 0x5000 + i,
            refs: std::cell::Cell::new(0),
        });
        let mut w = QpWork {
            next_remote: base,
            ..QpWork::default()
        };
        let mut left = per_qp;
        while left > 0 {
            let n = left.min(opts.request);
            w.to_post.push_back(n as u32);
            left -= n;
        }
        work.push(w);
        pairs.push(Pair {
            req: new_qp(rq, i, i % 4, req_conn, Psn::new(FIRST_PSN)),
            resp: new_qp(sq, i, i % 4, resp_conn, Psn::new(FIRST_PSN)),
        });
        by_req_qpn.insert(rq, i as usize);
        by_resp_qpn.insert(sq, i as usize);
    }

    let mut mem = SimMemory::new();
    let mut pages = PageAllocator::new();
    let mut ab: Link<WirePacket> = Link::new(faults.to_responder);
    let mut ba: Link<WirePacket> = Link::new(faults.to_requester);
    let mut outbox = Outbox::new();
    let mut resp_ready: VecDeque<usize> = VecDeque::new();
    let mut resp_queued = vec![false; nqps as usize];
    let mut root = LockToken::<Unlocked>::root();
    let mut erf_buf = vec![0u8; MAX_PACKET + 64];

    // Post what fits.
    for (i, p) in pairs.iter().enumerate() {
        post_more(
            &req_rcd,
            &p.req,
            &mut work[i],
            &mut rng,
            &mut pages,
            &mut mem,
            &mut root,
            &mut rep,
        );
    }

    let mut since_progress = 0u64;
    let mut sim_ns_f = 0f64;
    let mut last_progress = vec![0f64; nqps as usize];
    let mut idle_fires = 0u32;
    #[derive(Clone, Copy)]
    enum Act {
        Work,
        ReqSend,
        RespSend,
        ToResponder,
        ToRequester,
    }
    let mut acts = Vec::with_capacity(5);
    loop {
        acts.clear();
        if req_rcd.sched.pending_work() > 0 {
            acts.push(Act::Work);
        }
        if req_rcd.sched.pending_sends() > 0 && ab.len() < LINK_CREDITS {
            acts.push(Act::ReqSend);
        }
        // Link-level flow control: a node sends only while the link has
        // credits, so the wire (one delivery per step) paces the engines
        // and a packet's time in flight stays bounded.
        if !resp_ready.is_empty() && ba.len() < LINK_CREDITS {
            acts.push(Act::RespSend);
        }
        if !ab.is_empty() {
            acts.push(Act::ToResponder);
        }
        if !ba.is_empty() {
            acts.push(Act::ToRequester);
        }
        // The retry timer: a QP with segments outstanding and no packet
        // for RETRY_NS of simulated time restarts them. When nothing else
        // can happen, simulated time jumps to the next expiry.
        let idle = acts.is_empty();
        if idle || rep.steps % 64 == 0 {
            let mut fired = false;
            for (i, p) in pairs.iter().enumerate() {
                if idle || sim_ns_f - last_progress[i] > RETRY_NS {
                    let mut g = p.req.s_lock.lock(&mut root);
                    if g.ext.req.pending_segments() > 0 {
                        requester::timeout(&req_rcd, &p.req, &mut g);
                        last_progress[i] = sim_ns_f;
                        fired = true;
                    }
                }
            }
            if idle {
                if !fired || idle_fires > MAX_IDLE_FIRES {
                    break;
                }
                idle_fires += 1;
                sim_ns_f += RETRY_NS;
                continue;
            }
        }
        // A run that keeps busy without finishing (a livelock) must end
        // too, and must not eat the machine's memory on the way.
        if since_progress > STUCK_STEPS
            || rep.steps > MAX_STEPS
            || req_rcd.sched.pending_sends() > MAX_QUEUED
            || ab.len() + ba.len() > MAX_QUEUED
        {
            if std::env::var_os("TID_SIM_DEBUG").is_some() {
                eprintln!(
                    "cut short: steps {} since progress {} sends {} ab {} ba {} resp ready {}",
                    rep.steps,
                    since_progress,
                    req_rcd.sched.pending_sends(),
                    ab.len(),
                    ba.len(),
                    resp_ready.len()
                );
                for (i, p) in pairs.iter().enumerate() {
                    let g = p.resp.s_lock.lock(&mut root);
                    if g.ext.resp.has_work() {
                        eprintln!(
                            "responder {i}: r_psn {:?} {:?}",
                            g.ext.resp.r_psn, g.ext.resp.stats
                        );
                    }
                }
            }
            rep.engine_errors += u64::from(since_progress <= STUCK_STEPS);
            break;
        }
        rep.steps += 1;
        since_progress += 1;
        let act = acts[rng.below(acts.len() as u64) as usize];
        match act {
            Act::Work => {
                if let Some((_cpu, qp)) = req_rcd.sched.pop_work() {
                    if let Some(t) = last_progress.get_mut((qp.qpn() - REQ_QPN_BASE) as usize) {
                        *t = sim_ns_f;
                    }
                    let mut err = false;
                    qp_wait::trigger_resume::<EnginePlatform>(qp, &mut root, |qp, root| {
                        err = requester::send_engine(&req_rcd, qp, root, &mut outbox).is_err();
                    });
                    rep.engine_errors += u64::from(err);
                }
                flush_out(
                    &mut outbox,
                    &mut ab,
                    &mut rng,
                    &mut pcap,
                    &mut erf_buf,
                    sim_ns_f,
                    0,
                    &mut rep,
                );
            }
            Act::ReqSend => {
                if let Some(qp) = req_rcd.sched.pop_send() {
                    if let Some(t) = last_progress.get_mut((qp.qpn() - REQ_QPN_BASE) as usize) {
                        *t = sim_ns_f;
                    }

                    if requester::send_engine(&req_rcd, &qp, &mut root, &mut outbox).is_err() {
                        rep.engine_errors += 1;
                    }
                }
                flush_out(
                    &mut outbox,
                    &mut ab,
                    &mut rng,
                    &mut pcap,
                    &mut erf_buf,
                    sim_ns_f,
                    0,
                    &mut rep,
                );
            }
            Act::RespSend => {
                if let Some(i) = resp_ready.pop_front() {
                    resp_queued[i] = false;
                    let more = {
                        let qp = &pairs[i].resp;
                        let mut g = qp.s_lock.lock(&mut root);
                        match responder::make_resp::<EnginePlatform>(
                            &mut g,
                            &mrs,
                            &mrs,
                            &mut outbox,
                            RESP_BUDGET,
                        ) {
                            Ok(m) => m,
                            Err(_) => {
                                rep.engine_errors += 1;
                                false
                            }
                        }
                    };
                    if more && !resp_queued[i] {
                        resp_queued[i] = true;
                        resp_ready.push_back(i);
                    }
                }
                flush_out(
                    &mut outbox,
                    &mut ba,
                    &mut rng,
                    &mut pcap,
                    &mut erf_buf,
                    sim_ns_f,
                    1,
                    &mut rep,
                );
            }
            Act::ToResponder => {
                let Some(p) = ab.deliver(&mut rng) else {
                    continue;
                };
                sim_ns_f += p.bytes.len() as f64 / WIRE_BYTES_PER_NS;
                since_progress = 0;
                match packet::parse(&p.bytes) {
                    Ok((_, Parsed::ReadReq { bth, hdr, payload })) => {
                        let Some(&i) = by_resp_qpn.get(&hdr.verbs_qp) else {
                            rep.malformed += 1;
                            continue;
                        };
                        let has_work = {
                            let mut g = pairs[i].resp.s_lock.lock(&mut root);
                            let _ = responder::rcv_read_req::<EnginePlatform>(
                                &mut g, bth.psn, &hdr, payload, &mrs,
                            );
                            g.ext.resp.has_work()
                        };
                        if has_work && !resp_queued[i] {
                            resp_queued[i] = true;
                            resp_ready.push_back(i);
                        }
                    }
                    Ok(_) => rep.malformed += 1,
                    Err(_) => rep.malformed += 1,
                }
            }
            Act::ToRequester => {
                let Some(p) = ba.deliver(&mut rng) else {
                    continue;
                };
                sim_ns_f += p.bytes.len() as f64 / WIRE_BYTES_PER_NS;
                since_progress = 0;
                let done = match packet::parse(&p.bytes) {
                    Ok((_, Parsed::ReadResp { bth, hdr, payload })) => {
                        let Some(&i) = by_req_qpn.get(&hdr.verbs_qp) else {
                            rep.malformed += 1;
                            continue;
                        };
                        let qp = &pairs[i].req;
                        let mut g = qp.s_lock.lock(&mut root);
                        // The chip's expected receive (placement, flow
                        // checks, header suppression), then the requester.
                        let (_, verdict) = sim_chip::receive_read_resp(
                            &req_rcd,
                            qp,
                            &mut g,
                            &mut mem,
                            bth.dest_qp,
                            FlowPsn::from_raw(bth.psn.get()),
                            &hdr,
                            payload,
                        );
                        last_progress[i] = sim_ns_f;
                        match verdict {
                            Some(Ok(_)) => {}
                            Some(Err(_)) => rep.engine_errors += 1,
                            None => rep.suppressed += 1,
                        }
                        let mut done = Vec::new();
                        while let Some(c) = g.ext.req.poll() {
                            done.push(c);
                        }
                        Some((i, done))
                    }
                    Ok((_, Parsed::Ack { aeth, bth })) => {
                        let Some(&i) = by_req_qpn.get(&bth.dest_qp) else {
                            rep.malformed += 1;
                            continue;
                        };
                        let qp = &pairs[i].req;
                        let mut g = qp.s_lock.lock(&mut root);
                        requester::rcv_ack(&req_rcd, qp, &mut g, &aeth);
                        let mut done = Vec::new();
                        while let Some(c) = g.ext.req.poll() {
                            done.push(c);
                        }
                        Some((i, done))
                    }
                    Ok(_) | Err(_) => {
                        rep.malformed += 1;
                        None
                    }
                };
                if let Some((i, comps)) = done {
                    if !comps.is_empty() {
                        idle_fires = 0;
                    }
                    for c in comps {
                        let Some(posted) = work[i].posted.remove(&c.wr_id) else {
                            continue;
                        };
                        if c.status == WcStatus::Success {
                            rep.requests += 1;
                            verify(&mut mem, &posted, &mut rep);
                        } else {
                            rep.failed_requests += 1;
                        }
                        for s in &posted.sges {
                            for k in 0..u64::from(s.length / PAGE_SIZE) {
                                mem.remove_page((s.vaddr >> 12) + k);
                            }
                        }
                    }
                    post_more(
                        &req_rcd,
                        &pairs[i].req,
                        &mut work[i],
                        &mut rng,
                        &mut pages,
                        &mut mem,
                        &mut root,
                        &mut rep,
                    );
                }
            }
        }
    }
    rep.sim_ns = sim_ns_f as u64;

    // Gather the counters.
    for p in &pairs {
        let g = p.req.s_lock.lock(&mut root);
        let s = g.ext.req.stats;
        rep.segments += s.segments;
        rep.tid_waits += s.tid_waits;
        rep.flow_waits += s.flow_waits;
        rep.syncs += s.syncs;
        rep.resp_dropped += s.resp_dropped;
        rep.kdeth_errors += s.kdeth_errors;
        rep.retransmits += s.retransmits;
        rep.restarts += s.restarts;
        rep.timeouts += s.timeouts;
        rep.stale_dropped += s.stale_dropped;
        *rep.drops
            .entry("requester_stale_generation".into())
            .or_default() += s.stale_dropped;
        *rep.drops.entry("requester_tid_error".into()).or_default() += s.tid_dropped;
        *rep.drops
            .entry("requester_ib_psn_check".into())
            .or_default() += s.psn_dropped;
        *rep.drops
            .entry("requester_sw_psn_check".into())
            .or_default() += s.sw_dropped;
        *rep.drops.entry("requester_late_copy".into()).or_default() += s.late_dropped;
        *rep.drops
            .entry("requester_flow_not_found".into())
            .or_default() += s.flow_not_found;
        drop(g);
        let g = p.resp.s_lock.lock(&mut root);
        rep.naks += g.ext.resp.stats.naks;
        *rep.drops
            .entry("responder_duplicate_ignored".into())
            .or_default() += g.ext.resp.stats.duplicates_ignored;
    }
    for (i, w) in work.iter().enumerate() {
        if !w.to_post.is_empty() || !w.posted.is_empty() {
            rep.stuck_qps += 1;
            if std::env::var_os("TID_SIM_DEBUG").is_some() {
                let g = pairs[i].req.s_lock.lock(&mut root);
                eprintln!(
                    "stuck qp {i}: waiting {} flow {:?} {:?}",
                    g.waiting(),
                    g.ext.flow,
                    g.ext.req
                );
                let mut g = g;
                let (_, tok) = g.parts();
                let e = req_rcd.exp_lock.lock(tok);
                eprintln!(
                    "  flow queue {:?} rarr queue {:?} free groups {}",
                    e.waiters.iter(qp_wait::QueueKind::Flow).collect::<Vec<_>>(),
                    e.waiters
                        .iter(qp_wait::QueueKind::RcvArray)
                        .collect::<Vec<_>>(),
                    e.groups.free_groups()
                );
                eprintln!(
                    "  triggers queued {} coalesced {} sends {}",
                    req_rcd.sched.triggers_queued(),
                    req_rcd.sched.triggers_coalesced(),
                    req_rcd.sched.sends_scheduled()
                );
            }
        }
    }
    let (sa, sb) = (ab.stats(), ba.stats());
    rep.packets = sa.sent + sb.sent;
    rep.delivered = sa.delivered + sb.delivered;
    rep.duplicated = sa.duplicated + sb.duplicated;
    rep.stale_injected = sa.stale_injected + sb.stale_injected;
    rep.reordered = sa.reordered + sb.reordered;
    for (k, kind) in PacketKind::ALL.iter().enumerate() {
        let n = sa.dropped.get(k).copied().unwrap_or(0) + sb.dropped.get(k).copied().unwrap_or(0);
        *rep.drops
            .entry(format!("fabric_{}", kind.name()))
            .or_default() += n;
    }
    *rep.drops.entry("malformed".into()).or_default() += rep.malformed;

    // Resources still held, from the real state.
    rep.leaked = leaks(&req_rcd, &pairs, &mrs, &mut root);

    // Tear down: flush every QP (destroy), then check nothing is held.
    for p in &pairs {
        let mut g = p.req.s_lock.lock(&mut root);
        requester::flush(&req_rcd, &p.req, &mut g);
        drop(g);
        let mut g = p.resp.s_lock.lock(&mut root);
        g.ext.resp.release_all(&mrs);
    }
    while let Some((_, qp)) = req_rcd.sched.pop_work() {
        drop(qp);
    }
    while let Some(qp) = req_rcd.sched.pop_send() {
        drop(qp);
    }
    drop(resp_rcd);
    rep.lock_checks = hfi1_hal::sim::lockdep::acquisitions().saturating_sub(checks_before);
    rep.wall_secs = wall.elapsed().as_secs_f64();
    rep
}

/// Posts requests while the QP's send queue has room.
#[allow(clippy::too_many_arguments)]
fn post_more(
    rcd: &RcvCtxt<EnginePlatform>,
    qp: &EngineQp,
    w: &mut QpWork,
    rng: &mut Rng,
    pages: &mut PageAllocator,
    mem: &mut SimMemory,
    root: &mut LockToken<'_, Unlocked>,
    rep: &mut Report,
) {
    let mut g = qp.s_lock.lock(root);
    while g.ext.req.can_post() {
        let Some(&len) = w.to_post.front() else { break };
        let sges = pages.buffer(rng, len);
        for s in &sges {
            for k in 0..u64::from(s.length / PAGE_SIZE) {
                mem.add_page((s.vaddr >> 12) + k);
            }
        }
        let wr_id = w.next_wr;
        let rkey = 0x5000 + qp.qpn() - REQ_QPN_BASE;
        let wr = ReadWr {
            wr_id,
            remote_addr: w.next_remote,
            rkey,
            sges: &sges,
        };
        if requester::post_read(rcd, qp, &mut g, &wr).is_err() {
            rep.engine_errors += 1;
            break;
        }
        w.posted.insert(
            wr_id,
            Posted {
                remote_addr: w.next_remote,
                sges,
            },
        );
        w.next_wr += 1;
        w.next_remote += u64::from(len);
        w.to_post.pop_front();
    }
}

/// Compares a completed request's destination pages with the source.
fn verify(mem: &mut SimMemory, p: &Posted, rep: &mut Report) {
    let mut remote = p.remote_addr;
    let mut got = vec![0u8; PAGE_SIZE as usize];
    let mut want = vec![0u8; PAGE_SIZE as usize];
    for s in &p.sges {
        for k in 0..u64::from(s.length / PAGE_SIZE) {
            let addr = s.vaddr + k * u64::from(PAGE_SIZE);
            fill_pattern(remote, &mut want);
            if mem.read(addr, &mut got).is_err() {
                rep.mismatched_bytes += u64::from(PAGE_SIZE);
            } else {
                let bad = if got == want {
                    0
                } else {
                    got.iter().zip(&want).filter(|(a, b)| a != b).count() as u64
                };
                rep.mismatched_bytes += bad;
                rep.verified_bytes += u64::from(PAGE_SIZE) - bad;
            }
            remote += u64::from(PAGE_SIZE);
        }
    }
}

/// Moves what an engine sent onto a link (and into the capture).
#[allow(clippy::too_many_arguments)]
fn flush_out(
    outbox: &mut Outbox,
    link: &mut Link<WirePacket>,
    rng: &mut Rng,
    pcap: &mut Option<&mut PcapWriter<impl Write>>,
    erf_buf: &mut [u8],
    sim_ns: f64,
    interface: u8,
    rep: &mut Report,
) {
    for bytes in outbox.out.drain(..) {
        if let Some(w) = pcap.as_deref_mut() {
            let ts = tid_read_proto::wire::erf::timestamp_from_nanos(sim_ns as u64);
            match tid_read_proto::wire::erf::encode(ts, interface, &bytes, erf_buf) {
                Ok(n) => {
                    if w.record(sim_ns as u64, &erf_buf[..n]).is_err() {
                        rep.engine_errors += 1;
                    }
                }
                Err(_) => rep.engine_errors += 1,
            }
        }
        let kind = kind_of(&bytes);
        link.send(WirePacket { bytes, kind }, rng);
    }
}

/// Resources held now, from the real state of the requester context, the
/// QPs and the responder's regions.
fn leaks(
    rcd: &RcvCtxt<EnginePlatform>,
    pairs: &[Pair],
    mrs: &Mrs,
    root: &mut LockToken<'_, Unlocked>,
) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    if let Some(p) = pairs.first() {
        let mut g = p.req.s_lock.lock(root);
        let (_, tok) = g.parts();
        let e = rcd.exp_lock.lock(tok);
        m.insert("tid_entries".into(), u64::from(e.groups.entries_in_use()));
        m.insert("flows".into(), u64::from(e.flows.mask().count_ones()));
        m.insert(
            "queued_qps".into(),
            (e.waiters.len(qp_wait::QueueKind::Flow) + e.waiters.len(qp_wait::QueueKind::RcvArray))
                as u64,
        );
    }
    let mut refs = 0u64;
    for p in pairs {
        refs += (p.req.live_refs().saturating_sub(1) + p.resp.live_refs().saturating_sub(1)) as u64;
    }
    m.insert("qp_refs".into(), refs);
    m.insert("dma_mappings".into(), rcd.dma.live_mappings() as u64);
    m.insert("flow_records".into(), rcd.mem.live_allocations() as u64);
    let mr_refs: i64 = mrs.regions.iter().map(|r| r.refs.get()).sum();
    m.insert("mr_refs".into(), mr_refs.max(0) as u64);
    m
}

/// The scenario a soak run with `seed` uses: sizes and a fault mix drawn
/// from the seed (1..=6 QPs with 1..=3 requests each, or one run in five
/// 8..=47 QPs with one request each, so flows run out too; requests of
/// 256 KiB, 260 KiB, 512 KiB or 1 MiB; 9..=40 TID groups; either MTU;
/// drop up to 5 %, duplicates up to 2 %, reorder window 0 or 2..=8, stale
/// replays up to 1 %, each fault present half the time).
pub fn soak_options(seed: u64) -> Options {
    let mut r = Rng::new(seed ^ 0x50AC_50AC);
    let many = r.chance(0.2);
    let qps = if many {
        8 + r.below(40) as u32
    } else {
        1 + r.below(6) as u32
    };
    let request = [256u64 << 10, 260 << 10, 512 << 10, 1 << 20][r.below(4) as usize];
    let per_qp = if many {
        request
    } else {
        (1 + r.below(3)) * request
    };
    let mut pick = |max: f64| {
        if r.chance(0.5) {
            (r.below(1001) as f64 / 1000.0) * max
        } else {
            0.0
        }
    };
    let drop = pick(0.05);
    let dup = pick(0.02);
    let stale = pick(0.01);
    Options {
        qps,
        bytes: per_qp * u64::from(qps),
        request,
        groups: 9 + r.below(32) as u32,
        mtu: if r.chance(0.5) { 4096 } else { 8192 },
        seed,
        drop,
        dup,
        reorder: if r.chance(0.5) {
            0
        } else {
            2 + r.below(7) as usize
        },
        stale,
        ..Options::default()
    }
}
