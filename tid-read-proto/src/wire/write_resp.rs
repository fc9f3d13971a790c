// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA WRITE_RESP header (36 bytes after the BTH) and its payload
//! of TID entries.
//!
//! ```text
//! KDETH (2 x LE32) | AETH BE32 | 3 reserved BE32
//! | tid_flow_psn BE32 (gen << 11 | seq) | tid_flow_qp BE32 | verbs_qp BE32
//! | TID entries (LE32 each)
//! ```
//!
//! The responder grants one segment of a WRITE per WRITE_RESP: the TID
//! entries name the receive buffers it programmed, `tid_flow_psn` the first
//! flow PSN the requester's WRITE_DATA packets must carry, and
//! `tid_flow_qp` (the responder's KDETH QPN | hardware flow << 11 | receive
//! context) where they go. The BTH goes to the requester's KDETH QPN with
//! the segment's IB PSN, without AckReq; the KDETH carries only KVER and
//! the requester's J_KEY. Kernel: `struct tid_rdma_write_resp`,
//! `hfi1_build_tid_rdma_write_resp()`.
//!
//! The reserved words are ignored on parse: see [`super::tid_header`].
//! Otherwise the panic contract of [`crate::wire`] holds.

use hfi1_hal::consts::{OP_TID_RDMA_WRITE_RESP, PSN_MASK};
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Kdeth0, Kdeth1, Psn};
use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::tid_entries::Entries;
use super::tid_header::{
    BthFields, Built, aeth_field, tid_flow_fields, tid_flow_qp, tid_header_common,
};
use super::{Error, Result, aeth, kdeth};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    kdeth: kdeth::Header,
    aeth: aeth::Header,
    reserved: [U32; 3],
    tid_flow_psn: U32,
    tid_flow_qp: U32,
    verbs_qp: U32,
}

impl Header {
    const ZERO: Self = Self {
        kdeth: kdeth::Header::ZERO,
        aeth: aeth::Header::ZERO,
        reserved: [U32::new(0); 3],
        tid_flow_psn: U32::new(0),
        tid_flow_qp: U32::new(0),
        verbs_qp: U32::new(0),
    };
}

mod field {
    use super::super::{aeth, field_range, kdeth};
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::big_endian::U32;

    pub const KDETH: Range<usize> = field_range!(Header, kdeth, kdeth::Header);
    pub const AETH: Range<usize> = field_range!(Header, aeth, aeth::Header);
    pub const RESERVED: Range<usize> = field_range!(Header, reserved, [U32; 3]);
    pub const TID_FLOW_PSN: Range<usize> = field_range!(Header, tid_flow_psn, U32);
    pub const TID_FLOW_QP: Range<usize> = field_range!(Header, tid_flow_qp, U32);
    pub const VERBS_QP: Range<usize> = field_range!(Header, verbs_qp, U32);
    pub const PAYLOAD: usize = VERBS_QP.end;
}

/// Length of the WRITE_RESP header in bytes (after the BTH).
pub const HEADER_LEN: usize = field::PAYLOAD;
const _: () = assert!(HEADER_LEN == super::tid_header::HEADER_LEN);
const _: () = assert!(field::KDETH.start == 0 && field::AETH.start == 8);
const _: () = assert!(field::RESERVED.start == 12 && field::TID_FLOW_PSN.start == 24);
const _: () = assert!(field::TID_FLOW_QP.start == 28 && field::VERBS_QP.start == 32);

fixed_header_view! {
    /// A read/write view of a WRITE_RESP header and its TID-entry payload.
}

tid_header_common!();
aeth_field!();
tid_flow_fields!();

impl<T: AsRef<[u8]>> Packet<T> {
    /// The payload as TID entries (a trailing partial word is ignored).
    pub fn tid_entries(&self) -> Entries<'_> {
        Entries::new_unchecked(self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {}

/// The WRITE_RESP header as typed values (the payload is read with
/// [`Packet::tid_entries`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// KDETH (KVER 1 and the requester's J_KEY; no TID fields).
    pub kdeth: kdeth::Repr,
    /// AETH of the responder's QP.
    pub aeth: aeth::Repr,
    /// First flow PSN of the granted segment.
    pub flow_psn: FlowPsn,
    /// Responder's KDETH QPN | flow index << 11 | receive context: the BTH
    /// destination of the segment's WRITE_DATA packets.
    pub tid_flow_qp: u32,
    /// The requester's verbs QP number.
    pub verbs_qp: u32,
}

impl Repr {
    /// Reads a checked header; bit 31 of `tid_flow_psn` must be clear (the
    /// reserved words are not looked at).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        if p.tid_flow_psn_raw() & !PSN_MASK != 0 {
            return Err(Error::Malformed("write_resp.tid_flow_psn"));
        }
        Ok(Self {
            kdeth: p.kdeth(),
            aeth: p.aeth(),
            flow_psn: p.tid_flow_psn(),
            tid_flow_qp: p.tid_flow_qp(),
            verbs_qp: p.verbs_qp(),
        })
    }

    /// Writes the header (not the payload), reserved words zero. Fails if
    /// the AETH's MSN is wider than 24 bits or the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        p.check_len()?;
        p.set_aeth(&self.aeth)?;
        p.set_kdeth(&self.kdeth);
        p.clear_reserved();
        p.set_tid_flow_psn(self.flow_psn);
        p.set_tid_flow_qp(self.tid_flow_qp);
        p.set_verbs_qp(self.verbs_qp);
        Ok(())
    }

    /// Length of the header in bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
}

/// What the responder's WRITE_RESP for one segment is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRespFields {
    /// The requester's KDETH QPN (its OPFN `qp`): the BTH destination.
    pub remote_qp: u32,
    /// The requester's J_KEY (OPFN; the low eight bits travel).
    pub remote_jkey: u16,
    /// The requester's verbs QP number.
    pub remote_verbs_qp: u32,
    /// The AETH the RC layer computes for the QP (credits and MSN).
    /// Kernel: `rvt_compute_aeth()`.
    pub aeth: aeth::Repr,
    /// The segment flow's generation.
    pub generation: Generation,
    /// The segment flow's first sequence (11 bits used).
    pub spsn: u32,
    /// The responder's own KDETH QPN (its local OPFN `qp`).
    pub local_qp: u32,
    /// The hardware flow the segment was given.
    pub flow: FlowIndex,
    /// The responder's receive context.
    pub ctxt: u8,
    /// The IB PSN this WRITE_RESP consumes (the request's PSN plus the
    /// segment index). Kernel: `qp->s_ack_rdma_psn`.
    pub ib_psn: Psn,
}

/// Builds the WRITE_RESP header for one segment; its payload is the
/// segment's TID entries ([`super::tid_entries::emit`]).
/// Kernel: `hfi1_build_tid_rdma_write_resp()` (the header part; the
/// resource allocation and request state it also touches belong to the
/// responder).
pub const fn build(f: &WriteRespFields) -> Built<Repr> {
    Built {
        bth: BthFields {
            opcode: OP_TID_RDMA_WRITE_RESP,
            dest_qp: f.remote_qp,
            psn: f.ib_psn,
            ack_req: false,
        },
        header: Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(Kdeth0::KVER << 30),
                kdeth1: Kdeth1::with_jkey(f.remote_jkey),
            },
            aeth: f.aeth,
            flow_psn: FlowPsn::new(f.generation, f.spsn),
            tid_flow_qp: tid_flow_qp(f.local_qp, f.flow, f.ctxt),
            verbs_qp: f.remote_verbs_qp,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfi1_hal::{TidCtrl, TidEntry};

    // KVER 1, J_KEY 0x20; AETH credit code 0x1F, MSN 0x00_0102; reserved
    // zero; flow PSN generation 0x54321, sequence 0x0A5; tid_flow_qp
    // 0x80_3807 (KDETH QPN 0x80 << 16, flow 7, ctxt 7); verbs QP 0x00_0456;
    // two TID entries.
    const BYTES: [u8; 44] = [
        0x00, 0x00, 0x00, 0x40, 0x20, 0x00, 0x00, 0x00, // KDETH
        0x1F, 0x00, 0x01, 0x02, // AETH
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0x2A, 0x19, 0x08, 0xA5, // flow psn
        0x00, 0x80, 0x38, 0x07, // flow qp
        0x00, 0x00, 0x04, 0x56, // verbs qp
        0x10, 0x00, 0xF0, 0x00, // IDX 3 CTRL 3 LEN 16
        0x01, 0x00, 0x50, 0x01, // IDX 5 CTRL 1 LEN 1
    ];

    fn entries() -> [TidEntry; 2] {
        [
            TidEntry::new(3, TidCtrl::Pair, 16).unwrap(),
            TidEntry::new(5, TidCtrl::Even, 1).unwrap(),
        ]
    }

    fn fields() -> WriteRespFields {
        WriteRespFields {
            remote_qp: 0x80_0002,
            remote_jkey: 0x20,
            remote_verbs_qp: 0x456,
            aeth: aeth::Repr {
                syndrome: 0x1F,
                msn: 0x102,
            },
            generation: Generation::masked(0x5_4321),
            spsn: 0xA5,
            local_qp: 0x80_0007,
            flow: FlowIndex::new(7).unwrap(),
            ctxt: 7,
            ib_psn: Psn::new(0x333),
        }
    }

    #[test]
    fn parse_literal() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, build(&fields()).header);
        assert_eq!(r.flow_psn.generation(), Generation::masked(0x5_4321));
        assert_eq!(r.flow_psn.seq(), 0xA5);
        let e: Vec<_> = p.tid_entries().iter().collect();
        assert_eq!(e, entries());
    }

    #[test]
    fn emit_literal() {
        let mut buf = [0xFFu8; 44];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        build(&fields()).header.emit(&mut p).unwrap();
        super::super::tid_entries::emit(&entries(), p.payload_mut()).unwrap();
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn build_bth() {
        let b = build(&fields()).bth;
        assert_eq!(
            (b.opcode, b.dest_qp, b.psn),
            (0xE1, 0x80_0002, Psn::new(0x333))
        );
        assert!(!b.ack_req);
    }

    #[test]
    fn rejects() {
        assert!(Packet::new_checked(&BYTES[..35]).is_err());
        let mut b = BYTES;
        b[24] |= 0x80;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            Repr::parse(&p),
            Err(Error::Malformed("write_resp.tid_flow_psn"))
        );
        assert_eq!(p.tid_flow_psn().raw(), 0x2A19_08A5);
        // Reserved words are not looked at.
        let mut b = BYTES;
        b[16] = 0x5A;
        assert!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).is_ok());
        let mut r = build(&fields()).header;
        r.aeth.msn = 1 << 24;
        let mut buf = [0u8; 36];
        assert!(r.emit(&mut Packet::new_unchecked(&mut buf[..])).is_err());
    }
}
