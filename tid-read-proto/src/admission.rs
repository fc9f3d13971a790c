// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's admission of a TID RDMA READ_REQ: what [`validate`]
//! checks of a request that arrived (SPEC §5 "Responder"), and the flow an
//! accepted one gives. The header's bytes are [`crate::wire::read_req`]'s;
//! the requester's side of the packet is [`crate::segment_request`].
//!
//! The checks, in the driver's order, and the NAK each failure earns:
//!
//! 1. the QP allows remote reads, else *invalid request*;
//! 2. the length is non-zero, a whole number of pages and at most the local
//!    `max_len`, else *invalid request*;
//! 3. the PSN is the expected one; otherwise the request is out of
//!    sequence: ahead earns one *PSN sequence error* NAK, behind is a
//!    duplicate, which the responder's duplicate path handles;
//! 4. the ack queue has room (its next slot is free or already sent), else
//!    *remote operational error*;
//! 5. the R_Key covers the range for remote read, else *remote access
//!    error*;
//! 6. the payload holds at most 64 TID entries, none of LEN 0, covering at
//!    least the length, else *invalid request*.
//!
//! An accepted request gives the responder's flow: the TID entries, the
//! hardware flow (index from `tid_flow_qp` bits 11..=15, context from bits
//! 0..=7) and its PSN range (from `tid_flow_psn`), and the IB PSN range the
//! ack-queue entry spans: one IB PSN per response packet.
//! Kernel: `hfi1_rc_rcv_tid_rdma_read_req()`, `tid_rdma_rcv_read_request()`.

use hfi1_hal::consts::{MAX_PAGESETS, PAGE_SIZE};
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Psn, TidEntry};

use crate::qualify::div_round_up_mtu;
use crate::response_stream::RespFlow;
use crate::wire::aeth::NakCode;
use crate::wire::read_req;
use crate::wire::tid_entries::{ENTRY_LEN, Entries};
use crate::wire::tid_header::{DESTQP_FLOW_MASK, DESTQP_FLOW_SHIFT};

/// Most TID entries one request may carry. Kernel: `TID_RDMA_MAX_PAGES`
/// (the size of `flow->tid_entry[]`).
pub const MAX_TID_ENTRIES: usize = MAX_PAGESETS;

const _: () = assert!((DESTQP_FLOW_MASK as usize) < hfi1_hal::consts::NUM_TID_FLOWS);
// Evaluated at compile time: a `None` here fails the build.
#[allow(clippy::panic)]
const FLOW_0: FlowIndex = match FlowIndex::new(0) {
    Some(f) => f,
    None => panic!("flow 0 exists"),
};

/// Why a READ_REQ was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Reject {
    /// The QP does not allow remote reads.
    #[error("remote read not allowed")]
    NoRemoteRead,
    /// Length zero, not a page multiple, or above the local `max_len`.
    #[error("bad length {0}")]
    BadLength(u32),
    /// The PSN is not the expected one: `delta` > 0 ahead, < 0 behind.
    #[error("out of sequence by {delta}")]
    OutOfSequence {
        /// `psn - expected` on the 31-bit circle.
        delta: i32,
    },
    /// No free ack-queue slot.
    #[error("ack queue full")]
    AckQueueFull,
    /// The R_Key check failed.
    #[error("bad R_Key")]
    BadRkey,
    /// More than 64 TID entries.
    #[error("payload of {0} bytes is too long")]
    PayloadTooLong(usize),
    /// A TID entry of LEN 0.
    #[error("TID entry {0} has LEN 0")]
    EmptyEntry(usize),
    /// The entries cover fewer bytes than the length.
    #[error("entries cover {covered} of {length} bytes")]
    EntriesTooShort {
        /// Bytes the entries cover.
        covered: u64,
        /// Bytes asked for.
        length: u32,
    },
}

impl Reject {
    /// The NAK to send, if any: a duplicate (behind) is not NAKed.
    pub const fn nak(&self) -> Option<NakCode> {
        match self {
            Self::NoRemoteRead
            | Self::BadLength(_)
            | Self::PayloadTooLong(_)
            | Self::EmptyEntry(_)
            | Self::EntriesTooShort { .. } => Some(NakCode::InvalidRequest),
            Self::OutOfSequence { delta } if *delta > 0 => Some(NakCode::PsnError),
            Self::OutOfSequence { .. } => None,
            Self::AckQueueFull => Some(NakCode::RemoteOperationalError),
            Self::BadRkey => Some(NakCode::RemoteAccessError),
        }
    }
}

/// The responder QP's state the validation reads.
#[derive(Debug, Clone, Copy)]
pub struct QpView {
    /// The QP has `IB_ACCESS_REMOTE_READ`.
    pub remote_read: bool,
    /// Local OPFN `max_len`.
    pub max_len: u32,
    /// Path MTU in bytes.
    pub pmtu: u32,
    /// The PSN the QP expects next (`r_psn`).
    pub expected_psn: Psn,
    /// The ack queue's next slot is taken by an entry not yet sent.
    pub ack_queue_full: bool,
}

/// The request as received: BTH PSN, the header after the BTH, the payload.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// BTH PSN.
    pub psn: Psn,
    /// The READ_REQ header.
    pub header: read_req::Repr,
    /// The payload bytes (the TID entries; a trailing partial word is
    /// ignored, as the driver ignores it).
    pub payload: &'a [u8],
}

/// Kernel: the `tid_rdma_flow` and `rvt_ack_entry` fields
/// `tid_rdma_rcv_read_request()` fills.
///
/// An accepted request: the responder's flow for the segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    entries: [TidEntry; MAX_TID_ENTRIES],
    tidcnt: usize,
    /// Bytes to send.
    pub length: u32,
    /// Response packets: `ceil(length / pmtu)`.
    pub npkts: u32,
    /// The requester's `tid_flow_qp` (the BTH destination of every
    /// response).
    pub tid_qpn: u32,
    /// The requester's hardware flow (bits 11..=15 of `tid_flow_qp`).
    pub flow: FlowIndex,
    /// The requester's receive context (bits 0..=7 of `tid_flow_qp`).
    pub ctxt: u8,
    /// The flow's generation.
    pub generation: Generation,
    /// First flow sequence.
    pub spsn: u32,
    /// Last flow sequence: `spsn + npkts - 1` (not wrapped; the requester
    /// keeps it below 2048).
    pub lpsn: u32,
    /// First IB PSN: the request's.
    pub ib_spsn: Psn,
    /// Last IB PSN the ack-queue entry spans.
    pub ib_lpsn: Psn,
    /// RETH of the request (where to read).
    pub vaddr: u64,
}

impl Accepted {
    /// The TID entries.
    pub fn entries(&self) -> &[TidEntry] {
        self.entries.get(..self.tidcnt).unwrap_or(&[])
    }

    /// The input of the READ_RESP builder for this flow, given the
    /// requester's OPFN J_KEY and urgency and the path MTU.
    pub fn resp_flow(&self, jkey: u16, urg: bool, pmtu: u32) -> RespFlow<'_> {
        RespFlow {
            entries: self.entries(),
            length: self.length,
            pmtu,
            spsn: self.spsn,
            generation: self.generation,
            ib_spsn: self.ib_spsn,
            jkey,
            urg,
        }
    }
}

/// Kernel: `hfi1_rc_rcv_tid_rdma_read_req()` and
/// `tid_rdma_rcv_read_request()`.
///
/// Validates a received READ_REQ. `rkey_ok(vaddr, length, rkey)` checks the memory
/// key for remote read; it is called only when the earlier checks passed
/// (the driver takes a memory-region reference there).
pub fn validate(
    qp: &QpView,
    rcvd: &Request<'_>,
    rkey_ok: impl FnOnce(u64, u32, u32) -> bool,
) -> Result<Accepted, Reject> {
    let reth = rcvd.header.reth;
    let len = reth.length;
    if !qp.remote_read {
        return Err(Reject::NoRemoteRead);
    }
    if len == 0 || len % PAGE_SIZE != 0 || len > qp.max_len {
        return Err(Reject::BadLength(len));
    }
    let delta = rcvd.psn.delta(qp.expected_psn);
    if delta != 0 {
        return Err(Reject::OutOfSequence { delta });
    }
    if qp.ack_queue_full {
        return Err(Reject::AckQueueFull);
    }
    if !rkey_ok(reth.vaddr, len, reth.rkey) {
        return Err(Reject::BadRkey);
    }
    if rcvd.payload.len() > MAX_TID_ENTRIES * ENTRY_LEN {
        return Err(Reject::PayloadTooLong(rcvd.payload.len()));
    }
    let mut entries = [TidEntry::default(); MAX_TID_ENTRIES];
    let mut tidcnt = 0;
    let mut pages: u64 = 0;
    for (i, (slot, e)) in entries
        .iter_mut()
        .zip(Entries::new_unchecked(rcvd.payload).iter())
        .enumerate()
    {
        if e.is_empty() {
            return Err(Reject::EmptyEntry(i));
        }
        *slot = e;
        tidcnt = i + 1;
        pages += u64::from(e.len());
    }
    let covered = pages * u64::from(PAGE_SIZE);
    if covered < u64::from(len) {
        return Err(Reject::EntriesTooShort {
            covered,
            length: len,
        });
    }
    let npkts = div_round_up_mtu(len, qp.pmtu);
    let tid_qpn = rcvd.header.tid_flow_qp;
    let flow_bits = (tid_qpn >> DESTQP_FLOW_SHIFT) & DESTQP_FLOW_MASK;
    // Five bits always name one of the 32 flows (checked at compile time
    // below), so the fallback is never taken.
    let flow = FlowIndex::new(flow_bits).unwrap_or(FLOW_0);
    let flow_psn: FlowPsn = rcvd.header.flow_psn;
    Ok(Accepted {
        entries,
        tidcnt,
        length: len,
        npkts,
        tid_qpn,
        flow,
        ctxt: tid_qpn.to_le_bytes()[0],
        generation: flow_psn.generation(),
        spsn: flow_psn.seq(),
        lpsn: flow_psn.seq().wrapping_add(npkts).wrapping_sub(1),
        ib_spsn: rcvd.psn,
        ib_lpsn: rcvd.psn.add(npkts).sub(1),
        vaddr: reth.vaddr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{kdeth, reth};
    use hfi1_hal::TidCtrl;

    fn qp() -> QpView {
        QpView {
            remote_read: true,
            max_len: 256 * 1024,
            pmtu: 4096,
            expected_psn: Psn::new(50),
            ack_queue_full: false,
        }
    }

    fn header(len: u32) -> read_req::Repr {
        read_req::Repr {
            kdeth: kdeth::Repr::default(),
            reth: reth::Repr {
                vaddr: 0x1000,
                rkey: 9,
                length: len,
            },
            flow_psn: FlowPsn::new(Generation::masked(0x12345), 100),
            tid_flow_qp: 0x80_0000 | 7 << 11 | 4,
            verbs_qp: 0x11,
        }
    }

    fn payload(entries: &[TidEntry]) -> Vec<u8> {
        entries.iter().flat_map(|e| e.raw().to_le_bytes()).collect()
    }

    #[test]
    fn accepts() {
        let e = [
            TidEntry::new(0, TidCtrl::Pair, 32).unwrap(),
            TidEntry::new(1, TidCtrl::Pair, 32).unwrap(),
        ];
        let pl = payload(&e);
        let req = Request {
            psn: Psn::new(50),
            header: header(256 * 1024),
            payload: &pl,
        };
        let a = validate(&qp(), &req, |v, l, k| (v, l, k) == (0x1000, 256 * 1024, 9)).unwrap();
        assert_eq!(a.entries(), &e);
        assert_eq!((a.flow.get(), a.ctxt), (7, 4));
        assert_eq!((a.generation.get(), a.spsn, a.lpsn), (0x12345, 100, 163));
        assert_eq!(
            (a.ib_spsn, a.ib_lpsn, a.npkts),
            (Psn::new(50), Psn::new(113), 64)
        );
        let n = crate::response_stream::RespBuilder::new(&a.resp_flow(32, false, 4096)).count();
        assert_eq!(n, 64);
    }

    /// One entry of two pages: what the rejects below start from.
    fn two_pages() -> (TidEntry, Vec<u8>) {
        let e = TidEntry::new(0, TidCtrl::Pair, 2).unwrap();
        (e, payload(&[e]))
    }

    /// A request for `len` bytes at the expected PSN with `payload`.
    fn request(len: u32, payload: &[u8]) -> Request<'_> {
        Request {
            psn: Psn::new(50),
            header: header(len),
            payload,
        }
    }

    fn ok(_: u64, _: u32, _: u32) -> bool {
        true
    }

    /// One case per check on the QP and the header (checks 1 to 5 of the
    /// module doc), in the driver's order.
    #[test]
    fn each_reject_and_its_nak() {
        let (_, pl) = two_pages();
        let req = |len| request(len, &pl);
        let mut q = qp();
        q.remote_read = false;
        let r = validate(&q, &req(8192), ok).unwrap_err();
        assert_eq!(
            (r, r.nak()),
            (Reject::NoRemoteRead, Some(NakCode::InvalidRequest))
        );
        for bad in [0, 4095, 4097, 512 * 1024] {
            let r = validate(&qp(), &req(bad), ok).unwrap_err();
            assert_eq!(
                (r, r.nak()),
                (Reject::BadLength(bad), Some(NakCode::InvalidRequest))
            );
        }
        let mut q = qp();
        q.expected_psn = Psn::new(49);
        let r = validate(&q, &req(8192), ok).unwrap_err();
        assert_eq!(r.nak(), Some(NakCode::PsnError));
        q.expected_psn = Psn::new(51);
        let r = validate(&q, &req(8192), ok).unwrap_err();
        assert_eq!((r, r.nak()), (Reject::OutOfSequence { delta: -1 }, None));
        let mut q = qp();
        q.ack_queue_full = true;
        let r = validate(&q, &req(8192), ok).unwrap_err();
        assert_eq!(r.nak(), Some(NakCode::RemoteOperationalError));
        let r = validate(&qp(), &req(8192), |_, _, _| false).unwrap_err();
        assert_eq!(r.nak(), Some(NakCode::RemoteAccessError));
    }

    /// One case per check on the payload (check 6 of the module doc), and
    /// the longest payload that passes.
    #[test]
    fn each_payload_reject_and_its_nak() {
        let (e, pl) = two_pages();
        let req = |len| request(len, &pl);
        let r = validate(&qp(), &req(12288), ok).unwrap_err();
        assert_eq!(
            r,
            Reject::EntriesTooShort {
                covered: 8192,
                length: 12288
            }
        );
        assert_eq!(r.nak(), Some(NakCode::InvalidRequest));
        let long = payload(&[TidEntry::new(0, TidCtrl::Even, 1).unwrap(); 65]);
        let r = validate(&qp(), &request(8192, &long), ok).unwrap_err();
        assert_eq!(r, Reject::PayloadTooLong(260));
        let zero = payload(&[e, TidEntry::from_raw(1 << 20)]);
        let r = validate(&qp(), &request(8192, &zero), ok).unwrap_err();
        assert_eq!(r, Reject::EmptyEntry(1));
        let r = validate(&qp(), &request(8192, &[]), ok).unwrap_err();
        assert!(matches!(r, Reject::EntriesTooShort { covered: 0, .. }));
        // 64 entries exactly is fine; a trailing partial word is ignored.
        let max = payload(&[TidEntry::new(0, TidCtrl::Even, 1).unwrap(); 64]);
        for p in [&max[..], &max[..255]] {
            assert!(validate(&qp(), &request(8192, p), ok).is_ok());
        }
    }
}
