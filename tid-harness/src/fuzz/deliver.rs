// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The fuzz world's deliveries and completions: a packet reaching either
//! node, what its verdict says, and every completion checked against
//! what was posted and what the kernel allows.

use hfi1_hal::lock_order::LockToken;
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::rc::WcStatus;
use tid_read_proto::responder::ReqVerdict;

use super::World;
use super::input::describe;
use crate::world::{Arrival, AtResponder, Done};

impl World {
    /// The requester node receives `bytes`; `real` if an engine built
    /// them (they must parse).
    pub(super) fn deliver_to_req(&mut self, bytes: &[u8], real: bool) {
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
            Arrival::WriteResp { verdict, .. } => {
                self.sum.delivered += 1;
                self.write_progress(Some(verdict), None);
            }
            Arrival::TidAck { verdict, .. } => {
                self.sum.delivered += 1;
                self.write_progress(None, Some(verdict));
            }
            _ => {}
        }
        for d in at.done {
            self.complete(d);
        }
    }

    /// The responder node receives `bytes`; `real` if an engine built
    /// them (they must parse).
    pub(super) fn deliver_to_resp(&mut self, bytes: &[u8], real: bool) {
        if self.trace {
            let forged = if real { "" } else { "FORGED " };
            std::eprintln!("-> resp {forged}{}", describe(bytes));
        }
        let mut root = LockToken::root();
        let stale = if real && self.mode.real_only() {
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
            AtResponder::WriteReq { qp, verdict } => {
                self.sum.delivered += 1;
                if self.nodes.responder_stats(&mut root).queue_full != refusals {
                    self.judge_queue_full(qp);
                }
                if self.trace {
                    std::eprintln!("   responder {qp}: {verdict:?}");
                }
            }
            AtResponder::WriteData {
                qp,
                outcome,
                verdict,
            } => {
                self.sum.delivered += 1;
                if self.trace {
                    std::eprintln!("   responder {qp}: {outcome:?} {verdict:?}");
                }
            }
            AtResponder::Resync { qp, verdict } => {
                self.sum.delivered += 1;
                if self.trace {
                    std::eprintln!("   responder {qp}: {verdict:?}");
                }
            }
            AtResponder::NotReceived { opcode, .. } if real => {
                panic!("the requester sent opcode {opcode:#x}, which no responder path takes")
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
    pub(super) fn stale_psn(&self, bytes: &[u8]) -> Option<u32> {
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
    pub(super) fn judge_request(
        &mut self,
        qp: usize,
        verdict: ReqVerdict,
        stale: Option<u32>,
        full: bool,
    ) {
        if let (ReqVerdict::Restarted, Some(p)) = (verdict, stale) {
            self.stale_rearmed[qp].insert(p);
        }
        if full {
            self.judge_queue_full(qp);
        }
    }

    /// Responder `qp` refused a request for a full ack queue: the kernel
    /// fails the same way if a stale duplicate re-armed the blocking
    /// entry.
    fn judge_queue_full(&mut self, qp: usize) {
        let mut root = LockToken::root();
        let g = self.nodes.responders[qp].s_lock.lock(&mut root);
        let full = g.ext.responder.last_queue_full();
        let rearmed = full.is_some_and(|f| self.stale_rearmed[qp].contains(&f.blocker.get()));
        if rearmed || full.is_some_and(|f| !f.held) {
            self.kernel_failure[qp] = true;
        }
    }

    /// Takes requester `i`'s completions and checks them.
    pub(super) fn poll(&mut self, i: usize) {
        for d in self.nodes.poll(i, &mut LockToken::root()) {
            self.complete(d);
        }
    }

    pub(super) fn complete(&mut self, d: Done) {
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
            if self.mode.real_only() && data.mismatched > 0 {
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
            // The application resets the failed connection, as tid-sim
            // does: what responder `i` holds for it (a WRITE segment
            // RNR-NAKed, or allocated and never answered, has no reap
            // timer) comes back only on the QP's reset in 6.1, and
            // would starve the other QPs of the responder's RcvArray.
            self.nodes.reset_responder(i, &mut LockToken::root());
        }
        if self.mode.real_only() && !self.kernel_allows(i, c.status) {
            panic!(
                "QP {i}: request {c:?} failed with only real packets on the wire ({} faults)\n{}",
                self.faults,
                self.state()
            );
        }
    }

    /// Whether requester `i` resent a WRITE_REQ for no bytes (see
    /// [`Self::kernel_allows`]).
    fn empty_write_req(&self, i: usize) -> bool {
        counted(&self.nodes.requesters, i, |qp| {
            qp.requester.write_state().stats.empty_write_req_resends
        })
    }

    /// Whether a duplicate WRITE_REQ moved responder `i`'s send pointer
    /// past an entry not fully answered (see [`Self::kernel_allows`]).
    fn pointer_skipped(&self, i: usize) -> bool {
        counted(&self.nodes.responders, i, |qp| {
            qp.write_responder.stats.send_pointer_skips
        })
    }

    /// How many sequence-error restarts requester `i` made (see
    /// [`Self::kernel_allows`]); 0 if there is no such QP.
    fn seq_restarts(&self, i: usize) -> u64 {
        let Some(qp) = self.nodes.requesters.get(i) else {
            return 0;
        };
        let mut root = LockToken::root();
        let g = qp.s_lock.lock(&mut root);
        g.ext.requester.stats.seq_restarts
    }

    /// Whether the kernel lets QP `i`'s oldest unfinished request end with
    /// `status` when only real packets are on the wire:
    ///
    /// - flushed: always (a teardown, or behind an error);
    /// - retry exceeded: once the schedule injected more faults than the
    ///   retry budget less requester `i`'s sequence-error restarts (a
    ///   correct engine spends at most one retry per fault before it makes
    ///   progress again, but a fault that costs an expiry can also bring a
    ///   late response that the chip's moved-on flow flags, and 6.1's
    ///   `restart_tid_rdma_read_req()` spends a retry on that restart too,
    ///   through `hfi1_restart_rc()`), or after the failure below;
    /// - remote operational error (a TID READ_REQ) or invalid request (a
    ///   plain READ): only after the responder refused a request as "ack
    ///   queue full" while the slot it needed held an entry re-armed by a
    ///   stale duplicate (a request copy delivered after the requester had
    ///   completed it): 6.1's `tid_rdma_rcv_error()` rewinds the send
    ///   pointer to such an entry and its queue-full rule then refuses the
    ///   new request and errors the QP; the NAK is sent (remote error at
    ///   the requester) or dropped because responses were pending (the
    ///   requester's retry budget runs out);
    /// - invalid request (a TID WRITE_REQ) after the responder refused a
    ///   request because the slot it needed was one never filled: 6.1's
    ///   duplicate handling can set the acknowledged pointer past the head
    ///   (a duplicate WRITE_REQ when the send and acknowledged pointers
    ///   meet), each later WRITE_DATA_LAST moves it on again, and the
    ///   resend of an RNR-NAKed WRITE_REQ then finds the empty slot
    ///   "not sent" and NAKs it;
    /// - retry exceeded (a TID WRITE) after a duplicate WRITE_REQ moved
    ///   responder `i`'s send pointer forward past an entry not fully
    ///   answered: a copy of a request already scheduled re-processes
    ///   from its own entry in 6.1 (`tid_rdma_rcv_error()`), the entries
    ///   it passes get no WRITE_RESP, and the requester's resends of the
    ///   first of them find it unanswered until its retries run out;
    /// - invalid request or retry exceeded (a TID WRITE) after requester
    ///   `i` resent a WRITE_REQ for no bytes: its retry timer, left
    ///   running by a WRITE_RESP taken during a resend (6.1's
    ///   `do_rc_ack()`), restarted past the WRITE's last PSN, and 6.1's
    ///   `reset_psn()` resumes that WRITE, whose rest is empty; the
    ///   responder NAKs a zero length, and drops that NAK while responses
    ///   are pending (then the requester's retries run out);
    /// - anything, once responder `i`'s reap timer was fired early and
    ///   errored its QP ([`Mode::WritePair`]: the schedule withheld the
    ///   data past the timer, and the requester then sees NAKs or
    ///   nothing).
    pub(super) fn kernel_allows(&self, i: usize, status: WcStatus) -> bool {
        let queue = self.kernel_failure.get(i).copied().unwrap_or(false);
        if self.reaped.get(i).copied().unwrap_or(false) {
            return true;
        }
        match status {
            WcStatus::Flushed => true,
            WcStatus::RetryExceeded => {
                queue
                    || self.faults + self.seq_restarts(i) > u64::from(self.cfg.retry_cnt)
                    || self.pointer_skipped(i)
                    || self.empty_write_req(i)
            }
            WcStatus::RemoteInvalidRequest => queue || self.empty_write_req(i),
            WcStatus::RemoteOperational => queue,
            _ => false,
        }
    }
}

/// Whether the counter `count` reads from QP `i` of `qps` (under its
/// `s_lock`) is above zero; false if there is no such QP.
fn counted(
    qps: &[crate::platform::SoftQp],
    i: usize,
    count: impl FnOnce(&tid_read_proto::qp::TidQp<crate::platform::SoftPlatform>) -> u64,
) -> bool {
    let Some(qp) = qps.get(i) else {
        return false;
    };
    let mut root = LockToken::root();
    let g = qp.s_lock.lock(&mut root);
    count(&g.ext) > 0
}
