// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! ERF record parse -> emit round trip.
#![no_main]

mod common;

use common::round_trip;
use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::erf;

fuzz_target!(|data: &[u8]| {
    round_trip!(erf::Record, data, 0, "record", |r| r.packet());
});
