// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's send engine (kernel `hfi1_make_rc_req()`), one request
//! packet per step, by `s_state`:
//!
//! - **start** the READ at `s_cur` (new, or again from its first PSN): it
//!   gets its IB PSNs the first time; the interlock may hold it back; a
//!   plain READ sends its RDMA READ request, a TID READ its first (next)
//!   segment;
//! - **the rest of a plain READ** after a restart in its middle: a request
//!   for the bytes from `s_psn` on;
//! - **a TID READ restart**: the segment holding `s_psn` is found, its
//!   cursors rewound, and its READ_REQ sent again;
//! - **the next segment** of the TID READ at `s_cur`.
//!
//! The TID READ segments and their restart are in `tid`, the plain READ
//! requests in `plain`.
//!
//! After every packet: a restart's `SEND_ONE` turns into `WAIT_ACK`, and
//! the retry timer is armed if it is not running and a READ is
//! outstanding (the kernel arms it at the send completion,
//! `hfi1_rc_send_complete()`).

use tid_flow::FlowPlatform;

use super::wqe::ReqState;
use super::{Env, Requester, SendState};
use crate::qualify::{InterlockState, WqeOp, interlock};
use crate::rc::retry::retry_ns;
use crate::rc::{EngineError, MAX_RD_ATOMIC, PacketSink};
use crate::wire::reth;

mod plain;
mod tid;

/// What one step of the send engine came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// A packet went out: look again.
    Sent,
    /// Nothing more can go now.
    Stop,
}

impl<P: FlowPlatform> Requester<P> {
    /// The send engine with the QP's `s_lock` held: every request packet
    /// that can go now. In the error state it only makes sure every
    /// request has completed. Kernel: `hfi1_make_rc_req()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`); takes `exp_lock` through
    /// `tid-flow`.
    ///
    /// # Errors
    ///
    /// A flow-engine error other than "wait" or a packet that could not be
    /// built: the QP stops sending (a bug the sim's tests would show).
    pub fn send_requests(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
    ) -> Result<(), EngineError> {
        self.send_requests_with(env, sink, &crate::write::requester::NoSource)
    }

    /// [`Self::send_requests`] with the local memory `src` the plain RDMA
    /// WRITEs' payloads are read from (a QP that posts WRITEs runs this
    /// one). Kernel: `hfi1_make_rc_req()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`); takes `exp_lock` through
    /// `tid-flow`.
    ///
    /// # Errors
    ///
    /// As [`Self::send_requests`]; [`crate::packet::PacketError::Source`]
    /// if a WRITE's buffer is not in `src`.
    pub fn send_requests_with(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        src: &dyn crate::rc::SourceData,
    ) -> Result<(), EngineError> {
        loop {
            if !env.state.receives() {
                self.error_qp(env);
                return Ok(());
            }
            if self.flags.wait_ack
                || self.rnr_timer.is_armed()
                || env
                    .locked
                    .flags
                    .contains(hfi1_hal::flags::SFlags::WAIT_HALT)
            {
                return Ok(());
            }
            let step = self.step(env, sink, src)?;
            if let Some(shift) = self.arm_on_send.take() {
                self.arm_after_send(env, shift);
            }
            if step == Step::Stop {
                return Ok(());
            }
        }
    }

    /// The send completion of a request packet: the retry timer starts if
    /// it does not run and a READ is outstanding. Kernel: the timer part
    /// of `hfi1_rc_send_complete()`.
    fn arm_after_send(&mut self, env: &Env<'_, '_, P>, shift: u8) {
        let outstanding = self.sq.acked != self.sq.tail;
        if outstanding
            && env.state.receives()
            && !self.retry_timer.is_armed()
            && !self.rnr_timer.is_armed()
        {
            self.retry_timer.arm(retry_ns(env.conn.timeout, shift));
        }
    }

    /// One packet, by `s_state`.
    fn step(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        src: &dyn crate::rc::SourceData,
    ) -> Result<Step, EngineError> {
        let i = self.sq.cur;
        match self.s_state {
            SendState::Start => self.start(env, sink, src, i),
            SendState::PlainRest => self.plain_rest(env, sink, i),
            SendState::TidRestart => self.tid_restart(env, sink, i),
            SendState::TidWriteRest => self.write_rest(env, sink, i),
            SendState::PlainWrite => self.plain_write_packet(env, sink, src, i),
            SendState::TidNext => {
                let Some(w) = self.sq.get(i) else {
                    self.s_state = SendState::Start;
                    return Ok(Step::Stop);
                };
                let at_start = self.psn == w.psn;
                if w.tid.is_none() || at_start || i == self.sq.tail {
                    self.s_state = SendState::Start;
                    if at_start || i == self.sq.tail {
                        return self.start(env, sink, src, i);
                    }
                    return Ok(Step::Stop);
                }
                if self.at_rd_atomic_limit(env) {
                    return Ok(Step::Stop);
                }
                self.tid_segment(env, sink, i)
            }
        }
    }

    /// `s_num_rd_atomic` at `s_max_rd_atomic`: wait for a read to finish.
    /// Kernel: `RVT_S_WAIT_RDMAR`.
    fn at_rd_atomic_limit(&mut self, env: &Env<'_, '_, P>) -> bool {
        let limit = env.conn.max_rd_atomic.min(MAX_RD_ATOMIC);
        if self.num_rd_atomic >= limit {
            self.flags.wait_rdmar = true;
            return true;
        }
        false
    }

    /// Starts the READ at `i` (new or again from its first PSN). Kernel:
    /// the default case of `hfi1_make_rc_req()`'s `s_state` switch.
    fn start(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        src: &dyn crate::rc::SourceData,
        i: u32,
    ) -> Result<Step, EngineError> {
        if i == self.sq.head() {
            return Ok(Step::Stop);
        }
        let newreq = i == self.sq.tail;
        let pmtu = env.conn.pmtu;
        let next_psn = self.next_psn;
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(Step::Stop);
        };
        if newreq {
            if !w.started {
                w.started = true;
                w.psn = next_psn;
                w.lpsn = next_psn.add(w.psns(pmtu) - 1);
                self.next_psn = w.lpsn.add(1);
            }
            self.psn = w.psn;
        }
        if self.flags.interlock || self.interlocked(i) {
            self.flags.interlock = true;
            return Ok(Step::Stop);
        }
        if self.sq.get(i).is_some_and(|w| w.write.is_some()) {
            return self.start_write(env, sink, src, i, newreq);
        }
        if self.at_rd_atomic_limit(env) {
            return Ok(Step::Stop);
        }
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(Step::Stop);
        };
        let psn = self.psn;
        let Some(t) = w.tid.as_mut() else {
            let r = reth::Repr {
                vaddr: w.remote_addr,
                rkey: w.rkey,
                length: w.length,
            };
            let lpsn = w.lpsn;
            w.counted = true;
            self.num_rd_atomic += 1;
            self.send_plain(env, sink, psn, &r)?;
            self.stats.plain_reads += u64::from(newreq);
            self.sq.cur = i.wrapping_add(1);
            if newreq {
                self.sq.tail = i.wrapping_add(1);
            }
            self.psn = lpsn.add(1);
            self.s_state = SendState::Start;
            return Ok(Step::Sent);
        };
        if newreq {
            let head = t.req.setup_head;
            if t.req.flow(head).is_some_and(|r| r.pagesets.is_empty()) {
                t.req.clear_tail = head;
                t.req.flow_idx = head;
                t.state = ReqState::Active;
            }
        } else if psn == w.psn {
            t.cur_seg = 0;
            t.comp_seg = 0;
            t.ack_pending = 0;
            t.req.flow_idx = t.req.clear_tail;
            t.state = ReqState::Resend;
        }
        t.s_next_psn = psn;
        let step = self.tid_segment(env, sink, i)?;
        if step == Step::Sent && newreq {
            self.sq.tail = i.wrapping_add(1);
            self.stats.requests += 1;
        }
        Ok(step)
    }

    /// True if the READ at `i` must wait for the one before it.
    /// Kernel: `hfi1_tid_rdma_wqe_interlock()`.
    pub(crate) fn interlocked(&self, i: u32) -> bool {
        let op = |w: &super::Wqe<P>| match (&w.write, &w.tid) {
            (Some(x), _) if x.tid.is_some() => WqeOp::TidRdmaWrite,
            (Some(_), _) => WqeOp::RdmaWrite,
            (None, Some(_)) => WqeOp::TidRdmaRead,
            (None, None) => WqeOp::RdmaRead,
        };
        let Some(w) = self.sq.get(i) else {
            return false;
        };
        let prev_w = self.sq.get(i.wrapping_sub(1));
        let prev = prev_w.map_or(WqeOp::Other, op);
        let prev_write_pending = prev_w
            .and_then(|p| p.tid_write())
            .is_some_and(|t| t.ack_seg != t.total_segs);
        let st = InterlockState {
            prev,
            unacked: self.sq.acked != self.sq.cur,
            prev_write_pending,
        };
        interlock(op(w), &st)
    }

    /// A request packet went out: `SEND_ONE` becomes `WAIT_ACK`, and once
    /// the step's bookkeeping is done the timer may start
    /// ([`Self::arm_after_send`], with `shift`). Kernel: the end of
    /// `hfi1_make_rc_req()`.
    pub(crate) fn sent(&mut self, shift: u8) {
        self.stats.read_reqs += 1;
        if self.flags.send_one {
            self.flags.send_one = false;
            self.flags.wait_ack = true;
        }
        self.arm_on_send = Some(shift);
    }
}
