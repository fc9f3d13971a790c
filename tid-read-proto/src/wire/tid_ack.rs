// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA ACK header (36 bytes after the BTH, no payload): the
//! responder's acknowledgement, NAK or RESYNC answer for a WRITE segment.
//!
//! ```text
//! KDETH (2 x LE32) | AETH BE32 | 2 reserved BE32
//! | tid_flow_psn BE32 | verbs_psn BE32 | tid_flow_qp BE32 | verbs_qp BE32
//! ```
//!
//! The BTH goes to the requester's KDETH QPN without AckReq; its PSN says
//! what is acknowledged, in one of three forms ([`AckKind`]): the flow PSN
//! of the segment's last packet (a plain ACK), the flow PSN the responder
//! expects (a NAK, with the NAK code in the AETH), or the PSN before the
//! QP's new generation (the answer to a RESYNC, which also carries the
//! responder's last good flow PSN in `tid_flow_psn`; it is 0 otherwise).
//! `verbs_psn` is the IB PSN of the segment's WRITE_RESP; `tid_flow_qp`
//! names the responder's flow as in the WRITE_RESP. Kernel:
//! `struct tid_rdma_ack`, `hfi1_build_tid_rdma_write_ack()`.
//!
//! The reserved words are never written by the driver and are ignored on
//! parse: see [`super::tid_header`]. Otherwise the panic contract of
//! [`crate::wire`] holds.

use hfi1_hal::consts::{OP_TID_RDMA_ACK, PSN_MASK};
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Kdeth0, Kdeth1, Psn};
use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::resync::psn_before;
use super::tid_header::{
    BthFields, Built, aeth_field, tid_flow_fields, tid_flow_qp, tid_header_common,
};
use super::{Error, Result, aeth, kdeth};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    kdeth: kdeth::Header,
    aeth: aeth::Header,
    reserved: [U32; 2],
    tid_flow_psn: U32,
    verbs_psn: U32,
    tid_flow_qp: U32,
    verbs_qp: U32,
}

impl Header {
    const ZERO: Self = Self {
        kdeth: kdeth::Header::ZERO,
        aeth: aeth::Header::ZERO,
        reserved: [U32::new(0); 2],
        tid_flow_psn: U32::new(0),
        verbs_psn: U32::new(0),
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
    pub const RESERVED: Range<usize> = field_range!(Header, reserved, [U32; 2]);
    pub const TID_FLOW_PSN: Range<usize> = field_range!(Header, tid_flow_psn, U32);
    pub const VERBS_PSN: Range<usize> = field_range!(Header, verbs_psn, U32);
    pub const TID_FLOW_QP: Range<usize> = field_range!(Header, tid_flow_qp, U32);
    pub const VERBS_QP: Range<usize> = field_range!(Header, verbs_qp, U32);
    pub const PAYLOAD: usize = VERBS_QP.end;
}

/// Length of the ACK header in bytes (after the BTH).
pub const HEADER_LEN: usize = field::PAYLOAD;
const _: () = assert!(HEADER_LEN == super::tid_header::HEADER_LEN);
const _: () = assert!(field::KDETH.start == 0 && field::AETH.start == 8);
const _: () = assert!(field::RESERVED.start == 12 && field::TID_FLOW_PSN.start == 20);
const _: () = assert!(field::VERBS_PSN.start == 24 && field::TID_FLOW_QP.start == 28);
const _: () = assert!(field::VERBS_QP.start == 32);

fixed_header_view! {
    /// A read/write view of a TID RDMA ACK header.
}

tid_header_common!();
aeth_field!();
tid_flow_fields!();

impl<T: AsRef<[u8]>> Packet<T> {
    /// `verbs_psn` as received (all 32 bits).
    pub fn verbs_psn_raw(&self) -> u32 {
        self.header().verbs_psn.get()
    }

    /// `verbs_psn` masked to 31 bits (what the driver uses).
    pub fn verbs_psn(&self) -> Psn {
        Psn::new(self.verbs_psn_raw())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets `verbs_psn`.
    pub fn set_verbs_psn(&mut self, v: Psn) {
        if let Some(h) = self.header_mut() {
            h.verbs_psn.set(v.get());
        }
    }
}

/// The ACK header as typed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// KDETH (KVER 1 and the requester's J_KEY; no TID fields).
    pub kdeth: kdeth::Repr,
    /// AETH: the QP's ACK (credits and MSN) or the NAK code and MSN.
    pub aeth: aeth::Repr,
    /// After a RESYNC: the responder's last good flow PSN; 0 otherwise.
    pub resync_psn: FlowPsn,
    /// IB PSN of the acknowledged segment's WRITE_RESP.
    pub verbs_psn: Psn,
    /// Responder's KDETH QPN | flow index << 11 | receive context.
    pub tid_flow_qp: u32,
    /// The requester's verbs QP number.
    pub verbs_qp: u32,
}

impl Repr {
    /// Reads a checked header; bit 31 of `tid_flow_psn` and `verbs_psn`
    /// must be clear (the reserved words are not looked at).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        if p.tid_flow_psn_raw() & !PSN_MASK != 0 {
            return Err(Error::Malformed("tid_ack.tid_flow_psn"));
        }
        if p.verbs_psn_raw() & !PSN_MASK != 0 {
            return Err(Error::Malformed("tid_ack.verbs_psn"));
        }
        Ok(Self {
            kdeth: p.kdeth(),
            aeth: p.aeth(),
            resync_psn: p.tid_flow_psn(),
            verbs_psn: p.verbs_psn(),
            tid_flow_qp: p.tid_flow_qp(),
            verbs_qp: p.verbs_qp(),
        })
    }

    /// Writes the header, reserved words zero. Fails if the AETH's MSN is
    /// wider than 24 bits or the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        p.check_len()?;
        p.set_aeth(&self.aeth)?;
        p.set_kdeth(&self.kdeth);
        p.clear_reserved();
        p.set_tid_flow_psn(self.resync_psn);
        p.set_verbs_psn(self.verbs_psn);
        p.set_tid_flow_qp(self.tid_flow_qp);
        p.set_verbs_qp(self.verbs_qp);
        Ok(())
    }

    /// Length of the header in bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
}

/// What an ACK acknowledges: the three branches of the driver's builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// The segment arrived: the BTH PSN is the flow PSN of its last
    /// packet. Kernel: `full_flow_psn(flow, flow->flow_state.lpsn)`.
    Segment {
        /// The segment flow's last flow PSN (its generation and `lpsn`).
        last: FlowPsn,
    },
    /// A flow sequence error: the BTH PSN is the flow PSN the responder
    /// expects next; the AETH holds the NAK code. Kernel:
    /// `qpriv->s_nak_psn` while `qpriv->s_nak_state` is set.
    Nak {
        /// The expected flow PSN.
        expected: FlowPsn,
    },
    /// The answer to a RESYNC: the BTH PSN is [`psn_before`] the QP's new
    /// generation and `tid_flow_psn` the last flow PSN received in order
    /// before the RESYNC. Kernel: the `qpriv->resync` branch
    /// (`r_next_psn_kdeth_save`).
    Resync {
        /// The QP's flow generation after the RESYNC.
        generation: Generation,
        /// The last good flow PSN the responder saved.
        saved: FlowPsn,
    },
}

/// What the responder's ACK is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckFields {
    /// The requester's KDETH QPN (its OPFN `qp`): the BTH destination.
    pub remote_qp: u32,
    /// The requester's J_KEY (OPFN; the low eight bits travel).
    pub remote_jkey: u16,
    /// The requester's verbs QP number.
    pub remote_verbs_qp: u32,
    /// The AETH: `rvt_compute_aeth()` for an ACK or a RESYNC answer, the
    /// NAK code with the MSN for a NAK.
    pub aeth: aeth::Repr,
    /// The responder's own KDETH QPN (its local OPFN `qp`).
    pub local_qp: u32,
    /// The segment flow's hardware flow.
    pub flow: FlowIndex,
    /// The responder's receive context.
    pub ctxt: u8,
    /// IB PSN of the segment's WRITE_RESP. Kernel:
    /// `flow->flow_state.resp_ib_psn`.
    pub resp_ib_psn: Psn,
    /// Which of the three ACKs.
    pub kind: AckKind,
}

/// Builds the ACK header. Kernel: `hfi1_build_tid_rdma_write_ack()` (the
/// header part; the RESYNC bookkeeping of `r_next_psn_kdeth` it also does
/// belongs to the responder, which passes the saved PSN in).
pub const fn build(f: &AckFields) -> Built<Repr> {
    let (psn, resync_psn) = match f.kind {
        AckKind::Segment { last } => (last.as_psn(), FlowPsn::from_raw(0)),
        AckKind::Nak { expected } => (expected.as_psn(), FlowPsn::from_raw(0)),
        AckKind::Resync { generation, saved } => (psn_before(generation), saved),
    };
    Built {
        bth: BthFields {
            opcode: OP_TID_RDMA_ACK,
            dest_qp: f.remote_qp,
            psn,
            ack_req: false,
        },
        header: Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(Kdeth0::KVER << 30),
                kdeth1: Kdeth1::with_jkey(f.remote_jkey),
            },
            aeth: f.aeth,
            resync_psn,
            verbs_psn: f.resp_ib_psn,
            tid_flow_qp: tid_flow_qp(f.local_qp, f.flow, f.ctxt),
            verbs_qp: f.remote_verbs_qp,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::aeth::NakCode;

    // KVER 1, J_KEY 0x20; AETH NAK PSN error, MSN 0x00_0A0B; reserved
    // holding stale bytes; tid_flow_psn 0x0012_3456; verbs_psn 0x0765_4321;
    // tid_flow_qp 0x80_2803 (flow 5, ctxt 3); verbs QP 0x00_00C1.
    const BYTES: [u8; 36] = [
        0x00, 0x00, 0x00, 0x40, 0x20, 0x00, 0x00, 0x00, // KDETH
        0x60, 0x00, 0x0A, 0x0B, // AETH
        0xDE, 0xAD, 0xBE, 0xEF, 0xFE, 0xED, 0xFA, 0xCE, // reserved
        0x00, 0x12, 0x34, 0x56, // tid flow psn
        0x07, 0x65, 0x43, 0x21, // verbs psn
        0x00, 0x80, 0x28, 0x03, // tid flow qp
        0x00, 0x00, 0x00, 0xC1, // verbs qp
    ];

    fn fields(kind: AckKind) -> AckFields {
        AckFields {
            remote_qp: 0x80_0001,
            remote_jkey: 0x20,
            remote_verbs_qp: 0xC1,
            aeth: aeth::Repr {
                syndrome: NakCode::PsnError.syndrome(),
                msn: 0xA0B,
            },
            local_qp: 0x80_0003,
            flow: FlowIndex::new(5).unwrap(),
            ctxt: 3,
            resp_ib_psn: Psn::new(0x0765_4321),
            kind,
        }
    }

    #[test]
    fn parse_literal() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert!(!p.reserved_is_zero());
        let r = Repr::parse(&p).unwrap();
        let want = build(&fields(AckKind::Resync {
            generation: Generation::masked(1),
            saved: FlowPsn::from_raw(0x0012_3456),
        }))
        .header;
        assert_eq!(r, want);
        assert!(r.aeth.is_nak());
    }

    #[test]
    fn emit_literal() {
        let mut r = Repr::parse(&Packet::new_checked(&BYTES[..]).unwrap()).unwrap();
        let mut buf = [0xFFu8; 36];
        r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
        let mut want = BYTES;
        want[12..20].fill(0);
        assert_eq!(buf, want);
        r.aeth.msn = 1 << 24;
        assert!(r.emit(&mut Packet::new_unchecked(&mut buf[..])).is_err());
    }

    #[test]
    fn the_three_bth_psns() {
        let last = FlowPsn::new(Generation::masked(0x44), 0x3F);
        let ack = build(&fields(AckKind::Segment { last }));
        assert_eq!(ack.bth.psn, Psn::new(0x44 << 11 | 0x3F));
        assert_eq!(ack.header.resync_psn.raw(), 0);
        assert_eq!((ack.bth.opcode, ack.bth.dest_qp), (0xE7, 0x80_0001));
        assert!(!ack.bth.ack_req);
        let expected = FlowPsn::new(Generation::masked(0x44), 0x10);
        let nak = build(&fields(AckKind::Nak { expected }));
        assert_eq!(nak.bth.psn, Psn::new(0x44 << 11 | 0x10));
        let saved = FlowPsn::new(Generation::masked(0x44), 0x0F);
        let rs = build(&fields(AckKind::Resync {
            generation: Generation::masked(0x46),
            saved,
        }));
        assert_eq!(rs.bth.psn, Psn::new(0x45 << 11 | 0x7FF));
        assert_eq!(rs.header.resync_psn, saved);
        assert_eq!(rs.header.tid_flow_qp, 0x80_2803);
    }

    #[test]
    fn rejects() {
        assert!(Packet::new_checked(&BYTES[..35]).is_err());
        for at in [20, 24] {
            let mut b = BYTES;
            b[at] |= 0x80;
            assert!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).is_err());
        }
    }
}
