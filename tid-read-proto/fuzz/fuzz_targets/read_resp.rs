// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! READ_RESP header parse -> emit round trip; the data is left as is.
#![no_main]

mod common;

use common::round_trip;
use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::read_resp;

fuzz_target!(|data: &[u8]| {
    round_trip!(read_resp::Packet, data, 0xFF, "READ_RESP");
});
