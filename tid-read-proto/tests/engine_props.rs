// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Property tests of the engines' packet handling: whatever bytes arrive,
//! parsing never panics; a valid packet with any bytes changed is either
//! refused by the ICRC or parses; and a responder fed arbitrary READ_REQ
//! headers and payloads never panics, never leaks a memory-region
//! reference and only ever answers with well-formed packets.

use hfi1_hal::lock_order::LockToken;
use hfi1_hal::{FlowPsn, Kdeth0, Kdeth1, Psn};
use proptest::prelude::*;
use tid_harness::doubles::{Outbox, Region, Regions};
use tid_harness::platform::{SoftPlatform, new_qp};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, Parsed, Path};
use tid_read_proto::qp;
use tid_read_proto::rc::Connection;
use tid_read_proto::wire::{aeth, kdeth, read_req, reth};

/// The R_Key of the one region, which spans every address.
const RKEY: u32 = 0x77;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = packet::parse(&bytes);
    }

    #[test]
    fn a_corrupted_ack_is_refused_or_parses(psn in 0u32..0x7FFF_FFFF, at in 0usize..28, x in 1u8..=255) {
        let mut buf = [0u8; 64];
        let a = aeth::Repr { syndrome: 0x60, msn: 3 };
        let n = packet::build_ack(&mut buf, Path::default(), 0x42, Psn::new(psn), a).unwrap();
        buf[at] ^= x;
        // The ICRC covers every byte but the masked ones; whatever the
        // change, no panic, and an accepted packet is still an ACK.
        if let Ok((_, p)) = packet::parse(&buf[..n]) {
            let is_ack = matches!(p, Parsed::Ack { .. });
            prop_assert!(is_ack);
        }
    }

    #[test]
    fn the_responder_survives_any_request(
        psn in 95u32..110,
        length in prop_oneof![Just(0u32), Just(4096), Just(8192), Just(65536), 0u32..300_000],
        rkey in prop_oneof![Just(RKEY), any::<u32>()],
        vaddr in any::<u64>(),
        flow_psn in any::<u32>(),
        tid_flow_qp in any::<u32>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        remote_read in any::<bool>(),
        repeat in 1usize..4,
    ) {
        let conn = Connection {
            verbs_qpn: 0x400,
            remote_verbs_qpn: 0x100,
            local: TidParams::local(2, 32, 14, false),
            remote: TidParams::local(1, 32, 14, false),
            pmtu: 4096,
            path: Path::default(),
            max_rd_atomic: 16,
            remote_read,
            ..Connection::default()
        };
        let qp = new_qp(0x400, 0, 0, conn, Psn::new(100));
        let mut mrs = Regions::new();
        mrs.add(Region { base: 0, len: u64::MAX, rkey: RKEY });
        let hdr = read_req::Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(Kdeth0::KVER << 30),
                kdeth1: Kdeth1::with_jkey(32),
            },
            reth: reth::Repr { vaddr, rkey, length },
            flow_psn: FlowPsn::from_raw(flow_psn),
            tid_flow_qp,
            verbs_qp: 0x400,
        };
        let mut root = LockToken::root();
        let mut g = qp.s_lock.lock(&mut root);
        let mut sink = Outbox::new();
        for _ in 0..repeat {
            let _ = qp::receive_read_req::<SoftPlatform>(&mut g, Psn::new(psn), &hdr, &payload, &mrs);
            let mut rounds = 0;
            while let Ok(true) = qp::send_responses::<SoftPlatform>(&mut g, &mrs, &mrs, &mut sink, 16) {
                rounds += 1;
                prop_assert!(rounds < 10_000);
            }
        }
        for p in sink.drain() {
            prop_assert!(packet::parse(&p).is_ok(), "the responder sent a malformed packet");
        }
        g.ext.responder.release_all(&mrs);
        prop_assert_eq!((mrs.refs(), mrs.misuses()), (0, 0));
    }
}
