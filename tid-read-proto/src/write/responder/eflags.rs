// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A WRITE_DATA the chip handed to software with an error: a flow
//! sequence error starts software PSN checking and a TID NAK for the
//! packet the chip expected, a generation error (a stale packet) earns a
//! NAK too; once checking in software, an in-order packet goes on and a
//! segment's in-order last packet is received normally. Kernel: the TID
//! WRITE half of `hfi1_handle_kdeth_eflags()`.
//!
//! Deviation: with software checking on, a sequence error first reads
//! the chip's flow register again; if the chip is past software's
//! expected PSN it placed the resend the last TID NAK asked for without
//! telling software, so software follows it and the NAK episode ends
//! (6.1 ends it only when software sees that PSN, which it never does
//! then): a second loss in the segment is NAKed at once instead of
//! waiting for the TID retry timer and a RESYNC, which under loss starved
//! the QPs waiting for the responder's TIDs into RETRY_EXC_ERR
//! (`tid-sim/tests/write_faults.rs`:
//! `a_duplicate_ending_an_rnr_episode_rnr_naks_again_while_tids_are_short`).

use hfi1_hal::flags::TidFlags;
use hfi1_hal::lock_order::{LockToken, SLock};
use hfi1_hal::platform::FlowTable;
use hfi1_hal::{FlowIndex, FlowPsn};
use tid_flow::{FlowPlatform, FlowRecord, RcvCtxt};

use super::{DataVerdict, Env, RecvPath};
use crate::requester::KdethError;
use crate::write::WriteRegions;

impl<P: FlowPlatform> Env<'_, '_, P> {
    /// Receives a WRITE_DATA (`last_of_request`: a WRITE_DATA_LAST) with
    /// flow PSN `psn` that the chip delivered with `error`. Kernel: the TID
    /// WRITE half of `hfi1_handle_kdeth_eflags()`, and
    /// `hfi1_rc_rcv_tid_rdma_write_data()` when it returns false.
    ///
    /// # Locking
    ///
    /// `r_lock` (`intr`) and the QP's `s_lock` held; takes `exp_lock` to
    /// read the flow register, and through `tid-flow` if the packet
    /// completes a segment.
    pub(crate) fn receive_write_data_error(
        &mut self,
        intr: &RecvPath,
        psn: FlowPsn,
        last_of_request: bool,
        error: KdethError,
        wmrs: &impl WriteRegions,
    ) -> DataVerdict {
        if self.dropped_not_receiving(wmrs) {
            return DataVerdict::Dropped;
        }
        // No payload was placed: a TID error on an expected packet is
        // just dropped.
        if error == KdethError::Tid {
            self.w.stats.dropped += 1;
            return DataVerdict::Dropped;
        }
        let receiving = self
            .w
            .r_tid_tail
            .filter(|&t| t != self.w.r_tid_head && self.rsp.is_write(t));
        let Some(e) = receiving.and_then(|t| self.w.entries.get_mut(t)) else {
            self.w.stats.dropped += 1;
            return DataVerdict::Dropped;
        };
        // Only while a WRITE_RESP went out for a segment without its data.
        let ct = e.req.clear_tail;
        let Some(f) = e.req.flow_mut(ct).filter(|_| e.comp_seg != e.cur_seg) else {
            self.w.stats.dropped += 1;
            return DataVerdict::Dropped;
        };
        if error == KdethError::FlowGen {
            self.w.stats.gen_errors += 1;
            let expected = f.psns.r_next_psn;
            return self.nak_once(expected);
        }
        self.w.stats.seq_errors += 1;
        if !self.w.flags.contains(TidFlags::R_TID_SW_PSN) {
            // First error of the episode: from where the chip stands.
            self.w.flags.insert(TidFlags::R_TID_SW_PSN);
            if let Some(idx) = f.idx {
                f.psns.r_next_psn = chip_next_psn(self.rcd, self.locked.token, idx);
            }
            let expected = f.psns.r_next_psn;
            self.w.r_next_psn_kdeth = expected;
            return self.nak_once(expected);
        }
        // The chip placed in-sequence packets since, without telling
        // software: the packet the last NAK asked for came, and that
        // episode is over.
        if follow_chip(self.rcd, self.locked.token, f) {
            self.w.r_next_psn_kdeth = f.psns.r_next_psn;
            self.w.tid_nak = None;
        }
        let diff = psn.as_psn().delta(f.psns.r_next_psn.as_psn());
        if diff > 0 {
            let expected = f.psns.r_next_psn;
            return self.nak_once(expected);
        }
        if diff < 0 {
            self.w.stats.dropped += 1;
            return DataVerdict::Dropped;
        }
        self.w.tid_nak = None;
        let last = psn == f.psns.full_psn(f.psns.lpsn);
        let next = FlowPsn::from_raw(psn.raw().wrapping_add(1));
        f.psns.r_next_psn = next;
        self.w.r_next_psn_kdeth = next;
        if last {
            return self.receive_write_data(intr, psn, last_of_request, wmrs);
        }
        DataVerdict::InSequence
    }

    /// A TID NAK for `expected`, once per episode. Kernel: the `nak_psn`
    /// label of `hfi1_handle_kdeth_eflags()`.
    fn nak_once(&mut self, expected: FlowPsn) -> DataVerdict {
        if self.w.tid_nak.is_none() {
            self.w.tid_nak = Some(expected);
            self.trigger_ack();
        }
        DataVerdict::Nak
    }
}

/// The flow PSN the chip expects next on hardware flow `idx`, from its
/// flow register.
///
/// # Locking
///
/// The QP's `s_lock` held (`token`); takes `exp_lock`.
pub(super) fn chip_next_psn<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    token: &mut LockToken<'_, SLock>,
    idx: FlowIndex,
) -> FlowPsn {
    let es = rcd.exp_lock.lock(token);
    es.chip.read_flow(idx).next_psn()
}

/// With software checking on, software's expected PSN for flow `f`
/// follows the chip's if the chip is ahead in the same generation (it
/// placed the resend the last TID NAK asked for without telling
/// software). True if it moved.
///
/// # Locking
///
/// The QP's `s_lock` held (`token`); takes `exp_lock`.
fn follow_chip<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    token: &mut LockToken<'_, SLock>,
    f: &mut FlowRecord,
) -> bool {
    let Some(idx) = f.idx else {
        return false;
    };
    let chip = chip_next_psn(rcd, token, idx);
    let same_gen = chip.generation() == f.psns.r_next_psn.generation();
    if same_gen && chip.as_psn().delta(f.psns.r_next_psn.as_psn()) > 0 {
        f.psns.r_next_psn = chip;
        return true;
    }
    false
}
