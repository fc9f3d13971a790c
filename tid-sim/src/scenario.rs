// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! One simulated run: the harness's two nodes ([`TwoNodes`]), a faulty
//! fabric between them, one seeded scheduler, and a byte-for-byte check of
//! everything read.
//!
//! - **Requester node**: one receive context (the software chip with
//!   `--groups` TID groups, its flows and wait queues) and `--qps` QPs.
//!   Each QP reads its share of `--bytes` in `--request`-sized RDMA READs
//!   into destination buffers of deliberately fragmented physical pages
//!   (a seeded mix of contiguous runs and scattered pages). The chip
//!   places READ_RESP payloads through RcvArray entry, TID entry and
//!   OFFSET, with generation and sequence checks and header suppression;
//!   software sees a segment's last packet only.
//! - **Responder node**: the peer QPs, one memory region and R_Key per QP,
//!   and source data that is a pure function of the address, so every
//!   byte read can be checked.
//! - **Scheduler**: at each step one of the ready actions is drawn with
//!   the seeded [`Rng`]: a requester QP's send engine, a trigger work item
//!   (a wake-up), a responder QP's send engine, or one delivery on either
//!   link ([`Scenario::step`]).
//!
//! Simulated time advances with each packet delivered by its
//! serialisation time on a 100 Gb/s wire, for the capture's wire times
//! and the simulated throughput.
//!
//! An [`Observer`] ([`run_observed`]) sees the run as it goes: progress
//! ([`Scenario::observe`]), samples of the state over simulated time
//! ([`Scenario::sample`]) and every packet the fabric carried, after the
//! fault injector (`Scenario::seen`).
//!
//! Faults (`--drop`, `--dup`, `--reorder`, `--stale`) act on both links
//! ([`crate::fabric`]). The requesters' retry and RNR timers run on
//! simulated time exactly as the engine arms, re-arms and stops them
//! (each QP's timeout exponent is [`sim_timeout`], longer than the
//! fabric's worst round trip: 524 us for a plain READ or a WRITE_REQ on
//! a 4K MTU, 1.05 ms on an 8K one, shifted by the OPFN `timeout_shift`
//! for a TID READ_REQ); when
//! nothing else can happen, simulated time jumps to the next deadline. A
//! QP whose retry budget runs out completes its oldest READ
//! `RETRY_EXC_ERR` and flushes the rest, and its remaining READs are
//! posted and flushed too (the kernel accepts posts in the error state).
//! The application then resets that QP's peer responder, as it would the
//! failed connection: the responder gives back its WRITE flow, TIDs and
//! region references and drops what still arrives.
//! A run ends when nothing is left to do; QPs with READs left are
//! reported stuck.
//!
//! `--read-sizes` makes each QP cycle through a list of READ sizes; with
//! `mixed` the READs below 256 KiB go as plain RDMA READs.
//!
//! `--ops write` posts RDMA WRITEs instead (`mix`: each request a READ or
//! a WRITE, drawn from the seed): each QP writes its share into its
//! writable region on the responder node, scattered pages where the
//! responder's chip (its own receive context of `--groups` TID groups)
//! places the WRITE_DATA; the requester's second leg sends the data, the
//! responder's sends the TID ACKs, and the TID retry timer runs with the
//! others. Every WRITE that succeeds is checked byte for byte in the
//! responder's pages (see `write`).
//!
//! A run on a faulty fabric may end a QP `RETRY_EXC_ERR` only if the
//! faults on that QP pair explain each retry it took ([`crate::explain`]).
//!
//! At the end the resources still held are read from the real state
//! ([`TwoNodes::leaks`]) and reported; then every QP is flushed.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Instant;

use hfi1_hal::consts::NUM_TID_FLOWS;

use hfi1_hal::Psn;
use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::lock_order::{LockToken, Unlocked};
use tid_harness::platform::SoftPlatform;
use tid_harness::world::{Arrival, AtRequester, AtResponder, Setup, TwoNodes};
use tid_read_proto::rc::retry::Timer;
use tid_read_proto::rc::{EngineError, WcStatus};

use crate::cli::{Ops, Options};
use crate::explain::{Fault, Ledger};
use crate::fabric::{Faults, Link};
use crate::link::{WirePacket, ship};
use crate::observe::{Fate, Observer, Progress, Seen, Taps};
use crate::pcap::PcapWriter;
pub use crate::report::{QpReport, Report};
use crate::rng::Rng;
use crate::series::{Sample, Series};
pub use crate::soak::soak_options;

mod deliver;
mod finish;
mod held;
mod hooks;
mod post;
mod timers;
mod write;

use post::read_sizes;
use timers::Deadline;

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
/// The least local ACK timeout exponent: 4.096 us << 6 = 262 us (see
/// [`sim_timeout`] for the one each MTU takes).
pub const SIM_TIMEOUT: u8 = 6;

/// Bytes a packet carries beyond its MTU payload, at most: LRH (8), BTH
/// (12), the TID header (36) and the ICRC (4) make 60.
const PACKET_OVERHEAD: u64 = 64;

/// The longest round trip on the simulated fabric at path MTU `mtu`, in
/// ns: a request that finds its link full waits for the `LINK_CREDITS`
/// packets ahead of it, and its answer for as many on the other link.
/// Simulated time is one clock that a delivery on either link advances
/// (one wire), and the scheduler draws deliveries on both links alike, so
/// while the packets ahead of one cross, about as many cross the other
/// way: each wait is twice its own link's share, four full links of
/// MTU-sized packets in all.
pub const fn worst_round_trip_ns(mtu: u32) -> u64 {
    // 100 Gb/s: 100 bits per ns.
    4 * LINK_CREDITS as u64 * (mtu as u64 + PACKET_OVERHEAD) * 8 / 100
}

/// The local ACK timeout exponent for path MTU `mtu`: the least, from
/// [`SIM_TIMEOUT`], whose timeout outlasts [`worst_round_trip_ns`] by half
/// again (the other link's deliveries are drawn, not counted, and a send
/// step may fill a link a few packets past its credits). 4K: 524 us for a
/// 341 us round trip; 8K: 1.05 ms for 676 us. A shorter one expires on
/// answers still queued with nothing lost: RNR NAKs behind full links
/// timed WRITE requesters out, their first retry before any fault on
/// their pair. A TID READ_REQ's timeout is shifted further by the OPFN
/// `timeout_shift`.
pub const fn sim_timeout(mtu: u32) -> u8 {
    let need = worst_round_trip_ns(mtu) * 3 / 2;
    let mut e = SIM_TIMEOUT;
    while (4096u64 << e) < need {
        e += 1;
    }
    e
}

/// Packets a link holds before its sender must wait (flow control).
const LINK_CREDITS: usize = 256;
/// Timer expiries on an idle system without a completion (or a WRITE
/// segment's progress) before the run is declared stuck (a retry budget
/// runs out after 8).
const MAX_IDLE_FIRES: u32 = 200;
/// Simulated nanoseconds an idle system must also spend without progress
/// before it is declared stuck: longer than the longest wait a QP can be
/// told to keep (an RNR NAK's timer field 0, 655.36 ms), so a QP sent
/// away for long by an RNR NAK gets its turn however often the other QPs'
/// shorter timers fire meanwhile.
const MAX_IDLE_NS: f64 = 700e6;
/// Wire speed for simulated time: bytes per nanosecond (100 Gb/s).
const WIRE_BYTES_PER_NS: f64 = 12.5;
/// Scheduler steps between progress reports.
const PROGRESS_STEPS: u64 = 4096;

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

/// What the scheduler may draw.
#[derive(Debug, Clone, Copy)]
enum Act {
    Work,
    ReqSend,
    ReqSecondLeg,
    RespWork,
    RespSend,
    RespSecondLeg,
    ToResponder,
    ToRequester,
}

/// Whether the run goes on after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// More can happen.
    Continue,
    /// The run is over: nothing is left to do, or it was cut short.
    Stop,
}

/// Simulated time and the progress marks the stuck check reads.
#[derive(Debug, Default)]
struct Clock {
    /// Simulated nanoseconds.
    ns: f64,
    /// Per requester QP: its retry, RNR and TID retry timers' deadlines.
    timers: Vec<[Deadline; 3]>,
    /// Per responder QP: its reap timer's deadline.
    reap: Vec<Deadline>,
    /// Scheduler steps since the last delivery.
    since_progress: u64,
    /// Timer expiries on an idle system since the last completion.
    idle_fires: u32,
    /// Simulated time of the last completion (or WRITE progress).
    progress_ns: f64,
    /// Bytes the responder-to-requester link carried.
    wire_to_requester: u64,
}

/// One run in progress.
pub struct Scenario<'a, O: Observer> {
    nodes: TwoNodes<SoftPlatform>,
    /// Requests each requester QP has still to post: size, and true for
    /// a WRITE.
    to_post: Vec<VecDeque<(u32, bool)>>,
    to_responder: Link<WirePacket>,
    to_requester: Link<WirePacket>,
    rng: Rng,
    obs: &'a mut O,
    clock: Clock,
    acts: Vec<Act>,
    rep: Report,
    /// Per QP pair: the responder was reset after its requester failed.
    peer_reset: Vec<bool>,
    /// Per QP pair: the faults it met and the retries its requester took.
    ledger: Ledger,
    root: LockToken<'static, Unlocked>,
}

/// Runs one scenario. `pcap` receives every packet the fabric carried.
pub fn run(opts: &Options, faults: RunFaults, pcap: Option<&mut PcapWriter<impl Write>>) -> Report {
    let mut taps = Taps::none();
    taps.pcap = pcap;
    let mut rep = run_observed(opts, faults, &mut taps);
    rep.engine_errors += taps.pcap_errors;
    rep
}

/// Runs one scenario under `obs`.
pub fn run_observed(opts: &Options, faults: RunFaults, obs: &mut impl Observer) -> Report {
    let wall = Instant::now();
    let checks_before = hfi1_hal::sim::lockdep::acquisitions();
    let Some(mut s) = Scenario::new(opts, faults, obs) else {
        return Report {
            engine_errors: 1,
            ..Report::default()
        };
    };
    s.start();
    while s.step() == Flow::Continue {
        s.observe();
    }
    s.report_progress();
    s.last_sample();
    let mut rep = s.finish();
    rep.lock_checks = hfi1_hal::sim::lockdep::acquisitions().saturating_sub(checks_before);
    rep.wall_secs = wall.elapsed().as_secs_f64();
    rep
}

impl<'a, O: Observer> Scenario<'a, O> {
    /// Both nodes, the links and the work of every QP; `None` if a node
    /// cannot be built.
    pub fn new(opts: &Options, faults: RunFaults, obs: &'a mut O) -> Option<Self> {
        let nqps = opts.qps;
        let per_qp = (opts.bytes.div_ceil(u64::from(nqps))).div_ceil(u64::from(PAGE_SIZE))
            * u64::from(PAGE_SIZE);
        let setup = Setup {
            qps: nqps as usize,
            groups: opts.groups as usize,
            pmtu: opts.mtu,
            first_psn: Psn::new(FIRST_PSN),
            seed: opts.seed ^ 0xA5A5,
            region_len: per_qp,
            resp_groups: opts.responder_groups() as usize,
            write_region_len: if opts.ops.writes() { per_qp } else { 0 },
            timeout: sim_timeout(opts.mtu),
            ..Setup::default()
        };
        let nodes = TwoNodes::new(setup)?;
        let to_post = write::requests(opts, (0..nqps).map(|_| read_sizes(opts, per_qp)));
        Some(Self {
            nodes,
            to_post,
            to_responder: Link::new(faults.to_responder),
            to_requester: Link::new(faults.to_requester),
            rng: Rng::new(opts.seed),
            obs,
            clock: Clock {
                timers: vec![[Deadline::default(); 3]; nqps as usize],
                reap: vec![Deadline::default(); nqps as usize],
                ..Clock::default()
            },
            acts: Vec::with_capacity(5),
            peer_reset: vec![false; nqps as usize],
            ledger: Ledger::new(nqps as usize),
            rep: Report {
                requested_bytes: per_qp * u64::from(nqps),
                inputs: opts.clone(),
                per_qp: (0..nqps)
                    .map(|qp| QpReport {
                        qp,
                        ..QpReport::default()
                    })
                    .collect(),
                ..Report::default()
            },
            root: LockToken::root(),
        })
    }

    /// The actions that can happen now. Link-level flow control: a node
    /// sends only while its link has credits, so the wire (one delivery
    /// per step) paces the engines and a packet's time in flight stays
    /// bounded.
    fn ready_actions(&mut self) {
        self.acts.clear();
        if self.nodes.pending_work() > 0 {
            self.acts.push(Act::Work);
        }
        let (a_room, b_room) = (
            self.to_responder.len() < LINK_CREDITS,
            self.to_requester.len() < LINK_CREDITS,
        );
        if self.nodes.pending_sends() > 0 && a_room {
            self.acts.push(Act::ReqSend);
        }
        if self.nodes.pending_tid_sends() > 0 && a_room {
            self.acts.push(Act::ReqSecondLeg);
        }
        if self.nodes.pending_responder_work() > 0 && b_room {
            self.acts.push(Act::RespWork);
        }
        if self.nodes.responders_ready() > 0 && b_room {
            self.acts.push(Act::RespSend);
        }
        if self.nodes.pending_tid_acks() > 0 && b_room {
            self.acts.push(Act::RespSecondLeg);
        }
        if !self.to_responder.is_empty() {
            self.acts.push(Act::ToResponder);
        }
        if !self.to_requester.is_empty() {
            self.acts.push(Act::ToRequester);
        }
    }

    /// One scheduler step: the timers when due, the check for a run that
    /// must end, then one drawn action.
    pub fn step(&mut self) -> Flow {
        self.ready_actions();
        if self.acts.is_empty() {
            let idle_ns = self.clock.ns - self.clock.progress_ns;
            let stuck = self.clock.idle_fires > MAX_IDLE_FIRES && idle_ns > MAX_IDLE_NS;
            if stuck || !self.jump_to_next_deadline() {
                return Flow::Stop;
            }
            self.clock.idle_fires += 1;
            return Flow::Continue;
        }
        if self.rep.steps % 64 == 0 {
            self.fire_due_timers();
        }
        if self.cut_short() {
            return Flow::Stop;
        }
        self.rep.steps += 1;
        self.clock.since_progress += 1;
        let act = self.acts[self.rng.below(self.acts.len() as u64) as usize];
        match act {
            Act::Work => {
                let ran = self.nodes.run_trigger_work(&mut self.root);
                self.note_requester_run(ran);
                self.ship(true);
            }
            Act::ReqSend => {
                let ran = self.nodes.run_requester_send(&mut self.root);
                self.note_requester_run(ran);
                self.ship(true);
            }
            Act::ReqSecondLeg => {
                let ran = self.nodes.run_requester_second_leg(&mut self.root);
                self.note_requester_run(ran);
                self.ship(true);
            }
            Act::RespSend => {
                let ran = self.nodes.run_next_responder(RESP_BUDGET, &mut self.root);
                self.note_responder_run(ran);
            }
            Act::RespWork => {
                let ran = self.nodes.run_responder_work(RESP_BUDGET, &mut self.root);
                self.note_responder_run(ran);
            }
            Act::RespSecondLeg => {
                let ran = self.nodes.run_responder_second_leg(&mut self.root);
                self.rep.write.responder_second_leg_runs += 1;
                self.rep.engine_errors += u64::from(matches!(ran, Some((_, Err(_)))));
                self.ship(false);
            }
            Act::ToResponder => self.deliver_to_responder(),
            Act::ToRequester => self.deliver_to_requester(),
        }
        Flow::Continue
    }

    /// A run that keeps busy without finishing (a livelock) must end too,
    /// and must not eat the machine's memory on the way.
    fn cut_short(&mut self) -> bool {
        let queued = self.to_responder.len() + self.to_requester.len();
        let cut = self.clock.since_progress > STUCK_STEPS
            || self.rep.steps > MAX_STEPS
            || self.nodes.pending_sends() > MAX_QUEUED
            || queued > MAX_QUEUED;
        if cut {
            if std::env::var_os("TID_SIM_DEBUG").is_some() {
                self.debug_cut_short();
            }
            self.rep.engine_errors += u64::from(self.clock.since_progress <= STUCK_STEPS);
        }
        cut
    }

    fn debug_cut_short(&mut self) {
        eprintln!(
            "cut short: steps {} since progress {} sends {} ab {} ba {} resp ready {}",
            self.rep.steps,
            self.clock.since_progress,
            self.nodes.pending_sends(),
            self.to_responder.len(),
            self.to_requester.len(),
            self.nodes.responders_ready()
        );
        for (i, qp) in self.nodes.responders.iter().enumerate() {
            let g = qp.s_lock.lock(&mut self.root);
            if g.ext.responder.has_work(g.ext.state) {
                let r = &g.ext.responder;
                eprintln!("responder {i}: r_psn {:?} {:?}", r.expected_psn(), r.stats);
            }
        }
    }

    /// Counts a requester engine run, takes its completions (a send
    /// engine in the error state flushes) and follows its timers.
    fn note_requester_run(&mut self, ran: Option<tid_harness::world::Ran>) {
        if let Some(r) = ran {
            self.rep.engine_errors += u64::from(r.result.is_err());
            self.take_completions(r.qp);
        }
    }

    /// Counts a responder engine run, follows its reap timer and ships
    /// what it sent.
    fn note_responder_run(&mut self, ran: Option<(usize, Result<bool, EngineError>)>) {
        if let Some((i, r)) = ran {
            self.rep.engine_errors += u64::from(r.is_err());
            self.sync_reap(i);
        }
        self.ship(false);
    }
}
