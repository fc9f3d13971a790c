// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The READ state-machine fuzz targets' interpreter (feature `std`): the
//! cargo-fuzz targets `requester_rx`, `responder_rx` and `read_pair` and
//! the seeded smoke test (`tests/fuzz_smoke.rs`) run it. A [`TwoNodes`]
//! world (1 or 2 QP pairs) between two queues the input schedules:
//! engine runs, deliveries, drops, duplicates, reorders, stale replays,
//! retry-timer expiries, new posts, and (by [`Mode`]) packets mutated at
//! the byte level or raw bytes.
//!
//! After every step the interpreter checks what the engines promise at any
//! time; at the end of an input it lets the fabric run fault-free until
//! every request completed (modes that send only real or requester-bound
//! forged packets), then tears the world down and checks that every
//! resource came back. A broken promise is a panic naming it, so libFuzzer
//! (or the smoke test) reports the input.
//!
//! Checked at every step:
//! - a send queue never holds more than it can; segments in flight never
//!   exceed the QP's `max_rd_atomic`; no more segments complete than
//!   were requested; `s_last_psn` stays in `[first - 1, s_next_psn)`;
//! - the responder never expects a PSN the requester has not handed out
//!   (when only real READ_REQs reach it);
//! - the memory-region references the regions count equal the references
//!   the responders' ack queues say they hold, and no reference was put
//!   twice or for a handle never handed out;
//! - TID entries and flows in use fit the context; the chip never writes
//!   to a page no live request owns (its fault counter stays 0);
//! - every packet either engine sends parses (checked on delivery);
//! - a completion names a request that is posted and not yet completed;
//!   in [`Mode::Pair`] a successful one carries the source's bytes and no
//!   request fails.
//!
//! Checked at the end: every request completed (liveness, except in
//! [`Mode::ResponderRx`], where a forged READ_REQ may legitimately take a
//! PSN the requester then never gets served); after teardown nothing is
//! held ([`crate::world::Leaks`] all zero).
#![allow(clippy::panic, clippy::expect_used, clippy::indexing_slicing)]

mod checks;
mod input;

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use hfi1_hal::lock_order::LockToken;
use tid_read_proto::rc::{EngineError, WcStatus};
use tid_read_proto::wire::aeth::NakCode;

pub use input::{Input, describe, mutated, pick, read_setup};

use crate::platform::SoftPlatform;
use crate::world::{Arrival, AtResponder, Done, Ran, Setup, TwoNodes};

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

impl core::ops::AddAssign for Summary {
    fn add_assign(&mut self, s: Self) {
        self.steps += s.steps;
        self.delivered += s.delivered;
        self.completed_ok += s.completed_ok;
        self.completed_err += s.completed_err;
        self.restarts += s.restarts;
        self.injected += s.injected;
    }
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

/// The two nodes, the queues between them and the bookkeeping.
struct World {
    mode: Mode,
    cfg: Setup,
    nodes: TwoNodes<SoftPlatform>,
    to_resp: VecDeque<Vec<u8>>,
    to_req: VecDeque<Vec<u8>>,
    sent_by_req: VecDeque<Vec<u8>>,
    sent_by_resp: VecDeque<Vec<u8>>,
    posts: Vec<u32>,
    sum: Summary,
    /// A completion since the last look (for the drain's idle count).
    progress: bool,
    /// `FUZZ_TRACE` set: print every delivery and engine verdict.
    trace: bool,
    /// `FUZZ_ALLOW_ACK_QUEUE_NAK` set: in [`Mode::Pair`], a request failed
    /// by a Remote Operational Error NAK (the responder's ack queue full)
    /// is tolerated, so a long run can look past such a finding.
    allow_ack_queue_nak: bool,
    /// The syndrome of the last NAK a requester received.
    last_nak: Option<u8>,
    /// Per requester QP: a fatal NAK flushed it. RC moves such a QP to
    /// the error state, so nothing more is posted on it (its PSNs no
    /// longer match its peer's).
    dead: Vec<bool>,
}

impl World {
    /// Builds both nodes for `cfg`.
    fn new(mode: Mode, cfg: Setup) -> Self {
        Self {
            mode,
            cfg,
            nodes: TwoNodes::new(cfg).expect("both nodes"),
            to_resp: VecDeque::new(),
            to_req: VecDeque::new(),
            sent_by_req: VecDeque::new(),
            sent_by_resp: VecDeque::new(),
            posts: vec![0; cfg.qps],
            sum: Summary::default(),
            progress: false,
            trace: std::env::var_os("FUZZ_TRACE").is_some(),
            allow_ack_queue_nak: std::env::var_os("FUZZ_ALLOW_ACK_QUEUE_NAK").is_some(),
            last_nak: None,
            dead: vec![false; cfg.qps],
        }
    }

    /// Posts a READ of 1..=4 pages on QP `i`, laid out in runs the input
    /// picks (a set bit puts a gap before that page).
    fn post(&mut self, i: usize, inp: &mut Input<'_>) {
        let pages = 1 + inp.below(usize::from(MAX_PAGES)) as u64;
        let gaps = inp.u8();
        if self.posts[i] >= MAX_POSTS || self.dead[i] {
            return;
        }
        let sges = self.nodes.pages.with_gaps(pages, gaps);
        let mut root = LockToken::root();
        let can = self.nodes.can_post(i, &mut root);
        match self.nodes.post(i, sges, &mut root) {
            Ok(_) => self.posts[i] += 1,
            Err(EngineError::QueueFull) if !can => {}
            Err(e) => panic!("post_read refused a valid request: {e}"),
        }
    }

    /// Moves what the engines sent onto the queues (and into the history).
    /// Whether a real packet parses is checked when it is delivered.
    fn ship(&mut self, from_req: bool) {
        let (out, q, h) = if from_req {
            (
                &mut self.nodes.to_responders,
                &mut self.to_resp,
                &mut self.sent_by_req,
            )
        } else {
            (
                &mut self.nodes.to_requesters,
                &mut self.to_req,
                &mut self.sent_by_resp,
            )
        };
        for p in out.drain() {
            if self.trace {
                let who = if from_req { "requester" } else { "responder" };
                std::eprintln!("{who} sent {}", describe(&p));
            }
            if h.len() >= HISTORY {
                h.pop_front();
            }
            h.push_back(p.clone());
            q.push_back(p);
        }
    }

    /// Runs one scheduled requester send engine. False if none was due.
    fn req_send(&mut self) -> bool {
        let ran = self.nodes.run_requester_send(&mut LockToken::root());
        self.after_requester(ran, "requester send engine")
    }

    /// Runs one queued trigger work item (a wake-up). False if none.
    fn req_work(&mut self) -> bool {
        let ran = self.nodes.run_trigger_work(&mut LockToken::root());
        self.after_requester(ran, "requester send engine (woken)")
    }

    /// Checks a requester engine run and ships what it sent.
    fn after_requester(&mut self, ran: Option<Ran>, what: &str) -> bool {
        let Some(r) = ran else {
            return false;
        };
        if let Err(e) = r.result {
            panic!("{what} failed: {e}");
        }
        self.ship(true);
        true
    }

    /// Runs responder `i`'s send engine for up to `budget` packets.
    fn resp_send(&mut self, i: usize, budget: u32) -> bool {
        match self.nodes.run_responder(i, budget, &mut LockToken::root()) {
            None => return false,
            Some(Err(e)) => panic!("responder send engine failed: {e}"),
            Some(Ok(_)) => {}
        }
        self.ship(false);
        true
    }

    /// The requester node receives `bytes`; `real` if an engine built
    /// them (they must parse).
    fn deliver_to_req(&mut self, bytes: &[u8], real: bool) {
        if self.trace {
            let forged = if real { "" } else { "FORGED " };
            std::eprintln!("-> req  {forged}{}", describe(bytes));
        }
        let at = self
            .nodes
            .deliver_to_requester(bytes, &mut LockToken::root());
        match at.arrival {
            Arrival::Unparsable(e) if real => {
                panic!("the responder sent a packet that does not parse: {e}")
            }
            Arrival::ReadResp { verdict, .. } => {
                self.sum.delivered += 1;
                if let Some(Err(e)) = verdict {
                    panic!("receive_read_resp failed: {e}");
                }
            }
            Arrival::Ack { aeth, .. } => {
                self.sum.delivered += 1;
                if aeth.is_nak() {
                    self.last_nak = Some(aeth.syndrome);
                }
            }
            _ => {}
        }
        for d in at.done {
            self.complete(d);
        }
    }

    /// The responder node receives `bytes`; `real` if an engine built
    /// them (they must parse).
    fn deliver_to_resp(&mut self, bytes: &[u8], real: bool) {
        if self.trace {
            let forged = if real { "" } else { "FORGED " };
            std::eprintln!("-> resp {forged}{}", describe(bytes));
        }
        let mut root = LockToken::root();
        match self.nodes.deliver_to_responder(bytes, &mut root) {
            AtResponder::Received { qp, verdict } => {
                self.sum.delivered += 1;
                if self.trace {
                    let g = self.nodes.responders[qp].s_lock.lock(&mut root);
                    let r_psn = g.ext.responder.expected_psn().get();
                    std::eprintln!("   responder {qp}: {verdict:?}, r_psn {r_psn:#x}");
                }
            }
            AtResponder::Unexpected if real => panic!("the requester sent a non-READ_REQ"),
            AtResponder::Unparsable(e) if real => {
                panic!("the requester sent a packet that does not parse: {e}")
            }
            _ => {}
        }
    }

    /// Takes requester `i`'s completions and checks them.
    fn poll(&mut self, i: usize) {
        for d in self.nodes.poll(i, &mut LockToken::root()) {
            self.complete(d);
        }
    }

    fn complete(&mut self, d: Done) {
        let (i, c) = (d.qp, d.completion);
        if self.trace {
            std::eprintln!("   QP {i} completed {c:?}");
        }
        let Some(p) = d.posted else {
            panic!("QP {i}: completion {c:?} of a request not posted or already completed");
        };
        assert_eq!(c.length, p.length, "QP {i}: completion length");
        self.progress = true;
        if c.status == WcStatus::Success {
            self.sum.completed_ok += 1;
            let data = d.data.unwrap_or_default();
            if self.mode == Mode::Pair && data.mismatched > 0 {
                panic!(
                    "QP {i}: request {} completed with wrong bytes: {} mismatched, first in the \
                     page at (address, remote) {:#x?}",
                    c.wr_id, data.mismatched, data.first_bad
                );
            }
            return;
        }
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

    /// The retry timer of requester `i` expires.
    fn timeout(&mut self, i: usize) {
        if self.trace {
            std::eprintln!("timer of QP {i}");
        }
        self.nodes.fire_timer(i, &mut LockToken::root());
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
                let k = pick(inp, self.to_resp.len());
                if let Some(p) = k.and_then(|k| self.to_resp.remove(k)) {
                    self.deliver_to_resp(&p, true);
                }
            }
            7 | 8 => {
                let k = pick(inp, self.to_req.len());
                if let Some(p) = k.and_then(|k| self.to_req.remove(k)) {
                    self.deliver_to_req(&p, true);
                }
            }
            9 => self.fault_drop(inp),
            10 => self.fault_duplicate(inp),
            11 => self.fault_replay(inp),
            12 => {
                let i = inp.below(n);
                self.timeout(i);
            }
            13 => {
                let i = inp.below(n);
                self.post(i, inp);
            }
            14..=16 => self.forge_mutated(inp),
            _ => self.forge_raw(inp),
        }
        for i in 0..n {
            self.poll(i);
        }
    }

    /// The queue a fault byte picks: to the responder or to the requester.
    fn queue(&mut self, inp: &mut Input<'_>) -> &mut VecDeque<Vec<u8>> {
        if inp.u8() & 1 == 0 {
            &mut self.to_resp
        } else {
            &mut self.to_req
        }
    }

    /// Drops a packet in flight.
    fn fault_drop(&mut self, inp: &mut Input<'_>) {
        let trace = self.trace;
        let q = self.queue(inp);
        let k = inp.below(q.len());
        let dropped = q.remove(k);
        if trace {
            std::eprintln!("dropped {:?}", dropped.as_deref().map(describe));
        }
    }

    /// Duplicates a packet in flight (the copy arrives later).
    fn fault_duplicate(&mut self, inp: &mut Input<'_>) {
        let trace = self.trace;
        let q = self.queue(inp);
        let k = inp.below(q.len());
        if let Some(p) = q.get(k).cloned() {
            if trace {
                std::eprintln!("duplicated {}", describe(&p));
            }
            q.push_back(p);
        }
    }

    /// Replays a stale copy of something sent long ago.
    fn fault_replay(&mut self, inp: &mut Input<'_>) {
        let (hist, q) = if inp.u8() & 1 == 0 {
            (&self.sent_by_req, &mut self.to_resp)
        } else {
            (&self.sent_by_resp, &mut self.to_req)
        };
        let k = inp.below(hist.len());
        if let Some(p) = hist.get(k).cloned() {
            if self.trace {
                std::eprintln!("replaying {}", describe(&p));
            }
            q.push_back(p);
        }
    }

    /// Injects a mutated copy of a sent packet ([`Mode::Pair`]: delivers
    /// the head of the requester-bound queue instead).
    fn forge_mutated(&mut self, inp: &mut Input<'_>) {
        match self.mode {
            Mode::RequesterRx => {
                if let Some(p) = mutated(&self.sent_by_resp, inp) {
                    self.sum.injected += 1;
                    self.deliver_to_req(&p, false);
                }
            }
            Mode::ResponderRx => {
                if let Some(p) = mutated(&self.sent_by_req, inp) {
                    self.sum.injected += 1;
                    self.deliver_to_resp(&p, false);
                }
            }
            Mode::Pair => {
                if let Some(p) = self.to_req.pop_front() {
                    self.deliver_to_req(&p, true);
                }
            }
        }
    }

    /// Injects raw bytes ([`Mode::Pair`]: delivers the head of the
    /// responder-bound queue instead).
    fn forge_raw(&mut self, inp: &mut Input<'_>) {
        match self.mode {
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
            if self.nodes.outstanding() == 0 {
                return true;
            }
            if self.nodes.fire_timers(&mut LockToken::root()) == 0 || idle_fires >= IDLE_FIRES {
                return false;
            }
            idle_fires += 1;
        }
        self.nodes.outstanding() == 0
    }
}

/// Runs one fuzz input in `mode`.
pub fn run(mode: Mode, data: &[u8]) -> Summary {
    let mut inp = Input::new(data);
    let cfg = read_setup(&mut inp);
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
