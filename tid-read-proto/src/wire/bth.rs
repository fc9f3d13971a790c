// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The Base Transport Header (12 bytes, big-endian words).
//!
//! ```text
//! word 0: opcode 31..24 | SE 23 | M 22 | PadCnt 21..20 | TVer 19..16 | P_Key 15..0
//! word 1: FECN 31 | BECN 30 | rsvd 29..24 | DestQP 23..0
//! word 2: AckReq 31 | PSN 30..0   (31-bit PSNs on this hardware)
//! ```
//!
//! A TID RDMA READ_RESP carries the requester's `tid_flow_qp` as DestQP and
//! the flow PSN as PSN. Kernel: `struct ib_other_headers` (`bth[3]`),
//! `IB_BECN_SHIFT`, `IB_FECN_SHIFT`, `IB_BTH_REQ_ACK`.
//!
//! See the panic contract in [`crate::wire`].

use hfi1_hal::Psn;
use zerocopy::byteorder::big_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Error, Result, fits, view_mut};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    opcode: u8,
    flags: u8,
    pkey: U16,
    qp_word: U32,
    psn_word: U32,
}

impl Header {
    const ZERO: Self = Self {
        opcode: 0,
        flags: 0,
        pkey: U16::new(0),
        qp_word: U32::new(0),
        psn_word: U32::new(0),
    };
}

mod field {
    use super::super::field_range;
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::big_endian::{U16, U32};

    pub const OPCODE: usize = core::mem::offset_of!(Header, opcode);
    pub const FLAGS: usize = core::mem::offset_of!(Header, flags);
    pub const PKEY: Range<usize> = field_range!(Header, pkey, U16);
    pub const QP: Range<usize> = field_range!(Header, qp_word, U32);
    pub const PSN: Range<usize> = field_range!(Header, psn_word, U32);
    pub const PAYLOAD: usize = PSN.end;
}

/// Length of the BTH in bytes.
pub const HEADER_LEN: usize = field::PAYLOAD;
const _: () = assert!(HEADER_LEN == 12 && field::OPCODE == 0 && field::FLAGS == 1);
const _: () = assert!(field::PKEY.start == 2 && field::QP.start == 4 && field::PSN.start == 8);

const SE: u8 = 0x80;
const MIGREQ: u8 = 0x40;
const FECN: u32 = 1 << 31;
const BECN: u32 = 1 << 30;
const QP_RSVD: u32 = 0x3F00_0000;
const QPN_MASK: u32 = 0x00FF_FFFF;
const ACK_REQ: u32 = 1 << 31;

fixed_header_view! {
    /// A read/write view of a BTH and what follows it.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The opcode (0xE4 READ_REQ, 0xE5 READ_RESP, ...).
    pub fn opcode(&self) -> u8 {
        self.header().opcode
    }

    /// Solicited event.
    pub fn solicited(&self) -> bool {
        self.header().flags & SE != 0
    }

    /// Migration request.
    pub fn migreq(&self) -> bool {
        self.header().flags & MIGREQ != 0
    }

    /// Pad count (bytes of padding at the end of the payload).
    pub fn pad_count(&self) -> u8 {
        (self.header().flags >> 4) & 0x3
    }

    /// Transport header version.
    pub fn tver(&self) -> u8 {
        self.header().flags & 0x0F
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        self.header().pkey.get()
    }

    /// Forward congestion notification.
    pub fn fecn(&self) -> bool {
        self.header().qp_word.get() & FECN != 0
    }

    /// Backward congestion notification.
    pub fn becn(&self) -> bool {
        self.header().qp_word.get() & BECN != 0
    }

    /// The six reserved bits of word 1.
    pub fn rsvd(&self) -> u8 {
        // Six bits: the cast keeps all of them.
        ((self.header().qp_word.get() & QP_RSVD) >> 24) as u8
    }

    /// Destination QP (24 bits).
    pub fn dest_qp(&self) -> u32 {
        self.header().qp_word.get() & QPN_MASK
    }

    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.header().psn_word.get() & ACK_REQ != 0
    }

    /// The 31-bit PSN (the IB PSN, or the flow PSN of a KDETH packet).
    pub fn psn(&self) -> Psn {
        Psn::new(self.header().psn_word.get())
    }

    /// What follows the BTH.
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn header_mut(&mut self) -> Option<&mut Header> {
        view_mut(self.buffer.as_mut())
    }

    /// Sets the opcode.
    pub fn set_opcode(&mut self, v: u8) {
        if let Some(h) = self.header_mut() {
            h.opcode = v;
        }
    }

    /// Sets SE, M, PadCnt (2 bits) and TVer (4 bits).
    pub fn set_flags(&mut self, se: bool, migreq: bool, pad: u8, tver: u8) {
        if let Some(h) = self.header_mut() {
            let mut f = (pad & 0x3) << 4 | (tver & 0x0F);
            if se {
                f |= SE;
            }
            if migreq {
                f |= MIGREQ;
            }
            h.flags = f;
        }
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.pkey.set(v);
        }
    }

    /// Sets FECN, BECN and the destination QP (24 bits; reserved bits
    /// cleared).
    pub fn set_qp_word(&mut self, fecn: bool, becn: bool, dest_qp: u32) {
        if let Some(h) = self.header_mut() {
            let mut w = dest_qp & QPN_MASK;
            if fecn {
                w |= FECN;
            }
            if becn {
                w |= BECN;
            }
            h.qp_word.set(w);
        }
    }

    /// Sets AckReq and the PSN.
    pub fn set_psn_word(&mut self, ack_req: bool, psn: Psn) {
        if let Some(h) = self.header_mut() {
            h.psn_word
                .set(psn.get() | if ack_req { ACK_REQ } else { 0 });
        }
    }

    /// What follows the BTH, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..)
            .unwrap_or(&mut [])
    }
}

/// The BTH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Opcode.
    pub opcode: u8,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request.
    pub migreq: bool,
    /// Pad count: 2 bits.
    pub pad_count: u8,
    /// Transport header version: 4 bits.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward congestion notification.
    pub fecn: bool,
    /// Backward congestion notification.
    pub becn: bool,
    /// Destination QP: 24 bits.
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// PSN (31 bits).
    pub psn: Psn,
}

impl Repr {
    /// Reads a checked BTH; the reserved bits must be zero.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        if p.rsvd() != 0 {
            return Err(Error::Malformed("bth.reserved"));
        }
        Ok(Self {
            opcode: p.opcode(),
            solicited: p.solicited(),
            migreq: p.migreq(),
            pad_count: p.pad_count(),
            tver: p.tver(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            psn: p.psn(),
        })
    }

    /// Writes the BTH. Fails if a field is too wide or the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        fits(u64::from(self.pad_count), 2, "bth.pad_count")?;
        fits(u64::from(self.tver), 4, "bth.tver")?;
        fits(u64::from(self.dest_qp), 24, "bth.dest_qp")?;
        p.check_len()?;
        p.set_opcode(self.opcode);
        p.set_flags(self.solicited, self.migreq, self.pad_count, self.tver);
        p.set_pkey(self.pkey);
        p.set_qp_word(self.fecn, self.becn, self.dest_qp);
        p.set_psn_word(self.ack_req, self.psn);
        Ok(())
    }

    /// Length of the header in bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // READ_REQ BTH: opcode 0xE4, pkey 0xFFFF, dest QP 0x000123 (the
    // responder's KDETH QPN is carried elsewhere), AckReq, PSN 0x10.
    const BYTES: [u8; 12] = [
        0xE4, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x01, 0x23, 0x80, 0x00, 0x00, 0x10,
    ];

    #[test]
    fn parse_literal() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.opcode, hfi1_hal::consts::OP_TID_RDMA_READ_REQ);
        assert_eq!(r.pkey, 0xFFFF);
        assert_eq!(r.dest_qp, 0x123);
        assert!(r.ack_req && !r.fecn && !r.becn && !r.solicited);
        assert_eq!(r.psn, Psn::new(0x10));
    }

    #[test]
    fn emit_literal() {
        let r = Repr {
            opcode: 0xE5,
            solicited: true,
            migreq: false,
            pad_count: 3,
            tver: 0,
            pkey: 0x8001,
            fecn: false,
            becn: true,
            dest_qp: 0x80_0803,
            ack_req: false,
            psn: Psn::new(0x7FFF_FFFF),
        };
        let mut buf = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(
            buf,
            [
                0xE5, 0xB0, 0x80, 0x01, 0x40, 0x80, 0x08, 0x03, 0x7F, 0xFF, 0xFF, 0xFF
            ]
        );
        let back = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn rejects() {
        assert_eq!(
            Packet::new_checked(&BYTES[..11]).unwrap_err(),
            Error::Truncated
        );
        let mut b = BYTES;
        b[4] = 0x01;
        assert!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).is_err());
        let r = Repr {
            dest_qp: 1 << 24,
            ..Repr::default()
        };
        let mut buf = [0u8; 12];
        assert!(r.emit(&mut Packet::new_unchecked(&mut buf[..])).is_err());
    }
}
