// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The READ responder (SPEC §5 "Responder"): TID READ_REQs and plain RDMA
//! READ requests into the ack queue, and the send engine that streams
//! their responses, as `hfi1_rc_rcv_tid_rdma_read_req()`,
//! `tid_rdma_rcv_error()`, `hfi1_rc_rcv()` (`RDMA_READ_REQUEST`),
//! `rc_rcv_error()` and `make_rc_ack()` do.
//!
//! The rooms: here the ack queue, the NAK rule and the error state;
//! `tid`: a TID READ_REQ and its duplicate; `plain`: a plain READ request
//! and its duplicate; `send`: the responses.
//!
//! **Requests.** A TID READ_REQ is validated ([`crate::admission::validate`],
//! access and length before the PSN, so even a duplicate with a bad length
//! errors the QP); each segment is its own ack-queue entry keeping the
//! requester's flow and spanning one IB PSN per response packet. A plain
//! READ request is checked PSN first, then access, queue room and R_Key;
//! its entry spans `ceil(length / pmtu)` PSNs (one for a zero-length READ).
//! `r_psn` and `r_msn` advance.
//!
//! **The queue full rule.** A new request needs the slot after
//! `r_head_ack_queue`. If that slot is the send pointer's
//! (`s_tail_ack_queue` for a TID READ_REQ, `s_acked_ack_queue` for a plain
//! one, the same without TID WRITE) and its entry is not yet sent, the
//! request is refused (remote operational error for a TID READ_REQ,
//! invalid request for a plain one) and the QP errors; a sent entry there
//! is passed over (`update_ack_queue()`).
//!
//! **Duplicates.** A request behind `r_psn` is looked up from
//! `r_head_ack_queue` backwards (`find_prev_entry()`): it must name the
//! entry's first PSN and length (a TID READ_REQ) or a suffix of it (a
//! plain one), its R_Key is checked again, and the entry is armed again;
//! unless the entry is still waiting to be sent, the send pointer rewinds
//! to it, so it and every later entry a duplicate re-armed are sent again.
//! The send engine stops at the first entry no duplicate re-armed (sent
//! before, its region released) and parks the pointer at the head. A
//! request ahead of `r_psn` earns one PSN NAK per episode.
//!
//! **Errors.** An access error, a bad length, a full queue or a bad
//! payload moves the QP to the error state (`rvt_rc_error()`): every
//! ack-queue region reference is dropped, nothing more is sent and every
//! packet is dropped. The NAK it earns is deferred to the end of the
//! receive (`rc_defered_ack()`): sent at once if no response is pending,
//! else handed to the send engine, which drops it in the error state
//! (`hfi1_send_rc_ack()`, `hfi1_queue_rc_ack()`). A PSN NAK waits behind
//! pending responses the same way.
//!
//! Deviations from 6.1, on purpose:
//!
//! - A TID READ_REQ with a bad R_Key is NAKed (remote access error) under
//!   the NAK rule above; 6.1 errors the QP and sends nothing, so the
//!   requester learns of it only after its retry budget is spent
//!   (`tests/regress_rc.rs`:
//!   `bad_rkey_read_req_is_naked_as_a_remote_access_error`).
//! - A TID entry spans as many IB PSNs as READ_RESP packets are really
//!   sent (one per `min(pmtu, rest of TID entry)`), the same count the
//!   requester gives the segment, not `ceil(length / pmtu)`: with an 8 KiB
//!   MTU over 4 KiB TID entries the two differ and 6.1's `r_psn` falls
//!   behind the requester's next PSN.
//! - A region reference held by an ack-queue entry is dropped as soon as
//!   the QP is in the error state and the responder runs (with the region
//!   table), not inside `rvt_error_qp()`: the requester's paths that error
//!   the QP have no region table.
//!
//! Kept as 6.1 has it, though the kernel does not survive it: stale
//! duplicates of READ_REQs the requester has completed rewind the send
//! pointer and re-arm their entries, so new requests can find the ack
//! queue full and the QP errors (the `read_pair` fuzz finding;
//! `tests/engine_responder.rs`:
//! `stale_duplicates_fill_the_ack_queue_as_in_the_kernel`).
//!
//! The error state and the NAK rule are pinned in
//! `tests/engine_responder.rs`:
//! `a_full_ack_queue_errors_the_qp_and_its_nak_is_dropped_behind_responses`
//! (pending responses) and `invalid_read_req_errors_the_responder_qp`
//! (none pending).
//!
//! # Locking
//!
//! `&mut Responder` is part of the QP's state under its `s_lock`
//! ([`crate::qp::TidQp`]); no method takes another lock.

mod plain;
mod send;
mod tid;

use hfi1_hal::Psn;

use crate::admission::Accepted;
use crate::rc::{ACK_QUEUE_SIZE, MrTable, QpState, counters};
use crate::response_stream::Cursor;
use crate::wire::aeth::NakCode;

/// What an ack-queue entry answers. (The TID variant keeps its 64 TID
/// entries in place, as the kernel's flow record does: every slot of the
/// ack queue may hold one.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum EntryKind {
    /// One segment of a TID READ: the requester's flow, and where its
    /// response stream stands.
    Tid {
        /// The accepted request.
        acc: Accepted,
        /// The stream's cursor (kept when the send pointer moves away in
        /// the middle of it).
        cursor: Cursor,
    },
    /// A plain RDMA READ.
    Plain,
    /// A TID RDMA WRITE: its request state lives in the same slot of the
    /// WRITE responder ([`crate::write::responder`]).
    Write,
}

/// What the receive side's NAK state holds while an episode lasts: no
/// other NAK is earned until it is cleared. Kernel: the value of
/// `qp->r_nak_state` (0 for `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpisodeNak {
    /// A NAK with this code (a PSN error, or the error that moved the QP
    /// to the error state).
    Nak(NakCode),
    /// An RNR NAK of the TID WRITE responder with this AETH syndrome
    /// (`IB_RNR_NAK` with the timer index), scheduled or sent, until the
    /// resent request (or an earlier duplicate) ends the episode.
    Rnr(u8),
}

/// One ack-queue entry. Kernel: `struct rvt_ack_entry` with its
/// `tid_rdma_request` (one flow).
#[derive(Debug, Clone, Default)]
pub(crate) struct AckEntry {
    /// `None` for a slot never used. Kernel: `e->opcode`.
    pub(crate) kind: Option<EntryKind>,
    /// First and last IB PSN. Kernel: `e->psn`, `e->lpsn`.
    pub(crate) psn: Psn,
    pub(crate) lpsn: Psn,
    /// Where to read and how much (a plain READ: what is left of it after
    /// a duplicate asked for a suffix). Kernel: `e->rdma_sge`.
    pub(crate) vaddr: u64,
    pub(crate) len: u32,
    /// Its last response was built. Kernel: `e->sent`.
    pub(crate) sent: bool,
    /// The region reference. Kernel: `e->rdma_sge.mr`.
    pub(crate) mr: Option<u32>,
}

/// Where the response engine stands. Kernel: `qp->s_ack_state`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum AckState {
    /// Between entries (`OP(ACKNOWLEDGE)`).
    #[default]
    Idle,
    /// Streaming the TID entry at the send pointer.
    Tid,
    /// Streaming the plain entry at the send pointer: the next response's
    /// index.
    Plain {
        /// Responses of the entry built so far.
        index: u32,
    },
}

counters! {
    /// What the responder counted.
    pub struct RespStats {
        /// TID READ_REQs accepted.
        pub accepted,
        /// Plain RDMA READ requests accepted.
        pub plain_accepted,
        /// Duplicate requests that re-armed an entry.
        pub duplicates,
        /// Duplicate requests ignored.
        pub duplicates_ignored,
        /// Requests refused because the ack queue was full.
        pub queue_full,
        /// NAKs sent.
        pub naks,
        /// NAKs dropped (deferred while responses were pending, and the QP
        /// then in the error state).
        pub naks_dropped,
        /// Response packets sent (TID READ_RESPs and plain responses).
        pub packets,
        /// Entries whose last response was sent.
        pub segments,
        /// Times the send pointer parked at an entry no duplicate re-armed.
        pub parked,
        /// Packets dropped because the QP was in the error state.
        pub dropped_in_error,
    }
}

/// A request refused because the ack queue was full, and the entry in
/// the slot it needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull {
    /// The refused request's PSN.
    pub psn: Psn,
    /// The first PSN of the unsent entry that held the slot.
    pub blocker: Psn,
    /// Whether the slot held a request: false when the acknowledged
    /// pointer ran past the head onto a slot never filled, which 6.1's
    /// duplicate handling allows.
    pub held: bool,
}

/// The responder side of a QP.
///
/// # Locking
///
/// Part of [`crate::qp::TidQp`], under the QP's `s_lock`.
pub struct Responder {
    /// The next IB PSN expected. Kernel: `qp->r_psn`.
    pub(crate) expected_psn: Psn,
    /// Message sequence number (24 bits). Kernel: `qp->r_msn`.
    pub(crate) msn: u32,
    /// The NAK of the current episode. Kernel: `qp->r_nak_state`.
    pub(crate) nak_state: Option<EpisodeNak>,
    /// A NAK sent at once (no response was pending). Kernel: the direct
    /// send of `hfi1_send_rc_ack()`.
    pub(crate) direct_nak: Option<(NakCode, Psn)>,
    /// A NAK the send engine sends once no response is left. Kernel:
    /// `RVT_S_ACK_PENDING` with `s_nak_state`, `s_ack_psn`.
    pub(crate) queued_nak: Option<(NakCode, Psn)>,
    pub(crate) ack: [AckEntry; ACK_QUEUE_SIZE],
    /// Next entry to fill. Kernel: `r_head_ack_queue`.
    pub(crate) head: usize,
    /// Next entry to send. Kernel: `s_tail_ack_queue`.
    pub(crate) tail: usize,
    /// Oldest entry not acknowledged (equal to `tail` without TID WRITE).
    /// Kernel: `s_acked_ack_queue`.
    pub(crate) acked: usize,
    pub(crate) state: AckState,
    last_queue_full: Option<QueueFull>,
    /// What happened so far.
    pub stats: RespStats,
}

impl core::fmt::Debug for Responder {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Responder {{ r_psn {:#x} msn {} nak {:?} direct {:?} queued {:?} head {} tail {} \
             acked {} {:?} full {:?}",
            self.expected_psn.get(),
            self.msn,
            self.nak_state,
            self.direct_nak,
            self.queued_nak,
            self.head,
            self.tail,
            self.acked,
            self.state,
            self.last_queue_full,
        )?;
        for (i, e) in self.ack.iter().enumerate() {
            let kind = match &e.kind {
                None => continue,
                Some(EntryKind::Tid { acc, cursor }) => {
                    write!(
                        f,
                        " | {i}: T {:#x}..={:#x} g{}:{} pkt {}",
                        e.psn.get(),
                        e.lpsn.get(),
                        acc.generation.get(),
                        acc.spsn,
                        cursor.pkt
                    )?;
                    ""
                }
                Some(EntryKind::Plain) => {
                    write!(f, " | {i}: P {:#x}..={:#x}", e.psn.get(), e.lpsn.get())?;
                    ""
                }
                Some(EntryKind::Write) => {
                    write!(f, " | {i}: W {:#x}..={:#x}", e.psn.get(), e.lpsn.get())?;
                    ""
                }
            };
            write!(f, "{kind} sent {} mr {}", e.sent, e.mr.is_some())?;
        }
        write!(f, " {:?} }}", self.stats)
    }
}

impl Responder {
    /// An idle responder expecting `psn` first.
    pub fn new(psn: Psn) -> Self {
        Self {
            expected_psn: psn,
            msn: 0,
            nak_state: None,
            direct_nak: None,
            queued_nak: None,
            ack: Default::default(),
            head: 0,
            tail: 0,
            acked: 0,
            state: AckState::Idle,
            last_queue_full: None,
            stats: RespStats::default(),
        }
    }

    /// The next IB PSN expected. Kernel: `qp->r_psn`.
    pub fn expected_psn(&self) -> Psn {
        self.expected_psn
    }

    /// The message sequence number (24 bits). Kernel: `qp->r_msn`.
    pub fn msn(&self) -> u32 {
        self.msn
    }

    /// The last request refused because the ack queue was full.
    pub fn last_queue_full(&self) -> Option<QueueFull> {
        self.last_queue_full
    }

    /// Counts a request refused for a full ack queue and keeps it for
    /// [`Self::last_queue_full`].
    pub(crate) fn note_queue_full(&mut self, q: QueueFull) {
        self.stats.queue_full += 1;
        self.last_queue_full = Some(q);
    }

    /// True if responses wait to be sent. Kernel: `RVT_S_RESP_PENDING`.
    pub(crate) fn responses_pending(&self) -> bool {
        self.tail != self.head || self.state != AckState::Idle
    }

    /// True if the send engine has something to send for a QP in `st`.
    pub fn has_work(&self, st: QpState) -> bool {
        self.direct_nak.is_some()
            || (st.receives() && (self.responses_pending() || self.queued_nak.is_some()))
    }

    /// Memory-region references the ack queue holds.
    pub fn mr_refs(&self) -> usize {
        self.ack.iter().filter(|e| e.mr.is_some()).count()
    }

    /// Releases every region reference and forgets what was to be sent,
    /// NAKs included (QP destroy). Kernel: the ack-queue walk of
    /// `rvt_reset_qp()`.
    pub fn release_all(&mut self, mrs: &impl MrTable) {
        self.release_refs(mrs);
        self.direct_nak = None;
    }

    /// Releases every region reference and forgets the responses still to
    /// be sent (the error state). Kernel: `rvt_clear_mr_refs()`.
    pub(crate) fn release_refs(&mut self, mrs: &impl MrTable) {
        for e in &mut self.ack {
            if let Some(mr) = e.mr.take() {
                mrs.put(mr);
            }
        }
        self.tail = self.head;
        self.acked = self.head;
        self.state = AckState::Idle;
        self.queued_nak = None;
    }

    pub(crate) fn next(i: usize) -> usize {
        (i + 1) % ACK_QUEUE_SIZE
    }

    pub(crate) fn prev(i: usize) -> usize {
        (i + ACK_QUEUE_SIZE - 1) % ACK_QUEUE_SIZE
    }

    /// The ack-queue slots from `from` on, stopping before `to`: see
    /// [`AckSlots`].
    pub(crate) fn slots(from: usize, to: usize) -> AckSlots {
        AckSlots {
            at: from,
            end: to,
            step: Self::next,
        }
    }

    /// The same walk backwards, stepping by [`Self::prev`]: from `from`
    /// down, stopping before `to`.
    pub(crate) fn slots_back(from: usize, to: usize) -> AckSlots {
        AckSlots {
            at: from,
            end: to,
            step: Self::prev,
        }
    }

    /// The slot after the head if a new request may take it: `None` (the
    /// queue is full) if it is the pointer's `at` and its entry is not
    /// sent. Kernel: the `next == s_tail_ack_queue` (or
    /// `s_acked_ack_queue`) test.
    pub(crate) fn room(&self, at: usize) -> Result<usize, QueueFull> {
        let next = Self::next(self.head);
        if next == at && self.ack.get(next).is_some_and(|e| !e.sent) {
            let blocker = self.ack.get(next).map_or(Psn::new(0), |e| e.psn);
            let held = self.ack.get(next).is_some_and(|e| e.kind.is_some());
            return Err(QueueFull {
                psn: self.expected_psn,
                blocker,
                held,
            });
        }
        Ok(next)
    }

    /// Takes the slot at the head for a new entry (room was checked): a
    /// sent entry in the slot after it is passed over first.
    /// Kernel: `update_ack_queue()` and `release_rdma_sge_mr()`.
    pub(crate) fn take_head(&mut self, at: usize, mrs: &impl MrTable) -> usize {
        let h = self.pass_over(at);
        if let Some(old) = self.ack.get_mut(h).and_then(|e| e.mr.take()) {
            mrs.put(old);
        }
        h
    }

    /// Passes over a sent entry in the slot after the head if it is the
    /// pointer's `at` (room was checked); returns the head. Kernel:
    /// `update_ack_queue()`.
    pub(crate) fn pass_over(&mut self, at: usize) -> usize {
        let next = Self::next(self.head);
        if next == at {
            self.tail = Self::next(next);
            self.acked = self.tail;
            self.state = AckState::Idle;
        }
        self.head
    }

    /// Finds the entry a duplicate with `psn` repeats, walking back from
    /// the head: its slot, the slot it was found at (`prev`), and whether
    /// it is still waiting to be sent (`old_req`). Kernel:
    /// `find_prev_entry()`.
    pub(crate) fn find_prev_entry(&self, psn: Psn) -> (Option<usize>, usize, bool) {
        // Still to be sent until the walk has passed the send pointer.
        let mut scheduled = self.head != self.tail;
        for p in Self::slots_back(Self::prev(self.head), self.head) {
            let Some(e) = self.ack.get(p).filter(|e| e.kind.is_some()) else {
                return (None, p, scheduled);
            };
            if psn.delta(e.psn) >= 0 {
                if p == self.tail && psn.delta(e.lpsn) <= 0 {
                    scheduled = false;
                }
                return (Some(p), p, scheduled);
            }
            if p == self.tail {
                scheduled = false;
            }
        }
        // Round to the head: every slot is older than `psn`.
        (None, self.head, scheduled)
    }

    /// The send pointer moves back to `prev` so it and every later
    /// re-armed entry are sent again. Kernel: the end of
    /// `tid_rdma_rcv_error()` / `rc_rcv_error()`.
    pub(crate) fn rewind_to(&mut self, prev: usize) {
        if self.acked == self.tail {
            self.acked = prev;
        }
        self.tail = prev;
        self.state = AckState::Idle;
        self.nak_state = None;
    }

    /// A PSN NAK for a request ahead of `r_psn`, once per episode.
    /// Kernel: the `diff > 0` branch of `tid_rdma_rcv_error()` /
    /// `rc_rcv_error()`.
    pub(crate) fn psn_nak(&mut self, st: QpState) -> Option<NakCode> {
        if self.nak_state.is_some() {
            return None;
        }
        self.nak_state = Some(EpisodeNak::Nak(NakCode::PsnError));
        self.defer_nak(NakCode::PsnError, st);
        Some(NakCode::PsnError)
    }

    /// The QP goes to the error state with NAK `code` (`rvt_rc_error()`):
    /// every region reference is dropped and the NAK deferred.
    pub(crate) fn rc_error(
        &mut self,
        code: NakCode,
        st: &mut QpState,
        mrs: &impl MrTable,
    ) -> Option<NakCode> {
        *st = QpState::Error;
        self.nak_state = Some(EpisodeNak::Nak(code));
        self.defer_nak(code, *st);
        self.release_refs(mrs);
        Some(code)
    }

    /// A NAK at the end of the receive: sent at once if no response is
    /// pending; else handed to the send engine, unless the QP is in the
    /// error state, where it is dropped. Kernel: `rc_defered_ack()` →
    /// `hfi1_send_rc_ack()` → `hfi1_queue_rc_ack()`.
    pub(crate) fn defer_nak(&mut self, code: NakCode, st: QpState) {
        let nak = (code, self.expected_psn);
        if !self.responses_pending() {
            self.direct_nak = Some(nak);
        } else if st.receives() {
            self.queued_nak = Some(nak);
        } else {
            self.stats.naks_dropped += 1;
        }
    }

    /// True if ack-queue slot `i` holds a TID WRITE entry.
    pub(crate) fn is_write(&self, i: usize) -> bool {
        self.ack
            .get(i)
            .is_some_and(|e| e.kind == Some(EntryKind::Write))
    }

    /// A packet reached a QP in the error state: dropped, and any region
    /// reference still held is released.
    pub(crate) fn drop_in_error(&mut self, mrs: &impl MrTable) {
        self.stats.dropped_in_error += 1;
        if self.mr_refs() > 0 {
            self.release_refs(mrs);
        }
    }
}

/// What the responder did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqVerdict {
    /// Accepted into the ack queue.
    Accepted,
    /// A duplicate that re-armed an earlier entry.
    Restarted,
    /// Refused; a NAK was earned if `Some` (it may still be dropped by
    /// the NAK rule).
    Refused(Option<NakCode>),
}

/// A walk of ack-queue slots, stepping by [`Responder::next`] (or
/// [`Responder::prev`]) from one slot and stopping before another:
/// `while j != end { ...; j = next(j) }`.
///
/// The ack queue's indices are slot numbers, not free-running, so the two
/// ends alone cannot tell empty from full: a walk from a slot to itself is
/// empty, and the walk from the slot after the head round to the head
/// passes every slot but the head's.
#[derive(Debug, Clone)]
pub(crate) struct AckSlots {
    at: usize,
    end: usize,
    step: fn(usize) -> usize,
}

impl Iterator for AckSlots {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.at == self.end {
            return None;
        }
        let j = self.at;
        self.at = (self.step)(j);
        Some(j)
    }
}

impl core::iter::FusedIterator for AckSlots {}

#[cfg(test)]
mod tests;
