// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The harness the READ state-machine fuzz targets share (and the seeded
//! smoke test `tid-read-proto/tests/engine_fuzz_smoke.rs`, which includes
//! this file by path): a live requester node (software chip, 1 or 2 QPs
//! on one receive context) and a live responder node, two links between
//! them, and an interpreter that turns fuzz bytes into a schedule of
//! engine runs, deliveries, drops, duplicates, reorders, stale replays,
//! retry-timer expiries, new posts, and (by [`Mode`]) packets mutated at
//! the byte level or raw bytes.
//!
//! After every step the harness checks what the engines promise at any
//! time; at the end of an input it lets the fabric run fault-free until
//! every request completed (modes that send only real or requester-bound
//! forged packets), then destroys the QPs and checks that every resource
//! came back. A broken promise is a panic naming it, so libFuzzer (or the
//! smoke test) reports the input.
//!
//! Checked at every step:
//! - a send queue never holds more than it can; segments in flight never
//!   exceed the QP's `max_rd_atomic`; no more segments complete than
//!   were requested; `s_last_psn` stays in `[first - 1, s_next_psn)`;
//! - the responder never expects a PSN the requester has not handed out
//!   (when only real READ_REQs reach it);
//! - the memory-region references the test's table counts equal the
//!   references the responders' ack queues say they hold;
//! - TID entries and flows in use fit the context; the chip never writes
//!   to a page no live request owns (its fault counter stays 0);
//! - every packet either engine sends parses (checked on delivery);
//! - a completion names a request that is posted and not yet completed;
//!   in [`Mode::Pair`] a successful one carries the source's bytes and no
//!   request fails.
//!
//! Checked at the end: every request completed (liveness, except in
//! [`Mode::ResponderRx`], where a forged READ_REQ may legitimately take a
//! PSN the requester then never gets served); after destroy, no TID entry,
//! flow, queued QP, QP reference above the creator's, DMA mapping, flow
//! record or memory-region reference is left.
#![allow(dead_code)]

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};

use hfi1_hal::consts::{PAGE_SIZE, TID_GROUP_SIZE, TID_RDMA_JKEY};
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::sim::SimMemory;
use hfi1_hal::{FlowPsn, Psn};
use tid_flow::{RcvCtxt, Sge};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, MAX_PACKET, Parsed, Path};
use tid_read_proto::rc::{
    Completion, Connection, EngineError, MrTable, PacketSink, SQ_SIZE, SourceData, WcStatus,
};
use tid_read_proto::requester::{self, ReadWr};
use tid_read_proto::responder;
use tid_read_proto::sim::{EnginePlatform, EngineQp, new_ctxt, new_qp};
use tid_read_proto::sim_chip;
use tid_read_proto::wire::aeth::NakCode;
use tid_read_proto::wire::lrh;

/// Which packets besides the real ones the schedule may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Mutated READ_RESPs and ACKs, and raw bytes, to the requester.
    RequesterRx,
    /// Mutated READ_REQs, and raw bytes, to the responder.
    ResponderRx,
    /// Only real packets: dropped, duplicated, reordered, replayed.
    Pair,
}

/// What one input did (so the smoke test can check it drove the engines).
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    /// Schedule steps run.
    pub steps: u64,
    /// Packets delivered to an engine's receive path.
    pub delivered: u64,
    /// Requests completed successfully.
    pub completed_ok: u64,
    /// Requests completed in error or flushed.
    pub completed_err: u64,
    /// Restarts the requesters counted.
    pub restarts: u64,
    /// Packets injected that were not sent by an engine.
    pub injected: u64,
}

/// Most schedule steps per input (one step takes at least one byte).
const MAX_STEPS: usize = 1024;
/// Most requests a QP posts over an input.
const MAX_POSTS: u32 = 6;
/// Most pages of one request (few: every page is a 4 KiB packet whose
/// ICRC the parser computes, and the CI smoke must stay short).
const MAX_PAGES: u8 = 4;
/// Packets remembered per direction for stale replays and mutation.
const HISTORY: usize = 64;
/// Steps of the fault-free drain before the input is declared stuck.
const DRAIN_STEPS: u32 = 20_000;
/// Retry-timer expiries without a completion before declaring it stuck.
const IDLE_FIRES: u32 = 40;
/// Verbs QP numbers.
const REQ_QPN: u32 = 0x100;
const RESP_QPN: u32 = 0x400;

/// A reader of fuzz bytes that yields zeros once they run out.
pub struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    /// Reads `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self(data)
    }

    /// True once every byte was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    /// The next two bytes, little endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// A value below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else if n <= 256 {
            usize::from(self.u8()) % n
        } else {
            usize::from(self.u16()) % n
        }
    }

    /// Up to `n` bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}

/// The source byte at remote address `addr`.
pub fn pattern(addr: u64) -> u8 {
    let z = (addr ^ (addr >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (z >> 56) as u8
}

fn fill_pattern(addr: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = pattern(addr.wrapping_add(i as u64));
    }
}

/// The responder's memory regions (one per QP) and their references.
struct Mrs {
    regions: Vec<(u64, u64, u32)>,
    refs: Cell<i64>,
}

impl MrTable for Mrs {
    fn get(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        let i = self.regions.iter().position(|r| r.2 == rkey)?;
        let (base, size, _) = self.regions[i];
        let end = vaddr.checked_add(u64::from(len))?;
        if vaddr < base || end > base + size {
            return None;
        }
        self.refs.set(self.refs.get() + 1);
        u32::try_from(i).ok()
    }

    fn put(&self, mr: u32) {
        assert!(
            (mr as usize) < self.regions.len(),
            "MR handle {mr} never handed out"
        );
        self.refs.set(self.refs.get() - 1);
        assert!(self.refs.get() >= 0, "an MR reference was put twice");
    }
}

impl SourceData for Mrs {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        let end = vaddr.saturating_add(out.len() as u64);
        if !self
            .regions
            .iter()
            .any(|r| vaddr >= r.0 && end <= r.0 + r.1)
        {
            return false;
        }
        fill_pattern(vaddr, out);
        true
    }
}

struct Sink {
    buf: Vec<u8>,
    out: Vec<Vec<u8>>,
}

impl PacketSink for Sink {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn send(&mut self, len: usize) {
        assert!(len <= self.buf.len(), "an engine sent more than its buffer");
        self.out.push(self.buf[..len].to_vec());
    }
}

/// The connection parameters an input picks.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Requester QPs (and their peers): 1 or 2.
    pub qps: usize,
    /// TID groups of the requester's context: 1..=4.
    pub groups: usize,
    /// Path MTU.
    pub pmtu: u32,
    /// The responder's segment size (its OPFN `max_len`).
    pub seg_len: u32,
    /// Segments of one READ in flight (OPFN `max_read`).
    pub max_read: u8,
    /// Reads outstanding at the peer.
    pub max_rd_atomic: u32,
    /// First IB PSN of both directions (sometimes just before the wrap).
    pub first_psn: Psn,
    /// Seed of the context's flow generations.
    pub seed: u64,
}

impl Config {
    /// Reads a configuration from the first bytes of an input.
    pub fn read(inp: &mut Input<'_>) -> Self {
        let a = inp.u8();
        let b = inp.u8();
        Self {
            qps: 1 + usize::from(a & 1),
            groups: 1 + usize::from((a >> 1) & 3),
            pmtu: if a & 8 != 0 { 8192 } else { 4096 },
            seg_len: [4096, 8192, 16384, 256 * 1024][usize::from((a >> 4) & 3)],
            max_read: 1 + b % 6,
            max_rd_atomic: 1 + u32::from(b >> 3) % 16,
            first_psn: Psn::new(if a & 0x40 != 0 { 0x7FFF_FFF8 } else { 0x10 }),
            seed: u64::from(a >> 7) | u64::from(b) << 1,
        }
    }
}

/// A request posted and not yet completed.
struct Posted {
    remote: u64,
    sges: Vec<Sge>,
}

/// Both nodes, the links and the bookkeeping.
pub struct World {
    mode: Mode,
    cfg: Config,
    rcd: Box<RcvCtxt<EnginePlatform>>,
    req: Vec<EngineQp>,
    resp: Vec<EngineQp>,
    mrs: Mrs,
    mem: SimMemory,
    to_resp: VecDeque<Vec<u8>>,
    to_req: VecDeque<Vec<u8>>,
    sent_by_req: VecDeque<Vec<u8>>,
    sent_by_resp: VecDeque<Vec<u8>>,
    resp_ready: Vec<bool>,
    posted: Vec<BTreeMap<u64, Posted>>,
    posts: Vec<u32>,
    next_remote: Vec<u64>,
    next_wr: u64,
    next_pfn: u64,
    sink: Sink,
    sum: Summary,
    /// A completion since the last look (for the drain's idle count).
    progress: bool,
    /// `FUZZ_TRACE` set: print every delivery and engine verdict.
    trace: bool,
    /// `FUZZ_ALLOW_ACK_QUEUE_NAK` set: in [`Mode::Pair`], a request failed
    /// by a Remote Operational Error NAK (the responder's ack queue full)
    /// is tolerated, so a long run can look past that known finding.
    allow_ack_queue_nak: bool,
    /// The syndrome of the last NAK a requester received.
    last_nak: Option<u8>,
    /// Per requester QP: a fatal NAK flushed it. RC moves such a QP to
    /// the error state, so nothing more is posted on it (its PSNs no
    /// longer match its peer's).
    dead: Vec<bool>,
}

/// A one-line description of a packet, for traces.
fn describe(bytes: &[u8]) -> String {
    match packet::parse(bytes) {
        Ok((_, Parsed::ReadReq { bth, hdr, .. })) => format!(
            "READ_REQ psn {:#x} len {} vaddr {:#x} flow_psn g{}:{} tid_flow_qp {:#x} verbs_qp {:#x}",
            bth.psn.get(),
            hdr.reth.length,
            hdr.reth.vaddr,
            hdr.flow_psn.generation().get(),
            hdr.flow_psn.seq(),
            hdr.tid_flow_qp,
            hdr.verbs_qp
        ),
        Ok((_, Parsed::ReadResp { bth, hdr, payload })) => format!(
            "READ_RESP flow_psn g{}:{} verbs_psn {:#x} kdeth0 {:#x} len {}",
            FlowPsn::from_raw(bth.psn.get()).generation().get(),
            FlowPsn::from_raw(bth.psn.get()).seq(),
            hdr.verbs_psn.get(),
            hdr.kdeth.kdeth0.raw(),
            payload.len()
        ),
        Ok((_, Parsed::Ack { bth, aeth })) => format!(
            "ACK psn {:#x} syndrome {:#x} msn {}",
            bth.psn.get(),
            aeth.syndrome,
            aeth.msn
        ),
        Err(e) => format!("unparsable ({e})"),
    }
}

impl World {
    /// Builds both nodes for `cfg`.
    pub fn new(mode: Mode, cfg: Config) -> Self {
        let rcd = new_ctxt(1, 0, cfg.groups, cfg.qps as u32, cfg.seed).expect("context");
        let req_params = TidParams::local(1, TID_RDMA_JKEY, 14, false);
        let resp_params = TidParams {
            max_len: cfg.seg_len,
            max_read: cfg.max_read,
            ..TidParams::local(2, TID_RDMA_JKEY, 14, false)
        };
        let mut req = Vec::new();
        let mut resp = Vec::new();
        let mut regions = Vec::new();
        for i in 0..cfg.qps {
            let n = i as u32;
            let rc = Connection {
                verbs_qpn: REQ_QPN + n,
                remote_verbs_qpn: RESP_QPN + n,
                local: req_params,
                remote: resp_params,
                pmtu: cfg.pmtu,
                path: Path { dlid: 2, slid: 1 },
                max_rd_atomic: cfg.max_rd_atomic,
                remote_read: false,
            };
            let sc = Connection {
                verbs_qpn: RESP_QPN + n,
                remote_verbs_qpn: REQ_QPN + n,
                local: resp_params,
                remote: req_params,
                pmtu: cfg.pmtu,
                path: Path { dlid: 1, slid: 2 },
                max_rd_atomic: cfg.max_rd_atomic,
                remote_read: true,
            };
            req.push(new_qp(REQ_QPN + n, n, 0, rc, cfg.first_psn));
            resp.push(new_qp(RESP_QPN + n, n, 0, sc, cfg.first_psn));
            regions.push(((u64::from(n) + 1) << 40, 1 << 32, 0x5000 + n));
        }
        Self {
            mode,
            cfg,
            rcd,
            req,
            resp,
            mrs: Mrs {
                regions,
                refs: Cell::new(0),
            },
            mem: SimMemory::new(),
            to_resp: VecDeque::new(),
            to_req: VecDeque::new(),
            sent_by_req: VecDeque::new(),
            sent_by_resp: VecDeque::new(),
            resp_ready: vec![false; cfg.qps],
            posted: (0..cfg.qps).map(|_| BTreeMap::new()).collect(),
            posts: vec![0; cfg.qps],
            next_remote: (0..cfg.qps).map(|i| (i as u64 + 1) << 40).collect(),
            next_wr: 1,
            next_pfn: 0x1000,
            sink: Sink {
                buf: vec![0; MAX_PACKET],
                out: Vec::new(),
            },
            sum: Summary::default(),
            progress: false,
            trace: std::env::var_os("FUZZ_TRACE").is_some(),
            allow_ack_queue_nak: std::env::var_os("FUZZ_ALLOW_ACK_QUEUE_NAK").is_some(),
            last_nak: None,
            dead: vec![false; cfg.qps],
        }
    }

    /// Posts a READ of 1..=8 pages on QP `i`, laid out in runs the input
    /// picks (a set bit puts a gap before that page).
    fn post(&mut self, i: usize, inp: &mut Input<'_>) {
        let pages = 1 + inp.below(usize::from(MAX_PAGES)) as u64;
        let gaps = inp.u8();
        if self.posts[i] >= MAX_POSTS || self.dead[i] {
            return;
        }
        let mut sges: Vec<Sge> = Vec::new();
        for k in 0..pages {
            let gap = k > 0 && gaps & (1 << k) != 0;
            if gap {
                self.next_pfn += 1;
            }
            let pfn = self.next_pfn;
            self.next_pfn += 1;
            self.mem.add_page(pfn);
            match sges.last_mut() {
                Some(s) if !gap => s.length += PAGE_SIZE,
                _ => sges.push(Sge {
                    vaddr: pfn << 12,
                    length: PAGE_SIZE,
                }),
            }
        }
        self.next_pfn += 1;
        let qp = &self.req[i];
        let mut root = LockToken::root();
        let mut g = qp.s_lock.lock(&mut root);
        let can = g.ext.req.can_post();
        let wr_id = self.next_wr;
        let remote = self.next_remote[i];
        let r = requester::post_read(
            &self.rcd,
            qp,
            &mut g,
            &ReadWr {
                wr_id,
                remote_addr: remote,
                rkey: 0x5000 + i as u32,
                sges: &sges,
            },
        );
        drop(g);
        match r {
            Ok(()) => {
                self.posts[i] += 1;
                self.next_wr += 1;
                self.next_remote[i] += pages * u64::from(PAGE_SIZE);
                self.posted[i].insert(wr_id, Posted { remote, sges });
            }
            Err(EngineError::QueueFull) if !can => self.unmap(&sges),
            Err(e) => panic!("post_read refused a valid request: {e}"),
        }
    }

    fn unmap(&mut self, sges: &[Sge]) {
        for s in sges {
            for k in 0..u64::from(s.length / PAGE_SIZE) {
                self.mem.remove_page((s.vaddr >> 12) + k);
            }
        }
    }

    /// Moves what the sink holds onto a link (and into the history).
    /// Whether a real packet parses is checked when it is delivered.
    fn ship(&mut self, from_req: bool) {
        for p in self.sink.out.drain(..) {
            if self.trace {
                eprintln!(
                    "{} sent {}",
                    if from_req { "requester" } else { "responder" },
                    describe(&p)
                );
            }
            let (q, h) = if from_req {
                (&mut self.to_resp, &mut self.sent_by_req)
            } else {
                (&mut self.to_req, &mut self.sent_by_resp)
            };
            if h.len() >= HISTORY {
                h.pop_front();
            }
            h.push_back(p.clone());
            q.push_back(p);
        }
    }

    /// Runs one scheduled requester send engine. False if none was due.
    fn req_send(&mut self) -> bool {
        let Some(qp) = self.rcd.sched.pop_send() else {
            return false;
        };
        let mut root = LockToken::root();
        if let Err(e) = requester::send_engine(&self.rcd, &qp, &mut root, &mut self.sink) {
            panic!("requester send engine failed: {e}");
        }
        drop(qp);
        self.ship(true);
        true
    }

    /// Runs one queued trigger work item (a wake-up). False if none.
    fn req_work(&mut self) -> bool {
        let Some((_, qp)) = self.rcd.sched.pop_work() else {
            return false;
        };
        let mut root = LockToken::root();
        let rcd = &self.rcd;
        let sink = &mut self.sink;
        qp_wait::trigger_resume::<EnginePlatform>(qp, &mut root, |qp, root| {
            if let Err(e) = requester::send_engine(rcd, qp, root, sink) {
                panic!("requester send engine (woken) failed: {e}");
            }
        });
        self.ship(true);
        true
    }

    /// Runs responder `i`'s send engine for up to `budget` packets.
    fn resp_send(&mut self, i: usize, budget: u32) -> bool {
        if !self.resp_ready[i] {
            return false;
        }
        let mut root = LockToken::root();
        let mut g = self.resp[i].s_lock.lock(&mut root);
        let more = match responder::make_resp::<EnginePlatform>(
            &mut g,
            &self.mrs,
            &self.mrs,
            &mut self.sink,
            budget,
        ) {
            Ok(m) => m,
            Err(e) => panic!("responder send engine failed: {e}"),
        };
        drop(g);
        self.resp_ready[i] = more;
        self.ship(false);
        true
    }

    /// The requester node receives `bytes`; `real` if an engine built
    /// them (they must parse).
    fn deliver_to_req(&mut self, bytes: &[u8], real: bool) {
        if self.trace {
            eprintln!(
                "-> req  {}{}",
                if real { "" } else { "FORGED " },
                describe(bytes)
            );
        }
        let p = match packet::parse(bytes) {
            Ok((_, p)) => p,
            Err(e) if real => panic!("the responder sent a packet that does not parse: {e}"),
            Err(_) => return,
        };
        let i = match p {
            Parsed::ReadResp { hdr, .. } => hdr.verbs_qp.wrapping_sub(REQ_QPN),
            Parsed::Ack { bth, .. } => bth.dest_qp.wrapping_sub(REQ_QPN),
            Parsed::ReadReq { .. } => return,
        } as usize;
        let Some(qp) = self.req.get(i) else { return };
        self.sum.delivered += 1;
        let mut root = LockToken::root();
        let mut g = qp.s_lock.lock(&mut root);
        match p {
            Parsed::ReadResp { bth, hdr, payload } => {
                let fpsn = FlowPsn::from_raw(bth.psn.get());
                let (_, verdict) = sim_chip::receive_read_resp(
                    &self.rcd,
                    qp,
                    &mut g,
                    &mut self.mem,
                    bth.dest_qp,
                    fpsn,
                    &hdr,
                    payload,
                );
                if let Some(Err(e)) = verdict {
                    panic!("rcv_read_resp failed: {e}");
                }
            }
            Parsed::Ack { aeth, .. } => {
                if aeth.is_nak() {
                    self.last_nak = Some(aeth.syndrome);
                }
                requester::rcv_ack(&self.rcd, qp, &mut g, &aeth);
            }
            Parsed::ReadReq { .. } => {}
        }
        let mut done = Vec::new();
        while let Some(c) = g.ext.req.poll() {
            done.push(c);
        }
        drop(g);
        for c in done {
            self.complete(i, c);
        }
    }

    /// The responder node receives `bytes`; `real` if an engine built
    /// them (they must parse).
    fn deliver_to_resp(&mut self, bytes: &[u8], real: bool) {
        if self.trace {
            eprintln!(
                "-> resp {}{}",
                if real { "" } else { "FORGED " },
                describe(bytes)
            );
        }
        let (bth, hdr, payload) = match packet::parse(bytes) {
            Ok((_, Parsed::ReadReq { bth, hdr, payload })) => (bth, hdr, payload),
            Ok((_, other)) if real => panic!("the requester sent {other:?}"),
            Err(e) if real => panic!("the requester sent a packet that does not parse: {e}"),
            _ => return,
        };
        let i = hdr.verbs_qp.wrapping_sub(RESP_QPN) as usize;
        let Some(qp) = self.resp.get(i) else { return };
        self.sum.delivered += 1;
        let mut root = LockToken::root();
        let mut g = qp.s_lock.lock(&mut root);
        let v =
            responder::rcv_read_req::<EnginePlatform>(&mut g, bth.psn, &hdr, payload, &self.mrs);
        if self.trace {
            eprintln!(
                "   responder {i}: {v:?}, r_psn {:#x}",
                g.ext.resp.r_psn.get()
            );
        }
        if g.ext.resp.has_work() {
            self.resp_ready[i] = true;
        }
    }

    /// Takes requester `i`'s completions and checks them.
    fn poll(&mut self, i: usize) {
        let mut done = Vec::new();
        {
            let mut root = LockToken::root();
            let mut g = self.req[i].s_lock.lock(&mut root);
            while let Some(c) = g.ext.req.poll() {
                done.push(c);
            }
        }
        for c in done {
            self.complete(i, c);
        }
    }

    fn complete(&mut self, i: usize, c: Completion) {
        if self.trace {
            eprintln!("   QP {i} completed {c:?}");
        }
        let Some(p) = self.posted[i].remove(&c.wr_id) else {
            panic!("QP {i}: completion {c:?} of a request not posted or already completed");
        };
        let len: u32 = p.sges.iter().map(|s| s.length).sum();
        assert_eq!(c.length, len, "QP {i}: completion length");
        self.progress = true;
        if c.status == WcStatus::Success {
            self.sum.completed_ok += 1;
            if self.mode == Mode::Pair {
                self.verify(i, c.wr_id, &p);
            }
        } else {
            self.sum.completed_err += 1;
            if matches!(c.status, WcStatus::RemoteError | WcStatus::LocalQpOpError) {
                // The QP is in the error state: it takes no new posts.
                self.dead[i] = true;
            }
            let known = self.allow_ack_queue_nak
                && self.last_nak == Some(NakCode::RemoteOperationalError.syndrome());
            if self.mode == Mode::Pair && c.status != WcStatus::Flushed && !known {
                panic!("QP {i}: request {c:?} failed with only real packets on the wire");
            }
        }
        self.unmap(&p.sges);
    }

    fn verify(&self, i: usize, wr_id: u64, p: &Posted) {
        let mut remote = p.remote;
        let mut got = vec![0u8; PAGE_SIZE as usize];
        let mut want = vec![0u8; PAGE_SIZE as usize];
        for s in &p.sges {
            for k in 0..u64::from(s.length / PAGE_SIZE) {
                let addr = s.vaddr + k * u64::from(PAGE_SIZE);
                self.mem
                    .read(addr, &mut got)
                    .expect("destination page present");
                fill_pattern(remote, &mut want);
                if got != want {
                    let at = got.iter().zip(&want).position(|(a, b)| a != b);
                    panic!(
                        "QP {i}: request {wr_id} completed with wrong bytes in the page at \
                         {addr:#x} (remote {remote:#x}), first difference at {at:?}"
                    );
                }
                remote += u64::from(PAGE_SIZE);
            }
        }
    }

    /// The retry timer of requester `i` expires.
    fn timeout(&mut self, i: usize) {
        if self.trace {
            eprintln!("timer of QP {i}");
        }
        let mut root = LockToken::root();
        let mut g = self.req[i].s_lock.lock(&mut root);
        requester::timeout(&self.rcd, &self.req[i], &mut g);
    }

    /// Fires every requester's retry timer that has segments outstanding.
    fn fire_timers(&mut self) -> bool {
        let mut fired = false;
        for i in 0..self.req.len() {
            let mut root = LockToken::root();
            let mut g = self.req[i].s_lock.lock(&mut root);
            if g.ext.req.pending_segments() > 0 {
                requester::timeout(&self.rcd, &self.req[i], &mut g);
                fired = true;
            }
        }
        fired
    }

    /// Checks what must hold between any two steps.
    pub fn check(&mut self) {
        let mut root = LockToken::root();
        let mut held = 0i64;
        for (i, (rq, sq)) in self.req.iter().zip(&self.resp).enumerate() {
            let mut g = rq.s_lock.lock(&mut root);
            let r = &g.ext.req;
            assert!(
                r.outstanding() as usize <= SQ_SIZE,
                "QP {i}: {} requests outstanding",
                r.outstanding()
            );
            assert!(
                r.pending_segments() <= self.cfg.max_rd_atomic,
                "QP {i}: {} segments in flight, max_rd_atomic {}: {r:?}",
                r.pending_segments(),
                self.cfg.max_rd_atomic
            );
            assert!(
                r.stats.segments_done <= r.stats.segments,
                "QP {i}: {} segments completed of {} requested",
                r.stats.segments_done,
                r.stats.segments
            );
            let first = self.cfg.first_psn;
            assert!(
                r.s_next_psn.delta(r.s_last_psn) >= 1 && r.s_last_psn.delta(first.sub(1)) >= 0,
                "QP {i}: s_last_psn {:#x} outside [{:#x}, s_next_psn {:#x})",
                r.s_last_psn.get(),
                first.sub(1).get(),
                r.s_next_psn.get()
            );
            let next = r.s_next_psn;
            {
                let (_, tok) = g.parts();
                let e = self.rcd.exp_lock.lock(tok);
                let total = (self.cfg.groups * TID_GROUP_SIZE) as u32;
                assert!(e.groups.entries_in_use() <= total, "TID entries over-used");
                assert!(
                    e.flows.mask().count_ones() as usize <= self.cfg.qps,
                    "more flows in use than QPs: {:#x}",
                    e.flows.mask()
                );
                assert_eq!(
                    e.chip.faults(),
                    0,
                    "the chip wrote through a TID to a page no live request owns"
                );
            }
            drop(g);
            let g = sq.s_lock.lock(&mut root);
            if self.mode != Mode::ResponderRx {
                assert!(
                    next.delta(g.ext.resp.r_psn) >= 0,
                    "QP {i}: the responder expects PSN {:#x}, the requester handed out up to {:#x}",
                    g.ext.resp.r_psn.get(),
                    next.get()
                );
            }
            assert!(g.ext.resp.r_msn <= 0x00FF_FFFF, "r_msn over 24 bits");
            held += g.ext.resp.mr_refs() as i64;
        }
        assert_eq!(
            self.mrs.refs.get(),
            held,
            "MR references taken and not held by an ack-queue entry (or held twice)"
        );
    }

    /// Picks a queue index: mostly the head (in order), else any.
    fn pick(inp: &mut Input<'_>, len: usize) -> Option<usize> {
        if len == 0 {
            return None;
        }
        let b = inp.u8();
        Some(if b < 160 { 0 } else { usize::from(b) % len })
    }

    /// A packet from `hist` with bytes changed; usually the ICRC is fixed
    /// up so the change reaches the handlers.
    fn mutated(hist: &VecDeque<Vec<u8>>, inp: &mut Input<'_>) -> Option<Vec<u8>> {
        let k = inp.below(hist.len());
        let mut b = hist.get(k)?.clone();
        let n = 1 + inp.below(4);
        for _ in 0..n {
            let off = if inp.u8() < 220 {
                inp.below(64.min(b.len()))
            } else {
                inp.below(b.len())
            };
            let x = inp.u8();
            if let Some(v) = b.get_mut(off) {
                *v ^= x;
            }
        }
        let how = inp.u8();
        if how & 0x10 != 0 {
            let cut = inp.below(b.len() + 1);
            b.truncate(cut);
        }
        if how & 3 != 0 {
            lrh::Packet::new_unchecked(&mut b[..]).fill_icrc();
        }
        Some(b)
    }

    /// Runs one schedule step.
    fn step(&mut self, inp: &mut Input<'_>) {
        self.sum.steps += 1;
        let op = inp.u8();
        let n = self.cfg.qps;
        match op % 18 {
            0 | 1 => {
                self.req_send();
            }
            2 => {
                self.req_work();
            }
            3 | 4 => {
                let i = inp.below(n);
                let budget = 1 + inp.below(8) as u32;
                self.resp_send(i, budget);
            }
            5 | 6 => {
                let k = Self::pick(inp, self.to_resp.len());
                if let Some(p) = k.and_then(|k| self.to_resp.remove(k)) {
                    self.deliver_to_resp(&p, true);
                }
            }
            7 | 8 => {
                let k = Self::pick(inp, self.to_req.len());
                if let Some(p) = k.and_then(|k| self.to_req.remove(k)) {
                    self.deliver_to_req(&p, true);
                }
            }
            9 => {
                // Drop.
                let q = if inp.u8() & 1 == 0 {
                    &mut self.to_resp
                } else {
                    &mut self.to_req
                };
                let k = inp.below(q.len());
                let dropped = q.remove(k);
                if self.trace {
                    eprintln!("dropped {:?}", dropped.as_deref().map(describe));
                }
            }
            10 => {
                // Duplicate (the copy arrives later).
                let q = if inp.u8() & 1 == 0 {
                    &mut self.to_resp
                } else {
                    &mut self.to_req
                };
                let k = inp.below(q.len());
                if let Some(p) = q.get(k).cloned() {
                    if self.trace {
                        eprintln!("duplicated {}", describe(&p));
                    }
                    q.push_back(p);
                }
            }
            11 => {
                // A stale copy of something sent long ago.
                if inp.u8() & 1 == 0 {
                    let k = inp.below(self.sent_by_req.len());
                    if let Some(p) = self.sent_by_req.get(k).cloned() {
                        if self.trace {
                            eprintln!("replaying {}", describe(&p));
                        }
                        self.to_resp.push_back(p);
                    }
                } else {
                    let k = inp.below(self.sent_by_resp.len());
                    if let Some(p) = self.sent_by_resp.get(k).cloned() {
                        if self.trace {
                            eprintln!("replaying {}", describe(&p));
                        }
                        self.to_req.push_back(p);
                    }
                }
            }
            12 => {
                let i = inp.below(n);
                self.timeout(i);
            }
            13 => {
                let i = inp.below(n);
                self.post(i, inp);
            }
            14..=16 => match self.mode {
                Mode::RequesterRx => {
                    if let Some(p) = Self::mutated(&self.sent_by_resp, inp) {
                        self.sum.injected += 1;
                        self.deliver_to_req(&p, false);
                    }
                }
                Mode::ResponderRx => {
                    if let Some(p) = Self::mutated(&self.sent_by_req, inp) {
                        self.sum.injected += 1;
                        self.deliver_to_resp(&p, false);
                    }
                }
                Mode::Pair => {
                    if let Some(p) = self.to_req.pop_front() {
                        self.deliver_to_req(&p, true);
                    }
                }
            },
            _ => match self.mode {
                Mode::RequesterRx => {
                    let len = inp.below(96);
                    let raw = inp.bytes(len).to_vec();
                    self.sum.injected += 1;
                    self.deliver_to_req(&raw, false);
                }
                Mode::ResponderRx => {
                    let len = inp.below(96);
                    let raw = inp.bytes(len).to_vec();
                    self.sum.injected += 1;
                    self.deliver_to_resp(&raw, false);
                }
                Mode::Pair => {
                    if let Some(p) = self.to_resp.pop_front() {
                        self.deliver_to_resp(&p, true);
                    }
                }
            },
        }
        for i in 0..n {
            self.poll(i);
        }
    }

    /// Lets the fabric run without faults until nothing is left to do,
    /// firing the retry timers when everything is idle. Returns whether
    /// every request completed.
    fn drain(&mut self) -> bool {
        let mut idle_fires = 0u32;
        for _ in 0..DRAIN_STEPS {
            let mut busy = false;
            while self.req_work() {
                busy = true;
            }
            while self.req_send() {
                busy = true;
            }
            for i in 0..self.cfg.qps {
                busy |= self.resp_send(i, 16);
            }
            while let Some(p) = self.to_resp.pop_front() {
                self.deliver_to_resp(&p, true);
                busy = true;
            }
            while let Some(p) = self.to_req.pop_front() {
                self.deliver_to_req(&p, true);
                busy = true;
            }
            self.check();
            if self.progress {
                self.progress = false;
                idle_fires = 0;
            }
            if busy {
                continue;
            }
            if self.posted.iter().all(BTreeMap::is_empty) {
                return true;
            }
            if !self.fire_timers() || idle_fires >= IDLE_FIRES {
                return false;
            }
            idle_fires += 1;
        }
        self.posted.iter().all(BTreeMap::is_empty)
    }

    fn state(&self) -> String {
        let mut root = LockToken::root();
        let mut s = format!("{:?}\n", self.cfg);
        for (i, qp) in self.req.iter().enumerate() {
            let mut g = qp.s_lock.lock(&mut root);
            s += &format!(
                "req QP {i}: waiting {} flow {:?}\n  {:?}\n  stats {:?}\n",
                g.waiting(),
                g.ext.flow,
                g.ext.req,
                g.ext.req.stats
            );
            let (_, tok) = g.parts();
            let e = self.rcd.exp_lock.lock(tok);
            s += &format!(
                "  ctxt: entries in use {} flows {:#x} free groups {} waiters empty {}\n",
                e.groups.entries_in_use(),
                e.flows.mask(),
                e.groups.free_groups(),
                e.waiters.is_empty()
            );
        }
        for (i, qp) in self.resp.iter().enumerate() {
            let g = qp.s_lock.lock(&mut root);
            s += &format!("resp QP {i}: {:?}\n", g.ext.resp);
        }
        s
    }

    /// Destroys every QP and checks that everything came back.
    fn teardown(mut self) -> Summary {
        let mut root = LockToken::root();
        for i in 0..self.cfg.qps {
            {
                let mut g = self.req[i].s_lock.lock(&mut root);
                requester::flush(&self.rcd, &self.req[i], &mut g);
                self.sum.restarts += g.ext.req.stats.restarts;
            }
            self.poll(i);
            let mut g = self.resp[i].s_lock.lock(&mut root);
            g.ext.resp.release_all(&self.mrs);
            assert!(
                !g.ext.resp.has_work(),
                "responder {i} has work after release"
            );
            assert_eq!(g.ext.resp.mr_refs(), 0, "responder {i} holds MR references");
        }
        for (i, p) in self.posted.iter().enumerate() {
            assert!(
                p.is_empty(),
                "QP {i}: requests {:?} never completed, not even by the flush",
                p.keys().collect::<Vec<_>>()
            );
        }
        while self.rcd.sched.pop_work().is_some() {}
        while self.rcd.sched.pop_send().is_some() {}
        {
            let mut g = self.req[0].s_lock.lock(&mut root);
            let (_, tok) = g.parts();
            let e = self.rcd.exp_lock.lock(tok);
            assert_eq!(e.groups.entries_in_use(), 0, "TID entries left in use");
            assert_eq!(e.flows.mask(), 0, "hardware flows left reserved");
            assert!(e.waiters.is_empty(), "QPs left on a wait queue");
            assert_eq!(e.chip.faults(), 0, "chip faults");
        }
        for (i, (rq, sq)) in self.req.iter().zip(&self.resp).enumerate() {
            assert_eq!(rq.live_refs(), 1, "requester QP {i}: references left");
            assert_eq!(sq.live_refs(), 1, "responder QP {i}: references left");
        }
        assert_eq!(self.rcd.dma.live_mappings(), 0, "DMA mappings left");
        assert_eq!(self.rcd.mem.live_allocations(), 0, "flow records left");
        assert_eq!(self.mrs.refs.get(), 0, "MR references left");
        self.sum
    }
}

/// Runs one fuzz input in `mode`.
pub fn run(mode: Mode, data: &[u8]) -> Summary {
    let mut inp = Input::new(data);
    let cfg = Config::read(&mut inp);
    let mut w = World::new(mode, cfg);
    for i in 0..cfg.qps {
        let n = 1 + inp.below(2);
        for _ in 0..n {
            w.post(i, &mut inp);
        }
    }
    w.check();
    let mut steps = 0;
    while !inp.is_empty() && steps < MAX_STEPS {
        w.step(&mut inp);
        w.check();
        steps += 1;
    }
    let drained = w.drain();
    if mode != Mode::ResponderRx && !drained {
        panic!(
            "stuck: requests left after a fault-free drain\n{}",
            w.state()
        );
    }
    w.teardown()
}
