// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The plain IB RC RDMA READ packets a READ that does not become a TID
//! READ goes as: the request (BTH + RETH) and the responses FIRST, MIDDLE,
//! LAST and ONLY (BTH, an AETH on all but MIDDLE, the data). They are the
//! standard RC opcodes 0x0C..=0x10; the data arrives in an eager buffer
//! and software copies it (no TIDs, no KDETH).
//!
//! A response carries `pmtu` bytes but the last (or only) one, which
//! carries the rest (possibly 0 for a zero-length READ); its PSN is the
//! request's plus its index. Kernel: `hfi1_make_rc_req()` (the
//! `IB_WR_RDMA_READ` case) and `make_rc_ack()` (the
//! `OP(RDMA_READ_REQUEST)` entries).

use hfi1_hal::Psn;

use crate::packet::{BthOut, PacketError, Path, frame};
use crate::wire::{aeth, reth};

/// RC RDMA READ request. Kernel: `IB_OPCODE_RC_RDMA_READ_REQUEST`.
pub const OP_READ_REQUEST: u8 = 0x0C;
/// RC RDMA READ response, first of several. Kernel:
/// `IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST`.
pub const OP_READ_RESPONSE_FIRST: u8 = 0x0D;
/// RC RDMA READ response, middle. Kernel:
/// `IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE`.
pub const OP_READ_RESPONSE_MIDDLE: u8 = 0x0E;
/// RC RDMA READ response, last of several. Kernel:
/// `IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST`.
pub const OP_READ_RESPONSE_LAST: u8 = 0x0F;
/// RC RDMA READ response, the only one. Kernel:
/// `IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY`.
pub const OP_READ_RESPONSE_ONLY: u8 = 0x10;

/// Which response of a READ a packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RespKind {
    /// The first of several: AETH, `pmtu` bytes.
    First,
    /// A middle one: no AETH, `pmtu` bytes.
    Middle,
    /// The last of several: AETH, 1..=`pmtu` bytes.
    Last,
    /// The only one: AETH, 0..=`pmtu` bytes.
    Only,
}

impl RespKind {
    /// The opcode.
    pub const fn opcode(self) -> u8 {
        match self {
            Self::First => OP_READ_RESPONSE_FIRST,
            Self::Middle => OP_READ_RESPONSE_MIDDLE,
            Self::Last => OP_READ_RESPONSE_LAST,
            Self::Only => OP_READ_RESPONSE_ONLY,
        }
    }

    /// The kind of an opcode, if it is a READ response.
    pub const fn of(opcode: u8) -> Option<Self> {
        match opcode {
            OP_READ_RESPONSE_FIRST => Some(Self::First),
            OP_READ_RESPONSE_MIDDLE => Some(Self::Middle),
            OP_READ_RESPONSE_LAST => Some(Self::Last),
            OP_READ_RESPONSE_ONLY => Some(Self::Only),
            _ => None,
        }
    }

    /// True if the packet carries an AETH.
    pub const fn has_aeth(self) -> bool {
        !matches!(self, Self::Middle)
    }

    /// The kind of response `index` of `count` (0-based).
    pub const fn nth(index: u32, count: u32) -> Self {
        match (index, count) {
            (_, 0 | 1) => Self::Only,
            (0, _) => Self::First,
            (i, n) if i + 1 >= n => Self::Last,
            _ => Self::Middle,
        }
    }
}

/// Kernel: the `IB_WR_RDMA_READ` case of `hfi1_make_rc_req()`.
///
/// Writes an RDMA READ request (LRH, BTH with AckReq, RETH, ICRC) into
/// `buf` to the peer's verbs QP `dest_qp` and returns its length.
///
/// # Errors
///
/// [`PacketError::NoRoom`] if `buf` is too short.
pub fn write_request(
    buf: &mut [u8],
    path: Path,
    dest_qp: u32,
    psn: Psn,
    r: &reth::Repr,
) -> Result<usize, PacketError> {
    let b = BthOut {
        opcode: OP_READ_REQUEST,
        dest_qp,
        ack_req: true,
        psn,
    };
    frame(buf, path, b, reth::HEADER_LEN, |body| {
        r.emit(&mut reth::Packet::new_unchecked(body))?;
        Ok(())
    })
}

/// Kernel: `make_rc_ack()` for an `OP(RDMA_READ_REQUEST)` entry.
///
/// Writes one RDMA READ response of `kind` (LRH, BTH, the AETH `a` unless
/// it is a MIDDLE, `payload_len` bytes written by `payload`, pad, ICRC)
/// into `buf` to the requester's verbs QP `dest_qp` and returns its length.
///
/// # Errors
///
/// [`PacketError::NoRoom`] if `buf` is too short, [`PacketError::Source`]
/// if `payload` fails.
#[allow(clippy::too_many_arguments)]
pub fn write_response(
    buf: &mut [u8],
    path: Path,
    dest_qp: u32,
    psn: Psn,
    kind: RespKind,
    a: aeth::Repr,
    payload_len: usize,
    payload: impl FnOnce(&mut [u8]) -> bool,
) -> Result<usize, PacketError> {
    let b = BthOut {
        opcode: kind.opcode(),
        dest_qp,
        ack_req: false,
        psn,
    };
    let head = if kind.has_aeth() { aeth::HEADER_LEN } else { 0 };
    frame(buf, path, b, head + payload_len, |body| {
        let (h, data) = body.split_at_mut_checked(head).ok_or(PacketError::NoRoom)?;
        if kind.has_aeth() {
            a.emit(&mut aeth::Packet::new_unchecked(h))?;
        }
        let out = data.get_mut(..payload_len).ok_or(PacketError::NoRoom)?;
        if payload(out) {
            Ok(())
        } else {
            Err(PacketError::Source)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Parsed, parse};

    #[test]
    fn kinds_by_index() {
        assert_eq!(RespKind::nth(0, 1), RespKind::Only);
        assert_eq!(RespKind::nth(0, 0), RespKind::Only);
        assert_eq!(RespKind::nth(0, 3), RespKind::First);
        assert_eq!(RespKind::nth(1, 3), RespKind::Middle);
        assert_eq!(RespKind::nth(2, 3), RespKind::Last);
        for k in [
            RespKind::First,
            RespKind::Middle,
            RespKind::Last,
            RespKind::Only,
        ] {
            assert_eq!(RespKind::of(k.opcode()), Some(k));
        }
        assert_eq!(RespKind::of(OP_READ_REQUEST), None);
    }

    #[test]
    fn request_and_responses_round_trip() {
        let mut buf = [0u8; 256];
        let path = Path { dlid: 2, slid: 1 };
        let r = reth::Repr {
            vaddr: 0x1_0000_2000,
            rkey: 0x5000,
            length: 12288,
        };
        let n = write_request(&mut buf, path, 0x400, Psn::new(9), &r).unwrap();
        assert_eq!(n, 8 + 12 + 16 + 4);
        match parse(&buf[..n]).unwrap().1 {
            Parsed::ReadRequest { bth, reth } => {
                assert!(bth.ack_req);
                assert_eq!((bth.dest_qp, bth.psn, reth), (0x400, Psn::new(9), r));
            }
            other => panic!("{other:?}"),
        }
        let a = aeth::Repr {
            syndrome: 0x1F,
            msn: 3,
        };
        // A last response of 5 bytes: padded to a word, pad count 3.
        let n = write_response(
            &mut buf,
            path,
            0x100,
            Psn::new(11),
            RespKind::Last,
            a,
            5,
            |o| {
                o.copy_from_slice(b"hello");
                true
            },
        )
        .unwrap();
        assert_eq!(n, 8 + 12 + 4 + 8 + 4);
        match parse(&buf[..n]).unwrap().1 {
            Parsed::ReadResponse {
                bth,
                kind,
                aeth,
                payload,
            } => {
                assert_eq!(
                    (bth.psn, bth.pad_count, kind),
                    (Psn::new(11), 3, RespKind::Last)
                );
                assert_eq!((aeth, payload), (Some(a), &b"hello"[..]));
            }
            other => panic!("{other:?}"),
        }
        let n = write_response(
            &mut buf,
            path,
            0x100,
            Psn::new(10),
            RespKind::Middle,
            a,
            8,
            |o| {
                o.fill(7);
                true
            },
        )
        .unwrap();
        match parse(&buf[..n]).unwrap().1 {
            Parsed::ReadResponse { aeth, payload, .. } => {
                assert_eq!((aeth, payload), (None, &[7u8; 8][..]));
            }
            other => panic!("{other:?}"),
        }
    }
}
