// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! ERF record parse -> emit round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::erf::{HEADER_LEN, Record, Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(rec) = Record::new_checked(data) else {
        return;
    };
    let _ = rec.packet();
    let Ok(r) = Repr::parse(&rec) else { return };
    let mut out = data.to_vec();
    out[..HEADER_LEN].fill(0);
    r.emit(&mut Record::new_unchecked(&mut out[..]))
        .expect("a parsed record emits");
    assert_eq!(out, data);
});
