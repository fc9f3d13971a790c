// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! KDETH, RETH and AETH parse -> emit round trips, and the TID-entry
//! payload view.
#![no_main]

mod common;

use common::round_trip;
use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::{aeth, kdeth, reth, tid_entries};

fuzz_target!(|data: &[u8]| {
    round_trip!(kdeth::Packet, data, 0, "KDETH");
    round_trip!(reth::Packet, data, 0, "RETH");
    round_trip!(aeth::Packet, data, 0, "AETH");
    if let Ok(e) = tid_entries::Entries::new_checked(data) {
        let v: Vec<_> = e.iter().collect();
        assert_eq!(v.len(), e.len());
        let mut out = vec![0u8; data.len()];
        assert_eq!(tid_entries::emit(&v, &mut out), Ok(data.len()));
        assert_eq!(out, data);
    }
});
