// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Scenario: the plain RDMA READ on the wire, as the engines build it for
//! every READ that does not go as a TID READ: an `RDMA_READ_REQUEST` and
//! its `READ_RESPONSE_FIRST`, `MIDDLE` and `LAST`, then a second READ
//! answered by a `READ_RESPONSE_ONLY` with a payload that needs padding,
//! in ERF records of a pcap file. Our parser reads every frame back, and
//! Wireshark's `opa` dissector (through `tshark`) decodes every field to
//! the values it was built from, names each opcode as InfiniBand does,
//! and finds no malformed frame and no expert warning
//! ([`common::capture`] says when `tshark` runs).

mod common;

use std::collections::BTreeMap;

use common::capture::{self, Sent};
use hfi1_hal::Psn;
use tid_read_proto::packet::{self, Parsed, Path};
use tid_read_proto::plain_read::{self, RespKind};
use tid_read_proto::wire::{aeth, reth};

const REQ_LID: u16 = 0x0011;
const RESP_LID: u16 = 0x0022;
const REQ_VQP: u32 = 0x00_0123;
const RESP_VQP: u32 = 0x00_0456;
const PMTU: usize = 4096;

fn common(
    bytes: &[u8],
    dlid: u16,
    slid: u16,
    dest_qp: u32,
    psn: u32,
    op: u8,
) -> BTreeMap<&'static str, u64> {
    let icrc = u32::from_be_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
    BTreeMap::from([
        ("opa.9b.dlid", u64::from(dlid)),
        ("opa.9b.slid", u64::from(slid)),
        ("opa.9b.icrc", u64::from(icrc)),
        ("opa.bth.opcode", u64::from(op)),
        ("opa.bth.destqp", u64::from(dest_qp)),
        ("opa.bth.psn", u64::from(psn)),
    ])
}

fn request(psn: u32, r: reth::Repr) -> Sent {
    let mut buf = vec![0u8; packet::MAX_PACKET];
    let path = Path {
        dlid: RESP_LID,
        slid: REQ_LID,
    };
    let n = plain_read::write_request(&mut buf, path, RESP_VQP, Psn::new(psn), &r).unwrap();
    buf.truncate(n);
    let mut want = common(
        &buf,
        RESP_LID,
        REQ_LID,
        RESP_VQP,
        psn,
        plain_read::OP_READ_REQUEST,
    );
    want.extend([
        ("opa.bth.a", 1),
        ("opa.reth.va", r.vaddr),
        ("opa.reth.r_key", u64::from(r.rkey)),
        ("opa.reth.dmalen", u64::from(r.length)),
    ]);
    Sent {
        bytes: buf,
        want,
        name: Some("RC RDMA Read Request (0x0c)"),
    }
}

fn response(psn: u32, kind: RespKind, msn: u32, data: &[u8]) -> Sent {
    let mut buf = vec![0u8; packet::MAX_PACKET];
    let path = Path {
        dlid: REQ_LID,
        slid: RESP_LID,
    };
    let a = aeth::Repr {
        syndrome: 0x1F,
        msn,
    };
    let n = plain_read::write_response(
        &mut buf,
        path,
        REQ_VQP,
        Psn::new(psn),
        kind,
        a,
        data.len(),
        |o| {
            o.copy_from_slice(data);
            true
        },
    )
    .unwrap();
    buf.truncate(n);
    let mut want = common(&buf, REQ_LID, RESP_LID, REQ_VQP, psn, kind.opcode());
    want.insert("opa.bth.padcnt", (data.len().wrapping_neg() & 3) as u64);
    if kind.has_aeth() {
        want.extend([
            ("opa.aeth.syndrome", u64::from(a.syndrome)),
            ("opa.aeth.msn", u64::from(a.msn)),
        ]);
    }
    let name = match kind {
        RespKind::First => "RC RDMA Read Response First (0x0d)",
        RespKind::Middle => "RC RDMA Read Response Middle (0x0e)",
        RespKind::Last => "RC RDMA Read Response Last (0x0f)",
        RespKind::Only => "RC RDMA Read Response Only (0x10)",
    };
    Sent {
        bytes: buf,
        want,
        name: Some(name),
    }
}

/// Two READs: 3 MTUs less 100 bytes (FIRST, MIDDLE, LAST) and 1001 bytes
/// (ONLY, three bytes of pad).
fn frames() -> Vec<Sent> {
    let data: Vec<u8> = (0..3 * PMTU).map(|i| (i * 7 % 253) as u8).collect();
    let len = 3 * PMTU - 100;
    vec![
        request(
            0x10,
            reth::Repr {
                vaddr: 0x7F00_4000_0000,
                rkey: 0xBEEF_0001,
                length: len as u32,
            },
        ),
        response(0x10, RespKind::First, 1, &data[..PMTU]),
        response(0x11, RespKind::Middle, 1, &data[PMTU..2 * PMTU]),
        response(0x12, RespKind::Last, 1, &data[2 * PMTU..len]),
        request(
            0x13,
            reth::Repr {
                vaddr: 0x7F00_4000_3000,
                rkey: 0xBEEF_0001,
                length: 1001,
            },
        ),
        response(0x13, RespKind::Only, 2, &data[..1001]),
    ]
}

fn capture() -> (Vec<Sent>, Vec<u8>) {
    let frames = frames();
    let pcap = capture::pcap(&frames);
    (frames, pcap)
}

#[test]
fn plain_read_frames_parse_back() {
    for s in frames() {
        let (lrh, p) = packet::parse(&s.bytes).unwrap();
        assert_eq!(u64::from(lrh.dlid), s.want["opa.9b.dlid"]);
        match p {
            Parsed::ReadRequest { bth, reth } => {
                assert_eq!(u64::from(bth.psn.get()), s.want["opa.bth.psn"]);
                assert_eq!(reth.vaddr, s.want["opa.reth.va"]);
                assert_eq!(u64::from(reth.length), s.want["opa.reth.dmalen"]);
            }
            Parsed::ReadResponse {
                bth,
                kind,
                aeth,
                payload,
            } => {
                assert_eq!(u64::from(kind.opcode()), s.want["opa.bth.opcode"]);
                assert_eq!(u64::from(bth.psn.get()), s.want["opa.bth.psn"]);
                assert_eq!(aeth.is_some(), kind.has_aeth());
                assert!(!payload.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn tshark_decodes_every_plain_read_frame_as_built() {
    let (frames, pcap) = capture();
    capture::check_with_tshark(&frames, &pcap, "plain-read-capture");
}
