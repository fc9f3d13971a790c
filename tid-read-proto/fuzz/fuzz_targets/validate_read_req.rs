// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's READ_REQ handling on arbitrary bytes: parse, validate,
//! and build the whole READ_RESP stream of an accepted request. Nothing may
//! panic, and an accepted request's stream covers its length.
#![no_main]

use hfi1_hal::Psn;
use libfuzzer_sys::fuzz_target;
use tid_read_proto::admission::{QpView, Request, validate};
use tid_read_proto::response_stream::RespBuilder;
use tid_read_proto::wire::read_req::{Packet, Repr};

fuzz_target!(|input: (bool, u8, &[u8])| {
    let (big_mtu, psn, data) = input;
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let Ok(header) = Repr::parse(&p) else { return };
    let pmtu = if big_mtu { 8192 } else { 4096 };
    let qp = QpView {
        remote_read: true,
        max_len: 256 * 1024,
        pmtu,
        expected_psn: Psn::new(u32::from(psn & 1)),
        ack_queue_full: false,
    };
    let req = Request {
        psn: Psn::new(0),
        header,
        payload: p.payload(),
    };
    let Ok(acc) = validate(&qp, &req, |_, _, _| true) else {
        return;
    };
    let mut sent = 0u64;
    let mut n = 0u32;
    for pkt in RespBuilder::new(&acc.resp_flow(32, true, pmtu)) {
        let pkt = pkt.expect("a validated request builds");
        sent += u64::from(pkt.len);
        n += 1;
    }
    assert!(sent >= u64::from(acc.length));
    assert!(n >= acc.npkts);
});
