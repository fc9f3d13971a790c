// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Property tests: every wire `Repr` survives parse -> emit byte for byte,
//! OPFN decode -> encode -> decode is stable, and a rewound READ_RESP cursor
//! equals the cursor of a builder that built the same number of packets.

use hfi1_hal::{Generation, Psn, TidCtrl, TidEntry};
use proptest::prelude::*;
use tid_read_proto::opfn::TidParams;
use tid_read_proto::response_stream::{Cursor, RespBuilder, RespFlow};
use tid_read_proto::wire::{bth, erf, lrh, read_req, read_resp};

/// Parses `bytes` as `P`, and if that succeeds emits the `Repr` into a
/// copy of the bytes zeroed over the header and checks it is identical.
macro_rules! round_trip {
    ($module:ident, $bytes:expr) => {{
        let bytes: &[u8] = $bytes;
        if let Ok(p) = $module::Packet::new_checked(bytes) {
            if let Ok(r) = $module::Repr::parse(&p) {
                let mut out = bytes.to_vec();
                out[..$module::HEADER_LEN].fill(0);
                r.emit(&mut $module::Packet::new_unchecked(&mut out[..]))
                    .unwrap();
                prop_assert_eq!(&out[..], bytes);
            }
        }
    }};
}

proptest! {
    #[test]
    fn wire_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        round_trip!(bth, &bytes);
        round_trip!(read_req, &bytes);
        round_trip!(lrh, &bytes);
        // The READ_RESP's reserved words (bytes 12..28) are ignored on
        // parse and written zero: compare the bytes with them zeroed.
        let mut zeroed = bytes.clone();
        if let Some(r) = zeroed.get_mut(12..28) {
            r.fill(0);
        }
        round_trip!(read_resp, &zeroed);
    }

    #[test]
    fn headers_round_trip_when_valid(
        dest_qp in 0u32..1 << 24, psn in any::<u32>(), opcode in any::<u8>(),
        verbs_psn in 0u32..1 << 31, syndrome in any::<u8>(), msn in 0u32..1 << 24,
    ) {
        // A valid READ_RESP header always parses back to itself.
        let r = read_resp::Repr {
            aeth: tid_read_proto::wire::aeth::Repr { syndrome, msn },
            verbs_psn: Psn::new(verbs_psn),
            verbs_qp: dest_qp,
            ..Default::default()
        };
        let mut buf = [0u8; read_resp::HEADER_LEN];
        r.emit(&mut read_resp::Packet::new_unchecked(&mut buf[..])).unwrap();
        let back = read_resp::Repr::parse(&read_resp::Packet::new_checked(&buf[..]).unwrap());
        prop_assert_eq!(back, Ok(r));
        let b = bth::Repr { opcode, dest_qp, psn: Psn::new(psn), ack_req: psn >> 31 == 1, ..Default::default() };
        let mut buf = [0u8; bth::HEADER_LEN];
        b.emit(&mut bth::Packet::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(bth::Repr::parse(&bth::Packet::new_checked(&buf[..]).unwrap()), Ok(b));
    }

    #[test]
    fn erf_records_round_trip(ts in any::<u64>(), iface in 0u8..4, pkt in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut out = vec![0u8; erf::HEADER_LEN + pkt.len()];
        let n = erf::encode(ts, iface, &pkt, &mut out).unwrap();
        let rec = erf::Record::new_checked(&out[..n]).unwrap();
        let r = erf::Repr::parse(&rec).unwrap();
        prop_assert_eq!(r.timestamp, ts);
        prop_assert_eq!(rec.packet(), &pkt[..]);
    }

    #[test]
    fn opfn_decode_is_a_fixed_point(word in any::<u64>()) {
        let p = TidParams::decode(word);
        prop_assert_eq!(TidParams::decode(p.encode()), p);
        // Only the version, reserved and capability bits are lost.
        prop_assert_eq!(p.encode(), word & !(0x7 << 22 | 0x3F << 26 | 0xF));
    }

    #[test]
    fn rewind_matches_building(
        lens in proptest::collection::vec(1u32..=16, 1..12),
        big_mtu in any::<bool>(),
        cut in any::<proptest::sample::Index>(),
    ) {
        let pmtu = if big_mtu { 8192 } else { 4096 };
        let entries: Vec<TidEntry> = lens
            .iter()
            .enumerate()
            .map(|(i, &l)| TidEntry::new(u32::try_from(i).unwrap(), TidCtrl::Pair, l).unwrap())
            .collect();
        let length = lens.iter().sum::<u32>() * 4096;
        let flow = RespFlow {
            entries: &entries,
            length,
            pmtu,
            spsn: 0,
            generation: Generation::masked(1),
            ib_spsn: Psn::new(0),
            jkey: 32,
            urg: false,
        };
        let total = RespBuilder::new(&flow).count();
        prop_assert!(total > 0);
        let k = cut.index(total + 1);
        let mut b = RespBuilder::new(&flow);
        for _ in 0..k {
            b.next_packet().unwrap();
        }
        let want = b.cursor();
        let got = Cursor::rewound(&entries, pmtu, u32::try_from(k).unwrap()).unwrap();
        prop_assert_eq!(got, want);
        // Building on from the rewound cursor gives the same packets.
        let rest: Vec<_> = b.map(Result::unwrap).collect();
        let mut c = RespBuilder::new(&flow);
        c.set_cursor(got);
        let again: Vec<_> = c.map(Result::unwrap).collect();
        prop_assert_eq!(again, rest);
    }
}
