// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The links' half of a run: what the engines sent goes onto the links
//! (through the fault injector), and one packet at a time crosses to its
//! node, whose answer is counted; completions are matched, and a failed
//! one's status is checked against what the fabric explains.

use tid_read_proto::write::requester::{TidAckVerdict, WriteRespVerdict};

use super::*;

impl<O: Observer> Scenario<'_, O> {
    /// Moves what one node's engines sent onto its link: the requester's
    /// to the responder or the other way. The packets the fault injector
    /// dropped are shown to the observer and recycled.
    pub(super) fn ship(&mut self, from_requester: bool) {
        let (outbox, link, interface) = if from_requester {
            (&mut self.nodes.to_responders, &mut self.to_responder, 0)
        } else {
            (&mut self.nodes.to_requesters, &mut self.to_requester, 1)
        };
        let dropped = ship(outbox, link, &mut self.rng);
        for (bytes, flow) in dropped {
            self.ledger
                .fault(pair_of(interface, flow), crate::explain::Fault::Drop);
            self.seen(interface, self.clock.ns, &bytes, Fate::Dropped);
            let outbox = if from_requester {
                &mut self.nodes.to_responders
            } else {
                &mut self.nodes.to_requesters
            };
            outbox.recycle(bytes);
        }
    }

    /// One packet crosses to the responder node.
    pub(super) fn deliver_to_responder(&mut self) {
        let Some(p) = self.take_delivery(0) else {
            return;
        };
        let at = self.nodes.deliver_to_responder(&p.bytes, &mut self.root);
        if let Some(i) = at.qp() {
            self.sync_reap(i);
        }
        match at {
            AtResponder::Received { .. } | AtResponder::WriteReq { .. } => {}
            AtResponder::Resync { .. } => self.rep.write.resyncs_received += 1,
            AtResponder::WriteData { outcome, .. } => {
                self.rep.write.suppressed += u64::from(!outcome.delivered);
                self.rep.write.kdeth_errors += u64::from(outcome.error.is_some());
            }
            AtResponder::NotReceived { .. } => self.rep.write.not_received += 1,
            _ => self.rep.malformed += 1,
        }
        self.nodes.to_responders.recycle(p.bytes);
    }

    /// One packet crosses to the requester node; the QP it reached posts
    /// more.
    pub(super) fn deliver_to_requester(&mut self) {
        let Some(p) = self.take_delivery(1) else {
            return;
        };
        self.clock.wire_to_requester += p.bytes.len() as u64;
        let AtRequester { arrival, done } =
            self.nodes.deliver_to_requester(&p.bytes, &mut self.root);
        self.nodes.to_requesters.recycle(p.bytes);
        // A WRITE moves on segment by segment: a segment acknowledged or
        // a response taken is progress as much as a completion is.
        let write_progress = matches!(
            arrival,
            Arrival::TidAck {
                verdict: TidAckVerdict::Acked { segments: 1.., .. },
                ..
            } | Arrival::WriteResp {
                verdict: WriteRespVerdict::Taken,
                ..
            }
        );
        let i = match arrival {
            Arrival::ReadResp { qp, verdict, .. } => {
                match verdict {
                    Some(Ok(_)) => {}
                    Some(Err(_)) => self.rep.engine_errors += 1,
                    None => self.rep.suppressed += 1,
                }
                qp
            }
            Arrival::Ack { qp, .. }
            | Arrival::ReadResponse { qp, .. }
            | Arrival::WriteResp { qp, .. }
            | Arrival::TidAck { qp, .. } => qp,
            _ => {
                self.rep.malformed += 1;
                return;
            }
        };
        if !done.is_empty() || write_progress {
            self.clock.idle_fires = 0;
            self.clock.progress_ns = self.clock.ns;
        }
        self.count_done(done);
        self.note_retries(i);
        self.reset_peer_of_failed(i);
        self.post_more(i);
        self.sync_timers(i);
    }

    /// Enters requester `i`'s retries so far (RC restarts and TID retry
    /// expiries) in the ledger.
    pub(super) fn note_retries(&mut self, i: usize) {
        let Some(qp) = self.nodes.requesters.get(i) else {
            return;
        };
        let total = {
            let g = qp.s_lock.lock(&mut self.root);
            let r = &g.ext.requester;
            r.stats.restarts + r.write_state().stats.tid_retry_expiries
        };
        self.ledger.retries(i, total);
    }

    /// Once requester `i` is in the error state, its peer responder is
    /// reset (once), as the application resets a failed connection:
    /// nothing will ever complete what the responder still holds for it
    /// (a WRITE segment RNR-NAKed, or allocated and never answered, has
    /// no reap timer running), and 6.1 gives those TIDs and the flow back
    /// only on the QP's reset (`hfi1_qp_kern_exp_rcv_clear_all()`).
    pub(super) fn reset_peer_of_failed(&mut self, i: usize) {
        if self.peer_reset.get(i).copied().unwrap_or(true) {
            return;
        }
        let (req, _) = self.nodes.states(i, &mut self.root);
        if req == tid_read_proto::rc::QpState::Error {
            self.peer_reset[i] = true;
            self.nodes.reset_responder(i, &mut self.root);
            self.sync_reap(i);
        }
    }

    /// Counts completions (see `count_completion`); a completion without
    /// its posted READ is an engine error.
    pub(super) fn count_done(&mut self, done: Vec<tid_harness::world::Done>) {
        for d in done {
            if d.posted.is_none() {
                self.rep.engine_errors += 1;
                continue;
            }
            self.count_completion(&d);
        }
    }

    /// Whether a faulty fabric explains a READ failing with `status`, as
    /// the kernel fails it: the retry budget ran out; flushed behind an
    /// error; or a remote error after the responder refused a request for
    /// a full ack queue (6.1's rule once stale duplicates re-armed its
    /// entries, see `tid-harness`'s fuzz world).
    pub(super) fn fabric_explains(&mut self, status: WcStatus) -> bool {
        match status {
            WcStatus::RetryExceeded | WcStatus::Flushed => true,
            WcStatus::RemoteOperational | WcStatus::RemoteInvalidRequest => {
                self.nodes.responder_stats(&mut self.root).queue_full > 0
            }
            _ => false,
        }
    }
}

/// The QP pair a packet on link `link` (0 to the responder, 1 to the
/// requester) belongs to, from its flow (the verbs QP it was sent to).
pub(super) fn pair_of(link: u8, flow: u32) -> usize {
    let base = if link == 0 {
        tid_harness::world::RESPONDER.qpn
    } else {
        tid_harness::world::REQUESTER.qpn
    };
    flow.wrapping_sub(base) as usize
}
