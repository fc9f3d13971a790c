// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA WRITE_REQ header (36 bytes after the BTH, no payload).
//!
//! ```text
//! KDETH (2 x LE32) | RETH (vaddr BE64, rkey BE32, length BE32)
//! | 2 reserved BE32 | verbs_qp BE32
//! ```
//!
//! One WRITE_REQ asks for a whole work request (what is left of it after a
//! restart), not for one segment: the responder cuts it into segments and
//! grants them one WRITE_RESP each. The BTH goes to the responder's KDETH
//! QPN with AckReq set and the request's IB PSN; the KDETH carries only
//! KVER and the responder's J_KEY. Kernel: `struct tid_rdma_write_req`,
//! `hfi1_build_tid_rdma_write_req()`.
//!
//! The reserved words are ignored on parse (the driver never writes them):
//! see [`super::tid_header`]. Otherwise the panic contract of
//! [`crate::wire`] holds.

use hfi1_hal::consts::OP_TID_RDMA_WRITE_REQ;
use hfi1_hal::{Kdeth0, Kdeth1, Psn};
use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::tid_header::{BthFields, Built, tid_header_common};
use super::{Result, kdeth, reth};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    kdeth: kdeth::Header,
    reth: reth::Header,
    reserved: [U32; 2],
    verbs_qp: U32,
}

impl Header {
    const ZERO: Self = Self {
        kdeth: kdeth::Header::ZERO,
        reth: reth::Header::ZERO,
        reserved: [U32::new(0); 2],
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
    pub const RESERVED: Range<usize> = field_range!(Header, reserved, [U32; 2]);
    pub const VERBS_QP: Range<usize> = field_range!(Header, verbs_qp, U32);
    pub const PAYLOAD: usize = VERBS_QP.end;
}

/// Length of the WRITE_REQ header in bytes (after the BTH).
pub const HEADER_LEN: usize = field::PAYLOAD;
const _: () = assert!(HEADER_LEN == super::tid_header::HEADER_LEN);
const _: () = assert!(field::KDETH.start == 0 && field::RETH.start == 8);
const _: () = assert!(field::RESERVED.start == 24 && field::VERBS_QP.start == 32);

fixed_header_view! {
    /// A read/write view of a WRITE_REQ header (and anything after it).
}

tid_header_common!();

impl<T: AsRef<[u8]>> Packet<T> {
    /// The RETH: where the data goes, with which key, how many bytes.
    pub fn reth(&self) -> reth::Repr {
        reth::Repr::from_header(&self.header().reth)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the RETH.
    pub fn set_reth(&mut self, r: &reth::Repr) {
        if let Some(h) = self.header_mut() {
            r.to_header(&mut h.reth);
        }
    }
}

/// The WRITE_REQ header as typed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// KDETH (KVER 1 and the responder's J_KEY; no TID fields).
    pub kdeth: kdeth::Repr,
    /// RETH: remote address and key, and the bytes still to write.
    pub reth: reth::Repr,
    /// The responder's verbs QP number (the requester's `remote_qpn`).
    pub verbs_qp: u32,
}

impl Repr {
    /// Reads a checked header; every bit pattern is accepted (the
    /// reserved words are not looked at).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self {
            kdeth: p.kdeth(),
            reth: p.reth(),
            verbs_qp: p.verbs_qp(),
        })
    }

    /// Writes the header, reserved words zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        p.check_len()?;
        p.set_kdeth(&self.kdeth);
        p.set_reth(&self.reth);
        p.clear_reserved();
        p.set_verbs_qp(self.verbs_qp);
        Ok(())
    }

    /// Length of the header in bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
}

/// What the requester's WRITE_REQ is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteReqFields {
    /// The responder's KDETH QPN (its OPFN `qp`): the BTH destination.
    pub remote_qp: u32,
    /// The responder's J_KEY (OPFN; the low eight bits travel).
    pub remote_jkey: u16,
    /// The responder's verbs QP number.
    pub remote_verbs_qp: u32,
    /// The work request's remote address (start of the whole WRITE).
    pub remote_addr: u64,
    /// The work request's remote key.
    pub rkey: u32,
    /// The work request's length.
    pub wqe_length: u32,
    /// Bytes still to write: the whole length on the first send, less the
    /// completed segments on a restart.
    pub remaining: u32,
    /// The IB PSN the request is sent with (the segment it restarts from).
    pub psn: Psn,
}

/// Builds the WRITE_REQ: the RETH starts where `remaining` begins
/// (`remote_addr + wqe_length - remaining`, wrapping as the driver's
/// 64-bit sum does) and asks for `remaining` bytes.
/// Kernel: `hfi1_build_tid_rdma_write_req()` (the header part; the request
/// state it also sets belongs to the requester).
pub const fn build(f: &WriteReqFields) -> Built<Repr> {
    let done = f.wqe_length.wrapping_sub(f.remaining);
    Built {
        bth: BthFields {
            opcode: OP_TID_RDMA_WRITE_REQ,
            dest_qp: f.remote_qp,
            psn: f.psn,
            ack_req: true,
        },
        header: Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(Kdeth0::KVER << 30),
                kdeth1: Kdeth1::with_jkey(f.remote_jkey),
            },
            reth: reth::Repr {
                vaddr: f.remote_addr.wrapping_add(done as u64),
                rkey: f.rkey,
                length: f.remaining,
            },
            verbs_qp: f.remote_verbs_qp,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // KVER 1, J_KEY 0x21; vaddr 0x0000_7F00_1234_5000, rkey 0xCAFE_0042,
    // 0x0004_1000 bytes; reserved 0x1111_1111 0x2222_2222 (stale bytes a
    // Linux peer may send); verbs QP 0x00AB_CDEF.
    const BYTES: [u8; 36] = [
        0x00, 0x00, 0x00, 0x40, 0x21, 0x00, 0x00, 0x00, // KDETH
        0x00, 0x00, 0x7F, 0x00, 0x12, 0x34, 0x50, 0x00, // vaddr
        0xCA, 0xFE, 0x00, 0x42, 0x00, 0x04, 0x10, 0x00, // rkey, length
        0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22, // reserved
        0x00, 0xAB, 0xCD, 0xEF, // verbs qp
    ];

    fn repr() -> Repr {
        Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(1 << 30),
                kdeth1: Kdeth1::with_jkey(0x21),
            },
            reth: reth::Repr {
                vaddr: 0x7F00_1234_5000,
                rkey: 0xCAFE_0042,
                length: 0x0004_1000,
            },
            verbs_qp: 0xAB_CDEF,
        }
    }

    #[test]
    fn parse_literal_ignoring_stale_reserved_words() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert!(!p.reserved_is_zero());
        assert_eq!(Repr::parse(&p).unwrap(), repr());
        assert!(p.payload().is_empty());
    }

    #[test]
    fn emit_literal_zeroes_reserved() {
        let mut buf = [0xEEu8; 36];
        repr()
            .emit(&mut Packet::new_unchecked(&mut buf[..]))
            .unwrap();
        let mut want = BYTES;
        want[24..32].fill(0);
        assert_eq!(buf, want);
        assert!(Packet::new_checked(&buf[..]).unwrap().reserved_is_zero());
    }

    #[test]
    fn build_is_the_kernel_header() {
        // A restart after two of five 256 KiB segments: 768 KiB are left.
        let b = build(&WriteReqFields {
            remote_qp: 0x80_0007,
            remote_jkey: 0x121,
            remote_verbs_qp: 0xAB_CDEF,
            remote_addr: 0x7F00_1230_0000,
            rkey: 0xCAFE_0042,
            wqe_length: 5 << 18,
            remaining: 3 << 18,
            psn: Psn::new(0x7FFF_FFFE),
        });
        assert_eq!(
            b.bth,
            BthFields {
                opcode: 0xE0,
                dest_qp: 0x80_0007,
                psn: Psn::new(0x7FFF_FFFE),
                ack_req: true,
            }
        );
        assert_eq!(b.header.kdeth.kdeth0.raw(), 0x4000_0000);
        assert_eq!(b.header.kdeth.kdeth1.raw(), 0x21);
        assert_eq!(b.header.reth.vaddr, 0x7F00_1230_0000 + (2 << 18));
        assert_eq!(b.header.reth.length, 3 << 18);
        assert_eq!(b.header.verbs_qp, 0xAB_CDEF);
    }

    #[test]
    fn short() {
        assert!(Packet::new_checked(&BYTES[..35]).is_err());
        let mut buf = [0u8; 35];
        assert!(
            repr()
                .emit(&mut Packet::new_unchecked(&mut buf[..]))
                .is_err()
        );
        // Accessors of a short view read zeros.
        let p = Packet::new_unchecked(&BYTES[..35]);
        assert_eq!((p.verbs_qp(), p.reth().rkey), (0, 0));
    }
}
