// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! WRITE_REQ header parse -> emit round trip: every byte comes back but the
//! reserved words, which come back zero; the view never panics.
#![no_main]

mod write_common;

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::write_req::{HEADER_LEN, Packet, Repr};

const RESERVED: core::ops::Range<usize> = 24..32;

fuzz_target!(|data: &[u8]| {
    let p = Packet::new_unchecked(data);
    let _ = (p.kdeth(), p.reth(), p.verbs_qp(), p.payload().len());
    let Ok(p) = Packet::new_checked(data) else {
        assert!(data.len() < HEADER_LEN);
        return;
    };
    let r = Repr::parse(&p).expect("every long enough WRITE_REQ parses");
    write_common::assert_round_trip(data, HEADER_LEN, RESERVED, |out| {
        r.emit(&mut Packet::new_unchecked(out))
            .expect("a parsed WRITE_REQ emits")
    });
});
