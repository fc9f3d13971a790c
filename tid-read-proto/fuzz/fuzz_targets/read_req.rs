// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! READ_REQ header parse -> emit round trip; the payload is left as is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::read_req::{HEADER_LEN, Packet, Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = p.tid_entries().iter().count();
    let Ok(r) = Repr::parse(&p) else { return };
    let mut out = data.to_vec();
    out[..HEADER_LEN].fill(0);
    r.emit(&mut Packet::new_unchecked(&mut out[..]))
        .expect("a parsed READ_REQ emits");
    assert_eq!(out, data);
});
