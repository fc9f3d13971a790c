// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! READ_REQ header parse -> emit round trip; the payload is left as is.
#![no_main]

mod common;

use common::round_trip;
use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::read_req;

fuzz_target!(|data: &[u8]| {
    round_trip!(read_req::Packet, data, 0, "READ_REQ", |p| p
        .tid_entries()
        .iter()
        .count());
});
