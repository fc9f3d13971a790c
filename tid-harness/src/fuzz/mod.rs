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
//!   is a flush (the kernel's error state), and its peer responder is
//!   reset at once, as the application resets a failed connection (and
//!   as tid-sim does);
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
mod deliver;
mod engines;
mod input;
mod schedule;
mod write;

use alloc::collections::{BTreeSet, VecDeque};
use alloc::vec;
use alloc::vec::Vec;

use hfi1_hal::Psn;
use hfi1_hal::consts::PAGE_SIZE;

pub use input::{FUZZ_REGION_LEN, FUZZ_TID_READ_MIN, Input, describe, mutated, pick, read_setup};
pub use write::write_setup;

use crate::platform::SoftPlatform;
use crate::world::{Setup, TwoNodes};

/// Which packets besides the real ones the schedule may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Mutated READ_RESPs and ACKs, and raw bytes, to the requester.
    RequesterRx,
    /// Mutated READ_REQs, and raw bytes, to the responder.
    ResponderRx,
    /// Only real packets: dropped, duplicated, reordered, replayed.
    Pair,
    /// TID WRITEs (and READs) with only real packets, both nodes' second
    /// legs and trigger work, the TID retry and reap timers, and RNR
    /// pressure (see `write`).
    WritePair,
}

impl Mode {
    /// True for the modes that put only real packets on the wire, where a
    /// failed request must be one the kernel allows.
    fn real_only(self) -> bool {
        matches!(self, Self::Pair | Self::WritePair)
    }
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
// Every READ a QP posts over an input fits in its region.
const _: () = assert!(MAX_POSTS as u64 * MAX_PAGES as u64 * PAGE_SIZE as u64 <= FUZZ_REGION_LEN);

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
    /// Per QP pair: the responder's reap timer was fired early and
    /// errored it ([`Mode::WritePair`]).
    reaped: Vec<bool>,
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
            reaped: vec![false; cfg.qps],
        }
    }
}

/// Runs one fuzz input in `mode`.
pub fn run(mode: Mode, data: &[u8]) -> Summary {
    let mut inp = Input::new(data);
    let write = mode == Mode::WritePair;
    let cfg = if write {
        write_setup(&mut inp)
    } else {
        read_setup(&mut inp)
    };
    let mut w = World::new(mode, cfg);
    for i in 0..cfg.qps {
        let n = 1 + inp.below(2);
        for _ in 0..n {
            if write {
                w.post_any(i, &mut inp);
            } else {
                w.post(i, &mut inp);
            }
        }
    }
    w.check();
    let mut steps = 0;
    while !inp.is_empty() && steps < MAX_STEPS {
        if write {
            w.step_write(&mut inp);
        } else {
            w.step(&mut inp);
        }
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
