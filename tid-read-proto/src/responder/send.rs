// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's send engine (kernel `make_rc_ack()` →
//! `hfi1_build_tid_rdma_read_resp()`): a NAK sent at once first, then the
//! entries from the send pointer on, then a NAK that waited for them.

use hfi1_hal::Psn;

use super::{AckState, EntryKind, Responder};
use crate::packet::{ACK_SYNDROME, build_ack};
use crate::plain_read::{self, RespKind};
use crate::qualify::div_round_up_mtu;
use crate::rc::{Connection, EngineError, MrTable, PacketSink, QpState, SourceData};
use crate::response_stream::{self, RespBuilder};
use crate::wire::aeth::{self, NakCode};
use crate::wire::{self, kdeth};

/// What one turn of the send engine did.
enum Turn {
    /// Sent a packet.
    Sent,
    /// Nothing (more) to send now.
    Done,
    /// Moved between entries without sending: look again.
    Again,
}

impl Responder {
    /// The responder's send engine: a NAK that goes at once, then up to
    /// `budget` response packets, then a NAK that waited for them.
    /// Returns true if more are waiting. In the error state only a NAK
    /// that goes at once is sent, and region references still held are
    /// dropped. Kernel: `make_rc_ack()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`&mut self`, `st`).
    ///
    /// # Errors
    ///
    /// A packet that could not be built (the source memory is missing);
    /// the entry is left where it was.
    pub fn send_responses(
        &mut self,
        conn: &Connection,
        st: QpState,
        src: &impl SourceData,
        mrs: &impl MrTable,
        sink: &mut impl PacketSink,
        budget: u32,
    ) -> Result<bool, EngineError> {
        if let Some((code, psn)) = self.direct_nak.take() {
            self.send_nak(conn, code, psn, sink)?;
        }
        if !st.receives() {
            if self.mr_refs() > 0 {
                self.release_refs(mrs);
            }
            return Ok(false);
        }
        let mut left = budget;
        while left > 0 {
            match self.turn(conn, src, mrs, sink)? {
                Turn::Sent => left -= 1,
                Turn::Again => {}
                Turn::Done => break,
            }
        }
        Ok(self.has_work(st))
    }

    fn send_nak(
        &mut self,
        conn: &Connection,
        code: NakCode,
        psn: Psn,
        sink: &mut impl PacketSink,
    ) -> Result<(), EngineError> {
        let a = aeth::Repr {
            syndrome: code.syndrome(),
            msn: self.msn,
        };
        let n = build_ack(sink.buffer(), conn.path, conn.remote_verbs_qpn, psn, a)?;
        sink.send(n);
        self.stats.naks += 1;
        Ok(())
    }

    /// One step of the response engine.
    fn turn(
        &mut self,
        conn: &Connection,
        src: &impl SourceData,
        mrs: &impl MrTable,
        sink: &mut impl PacketSink,
    ) -> Result<Turn, EngineError> {
        match self.state {
            AckState::Idle => {
                if self.head == self.tail {
                    if let Some((code, psn)) = self.queued_nak.take() {
                        self.send_nak(conn, code, psn, sink)?;
                        return Ok(Turn::Sent);
                    }
                    return Ok(Turn::Done);
                }
                let Some(e) = self.ack.get(self.tail) else {
                    return Ok(Turn::Done);
                };
                if e.kind == Some(EntryKind::Write) {
                    // The WRITE responder answers it
                    // (`crate::write::responder`).
                    return Ok(Turn::Done);
                }
                if e.len > 0 && e.mr.is_none() {
                    // Sent before and not asked for again: park until the
                    // requester asks (at a TID WRITE still to answer, if
                    // one comes first).
                    let stop = self.owing_after(self.tail);
                    if self.acked == self.tail {
                        self.acked = stop;
                    }
                    self.tail = stop;
                    self.stats.parked += 1;
                    return Ok(if stop == self.head {
                        Turn::Done
                    } else {
                        Turn::Again
                    });
                }
                self.state = match e.kind {
                    Some(EntryKind::Tid { .. }) => AckState::Tid,
                    _ => AckState::Plain { index: 0 },
                };
                Ok(Turn::Again)
            }
            AckState::Tid => self.tid_packet(conn, src, mrs, sink),
            AckState::Plain { index } => self.plain_packet(conn, src, mrs, sink, index),
        }
    }

    /// The first TID WRITE entry after `t`, up to the head, whose
    /// WRITE_RESPs have not all gone; the head if there is none.
    ///
    /// Deviation from 6.1: `make_rc_ack()` parks the pointer at the head
    /// (`s_tail_ack_queue = r_head_ack_queue`), past such an entry too. A
    /// duplicate of an answered READ (a stale copy: the requester's own
    /// go-back-N asks for every later entry again) rewinds the pointer
    /// behind entries sent before, and the first of them parked it past a
    /// TID WRITE whose WRITE_RESPs had not gone; nothing asks for those
    /// again (the requester waits for them), so its retries ran out
    /// (`tid-sim/tests/mix_faults.rs`:
    /// `a_parked_send_pointer_stops_at_an_unanswered_write`). READ
    /// entries are parked past as 6.1 parks them: each waits for its own
    /// duplicate.
    fn owing_after(&self, t: usize) -> usize {
        Self::slots(Self::next(t), self.head)
            .find(|&j| {
                self.ack
                    .get(j)
                    .is_some_and(|e| e.kind == Some(EntryKind::Write) && !e.sent)
            })
            .unwrap_or(self.head)
    }

    /// The entry at the send pointer had its last response: its region is
    /// released and the pointer moves on.
    fn entry_sent(&mut self, mrs: &impl MrTable) {
        let t = self.tail;
        if let Some(e) = self.ack.get_mut(t) {
            e.sent = true;
            if let Some(mr) = e.mr.take() {
                mrs.put(mr);
            }
        }
        let next = Self::next(t);
        if self.acked == t {
            self.acked = next;
        }
        self.tail = next;
        self.state = AckState::Idle;
        self.stats.segments += 1;
    }

    /// The next READ_RESP of the TID entry at the send pointer.
    /// Kernel: `hfi1_build_tid_rdma_read_resp()`.
    fn tid_packet(
        &mut self,
        conn: &Connection,
        src: &impl SourceData,
        mrs: &impl MrTable,
        sink: &mut impl PacketSink,
    ) -> Result<Turn, EngineError> {
        let msn = self.msn;
        let Some(e) = self.ack.get_mut(self.tail) else {
            return Ok(Turn::Done);
        };
        let Some(EntryKind::Tid { acc, cursor }) = e.kind.as_mut() else {
            self.state = AckState::Idle;
            return Ok(Turn::Again);
        };
        let flow = acc.resp_flow(conn.remote.jkey, conn.remote.urg != 0, conn.pmtu);
        let mut b = RespBuilder::new(&flow);
        b.set_cursor(*cursor);
        let Ok(p) = b.next_packet() else {
            self.entry_sent(mrs);
            return Ok(Turn::Again);
        };
        let hdr = wire::read_resp::Repr {
            kdeth: kdeth::Repr {
                kdeth0: p.kdeth0,
                kdeth1: p.kdeth1,
            },
            aeth: aeth::Repr {
                syndrome: ACK_SYNDROME,
                msn,
            },
            verbs_psn: p.verbs_psn,
            verbs_qp: conn.remote_verbs_qpn,
        };
        let vaddr = acc.vaddr.wrapping_add(u64::from(p.data_offset));
        let n = response_stream::write_packet(
            sink.buffer(),
            conn.path,
            acc.tid_qpn,
            p.bth_psn.as_psn(),
            &hdr,
            p.len as usize,
            |out| src.read(vaddr, out),
        )?;
        sink.send(n);
        *cursor = b.cursor();
        self.stats.packets += 1;
        if p.last {
            self.entry_sent(mrs);
        }
        Ok(Turn::Sent)
    }

    /// Response `index` of the plain entry at the send pointer: `pmtu`
    /// bytes each but the last, FIRST/MIDDLE/LAST or ONLY, an AETH on all
    /// but MIDDLE. Kernel: the `OP(RDMA_READ_REQUEST)` entry of
    /// `make_rc_ack()` and its `RDMA_READ_RESPONSE_*` states.
    fn plain_packet(
        &mut self,
        conn: &Connection,
        src: &impl SourceData,
        mrs: &impl MrTable,
        sink: &mut impl PacketSink,
        index: u32,
    ) -> Result<Turn, EngineError> {
        let msn = self.msn;
        let Some(e) = self.ack.get(self.tail) else {
            return Ok(Turn::Done);
        };
        let pmtu = conn.pmtu;
        let count = div_round_up_mtu(e.len, pmtu).max(1);
        let kind = RespKind::nth(index, count);
        let off = index.saturating_mul(pmtu);
        let len = e.len.saturating_sub(off).min(pmtu);
        let vaddr = e.vaddr.wrapping_add(u64::from(off));
        let a = aeth::Repr {
            syndrome: ACK_SYNDROME,
            msn,
        };
        let n = plain_read::write_response(
            sink.buffer(),
            conn.path,
            conn.remote_verbs_qpn,
            e.psn.add(index),
            kind,
            a,
            len as usize,
            |out| out.is_empty() || src.read(vaddr, out),
        )?;
        sink.send(n);
        self.stats.packets += 1;
        if matches!(kind, RespKind::Last | RespKind::Only) {
            self.entry_sent(mrs);
        } else {
            self.state = AckState::Plain { index: index + 1 };
        }
        Ok(Turn::Sent)
    }
}
