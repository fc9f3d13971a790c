// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Scenario: a responder validates a READ_REQ, builds its READ_RESP
//! packets, and each goes on the wire as LRH + BTH + READ_RESP header +
//! data + ICRC inside an ERF record; the receiver peels the layers off
//! again and finds every field where the builder put it.

use hfi1_hal::consts::{OP_TID_RDMA_READ_RESP, PAGE_SIZE};
use hfi1_hal::{FlowIndex, Generation, Psn, TidCtrl, TidEntry};
use tid_read_proto::admission::{Accepted, QpView, Request, validate};
use tid_read_proto::response_stream::{RespBuilder, RespPacket};
use tid_read_proto::segment_request::{ReadReq, ReadReqFlow};
use tid_read_proto::wire::{aeth, bth, erf, kdeth, lrh, read_resp};

/// The requester's 24 KiB segment in three TID entries, its READ_REQ
/// parsed back and validated at the responder.
fn accepted_request() -> ([TidEntry; 3], Accepted) {
    let entries = [
        TidEntry::new(4, TidCtrl::Pair, 4).unwrap(),
        TidEntry::new(6, TidCtrl::Even, 1).unwrap(),
        TidEntry::new(6, TidCtrl::Odd, 1).unwrap(),
    ];
    let req = ReadReq::build(&ReadReqFlow {
        entries: &entries,
        generation: Generation::masked(0x321),
        spsn: 40,
        pkt: 0,
        sent: 0,
        ib_spsn: Psn::new(1000),
        flow: FlowIndex::new(9).unwrap(),
        local_qp: 0x80_0005,
        ctxt: 5,
        remote_qp: 0x80_0002,
        remote_jkey: 32,
        remote_verbs_qp: 0x44,
        remote_addr: 0x20_0000,
        rkey: 7,
        cur_seg: 0,
        seg_len: 24 * 1024,
        len: 24 * 1024,
    });
    // Header and entries: never empty, as its length says.
    assert!(!req.is_empty());
    let mut body = vec![0u8; req.len()];
    assert_eq!(req.emit(&mut body).unwrap(), req.len());
    let p = tid_read_proto::wire::read_req::Packet::new_checked(&body[..]).unwrap();
    let header = tid_read_proto::wire::read_req::Repr::parse(&p).unwrap();
    let qp = QpView {
        remote_read: true,
        max_len: 256 * 1024,
        pmtu: 4096,
        expected_psn: Psn::new(1000),
        ack_queue_full: false,
    };
    let acc = validate(
        &qp,
        &Request {
            psn: req.bth_psn,
            header,
            payload: p.payload(),
        },
        |_, len, rkey| len == 24 * 1024 && rkey == 7,
    )
    .unwrap();
    (entries, acc)
}

/// One READ_RESP as it goes on the wire: LRH + BTH + READ_RESP header +
/// its slice of `data` + ICRC.
fn frame(pkt: &RespPacket, acc: &Accepted, data: &[u8]) -> Vec<u8> {
    let payload_len = pkt.len as usize;
    let total = lrh::HEADER_LEN + bth::HEADER_LEN + read_resp::HEADER_LEN + payload_len + 4;
    let mut frame = vec![0u8; total];
    let mut l = lrh::Packet::new_unchecked(&mut frame[..]);
    lrh::Repr {
        sc: 0,
        lver: 0,
        sl: 0,
        lnh: lrh::LNH_BTH,
        dlid: 1,
        slid: 2,
        packet_len: total,
    }
    .emit(&mut l)
    .unwrap();
    let mut b = bth::Packet::new_unchecked(l.payload_mut());
    bth::Repr {
        opcode: OP_TID_RDMA_READ_RESP,
        pkey: 0xFFFF,
        dest_qp: acc.tid_qpn & 0xFF_FFFF,
        psn: pkt.bth_psn.as_psn(),
        ..Default::default()
    }
    .emit(&mut b)
    .unwrap();
    let mut r = read_resp::Packet::new_unchecked(b.payload_mut());
    read_resp::Repr {
        kdeth: kdeth::Repr {
            kdeth0: pkt.kdeth0,
            kdeth1: pkt.kdeth1,
        },
        aeth: aeth::Repr {
            syndrome: 0x1F,
            msn: 1,
        },
        verbs_psn: pkt.verbs_psn,
        verbs_qp: 0x44,
    }
    .emit(&mut r)
    .unwrap();
    let off = pkt.data_offset as usize;
    r.payload_mut()
        .copy_from_slice(&data[off..off + payload_len]);
    l.fill_icrc();
    frame
}

/// The receiver peels packet `i`'s ERF record: ERF -> LRH (ICRC
/// checked) -> BTH -> READ_RESP, and finds every field and byte where
/// the builder put them.
fn check_received(rec: &[u8], i: usize, pkt: &RespPacket, acc: &Accepted, data: &[u8]) {
    let rec = erf::Record::new_checked(rec).unwrap();
    erf::Repr::parse(&rec).unwrap();
    let l = lrh::Packet::new_checked(rec.packet()).unwrap();
    assert!(l.verify_icrc());
    let b = bth::Packet::new_checked(l.payload()).unwrap();
    let br = bth::Repr::parse(&b).unwrap();
    assert_eq!(br.opcode, OP_TID_RDMA_READ_RESP);
    assert_eq!(br.psn.get() >> 11, 0x321);
    let r = read_resp::Packet::new_checked(b.payload()).unwrap();
    let rr = read_resp::Repr::parse(&r).unwrap();
    assert_eq!(rr.verbs_psn, Psn::new(1000 + i as u32));
    let k = rr.kdeth.kdeth0;
    let entry = acc
        .entries()
        .iter()
        .find(|e| e.idx() == k.tid() && e.ctrl_bits() == k.tidctrl())
        .unwrap();
    assert!(k.byte_offset() < entry.len() * PAGE_SIZE);
    let off = pkt.data_offset as usize;
    assert_eq!(r.payload(), &data[off..off + pkt.len as usize]);
    assert_eq!(pkt.last, !k.sh());
}

#[test]
fn read_resp_frames_survive_the_wire() {
    let (entries, acc) = accepted_request();
    assert_eq!(acc.entries(), &entries);
    assert_eq!((acc.flow.get(), acc.ctxt, acc.spsn), (9, 5, 40));

    let data: Vec<u8> = (0..24 * 1024).map(|i| (i % 251) as u8).collect();
    let mut seen = 0usize;
    // A pcap file of the frames (ERF link type), written when
    // HFI1_PCAP_OUT names a path: `tshark -r <path> -V` decodes it with the
    // `erf` and `opa` dissectors.
    let mut pcap = erf::pcap_file_header(65535).to_vec();
    for (i, pkt) in RespBuilder::new(&acc.resp_flow(32, false, 4096)).enumerate() {
        let pkt = pkt.unwrap();
        let frame = frame(&pkt, &acc, &data);
        let mut rec = vec![0u8; erf::HEADER_LEN + frame.len()];
        let ts = erf::timestamp_from_nanos(i as u64);
        let n = erf::encode(ts, 0, &frame, &mut rec).unwrap();
        pcap.extend_from_slice(&erf::pcap_record_header(ts, n as u32));
        pcap.extend_from_slice(&rec[..n]);
        check_received(&rec[..n], i, &pkt, &acc, &data);
        seen += pkt.len as usize;
    }
    assert_eq!(seen, data.len());
    if let Some(path) = std::env::var_os("HFI1_PCAP_OUT") {
        std::fs::write(path, &pcap).unwrap();
    }
}
