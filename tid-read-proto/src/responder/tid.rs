// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A TID READ_REQ at the responder, and its duplicate. Kernel:
//! `hfi1_rc_rcv_tid_rdma_read_req()`, `tid_rdma_rcv_read_request()`,
//! `tid_rdma_rcv_error()` (the READ branch).

use hfi1_hal::Psn;

use super::{AckEntry, EntryKind, ReqVerdict, Responder};
use crate::admission::{self, Accepted, Reject};
use crate::rc::{Connection, MrTable, QpState};
use crate::response_stream::{Cursor, RespBuilder};
use crate::wire;
use crate::wire::aeth::NakCode;

/// Response packets of an accepted request: one per
/// `min(pmtu, rest of TID entry)` until the length is sent.
fn response_packets(acc: &Accepted, pmtu: u32) -> u32 {
    let mut b = RespBuilder::new(&acc.resp_flow(0, false, pmtu));
    let mut n = 0u32;
    while let Ok(p) = b.next_packet() {
        n += 1;
        if p.last {
            break;
        }
    }
    n.max(1)
}

/// Validates `request`; on success returns it with the memory-region
/// reference the R_Key check took (on failure a reference taken is
/// dropped again). Kernel: `rvt_rkey_ok()` inside the READ_REQ checks.
fn validate_taking_mr(
    view: &admission::QpView,
    request: &admission::Request<'_>,
    mrs: &impl MrTable,
) -> Result<(Accepted, Option<u32>), Reject> {
    let taken = core::cell::Cell::new(None);
    let res = admission::validate(view, request, |vaddr, len, rkey| {
        let mr = mrs.get(vaddr, len, rkey);
        taken.set(mr);
        mr.is_some()
    });
    match res {
        Ok(acc) => Ok((acc, taken.get())),
        Err(rej) => {
            if let Some(mr) = taken.get() {
                mrs.put(mr);
            }
            Err(rej)
        }
    }
}

impl Responder {
    /// Receives a TID READ_REQ. Returns the verdict; the send engine must
    /// run if [`Responder::has_work`] is true afterwards.
    /// Kernel: `hfi1_rc_rcv_tid_rdma_read_req()` and `tid_rdma_rcv_error()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`&mut self`, `st`). (The driver checks
    /// access, length and PSN under `r_lock` before taking `s_lock`; here
    /// all of it runs under `s_lock`.)
    pub fn receive_read_req(
        &mut self,
        conn: &Connection,
        st: &mut QpState,
        psn: Psn,
        hdr: &wire::read_req::Repr,
        payload: &[u8],
        mrs: &impl MrTable,
    ) -> ReqVerdict {
        if !st.receives() {
            self.drop_in_error(mrs);
            return ReqVerdict::Refused(None);
        }
        let room = self.room(self.tail);
        let view = admission::QpView {
            remote_read: conn.remote_read,
            max_len: conn.local.max_len,
            pmtu: conn.pmtu,
            expected_psn: self.expected_psn,
            ack_queue_full: room.is_err(),
        };
        let request = admission::Request {
            psn,
            header: *hdr,
            payload,
        };
        match validate_taking_mr(&view, &request, mrs) {
            Ok((acc, mr)) => self.accept(psn, acc, mr, conn.pmtu, mrs),
            Err(Reject::OutOfSequence { delta }) if delta < 0 => {
                self.duplicate(psn, hdr, payload, conn.pmtu, mrs)
            }
            Err(Reject::OutOfSequence { .. }) => ReqVerdict::Refused(self.psn_nak(*st)),
            Err(Reject::AckQueueFull) => {
                if let Err(q) = room {
                    self.note_queue_full(q);
                }
                ReqVerdict::Refused(self.rc_error(NakCode::RemoteOperationalError, st, mrs))
            }
            Err(other) => {
                let code = other.nak().unwrap_or(NakCode::InvalidRequest);
                ReqVerdict::Refused(self.rc_error(code, st, mrs))
            }
        }
    }

    /// Puts an accepted request into the slot at the head; `r_psn` and
    /// `r_msn` advance.
    fn accept(
        &mut self,
        psn: Psn,
        acc: Accepted,
        mr: Option<u32>,
        pmtu: u32,
        mrs: &impl MrTable,
    ) -> ReqVerdict {
        let n = response_packets(&acc, pmtu);
        let h = self.take_head(self.tail, mrs);
        let Some(e) = self.ack.get_mut(h) else {
            return ReqVerdict::Refused(None);
        };
        *e = AckEntry {
            psn,
            lpsn: psn.add(n - 1),
            vaddr: acc.vaddr,
            len: acc.length,
            sent: false,
            mr,
            kind: Some(EntryKind::Tid {
                acc,
                cursor: Cursor::default(),
            }),
        };
        self.expected_psn = self.expected_psn.add(n);
        self.msn = self.msn.wrapping_add(1) & 0x00FF_FFFF;
        self.head = Self::next(h);
        self.nak_state = None;
        self.stats.accepted += 1;
        ReqVerdict::Accepted
    }

    /// A TID READ_REQ behind `r_psn`: it must repeat an entry from its
    /// first PSN with the same length; the R_Key is checked again, the
    /// entry re-armed, and unless it is still waiting to be sent the send
    /// pointer rewinds to it. Kernel: `tid_rdma_rcv_error()`.
    fn duplicate(
        &mut self,
        psn: Psn,
        hdr: &wire::read_req::Repr,
        payload: &[u8],
        pmtu: u32,
        mrs: &impl MrTable,
    ) -> ReqVerdict {
        let (found, prev, old_req) = self.find_prev_entry(psn);
        let Some(e) = found.and_then(|i| self.ack.get_mut(i)) else {
            self.stats.duplicates_ignored += 1;
            return ReqVerdict::Refused(None);
        };
        let tid = matches!(e.kind, Some(EntryKind::Tid { .. }));
        if !tid || psn != e.psn || hdr.reth.length != e.len {
            self.stats.duplicates_ignored += 1;
            return ReqVerdict::Refused(None);
        }
        if let Some(old) = e.mr.take() {
            mrs.put(old);
        }
        // Re-validated against the entry's own PSN: the queue checks were
        // done when it was accepted.
        let view = admission::QpView {
            remote_read: true,
            max_len: u32::MAX,
            pmtu,
            expected_psn: psn,
            ack_queue_full: false,
        };
        let request = admission::Request {
            psn,
            header: *hdr,
            payload,
        };
        let Ok((acc, mr)) = validate_taking_mr(&view, &request, mrs) else {
            self.stats.duplicates_ignored += 1;
            return ReqVerdict::Refused(None);
        };
        let n = response_packets(&acc, pmtu);
        e.lpsn = psn.add(n - 1);
        e.vaddr = acc.vaddr;
        e.sent = false;
        e.mr = mr;
        e.kind = Some(EntryKind::Tid {
            acc,
            cursor: Cursor::default(),
        });
        self.stats.duplicates += 1;
        if !old_req {
            self.rewind_to(prev);
        }
        ReqVerdict::Restarted
    }
}
