// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The fuzz world's schedule: one step per input byte (engine runs,
//! deliveries, faults, timer expiries, posts, forged packets) and the
//! fault-free drain at the end.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use hfi1_hal::lock_order::LockToken;

use super::input::{Input, describe, mutated, pick};
use super::{DRAIN_STEPS, IDLE_FIRES, Mode, World};

impl World {
    /// Runs one schedule step.
    pub(super) fn step(&mut self, inp: &mut Input<'_>) {
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
    pub(super) fn queue(&mut self, inp: &mut Input<'_>) -> &mut VecDeque<Vec<u8>> {
        if inp.u8() & 1 == 0 {
            &mut self.to_resp
        } else {
            &mut self.to_req
        }
    }

    /// Drops a packet in flight.
    pub(super) fn fault_drop(&mut self, inp: &mut Input<'_>) {
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
    pub(super) fn fault_duplicate(&mut self, inp: &mut Input<'_>) {
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
    pub(super) fn fault_replay(&mut self, inp: &mut Input<'_>) {
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
    pub(super) fn forge_mutated(&mut self, inp: &mut Input<'_>) {
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
            Mode::Pair | Mode::WritePair => {
                if let Some(p) = self.to_req.pop_front() {
                    self.deliver_to_req(&p, true);
                }
            }
        }
    }

    /// Injects raw bytes ([`Mode::Pair`]: delivers the head of the
    /// responder-bound queue instead).
    pub(super) fn forge_raw(&mut self, inp: &mut Input<'_>) {
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
            Mode::Pair | Mode::WritePair => {
                if let Some(p) = self.to_resp.pop_front() {
                    self.deliver_to_resp(&p, true);
                }
            }
        }
    }

    /// Lets the fabric run without faults until nothing is left to do,
    /// firing the retry timers when everything is idle. Returns whether
    /// every request completed.
    pub(super) fn drain(&mut self) -> bool {
        let mut idle_fires = 0u32;
        for _ in 0..DRAIN_STEPS {
            let mut busy = false;
            while self.req_work() {
                busy = true;
            }
            while self.req_send() {
                busy = true;
            }
            if self.mode == Mode::WritePair {
                while self.req_second_leg() {
                    busy = true;
                }
                while self.resp_work(16) {
                    busy = true;
                }
            }
            for i in 0..self.cfg.qps {
                busy |= self.resp_send(i, 16);
            }
            if self.mode == Mode::WritePair {
                while self.resp_second_leg() {
                    busy = true;
                }
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
