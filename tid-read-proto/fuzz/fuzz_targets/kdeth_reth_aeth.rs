// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! KDETH, RETH and AETH parse -> emit round trips, and the TID-entry
//! payload view.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::{aeth, kdeth, reth, tid_entries};

macro_rules! round_trip {
    ($m:ident, $data:expr) => {
        if let Ok(p) = $m::Packet::new_checked($data) {
            if let Ok(r) = $m::Repr::parse(&p) {
                let mut out = $data.to_vec();
                out[..$m::HEADER_LEN].fill(0);
                r.emit(&mut $m::Packet::new_unchecked(&mut out[..]))
                    .expect("emits");
                assert_eq!(&out[..], $data);
            }
        }
    };
}

fuzz_target!(|data: &[u8]| {
    round_trip!(kdeth, data);
    round_trip!(reth, data);
    round_trip!(aeth, data);
    if let Ok(e) = tid_entries::Entries::new_checked(data) {
        let v: Vec<_> = e.iter().collect();
        assert_eq!(v.len(), e.len());
        let mut out = vec![0u8; data.len()];
        assert_eq!(tid_entries::emit(&v, &mut out), Ok(data.len()));
        assert_eq!(out, data);
    }
});
