// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA ACK header parse -> emit round trip: every byte comes back but
//! the reserved words, which come back zero; the view never panics.
#![no_main]

mod write_common;

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::tid_ack::{HEADER_LEN, Packet, Repr};

const RESERVED: core::ops::Range<usize> = 12..20;

fuzz_target!(|data: &[u8]| {
    let p = Packet::new_unchecked(data);
    let _ = (p.aeth(), p.tid_flow_psn(), p.verbs_psn(), p.tid_flow_qp());
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let Ok(r) = Repr::parse(&p) else {
        // Only a PSN word with bit 31 set is refused.
        assert!(p.tid_flow_psn_raw() >> 31 == 1 || p.verbs_psn_raw() >> 31 == 1);
        return;
    };
    write_common::assert_round_trip(data, HEADER_LEN, RESERVED, |out| {
        r.emit(&mut Packet::new_unchecked(out))
            .expect("a parsed ACK emits")
    });
});
