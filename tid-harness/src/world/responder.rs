// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder node's actions of [`TwoNodes`] (the READ half; the
//! WRITE half's are in `write`): action 2, a packet's delivery to its QP;
//! action 3, the responders with something to send sending it, in turn
//! or all at once.
//!
//! # Locking
//!
//! Every action runs with no lock held (the `root` token) and takes one
//! responder QP's `s_lock` at a time (and, inside the engines, the
//! context's `exp_lock`).

use alloc::vec::Vec;

use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::TidScheduler;
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::qp;
use tid_read_proto::rc::EngineError;

use super::{AtResponder, Node, RESPONDER, TwoNodes, write};

impl<P: Node> TwoNodes<P>
where
    P::Sched: TidScheduler<P::Ref>,
{
    /// Marks responder `i` as having something to send.
    pub(super) fn mark_ready(&mut self, i: usize) {
        if let Some(r) = self.ready.get_mut(i) {
            if !*r {
                *r = true;
                self.ready_queue.push_back(i);
            }
        }
    }

    /// Responders with something to send.
    pub fn responders_ready(&self) -> usize {
        self.ready_queue.len()
    }

    /// Action 2: the responder node receives `bytes`: a TID READ_REQ or
    /// a plain RDMA READ request, or a packet of a WRITE (a TID
    /// WRITE_REQ, a WRITE_DATA through the responder's chip; see
    /// `write`).
    pub fn deliver_to_responder(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> AtResponder {
        if write::opcode(bytes).is_some_and(write::to_responder_write) {
            return self.deliver_write_to_responder(bytes, root);
        }
        let parsed = match packet::parse(bytes) {
            Ok((_, p)) => p,
            Err(e) => return AtResponder::Unparsable(e),
        };
        let i = match parsed {
            Parsed::ReadReq { hdr, .. } => hdr.verbs_qp,
            Parsed::ReadRequest { bth, .. } => bth.dest_qp,
            _ => return AtResponder::Unexpected,
        }
        .wrapping_sub(RESPONDER.qpn) as usize;
        let Some(qp) = self.responders.get(i) else {
            return AtResponder::NoSuchQp;
        };
        let (verdict, work) = {
            let mut g = qp.s_lock.lock(root);
            let v = match parsed {
                Parsed::ReadReq { bth, hdr, payload } => {
                    qp::receive_read_req::<P>(&mut g, bth.psn, &hdr, payload, &self.regions)
                }
                Parsed::ReadRequest { bth, reth } => {
                    qp::receive_plain_read::<P>(&mut g, bth.psn, &reth, &self.regions)
                }
                _ => return AtResponder::Unexpected,
            };
            (v, g.ext.responder.has_work(g.ext.state))
        };
        if work {
            self.mark_ready(i);
        }
        AtResponder::Received { qp: i, verdict }
    }

    /// Action 3: responder `i` sends up to `budget` packets, if it has
    /// something to send (`None` if not). Returns whether more wait.
    pub fn run_responder(
        &mut self,
        i: usize,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Option<Result<bool, EngineError>> {
        if !self.ready.get(i).copied().unwrap_or(false) {
            return None;
        }
        let r = self.send_responses(i, budget, root);
        if !matches!(r, Ok(true)) {
            if let Some(f) = self.ready.get_mut(i) {
                *f = false;
            }
            self.ready_queue.retain(|&k| k != i);
        }
        Some(r)
    }

    /// Action 3, in turn: the responder that became ready first sends up
    /// to `budget` packets, and goes to the back of the line if more wait.
    pub fn run_next_responder(
        &mut self,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Option<(usize, Result<bool, EngineError>)> {
        let i = self.ready_queue.pop_front()?;
        if let Some(f) = self.ready.get_mut(i) {
            *f = false;
        }
        let r = self.send_responses(i, budget, root);
        if matches!(r, Ok(true)) {
            self.mark_ready(i);
        }
        Some((i, r))
    }

    /// Action 3, for all: every responder-node work item runs, every
    /// responder with something to send sends up to `budget` packets, in
    /// QP order, and every TID ACK owed goes.
    pub fn run_responders(
        &mut self,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Vec<(usize, Result<bool, EngineError>)> {
        let mut ran = Vec::new();
        while let Some(r) = self.run_responder_work(budget, root) {
            ran.push(r);
        }
        ran.extend(
            (0..self.responders.len())
                .filter_map(|i| self.run_responder(i, budget, root).map(|r| (i, r))),
        );
        while let Some(r) = self.run_responder_second_leg(root) {
            ran.push(r);
        }
        ran
    }

    fn send_responses(
        &mut self,
        i: usize,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Result<bool, EngineError> {
        let Some(qp) = self.responders.get(i) else {
            return Ok(false);
        };
        let mut g = qp.s_lock.lock(root);
        qp::write_responses_locked(
            &self.resp_rcd,
            qp,
            &mut g,
            &self.regions,
            &self.regions,
            &mut self.to_requesters,
            budget,
        )
    }
}
