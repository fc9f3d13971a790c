// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A whole 9B packet: LRH parse -> emit round trip, ICRC fill -> verify.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::lrh::{HEADER_LEN, Packet, Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (p.payload(), p.icrc(), p.verify_icrc());
    let Ok(r) = Repr::parse(&p) else { return };
    let mut out = data.to_vec();
    out[..HEADER_LEN].fill(0);
    let mut q = Packet::new_unchecked(&mut out[..]);
    r.emit(&mut q).expect("a parsed LRH emits");
    q.fill_icrc();
    assert!(q.verify_icrc());
    let n = r.packet_len - 4;
    assert_eq!(&out[..n], &data[..n]);
});
