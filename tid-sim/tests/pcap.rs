// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! `--pcap`: every packet on the fabric lands in the capture as an ERF
//! record of type 29 (OPA 9B), and reading the file back with
//! `tid_read_proto::wire` gives packets that agree with what was sent:
//! each READ_RESP's BTH PSN, verbs PSN and KDETH TID/TIDCTRL/OFFSET/SH are
//! those the READ_REQ that asked for it implies.

use std::collections::HashMap;

use hfi1_hal::consts::{OP_TID_RDMA_READ_REQ, OP_TID_RDMA_READ_RESP, TID_RDMA_JKEY};
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::response_stream::{RespBuilder, RespFlow};
use tid_read_proto::wire::erf;
use tid_read_proto::wire::tid_entries::Entries;
use tid_sim::cli::Options;
use tid_sim::pcap::{PcapWriter, read_all};
use tid_sim::scenario::{self, RunFaults};

fn capture(mtu: u32) {
    let o = Options {
        qps: 3,
        bytes: 3 << 20,
        request: 512 << 10,
        groups: 16,
        mtu,
        seed: 8,
        ..Options::default()
    };
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let rep = scenario::run(&o, RunFaults::default(), Some(&mut w));
    assert!(rep.ok(), "{}", rep.summary());
    let bytes = w.finish().unwrap();
    let recs = read_all(&bytes[..]).unwrap();
    assert_eq!(recs.len() as u64, rep.packets);

    // (tid_flow_qp, verbs PSN) -> (BTH PSN, KDETH word 0, length).
    let mut expected: HashMap<(u32, u32), (u32, u32, u32)> = HashMap::new();
    let mut seen_resp = Vec::new();
    let (mut reqs, mut resps) = (0u64, 0u64);
    let mut last_ts = 0;
    for r in &recs {
        let rec = erf::Record::new_checked(&r.data[..]).unwrap();
        assert_eq!(rec.rtype(), erf::TYPE_OPA_9B);
        assert!(rec.timestamp() >= last_ts, "timestamps never go back");
        last_ts = rec.timestamp();
        let (_, p) = packet::parse(rec.packet()).expect("every captured packet parses");
        match p {
            Parsed::ReadReq { bth, hdr, payload } => {
                assert_eq!(bth.opcode, OP_TID_RDMA_READ_REQ);
                assert_eq!(hdr.kdeth.kdeth1.raw() & 0xFF, u32::from(TID_RDMA_JKEY));
                reqs += 1;
                let entries: Vec<_> = Entries::new_checked(payload).unwrap().iter().collect();
                assert!(!entries.is_empty());
                let flow = RespFlow {
                    entries: &entries,
                    length: hdr.reth.length,
                    pmtu: mtu,
                    spsn: hdr.flow_psn.seq(),
                    generation: hdr.flow_psn.generation(),
                    ib_spsn: bth.psn,
                    jkey: TID_RDMA_JKEY,
                    urg: false,
                };
                for pk in RespBuilder::new(&flow) {
                    let pk = pk.unwrap();
                    let key = (hdr.tid_flow_qp, pk.verbs_psn.get());
                    let val = (pk.bth_psn.raw(), pk.kdeth0.raw(), pk.len);
                    assert!(expected.insert(key, val).is_none(), "PSNs repeat");
                }
            }
            Parsed::ReadResp { bth, hdr, payload } => {
                assert_eq!(bth.opcode, OP_TID_RDMA_READ_RESP);
                resps += 1;
                seen_resp.push((
                    (bth.dest_qp, hdr.verbs_psn.get()),
                    (bth.psn.get(), hdr.kdeth.kdeth0.raw(), payload.len() as u32),
                ));
            }
            Parsed::Ack { .. } => panic!("a clean run sends no ACK/NAK"),
            Parsed::ReadRequest { .. } | Parsed::ReadResponse { .. } => {
                panic!("every READ of this run is a TID READ")
            }
        }
    }
    assert_eq!(reqs, rep.segments);
    assert_eq!(resps as usize, expected.len());
    for (key, got) in seen_resp {
        let want = expected.get(&key).copied();
        // BTH PSN (flow PSN), KDETH word 0 (TID, TIDCTRL, OFFSET, OM, SH)
        // and payload length all as the READ_REQ implies.
        assert_eq!(Some(got), want, "READ_RESP {key:x?}");
    }
}

#[test]
fn capture_4k_mtu_agrees_with_what_was_sent() {
    capture(4096);
}

#[test]
fn capture_8k_mtu_agrees_with_what_was_sent() {
    capture(8192);
}
