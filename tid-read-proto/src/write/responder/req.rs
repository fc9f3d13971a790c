// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A TID WRITE_REQ at the responder: validation, the ack-queue entry, the
//! RNR revive, and the first allocation. Kernel:
//! `hfi1_rc_rcv_tid_rdma_write_req()`.

use hfi1_hal::Psn;
use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::services::AllocContext;
use tid_flow::{SgeCursor, ring_count};

use super::{AllocCtx, Env, RecvPath, RnrNakState};
use crate::responder::{AckEntry, EntryKind, Responder};
use crate::wire::aeth::NakCode;
use crate::wire::write_req;
use crate::write::{TidReqState, WriteRegions};

/// What the responder did with a WRITE_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteReqVerdict {
    /// Accepted into the ack queue.
    Accepted,
    /// The resend of an RNR-NAKed request: its entry lives again.
    Revived,
    /// Dropped: the QP is in the error state, or the request is behind
    /// `r_psn` and repeats no TID WRITE entry.
    Dropped,
    /// Behind `r_psn`, repeating a TID WRITE entry: its WRITE_RESPs are
    /// sent again if some were (see `dup`), else it waits as it was.
    Duplicate,
    /// Refused; a NAK was earned if `Some` (it may still be dropped by
    /// the NAK rule). A refusal errors the QP, except a PSN NAK.
    Refused(Option<NakCode>),
}

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Receives a TID WRITE_REQ with IB PSN `psn`. Kernel:
    /// `hfi1_rc_rcv_tid_rdma_write_req()`.
    ///
    /// # Locking
    ///
    /// `r_lock` (`intr`) and the QP's `s_lock` held; takes `exp_lock`
    /// through `tid-flow`.
    pub(crate) fn receive_write_req(
        &mut self,
        intr: &RecvPath,
        psn: Psn,
        hdr: &write_req::Repr,
        wmrs: &impl WriteRegions,
    ) -> WriteReqVerdict {
        if self.dropped_not_receiving(wmrs) {
            return WriteReqVerdict::Dropped;
        }
        if !self.conn.remote_write {
            return self.refuse(NakCode::InvalidRequest, wmrs);
        }
        let len = hdr.reth.length;
        let max_len = self.conn.local.max_len.max(PAGE_SIZE);
        let num_segs = len.div_ceil(max_len);
        let diff = psn.delta(self.rsp.expected_psn);
        if diff > 0 {
            return WriteReqVerdict::Refused(self.rsp.psn_nak(*self.state));
        }
        if diff < 0 {
            return self.duplicate_write_req(intr, psn, wmrs);
        }
        // The resend of an RNR-NAKed request reuses its entry, one behind
        // the head.
        if self.w.rnr_nak_state != RnrNakState::Init {
            self.rsp.head = Responder::prev(self.rsp.head);
        }
        if let Err(q) = self.rsp.room(self.rsp.acked) {
            self.rsp.note_queue_full(q);
            return self.refuse(NakCode::InvalidRequest, wmrs);
        }
        if self.w.rnr_nak_state != RnrNakState::Init {
            // The entry keeps its region reference.
            let h = self.rsp.pass_over(self.rsp.acked);
            return self.revive(h, intr, wmrs);
        }
        let h = self.rsp.take_head(self.rsp.acked, wmrs);
        let Some(slot) = self.w.entries.get(h) else {
            return WriteReqVerdict::Dropped;
        };
        if len == 0 || len % PAGE_SIZE != 0 {
            return self.refuse(NakCode::InvalidRequest, wmrs);
        }
        let was_write = self.rsp.is_write(h);
        let r = &slot.req;
        if was_write
            && (ring_count(r.setup_head, r.clear_tail) != 0 || r.clear_tail != r.acked_tail)
        {
            return self.refuse(NakCode::InvalidRequest, wmrs);
        }
        let Some(mr) = wmrs.get_write(hdr.reth.vaddr, len, hdr.reth.rkey) else {
            return self.refuse(NakCode::RemoteAccessError, wmrs);
        };
        let cursor = wmrs
            .write_pages(mr, hdr.reth.vaddr)
            .and_then(|(pages, off)| SgeCursor::at_offset(pages, off));
        let Some(cursor) = cursor else {
            wmrs.put(mr);
            return self.refuse(NakCode::RemoteAccessError, wmrs);
        };
        self.fill(h, intr, (psn, num_segs, max_len), hdr, (mr, cursor), wmrs)
    }

    /// Fills slot `h` with an accepted request and allocates for it.
    fn fill(
        &mut self,
        h: usize,
        intr: &RecvPath,
        (psn, num_segs, max_len): (Psn, u32, u32),
        hdr: &write_req::Repr,
        (mr, cursor): (u32, SgeCursor),
        wmrs: &impl WriteRegions,
    ) -> WriteReqVerdict {
        let (Some(a), Some(e)) = (self.rsp.ack.get_mut(h), self.w.entries.get_mut(h)) else {
            wmrs.put(mr);
            return WriteReqVerdict::Dropped;
        };
        if e.req
            .alloc_flows(&self.rcd.mem, AllocContext::Atomic)
            .is_err()
        {
            wmrs.put(mr);
            return self.refuse(NakCode::RemoteOperationalError, wmrs);
        }
        let lpsn = psn.add(num_segs - 1);
        *a = AckEntry {
            kind: Some(EntryKind::Write),
            psn,
            lpsn,
            vaddr: hdr.reth.vaddr,
            len: hdr.reth.length,
            sent: false,
            mr: Some(mr),
        };
        let n_flows = num_segs.min(u32::from(self.conn.local.max_write));
        e.req.n_flows = u16::try_from(n_flows).unwrap_or(u16::MAX);
        e.req.seg_len = max_len;
        e.req.pmtu = self.conn.pmtu;
        e.req.cursor = cursor;
        e.req.flow_idx = e.req.setup_head;
        e.req.clear_tail = e.req.setup_head;
        e.req.acked_tail = e.req.setup_head;
        e.state = TidReqState::Init;
        e.total_len = hdr.reth.length;
        e.total_segs = num_segs;
        (e.alloc_seg, e.cur_seg, e.comp_seg, e.ack_seg) = (0, 0, 0, 0);
        self.rsp.nak_state = None;
        self.rsp.msn = self.rsp.msn.wrapping_add(1) & 0x00FF_FFFF;
        self.rsp.expected_psn = lpsn.add(1);
        self.w.stats.accepted += 1;
        self.set_tid_tail(h);
        self.update_head(h, intr, wmrs)
    }

    /// Moves `r_tid_tail` to a new entry `h` if nothing is receiving.
    fn set_tid_tail(&mut self, h: usize) {
        match self.w.r_tid_tail {
            None => self.w.r_tid_tail = Some(h),
            Some(t) if t == self.w.r_tid_head => {
                let done = match (self.rsp.ack.get(t), self.w.entries.get(t)) {
                    (Some(a), Some(e)) => {
                        a.kind != Some(EntryKind::Write) || e.comp_seg == e.total_segs
                    }
                    _ => true,
                };
                if done {
                    if self.w.r_tid_ack == Some(t) {
                        self.w.r_tid_ack = Some(h);
                    }
                    self.w.r_tid_tail = Some(h);
                }
            }
            Some(_) => {}
        }
    }

    /// An RNR-NAKed request's resend: the entry at `h` lives again, no
    /// check repeated. Kernel: the `rnr_nak_state` branch.
    fn revive(&mut self, h: usize, intr: &RecvPath, wmrs: &impl WriteRegions) -> WriteReqVerdict {
        self.w.rnr_nak = None;
        self.w.rnr_nak_state = RnrNakState::Init;
        self.rsp.nak_state = None;
        if let (Some(a), Some(e)) = (self.rsp.ack.get(h), self.w.entries.get_mut(h)) {
            self.rsp.expected_psn = a.lpsn.add(1);
            e.state = TidReqState::Init;
        }
        self.w.stats.revived += 1;
        match self.update_head(h, intr, wmrs) {
            WriteReqVerdict::Accepted => WriteReqVerdict::Revived,
            v => v,
        }
    }

    /// The head moves past `h`, and the receive path allocates.
    fn update_head(
        &mut self,
        h: usize,
        intr: &RecvPath,
        wmrs: &impl WriteRegions,
    ) -> WriteReqVerdict {
        self.rsp.head = Responder::next(h);
        self.w.r_tid_head = self.rsp.head;
        self.alloc_resources(wmrs, AllocCtx::Intr(intr));
        WriteReqVerdict::Accepted
    }

    /// The QP goes to the error state with NAK `code`.
    fn refuse(&mut self, code: NakCode, wmrs: &impl WriteRegions) -> WriteReqVerdict {
        self.w.stats.refused += 1;
        WriteReqVerdict::Refused(self.rsp.rc_error(code, self.state, wmrs))
    }
}
