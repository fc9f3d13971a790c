// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA READ responder: READ_REQ validation into the ack queue and
//! the send engine that streams READ_RESPs (SPEC §5 "Responder").
//!
//! Each segment's READ_REQ is its own ack-queue entry. A request is
//! validated ([`crate::read_req::validate`]); on success the entry keeps
//! the requester's flow (TID entries, `tid_flow_qp`, flow PSN) and spans
//! one IB PSN per response packet; `r_psn` and `r_msn` advance. A request
//! ahead of `r_psn` earns one PSN-sequence NAK per episode; a request
//! behind it is a duplicate: accepted only if it restarts an earlier entry
//! from its start with the same length, and then that entry is sent
//! again. Other failures earn the NAK [`crate::read_req::Reject::nak`]
//! names.
//!
//! As in the driver, the queue is full only when the entry at the send
//! pointer still has something to send; a re-armed entry in the slot a
//! new request needs moves to a free slot first.
//!
//! Deviations from the driver, on purpose:
//!
//! - A re-armed entry is marked in a small set the send engine serves
//!   first; the send pointer never moves back. Moving it back, as the
//!   driver does with `s_tail_ack_queue`, pins every later entry, sent or
//!   not, in the ring: new requests then meet a "full" queue with far
//!   fewer than 16 reads outstanding, earn a Remote Operational Error NAK
//!   and kill the QP (the inputs under `fuzz/regressions/read_pair/` show
//!   it).
//! - The entry spans as many IB PSNs as READ_RESP packets are really sent
//!   (one per `min(pmtu, rest of TID entry)`), the same count the
//!   requester gave the segment, not `ceil(length / pmtu)`: with an 8 KiB
//!   MTU over 4 KiB TID entries the two differ and the driver's `r_psn`
//!   would fall behind the requester's next PSN.
//!
//! # Locking
//!
//! `&mut Responder` is part of the QP's state under its `s_lock`
//! ([`crate::qp::TidQp`]); no method takes another lock.

use hfi1_hal::Psn;

use crate::packet::ACK_SYNDROME;
use crate::rc::{
    ACK_QUEUE_SIZE, Connection, EngineError, MrTable, PacketSink, SourceData, counters,
};
use crate::read_req::{self, Accepted, Reject};
use crate::read_resp::{self, Cursor, RespBuilder};
use crate::wire::aeth::{self, NakCode};
use crate::wire::{self, kdeth};

// The re-armed set is a `u32` bitmask over the ack queue.
const _: () = assert!(ACK_QUEUE_SIZE <= 32);

/// One ack-queue entry. Kernel: `struct rvt_ack_entry` with its
/// `tid_rdma_request` (one flow).
#[derive(Debug, Clone, Default)]
struct AckEntry {
    acc: Option<Accepted>,
    psn: Psn,
    lpsn: Psn,
    cursor: Cursor,
    sent: bool,
    mr: Option<u32>,
}

counters! {
    /// What the responder counted.
    pub struct RespStats {
        /// READ_REQs accepted.
        pub accepted,
        /// Duplicate READ_REQs that restarted an entry.
        pub duplicates,
        /// Duplicate READ_REQs ignored.
        pub duplicates_ignored,
        /// NAKs sent.
        pub naks,
        /// READ_RESP packets sent.
        pub packets,
        /// Segments whose last READ_RESP was sent.
        pub segments,
    }
}

/// The responder side of a QP.
///
/// # Locking
///
/// Part of [`crate::qp::TidQp`], under the QP's `s_lock`.
#[derive(Debug)]
pub struct Responder {
    /// The next IB PSN expected. Kernel: `qp->r_psn`.
    expected_psn: Psn,
    /// Message sequence number (24 bits). Kernel: `qp->r_msn`.
    msn: u32,
    /// A NAK was sent for the current out-of-sequence episode.
    /// Kernel: `qp->r_nak_state`.
    nak_state: Option<NakCode>,
    /// A NAK waiting to be sent.
    nak_pending: Option<(NakCode, Psn)>,
    ack: [AckEntry; ACK_QUEUE_SIZE],
    /// Next entry to fill. Kernel: `r_head_ack_queue`.
    head: usize,
    /// Next entry to send. Kernel: `s_tail_ack_queue`.
    tail: usize,
    /// Entries re-armed by a duplicate READ_REQ, bit `i` for entry `i`,
    /// served before the send pointer's entry.
    rearmed: u32,
    /// What happened so far.
    pub stats: RespStats,
}

impl Responder {
    /// An idle responder expecting `psn` first.
    pub fn new(psn: Psn) -> Self {
        Self {
            expected_psn: psn,
            msn: 0,
            nak_state: None,
            nak_pending: None,
            ack: Default::default(),
            head: 0,
            tail: 0,
            rearmed: 0,
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

    /// True if something waits to be sent.
    pub fn has_work(&self) -> bool {
        self.nak_pending.is_some() || self.tail != self.head || self.rearmed != 0
    }

    /// Memory-region references the ack queue holds.
    pub fn mr_refs(&self) -> usize {
        self.ack.iter().filter(|e| e.mr.is_some()).count()
    }

    /// Releases every region reference (QP destroy).
    /// Kernel: `rvt_qp_mr_clean()` / the ack-queue walk of `rvt_reset_qp()`.
    pub fn release_all(&mut self, mrs: &impl MrTable) {
        for e in &mut self.ack {
            if let Some(mr) = e.mr.take() {
                mrs.put(mr);
            }
        }
        self.tail = self.head;
        self.rearmed = 0;
        self.nak_pending = None;
    }

    /// Makes slot `head` free for a new request; false if the queue is
    /// really full. Kernel: the `next == s_tail_ack_queue` check, which
    /// NAKs only while `s_ack_queue[next]` has not been sent and otherwise
    /// moves the send pointer on (`update_ack_queue()`).
    ///
    /// Besides the driver's rule: a re-armed entry sitting in slot `head`
    /// (older than everything pending, so in the way of the ring's order)
    /// moves to a free slot outside the pending window; duplicates find
    /// entries by PSN, so the move is invisible. Both steps change no
    /// meaning, so they may run before the request is validated.
    fn make_room(&mut self) -> bool {
        let (head, tail) = (self.head, self.tail);
        let next = Self::next(head);
        if next == tail && tail != head {
            let unsent = self
                .ack
                .get(tail)
                .is_some_and(|e| e.acc.is_some() && !e.sent);
            if unsent {
                return false;
            }
            self.tail = Self::next(tail);
        }
        if self.rearmed & (1 << head) == 0 {
            return true;
        }
        let (tail, window) = (
            self.tail,
            (head + ACK_QUEUE_SIZE - self.tail) % ACK_QUEUE_SIZE,
        );
        let free = (0..ACK_QUEUE_SIZE).find(|&j| {
            let in_window = (j + ACK_QUEUE_SIZE - tail) % ACK_QUEUE_SIZE <= window;
            j != head && self.rearmed & (1 << j) == 0 && !in_window
        });
        let Some(j) = free else {
            return false;
        };
        self.ack.swap(head, j);
        self.rearmed = (self.rearmed & !(1 << head)) | 1 << j;
        true
    }

    /// The oldest re-armed entry, if any.
    fn oldest_rearmed(&self) -> Option<usize> {
        (1..=ACK_QUEUE_SIZE)
            .map(|k| (self.head + k) % ACK_QUEUE_SIZE)
            .find(|&i| self.rearmed & (1 << i) != 0)
    }

    fn next(i: usize) -> usize {
        (i + 1) % ACK_QUEUE_SIZE
    }

    fn queue_nak(&mut self, code: NakCode) {
        self.nak_pending = Some((code, self.expected_psn));
        self.stats.naks += 1;
    }
}

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

/// What the responder did with a READ_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqVerdict {
    /// Accepted into the ack queue.
    Accepted,
    /// A duplicate that restarted an earlier entry.
    Restarted,
    /// Refused; a NAK is queued if `Some`.
    Refused(Option<NakCode>),
}

/// Validates `request`; on success returns it with the memory-region
/// reference the rkey check took (on failure a reference taken is
/// dropped again). Kernel: `rvt_rkey_ok()` inside the READ_REQ checks.
fn validate_taking_mr(
    view: &read_req::QpView,
    request: &read_req::Request<'_>,
    mrs: &impl MrTable,
) -> Result<(Accepted, Option<u32>), Reject> {
    let taken = core::cell::Cell::new(None);
    let res = read_req::validate(view, request, |vaddr, len, rkey| {
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

/// Where the send engine takes its next packet from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// A re-armed entry (served first).
    Rearmed(usize),
    /// The send pointer's entry.
    Pointer(usize),
}

impl Source {
    fn index(self) -> usize {
        match self {
            Self::Rearmed(i) | Self::Pointer(i) => i,
        }
    }
}

/// What one turn of the send engine did with an entry.
enum Turn {
    /// Sent a packet; `last` if it was the entry's last.
    Sent { last: bool },
    /// The entry has nothing (more) to send.
    Empty,
}

impl Responder {
    /// Receives a READ_REQ. Returns the verdict; the send engine must run
    /// if [`Responder::has_work`] is true afterwards.
    /// Kernel: `hfi1_rc_rcv_tid_rdma_read_req()` and `tid_rdma_rcv_error()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`&mut self`). (The driver checks the PSN
    /// before taking `s_lock`; here all of it runs under it.)
    pub fn receive_read_req(
        &mut self,
        conn: &Connection,
        psn: Psn,
        hdr: &wire::read_req::Repr,
        payload: &[u8],
        mrs: &impl MrTable,
    ) -> ReqVerdict {
        let room = self.make_room();
        let view = read_req::QpView {
            remote_read: conn.remote_read,
            max_len: conn.local.max_len,
            pmtu: conn.pmtu,
            expected_psn: self.expected_psn,
            ack_queue_full: !room,
        };
        let request = read_req::Request {
            psn,
            header: *hdr,
            payload,
        };
        match validate_taking_mr(&view, &request, mrs) {
            Ok((acc, mr)) => self.accept(psn, acc, mr, conn.pmtu, mrs),
            Err(Reject::OutOfSequence { delta }) if delta < 0 => {
                self.restart_duplicate(psn, hdr, payload, conn.pmtu, mrs)
            }
            Err(Reject::OutOfSequence { .. }) => {
                if self.nak_state.is_some() {
                    return ReqVerdict::Refused(None);
                }
                self.nak_state = Some(NakCode::PsnError);
                self.queue_nak(NakCode::PsnError);
                ReqVerdict::Refused(Some(NakCode::PsnError))
            }
            Err(other) => {
                let code = other.nak();
                if let Some(c) = code {
                    self.nak_state = Some(c);
                    self.queue_nak(c);
                }
                ReqVerdict::Refused(code)
            }
        }
    }

    /// Puts an accepted request into the ack-queue slot at `head` (which
    /// [`Responder::make_room`] freed); `r_psn` and `r_msn` advance.
    fn accept(
        &mut self,
        psn: Psn,
        acc: Accepted,
        mr: Option<u32>,
        pmtu: u32,
        mrs: &impl MrTable,
    ) -> ReqVerdict {
        let n = response_packets(&acc, pmtu);
        let Some(e) = self.ack.get_mut(self.head) else {
            return ReqVerdict::Refused(None);
        };
        if let Some(old) = e.mr.take() {
            mrs.put(old);
        }
        *e = AckEntry {
            acc: Some(acc),
            psn,
            lpsn: psn.add(n - 1),
            cursor: Cursor::default(),
            sent: false,
            mr,
        };
        self.expected_psn = self.expected_psn.add(n);
        self.msn = self.msn.wrapping_add(1) & 0x00FF_FFFF;
        self.head = Self::next(self.head);
        self.nak_state = None;
        self.stats.accepted += 1;
        ReqVerdict::Accepted
    }

    /// A READ_REQ behind `r_psn`: find the entry it restarts (same first
    /// PSN and length), re-validate it, and send that entry again.
    /// Kernel: `tid_rdma_rcv_error()` (READ branch).
    fn restart_duplicate(
        &mut self,
        psn: Psn,
        hdr: &wire::read_req::Repr,
        payload: &[u8],
        pmtu: u32,
        mrs: &impl MrTable,
    ) -> ReqVerdict {
        let head = self.head;
        let found = (1..ACK_QUEUE_SIZE)
            .map(|k| (head + ACK_QUEUE_SIZE - k) % ACK_QUEUE_SIZE)
            .find(|&i| {
                self.ack
                    .get(i)
                    .is_some_and(|e| e.acc.is_some() && e.psn == psn)
            });
        let Some((i, e)) = found.and_then(|i| self.ack.get_mut(i).map(|e| (i, e))) else {
            self.stats.duplicates_ignored += 1;
            return ReqVerdict::Refused(None);
        };
        if e.acc.as_ref().is_none_or(|a| a.length != hdr.reth.length) {
            self.stats.duplicates_ignored += 1;
            return ReqVerdict::Refused(None);
        }
        // An exact copy of the request the entry serves is served again: a
        // requester restarts a segment with the same flow PSNs (the driver
        // does), and the responder cannot tell that from a copy the fabric
        // made. The requester keeps a completed segment's TIDs while its
        // flow stays in that generation, so a repeated stream lands on its
        // own buffers. Re-validate against the entry's own PSN (the queue
        // slot is reused).
        let view = read_req::QpView {
            remote_read: true,
            max_len: u32::MAX,
            pmtu,
            expected_psn: psn,
            ack_queue_full: false,
        };
        let request = read_req::Request {
            psn,
            header: *hdr,
            payload,
        };
        let Ok((acc, mr)) = validate_taking_mr(&view, &request, mrs) else {
            self.stats.duplicates_ignored += 1;
            return ReqVerdict::Refused(None);
        };
        if let Some(old) = e.mr.take() {
            mrs.put(old);
        }
        let n = response_packets(&acc, pmtu);
        e.acc = Some(acc);
        e.lpsn = psn.add(n - 1);
        e.cursor = Cursor::default();
        e.sent = false;
        e.mr = mr;
        // Only this entry goes out again: the send engine skips the entries
        // after it that were already sent. (The driver re-sends all of
        // them; this requester asks for each segment it needs again with
        // its own READ_REQ, and re-sending segments the requester has
        // completed would put packets of a live generation on the wire for
        // TIDs it may have handed to another QP.) Re-armed entries are
        // served first; the send pointer stays where it is, so the ring
        // keeps its real occupancy.
        self.rearmed |= 1 << i;
        self.nak_state = None;
        self.stats.duplicates += 1;
        ReqVerdict::Restarted
    }

    /// The responder's send engine: a pending NAK first, then up to
    /// `budget` READ_RESP packets from the ack queue. Returns true if more
    /// are waiting. Kernel: `hfi1_make_rc_ack()` →
    /// `hfi1_build_tid_rdma_read_resp()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`&mut self`).
    ///
    /// # Errors
    ///
    /// A packet that could not be built (the source memory is missing);
    /// the entry is left where it was.
    pub fn send_responses(
        &mut self,
        conn: &Connection,
        src: &impl SourceData,
        mrs: &impl MrTable,
        sink: &mut impl PacketSink,
        budget: u32,
    ) -> Result<bool, EngineError> {
        if let Some((code, psn)) = self.nak_pending.take() {
            let a = aeth::Repr {
                syndrome: code.syndrome(),
                msn: self.msn,
            };
            let n =
                crate::packet::build_ack(sink.buffer(), conn.path, conn.remote_verbs_qpn, psn, a)?;
            sink.send(n);
        }
        let mut left = budget;
        while left > 0 {
            let Some(from) = self.next_source() else {
                break;
            };
            let Some(turn) = self.send_from(from.index(), conn, src, mrs, sink)? else {
                break;
            };
            match turn {
                Turn::Sent { last } => {
                    left -= 1;
                    if last {
                        self.finish(from);
                    }
                }
                Turn::Empty => self.finish(from),
            }
        }
        Ok(self.has_work())
    }

    /// The entry to send from next: a re-armed one first, else the send
    /// pointer's; `None` when nothing waits.
    fn next_source(&self) -> Option<Source> {
        if self.rearmed == 0 && self.tail == self.head {
            return None;
        }
        Some(match self.oldest_rearmed() {
            Some(i) => Source::Rearmed(i),
            None => Source::Pointer(self.tail),
        })
    }

    /// The entry `from` has nothing more to send: the send pointer moves
    /// on past it, or it leaves the re-armed set.
    fn finish(&mut self, from: Source) {
        match from {
            Source::Pointer(t) => self.tail = Self::next(t),
            Source::Rearmed(i) => self.rearmed &= !(1 << i),
        }
    }

    /// Sends the next READ_RESP of ack-queue entry `i`. `None` if there is
    /// no such entry.
    fn send_from(
        &mut self,
        i: usize,
        conn: &Connection,
        src: &impl SourceData,
        mrs: &impl MrTable,
        sink: &mut impl PacketSink,
    ) -> Result<Option<Turn>, EngineError> {
        let msn = self.msn;
        let Some(e) = self.ack.get_mut(i) else {
            return Ok(None);
        };
        let Some(acc) = e.acc.as_ref().filter(|_| !e.sent) else {
            return Ok(Some(Turn::Empty));
        };
        let flow = acc.resp_flow(conn.remote.jkey, conn.remote.urg != 0, conn.pmtu);
        let mut b = RespBuilder::new(&flow);
        b.set_cursor(e.cursor);
        let Ok(p) = b.next_packet() else {
            // Nothing more to build for this entry.
            e.sent = true;
            return Ok(Some(Turn::Empty));
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
        let n = read_resp::write_packet(
            sink.buffer(),
            conn.path,
            acc.tid_qpn,
            p.bth_psn.as_psn(),
            &hdr,
            p.len as usize,
            |out| src.read(vaddr, out),
        )?;
        sink.send(n);
        e.cursor = b.cursor();
        self.stats.packets += 1;
        if p.last {
            e.sent = true;
            if let Some(mr) = e.mr.take() {
                mrs.put(mr);
            }
            self.stats.segments += 1;
        }
        Ok(Some(Turn::Sent { last: p.last }))
    }
}
