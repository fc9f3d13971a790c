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
//! - a send queue never holds more than it can; reads outstanding never
//!   exceed the QP's `max_rd_atomic`; no more segments complete than
//!   were requested; `s_last_psn` stays in `[first - 1, s_next_psn)`;
//! - the responder never expects a PSN the requester has not handed out
//!   (when only real requests reach it);
//! - the memory-region references the regions count equal the references
//!   the responders' ack queues say they hold, and no reference was put
//!   twice or for a handle never handed out;
//! - TID entries and flows in use fit the context; the chip never writes
//!   to a page no live request owns (its fault counter stays 0);
//! - every packet either engine sends parses (checked on delivery);
//! - a completion names a request that is posted and not yet completed;
//!   once a QP completed a request in error, every later completion of it
//!   is a flush (the kernel's error state);
//! - in [`Mode::Pair`] a successful request carries the source's bytes,
//!   and a request fails only as the kernel lets it with only real
//!   packets on the wire (see `kernel_allows` in this module).
//!
//! Checked at the end: every request completed (liveness, except in
//! [`Mode::ResponderRx`], where a forged request may legitimately take a
//! PSN the requester then never gets served); after teardown nothing is
//! held ([`crate::world::Leaks`] all zero).
//!
//! The world's QPs take READs of 8 KiB and more as TID READs (the kernel's
//! 256 KiB would make every input of a few pages a plain READ), so both
//! paths run.
#![allow(clippy::panic, clippy::expect_used, clippy::indexing_slicing)]

mod checks;
mod input;

use alloc::collections::{BTreeSet, VecDeque};
use alloc::vec;
use alloc::vec::Vec;

use hfi1_hal::Psn;
use hfi1_hal::lock_order::LockToken;
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::rc::{EngineError, WcStatus};
use tid_read_proto::responder::ReqVerdict;

pub use input::{FUZZ_TID_READ_MIN, Input, describe, mutated, pick, read_setup};

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
    /// Faults the schedule injected: drops, duplicates, stale replays,
    /// deliveries out of order, retry-timer expiries that found the timer
    /// running. A correct engine spends at most one retry per fault before
    /// it makes progress again.
    faults: u64,
    /// Per requester QP: the furthest `s_last_psn` seen (what the
    /// requester has completed).
    completed_to: Vec<Psn>,
    /// Per QP pair: first PSNs of ack-queue entries a stale duplicate
    /// re-armed (a request delivered after the requester had completed it).
    stale_rearmed: Vec<BTreeSet<u32>>,
    /// Per QP pair: the responder refused a request as "ack queue full"
    /// while the slot it needed held an entry a stale duplicate re-armed:
    /// the kernel fails the same way ([`World::kernel_allows`]).
    kernel_failure: Vec<bool>,
    /// Per requester QP: it completed a request in error.
    failed: Vec<bool>,
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
            faults: 0,
            completed_to: vec![cfg.first_psn.sub(1); cfg.qps],
            stale_rearmed: vec![BTreeSet::new(); cfg.qps],
            kernel_failure: vec![false; cfg.qps],
            failed: vec![false; cfg.qps],
        }
    }

    /// Posts a READ of 1..=4 pages on QP `i`, laid out in runs the input
    /// picks (a set bit puts a gap before that page).
    fn post(&mut self, i: usize, inp: &mut Input<'_>) {
        let pages = 1 + inp.below(usize::from(MAX_PAGES)) as u64;
        let gaps = inp.u8();
        if self.posts[i] >= MAX_POSTS {
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
        if self.trace {
            let mut root = LockToken::root();
            let g = self.nodes.requesters[r.qp].s_lock.lock(&mut root);
            std::eprintln!("   {what} {}: {:?}", r.qp, g.ext.requester);
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
        let mut root = LockToken::root();
        let at = self.nodes.deliver_to_requester(bytes, &mut root);
        if self.trace {
            if let Some(i) = at.arrival.qp() {
                let g = self.nodes.requesters[i].s_lock.lock(&mut root);
                std::eprintln!(
                    "   requester {i}: {:?}\n   {:?}",
                    at.arrival,
                    g.ext.requester
                );
            }
        }
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
            Arrival::Ack { .. } | Arrival::ReadResponse { .. } => {
                self.sum.delivered += 1;
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
        let stale = if real && self.mode == Mode::Pair {
            self.stale_psn(bytes)
        } else {
            None
        };
        let refusals = self.nodes.responder_stats(&mut root).queue_full;
        match self.nodes.deliver_to_responder(bytes, &mut root) {
            AtResponder::Received { qp, verdict } => {
                self.sum.delivered += 1;
                let full = self.nodes.responder_stats(&mut root).queue_full != refusals;
                self.judge_request(qp, verdict, stale, full);
                if self.trace {
                    let g = self.nodes.responders[qp].s_lock.lock(&mut root);
                    let r_psn = g.ext.responder.expected_psn().get();
                    std::eprintln!("   responder {qp}: {verdict:?}, r_psn {r_psn:#x}");
                }
            }
            AtResponder::Unexpected if real => panic!("the requester sent a non-request"),
            AtResponder::Unparsable(e) if real => {
                panic!("the requester sent a packet that does not parse: {e}")
            }
            _ => {}
        }
    }

    /// The first PSN of a request packet whose requester has already
    /// completed what it asks for (a stale copy), if it is one.
    fn stale_psn(&self, bytes: &[u8]) -> Option<u32> {
        let (dest, psn) = match packet::parse(bytes) {
            Ok((_, Parsed::ReadReq { bth, hdr, .. })) => (hdr.verbs_qp, bth.psn),
            Ok((_, Parsed::ReadRequest { bth, .. })) => (bth.dest_qp, bth.psn),
            _ => return None,
        };
        let i = dest.wrapping_sub(crate::world::RESPONDER.qpn) as usize;
        let done = self.completed_to.get(i)?;
        (psn.delta(*done) <= 0).then_some(psn.get())
    }

    /// Records what a request did at responder `qp`: a stale duplicate
    /// (`stale`: its first PSN) that re-armed an entry, and a refusal for
    /// a full ack queue (`full`) whose blocking entry such a duplicate
    /// re-armed.
    fn judge_request(&mut self, qp: usize, verdict: ReqVerdict, stale: Option<u32>, full: bool) {
        if let (ReqVerdict::Restarted, Some(p)) = (verdict, stale) {
            self.stale_rearmed[qp].insert(p);
        }
        if !full {
            return;
        }
        let mut root = LockToken::root();
        let g = self.nodes.responders[qp].s_lock.lock(&mut root);
        let blocker = g.ext.responder.last_queue_full().map(|f| f.blocker.get());
        if blocker.is_some_and(|b| self.stale_rearmed[qp].contains(&b)) {
            self.kernel_failure[qp] = true;
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
            assert!(
                !self.failed[i],
                "QP {i}: request {} succeeded after the QP failed",
                c.wr_id
            );
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
        if self.failed[i] {
            assert_eq!(
                c.status,
                WcStatus::Flushed,
                "QP {i}: after the QP failed, request {} completed {c:?}, not flushed",
                c.wr_id
            );
            return;
        }
        if c.status != WcStatus::Flushed {
            self.failed[i] = true;
        }
        if self.mode == Mode::Pair && !self.kernel_allows(i, c.status) {
            panic!(
                "QP {i}: request {c:?} failed with only real packets on the wire ({} faults)\n{}",
                self.faults,
                self.state()
            );
        }
    }

    /// Whether the kernel lets QP `i`'s oldest unfinished request end with
    /// `status` when only real packets are on the wire:
    ///
    /// - flushed: always (a teardown, or behind an error);
    /// - retry exceeded: once the schedule injected more faults than the
    ///   retry budget (a correct engine spends at most one retry per fault
    ///   before it makes progress again), or after the failure below;
    /// - remote operational error (a TID READ_REQ) or invalid request (a
    ///   plain READ): only after the responder refused a request as "ack
    ///   queue full" while the slot it needed held an entry re-armed by a
    ///   stale duplicate (a request copy delivered after the requester had
    ///   completed it): 6.1's `tid_rdma_rcv_error()` rewinds the send
    ///   pointer to such an entry and its queue-full rule then refuses the
    ///   new request and errors the QP; the NAK is sent (remote error at
    ///   the requester) or dropped because responses were pending (the
    ///   requester's retry budget runs out).
    fn kernel_allows(&self, i: usize, status: WcStatus) -> bool {
        let queue = self.kernel_failure.get(i).copied().unwrap_or(false);
        match status {
            WcStatus::Flushed => true,
            WcStatus::RetryExceeded => queue || self.faults > u64::from(self.cfg.retry_cnt),
            WcStatus::RemoteOperational | WcStatus::RemoteInvalidRequest => queue,
            _ => false,
        }
    }

    /// The timers of requester `i` expire (each only if it runs).
    fn timeout(&mut self, i: usize) {
        if self.trace {
            std::eprintln!("timer of QP {i}");
        }
        let mut root = LockToken::root();
        if self.nodes.fire_rnr_timer(i, &mut root) {
            self.faults += 1;
        }
        if self.nodes.fire_timer(i, &mut root) {
            self.faults += 1;
        }
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
                self.faults += u64::from(k.is_some_and(|k| k > 0));
                if let Some(p) = k.and_then(|k| self.to_resp.remove(k)) {
                    self.deliver_to_resp(&p, true);
                }
            }
            7 | 8 => {
                let k = pick(inp, self.to_req.len());
                self.faults += u64::from(k.is_some_and(|k| k > 0));
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
        self.faults += 1;
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
        self.faults += 1;
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
        self.faults += 1;
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
            for i in 0..self.cfg.qps {
                self.poll(i);
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
            for i in 0..self.cfg.qps {
                self.poll(i);
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
