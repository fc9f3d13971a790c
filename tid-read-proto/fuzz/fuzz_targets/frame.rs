// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Whole 9B frames: give the input a correct ICRC, parse it, emit it again
//! from the parsed parts and compare.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::{frame, lrh};

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    lrh::Packet::new_unchecked(&mut bytes[..]).fill_icrc();
    let Ok(f) = frame::parse(&bytes) else { return };
    let mut out = vec![0u8; f.lrh.packet_len];
    let n = frame::emit(&f.lrh, &f.bth, &[f.body], &mut out).expect("a parsed frame emits");
    assert_eq!(n, f.lrh.packet_len);
    assert_eq!(&out[..], &bytes[..n]);
});
