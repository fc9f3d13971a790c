// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Scenario: one TID RDMA WRITE and one READ on the wire, every TID RDMA
//! opcode (0xE0..=0xE7) at least once, as LRH + BTH + header + payload +
//! ICRC frames in ERF records of a pcap file. Our own parsers read every
//! frame back to the values it was built from, and Wireshark's `opa`
//! dissector (through `tshark`) decodes every field to the same values,
//! with no malformed frame and no expert warning ([`common::capture`]
//! says when `tshark` runs).

mod common;

use std::collections::BTreeMap;

use common::capture::{self, Sent};
use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_READ_REQ, OP_TID_RDMA_READ_RESP, OP_TID_RDMA_RESYNC,
    OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST, OP_TID_RDMA_WRITE_REQ,
    OP_TID_RDMA_WRITE_RESP,
};
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Psn, TidCtrl, TidEntry};
use tid_read_proto::response_stream::{RespBuilder, RespFlow};
use tid_read_proto::segment_request::{ReadReq, ReadReqFlow};
use tid_read_proto::wire::aeth::NakCode;
use tid_read_proto::wire::tid_ack::{AckFields, AckKind};
use tid_read_proto::wire::tid_header::BthFields;
use tid_read_proto::wire::write_data::{DataBuilder, DataFlow};
use tid_read_proto::wire::{
    aeth, frame, kdeth, lrh, read_req, read_resp, resync, tid_ack, tid_entries, write_data,
    write_req, write_resp,
};

const PKEY: u16 = 0x8001;
const REQ_LID: u16 = 0x0011;
const RESP_LID: u16 = 0x0022;
/// KDETH QPNs (OPFN `qp`) and verbs QPs of the two sides.
const REQ_KQP: u32 = 0x80_0005;
const RESP_KQP: u32 = 0x80_0009;
const REQ_VQP: u32 = 0x00_0123;
const RESP_VQP: u32 = 0x00_0456;
const JKEY: u16 = 32;
const PMTU: u32 = 4096;

/// Builds one frame and records its expected fields from the same values.
fn sent(dlid: u16, slid: u16, b: &BthFields, k: &kdeth::Repr, body: &[&[u8]]) -> Sent {
    let l = lrh::Repr {
        lnh: lrh::LNH_BTH,
        sl: 3,
        dlid,
        slid,
        ..Default::default()
    };
    let body_len: usize = body.iter().map(|b| b.len()).sum();
    let mut bytes = vec![0u8; frame::frame_len(body_len)];
    let n = frame::emit(&l, &b.to_repr(PKEY), body, &mut bytes).unwrap();
    assert_eq!(n, bytes.len());
    assert!(lrh::Packet::new_checked(&bytes[..]).unwrap().verify_icrc());
    // Wireshark shows the last four bytes as one big-endian word (the
    // ICRC goes on the wire least significant byte first).
    let icrc = u32::from_be_bytes(bytes[n - 4..].try_into().unwrap());
    let k0 = k.kdeth0;
    let want = BTreeMap::from([
        ("opa.9b.dlid", u64::from(dlid)),
        ("opa.9b.slid", u64::from(slid)),
        ("opa.9b.icrc", u64::from(icrc)),
        ("opa.bth.opcode", u64::from(b.opcode)),
        ("opa.bth.p_key", u64::from(PKEY)),
        ("opa.bth.destqp", u64::from(b.dest_qp & 0xFF_FFFF)),
        ("opa.bth.psn", u64::from(b.psn.get())),
        ("opa.bth.a", u64::from(b.ack_req)),
        ("opa.kdeth.kver", u64::from(k0.kver())),
        ("opa.kdeth.sh", u64::from(k0.sh())),
        ("opa.kdeth.intr", u64::from(k0.intr())),
        ("opa.kdeth.tidctrl", u64::from(k0.tidctrl())),
        ("opa.kdeth.tid", u64::from(k0.tid())),
        ("opa.kdeth.offsetmode", u64::from(k0.om())),
        ("opa.kdeth.offset", u64::from(k0.offset())),
        ("opa.kdeth.j_key", u64::from(k.kdeth1.raw() & 0xFFFF)),
    ]);
    Sent {
        bytes,
        want,
        name: None,
    }
}

fn with(mut s: Sent, more: &[(&'static str, u64)]) -> Sent {
    s.want.extend(more.iter().copied());
    s
}

fn header<const N: usize>(emit: impl FnOnce(&mut [u8])) -> [u8; N] {
    let mut h = [0u8; N];
    emit(&mut h);
    h
}

fn aeth_fields(a: &aeth::Repr) -> [(&'static str, u64); 2] {
    [
        ("opa.aeth.syndrome", u64::from(a.syndrome)),
        ("opa.aeth.msn", u64::from(a.msn)),
    ]
}

/// The WRITE side: request, one grant per segment, the data, a RESYNC
/// and the three kinds of ACK.
fn write_frames(data: &[u8]) -> Vec<Sent> {
    let mut out = vec![write_req_frame()];
    let entries = [
        [
            TidEntry::new(4, TidCtrl::Pair, 2).unwrap(),
            TidEntry::new(6, TidCtrl::Even, 1).unwrap(),
        ],
        [
            TidEntry::new(9, TidCtrl::Odd, 1).unwrap(),
            TidEntry::new(10, TidCtrl::Pair, 2).unwrap(),
        ],
    ];
    for (seg, seg_entries) in entries.iter().enumerate() {
        grant_and_data(&mut out, seg, seg_entries, data);
    }
    resync_and_acks(&mut out);
    out
}

/// The requester's WRITE_REQ for the whole 24 KiB.
fn write_req_frame() -> Sent {
    let req = write_req::build(&write_req::WriteReqFields {
        remote_qp: RESP_KQP,
        remote_jkey: JKEY,
        remote_verbs_qp: RESP_VQP,
        remote_addr: 0x7F00_4000_0000,
        rkey: 0xBEEF_0001,
        wqe_length: 2 * 12288,
        remaining: 2 * 12288,
        psn: Psn::new(0x100),
    });
    let h = header::<36>(|b| {
        req.header
            .emit(&mut write_req::Packet::new_unchecked(b))
            .unwrap()
    });
    let r = req.header.reth;
    with(
        sent(RESP_LID, REQ_LID, &req.bth, &req.header.kdeth, &[&h]),
        &[
            ("opa.reth.va", r.vaddr),
            ("opa.reth.r_key", u64::from(r.rkey)),
            ("opa.reth.dmalen", u64::from(r.length)),
            ("opa.tidrdma.verbsqp", u64::from(RESP_VQP)),
        ],
    )
}

/// Segment `seg`'s WRITE_RESP, then the requester's WRITE_DATA for it,
/// built from the WRITE_RESP as received.
fn grant_and_data(out: &mut Vec<Sent>, seg: usize, seg_entries: &[TidEntry], data: &[u8]) {
    let flow = FlowIndex::new(7 + seg as u32).unwrap();
    let generation = Generation::masked(0x1_2340 + seg as u32);
    let grant = write_resp::build(&write_resp::WriteRespFields {
        remote_qp: REQ_KQP,
        remote_jkey: JKEY,
        remote_verbs_qp: REQ_VQP,
        aeth: aeth::Repr {
            syndrome: 0x1F,
            msn: 0x20 + seg as u32,
        },
        generation,
        spsn: 0x7FE,
        local_qp: RESP_KQP,
        flow,
        ctxt: 9,
        ib_psn: Psn::new(0x100 + seg as u32),
    });
    let h = header::<36>(|b| {
        grant
            .header
            .emit(&mut write_resp::Packet::new_unchecked(b))
            .unwrap()
    });
    let mut ents = vec![0u8; tid_entries::payload_len(2)];
    tid_entries::emit(seg_entries, &mut ents).unwrap();
    let g = grant.header;
    let mut more = vec![
        ("opa.tidrdma.tidflowpsn", u64::from(g.flow_psn.raw())),
        ("opa.tidrdma.tidflowqp", u64::from(g.tid_flow_qp)),
        ("opa.tidrdma.verbsqp", u64::from(REQ_VQP)),
    ];
    more.extend(aeth_fields(&g.aeth));
    out.push(with(
        sent(REQ_LID, RESP_LID, &grant.bth, &g.kdeth, &[&h, &ents]),
        &more,
    ));

    // The requester's data for the grant, parsed back from the frame
    // just built, as the receive path would.
    let f = frame::parse(&out.last().unwrap().bytes).unwrap();
    let p = write_resp::Packet::new_checked(f.body).unwrap();
    let r = write_resp::Repr::parse(&p).unwrap();
    assert_eq!(r, g);
    let got: Vec<_> = p.tid_entries().iter().collect();
    let data_flow = DataFlow {
        entries: &got,
        length: 12288,
        pmtu: PMTU,
        spsn: r.flow_psn.seq(),
        generation: r.flow_psn.generation(),
        tid_qpn: r.tid_flow_qp,
        jkey: JKEY,
        urg: true,
        verbs_qp: RESP_VQP,
        last_segment: seg == 1,
    };
    for pkt in DataBuilder::new(&data_flow) {
        let pkt = pkt.unwrap();
        let h = header::<36>(|b| {
            pkt.header
                .emit(&mut write_data::Packet::new_unchecked(b))
                .unwrap()
        });
        let at = seg * 12288 + pkt.data_offset as usize;
        let payload = &data[at..at + pkt.len as usize];
        out.push(with(
            sent(
                RESP_LID,
                REQ_LID,
                &pkt.bth,
                &pkt.header.kdeth,
                &[&h, payload],
            ),
            &[("opa.tidrdma.verbsqp", u64::from(RESP_VQP))],
        ));
    }
}

/// A RESYNC and the responder's ACK, NAK and RESYNC answer.
fn resync_and_acks(out: &mut Vec<Sent>) {
    let rs = resync::build(&resync::ResyncFields {
        remote_qp: RESP_KQP,
        remote_jkey: JKEY,
        remote_verbs_qp: RESP_VQP,
        flow_generation: Generation::masked(0x1_2341),
    });
    let h = header::<36>(|b| {
        rs.header
            .emit(&mut resync::Packet::new_unchecked(b))
            .unwrap()
    });
    out.push(with(
        sent(RESP_LID, REQ_LID, &rs.bth, &rs.header.kdeth, &[&h]),
        &[("opa.tidrdma.verbsqp", u64::from(RESP_VQP))],
    ));
    let flow_g = Generation::masked(0x1_2341);
    let kinds = [
        AckKind::Segment {
            last: FlowPsn::new(flow_g, 1),
        },
        AckKind::Nak {
            expected: FlowPsn::new(flow_g, 0x7FF),
        },
        AckKind::Resync {
            generation: Generation::masked(0x1_2342),
            saved: FlowPsn::new(flow_g, 1),
        },
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        let nak = matches!(kind, AckKind::Nak { .. });
        let ack = tid_ack::build(&AckFields {
            remote_qp: REQ_KQP,
            remote_jkey: JKEY,
            remote_verbs_qp: REQ_VQP,
            aeth: aeth::Repr {
                syndrome: if nak {
                    NakCode::PsnError.syndrome()
                } else {
                    0x1F
                },
                msn: 0x30 + i as u32,
            },
            local_qp: RESP_KQP,
            flow: FlowIndex::new(8).unwrap(),
            ctxt: 9,
            resp_ib_psn: Psn::new(0x101),
            kind,
        });
        let h = header::<36>(|b| {
            ack.header
                .emit(&mut tid_ack::Packet::new_unchecked(b))
                .unwrap()
        });
        let a = ack.header;
        let mut more = vec![
            ("opa.tidrdma.tidflowpsn", u64::from(a.resync_psn.raw())),
            ("opa.tidrdma.verbspsn", u64::from(a.verbs_psn.get())),
            ("opa.tidrdma.tidflowqp", u64::from(a.tid_flow_qp)),
            ("opa.tidrdma.verbsqp", u64::from(REQ_VQP)),
        ];
        more.extend(aeth_fields(&a.aeth));
        out.push(with(
            sent(REQ_LID, RESP_LID, &ack.bth, &a.kdeth, &[&h]),
            &more,
        ));
    }
}

/// The READ side, from the existing builders: one READ_REQ, its responses.
fn read_frames(data: &[u8]) -> Vec<Sent> {
    let entries = [TidEntry::new(2, TidCtrl::Pair, 2).unwrap()];
    let req = ReadReq::build(&ReadReqFlow {
        entries: &entries,
        generation: Generation::masked(0x55),
        spsn: 3,
        pkt: 0,
        sent: 0,
        ib_spsn: Psn::new(0x200),
        flow: FlowIndex::new(2).unwrap(),
        local_qp: REQ_KQP,
        ctxt: 5,
        remote_qp: RESP_KQP,
        remote_jkey: JKEY,
        remote_verbs_qp: RESP_VQP,
        remote_addr: 0x10_0000,
        rkey: 0x77,
        cur_seg: 0,
        seg_len: 8192,
        len: 8192,
    });
    let mut body = vec![0u8; req.len()];
    req.emit(&mut body).unwrap();
    let b = BthFields {
        opcode: OP_TID_RDMA_READ_REQ,
        dest_qp: req.bth_dest_qp,
        psn: req.bth_psn,
        ack_req: true,
    };
    let h = req.header;
    let mut out = vec![with(
        sent(RESP_LID, REQ_LID, &b, &h.kdeth, &[&body]),
        &[
            ("opa.reth.va", h.reth.vaddr),
            ("opa.tidrdma.tidflowpsn", u64::from(h.flow_psn.raw())),
            ("opa.tidrdma.tidflowqp", u64::from(h.tid_flow_qp)),
            ("opa.tidrdma.verbsqp", u64::from(RESP_VQP)),
        ],
    )];
    let flow = RespFlow {
        entries: &entries,
        length: 8192,
        pmtu: PMTU,
        spsn: 3,
        generation: Generation::masked(0x55),
        ib_spsn: Psn::new(0x200),
        jkey: JKEY,
        urg: false,
    };
    for pkt in RespBuilder::new(&flow) {
        let pkt = pkt.unwrap();
        let r = read_resp::Repr {
            kdeth: kdeth::Repr {
                kdeth0: pkt.kdeth0,
                kdeth1: pkt.kdeth1,
            },
            aeth: aeth::Repr {
                syndrome: 0x1F,
                msn: 0x40,
            },
            verbs_psn: pkt.verbs_psn,
            verbs_qp: REQ_VQP,
        };
        let h = header::<36>(|b| r.emit(&mut read_resp::Packet::new_unchecked(b)).unwrap());
        let b = BthFields {
            opcode: OP_TID_RDMA_READ_RESP,
            dest_qp: req.header.tid_flow_qp,
            psn: pkt.bth_psn.as_psn(),
            ack_req: false,
        };
        let at = pkt.data_offset as usize;
        out.push(with(
            sent(
                REQ_LID,
                RESP_LID,
                &b,
                &r.kdeth,
                &[&h, &data[at..at + pkt.len as usize]],
            ),
            &[("opa.tidrdma.verbspsn", u64::from(r.verbs_psn.get()))],
        ));
    }
    out
}

/// Reads a frame back with our own parsers and checks the header fields
/// agree with what `tshark` must show.
fn parse_back(s: &Sent) {
    let f = frame::parse(&s.bytes).unwrap();
    let w = |k: &str| s.want[k];
    assert_eq!(u64::from(f.bth.opcode), w("opa.bth.opcode"));
    assert_eq!(u64::from(f.bth.psn.get()), w("opa.bth.psn"));
    assert_eq!(u64::from(f.bth.dest_qp), w("opa.bth.destqp"));
    let k = kdeth::Repr::parse(&kdeth::Packet::new_checked(f.body).unwrap()).unwrap();
    assert_eq!(u64::from(k.kdeth0.offset()), w("opa.kdeth.offset"));
    assert_eq!(u64::from(k.kdeth0.tid()), w("opa.kdeth.tid"));
    let body = f.body;
    let vqp = s.want.get("opa.tidrdma.verbsqp").copied();
    match f.bth.opcode {
        OP_TID_RDMA_WRITE_REQ => {
            let r = write_req::Repr::parse(&write_req::Packet::new_checked(body).unwrap()).unwrap();
            assert_eq!(r.reth.vaddr, w("opa.reth.va"));
            assert_eq!(Some(u64::from(r.verbs_qp)), vqp);
            assert_eq!(body.len(), write_req::HEADER_LEN);
        }
        OP_TID_RDMA_WRITE_RESP => {
            let p = write_resp::Packet::new_checked(body).unwrap();
            let r = write_resp::Repr::parse(&p).unwrap();
            assert_eq!(u64::from(r.flow_psn.raw()), w("opa.tidrdma.tidflowpsn"));
            assert_eq!(p.tid_entries().len(), 2);
        }
        OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST | OP_TID_RDMA_RESYNC => {
            let r =
                write_data::Repr::parse(&write_data::Packet::new_checked(body).unwrap()).unwrap();
            assert_eq!(Some(u64::from(r.verbs_qp)), vqp);
            if f.bth.opcode == OP_TID_RDMA_RESYNC {
                assert!(resync::is_resync_psn(f.bth.psn.get()));
                assert_eq!(body.len(), resync::HEADER_LEN);
            }
        }
        OP_TID_RDMA_ACK => {
            let r = tid_ack::Repr::parse(&tid_ack::Packet::new_checked(body).unwrap()).unwrap();
            assert_eq!(u64::from(r.verbs_psn.get()), w("opa.tidrdma.verbspsn"));
            assert_eq!(u64::from(r.aeth.syndrome), w("opa.aeth.syndrome"));
        }
        OP_TID_RDMA_READ_REQ => {
            let r = read_req::Repr::parse(&read_req::Packet::new_checked(body).unwrap()).unwrap();
            assert_eq!(u64::from(r.tid_flow_qp), w("opa.tidrdma.tidflowqp"));
        }
        OP_TID_RDMA_READ_RESP => {
            let r = read_resp::Repr::parse(&read_resp::Packet::new_checked(body).unwrap()).unwrap();
            assert_eq!(u64::from(r.verbs_psn.get()), w("opa.tidrdma.verbspsn"));
        }
        op => panic!("unexpected opcode {op:#x}"),
    }
}

fn capture() -> (Vec<Sent>, Vec<u8>) {
    let data: Vec<u8> = (0..2 * 12288).map(|i| (i * 7 % 253) as u8).collect();
    let mut frames = write_frames(&data);
    frames.extend(read_frames(&data));
    let pcap = capture::pcap(&frames);
    (frames, pcap)
}

#[test]
fn every_tid_opcode_is_in_the_capture_and_parses_back() {
    let (frames, _) = capture();
    let mut ops: Vec<u8> = frames
        .iter()
        .map(|s| s.want["opa.bth.opcode"] as u8)
        .collect();
    ops.sort_unstable();
    ops.dedup();
    assert_eq!(ops, (0xE0..=0xE7).collect::<Vec<u8>>());
    assert_eq!(
        frames
            .iter()
            .filter(|s| s.want["opa.bth.opcode"] == u64::from(OP_TID_RDMA_ACK))
            .count(),
        3
    );
    frames.iter().for_each(parse_back);
}

#[test]
fn tshark_decodes_every_frame_as_built() {
    let (frames, pcap) = capture();
    capture::check_with_tshark(&frames, &pcap, "tid-write-capture");
}
