// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA WRITE half of [`TwoNodes`]: WRITEs posted on the requester
//! node from source pages holding the data pattern, their packets
//! delivered to the responder node (WRITE_REQ and RESYNC eagerly under
//! the QP's `r_lock`, WRITE_DATA through the responder's chip into the
//! scattered pages of its writable region, with the KDETH error path for
//! what the chip flags), both nodes' second legs (the requester's
//! WRITE_DATA and RESYNC, the responder's TID ACK) run from their
//! schedulers' TID-send queues, the TID retry and reap timers, and a
//! WRITE's completion checked byte for byte against the responder's
//! pages.
//!
//! The responder has no receive path yet for a plain RDMA WRITE: it is
//! reported [`AtResponder::NotReceived`] and dropped.
//!
//! # Locking
//!
//! Every action runs with no lock held (the `root` token). A delivery to
//! the responder takes the QP's `r_lock`, then (inside the engines) its
//! `s_lock` and the responder context's `exp_lock`; the second legs and
//! the timer take one QP's `s_lock`.

use alloc::vec::Vec;

use hfi1_hal::FlowPsn;
use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_RESYNC, OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST,
    OP_TID_RDMA_WRITE_REQ, OP_TID_RDMA_WRITE_RESP,
};
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::TidScheduler;
use tid_flow::Sge;
use tid_read_proto::packet::PacketError;
use tid_read_proto::qp;
use tid_read_proto::rc::retry::Timer;
use tid_read_proto::rc::{Completion, EngineError};
use tid_read_proto::wire::{self, frame, tid_ack, write_data, write_req, write_resp};
use tid_read_proto::write::requester::WriteWr;
use tid_read_proto::write::second_leg;

use super::{
    Arrival, AtResponder, Node, Posted, REQUESTER, RESPONDER, Ran, TwoNodes, WRITE_RKEY_BASE,
    write_region_base,
};
use crate::chip::{self, ArrivingData};
use crate::doubles::{self, MemSource};

/// True if `op` is a packet of the WRITE family the responder receives
/// (TID WRITE_REQ, WRITE_DATA, RESYNC, and the plain RDMA WRITE opcodes
/// 0x06..=0x0B).
pub(super) fn to_responder_write(op: u8) -> bool {
    matches!(
        op,
        OP_TID_RDMA_WRITE_REQ
            | OP_TID_RDMA_WRITE_DATA
            | OP_TID_RDMA_WRITE_DATA_LAST
            | OP_TID_RDMA_RESYNC
            | 0x06..=0x0B
    )
}

/// True if `op` is a WRITE_RESP or a TID ACK (what the requester receives
/// of a TID WRITE beyond the RC ACK).
pub(super) fn to_requester_write(op: u8) -> bool {
    matches!(op, OP_TID_RDMA_WRITE_RESP | OP_TID_RDMA_ACK)
}

/// The BTH opcode of a 9B packet, if it is long enough.
pub(super) fn opcode(bytes: &[u8]) -> Option<u8> {
    bytes.get(8).copied()
}

fn wire_err(e: wire::Error) -> PacketError {
    PacketError::Wire(e)
}

/// The verbs QP a packet of the WRITE family is for: the one a TID
/// WRITE_REQ's, WRITE_DATA's or RESYNC's header names; for a plain RDMA
/// WRITE, the BTH's destination.
fn write_verbs_qp(f: &frame::Frame<'_>) -> wire::Result<u32> {
    match f.bth.opcode {
        OP_TID_RDMA_WRITE_REQ => write_req::Packet::new_checked(f.body)
            .and_then(|v| write_req::Repr::parse(&v))
            .map(|h| h.verbs_qp),
        OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST | OP_TID_RDMA_RESYNC => {
            write_data::Packet::new_checked(f.body)
                .and_then(|v| write_data::Repr::parse(&v))
                .map(|h| h.verbs_qp)
        }
        _ => Ok(f.bth.dest_qp),
    }
}

impl<P: Node> TwoNodes<P>
where
    P::Sched: TidScheduler<P::Ref>,
{
    /// True if requester `i` may post a WRITE of `len` bytes now: its
    /// send queue has room and the next bytes of its writable region
    /// (wrapping to its start) overlap no WRITE of it in flight.
    pub fn can_post_write(&self, i: usize, len: u32, root: &mut LockToken<'_, Unlocked>) -> bool {
        self.can_post(i, root) && self.next_write_range(i, len).is_some()
    }

    /// Where requester `i`'s next WRITE of `len` bytes goes: the next
    /// bytes of its writable region, or its start if they do not fit;
    /// `None` if that overlaps a WRITE in flight or the region is smaller.
    fn next_write_range(&self, i: usize, len: u32) -> Option<u64> {
        let base = write_region_base(i);
        let size = self.setup.write_region_len;
        let next = *self.next_write.get(i)?;
        let len = u64::from(len);
        let at = if next + len <= base + size {
            next
        } else {
            base
        };
        let fits = at + len <= base + size;
        let overlaps = self
            .posted(i)
            .any(|p| p.write && p.remote < at + len && at < p.remote + u64::from(p.length));
        (fits && !overlaps).then_some(at)
    }

    /// Posts an RDMA WRITE on requester `i` from `sges` (their pages join
    /// the requester node's memory, filled with the source bytes of the
    /// remote range) to the next bytes of its writable region. One of at
    /// least 256 KiB with page-multiple length goes as a TID WRITE, any
    /// other as a plain RDMA WRITE (which the responder cannot receive
    /// yet). Returns the work-request id.
    ///
    /// # Errors
    ///
    /// [`EngineError::QueueFull`] if the region has no room
    /// ([`Self::can_post_write`]); what the requester refused the WRITE
    /// with (its pages leave the memory again).
    pub fn post_write(
        &mut self,
        i: usize,
        sges: Vec<Sge>,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Result<u64, EngineError> {
        let length: u32 = sges.iter().map(|s| s.length).sum();
        let remote = self
            .next_write_range(i, length)
            .ok_or(EngineError::QueueFull)?;
        let qp = self.requesters.get(i).ok_or(EngineError::QueueFull)?;
        doubles::map(&mut self.mem, &sges);
        doubles::fill_data(&mut self.mem, &sges, remote);
        let wr_id = self.next_wr;
        let r = {
            let mut g = qp.s_lock.lock(root);
            let wr = WriteWr {
                wr_id,
                remote_addr: remote,
                rkey: WRITE_RKEY_BASE.wrapping_add(u32::try_from(i).unwrap_or(u32::MAX)),
                sges: &sges,
            };
            qp::post_write(&self.rcd, qp, &mut g, &wr)
        };
        if let Err(e) = r {
            doubles::unmap(&mut self.mem, &sges);
            return Err(e);
        }
        if let Some(n) = self.next_write.get_mut(i) {
            *n = remote + u64::from(length);
        }
        self.next_wr += 1;
        if let Some(p) = self.posted.get_mut(i) {
            let p2 = Posted {
                wr_id,
                write: true,
                remote,
                sges,
                length,
            };
            p.insert(wr_id, p2);
        }
        Ok(wr_id)
    }

    /// A WRITE's completion: a successful one's bytes in the responder's
    /// pages are compared with the source, then (whatever the status) the
    /// pages are wiped, so a later WRITE to them is checked on its own
    /// bytes, and the source pages leave the requester's memory.
    pub(super) fn finish_write(&mut self, i: usize, p: &Posted, c: &Completion) -> Option<Check> {
        let pages = self
            .regions
            .writable(i)
            .map(|r| r.pages_of(p.remote, u64::from(p.length)))
            .unwrap_or(&[]);
        let ok = c.status == tid_read_proto::rc::WcStatus::Success;
        let check = ok.then(|| doubles::check_data(&self.resp_mem, pages, p.remote));
        doubles::wipe(&mut self.resp_mem, pages);
        doubles::unmap(&mut self.mem, &p.sges);
        check
    }

    /// Action 2, for the WRITE family: the responder node receives a
    /// WRITE_REQ (eagerly, under the QP's `r_lock`) or a WRITE_DATA
    /// (through its chip's expected receive, then software if the chip
    /// hands it over). A TID ACK it makes owed schedules the QP's second
    /// leg; anything it makes sendable marks the QP ready.
    pub(super) fn deliver_write_to_responder(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> AtResponder {
        let f = match frame::parse(bytes) {
            Ok(f) => f,
            Err(e) => return AtResponder::Unparsable(wire_err(e)),
        };
        let op = f.bth.opcode;
        let i = match write_verbs_qp(&f) {
            Ok(q) => q.wrapping_sub(RESPONDER.qpn) as usize,
            Err(e) => return AtResponder::Unparsable(wire_err(e)),
        };
        let (Some(qp), Some(rl)) = (self.responders.get(i), self.r_locks.get(i)) else {
            return AtResponder::NoSuchQp;
        };
        let Some(rl) = rl else {
            return AtResponder::NoReceiveLock;
        };
        let at = {
            let mut r = rl.lock(root);
            match op {
                OP_TID_RDMA_WRITE_REQ => {
                    let Ok(h) = write_req::Packet::new_checked(f.body)
                        .and_then(|v| write_req::Repr::parse(&v))
                    else {
                        return AtResponder::Unexpected;
                    };
                    let verdict = qp::receive_write_req(
                        &self.resp_rcd,
                        qp,
                        r.token(),
                        f.bth.psn,
                        &h,
                        &self.regions,
                    );
                    AtResponder::WriteReq { qp: i, verdict }
                }
                OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST => {
                    let Ok(v) = write_data::Packet::new_checked(f.body) else {
                        return AtResponder::Unexpected;
                    };
                    let Ok(h) = write_data::Repr::parse(&v) else {
                        return AtResponder::Unexpected;
                    };
                    let pkt = ArrivingData {
                        dest_qp: f.bth.dest_qp,
                        psn: FlowPsn::from_raw(f.bth.psn.get()),
                        last_of_request: op == OP_TID_RDMA_WRITE_DATA_LAST,
                        hdr: &h,
                        payload: v.payload(),
                    };
                    let (outcome, verdict) = chip::receive_write_data(
                        &self.resp_rcd,
                        qp,
                        r.token(),
                        &mut self.resp_mem,
                        pkt,
                        &self.regions,
                    );
                    AtResponder::WriteData {
                        qp: i,
                        outcome,
                        verdict,
                    }
                }
                OP_TID_RDMA_RESYNC => {
                    let psn = FlowPsn::from_raw(f.bth.psn.get());
                    let verdict = qp::receive_resync(&self.resp_rcd, qp, r.token(), psn);
                    AtResponder::Resync { qp: i, verdict }
                }
                _ => AtResponder::NotReceived { qp: i, opcode: op },
            }
        };
        self.after_responder_receive(i, root);
        at
    }

    /// After a WRITE packet reached responder `i`: a TID ACK owed
    /// schedules its second leg, and its first leg gets a turn.
    fn after_responder_receive(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) {
        let Some(qp) = self.responders.get(i) else {
            return;
        };
        let owed = qp.s_lock.lock(root).ext.write_responder.ack_pending();
        if owed {
            self.resp_rcd.sched.schedule_tid_send(0, qp);
        }
        self.mark_ready(i);
    }

    /// Action 4, for WRITE_RESP and TID ACK: the requester node receives
    /// one eagerly (no TID data) on the QP its header names; returns what
    /// became of it and that QP's completions.
    pub(super) fn arrive_write(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> (Arrival, Vec<Completion>) {
        let f = match frame::parse(bytes) {
            Ok(f) => f,
            Err(e) => return (Arrival::Unparsable(wire_err(e)), Vec::new()),
        };
        let body = f.body;
        let parsed = match f.bth.opcode {
            OP_TID_RDMA_WRITE_RESP => write_resp::Packet::new_checked(body)
                .and_then(|v| Ok(Ok((write_resp::Repr::parse(&v)?, v)))),
            _ => tid_ack::Packet::new_checked(body)
                .and_then(|v| tid_ack::Repr::parse(&v))
                .map(Err),
        };
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => return (Arrival::Unparsable(wire_err(e)), Vec::new()),
        };
        let verbs_qp = match &parsed {
            Ok((h, _)) => h.verbs_qp,
            Err(h) => h.verbs_qp,
        };
        let i = verbs_qp.wrapping_sub(REQUESTER.qpn) as usize;
        let Some(qp) = self.requesters.get(i) else {
            return (Arrival::NoSuchQp, Vec::new());
        };
        let mut g = qp.s_lock.lock(root);
        let arrival = match parsed {
            Ok((h, v)) => Arrival::WriteResp {
                qp: i,
                verdict: qp::receive_write_resp(&self.rcd, qp, &mut g, f.bth.psn, &h, v.payload()),
            },
            Err(h) => Arrival::TidAck {
                qp: i,
                verdict: qp::receive_tid_ack(
                    &self.rcd,
                    qp,
                    &mut g,
                    FlowPsn::from_raw(f.bth.psn.get()),
                    &h,
                ),
            },
        };
        let mut taken = Vec::new();
        while let Some(c) = g.ext.requester.poll() {
            taken.push(c);
        }
        (arrival, taken)
    }

    /// TID-send work items queued on the requester node (second legs).
    pub fn pending_tid_sends(&self) -> usize {
        self.rcd.sched.pending_tid_sends()
    }

    /// Action 1c: runs the oldest requester second leg (its WRITE_DATA
    /// and RESYNCs). `None` if none is queued. Kernel: the iowait work
    /// `hfi1_do_tid_send()` runs on.
    pub fn run_requester_second_leg(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let (_, qp) = self.rcd.sched.pop_tid_send()?;
        let src = MemSource(&self.mem);
        let result = second_leg::do_tid_send(&self.rcd, &qp, root, &mut self.to_responders, &src)
            .map(|_| ());
        Some(Ran {
            qp: Self::requester_index(&qp),
            result,
        })
    }

    /// Responder-node work waiting: trigger work items (a QP woken from
    /// the responder context's wait queues) and scheduled sends.
    pub fn pending_responder_work(&self) -> usize {
        self.resp_rcd.sched.pending_work() + self.resp_rcd.sched.pending_sends()
    }

    /// Action 3b: runs the oldest responder-node trigger work item (the
    /// woken QP's first leg, which allocates and sends up to `budget`
    /// packets), or else takes a scheduled send and marks its QP ready.
    /// Returns the QP, or `None` if nothing waited.
    pub fn run_responder_work(
        &mut self,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Option<(usize, Result<bool, EngineError>)> {
        if let Some((_, qp)) = self.resp_rcd.sched.pop_work() {
            let i = qp.qpn().wrapping_sub(RESPONDER.qpn) as usize;
            let (rcd, regions, out) = (&self.resp_rcd, &self.regions, &mut self.to_requesters);
            let mut result = Ok(false);
            qp_wait::trigger_resume::<P>(qp, root, |qp, root| {
                result = qp::send_write_responses(rcd, qp, root, regions, regions, out, budget);
            });
            if matches!(result, Ok(true)) {
                self.mark_ready(i);
            }
            return Some((i, result));
        }
        let qp = self.resp_rcd.sched.pop_send()?;
        let i = qp.qpn().wrapping_sub(RESPONDER.qpn) as usize;
        self.mark_ready(i);
        Some((i, Ok(true)))
    }

    /// TID-send work items queued on the responder node (TID ACKs owed).
    pub fn pending_tid_acks(&self) -> usize {
        self.resp_rcd.sched.pending_tid_sends()
    }

    /// Action 3c: the oldest responder second leg sends the TID ACK (or
    /// TID NAK) its QP owes. Returns the QP and whether one went, or
    /// `None` if none is queued. Kernel: `hfi1_do_tid_send()` →
    /// `make_tid_rdma_ack()`.
    pub fn run_responder_second_leg(
        &mut self,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Option<(usize, Result<bool, EngineError>)> {
        let (_, qp) = self.resp_rcd.sched.pop_tid_send()?;
        let i = qp.qpn().wrapping_sub(RESPONDER.qpn) as usize;
        let r = qp::send_tid_ack(&self.resp_rcd, &qp, root, &mut self.to_requesters);
        Some((i, r))
    }

    /// Requester `i`'s TID retry timer (armed while a TID WRITE segment
    /// waits for its TID ACK).
    pub fn tid_retry_timer(&self, i: usize, root: &mut LockToken<'_, Unlocked>) -> Option<Timer> {
        let qp = self.requesters.get(i)?;
        let g = qp.s_lock.lock(root);
        Some(g.ext.requester.write_state().tid_retry_timer())
    }

    /// Responder `i`'s reap timer (armed while a WRITE_RESP waits for its
    /// data).
    pub fn reap_timer(&self, i: usize, root: &mut LockToken<'_, Unlocked>) -> Option<Timer> {
        let qp = self.responders.get(i)?;
        let g = qp.s_lock.lock(root);
        Some(g.ext.write_responder.reap_timer())
    }

    /// Action 5d, for one QP: responder `i`'s reap timer expires under its
    /// `r_lock` (if a WRITE_RESP still waits for data, the QP errors and
    /// gives everything back). Returns true if it acted. Kernel:
    /// `hfi1_tid_timeout()`.
    pub fn fire_reap_timer(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        let (Some(qp), Some(Some(rl))) = (self.responders.get(i), self.r_locks.get(i)) else {
            return false;
        };
        let mut r = rl.lock(root);
        qp::reap_timeout(&self.resp_rcd, qp, r.token(), &self.regions)
    }

    /// Action 5c, for one QP: requester `i`'s TID retry timer expires
    /// (a RESYNC is scheduled, or the budget is spent). Returns true if
    /// it was running. Kernel: `hfi1_tid_retry_timeout()`.
    pub fn fire_tid_retry_timer(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        let Some(qp) = self.requesters.get(i) else {
            return false;
        };
        let mut g = qp.s_lock.lock(root);
        qp::tid_retry_timeout(&self.rcd, qp, &mut g)
    }
}

/// What a WRITE's check found (the READ's type).
pub(super) type Check = doubles::DataCheck;
