// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! OPFN word decode -> encode keeps every bit the format carries, and the
//! negotiation never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tid_read_proto::opfn::{Negotiation, TidParams};

fuzz_target!(|input: (u64, u32, bool)| {
    let (word, pmtu, enabled) = input;
    let p = TidParams::decode(word);
    assert_eq!(p.encode(), word & !(0x7 << 22 | 0x3F << 26 | 0xF));
    assert_eq!(TidParams::decode(p.encode()), p);
    let mut n = Negotiation::new(TidParams::local(1, 32, 14, true));
    let answer = n.respond(word, enabled, pmtu);
    assert_eq!(answer, n.request());
    let accepted = word & !0xF != 0 && enabled && pmtu != 0;
    assert_eq!(n.remote().is_some(), accepted);
});
