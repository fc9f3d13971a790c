// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Property tests of the engines' packet handling: whatever bytes arrive,
//! parsing never panics; a valid packet with any bytes changed is either
//! refused by the ICRC or parses; and a responder fed arbitrary READ_REQ
//! headers and payloads never panics, never leaks a memory-region
//! reference and only ever answers with well-formed packets.

use std::cell::Cell;

use hfi1_hal::lock_order::LockToken;
use hfi1_hal::{FlowPsn, Kdeth0, Kdeth1, Psn};
use proptest::prelude::*;
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, Parsed, Path};
use tid_read_proto::rc::{Connection, MrTable, PacketSink, SourceData};
use tid_read_proto::responder;
use tid_read_proto::sim::{EnginePlatform, new_qp};
use tid_read_proto::wire::{aeth, kdeth, read_req, reth};

#[derive(Default)]
struct Mrs {
    refs: Cell<i64>,
}

impl MrTable for Mrs {
    fn get(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        (rkey & 1 == 0 && vaddr.checked_add(u64::from(len)).is_some()).then(|| {
            self.refs.set(self.refs.get() + 1);
            0
        })
    }
    fn put(&self, _mr: u32) {
        self.refs.set(self.refs.get() - 1);
    }
}

impl SourceData for Mrs {
    fn read(&self, _vaddr: u64, out: &mut [u8]) -> bool {
        out.fill(0x5A);
        true
    }
}

struct Sink {
    buf: Vec<u8>,
    out: Vec<Vec<u8>>,
}

impl PacketSink for Sink {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }
    fn send(&mut self, len: usize) {
        self.out.push(self.buf[..len].to_vec());
    }
}

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
        rkey in any::<u32>(),
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
        };
        let qp = new_qp(0x400, 0, 0, conn, Psn::new(100));
        let mrs = Mrs::default();
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
        let mut sink = Sink { buf: vec![0; packet::MAX_PACKET], out: Vec::new() };
        for _ in 0..repeat {
            let _ = responder::rcv_read_req::<EnginePlatform>(&mut g, Psn::new(psn), &hdr, &payload, &mrs);
            let mut rounds = 0;
            while let Ok(true) = responder::make_resp::<EnginePlatform>(&mut g, &mrs, &mrs, &mut sink, 16) {
                rounds += 1;
                prop_assert!(rounds < 10_000);
            }
        }
        for p in &sink.out {
            prop_assert!(packet::parse(p).is_ok(), "the responder sent a malformed packet");
        }
        g.ext.resp.release_all(&mrs);
        prop_assert_eq!(mrs.refs.get(), 0);
    }
}
