// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The second leg: the TID send engine, a second work item of the QP
//! beside the first leg, which sends a TID WRITE's WRITE_DATA.
//!
//! - [`send_tid_ok`]: the second leg may run: it is not busy, the QP does
//!   not wait for send resources, and it does not wait for SSN credit or
//!   DMA. Kernel: `hfi1_send_tid_ok()` (its `RVT_S_RESP_PENDING` term is
//!   dropped: nothing sets that bit in `priv->s_flags`, and no built
//!   packet is ever queued on the TID work here).
//! - [`schedule_tid_send`]: queues the work item through the platform's
//!   [`TidScheduler`] (`queue_work` semantics: pending at most once).
//!   Kernel: `hfi1_schedule_tid_send()`.
//! - [`do_tid_send`]: the work item. It takes the QP's `s_lock` itself,
//!   sets the second leg's BUSY, builds one packet per lock hold
//!   ([`Requester::make_tid_rdma_pkt`]) and hands it to the sink after
//!   dropping the lock, as the kernel drops it around `hfi1_verbs_send()`.
//!   Kernel: `hfi1_do_tid_send()`.
//!
//! `hfi1_make_tid_rdma_pkt()` also builds the responder's TID ACKs and,
//! when first-leg work waits, first-leg packets; the requester half is
//! here (the WRITE_DATA arm, `update_tid_tail()`, the restart rewind).
//!
//! # Locking
//!
//! [`do_tid_send`] runs with no lock held and takes the QP's `s_lock`;
//! everything else runs with it held.

use hfi1_hal::flags::{SFlags, TidFlags};
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::TidScheduler;
use tid_flow::{FlowPlatform, RcvCtxt, ring_indices};

use crate::packet::{BthOut, PacketError, frame};
use crate::qp::{TidQp, parts, with_requester};
use crate::rc::{Connection, EngineError, PacketSink, SourceData, sq};
use crate::requester::{Env, Requester};
use crate::response_stream::Cursor;
use crate::wire::write_data::{self, DataBuilder, DataFlow};
use crate::write::TidReqState;
use crate::write::requester::{TidSendState, WriteState};

/// The second leg may run. Kernel: `hfi1_send_tid_ok()`.
pub fn send_tid_ok(flags: SFlags, tid_flags: TidFlags) -> bool {
    !(tid_flags.contains(TidFlags::BUSY)
        || flags.intersects(SFlags::HFI1_ANY_WAIT_IO)
        || flags.intersects(SFlags::ANY_TID_WAIT_SEND))
}

/// Schedules the second leg if it may run; true if it may (the work item
/// runs once whether this call queued it or it was pending). Kernel:
/// `hfi1_schedule_tid_send()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`env`).
pub fn schedule_tid_send<P>(env: &Env<'_, '_, P>, ws: &mut WriteState) -> bool
where
    P: FlowPlatform,
    P::Sched: TidScheduler<P::Ref>,
{
    if !send_tid_ok(*env.locked.flags, ws.tid_flags) {
        return false;
    }
    if env.rcd.sched.schedule_tid_send(0, env.qp) {
        ws.stats.second_leg_queued += 1;
    }
    true
}

/// The second leg's work item: takes the QP's `s_lock`, and while a
/// packet can be built, builds it under the lock and sends it with the
/// lock dropped. Returns the packets sent. Kernel: `hfi1_do_tid_send()`.
///
/// # Locking
///
/// Runs with no lock held (`root`); takes the QP's `s_lock` once per
/// packet.
///
/// # Errors
///
/// A packet that could not be built (the buffer is not in `src`): the
/// second leg stops, BUSY cleared.
pub fn do_tid_send<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    sink: &mut impl PacketSink,
    src: &dyn SourceData,
) -> Result<u32, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
    P::Sched: TidScheduler<P::Ref>,
{
    {
        let mut g = qp.s_lock.lock(root);
        let ok = {
            let p = parts::<P>(&mut g);
            send_tid_ok(*p.locked.flags, p.requester.write.tid_flags)
        };
        if !ok {
            return Ok(0);
        }
        let p = parts::<P>(&mut g);
        p.requester.write.tid_flags |= TidFlags::BUSY;
        p.requester.write.stats.second_leg_runs += 1;
    }
    let mut sent = 0;
    loop {
        let mut g = qp.s_lock.lock(root);
        let built = with_requester(rcd, qp, &mut g, |r, env| {
            r.make_tid_rdma_pkt(env, sink.buffer(), src)
        });
        match built {
            Ok(Some(n)) => {
                drop(g);
                sink.send(n);
                sent += 1;
            }
            Ok(None) => {
                parts::<P>(&mut g).requester.write.tid_flags &= !TidFlags::BUSY;
                return Ok(sent);
            }
            Err(e) => {
                parts::<P>(&mut g).requester.write.tid_flags &= !TidFlags::BUSY;
                return Err(e);
            }
        }
    }
}

impl<P: FlowPlatform> Requester<P> {
    /// Builds the second leg's next requester packet into `buf`: a
    /// WRITE_DATA (or WRITE_DATA_LAST) of the TID WRITE at `s_tid_tail`,
    /// after the rewind a restart asked for. `None` if nothing can go.
    /// Kernel: `hfi1_make_tid_rdma_pkt()`, requester half.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    ///
    /// # Errors
    ///
    /// [`PacketError::Source`] if the payload is not in `src`.
    pub fn make_tid_rdma_pkt(
        &mut self,
        env: &mut Env<'_, '_, P>,
        buf: &mut [u8],
        src: &dyn SourceData,
    ) -> Result<Option<usize>, EngineError> {
        if !env.state.receives() || self.write.tid_flags.contains(TidFlags::WAIT_ACK) {
            return Ok(None);
        }
        let Some(tail) = self.write.s_tid_tail else {
            return Ok(None);
        };
        match self.write.s_state {
            TidSendState::WriteReq => {
                self.restart_req(tail);
                self.write.s_state = TidSendState::WriteData;
            }
            TidSendState::WriteResp => self.write.s_state = TidSendState::WriteData,
            TidSendState::WriteData => {}
            TidSendState::WriteDataLast => return Ok(None),
            TidSendState::Resync => return self.make_resync(env, buf),
        }
        let Some((n, last)) = self.build_write_data(env.conn, tail, buf, src)? else {
            return Ok(None);
        };
        self.write.stats.data_packets += 1;
        if last {
            self.segment_sent(env, tail);
        }
        Ok(Some(n))
    }

    /// Builds into `buf` the next WRITE_DATA of the TID WRITE at `tail`
    /// (the segment `cur_seg`, from the cursor its flow record keeps),
    /// moving that cursor on. Returns its length and whether it ends the
    /// segment; `None` if no segment with a response is waiting. Kernel:
    /// the WRITE_DATA arm of `hfi1_make_tid_rdma_pkt()` with
    /// `hfi1_build_tid_rdma_packet()`.
    fn build_write_data(
        &mut self,
        conn: &Connection,
        tail: u32,
        buf: &mut [u8],
        src: &dyn SourceData,
    ) -> Result<Option<(usize, bool)>, EngineError> {
        let Some(w) = self.sq.get_mut(tail) else {
            return Ok(None);
        };
        let sges = &w.sges;
        let Some(t) = w.write.as_mut().and_then(|x| x.tid.as_mut()) else {
            return Ok(None);
        };
        if t.comp_seg == 0 || t.cur_seg == t.comp_seg {
            return Ok(None);
        }
        let k = t.req.clear_tail;
        let seg_start = u64::from(t.cur_seg) * u64::from(t.req.seg_len);
        let last_segment = t.cur_seg + 1 >= t.total_segs;
        let Some(rec) = t.req.flow_mut(k) else {
            return Ok(None);
        };
        let mut b = DataBuilder::new(&DataFlow {
            entries: &rec.tid_entries,
            length: rec.length,
            pmtu: conn.pmtu,
            spsn: rec.psns.spsn,
            generation: rec.psns.generation,
            tid_qpn: rec.tid_qpn,
            jkey: conn.remote.jkey,
            urg: conn.remote.urg != 0,
            verbs_qp: conn.remote_verbs_qpn,
            last_segment,
        });
        b.set_cursor(Cursor {
            tid_idx: rec.tid_idx as usize,
            tid_offset: rec.tid_offset,
            pkt: u8::try_from(rec.pkt & 0xFF).unwrap_or(0),
            sent: rec.sent,
        });
        let p = b
            .next_packet()
            .map_err(|_| EngineError::Packet(PacketError::NoRoom))?;
        let c = b.cursor();
        rec.tid_idx = u32::try_from(c.tid_idx).unwrap_or(u32::MAX);
        rec.tid_offset = c.tid_offset;
        rec.pkt = rec.pkt.wrapping_add(1);
        rec.sent = c.sent;
        let out = BthOut {
            opcode: p.bth.opcode,
            dest_qp: p.bth.dest_qp,
            ack_req: p.bth.ack_req,
            psn: p.bth.psn,
        };
        let at = seg_start + u64::from(p.data_offset);
        let hlen = write_data::HEADER_LEN;
        let n = frame(buf, conn.path, out, hlen + p.len as usize, |body| {
            let (h, data) = body.split_at_mut_checked(hlen).ok_or(PacketError::NoRoom)?;
            p.header.emit(&mut write_data::Packet::new_unchecked(h))?;
            if crate::write::requester::read_sges(sges, at, data, src) {
                Ok(())
            } else {
                Err(PacketError::Source)
            }
        })?;
        Ok(Some((n, p.last)))
    }

    /// Builds the RESYNC: the generation after the newest flow of the
    /// TID WRITE at `s_tid_cur` (or the one before it, if that has no
    /// response yet), PSN the last sequence of the current one, asking
    /// for an ACK; the second leg then waits for it. Kernel: the
    /// `TID_OP(RESYNC)` case of `hfi1_make_tid_rdma_pkt()` and
    /// `hfi1_build_tid_rdma_resync()`.
    fn make_resync(
        &mut self,
        env: &mut Env<'_, '_, P>,
        buf: &mut [u8],
    ) -> Result<Option<usize>, EngineError> {
        let Some(mut cur) = self.write.s_tid_cur else {
            return Ok(None);
        };
        if self
            .sq
            .get(cur)
            .and_then(|w| w.tid_write())
            .is_some_and(|t| t.comp_seg == 0)
        {
            cur = cur.wrapping_sub(1);
        }
        let Some(t) = self.sq.get(cur).and_then(|w| w.tid_write()) else {
            return Ok(None);
        };
        let newest = t
            .req
            .setup_head
            .wrapping_add(hfi1_hal::consts::MAX_FLOWS as u16 - 1)
            % hfi1_hal::consts::MAX_FLOWS as u16;
        let Some(f) = t.req.flow(newest) else {
            return Ok(None);
        };
        let conn = env.conn;
        let b = crate::wire::resync::build(&crate::wire::resync::ResyncFields {
            remote_qp: conn.remote.qp,
            remote_jkey: conn.remote.jkey,
            remote_verbs_qp: conn.remote_verbs_qpn,
            flow_generation: f.psns.generation,
        });
        self.write.s_resync_psn = b.bth.psn;
        let out = BthOut {
            opcode: b.bth.opcode,
            dest_qp: b.bth.dest_qp,
            ack_req: true,
            psn: b.bth.psn,
        };
        let hlen = crate::wire::resync::HEADER_LEN;
        let n = frame(buf, conn.path, out, hlen, |body| {
            b.header
                .emit(&mut crate::wire::resync::Packet::new_unchecked(body))
                .map_err(PacketError::from)
        })?;
        if self.write.tid_flags.contains(TidFlags::SEND_ONE) {
            self.write.tid_flags &= !TidFlags::SEND_ONE;
            self.write.tid_flags |= TidFlags::WAIT_ACK;
        }
        self.write.stats.resyncs += 1;
        self.arm_tid_retry(env);
        Ok(Some(n))
    }

    /// A segment's last packet went out: `clear_tail` and `cur_seg` move
    /// on; past the request's last segment the second leg moves to the
    /// next TID WRITE (`update_tid_tail()`); the TID retry timer starts
    /// if it does not run and a sent segment is unacknowledged (the
    /// kernel starts it at the send completion of a packet asking for an
    /// ACK, `hfi1_rc_send_complete()`).
    fn segment_sent(&mut self, env: &mut Env<'_, '_, P>, tail: u32) {
        let Some(t) = self.sq.get_mut(tail).and_then(|w| w.tid_write_mut()) else {
            return;
        };
        let _ = t.req.sent_remote();
        t.cur_seg += 1;
        self.write.stats.segments_sent += 1;
        if t.cur_seg < t.total_segs {
            if t.req.setup_head == t.req.clear_tail {
                *env.locked.flags |= SFlags::WAIT_TID_RESP;
            }
        } else {
            self.write.s_state = TidSendState::WriteDataLast;
            self.update_tid_tail();
        }
        self.arm_tid_retry(env);
    }

    /// After a packet asking for an ACK: the TID retry timer starts if it
    /// does not run and a segment is unacknowledged. Kernel:
    /// `hfi1_rc_send_complete()`'s TID WRITE part.
    fn arm_tid_retry(&mut self, env: &Env<'_, '_, P>) {
        let unacked = self
            .sq
            .get(self.sq.acked)
            .and_then(|w| w.tid_write())
            .is_some_and(|t| t.ack_seg < t.comp_seg.max(t.cur_seg));
        if unacked && !self.write.tid_retry.is_armed() {
            self.write
                .tid_retry
                .arm(crate::rc::retry::retry_ns(env.conn.timeout, 0));
        }
    }

    /// Moves `s_tid_tail` to the next TID WRITE, not past `s_tid_cur`.
    /// Kernel: `update_tid_tail()`.
    pub(crate) fn update_tid_tail(&mut self) {
        let (Some(tail), Some(cur)) = (self.write.s_tid_tail, self.write.s_tid_cur) else {
            return;
        };
        if tail == cur {
            return;
        }
        // Plain WRITEs between are passed over; a slot no longer held
        // stops the walk where it is.
        let next = sq::indices(tail.wrapping_add(1), cur)
            .find(|&i| self.sq.get(i).is_none_or(|w| w.tid_write().is_some()))
            .unwrap_or(cur);
        self.write.s_tid_tail = Some(next);
        self.write.s_state = TidSendState::WriteResp;
    }

    /// Rewinds the TID WRITE at `i` to resend from its oldest
    /// unacknowledged segment at the packet `r_ack_psn` names (plus the
    /// packets a RESYNC found received, `resync_npkts`); every later
    /// segment of it, and of every later TID WRITE up to `s_tid_cur`, is
    /// resent from its start. Kernel: `hfi1_tid_rdma_restart_req()`,
    /// WRITE half.
    pub(crate) fn restart_req(&mut self, i: u32) {
        let cur = self.write.s_tid_cur.unwrap_or(i);
        let mut first = true;
        for n in self.sq.through(i, cur) {
            if let Some(t) = self.sq.get_mut(n).and_then(|w| w.tid_write_mut()) {
                let pmtu = t.req.pmtu;
                let skip_at = t.req.acked_tail;
                let r_ack = t.r_ack_psn;
                t.req.resend_unacked();
                t.cur_seg = t.ack_seg;
                t.state = TidReqState::Active;
                for k in ring_indices(t.req.acked_tail, t.req.setup_head) {
                    if let Some(rec) = t.req.flow_mut(k) {
                        let at_nak = first && k == skip_at;
                        let delta = if at_nak && r_ack.generation() == rec.psns.generation {
                            r_ack.seq().saturating_sub(rec.psns.spsn)
                        } else {
                            0
                        };
                        // After a RESYNC the flow's sequence 0 sits
                        // `resync_npkts` packets into the segment: the
                        // data walk skips them, the PSN does not count them.
                        if !at_nak {
                            rec.resync_npkts = 0;
                        }
                        let skip = delta.saturating_add(rec.resync_npkts);
                        let c = Cursor::rewound(&rec.tid_entries, pmtu, skip).unwrap_or_default();
                        rec.tid_idx = u32::try_from(c.tid_idx).unwrap_or(0);
                        rec.tid_offset = c.tid_offset;
                        rec.pkt = u32::from(c.pkt).wrapping_sub(rec.resync_npkts);
                        rec.sent = c.sent;
                    }
                }
                first = false;
            }
        }
    }
}
