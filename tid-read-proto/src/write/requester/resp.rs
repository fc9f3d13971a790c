// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A WRITE_RESP at the requester (kernel
//! `hfi1_rc_rcv_tid_rdma_write_resp()`): the RC filter, the TID WRITE at
//! `s_tid_cur`, room in its ring, `do_rc_ack()` (last, since it changes
//! state), then the segment is recorded from the response (its TID
//! entries, `tid_flow_qp`, flow PSN, IB PSN), `s_tid_cur` moves on once
//! every response of the request is in, and the second leg is scheduled.

use arrayvec::ArrayVec;
use hfi1_hal::consts::{MAX_PAGESETS, PAGE_SIZE};
use hfi1_hal::flags::SFlags;
use hfi1_hal::services::TidScheduler;
use hfi1_hal::{Psn, TidEntry};
use tid_flow::{FlowPlatform, RemoteSegment};

use crate::qualify::div_round_up_mtu;
use crate::rc::retry::retry_ns;
use crate::rc::{WcStatus, sq};
use crate::requester::ack::RespOp;
use crate::requester::{Env, Requester, SendState};
use crate::wire::{tid_entries, write_resp};
use crate::write::TidReqState;

/// What a WRITE_RESP did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum WriteRespVerdict {
    /// Dropped: stale, ahead, no TID WRITE collecting responses, no room
    /// in its ring, or refused by `do_rc_ack()`.
    Dropped,
    /// Recorded; the second leg was scheduled.
    Taken,
    /// Its TID list was bad: the QP is in the error state.
    Fatal(WcStatus),
}

impl<P: FlowPlatform> Requester<P> {
    /// Receives a WRITE_RESP with IB PSN `psn`, header `hdr` and TID
    /// entries `payload`. Kernel: `hfi1_rc_rcv_tid_rdma_write_resp()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`); the error path takes `exp_lock`
    /// through `tid-flow`.
    pub fn receive_write_resp(
        &mut self,
        env: &mut Env<'_, '_, P>,
        psn: Psn,
        hdr: &write_resp::Repr,
        payload: &[u8],
    ) -> WriteRespVerdict
    where
        P::Sched: TidScheduler<P::Ref>,
    {
        if !self.takes(env, psn) {
            self.write.stats.write_resps_dropped += 1;
            return WriteRespVerdict::Dropped;
        }
        let Some(cur) = self.write.s_tid_cur else {
            self.write.stats.write_resps_dropped += 1;
            return WriteRespVerdict::Dropped;
        };
        let room = self
            .sq
            .get(cur)
            .and_then(|w| w.tid_write())
            .map(|t| t.req.unacked_remote() < hfi1_hal::consts::MAX_FLOWS as u16 - 1);
        if room != Some(true) {
            self.write.stats.write_resps_dropped += 1;
            return WriteRespVerdict::Dropped;
        }
        if !self.do_rc_ack(env, &hdr.aeth, psn, RespOp::TidWriteResp) {
            self.write.stats.write_resps_dropped += 1;
            return WriteRespVerdict::Dropped;
        }
        let pmtu = env.conn.pmtu;
        let Some(w) = self.sq.get_mut(cur) else {
            return WriteRespVerdict::Dropped;
        };
        let (wpsn, length) = (w.psn, w.length);
        let Some(t) = w.tid_write_mut() else {
            return WriteRespVerdict::Dropped;
        };
        let seg_len = t.req.seg_len;
        let done = t.comp_seg.saturating_mul(seg_len);
        let len = seg_len.min(length.saturating_sub(done));
        let Some(entries) = entries_covering(payload, len) else {
            self.fail_oldest(env, WcStatus::LocalLength);
            return WriteRespVerdict::Fatal(WcStatus::LocalLength);
        };
        let seg = RemoteSegment {
            tid_entries: entries,
            tid_qpn: hdr.tid_flow_qp,
            generation: hdr.flow_psn.generation(),
            spsn: hdr.flow_psn.seq(),
            resp_ib_psn: psn,
            length: len,
            npkts: div_round_up_mtu(len, pmtu).max(1),
        };
        let seg = self.write.after_resync(seg);
        let Some(t) = self.sq.get_mut(cur).and_then(|w| w.tid_write_mut()) else {
            return WriteRespVerdict::Dropped;
        };
        if t.req.push_remote(seg, psn == wpsn).is_err() {
            self.write.stats.write_resps_dropped += 1;
            return WriteRespVerdict::Dropped;
        }
        t.comp_seg += 1;
        t.state = TidReqState::Active;
        let all_in = t.comp_seg >= t.total_segs;
        self.write.stats.write_resps += 1;
        if self.write.s_tid_cur != self.write.s_tid_head && all_in {
            self.write.s_tid_cur = Some(self.next_tid_write(cur));
        }
        *env.locked.flags &= !SFlags::WAIT_TID_RESP;
        crate::write::second_leg::schedule_tid_send(env, &mut self.write);
        WriteRespVerdict::Taken
    }

    /// The next TID WRITE after `i`, or `s_tid_head`.
    pub(crate) fn next_tid_write(&self, i: u32) -> u32 {
        let head = self.write.s_tid_head.unwrap_or(i);
        let n = sq::indices(i.wrapping_add(1), head)
            .find(|&n| self.sq.get(n).is_none_or(|w| w.tid_write().is_some()))
            .unwrap_or(head);
        if self.sq.get(n).is_none() { head } else { n }
    }

    /// The RC retry timer after a WRITE_RESP: a resend under way stops at
    /// the response's PSN; else one response fewer is outstanding (the
    /// timer runs on while any is, stops when none is). Kernel: the
    /// `TID_OP(WRITE_RESP)` branch of `do_rc_ack()`'s ACK case and
    /// `update_qp_retry_state()`.
    pub(crate) fn write_resp_timers(&mut self, env: &Env<'_, '_, P>, psn: Psn) {
        let Some(cur) = self.write.s_tid_cur else {
            return;
        };
        if self.sq.cur != self.sq.tail && self.psn.delta(psn) <= 0 {
            let Some(w) = self.sq.get(cur) else {
                return;
            };
            let (spsn, lpsn) = (w.psn, w.lpsn);
            self.psn = psn.add(1);
            if psn.delta(lpsn) >= 0 {
                self.sq.cur = cur.wrapping_add(1);
                self.s_state = SendState::Start;
            } else if psn == spsn {
                self.sq.cur = cur;
                self.s_state = SendState::TidWriteRest;
            }
            return;
        }
        self.write.pending_tid_w_resp = self.write.pending_tid_w_resp.saturating_sub(1);
        if self.write.pending_tid_w_resp > 0 {
            self.retry_timer.arm(retry_ns(env.conn.timeout, 0));
        } else {
            self.stop_timers();
        }
    }
}

/// The TID entries of a WRITE_RESP payload if they are a valid list for a
/// segment of `len` bytes: at most [`MAX_PAGESETS`], none of LEN 0, and
/// covering the length. Kernel: the TID list checks of
/// `hfi1_rc_rcv_tid_rdma_write_resp()`.
fn entries_covering(payload: &[u8], len: u32) -> Option<ArrayVec<TidEntry, MAX_PAGESETS>> {
    let mut out = ArrayVec::new();
    let mut bytes = 0u64;
    for e in tid_entries::Entries::new_checked(payload).ok()?.iter() {
        if e.is_empty() {
            return None;
        }
        bytes += u64::from(e.len()) * u64::from(PAGE_SIZE);
        out.try_push(e).ok()?;
    }
    (!out.is_empty() && bytes >= u64::from(len)).then_some(out)
}
