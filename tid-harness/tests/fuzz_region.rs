// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The fuzz world's READ region is small enough that a READ whose length a
//! mutation blew up to gigabytes is refused at once instead of being
//! served packet by packet (which made one `responder_rx` input run for
//! seconds and stalled a campaign).

use tid_harness::fuzz::{FUZZ_REGION_LEN, Mode, run};

/// A `responder_rx` input: one QP pair, 4 KiB MTU and segments; one
/// one-page READ (a plain RDMA READ: below the fuzz world's TID READ
/// minimum); the requester sends it; then a mutated copy whose DMA length
/// (RETH bytes 32..36 of the packet, big endian) has its top byte XORed
/// with `len_xor`, ICRC fixed up, is delivered to the responder. The
/// fault-free drain then runs the responder.
fn forged_read(len_xor: u8) -> Vec<u8> {
    vec![
        0x00, 0x00, // setup: 1 QP, 1 group, 4 KiB MTU, 4 KiB segments, max_read 1
        0x00, // one post
        0x00, 0x00, // a one-page READ, no gaps
        0x00, // step: the requester sends
        14,   // step: a mutated copy of a sent packet to the responder
        0x00, // the first packet sent
        0x00, // one byte changed
        0x00, 32, len_xor, // offset 32 (RETH DMA length, top byte), XOR
        0x01,    // ICRC fixed, not truncated
    ]
}

/// With a 4 GiB region this input delivered 320,003 packets (the whole
/// fault-free drain) and took 88 s in a debug build.
#[test]
fn a_read_longer_than_the_region_is_refused_at_once() {
    // 0x0000_1000 ^ 0xE8 << 24: a 3.9 GB READ, inside a 4 GiB region.
    let s = run(Mode::ResponderRx, &forged_read(0xE8));
    assert_eq!(s.injected, 1, "the forged READ was not delivered: {s:?}");
    assert!(
        s.delivered < 100,
        "a READ of 3.9 GB into a {FUZZ_REGION_LEN}-byte region was served: {s:?}"
    );
}

/// The same input with a length that fits the region is served in full,
/// so the input does reach the responder's READ path.
#[test]
fn a_forged_read_inside_the_region_is_served() {
    // The length's second byte instead: 0x0000_1000 ^ 0x08 << 16 is
    // 0x0008_1000 bytes, 129 pages, inside the 1 MiB region.
    let mut inp = forged_read(0);
    inp[10] = 33;
    inp[11] = 0x08;
    let s = run(Mode::ResponderRx, &inp);
    assert_eq!(s.injected, 1, "the forged READ was not delivered: {s:?}");
    let packets = 0x0008_1000 / 4096;
    assert!(
        s.delivered >= packets,
        "a {}-byte READ inside the region was not served ({packets} packets): {s:?}",
        0x0008_1000
    );
}
