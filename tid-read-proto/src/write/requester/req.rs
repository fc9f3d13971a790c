// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The first leg's WRITE packets (kernel `hfi1_make_rc_req()`, the
//! `IB_WR_TID_RDMA_WRITE` and `IB_WR_RDMA_WRITE` cases and the
//! `TID_OP(WRITE_RESP)` resend state):
//!
//! - a TID WRITE sends one WRITE_REQ for the bytes still to write, at
//!   most [`TID_WRITE_CNT`] started at a time, and keeps `s_tid_head`,
//!   `s_tid_cur` and `s_tid_tail` as `rc.c` does (including its two
//!   corner cases where the previous TID WRITE is finished);
//! - a resend from its first PSN pulls back the segments not yet sent
//!   (`setup_head = clear_tail`); a resend from a later PSN asks for the
//!   segments from there on;
//! - a plain RDMA WRITE sends FIRST/MIDDLE/LAST (or ONLY) packets from
//!   the local buffer, the last asking for an ACK.

use hfi1_hal::Psn;
use tid_flow::FlowPlatform;

use super::{TID_WRITE_CNT, TidSendState};
use crate::packet::{BthOut, PacketError, frame};
use crate::qualify::div_round_up_mtu;
use crate::rc::{EngineError, PacketSink, SourceData};
use crate::requester::send::Step;
use crate::requester::{Env, Requester, SendState};
use crate::wire::{reth, write_req};
use crate::write::TidReqState;

/// Opcodes of a plain RC RDMA WRITE. Kernel: `OP(RDMA_WRITE_*)`.
pub const OP_RDMA_WRITE_FIRST: u8 = 0x06;
/// See [`OP_RDMA_WRITE_FIRST`].
pub const OP_RDMA_WRITE_MIDDLE: u8 = 0x07;
/// See [`OP_RDMA_WRITE_FIRST`].
pub const OP_RDMA_WRITE_LAST: u8 = 0x08;
/// See [`OP_RDMA_WRITE_FIRST`].
pub const OP_RDMA_WRITE_ONLY: u8 = 0x0A;

impl<P: FlowPlatform> Requester<P> {
    /// Starts the WRITE at `i` (new, or again from its first PSN).
    pub(crate) fn start_write(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        src: &dyn SourceData,
        i: u32,
        newreq: bool,
    ) -> Result<Step, EngineError> {
        let Some(w) = self.sq.get(i) else {
            return Ok(Step::Stop);
        };
        if w.is_plain_write() {
            self.s_state = SendState::PlainWrite;
            return self.plain_write_packet(env, sink, src, i);
        }
        if newreq && self.write.n_tid_requests >= TID_WRITE_CNT {
            return Ok(Step::Stop);
        }
        let psn = self.psn;
        let (wpsn, lpsn, length) = (w.psn, w.lpsn, w.length);
        let Some(t) = self.sq.get_mut(i).and_then(|w| w.tid_write_mut()) else {
            return Ok(Step::Stop);
        };
        let total_segs = t.total_segs;
        if !newreq {
            t.state = TidReqState::Resend;
            t.comp_seg = u32::try_from(psn.delta(wpsn)).unwrap_or(0);
            t.req.unrecord_unsent();
        }
        let remaining = length.saturating_sub(t.comp_seg.saturating_mul(t.req.seg_len));
        self.send_write_req(env, sink, i, psn, remaining)?;
        self.tid_indices_on_send(i);
        if newreq {
            self.write.s_tid_head = Some(i);
            self.write.pending_tid_w_resp += total_segs;
            self.write.n_tid_requests += 1;
            self.write.n_requests = self.write.n_requests.saturating_sub(1);
            self.write.stats.write_reqs += 1;
            self.sq.tail = i.wrapping_add(1);
        } else {
            let n = u32::try_from(lpsn.delta(psn) + 1).unwrap_or(0);
            self.write.pending_tid_w_resp += n;
            self.write.stats.write_req_resends += 1;
        }
        self.psn = lpsn.add(1);
        self.sq.cur = i.wrapping_add(1);
        self.s_state = SendState::Start;
        Ok(Step::Sent)
    }

    /// `s_tid_cur`/`s_tid_tail` after the WRITE_REQ of `i` went out.
    /// Kernel: the index block of `hfi1_make_rc_req()`'s
    /// `IB_WR_TID_RDMA_WRITE` case.
    fn tid_indices_on_send(&mut self, i: u32) {
        let ws = &mut self.write;
        match ws.s_tid_cur {
            None => {
                ws.s_tid_cur = Some(i);
                if ws.s_tid_tail.is_none() {
                    ws.s_tid_tail = Some(i);
                    ws.s_state = TidSendState::WriteResp;
                }
            }
            Some(cur) if Some(cur) == ws.s_tid_head => {
                let done = self.sq.get(cur).is_none_or(|w| {
                    w.tid_write().is_none_or(|t| {
                        matches!(t.state, TidReqState::Inactive | TidReqState::Complete)
                            || (t.state == TidReqState::Active && t.comp_seg == t.total_segs)
                    })
                });
                let ws = &mut self.write;
                if done {
                    if ws.s_tid_tail == Some(cur) && ws.s_state == TidSendState::WriteDataLast {
                        ws.s_tid_tail = Some(i);
                        ws.s_state = TidSendState::WriteResp;
                    }
                    ws.s_tid_cur = Some(i);
                }
                if ws.s_tid_tail == Some(i) && ws.s_state == TidSendState::WriteDataLast {
                    ws.s_state = TidSendState::WriteResp;
                }
            }
            Some(_) => {}
        }
    }

    /// Sends the WRITE_REQ of the TID WRITE at `s_cur` again for the
    /// segments from `s_psn` on. Kernel: the `TID_OP(WRITE_RESP)` case of
    /// `hfi1_make_rc_req()`.
    pub(crate) fn write_rest(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        i: u32,
    ) -> Result<Step, EngineError> {
        let psn = self.psn;
        let Some(w) = self.sq.get_mut(i) else {
            self.s_state = SendState::Start;
            return Ok(Step::Stop);
        };
        let (wpsn, lpsn, length) = (w.psn, w.lpsn, w.length);
        let Some(t) = w.tid_write_mut() else {
            self.s_state = SendState::Start;
            return Ok(Step::Stop);
        };
        t.state = TidReqState::Resend;
        t.comp_seg = u32::try_from(psn.delta(wpsn)).unwrap_or(0);
        let remaining = length.saturating_sub(t.comp_seg.saturating_mul(t.req.seg_len));
        if remaining == 0 {
            // Kept as 6.1 builds it (see the counter's doc).
            self.write.stats.empty_write_req_resends += 1;
        }
        self.send_write_req(env, sink, i, psn, remaining)?;
        self.psn = lpsn.add(1);
        self.s_state = SendState::Start;
        let n = u32::try_from(lpsn.delta(psn) + 1).unwrap_or(0);
        self.write.pending_tid_w_resp += n;
        self.write.s_tid_cur = Some(i);
        self.write.stats.write_req_resends += 1;
        self.sq.cur = i.wrapping_add(1);
        Ok(Step::Sent)
    }

    /// Builds and sends one WRITE_REQ for `remaining` bytes at IB PSN
    /// `psn`; the request is ACTIVE and `HFI1_S_WAIT_TID_RESP` set.
    /// Kernel: `hfi1_build_tid_rdma_write_req()`.
    fn send_write_req(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        i: u32,
        psn: Psn,
        remaining: u32,
    ) -> Result<(), EngineError> {
        let conn = env.conn;
        let Some(w) = self.sq.get_mut(i) else {
            return Ok(());
        };
        let b = write_req::build(&write_req::WriteReqFields {
            remote_qp: conn.remote.qp,
            remote_jkey: conn.remote.jkey,
            remote_verbs_qp: conn.remote_verbs_qpn,
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            wqe_length: w.length,
            remaining,
            psn,
        });
        if let Some(t) = w.tid_write_mut() {
            t.req.n_flows = u16::from(conn.remote.max_write).max(1);
            t.state = TidReqState::Active;
        }
        let out = BthOut {
            opcode: b.bth.opcode,
            dest_qp: b.bth.dest_qp,
            ack_req: b.bth.ack_req,
            psn: b.bth.psn,
        };
        let n = frame(
            sink.buffer(),
            conn.path,
            out,
            write_req::HEADER_LEN,
            |body| {
                b.header
                    .emit(&mut write_req::Packet::new_unchecked(body))
                    .map_err(PacketError::from)
            },
        )?;
        sink.send(n);
        *env.locked.flags |= hfi1_hal::flags::SFlags::WAIT_TID_RESP;
        self.sent(0);
        Ok(())
    }

    /// Sends the packet at `s_psn` of the plain RDMA WRITE at `i`: FIRST
    /// and ONLY carry the RETH, LAST and ONLY ask for an ACK; after the
    /// last the send queue moves on. Kernel: the `IB_WR_RDMA_WRITE` case
    /// and `OP(RDMA_WRITE_FIRST/MIDDLE)` states of `hfi1_make_rc_req()`.
    pub(crate) fn plain_write_packet(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        src: &dyn SourceData,
        i: u32,
    ) -> Result<Step, EngineError> {
        let conn = env.conn;
        let pmtu = conn.pmtu;
        let psn = self.psn;
        let Some(w) = self.sq.get(i).filter(|w| w.is_plain_write()) else {
            self.s_state = SendState::Start;
            return Ok(Step::Stop);
        };
        let npkts = div_round_up_mtu(w.length, pmtu).max(1);
        let k = u32::try_from(psn.delta(w.psn)).unwrap_or(u32::MAX);
        if k >= npkts {
            self.s_state = SendState::Start;
            self.sq.cur = i.wrapping_add(1);
            return Ok(Step::Stop);
        }
        let offset = k.saturating_mul(pmtu);
        let len = w.length.saturating_sub(offset).min(pmtu);
        let last = k + 1 == npkts;
        let opcode = match (k == 0, last) {
            (true, true) => OP_RDMA_WRITE_ONLY,
            (true, false) => OP_RDMA_WRITE_FIRST,
            (false, true) => OP_RDMA_WRITE_LAST,
            (false, false) => OP_RDMA_WRITE_MIDDLE,
        };
        let with_reth = k == 0;
        let r = reth::Repr {
            vaddr: w.remote_addr,
            rkey: w.rkey,
            length: w.length,
        };
        let hdr = if with_reth { reth::HEADER_LEN } else { 0 };
        let out = BthOut {
            opcode,
            dest_qp: conn.remote_verbs_qpn,
            ack_req: last,
            psn,
        };
        let sges = &w.sges;
        let n = frame(sink.buffer(), conn.path, out, hdr + len as usize, |body| {
            let (h, data) = body.split_at_mut_checked(hdr).ok_or(PacketError::NoRoom)?;
            if with_reth {
                r.emit(&mut reth::Packet::new_unchecked(h))?;
            }
            if read_sges(sges, u64::from(offset), data, src) {
                Ok(())
            } else {
                Err(PacketError::Source)
            }
        })?;
        sink.send(n);
        self.write.stats.plain_packets += 1;
        self.sent(0);
        self.psn = psn.add(1);
        if last {
            self.s_state = SendState::Start;
            self.sq.cur = i.wrapping_add(1);
            if i == self.sq.tail {
                self.sq.tail = i.wrapping_add(1);
            }
        }
        Ok(Step::Sent)
    }
}

/// Reads `out.len()` bytes at byte `offset` of the scatter list `sges`
/// from the local memory `mem` (the element addresses are the memory's);
/// false if the list is too short or the memory is not there. Kernel:
/// the `rvt_sge_state` walk of the send engines.
pub(crate) fn read_sges(
    sges: &[tid_flow::Sge],
    offset: u64,
    out: &mut [u8],
    mem: &dyn SourceData,
) -> bool {
    let mut skip = offset;
    let mut rest = out;
    for s in sges {
        if rest.is_empty() {
            break;
        }
        let l = u64::from(s.length);
        if skip >= l {
            skip -= l;
            continue;
        }
        let room = usize::try_from(l - skip).unwrap_or(usize::MAX);
        let (now, later) = rest.split_at_mut(room.min(rest.len()));
        if !mem.read(s.vaddr.wrapping_add(skip), now) {
            return false;
        }
        rest = later;
        skip = 0;
    }
    rest.is_empty()
}

/// No local memory: every read fails (a READ-only caller's send engine;
/// a WRITE then fails to build with [`PacketError::Source`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSource;

impl SourceData for NoSource {
    fn read(&self, _vaddr: u64, _out: &mut [u8]) -> bool {
        false
    }
}
