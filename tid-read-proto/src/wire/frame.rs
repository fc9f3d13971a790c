// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Whole 9B frames: LRH + BTH + body + pad + ICRC in one call, and back.
//!
//! The body is whatever follows the BTH (a READ_REQ or READ_RESP header and
//! its payload, already written by the caller, possibly in pieces). A body
//! that is not a whole number of words is padded with zero bytes and the
//! BTH pad count says how many. The LRH's PktLen and the ICRC are computed
//! here; the caller's `lrh::Repr::packet_len` and `bth::Repr::pad_count`
//! are ignored.

use super::{Error, Result, bth, lrh};

/// Bytes a frame with a body of `body_len` bytes takes on the wire.
pub const fn frame_len(body_len: usize) -> usize {
    let padded = body_len.saturating_add(3) & !3;
    (lrh::HEADER_LEN + bth::HEADER_LEN + lrh::ICRC_LEN).saturating_add(padded)
}

/// Writes a whole frame into `out` and returns its length. `body` is the
/// concatenation of the given pieces.
pub fn emit(lrh: &lrh::Repr, bth: &bth::Repr, body: &[&[u8]], out: &mut [u8]) -> Result<usize> {
    let body_len = body
        .iter()
        .try_fold(0usize, |n, b| n.checked_add(b.len()))
        .ok_or(Error::Malformed("frame.body"))?;
    let total = frame_len(body_len);
    let out = out.get_mut(..total).ok_or(Error::Truncated)?;
    let pad = total - (lrh::HEADER_LEN + bth::HEADER_LEN + lrh::ICRC_LEN) - body_len;
    let mut l = lrh::Packet::new_unchecked(&mut *out);
    lrh::Repr {
        packet_len: total,
        ..*lrh
    }
    .emit(&mut l)?;
    let mut b = bth::Packet::new_unchecked(l.payload_mut());
    bth::Repr {
        // At most 3: the cast keeps it.
        pad_count: (pad & 3) as u8,
        ..*bth
    }
    .emit(&mut b)?;
    let mut rest = b.payload_mut();
    for piece in body {
        let (dst, tail) = rest.split_at_mut(piece.len().min(rest.len()));
        dst.copy_from_slice(piece.get(..dst.len()).unwrap_or(&[]));
        rest = tail;
    }
    rest.fill(0);
    l.fill_icrc();
    Ok(total)
}

/// A parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The LRH.
    pub lrh: lrh::Repr,
    /// The BTH.
    pub bth: bth::Repr,
    /// What follows the BTH, without the pad bytes.
    pub body: &'a [u8],
}

/// Parses a whole frame and checks its ICRC ([`Error::Malformed`]
/// `"icrc"` on a mismatch); pad bytes must be zero.
pub fn parse(bytes: &[u8]) -> Result<Frame<'_>> {
    let l = lrh::Packet::new_checked(bytes)?;
    let lrh = lrh::Repr::parse(&l)?;
    if !l.verify_icrc() {
        return Err(Error::Malformed("icrc"));
    }
    let b = bth::Packet::new_checked(l.payload())?;
    let bth = bth::Repr::parse(&b)?;
    // The body runs from the end of the BTH to the ICRC, less the pad.
    let start = lrh::HEADER_LEN + bth::HEADER_LEN;
    let end = lrh
        .packet_len
        .saturating_sub(lrh::ICRC_LEN)
        .checked_sub(usize::from(bth.pad_count))
        .filter(|&e| e >= start)
        .ok_or(Error::Malformed("bth.pad_count"))?;
    let pad = bytes.get(end..lrh.packet_len.saturating_sub(lrh::ICRC_LEN));
    if pad.is_some_and(|p| p.iter().any(|&b| b != 0)) {
        return Err(Error::Malformed("pad"));
    }
    Ok(Frame {
        lrh,
        bth,
        body: bytes.get(start..end).ok_or(Error::Truncated)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfi1_hal::Psn;

    #[test]
    fn round_trip_with_padding() {
        let l = lrh::Repr {
            lnh: lrh::LNH_BTH,
            dlid: 1,
            slid: 2,
            ..Default::default()
        };
        let b = bth::Repr {
            opcode: 0xE4,
            pkey: 0xFFFF,
            dest_qp: 0x80_0002,
            ack_req: true,
            psn: Psn::new(77),
            ..Default::default()
        };
        let mut out = [0xAAu8; 64];
        let n = emit(&l, &b, &[&[1, 2, 3], &[4, 5]], &mut out).unwrap();
        assert_eq!(n, frame_len(5));
        assert_eq!(n, 8 + 12 + 8 + 4);
        assert_eq!(&out[20..28], &[1, 2, 3, 4, 5, 0, 0, 0]);
        assert_eq!(out[9] >> 4 & 3, 3, "pad count 3");
        let f = parse(&out[..n]).unwrap();
        assert_eq!(f.body, &[1, 2, 3, 4, 5]);
        assert_eq!(f.bth.psn, Psn::new(77));
        assert_eq!(f.lrh.packet_len, n);
        let mut padded = out;
        padded[27] = 1;
        let mut p = lrh::Packet::new_unchecked(&mut padded[..n]);
        p.fill_icrc();
        assert_eq!(parse(&padded[..n]), Err(Error::Malformed("pad")));
        let mut bad = out;
        bad[21] ^= 1;
        assert_eq!(parse(&bad[..n]), Err(Error::Malformed("icrc")));
        assert_eq!(
            emit(&l, &b, &[&[0; 9]], &mut out[..31]),
            Err(Error::Truncated)
        );
    }
}
