// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requesters' retry, RNR and TID retry timers on simulated time: each follows
//! the engine's timer (armed, re-armed, stopped), and when nothing else
//! can happen simulated time jumps to the next deadline.

use super::*;

/// One engine timer's deadline on simulated time: the epoch last seen
/// and when it expires.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Deadline {
    epoch: u32,
    at: Option<f64>,
}

impl Deadline {
    /// Follows the engine's timer: a new epoch sets (or drops) the
    /// deadline from `now`.
    fn follow(&mut self, t: Timer, now: f64) {
        if t.epoch() != self.epoch {
            self.epoch = t.epoch();
            self.at = t.armed().map(|d| now + d as f64);
        }
    }
}

impl<O: Observer> Scenario<'_, O> {
    /// Follows requester `i`'s timers after something touched it.
    pub(super) fn sync_timers(&mut self, i: usize) {
        let now = self.clock.ns;
        let tid = self.nodes.tid_retry_timer(i, &mut self.root);
        if let (Some((retry, rnr)), Some(tid), Some(d)) = (
            self.nodes.timers(i, &mut self.root),
            tid,
            self.clock.timers.get_mut(i),
        ) {
            d[0].follow(retry, now);
            d[1].follow(rnr, now);
            d[2].follow(tid, now);
        }
    }

    /// Follows responder `i`'s reap timer after something touched it.
    pub(super) fn sync_reap(&mut self, i: usize) {
        let now = self.clock.ns;
        if let (Some(t), Some(d)) = (
            self.nodes.reap_timer(i, &mut self.root),
            self.clock.reap.get_mut(i),
        ) {
            d.follow(t, now);
        }
    }

    /// Fires every timer whose deadline passed; returns whether one did.
    pub(super) fn fire_due_timers(&mut self) -> bool {
        let now = self.clock.ns;
        let mut fired = false;
        for i in 0..self.clock.reap.len() {
            if self.clock.reap[i].at.is_some_and(|t| t <= now) {
                self.clock.reap[i].at = None;
                let acted = self.nodes.fire_reap_timer(i, &mut self.root);
                self.rep.write.reap_expiries += u64::from(acted);
                fired |= acted;
                self.sync_reap(i);
            }
        }
        for i in 0..self.clock.timers.len() {
            for which in 0..3 {
                let due = self.clock.timers[i][which].at.is_some_and(|t| t <= now);
                if due {
                    self.clock.timers[i][which].at = None;
                    fired |= self.fire_timer(i, which);
                }
            }
        }
        fired
    }

    /// Nothing can happen but a timer: simulated time jumps to the
    /// earliest deadline and it fires. False if no timer runs.
    pub(super) fn jump_to_next_deadline(&mut self) -> bool {
        let next = self
            .clock
            .timers
            .iter()
            .flat_map(|d| d.iter().filter_map(|d| d.at))
            .chain(self.clock.reap.iter().filter_map(|d| d.at))
            .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.min(t))));
        let Some(at) = next else {
            return false;
        };
        self.clock.ns = self.clock.ns.max(at);
        self.fire_due_timers();
        true
    }

    /// Requester `i`'s retry (`which` 0), RNR (1) or TID retry (2) timer
    /// expires: the engine restarts (or spends its budget, or schedules a
    /// RESYNC), and what completed is taken. Returns whether the engine's
    /// timer was running.
    fn fire_timer(&mut self, i: usize, which: usize) -> bool {
        let fired = match which {
            0 => self.nodes.fire_timer(i, &mut self.root),
            1 => self.nodes.fire_rnr_timer(i, &mut self.root),
            _ => self.nodes.fire_tid_retry_timer(i, &mut self.root),
        };
        self.take_completions(i);
        fired
    }

    /// Takes requester `i`'s completions (a timer or a send engine may
    /// have failed or flushed READs), posts what its queue takes, and
    /// follows its timers.
    pub(super) fn take_completions(&mut self, i: usize) {
        let done = self.nodes.poll(i, &mut self.root);
        if !done.is_empty() {
            self.clock.idle_fires = 0;
            self.clock.progress_ns = self.clock.ns;
        }
        self.count_done(done);
        self.note_retries(i);
        self.reset_peer_of_failed(i);
        self.post_more(i);
        self.sync_timers(i);
    }
}
