// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The fuzz world's engine runs: posts, the requesters' send engines and
//! wake-ups, the responders' send engines, the requesters' timers, and
//! shipping what they sent onto the fabric's queues.

use hfi1_hal::lock_order::LockToken;
use tid_read_proto::rc::EngineError;

use super::input::{Input, describe};
use super::{HISTORY, MAX_PAGES, MAX_POSTS, Mode, World};
use crate::world::Ran;

impl World {
    /// Posts a READ of 1..=4 pages on QP `i`, laid out in runs the input
    /// picks (a set bit puts a gap before that page).
    pub(super) fn post(&mut self, i: usize, inp: &mut Input<'_>) {
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
    pub(super) fn ship(&mut self, from_req: bool) {
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
    pub(super) fn req_send(&mut self) -> bool {
        let ran = self.nodes.run_requester_send(&mut LockToken::root());
        self.after_requester(ran, "requester send engine")
    }

    /// Runs one queued trigger work item (a wake-up). False if none.
    pub(super) fn req_work(&mut self) -> bool {
        let ran = self.nodes.run_trigger_work(&mut LockToken::root());
        self.after_requester(ran, "requester send engine (woken)")
    }

    /// Checks a requester engine run and ships what it sent.
    pub(super) fn after_requester(&mut self, ran: Option<Ran>, what: &str) -> bool {
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
    pub(super) fn resp_send(&mut self, i: usize, budget: u32) -> bool {
        match self.nodes.run_responder(i, budget, &mut LockToken::root()) {
            None => return false,
            Some(Err(e)) => panic!("responder send engine failed: {e}"),
            Some(Ok(_)) => {}
        }
        self.ship(false);
        true
    }

    /// The timers of requester `i` expire (each only if it runs; the TID
    /// retry timer too in [`Mode::WritePair`]).
    pub(super) fn timeout(&mut self, i: usize) {
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
        if self.mode == Mode::WritePair && self.nodes.fire_tid_retry_timer(i, &mut root) {
            self.faults += 1;
        }
    }
}
