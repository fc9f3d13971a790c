// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA READ_REQ header (36 bytes after the BTH) and its payload.
//!
//! ```text
//! KDETH (2 x LE32) | RETH (vaddr BE64, rkey BE32, length BE32)
//! | tid_flow_psn BE32 (gen << 11 | seq) | tid_flow_qp BE32 | verbs_qp BE32
//! | TID entries (LE32 each)
//! ```
//!
//! `tid_flow_qp` is the requester's KDETH QPN with the hardware flow index
//! in bits 11..=15 and the receive context in bits 0..=7; the responder
//! sends every READ_RESP packet to it. Kernel: `struct tid_rdma_read_req`.
//!
//! See the panic contract in [`crate::wire`].

use hfi1_hal::FlowPsn;
use hfi1_hal::consts::PSN_MASK;
use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::tid_entries::Entries;
use super::{Error, Result, kdeth, reth, view_mut};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    kdeth: kdeth::Header,
    reth: reth::Header,
    tid_flow_psn: U32,
    tid_flow_qp: U32,
    verbs_qp: U32,
}

impl Header {
    const ZERO: Self = Self {
        kdeth: kdeth::Header::ZERO,
        reth: reth::Header::ZERO,
        tid_flow_psn: U32::new(0),
        tid_flow_qp: U32::new(0),
        verbs_qp: U32::new(0),
    };
}

mod field {
    use super::super::{field_range, kdeth, reth};
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::big_endian::U32;

    pub const KDETH: Range<usize> = field_range!(Header, kdeth, kdeth::Header);
    pub const RETH: Range<usize> = field_range!(Header, reth, reth::Header);
    pub const TID_FLOW_PSN: Range<usize> = field_range!(Header, tid_flow_psn, U32);
    pub const TID_FLOW_QP: Range<usize> = field_range!(Header, tid_flow_qp, U32);
    pub const VERBS_QP: Range<usize> = field_range!(Header, verbs_qp, U32);
    pub const PAYLOAD: usize = VERBS_QP.end;
}

/// Length of the READ_REQ header in bytes (after the BTH).
pub const HEADER_LEN: usize = field::PAYLOAD;
const _: () = assert!(HEADER_LEN == 36);
const _: () = assert!(field::KDETH.start == 0 && field::RETH.start == 8);
const _: () = assert!(field::TID_FLOW_PSN.start == 24 && field::TID_FLOW_QP.start == 28);

fixed_header_view! {
    /// A read/write view of a READ_REQ header and its TID-entry payload.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The KDETH.
    pub fn kdeth(&self) -> kdeth::Repr {
        kdeth::Repr::from_header(&self.header().kdeth)
    }

    /// The RETH.
    pub fn reth(&self) -> reth::Repr {
        reth::Repr::from_header(&self.header().reth)
    }

    /// `tid_flow_psn` as received (all 32 bits).
    pub fn tid_flow_psn_raw(&self) -> u32 {
        self.header().tid_flow_psn.get()
    }

    /// `tid_flow_psn` masked to a flow PSN (what the driver uses).
    pub fn tid_flow_psn(&self) -> FlowPsn {
        FlowPsn::from_raw(self.tid_flow_psn_raw())
    }

    /// `tid_flow_qp`: KDETH QPN | flow << 11 | ctxt.
    pub fn tid_flow_qp(&self) -> u32 {
        self.header().tid_flow_qp.get()
    }

    /// The requester's verbs QP number.
    pub fn verbs_qp(&self) -> u32 {
        self.header().verbs_qp.get()
    }

    /// The payload bytes (the TID entries).
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
    }

    /// The payload as TID entries (a trailing partial word is ignored).
    pub fn tid_entries(&self) -> Entries<'_> {
        Entries::new_unchecked(self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn header_mut(&mut self) -> Option<&mut Header> {
        view_mut(self.buffer.as_mut())
    }

    /// Sets the KDETH.
    pub fn set_kdeth(&mut self, k: &kdeth::Repr) {
        if let Some(h) = self.header_mut() {
            k.to_header(&mut h.kdeth);
        }
    }

    /// Sets the RETH.
    pub fn set_reth(&mut self, r: &reth::Repr) {
        if let Some(h) = self.header_mut() {
            r.to_header(&mut h.reth);
        }
    }

    /// Sets `tid_flow_psn`.
    pub fn set_tid_flow_psn(&mut self, v: FlowPsn) {
        if let Some(h) = self.header_mut() {
            h.tid_flow_psn.set(v.raw());
        }
    }

    /// Sets `tid_flow_qp`.
    pub fn set_tid_flow_qp(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.tid_flow_qp.set(v);
        }
    }

    /// Sets `verbs_qp`.
    pub fn set_verbs_qp(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.verbs_qp.set(v);
        }
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..)
            .unwrap_or(&mut [])
    }
}

/// The READ_REQ header as typed values (the payload is read with
/// [`Packet::tid_entries`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// KDETH (KVER 1 and the J_KEY; no TID fields in a request).
    pub kdeth: kdeth::Repr,
    /// RETH: where to read, with which key, how many bytes (this segment).
    pub reth: reth::Repr,
    /// First flow PSN of the segment.
    pub flow_psn: FlowPsn,
    /// Requester's KDETH QPN | flow index << 11 | receive context.
    pub tid_flow_qp: u32,
    /// Requester's verbs QP number.
    pub verbs_qp: u32,
}

impl Repr {
    /// Reads a checked header; bit 31 of `tid_flow_psn` must be clear.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        if p.tid_flow_psn_raw() & !PSN_MASK != 0 {
            return Err(Error::Malformed("read_req.tid_flow_psn"));
        }
        Ok(Self {
            kdeth: p.kdeth(),
            reth: p.reth(),
            flow_psn: p.tid_flow_psn(),
            tid_flow_qp: p.tid_flow_qp(),
            verbs_qp: p.verbs_qp(),
        })
    }

    /// Writes the header (not the payload).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        p.check_len()?;
        p.set_kdeth(&self.kdeth);
        p.set_reth(&self.reth);
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

#[cfg(test)]
mod tests {
    use super::*;
    use hfi1_hal::{Generation, Kdeth0, Kdeth1, TidCtrl, TidEntry};

    // KVER 1, JKEY 32; vaddr 0x10000, rkey 0x55, 256 KiB; generation 3,
    // sequence 5; tid_flow_qp 0x80_1803 (KDETH QPN 0x80 << 16, flow 3,
    // ctxt 3); verbs QP 0x11; one TID entry IDX 0 CTRL 3 LEN 64.
    const BYTES: [u8; 40] = [
        0x00, 0x00, 0x00, 0x40, 0x20, 0x00, 0x00, 0x00, // KDETH
        0, 0, 0, 0, 0, 0x01, 0x00, 0x00, 0, 0, 0, 0x55, 0x00, 0x04, 0x00, 0x00, // RETH
        0x00, 0x00, 0x18, 0x05, // flow psn
        0x00, 0x80, 0x18, 0x03, // flow qp
        0x00, 0x00, 0x00, 0x11, // verbs qp
        0x40, 0x00, 0x30, 0x00, // TID entry
    ];

    fn repr() -> Repr {
        Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(1 << 30),
                kdeth1: Kdeth1::with_jkey(32),
            },
            reth: reth::Repr {
                vaddr: 0x10000,
                rkey: 0x55,
                length: 256 * 1024,
            },
            flow_psn: FlowPsn::new(Generation::masked(3), 5),
            tid_flow_qp: 0x80_1803,
            verbs_qp: 0x11,
        }
    }

    #[test]
    fn parse_literal() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
        let e: Vec<_> = p.tid_entries().iter().collect();
        assert_eq!(e, [TidEntry::new(0, TidCtrl::Pair, 64).unwrap()]);
    }

    #[test]
    fn emit_literal() {
        let mut buf = [0u8; 40];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        repr().emit(&mut p).unwrap();
        super::super::tid_entries::emit(
            &[TidEntry::new(0, TidCtrl::Pair, 64).unwrap()],
            p.payload_mut(),
        )
        .unwrap();
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn rejects() {
        assert!(Packet::new_checked(&BYTES[..35]).is_err());
        let mut b = BYTES;
        b[24] = 0x80;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(Repr::parse(&p).is_err());
        assert_eq!(p.tid_flow_psn().raw(), 0x1805);
    }
}
