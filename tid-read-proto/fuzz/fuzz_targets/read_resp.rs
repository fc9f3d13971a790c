// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! READ_RESP header parse -> emit round trip: every byte comes back but the
//! reserved words, which the parser ignores (as the kernel's receiver
//! does) and emit writes zero; the data is left as is.
#![no_main]

mod write_common;

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::read_resp::{HEADER_LEN, Packet, Repr};

const RESERVED: core::ops::Range<usize> = 12..28;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    if let Ok(r) = Repr::parse(&p) {
        write_common::assert_round_trip(data, HEADER_LEN, RESERVED, |out| {
            r.emit(&mut Packet::new_unchecked(out))
                .expect("a parsed READ_RESP emits")
        });
    }
});
