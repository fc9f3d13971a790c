// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Properties of the TID RDMA WRITE wire formats: every header survives
//! parse -> emit byte for byte except its reserved words (which come back
//! zero), valid `Repr`s survive emit -> parse, the WRITE_DATA stream of a
//! segment covers it exactly, and OPFN's `max_write` reaches the plans of
//! both sides.

use hfi1_hal::{FlowIndex, FlowPsn, Generation, Kdeth0, Kdeth1, Psn, TidCtrl, TidEntry};
use proptest::prelude::*;
use tid_read_proto::opfn::{Negotiation, TidParams, with_capcode};
use tid_read_proto::qualify::{Path, WrOpcode};
use tid_read_proto::qualify_write::{
    WriteWorkRequest, may_allocate_segment, plan_write_req, qualify_write,
};
use tid_read_proto::response_stream::BuildError;
use tid_read_proto::wire::write_data::{DataBuilder, DataFlow};
use tid_read_proto::wire::{
    aeth, kdeth, reth, tid_ack, tid_header, write_data, write_req, write_resp,
};

/// Parses `bytes` with module `$m`; when that succeeds, emits the `Repr`
/// into a copy whose header is filled with 0xA5 and checks the copy equals
/// the input with the reserved byte range `$rsv` zeroed.
macro_rules! round_trip {
    ($m:ident, $rsv:expr, $bytes:expr) => {{
        let bytes: &[u8] = $bytes;
        if let Ok(p) = $m::Packet::new_checked(bytes) {
            if let Ok(r) = $m::Repr::parse(&p) {
                let mut out = bytes.to_vec();
                out[..$m::HEADER_LEN].fill(0xA5);
                r.emit(&mut $m::Packet::new_unchecked(&mut out[..]))
                    .unwrap();
                let mut want = bytes.to_vec();
                want[$rsv].fill(0);
                prop_assert_eq!(out, want);
                prop_assert_eq!(
                    $m::Packet::new_checked(bytes).unwrap().reserved_is_zero(),
                    bytes[$rsv].iter().all(|&b| b == 0)
                );
            }
        } else {
            prop_assert!(bytes.len() < $m::HEADER_LEN);
        }
    }};
}

fn kdeth_repr(k0: u32, k1: u32) -> kdeth::Repr {
    kdeth::Repr {
        kdeth0: Kdeth0::from_raw(k0),
        kdeth1: Kdeth1::from_raw(k1),
    }
}

proptest! {
    #[test]
    fn parse_emit_keeps_all_but_reserved(bytes in proptest::collection::vec(any::<u8>(), 0..60)) {
        round_trip!(write_req, 24..32, &bytes);
        round_trip!(write_resp, 12..24, &bytes);
        round_trip!(write_data, 8..32, &bytes);
        round_trip!(tid_ack, 12..20, &bytes);
        if bytes.len() >= tid_header::HEADER_LEN {
            let want = u32::from_be_bytes([bytes[32], bytes[33], bytes[34], bytes[35]]);
            prop_assert_eq!(tid_header::verbs_qp_of(&bytes), Some(want & 0xFF_FFFF));
        }
    }

    #[test]
    fn valid_headers_come_back(
        k0 in any::<u32>(), k1 in any::<u32>(), vaddr in any::<u64>(), rkey in any::<u32>(),
        length in any::<u32>(), qp in any::<u32>(), fqp in any::<u32>(),
        psn in 0u32..1 << 31, psn2 in 0u32..1 << 31, syndrome in any::<u8>(), msn in 0u32..1 << 24,
    ) {
        let kd = kdeth_repr(k0, k1);
        let a = aeth::Repr { syndrome, msn };
        let mut buf = [0u8; 36];

        let r = write_req::Repr { kdeth: kd, reth: reth::Repr { vaddr, rkey, length }, verbs_qp: qp };
        r.emit(&mut write_req::Packet::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(write_req::Repr::parse(&write_req::Packet::new_checked(&buf[..]).unwrap()), Ok(r));

        let r = write_resp::Repr { kdeth: kd, aeth: a, flow_psn: FlowPsn::from_raw(psn), tid_flow_qp: fqp, verbs_qp: qp };
        r.emit(&mut write_resp::Packet::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(write_resp::Repr::parse(&write_resp::Packet::new_checked(&buf[..]).unwrap()), Ok(r));

        let r = write_data::Repr { kdeth: kd, verbs_qp: qp };
        r.emit(&mut write_data::Packet::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(write_data::Repr::parse(&write_data::Packet::new_checked(&buf[..]).unwrap()), Ok(r));

        let r = tid_ack::Repr {
            kdeth: kd, aeth: a, resync_psn: FlowPsn::from_raw(psn), verbs_psn: Psn::new(psn2),
            tid_flow_qp: fqp, verbs_qp: qp,
        };
        r.emit(&mut tid_ack::Packet::new_unchecked(&mut buf[..])).unwrap();
        prop_assert_eq!(tid_ack::Repr::parse(&tid_ack::Packet::new_checked(&buf[..]).unwrap()), Ok(r));
        prop_assert_eq!(tid_header::verbs_qp_of(&buf), Some(qp & 0xFF_FFFF));
    }

    #[test]
    fn data_stream_covers_the_segment(
        lens in proptest::collection::vec(1u32..=16, 1..10),
        pmtu in prop_oneof![Just(4096u32), Just(8192u32)],
        short_by in 0u32..3,
        spsn in 0u32..2048, generation in 0u32..0xF_FFFF,
        last_segment in any::<bool>(), urg in any::<bool>(),
    ) {
        let entries: Vec<_> = lens.iter().enumerate()
            .map(|(i, &l)| TidEntry::new(i as u32, TidCtrl::Pair, l).unwrap())
            .collect();
        let covered: u32 = lens.iter().sum::<u32>() * 4096;
        // The segment's length is what the entries cover, or less by whole
        // pages (the last entry then holds more than the segment).
        let length = covered.saturating_sub(short_by * 4096).max(4096);
        let flow = DataFlow {
            entries: &entries, length, pmtu, spsn,
            generation: Generation::masked(generation), tid_qpn: 0x80_1805,
            jkey: 32, urg, verbs_qp: 0x99, last_segment,
        };
        let pkts: Vec<_> = DataBuilder::new(&flow).collect::<Result<_, BuildError>>().unwrap();
        let mut at = 0u32;
        for (i, p) in pkts.iter().enumerate() {
            let last = i + 1 == pkts.len();
            prop_assert_eq!(p.data_offset, at);
            prop_assert!(p.len > 0 && p.len <= pmtu);
            at += p.len;
            let k = p.header.kdeth.kdeth0;
            prop_assert_eq!(k.kver(), 1);
            prop_assert!(k.om());
            prop_assert_eq!(k.sh(), !last);
            prop_assert_eq!(k.intr(), !last && urg);
            prop_assert_eq!(p.last, last);
            prop_assert_eq!(p.bth.ack_req, last);
            let op = if last && last_segment { 0xE3 } else { 0xE2 };
            prop_assert_eq!(p.bth.opcode, op);
            let want = FlowPsn::new(Generation::masked(generation), spsn + i as u32);
            prop_assert_eq!(p.bth.psn, want.as_psn());
            prop_assert_eq!(p.bth.dest_qp, 0x80_1805);
            prop_assert_eq!(p.header.verbs_qp, 0x99);
            // The KDETH names the entry and the offset the bytes go to.
            let mut off = p.data_offset;
            let e = entries.iter().find(|e| {
                let here = off < e.len() * 4096;
                if !here { off -= e.len() * 4096; }
                here
            }).unwrap();
            prop_assert_eq!((k.tid(), k.tidctrl()), (e.idx(), e.ctrl_bits()));
            prop_assert_eq!(k.byte_offset(), off);
        }
        // The stream sends the segment; a packet is never clipped to the
        // segment's end (the driver's rule), so at an 8 KiB MTU the last
        // one may carry up to one page more.
        prop_assert!(at >= length && at - length < pmtu);
        if pmtu == 4096 {
            prop_assert_eq!(at, length);
        }
    }
}

#[test]
fn data_stream_ends_with_the_entries() {
    // Entries for 8 KiB, a segment of 16 KiB: two packets, the second last.
    let entries = [TidEntry::new(3, TidCtrl::Even, 2).unwrap()];
    let flow = DataFlow {
        entries: &entries,
        length: 16384,
        pmtu: 4096,
        spsn: 0,
        generation: Generation::masked(1),
        tid_qpn: 0x80_0001,
        jkey: 32,
        urg: false,
        verbs_qp: 1,
        last_segment: false,
    };
    let pkts: Vec<_> = DataBuilder::new(&flow).map(Result::unwrap).collect();
    assert_eq!(pkts.len(), 2);
    assert!(pkts[1].last && !pkts[1].header.kdeth.kdeth0.sh());
    assert_eq!(pkts[1].bth.opcode, 0xE2);
}

/// Negotiates two QPs whose `max_write` differ and checks that each side's
/// WRITE plans use the right one: the requester the peer's, the responder
/// its own.
#[test]
fn max_write_reaches_both_plans() {
    let a_local = TidParams {
        max_write: 4,
        ..TidParams::local(1, 32, 14, false)
    };
    let b_local = TidParams {
        max_write: 2,
        ..TidParams::local(2, 32, 14, false)
    };
    let mut a = Negotiation::new(a_local);
    let mut b = Negotiation::new(b_local);
    let answer = b.respond(with_capcode(a.request()), true, 4096);
    assert!(a.reply(with_capcode(answer), true, 4096));
    let a_remote = a.remote().unwrap().params;
    let b_remote = b.remote().unwrap().params;

    let wr = WriteWorkRequest {
        opcode: WrOpcode::RdmaWrite,
        length: 1 << 20,
        remote_addr: 0x4000_0000,
        psn: Psn::new(10),
    };
    let path = |r| Path {
        dlid: 2,
        port_lid: 1,
        lmc: 0,
        is_9b: true,
        pmtu: 4096,
        remote: Some(r),
    };
    // A writes to B: A expects at most B's 2 grants per request, B grants
    // at most 2.
    let a_plan = qualify_write(&wr, &path(&a_remote)).unwrap();
    assert_eq!((a_plan.total_segs, a_plan.n_flows), (4, 2));
    let b_plan = plan_write_req(wr.length, wr.psn, b.local()).unwrap();
    assert_eq!((b_plan.num_segs, b_plan.n_flows), (4, 2));
    assert_eq!(b_plan.last_psn, a_plan.last_psn);
    assert!(may_allocate_segment(1, b.local()) && !may_allocate_segment(2, b.local()));
    // B writes to A: 4 both ways.
    let b_as_requester = qualify_write(&wr, &path(&b_remote)).unwrap();
    assert_eq!(b_as_requester.n_flows, 4);
    let a_plan = plan_write_req(wr.length, wr.psn, a.local()).unwrap();
    assert_eq!(a_plan.n_flows, 4);
    assert!(may_allocate_segment(3, a.local()) && !may_allocate_segment(4, a.local()));
}

#[test]
fn tid_flow_qp_round_trips_through_write_resp_to_write_data() {
    // The responder's WRITE_RESP names its flow; the requester's
    // WRITE_DATA goes back to exactly that word.
    let resp = write_resp::build(&write_resp::WriteRespFields {
        remote_qp: 0x80_0001,
        remote_jkey: 32,
        remote_verbs_qp: 0x11,
        aeth: aeth::Repr {
            syndrome: 0x1F,
            msn: 3,
        },
        generation: Generation::masked(0x777),
        spsn: 0x10,
        local_qp: 0x80_0004,
        flow: FlowIndex::new(13).unwrap(),
        ctxt: 4,
        ib_psn: Psn::new(55),
    });
    let mut body = [0u8; write_resp::HEADER_LEN + 4];
    let mut p = write_resp::Packet::new_unchecked(&mut body[..]);
    resp.header.emit(&mut p).unwrap();
    let entries = [TidEntry::new(0, TidCtrl::Pair, 1).unwrap()];
    tid_read_proto::wire::tid_entries::emit(&entries, p.payload_mut()).unwrap();
    let p = write_resp::Packet::new_checked(&body[..]).unwrap();
    let r = write_resp::Repr::parse(&p).unwrap();
    let got: Vec<_> = p.tid_entries().iter().collect();
    let flow = DataFlow {
        entries: &got,
        length: 4096,
        pmtu: 4096,
        spsn: r.flow_psn.seq(),
        generation: r.flow_psn.generation(),
        tid_qpn: r.tid_flow_qp,
        jkey: 32,
        urg: false,
        verbs_qp: 0x22,
        last_segment: true,
    };
    let d = DataBuilder::new(&flow).next().unwrap().unwrap();
    assert_eq!(d.bth.dest_qp, 0x80_6804);
    assert_eq!(d.bth.psn, Psn::new(0x777 << 11 | 0x10));
    assert_eq!((d.bth.dest_qp >> 11) & 0x1F, 13);
}
