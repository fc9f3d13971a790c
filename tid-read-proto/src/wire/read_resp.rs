// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA READ_RESP header (36 bytes after the BTH) and its payload.
//!
//! ```text
//! KDETH (2 x LE32) | AETH BE32 | 4 reserved BE32 | verbs_psn BE32 | verbs_qp BE32
//! | data
//! ```
//!
//! The BTH of a READ_RESP carries the requester's `tid_flow_qp` as DestQP
//! and the flow PSN as PSN; `verbs_psn` is the IB PSN the packet consumes.
//! Kernel: `struct tid_rdma_read_resp`.
//!
//! The four reserved words are ignored on parse, as the kernel's receiver
//! ignores them: `hfi1_build_tid_rdma_read_resp()` never writes them, so a
//! Linux responder sends whatever its header buffer held before, and a
//! parser that refused non-zero words would refuse real READ_RESPs.
//! [`Repr::emit`] writes them zero. Otherwise the panic contract of
//! [`crate::wire`] holds.

use hfi1_hal::Psn;
use hfi1_hal::consts::PSN_MASK;
use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Error, Result, aeth, kdeth, view_mut};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    kdeth: kdeth::Header,
    aeth: aeth::Header,
    reserved: [U32; 4],
    verbs_psn: U32,
    verbs_qp: U32,
}

impl Header {
    const ZERO: Self = Self {
        kdeth: kdeth::Header::ZERO,
        aeth: aeth::Header::ZERO,
        reserved: [U32::new(0); 4],
        verbs_psn: U32::new(0),
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
    pub const RESERVED: Range<usize> = field_range!(Header, reserved, [U32; 4]);
    pub const VERBS_PSN: Range<usize> = field_range!(Header, verbs_psn, U32);
    pub const VERBS_QP: Range<usize> = field_range!(Header, verbs_qp, U32);
    pub const PAYLOAD: usize = VERBS_QP.end;
}

/// Length of the READ_RESP header in bytes (after the BTH).
pub const HEADER_LEN: usize = field::PAYLOAD;
const _: () = assert!(HEADER_LEN == 36 && field::KDETH.start == 0 && field::AETH.start == 8);
const _: () = assert!(field::RESERVED.start == 12 && field::VERBS_PSN.start == 28);

fixed_header_view! {
    /// A read/write view of a READ_RESP header and its data.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The KDETH.
    pub fn kdeth(&self) -> kdeth::Repr {
        kdeth::Repr::from_header(&self.header().kdeth)
    }

    /// The AETH.
    pub fn aeth(&self) -> aeth::Repr {
        aeth::Repr::from_header(&self.header().aeth)
    }

    /// True if all four reserved words are zero.
    pub fn reserved_is_zero(&self) -> bool {
        self.header().reserved.iter().all(|w| w.get() == 0)
    }

    /// `verbs_psn` as received (all 32 bits).
    pub fn verbs_psn_raw(&self) -> u32 {
        self.header().verbs_psn.get()
    }

    /// `verbs_psn` masked to 31 bits (what the driver uses).
    pub fn verbs_psn(&self) -> Psn {
        Psn::new(self.verbs_psn_raw())
    }

    /// `verbs_qp`: the requester's verbs QP number.
    pub fn verbs_qp(&self) -> u32 {
        self.header().verbs_qp.get()
    }

    /// The data bytes.
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
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

    /// Sets the AETH (the MSN masked to 24 bits).
    pub fn set_aeth(&mut self, a: &aeth::Repr) {
        if let Some(h) = self.header_mut() {
            let masked = aeth::Repr {
                syndrome: a.syndrome,
                msn: a.msn & 0x00FF_FFFF,
            };
            // Cannot fail: the MSN was masked to 24 bits.
            let _ = masked.to_header(&mut h.aeth);
        }
    }

    /// Zeroes the four reserved words.
    pub fn clear_reserved(&mut self) {
        if let Some(h) = self.header_mut() {
            h.reserved = [U32::new(0); 4];
        }
    }

    /// Sets `verbs_psn`.
    pub fn set_verbs_psn(&mut self, v: Psn) {
        if let Some(h) = self.header_mut() {
            h.verbs_psn.set(v.get());
        }
    }

    /// Sets `verbs_qp`.
    pub fn set_verbs_qp(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.verbs_qp.set(v);
        }
    }

    /// The data, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..)
            .unwrap_or(&mut [])
    }
}

/// The READ_RESP header as typed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// KDETH: where the data goes (TID, TIDCTRL, OFFSET), SH, INTR, J_KEY.
    pub kdeth: kdeth::Repr,
    /// AETH of the responder's QP.
    pub aeth: aeth::Repr,
    /// The IB PSN this packet consumes.
    pub verbs_psn: Psn,
    /// The requester's verbs QP number.
    pub verbs_qp: u32,
}

impl Repr {
    /// Reads a checked header; bit 31 of `verbs_psn` must be clear. The
    /// reserved words are not looked at (see the module doc).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        if p.verbs_psn_raw() & !PSN_MASK != 0 {
            return Err(Error::Malformed("read_resp.verbs_psn"));
        }
        Ok(Self {
            kdeth: p.kdeth(),
            aeth: p.aeth(),
            verbs_psn: p.verbs_psn(),
            verbs_qp: p.verbs_qp(),
        })
    }

    /// Writes the header (not the data). Fails if the AETH's MSN is wider
    /// than 24 bits or the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        p.check_len()?;
        if self.aeth.msn > 0x00FF_FFFF {
            return Err(Error::Malformed("aeth.msn"));
        }
        p.set_kdeth(&self.kdeth);
        p.set_aeth(&self.aeth);
        p.clear_reserved();
        p.set_verbs_psn(self.verbs_psn);
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
    use hfi1_hal::{Kdeth0, Kdeth1};

    // kdeth0 0x6003_8000 (KVER 1, SH, TID 3, OM), JKEY 32, AETH ACK with
    // credit code 0x1F and MSN 7, verbs PSN 0x1000, verbs QP 0x11, 4 data
    // bytes.
    const BYTES: [u8; 40] = [
        0x00, 0x80, 0x03, 0x60, 0x20, 0x00, 0x00, 0x00, // KDETH
        0x1F, 0x00, 0x00, 0x07, // AETH
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0x00, 0x00, 0x10, 0x00, // verbs psn
        0x00, 0x00, 0x00, 0x11, // verbs qp
        0xDE, 0xAD, 0xBE, 0xEF, // data
    ];

    fn repr() -> Repr {
        Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(0x6003_8000),
                kdeth1: Kdeth1::with_jkey(32),
            },
            aeth: aeth::Repr {
                syndrome: 0x1F,
                msn: 7,
            },
            verbs_psn: Psn::new(0x1000),
            verbs_qp: 0x11,
        }
    }

    #[test]
    fn parse_literal() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, repr());
        assert!(r.kdeth.kdeth0.sh() && r.kdeth.kdeth0.om());
        assert_eq!(r.kdeth.kdeth0.tid(), 3);
        assert_eq!(p.payload(), &[0xDE, 0xAD, 0xBE, 0xEF]);
    }

    #[test]
    fn emit_literal() {
        let mut buf = [0xFFu8; 40];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        repr().emit(&mut p).unwrap();
        p.payload_mut().copy_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
        assert_eq!(buf, BYTES);
    }

    /// A Linux responder leaves stale bytes in the reserved words
    /// (`hfi1_build_tid_rdma_read_resp()` never writes them): they parse
    /// as the kernel's receiver reads them, by ignoring them, and emit
    /// writes them zero. With the old zero check back in `parse` this
    /// READ_RESP was refused.
    #[test]
    fn stale_reserved_words_are_ignored_as_the_kernel_ignores_them() {
        let mut b = BYTES;
        b[12..28].copy_from_slice(&[0x5A; 16]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(!p.reserved_is_zero());
        assert_eq!(Repr::parse(&p).unwrap(), repr());
        let mut out = b;
        repr()
            .emit(&mut Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, BYTES);
    }

    #[test]
    fn rejects() {
        assert!(Packet::new_checked(&BYTES[..35]).is_err());
        let mut b = BYTES;
        b[28] = 0x80;
        assert!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).is_err());
    }
}
