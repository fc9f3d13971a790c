// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's TID ACK, built by the second leg: every segment
//! received since the last ACK acknowledged at once, finished requests
//! completed, a TID NAK for the episode's expected PSN, or the answer to a
//! RESYNC. Kernel: `make_tid_rdma_ack()`, `hfi1_build_tid_rdma_write_ack()`.
//!
//! Deviation from 6.1: a RESYNC ACK names (`verbs_psn`, `tid_flow_qp`) the
//! first segment not acknowledged, at `r_tid_ack`, as a NAK does. 6.1
//! steps back one segment and names the last one acknowledged, whose IB
//! PSN is below the requester's oldest unacknowledged segment's, so 6.1's
//! requester drops the ACK as stale (`cmp_psn(req_psn, resp_ib_psn) < 0`
//! in `hfi1_rc_rcv_tid_rdma_ack()`) unless the previous ACK was lost
//! (`tests/write_responder.rs`:
//! `resync_moves_the_flow_and_its_ack_names_the_unacked_segment`).

use hfi1_hal::consts::MAX_FLOWS;
use hfi1_hal::flags::TidFlags;
use hfi1_hal::{FlowIndex, FlowPsn, Psn};
use tid_flow::ring_count;

use super::Env;
use crate::packet::{ACK_SYNDROME, PacketError};
use crate::rc::{EngineError, PacketSink};
use crate::responder::{EntryKind, Responder};
use crate::wire::aeth::{self, NakCode};
use crate::wire::resync::{is_resync_psn, psn_before};
use crate::wire::tid_ack::{self, AckFields, AckKind};
use crate::write::{TidReqState, emit_tid_packet};

/// The previous ring position. Kernel: `CIRC_PREV()`.
const fn ring_prev(i: u16) -> u16 {
    i.wrapping_sub(1) & (MAX_FLOWS as u16 - 1)
}

/// What an ACK names: the IB PSN of a segment's WRITE_RESP and its
/// hardware flow.
struct Named {
    resp_ib_psn: Psn,
    flow: FlowIndex,
}

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Builds the owed TID ACK (or NAK, or RESYNC ACK) into `sink`; false
    /// if none was owed or nothing is left to acknowledge. `ACK_PENDING`
    /// is cleared either way. Kernel: `make_tid_rdma_ack()`.
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
        let owed = self.state.receives().then_some(self.w.r_tid_ack).flatten();
        let Some(r) = owed else {
            self.w.flags.remove(TidFlags::ACK_PENDING);
            return Ok(false);
        };
        let (nak, resync) = (self.w.tid_nak, self.w.resync);
        let nothing = self
            .w
            .entries
            .get(r)
            .is_none_or(|e| e.ack_seg == e.comp_seg);
        if nak.is_none() && !resync && nothing {
            self.w.flags.remove(TidFlags::ACK_PENDING);
            return Ok(false);
        }
        let (acked, flow) = self.coalesce(r);
        let named = if nak.is_some() || resync {
            self.first_unacked()
        } else {
            self.acked_flow(acked, flow)
        };
        let Some(named) = named else {
            self.w.flags.remove(TidFlags::ACK_PENDING);
            return Ok(false);
        };
        let (syndrome, kind) = match (resync, nak) {
            (true, _) => (ACK_SYNDROME, self.resync_kind()),
            (false, Some(expected)) => (NakCode::PsnError.syndrome(), AckKind::Nak { expected }),
            (false, None) => {
                let last = self.segment_last(acked, flow);
                (ACK_SYNDROME, AckKind::Segment { last })
            }
        };
        self.emit_ack(sink, syndrome, kind, &named)?;
        self.w.flags.remove(TidFlags::ACK_PENDING);
        self.w.stats.tid_acks += 1;
        if resync {
            self.resync_answered();
        } else if nak.is_some() {
            self.w.stats.tid_naks += 1;
        }
        Ok(true)
    }

    /// Acknowledges every completed segment from entry `r` on, walking
    /// into the next TID WRITE entry while this one is finished. Returns
    /// the last entry acknowledged and the flow it acknowledged last.
    fn coalesce(&mut self, mut r: usize) -> (usize, u16) {
        loop {
            let Some(e) = self.w.entries.get_mut(r) else {
                return (r, 0);
            };
            e.ack_seg += u32::from(ring_count(e.req.clear_tail, e.req.acked_tail));
            e.req.acked_tail = e.req.clear_tail;
            let flow = ring_prev(e.req.acked_tail);
            if e.ack_seg != e.total_segs {
                return (r, flow);
            }
            e.state = TidReqState::Complete;
            let next = Responder::next(r);
            self.w.r_tid_ack = Some(next);
            let next_has = self.rsp.is_write(next)
                && self
                    .w
                    .entries
                    .get(next)
                    .is_some_and(|n| n.comp_seg != 0 && n.ack_seg != n.comp_seg);
            if !next_has {
                return (r, flow);
            }
            r = next;
        }
    }

    /// The segment flow `flow` of entry `acked` that an ACK acknowledges
    /// (the responder interlock ends with its request's last ACK).
    fn acked_flow(&mut self, acked: usize, flow: u16) -> Option<Named> {
        let e = self.w.entries.get(acked)?;
        if e.ack_seg == e.total_segs {
            self.w.flags.remove(TidFlags::R_TID_WAIT_INTERLCK);
        }
        let rec = e.req.flow(flow)?;
        Some(Named {
            resp_ib_psn: rec.psns.resp_ib_psn,
            flow: rec.idx?,
        })
    }

    /// The last flow PSN of segment flow `flow` of entry `acked`.
    fn segment_last(&self, acked: usize, flow: u16) -> FlowPsn {
        self.w
            .entries
            .get(acked)
            .and_then(|e| e.req.flow(flow))
            .map_or(FlowPsn::default(), |f| f.psns.full_psn(f.psns.lpsn))
    }

    /// The first segment not acknowledged, at `r_tid_ack` (a NAK and a
    /// RESYNC ACK name it). A RESYNC ACK names it by its IB PSN (the
    /// entry's first plus the segments acknowledged), and by the QP's
    /// flow if the segment has none, so the requester, halted until this
    /// ACK comes, always gets one it takes.
    fn first_unacked(&self) -> Option<Named> {
        let at = self.w.r_tid_ack?;
        let e = self.w.entries.get(at)?;
        let rec = e.req.flow(e.req.acked_tail);
        let held = rec.and_then(|f| Some((f.psns.resp_ib_psn, f.idx?)));
        if !self.w.resync {
            let (resp_ib_psn, flow) = held?;
            return Some(Named { resp_ib_psn, flow });
        }
        let resp_ib_psn = match self.rsp.ack.get(at) {
            Some(a) if a.kind == Some(EntryKind::Write) => a.psn.add(e.ack_seg),
            _ => self.rsp.expected_psn,
        };
        let flow = held
            .map(|(_, f)| f)
            .or(self.locked.flow.index)
            .unwrap_or(FlowIndex::MIN);
        Some(Named { resp_ib_psn, flow })
    }

    /// The RESYNC ACK's PSNs: the one before the QP's new generation, and
    /// the last KDETH PSN received in order before the RESYNC: the oldest
    /// receiving segment's (see `resync`), else the QP's (saved, so a
    /// RESYNC right after another reports the same). Kernel: the
    /// `qpriv->resync` branches of `hfi1_build_tid_rdma_write_ack()`.
    fn resync_kind(&mut self) -> AckKind {
        let generation = self.locked.flow.generation;
        if let Some(report) = self.w.resync_report.take() {
            self.w.r_next_psn_kdeth_save = report;
            self.w.save_valid = true;
            let bth = psn_before(generation).get();
            self.w.r_next_psn_kdeth = FlowPsn::from_raw(bth.wrapping_add(1));
            return AckKind::Resync {
                generation,
                saved: report,
            };
        }
        let got = FlowPsn::from_raw(self.w.r_next_psn_kdeth.raw().wrapping_sub(1));
        if !is_resync_psn(got.raw()) {
            self.w.r_next_psn_kdeth_save = got;
            self.w.save_valid = true;
            let bth = psn_before(generation).get();
            self.w.r_next_psn_kdeth = FlowPsn::from_raw(bth.wrapping_add(1));
        }
        AckKind::Resync {
            generation,
            saved: self.w.r_next_psn_kdeth_save,
        }
    }

    /// The RESYNC ACK went out.
    fn resync_answered(&mut self) {
        self.w.resync = false;
        self.w.stats.resync_acks += 1;
    }

    /// Frames the ACK.
    fn emit_ack(
        &self,
        sink: &mut impl PacketSink,
        syndrome: u8,
        kind: AckKind,
        named: &Named,
    ) -> Result<(), EngineError> {
        let built = tid_ack::build(&AckFields {
            remote_qp: self.conn.remote.qp,
            remote_jkey: self.conn.remote.jkey,
            remote_verbs_qp: self.conn.remote_verbs_qpn,
            aeth: aeth::Repr {
                syndrome,
                msn: self.rsp.msn,
            },
            local_qp: self.conn.local.qp,
            flow: named.flow,
            ctxt: u8::try_from(self.rcd.ctxt()).unwrap_or(u8::MAX),
            resp_ib_psn: named.resp_ib_psn,
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
        Ok(())
    }
}
