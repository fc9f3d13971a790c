// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the WRITE-header fuzz targets share: their round-trip check.

use core::ops::Range;

/// Emits (through `emit`) into a copy of `data` whose first `header_len`
/// bytes are scrambled, and checks that every byte came back except those
/// in `reserved`, which must come back zero.
pub fn assert_round_trip(
    data: &[u8],
    header_len: usize,
    reserved: Range<usize>,
    emit: impl FnOnce(&mut [u8]),
) {
    let mut out = data.to_vec();
    out[..header_len].fill(0xA5);
    emit(&mut out);
    let mut want = data.to_vec();
    want[reserved].fill(0);
    assert_eq!(out, want);
}
