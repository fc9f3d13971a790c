// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's TID ACK, built by the second leg: every segment
//! received since the last ACK acknowledged at once, finished requests
//! completed, or a TID NAK for the episode's expected PSN. Kernel:
//! `make_tid_rdma_ack()`, `hfi1_build_tid_rdma_write_ack()`.

use hfi1_hal::consts::MAX_FLOWS;
use hfi1_hal::flags::TidFlags;
use tid_flow::ring_count;

use super::Env;
use crate::packet::{ACK_SYNDROME, PacketError};
use crate::rc::{EngineError, PacketSink};
use crate::responder::{EntryKind, Responder};
use crate::wire::aeth::{self, NakCode};
use crate::wire::tid_ack::{self, AckFields, AckKind};
use crate::write::{TidReqState, emit_tid_packet};

/// The previous ring position. Kernel: `CIRC_PREV()`.
const fn ring_prev(i: u16) -> u16 {
    i.wrapping_sub(1) & (MAX_FLOWS as u16 - 1)
}

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Builds the owed TID ACK (or NAK) into `sink`; false if none was
    /// owed or nothing is left to acknowledge. `ACK_PENDING` is cleared
    /// either way. Kernel: `make_tid_rdma_ack()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held.
    ///
    /// # Errors
    ///
    /// A packet that could not be built (the ACK stays owed).
    pub(crate) fn make_tid_ack(&mut self, sink: &mut impl PacketSink) -> Result<bool, EngineError> {
        if !self.w.flags.contains(TidFlags::ACK_PENDING) {
            return Ok(false);
        }
        if !self.state.receives() {
            self.w.flags.remove(TidFlags::ACK_PENDING);
            return Ok(false);
        }
        let Some(mut r) = self.w.r_tid_ack else {
            self.w.flags.remove(TidFlags::ACK_PENDING);
            return Ok(false);
        };
        let nak = self.w.tid_nak;
        let nothing = self
            .w
            .entries
            .get(r)
            .is_none_or(|e| e.ack_seg == e.comp_seg);
        if nak.is_none() && nothing {
            self.w.flags.remove(TidFlags::ACK_PENDING);
            return Ok(false);
        }
        // Coalesce: acknowledge every completed segment, walking into the
        // next TID WRITE entry while this one is finished.
        let mut flow;
        let mut acked;
        loop {
            let Some(e) = self.w.entries.get_mut(r) else {
                return Ok(false);
            };
            e.ack_seg += u32::from(ring_count(e.req.clear_tail, e.req.acked_tail));
            e.req.acked_tail = e.req.clear_tail;
            flow = ring_prev(e.req.acked_tail);
            acked = r;
            if e.ack_seg != e.total_segs {
                break;
            }
            e.state = TidReqState::Complete;
            let next = Responder::next(r);
            self.w.r_tid_ack = Some(next);
            let next_has = self
                .rsp
                .ack
                .get(next)
                .is_some_and(|a| a.kind == Some(EntryKind::Write))
                && self
                    .w
                    .entries
                    .get(next)
                    .is_some_and(|n| n.comp_seg != 0 && n.ack_seg != n.comp_seg);
            if !next_has {
                break;
            }
            r = next;
        }
        // A NAK names the segment receiving data at `r_tid_ack`.
        let (entry, flow) = if nak.is_some() {
            let at = self.w.r_tid_ack.unwrap_or(acked);
            let f = self.w.entries.get(at).map_or(0, |e| e.req.acked_tail);
            (at, f)
        } else {
            if self
                .w
                .entries
                .get(acked)
                .is_some_and(|e| e.ack_seg == e.total_segs)
            {
                self.w.flags.remove(TidFlags::R_TID_WAIT_INTERLCK);
            }
            (acked, flow)
        };
        let Some(rec) = self.w.entries.get(entry).and_then(|e| e.req.flow(flow)) else {
            return Ok(false);
        };
        let (syndrome, kind) = match nak {
            Some(expected) => (NakCode::PsnError.syndrome(), AckKind::Nak { expected }),
            None => (
                ACK_SYNDROME,
                AckKind::Segment {
                    last: rec.psns.full_psn(rec.psns.lpsn),
                },
            ),
        };
        let Some(fidx) = rec.idx else {
            return Ok(false);
        };
        let built = tid_ack::build(&AckFields {
            remote_qp: self.conn.remote.qp,
            remote_jkey: self.conn.remote.jkey,
            remote_verbs_qp: self.conn.remote_verbs_qpn,
            aeth: aeth::Repr {
                syndrome,
                msn: self.rsp.msn,
            },
            local_qp: self.conn.local.qp,
            flow: fidx,
            ctxt: u8::try_from(self.rcd.ctxt()).unwrap_or(u8::MAX),
            resp_ib_psn: rec.psns.resp_ib_psn,
            kind,
        });
        let n = emit_tid_packet(
            sink.buffer(),
            self.conn.path,
            &built.bth,
            tid_ack::HEADER_LEN,
            |h| {
                built
                    .header
                    .emit(&mut tid_ack::Packet::new_unchecked(h))
                    .map_err(PacketError::from)
            },
            &[],
        )?;
        sink.send(n);
        self.w.flags.remove(TidFlags::ACK_PENDING);
        self.w.stats.tid_acks += 1;
        if nak.is_some() {
            self.w.stats.tid_naks += 1;
        }
        Ok(true)
    }
}
