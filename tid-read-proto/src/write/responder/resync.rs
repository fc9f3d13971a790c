// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A RESYNC at the responder: the QP's flow moves to the generation the
//! requester names, from sequence 0, and every allocated segment not yet
//! received is renumbered there; a RESYNC ACK is owed. Kernel:
//! `hfi1_rc_rcv_tid_rdma_resync()`.
//!
//! Deviation: the RESYNC ACK reports as received the last PSN the oldest
//! receiving segment got in order (its flow's `r_next_psn - 1`, the value
//! the renumbering itself uses), not the QP-wide `r_next_psn_kdeth`
//! (`_save`). Before any packet reached software that one is 0
//! (`kzalloc`), which the requester compares with the segment's PSNs in
//! 31-bit serial order: for half the generations 0 lies ahead, and the
//! requester acknowledged (and completed) a segment the responder never
//! got, while the responder kept its TIDs for it
//! (`tid-sim/tests/write_faults.rs`:
//! `a_resync_ack_before_any_packet_reports_nothing_received`).

use hfi1_hal::flags::TidFlags;
use hfi1_hal::{FlowPsn, Generation};
use tid_flow::{resync_hw_flow, ring_count, ring_indices};

use crate::wire::resync::is_resync_psn;

use super::{Env, RecvPath};
use crate::responder::Responder;

/// What the responder did with a RESYNC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResyncVerdict {
    /// The flow is in the new generation and a RESYNC ACK is owed.
    Resynced,
    /// Ignored: a generation that is neither the flow's next nor its
    /// current one, or a RESYNC ACK still owed for an earlier RESYNC.
    Ignored,
    /// Dropped: the QP is not receiving.
    Dropped,
}

/// The generation a RESYNC with BTH PSN `psn` names: the one after the
/// sequence-0x7FF PSN it carries. Kernel: `mask_psn(psn + 1) >>
/// HFI1_KDETH_BTH_SEQ_SHIFT`.
fn named_generation(psn: FlowPsn) -> Generation {
    FlowPsn::from_raw(psn.raw().wrapping_add(1)).generation()
}

impl<P: tid_flow::FlowPlatform> Env<'_, '_, P> {
    /// Receives a RESYNC with BTH PSN `psn`. Kernel:
    /// `hfi1_rc_rcv_tid_rdma_resync()`.
    ///
    /// Deviation from 6.1: a RESYNC naming the flow's current generation
    /// is ignored (`stale_resyncs`) once WRITE_DATA of that generation has
    /// come in order: placed by the chip (its flow register's next
    /// sequence is past 0 in that generation; with header suppression
    /// software sees only a segment's last packet) or seen by software.
    /// Such a RESYNC is taken again when its ACK was lost:
    /// the requester, halted, has sent nothing in the new generation, so
    /// none of its data has come. When some has, the RESYNC is a copy of
    /// the one already taken that the fabric held back. 6.1 takes it: the
    /// flow goes back to sequence 0 of the same generation and the
    /// segments not yet received are numbered from there again, onto the
    /// sequences the requester had already used for the segment received
    /// since. The next RESYNC ACK then counted that segment's packet as
    /// part of the following one, which the requester renumbered to no
    /// packets and could not send (`tests/write_responder.rs`:
    /// `a_late_copy_of_a_taken_resync_is_ignored`; the fuzz input
    /// `write_pair/late-copy-of-a-taken-resync`). A generation the flow
    /// entered otherwise (a new flow, or one moved on to give held TIDs
    /// back) has had none of its data yet when the requester first names
    /// it, so that RESYNC is taken.
    ///
    /// # Locking
    ///
    /// `r_lock` (`_intr`) and the QP's `s_lock` held; takes `exp_lock` to
    /// read the chip's flow register and, through `tid-flow`, to re-arm
    /// the flow.
    pub(crate) fn receive_resync(&mut self, _intr: &RecvPath, psn: FlowPsn) -> ResyncVerdict {
        if !self.state.receives() {
            self.w.stats.dropped += 1;
            return ResyncVerdict::Dropped;
        }
        let generation = named_generation(psn);
        let current = self.locked.flow.generation;
        // A QP between flows with no saved generation takes any.
        let next = if current.is_reserved() {
            generation
        } else {
            current.next()
        };
        let previous = Generation::masked(next.get().wrapping_sub(1));
        if (generation != next && generation != previous) || self.w.resync {
            self.w.stats.resyncs_ignored += 1;
            return ResyncVerdict::Ignored;
        }
        let placed = self.locked.flow.index.is_some_and(|idx| {
            let chip = super::eflags::chip_next_psn(self.rcd, self.locked.token, idx);
            chip.generation() == current && chip.seq() != 0
        });
        if generation == current && (placed || self.w.data_generation == Some(current)) {
            self.w.stats.stale_resyncs += 1;
            return ResyncVerdict::Ignored;
        }
        self.w.resync_report = self.oldest_received();
        resync_hw_flow(self.rcd, self.locked.again(), generation);
        self.w.flags.remove(TidFlags::R_TID_SW_PSN);
        self.release_held();
        self.renumber();
        self.w.resync = true;
        // A RESYNC is always answered with an ACK, never a NAK.
        self.w.tid_nak = None;
        self.trigger_ack();
        self.w.stats.resyncs += 1;
        ResyncVerdict::Resynced
    }

    /// Every allocated segment not yet received, from `r_tid_tail` to the
    /// newest TID WRITE entry (`r_tid_head`), gets the QP's (new)
    /// generation and consecutive sequences from the QP's flow PSN: as
    /// many packets as it still expects (with header suppression, the
    /// whole segment).
    ///
    /// Deviation from 6.1: `hfi1_rc_rcv_tid_rdma_resync()` stops at the
    /// send pointer (`s_tail_ack_queue`). A duplicate WRITE_REQ rewinds
    /// that pointer to its own entry, and a RESYNC then leaves the later
    /// entries' segments, whose WRITE_RESPs the requester has and which
    /// it renumbers after the first, in the old generation. The next
    /// RESYNC renumbers them from sequence 0, where the requester resends
    /// the first WRITE's segment: the chip places that WRITE's data into
    /// the second one's buffer and the responder acknowledges it as the
    /// second's (`tests/write_responder.rs`:
    /// `a_resync_after_a_rewinding_duplicate_renumbers_every_segment`;
    /// the fuzz input `write_pair/resync-after-a-rewinding-duplicate`).
    /// Segments allocated past the send pointer have sent no WRITE_RESP
    /// yet; renumbered, theirs names the flow's new generation instead
    /// of the old one, which the chip no longer accepts.
    fn renumber(&mut self) {
        let Some(start) = self.w.r_tid_tail else {
            return;
        };
        let generation = self.locked.flow.generation;
        for i in Responder::slots(start, self.w.r_tid_head) {
            let is_write = self.rsp.is_write(i);
            if let Some(e) = self.w.entries.get_mut(i).filter(|_| is_write) {
                for fi in ring_indices(e.req.clear_tail, e.req.setup_head) {
                    if let Some(f) = e.req.flow_mut(fi) {
                        let last = f.psns.full_psn(f.psns.lpsn).raw();
                        let got = f.psns.r_next_psn.raw().wrapping_sub(1);
                        // Kernel: `delta_psn(lpsn, next - 1)`; at least
                        // one packet, as a segment not received has one
                        // left.
                        let left = (last.wrapping_sub(got) << 8) as i32 >> 8;
                        let npkts = left.max(1) as u32;
                        let spsn = self.locked.flow.psn;
                        f.npkts = npkts;
                        f.psns.generation = generation;
                        f.psns.spsn = spsn;
                        f.psns.lpsn = spsn + npkts - 1;
                        f.psns.r_next_psn = f.psns.full_psn(spsn);
                        self.locked.flow.psn = spsn + npkts;
                    }
                }
            }
        }
    }

    /// A TID ACK (or NAK) is owed: `r_tid_ack` names the entry receiving
    /// data if it named none yet. Kernel: `tid_rdma_trigger_ack()`
    /// (`validate_r_tid_ack()`, `tid_rdma_schedule_ack()`).
    /// The last flow PSN the oldest segment still receiving got in
    /// order (its flow's next expected PSN, less one), before the
    /// renumbering moves it; `None` if no segment is receiving, or if it
    /// got nothing since a RESYNC that was answered.
    fn oldest_received(&self) -> Option<FlowPsn> {
        let t = self.w.r_tid_tail.filter(|&t| self.rsp.is_write(t))?;
        let e = self.w.entries.get(t)?;
        if ring_count(e.req.setup_head, e.req.clear_tail) == 0 {
            return None;
        }
        let f = e.req.flow(e.req.clear_tail)?;
        let got = FlowPsn::from_raw(f.psns.r_next_psn.raw().wrapping_sub(1));
        // Nothing received since an earlier RESYNC renumbered it: report
        // what that RESYNC's ACK did (6.1's rule for back-to-back RESYNCs,
        // the requester may not have that ACK).
        if is_resync_psn(got.raw()) && self.w.save_valid {
            return None;
        }
        Some(got)
    }

    pub(crate) fn trigger_ack(&mut self) {
        if self.w.r_tid_ack.is_none() {
            self.w.r_tid_ack = self.w.r_tid_tail;
        }
        self.w.flags.insert(TidFlags::ACK_PENDING);
    }
}
