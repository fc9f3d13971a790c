// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Whole packets of the READ engines: a 9B LRH, the BTH, the TID RDMA
//! header (or an AETH for an RC ACK/NAK, a RETH or AETH for a plain RDMA
//! READ), the payload, the pad and the ICRC, built and parsed with
//! [`crate::wire`]. The READ_REQ and the READ_RESP are written by their
//! own modules ([`crate::segment_request::ReadReq::write_packet`],
//! [`crate::response_stream::write_packet`]), the plain READ packets by
//! [`crate::plain_read`], all on the framing here; the RC ACK is written
//! here ([`build_ack`]).
//!
//! Building writes into a caller's buffer and returns the packet length;
//! parsing checks the LRH length, the ICRC, the next-header field and
//! every header's reserved bits, and never panics: a malformed packet is
//! an [`PacketError`] for the caller to count and drop.

use hfi1_hal::Psn;
use hfi1_hal::consts::{OP_TID_RDMA_READ_REQ, OP_TID_RDMA_READ_RESP};

use crate::plain_read::{OP_READ_REQUEST, RespKind};
use crate::wire::{self, aeth, bth, lrh, read_req, read_resp, reth};

/// RC ACKNOWLEDGE opcode (an ACK or NAK carrying only an AETH).
/// Kernel: `OP(ACKNOWLEDGE)`.
pub const OP_RC_ACK: u8 = 0x11;

/// The default partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// The AETH syndrome of a plain ACK with the "invalid credit count" code
/// (0x1F): the requester does not do end-to-end flow control on READs.
pub const ACK_SYNDROME: u8 = 0x1F;

/// Most bytes a packet built here can take (8 KiB MTU + headers).
pub const MAX_PACKET: usize = 8192 + 128;

/// Why a packet could not be built or parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// A header could not be read or written.
    #[error("wire: {0}")]
    Wire(#[from] wire::Error),
    /// The ICRC does not match.
    #[error("bad ICRC")]
    BadIcrc,
    /// The LRH does not announce a BTH.
    #[error("not a 9B packet with a BTH")]
    NotBth,
    /// An opcode the READ engines do not handle.
    #[error("opcode {0:#04x} not handled")]
    Opcode(u8),
    /// The output buffer is too small.
    #[error("buffer too small")]
    NoRoom,
    /// The payload could not be filled (source memory missing).
    #[error("payload source failed")]
    Source,
}

/// The link-level addresses of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Path {
    /// Destination LID.
    pub dlid: u16,
    /// Source LID.
    pub slid: u16,
}

/// The BTH fields a builder sets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BthOut {
    pub(crate) opcode: u8,
    pub(crate) dest_qp: u32,
    pub(crate) ack_req: bool,
    pub(crate) psn: Psn,
}

/// Writes LRH, BTH, `body_len` bytes by `fill`, the pad to a whole word
/// (the BTH pad count says how many) and the ICRC into `buf`; the packets'
/// own modules ([`crate::segment_request`], [`crate::response_stream`],
/// [`crate::plain_read`]) and [`build_ack`] say what goes after the BTH.
pub(crate) fn frame(
    buf: &mut [u8],
    path: Path,
    b: BthOut,
    body_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), PacketError>,
) -> Result<usize, PacketError> {
    let pad = body_len.wrapping_neg() & 3;
    let len = lrh::HEADER_LEN + bth::HEADER_LEN + body_len + pad + lrh::ICRC_LEN;
    let buf = buf.get_mut(..len).ok_or(PacketError::NoRoom)?;
    let mut l = lrh::Packet::new_unchecked(&mut *buf);
    lrh::Repr {
        sc: 0,
        lver: 0,
        sl: 0,
        lnh: lrh::LNH_BTH,
        dlid: path.dlid,
        slid: path.slid,
        packet_len: len,
    }
    .emit(&mut l)?;
    {
        let mut bp = bth::Packet::new_unchecked(l.payload_mut());
        bth::Repr {
            opcode: b.opcode,
            solicited: false,
            migreq: false,
            // At most 3: the cast keeps it.
            pad_count: pad as u8,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: b.dest_qp & 0x00FF_FFFF,
            ack_req: b.ack_req,
            psn: b.psn,
        }
        .emit(&mut bp)?;
        let (body, tail) = bp
            .payload_mut()
            .split_at_mut_checked(body_len)
            .ok_or(PacketError::NoRoom)?;
        fill(body)?;
        if let Some(p) = tail.get_mut(..pad) {
            p.fill(0);
        }
    }
    l.fill_icrc();
    Ok(len)
}

/// Builds an RC ACK or NAK (BTH + AETH) to `dest_qp` with PSN `psn`.
/// Kernel: `hfi1_send_rc_ack()` / `make_rc_ack()`.
pub fn build_ack(
    buf: &mut [u8],
    path: Path,
    dest_qp: u32,
    psn: Psn,
    a: aeth::Repr,
) -> Result<usize, PacketError> {
    frame(
        buf,
        path,
        BthOut {
            opcode: OP_RC_ACK,
            dest_qp,
            ack_req: false,
            psn,
        },
        aeth::HEADER_LEN,
        |body| {
            let mut p = aeth::Packet::new_unchecked(body);
            a.emit(&mut p)?;
            Ok(())
        },
    )
}

/// A parsed packet.
#[derive(Debug, Clone, Copy)]
pub enum Parsed<'a> {
    /// A TID RDMA READ_REQ.
    ReadReq {
        /// Its BTH.
        bth: bth::Repr,
        /// The header after the BTH.
        hdr: read_req::Repr,
        /// The TID entries' bytes.
        payload: &'a [u8],
    },
    /// A TID RDMA READ_RESP.
    ReadResp {
        /// Its BTH.
        bth: bth::Repr,
        /// The header after the BTH.
        hdr: read_resp::Repr,
        /// The data.
        payload: &'a [u8],
    },
    /// An RC ACK or NAK.
    Ack {
        /// Its BTH.
        bth: bth::Repr,
        /// The AETH.
        aeth: aeth::Repr,
    },
    /// A plain RC RDMA READ request.
    ReadRequest {
        /// Its BTH.
        bth: bth::Repr,
        /// Where to read, the R_Key and the length.
        reth: reth::Repr,
    },
    /// A plain RC RDMA READ response.
    ReadResponse {
        /// Its BTH.
        bth: bth::Repr,
        /// First, middle, last or only.
        kind: RespKind,
        /// The AETH (all but a middle response).
        aeth: Option<aeth::Repr>,
        /// The data, without the pad.
        payload: &'a [u8],
    },
}

/// Parses a whole packet (LRH through ICRC).
///
/// # Errors
///
/// Any [`PacketError`] but [`PacketError::NoRoom`] and
/// [`PacketError::Source`].
pub fn parse(buf: &[u8]) -> Result<(lrh::Repr, Parsed<'_>), PacketError> {
    let l = lrh::Packet::new_checked(buf)?;
    let lr = lrh::Repr::parse(&l)?;
    if lr.lnh != lrh::LNH_BTH {
        return Err(PacketError::NotBth);
    }
    // The one ICRC check of a received packet.
    wire::icrc::Verified::check(buf).map_err(|e| match e {
        wire::icrc::IcrcError::Mismatch => PacketError::BadIcrc,
        wire::icrc::IcrcError::Length(w) => PacketError::Wire(w),
    })?;
    let after_lrh = buf
        .get(lrh::HEADER_LEN..lr.packet_len.saturating_sub(lrh::ICRC_LEN))
        .ok_or(PacketError::Wire(wire::Error::Truncated))?;
    let bp = bth::Packet::new_checked(after_lrh)?;
    let b = bth::Repr::parse(&bp)?;
    let rest = after_lrh
        .get(bth::HEADER_LEN..)
        .ok_or(PacketError::Wire(wire::Error::Truncated))?;
    let rest = rest
        .get(..rest.len().saturating_sub(usize::from(b.pad_count)))
        .unwrap_or(&[]);
    let parsed = match b.opcode {
        OP_TID_RDMA_READ_REQ => {
            let p = read_req::Packet::new_checked(rest)?;
            let hdr = read_req::Repr::parse(&p)?;
            let payload = rest.get(read_req::HEADER_LEN..).unwrap_or(&[]);
            Parsed::ReadReq {
                bth: b,
                hdr,
                payload,
            }
        }
        OP_TID_RDMA_READ_RESP => {
            let p = read_resp::Packet::new_checked(rest)?;
            let hdr = read_resp::Repr::parse(&p)?;
            let payload = rest.get(read_resp::HEADER_LEN..).unwrap_or(&[]);
            Parsed::ReadResp {
                bth: b,
                hdr,
                payload,
            }
        }
        OP_RC_ACK => {
            let p = aeth::Packet::new_checked(rest)?;
            Parsed::Ack {
                bth: b,
                aeth: aeth::Repr::parse(&p)?,
            }
        }
        OP_READ_REQUEST => {
            let p = reth::Packet::new_checked(rest)?;
            Parsed::ReadRequest {
                bth: b,
                reth: reth::Repr::parse(&p)?,
            }
        }
        op => match RespKind::of(op) {
            Some(kind) => parse_read_response(b, kind, rest)?,
            None => return Err(PacketError::Opcode(op)),
        },
    };
    Ok((lr, parsed))
}

/// The part of [`parse`] after the BTH of a plain READ response.
fn parse_read_response(
    b: bth::Repr,
    kind: RespKind,
    rest: &[u8],
) -> Result<Parsed<'_>, PacketError> {
    let (aeth, payload) = if kind.has_aeth() {
        let p = aeth::Packet::new_checked(rest)?;
        let a = aeth::Repr::parse(&p)?;
        (Some(a), rest.get(aeth::HEADER_LEN..).unwrap_or(&[]))
    } else {
        (None, rest)
    };
    Ok(Parsed::ReadResponse {
        bth: b,
        kind,
        aeth,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::kdeth;
    use hfi1_hal::{Kdeth0, Kdeth1};

    #[test]
    fn ack_round_trip_and_icrc_checked() {
        let mut buf = [0u8; 64];
        let path = Path { dlid: 2, slid: 1 };
        let a = aeth::Repr {
            syndrome: 0x60,
            msn: 7,
        };
        let n = build_ack(&mut buf, path, 0x123, Psn::new(99), a).unwrap();
        assert_eq!(n, 8 + 12 + 4 + 4);
        let (l, p) = parse(&buf[..n]).unwrap();
        assert_eq!((l.dlid, l.slid), (2, 1));
        match p {
            Parsed::Ack { bth, aeth } => {
                assert_eq!(bth.opcode, OP_RC_ACK);
                assert_eq!(bth.dest_qp, 0x123);
                assert_eq!(bth.psn, Psn::new(99));
                assert_eq!(aeth, a);
            }
            other => panic!("{other:?}"),
        }
        buf[20] ^= 1;
        assert_eq!(parse(&buf[..n]).unwrap_err(), PacketError::BadIcrc);
    }

    #[test]
    fn read_resp_round_trip() {
        let mut buf = [0u8; 256];
        let hdr = read_resp::Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(Kdeth0::KVER << 30 | 1 << 15 | 3),
                kdeth1: Kdeth1::with_jkey(32),
            },
            aeth: aeth::Repr {
                syndrome: ACK_SYNDROME,
                msn: 1,
            },
            verbs_psn: Psn::new(5),
            verbs_qp: 0x42,
        };
        let n = crate::response_stream::write_packet(
            &mut buf,
            Path::default(),
            0x80_0801,
            Psn::new(77),
            &hdr,
            64,
            |o| {
                o.fill(0xAB);
                true
            },
        )
        .unwrap();
        let (_, p) = parse(&buf[..n]).unwrap();
        match p {
            Parsed::ReadResp {
                bth,
                hdr: h,
                payload,
            } => {
                assert_eq!(bth.dest_qp, 0x80_0801);
                assert_eq!(bth.psn, Psn::new(77));
                assert_eq!(h, hdr);
                assert_eq!(payload, &[0xAB; 64][..]);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&buf[..n - 1]).is_err());
        assert!(parse(&[]).is_err());
    }
}
