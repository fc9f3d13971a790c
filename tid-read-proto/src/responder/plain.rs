// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A plain RDMA READ request at the responder, and its duplicate. Kernel:
//! the `OP(RDMA_READ_REQUEST)` cases of `hfi1_rc_rcv()` and
//! `rc_rcv_error()`.

use hfi1_hal::Psn;

use super::{AckEntry, EntryKind, ReqVerdict, Responder};
use crate::qualify::div_mtu;
use crate::rc::{Connection, MrTable, QpState};
use crate::wire::aeth::NakCode;
use crate::wire::reth;

impl Responder {
    /// Receives a plain RDMA READ request with PSN `psn`. Returns the
    /// verdict; the send engine must run if [`Responder::has_work`] is true
    /// afterwards. Kernel: `hfi1_rc_rcv()` for `RDMA_READ_REQUEST`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`&mut self`, `st`).
    pub fn receive_plain_read(
        &mut self,
        conn: &Connection,
        st: &mut QpState,
        psn: Psn,
        r: &reth::Repr,
        mrs: &impl MrTable,
    ) -> ReqVerdict {
        if !st.receives() {
            self.drop_in_error(mrs);
            return ReqVerdict::Refused(None);
        }
        let diff = psn.delta(self.expected_psn);
        if diff > 0 {
            return ReqVerdict::Refused(self.psn_nak(*st));
        }
        if diff < 0 {
            return self.plain_duplicate(psn, r, conn.pmtu, mrs);
        }
        if !conn.remote_read {
            return ReqVerdict::Refused(self.rc_error(NakCode::InvalidRequest, st, mrs));
        }
        if let Err(q) = self.room(self.acked) {
            self.note_queue_full(q);
            return ReqVerdict::Refused(self.rc_error(NakCode::InvalidRequest, st, mrs));
        }
        let h = self.take_head(self.acked, mrs);
        let mut mr = None;
        if r.length > 0 {
            mr = mrs.get(r.vaddr, r.length, r.rkey);
            if mr.is_none() {
                return ReqVerdict::Refused(self.rc_error(NakCode::RemoteAccessError, st, mrs));
            }
            self.expected_psn = self.expected_psn.add(div_mtu(r.length - 1, conn.pmtu));
        }
        let lpsn = self.expected_psn;
        let Some(e) = self.ack.get_mut(h) else {
            return ReqVerdict::Refused(None);
        };
        *e = AckEntry {
            kind: Some(EntryKind::Plain),
            psn,
            lpsn,
            vaddr: r.vaddr,
            len: r.length,
            sent: false,
            mr,
        };
        self.msn = self.msn.wrapping_add(1) & 0x00FF_FFFF;
        self.expected_psn = self.expected_psn.add(1);
        self.nak_state = None;
        self.head = Self::next(h);
        self.stats.plain_accepted += 1;
        ReqVerdict::Accepted
    }

    /// A plain READ request behind `r_psn`: it must ask for a suffix of an
    /// entry starting on an MTU boundary; the R_Key is checked again and
    /// the entry serves the suffix; unless it is still waiting to be sent,
    /// the send pointer rewinds to it. Kernel: `rc_rcv_error()`.
    fn plain_duplicate(
        &mut self,
        psn: Psn,
        r: &reth::Repr,
        pmtu: u32,
        mrs: &impl MrTable,
    ) -> ReqVerdict {
        let (found, prev, old_req) = self.find_prev_entry(psn);
        let Some(e) = found.and_then(|i| self.ack.get_mut(i)) else {
            self.stats.duplicates_ignored += 1;
            return ReqVerdict::Refused(None);
        };
        let offset = u64::try_from(psn.delta(e.psn)).unwrap_or(u64::MAX) * u64::from(pmtu);
        if e.kind != Some(EntryKind::Plain) || offset + u64::from(r.length) != u64::from(e.len) {
            self.stats.duplicates_ignored += 1;
            return ReqVerdict::Refused(None);
        }
        if let Some(old) = e.mr.take() {
            mrs.put(old);
        }
        if r.length != 0 {
            let Some(mr) = mrs.get(r.vaddr, r.length, r.rkey) else {
                self.stats.duplicates_ignored += 1;
                return ReqVerdict::Refused(None);
            };
            e.mr = Some(mr);
            e.vaddr = r.vaddr;
        } else {
            e.vaddr = 0;
        }
        e.len = r.length;
        e.psn = psn;
        self.stats.duplicates += 1;
        if !old_req {
            self.rewind_to(prev);
        }
        ReqVerdict::Restarted
    }
}
