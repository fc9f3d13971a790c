// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Sorting packets by kind from two header bytes, without parsing them.
//!
//! [`classify`] reads the LRH's LNH, the BTH opcode and, for a READ_RESP,
//! the KDETH's SH bit: three loads and no CRC; [`verbs_qp`] reads the QP a
//! packet belongs to the same way. It is meant for statistics
//! and fault injection on packets this crate built (a simulator sorting
//! what it is about to put on the fabric), never as a check of received
//! bytes: it trusts PktLen, the ICRC and every reserved bit, which
//! [`crate::packet::parse`] checks.

use hfi1_hal::Kdeth0;
use hfi1_hal::consts::{OP_TID_RDMA_READ_REQ, OP_TID_RDMA_READ_RESP};

use super::{bth, kdeth, lrh, read_req, read_resp};
use crate::packet::OP_RC_ACK;
use crate::plain_read::{
    OP_READ_REQUEST, OP_READ_RESPONSE_FIRST, OP_READ_RESPONSE_LAST, OP_READ_RESPONSE_MIDDLE,
    OP_READ_RESPONSE_ONLY,
};

/// Offset of the BTH opcode in a 9B packet.
const OPCODE: usize = lrh::HEADER_LEN;
/// Offset of KDETH word 0 (little-endian) in a TID RDMA packet.
const KDETH0: usize = lrh::HEADER_LEN + bth::HEADER_LEN;
/// Bytes a READ_RESP must hold for its SH bit to be read.
const KDETH0_END: usize = KDETH0 + kdeth::HEADER_LEN / 2;
/// Offset of the BTH's DestQP word.
const DEST_QP: usize = lrh::HEADER_LEN + 4;
/// Offset of a TID READ_RESP's or READ_REQ's `verbs_qp` (the last word
/// of either header).
const RESP_VERBS_QP: usize = KDETH0 + read_resp::HEADER_LEN - 4;
const _: () = assert!(read_resp::HEADER_LEN == read_req::HEADER_LEN);

/// What a packet is, as far as its opcode and SH bit tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// A TID RDMA READ_REQ.
    ReadReq,
    /// A TID RDMA READ_RESP with SH set: not the last of its segment
    /// (the chip places it and suppresses its header).
    ReadRespMiddle,
    /// A TID RDMA READ_RESP with SH clear: the last of its segment, whose
    /// header the chip delivers.
    ReadRespLast,
    /// An RC ACK or NAK.
    Ack,
    /// A plain IB RDMA READ request.
    PlainReadReq,
    /// A plain IB RDMA READ response FIRST or MIDDLE: more follow.
    PlainReadRespMiddle,
    /// A plain IB RDMA READ response LAST or ONLY: the end of its READ.
    PlainReadRespLast,
    /// Anything else: another opcode, an LNH other than BTH, or a buffer
    /// too short to hold the bytes read.
    Other,
}

/// Sorts a 9B packet (LRH first) by its LNH, BTH opcode and KDETH SH bit.
/// Checks only that the bytes it reads exist; see the module doc for what
/// it does not check.
pub fn classify(packet: &[u8]) -> Class {
    let lnh = packet.get(1).map_or(0, |b| b & 0x03);
    if lnh != lrh::LNH_BTH {
        return Class::Other;
    }
    match packet.get(OPCODE).copied() {
        Some(OP_TID_RDMA_READ_REQ) => Class::ReadReq,
        Some(OP_RC_ACK) => Class::Ack,
        Some(OP_READ_REQUEST) => Class::PlainReadReq,
        Some(OP_READ_RESPONSE_FIRST | OP_READ_RESPONSE_MIDDLE) => Class::PlainReadRespMiddle,
        Some(OP_READ_RESPONSE_LAST | OP_READ_RESPONSE_ONLY) => Class::PlainReadRespLast,
        Some(OP_TID_RDMA_READ_RESP) => match packet.get(KDETH0..KDETH0_END) {
            Some(&[a, b, c, d]) => {
                if Kdeth0::from_raw(u32::from_le_bytes([a, b, c, d])).sh() {
                    Class::ReadRespMiddle
                } else {
                    Class::ReadRespLast
                }
            }
            _ => Class::Other,
        },
        _ => Class::Other,
    }
}

/// The verbs QP a 9B packet belongs to: the BTH's DestQP, except for a TID
/// READ_REQ or READ_RESP, whose DestQP names a receive context's KDETH QP
/// (shared by its QPs) and whose header carries the verbs QP. `None` if
/// the bytes are too short. Same trust as [`classify`].
pub fn verbs_qp(packet: &[u8]) -> Option<u32> {
    let word = |at: usize| {
        packet
            .get(at..at + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map(u32::from_be_bytes)
    };
    if matches!(
        packet.get(OPCODE).copied(),
        Some(OP_TID_RDMA_READ_RESP | OP_TID_RDMA_READ_REQ)
    ) {
        word(RESP_VERBS_QP)
    } else {
        word(DEST_QP).map(|w| w & 0x00FF_FFFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{self, Parsed, Path};
    use crate::plain_read::RespKind;
    use crate::wire::{aeth, read_resp};
    use hfi1_hal::Psn;
    use hfi1_hal::fields::Kdeth0Fields;
    use proptest::prelude::*;

    /// What a full parse says, in the same terms.
    fn by_parse(bytes: &[u8]) -> Class {
        match packet::parse(bytes) {
            Ok((_, Parsed::ReadReq { .. })) => Class::ReadReq,
            Ok((_, Parsed::ReadResp { hdr, .. })) => {
                if hdr.kdeth.kdeth0.sh() {
                    Class::ReadRespMiddle
                } else {
                    Class::ReadRespLast
                }
            }
            Ok((_, Parsed::Ack { .. })) => Class::Ack,
            Ok((_, Parsed::ReadRequest { .. })) => Class::PlainReadReq,
            Ok((_, Parsed::ReadResponse { kind, .. })) => match kind {
                RespKind::First | RespKind::Middle => Class::PlainReadRespMiddle,
                RespKind::Last | RespKind::Only => Class::PlainReadRespLast,
            },
            Err(_) => Class::Other,
        }
    }

    fn read_resp(sh: bool, payload: usize) -> Vec<u8> {
        let mut buf = vec![0u8; packet::MAX_PACKET];
        let kdeth0 = Kdeth0::new(Kdeth0Fields {
            offset: 3,
            tid: 1,
            sh,
            ..Kdeth0Fields::default()
        })
        .unwrap();
        // Only the KDETH matters here; the rest stays zero.
        let mut hdr = read_resp::Repr::default();
        hdr.kdeth.kdeth0 = kdeth0;
        let n = crate::response_stream::write_packet(
            &mut buf,
            Path::default(),
            0x80_0801,
            Psn::new(77),
            &hdr,
            payload,
            |o| {
                o.fill(0x5A);
                true
            },
        )
        .unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn built_packets_classify_as_they_parse() {
        for (sh, want) in [(true, Class::ReadRespMiddle), (false, Class::ReadRespLast)] {
            for payload in [0, 64, 4096] {
                let p = read_resp(sh, payload);
                assert_eq!(classify(&p), want);
                assert_eq!(by_parse(&p), want);
            }
        }
        let mut buf = [0u8; 64];
        let a = aeth::Repr {
            syndrome: 0x60,
            msn: 7,
        };
        let n = packet::build_ack(&mut buf, Path::default(), 0x12, Psn::new(9), a).unwrap();
        assert_eq!(classify(&buf[..n]), Class::Ack);
        assert_eq!(by_parse(&buf[..n]), Class::Ack);
    }

    /// The responder's own builder decides which packet ends a segment;
    /// every packet it builds must sort the same way (a mapping shared
    /// by `classify` and `by_parse` cannot hide an inversion here).
    #[test]
    fn a_built_segment_is_middles_then_one_last() {
        use crate::response_stream::{RespBuilder, RespFlow};
        use hfi1_hal::{Generation, TidCtrl, TidEntry};
        let entries = [
            TidEntry::new(0, TidCtrl::Pair, 2).unwrap(),
            TidEntry::new(1, TidCtrl::Even, 1).unwrap(),
        ];
        let mut b = RespBuilder::new(&RespFlow {
            entries: &entries,
            length: 3 * 4096,
            pmtu: 4096,
            spsn: 0,
            generation: Generation::new(5).unwrap(),
            ib_spsn: Psn::new(10),
            jkey: 32,
            urg: false,
        });
        let mut classes = Vec::new();
        while let Ok(pkt) = b.next_packet() {
            let mut hdr = read_resp::Repr::default();
            hdr.kdeth.kdeth0 = pkt.kdeth0;
            hdr.kdeth.kdeth1 = pkt.kdeth1;
            let mut buf = vec![0u8; packet::MAX_PACKET];
            let n = crate::response_stream::write_packet(
                &mut buf,
                Path::default(),
                0x80_0801,
                Psn::new(pkt.bth_psn.raw()),
                &hdr,
                pkt.len as usize,
                |o| {
                    o.fill(0);
                    true
                },
            )
            .unwrap();
            let want = if pkt.last {
                Class::ReadRespLast
            } else {
                Class::ReadRespMiddle
            };
            assert_eq!(classify(&buf[..n]), want);
            classes.push(want);
        }
        assert_eq!(
            classes,
            [
                Class::ReadRespMiddle,
                Class::ReadRespMiddle,
                Class::ReadRespLast
            ]
        );
    }

    /// Plain READ packets sort by opcode; every packet names its verbs QP
    /// (a TID READ_RESP from its header, not from the context's DestQP).
    #[test]
    fn plain_reads_classify_and_every_packet_names_its_qp() {
        use crate::plain_read::{self, RespKind};
        use crate::wire::reth;
        let mut buf = vec![0u8; packet::MAX_PACKET];
        let r = reth::Repr {
            vaddr: 0x1000,
            rkey: 7,
            length: 8192,
        };
        let n =
            plain_read::write_request(&mut buf, Path::default(), 0x21, Psn::new(3), &r).unwrap();
        assert_eq!(classify(&buf[..n]), Class::PlainReadReq);
        assert_eq!(by_parse(&buf[..n]), Class::PlainReadReq);
        assert_eq!(verbs_qp(&buf[..n]), Some(0x21));
        for (kind, want) in [
            (RespKind::First, Class::PlainReadRespMiddle),
            (RespKind::Middle, Class::PlainReadRespMiddle),
            (RespKind::Last, Class::PlainReadRespLast),
            (RespKind::Only, Class::PlainReadRespLast),
        ] {
            let a = aeth::Repr {
                syndrome: 0x1f,
                msn: 1,
            };
            let n = plain_read::write_response(
                &mut buf,
                Path::default(),
                0x22,
                Psn::new(3),
                kind,
                a,
                64,
                |o| {
                    o.fill(1);
                    true
                },
            )
            .unwrap();
            assert_eq!(classify(&buf[..n]), want, "{kind:?}");
            assert_eq!(by_parse(&buf[..n]), want, "{kind:?}");
            assert_eq!(verbs_qp(&buf[..n]), Some(0x22));
        }
        let hdr = read_resp::Repr {
            verbs_qp: 0x23,
            ..read_resp::Repr::default()
        };
        let n = crate::response_stream::write_packet(
            &mut buf,
            Path::default(),
            0x80_0801,
            Psn::new(77),
            &hdr,
            0,
            |_| true,
        )
        .unwrap();
        assert_eq!(verbs_qp(&buf[..n]), Some(0x23));
        assert_eq!(verbs_qp(&buf[..RESP_VERBS_QP]), None);
        // A TID READ_REQ's DestQP is the responder context's KDETH QP; its
        // header names the verbs QP, at the same offset.
        let mut req = vec![0u8; RESP_VERBS_QP + 4];
        req[OPCODE] = hfi1_hal::consts::OP_TID_RDMA_READ_REQ;
        req[DEST_QP + 1] = 0x80;
        req[RESP_VERBS_QP..].copy_from_slice(&0x24u32.to_be_bytes());
        assert_eq!(verbs_qp(&req), Some(0x24));
    }

    #[test]
    fn short_or_foreign_packets_are_other() {
        let p = read_resp(true, 0);
        // Up to the SH byte, a READ_RESP cannot be sorted.
        for n in 0..KDETH0_END {
            assert_eq!(classify(&p[..n]), Class::Other, "{n}");
        }
        assert_eq!(classify(&p[..KDETH0_END]), Class::ReadRespMiddle);
        let mut grh = p.clone();
        grh[1] = (grh[1] & !0x03) | lrh::LNH_GRH;
        assert_eq!(classify(&grh), Class::Other);
        let mut write = p;
        write[OPCODE] = hfi1_hal::consts::OP_TID_RDMA_WRITE_REQ;
        assert_eq!(classify(&write), Class::Other);
    }

    proptest! {
        /// On every packet the full parse accepts, the two agree.
        #[test]
        fn classify_agrees_with_parse(
            sh in any::<bool>(),
            words in 0usize..64,
            flip in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let mut p = read_resp(sh, words * 4);
            prop_assert_eq!(classify(&p), by_parse(&p));
            // A corrupted copy: whenever it still parses, it classifies the same.
            let i = flip.index(p.len());
            p[i] ^= 1 << bit;
            let parsed = by_parse(&p);
            if parsed != Class::Other {
                prop_assert_eq!(classify(&p), parsed);
            }
        }
    }
}
