// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! BTH parse -> emit round trip.
#![no_main]

mod common;

use common::round_trip;
use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::bth;

fuzz_target!(|data: &[u8]| {
    round_trip!(bth::Packet, data, 0, "BTH");
});
