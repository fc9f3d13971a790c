// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's first leg with TID WRITE entries: READ responses as
//! the READ responder sends them, and at a WRITE entry one WRITE_RESP per
//! allocated segment, or the scheduled RNR NAK at the segment boundary.
//! Kernel: `make_rc_ack()` (`TID_OP(WRITE_RESP)`),
//! `hfi1_build_tid_rdma_write_resp()`.

use arrayvec::ArrayVec;
use hfi1_hal::Psn;
use hfi1_hal::consts::MAX_PAGESETS;
use hfi1_hal::flags::TidFlags;
use tid_flow::{ring_count, ring_next};

use super::{AllocCtx, Env, RnrNakState, reap_ns};
use crate::packet::{ACK_SYNDROME, PacketError, build_ack};
use crate::rc::{EngineError, PacketSink, SourceData};
use crate::responder::{AckState, Responder};
use crate::wire::{aeth, tid_entries, write_resp};
use crate::write::{TidReqState, WriteRegions, emit_tid_packet};

/// A sink that counts what goes through it.
struct Counting<'s, S> {
    inner: &'s mut S,
    sent: u32,
}

impl<S: PacketSink> PacketSink for Counting<'_, S> {
    fn buffer(&mut self) -> &mut [u8] {
        self.inner.buffer()
    }

    fn send(&mut self, len: usize) {
        self.sent += 1;
        self.inner.send(len);
    }
}

/// The first leg's response half: up to `budget` packets, READ responses
/// and WRITE_RESPs in ack-queue order. Returns true if it may send more
/// now (a WRITE entry waiting for resources or for its resent request
/// does not count). Kernel: `make_rc_ack()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`env`); takes `exp_lock` through `tid-flow`.
///
/// # Errors
///
/// A packet that could not be built.
pub(crate) fn respond<P: tid_flow::FlowPlatform>(
    env: &mut Env<'_, '_, P>,
    src: &impl SourceData,
    wmrs: &impl WriteRegions,
    sink: &mut impl PacketSink,
    budget: u32,
) -> Result<bool, EngineError> {
    let mut left = budget;
    loop {
        let mut c = Counting {
            inner: &mut *sink,
            sent: 0,
        };
        let more = env
            .rsp
            .send_responses(env.conn, *env.state, src, wmrs, &mut c, left)?;
        left = left.saturating_sub(c.sent);
        if left == 0 || !env.state.receives() {
            return Ok(more);
        }
        let t = env.rsp.tail;
        let at_write = env.rsp.state == AckState::Idle && t != env.rsp.head && env.rsp.is_write(t);
        if at_write && env.pass_answered_write(t) {
            continue;
        }
        if !at_write || !env.write_turn(t, wmrs, sink)? {
            return Ok(more && !at_write);
        }
        left -= 1;
    }
}

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Moves the send pointer past the WRITE entry `t` if every one of its
    /// WRITE_RESPs was sent and none is to be sent again; true if it did.
    /// The pointer comes back to such an entry only when a duplicate
    /// request for an earlier READ rewound it (a stale copy of an
    /// answered READ_REQ): the entry has nothing to send, and the READ
    /// entries behind it wait for the pointer.
    ///
    /// Deviation from 6.1: `make_rc_ack()` goes to the entry's
    /// WRITE_RESP state there, `hfi1_build_tid_rdma_write_resp()` finds
    /// `cur_seg >= alloc_seg` and builds nothing, and the send engine
    /// stops at the entry for good, so every later READ's responses wait
    /// until the requester's retries run out (`tid-sim/tests/mix_faults.rs`:
    /// `an_answered_write_does_not_stop_the_reads_behind_it`).
    fn pass_answered_write(&mut self, t: usize) -> bool {
        let Some(e) = self.w.entries.get(t) else {
            return false;
        };
        let resend = matches!(
            e.state,
            TidReqState::Resend | TidReqState::ResendActive | TidReqState::InitResend
        );
        if resend || e.total_segs == 0 || e.cur_seg < e.total_segs {
            return false;
        }
        if let Some(a) = self.rsp.ack.get_mut(t) {
            a.sent = true;
        }
        self.rsp.tail = Responder::next(t);
        self.rsp.state = AckState::Idle;
        true
    }

    /// One packet for the WRITE entry `t` at the send pointer: the RNR NAK
    /// at its boundary, or the next WRITE_RESP. False if nothing can be
    /// sent for it now.
    fn write_turn(
        &mut self,
        t: usize,
        wmrs: &impl WriteRegions,
        sink: &mut impl PacketSink,
    ) -> Result<bool, EngineError> {
        let Some(e) = self.w.entries.get(t) else {
            return Ok(false);
        };
        if matches!(e.state, TidReqState::Resend | TidReqState::InitResend) {
            return Ok(false);
        }
        if self.w.rnr_nak_state == RnrNakState::Send
            && t == self.w.r_tid_alloc
            && e.cur_seg == e.alloc_seg
        {
            if let Some((syndrome, psn)) = self.w.rnr_nak {
                let a = aeth::Repr {
                    syndrome,
                    msn: self.rsp.msn,
                };
                let n = build_ack(
                    sink.buffer(),
                    self.conn.path,
                    self.conn.remote_verbs_qpn,
                    psn,
                    a,
                )?;
                sink.send(n);
            }
            self.w.rnr_nak_state = RnrNakState::Sent;
            self.w.stats.rnr_sent += 1;
            return Ok(true);
        }
        if !self.build_write_resp(t, wmrs, sink)? {
            return Ok(false);
        }
        let done = self
            .w
            .entries
            .get(t)
            .is_some_and(|e| e.cur_seg == e.total_segs);
        if done {
            // Its region stays referenced until all data is in; the acked
            // pointer moves only at WRITE_DATA_LAST.
            if let Some(a) = self.rsp.ack.get_mut(t) {
                a.sent = true;
            }
            self.rsp.tail = Responder::next(t);
            self.rsp.state = AckState::Idle;
        }
        Ok(true)
    }

    /// Builds the WRITE_RESP of the next segment of entry `t`, trying to
    /// allocate more first; false if no segment is ready (or an RNR NAK
    /// was sent and the resent request has not come). Kernel:
    /// `hfi1_build_tid_rdma_write_resp()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held; takes `exp_lock` through `tid-flow`.
    fn build_write_resp(
        &mut self,
        t: usize,
        wmrs: &impl WriteRegions,
        sink: &mut impl PacketSink,
    ) -> Result<bool, EngineError> {
        let state = self.w.entries.get(t).map(|e| e.state);
        let resend = matches!(state, Some(TidReqState::Resend | TidReqState::ResendActive));
        if !resend {
            self.alloc_resources(wmrs, AllocCtx::SendEngine);
        }
        let Some(e) = self.w.entries.get_mut(t) else {
            return Ok(false);
        };
        let fi = e.req.flow_idx;
        if resend {
            e.req.flow_idx = ring_next(fi);
            if ring_count(e.req.setup_head, e.req.flow_idx) == 0 {
                e.state = TidReqState::Active;
            }
        } else {
            if e.cur_seg >= e.alloc_seg || self.w.rnr_nak_state == RnrNakState::Sent {
                return Ok(false);
            }
            e.state = TidReqState::Active;
            e.req.flow_idx = ring_next(fi);
        }
        let ib_psn = self
            .rsp
            .ack
            .get(t)
            .map_or(Psn::new(0), |a| a.psn.add(e.cur_seg));
        let Some(f) = e.req.flow_mut(fi) else {
            return Ok(false);
        };
        f.psns.resp_ib_psn = ib_psn;
        if !self.emit_write_resp(sink, t, fi)? {
            return Ok(false);
        }
        if let Some(e) = self.w.entries.get_mut(t) {
            e.cur_seg += 1;
        }
        self.w.pending_tid_w_segs += 1;
        self.w.stats.write_resps += 1;
        // Add the reap timer (or push it out, on a resend).
        if resend || !self.w.flags.contains(TidFlags::R_TID_RSC_TIMER) {
            self.w.flags.insert(TidFlags::R_TID_RSC_TIMER);
            self.w.reap.arm(reap_ns(self.conn.remote.timeout));
        }
        Ok(true)
    }

    /// Frames the WRITE_RESP of segment flow `fi` of entry `t`: its IB
    /// PSN, hardware flow, flow PSNs and TID entries. False if the segment
    /// holds no hardware flow.
    fn emit_write_resp(
        &self,
        sink: &mut impl PacketSink,
        t: usize,
        fi: u16,
    ) -> Result<bool, EngineError> {
        let Some(f) = self.w.entries.get(t).and_then(|e| e.req.flow(fi)) else {
            return Ok(false);
        };
        let Some(flow) = f.idx else {
            return Ok(false);
        };
        let (psns, entries, ib_psn) = (&f.psns, &f.tid_entries[..], f.psns.resp_ib_psn);
        let built = write_resp::build(&write_resp::WriteRespFields {
            remote_qp: self.conn.remote.qp,
            remote_jkey: self.conn.remote.jkey,
            remote_verbs_qp: self.conn.remote_verbs_qpn,
            aeth: aeth::Repr {
                syndrome: ACK_SYNDROME,
                msn: self.rsp.msn,
            },
            generation: psns.generation,
            spsn: psns.spsn,
            local_qp: self.conn.local.qp,
            flow,
            ctxt: u8::try_from(self.rcd.ctxt()).unwrap_or(u8::MAX),
            ib_psn,
        });
        let mut payload: ArrayVec<u8, { 4 * MAX_PAGESETS }> = ArrayVec::new();
        payload.extend(core::iter::repeat_n(0, 4 * entries.len()));
        tid_entries::emit(entries, &mut payload).map_err(PacketError::from)?;
        let n = emit_tid_packet(
            sink.buffer(),
            self.conn.path,
            &built.bth,
            write_resp::HEADER_LEN,
            |h| {
                built
                    .header
                    .emit(&mut write_resp::Packet::new_unchecked(h))
                    .map_err(PacketError::from)
            },
            &payload,
        )?;
        sink.send(n);
        Ok(true)
    }
}
