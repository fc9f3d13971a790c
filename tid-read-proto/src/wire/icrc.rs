// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The invariant CRC (ICRC) of a 9B (InfiniBand-format) packet.
//!
//! How it is computed, as the InfiniBand architecture specifies it for a
//! packet with an LRH (IBA vol. 1, "Invariant CRC"), which the 9B format of
//! Omni-Path keeps unchanged:
//!
//! 1. The CRC is CRC-32 as used by Ethernet: polynomial 0x04C11DB7 processed
//!    bit-reflected (table constant 0xEDB88320), register preset to all
//!    ones, result complemented. `compute(b"123456789") == 0xCBF4_3926`.
//! 2. It covers the packet from the first byte of the LRH through the last
//!    byte of the payload (the ICRC itself and any link CRC excluded).
//! 3. Fields that switches may change on the way are read as all ones:
//!    the LRH's VL field (SC on Omni-Path, the high nibble of byte 0);
//!    with a GRH (LNH 3), its traffic class, flow label and hop limit; and
//!    the BTH's byte 4 (Resv8a, which holds FECN/BECN on this hardware).
//! 4. The 32-bit result goes on the wire least-significant byte first, like
//!    the Ethernet FCS. Two independent implementations of the same rule
//!    for RoCE agree: the Linux soft-RoCE driver stores its `crc32_le`
//!    result that way, and Scapy's RoCE layer packs zlib's CRC-32 of the
//!    masked packet byte-reversed from network order; both mask the whole
//!    BTH byte 4 (FECN, BECN and the six reserved bits) to ones.
//!
//! The hfi1 chip computes the ICRC in hardware; this module exists so the
//! simulator's capture files carry a correct one and a test can check it.

use super::lrh::{LNH_BTH, LNH_GRH};

// Evaluated at compile time only (it initialises a `static`): an index out
// of range would fail the build, never panic at run time.
#[allow(clippy::indexing_slicing)]
const fn make_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static TABLE: [u32; 256] = make_table();

/// CRC-32 (Ethernet / zlib) state: feed bytes, then [`Crc32::finish`].
#[derive(Debug, Clone, Copy)]
pub struct Crc32(u32);

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A fresh CRC (register all ones).
    pub const fn new() -> Self {
        Self(0xFFFF_FFFF)
    }

    /// Feeds one byte.
    pub fn byte(&mut self, b: u8) {
        let idx = usize::from((self.0 as u8) ^ b);
        let t = TABLE.get(idx).copied().unwrap_or(0);
        self.0 = t ^ (self.0 >> 8);
    }

    /// Feeds bytes.
    pub fn bytes(&mut self, data: &[u8]) {
        for &b in data {
            self.byte(b);
        }
    }

    /// The CRC value (register complemented).
    pub const fn finish(self) -> u32 {
        !self.0
    }
}

/// Plain CRC-32 of `data` (no masking).
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.bytes(data);
    c.finish()
}

/// The mask (bits read as one) for byte `i` of a packet whose LRH says
/// `lnh`.
fn variant_mask(i: usize, lnh: u8) -> u8 {
    const LRH: usize = 8;
    const GRH: usize = 40;
    const BTH_RESV8A: usize = 4;
    if i == 0 {
        return 0xF0; // VL / SC
    }
    let Some(j) = i.checked_sub(LRH) else {
        return 0;
    };
    match lnh {
        LNH_BTH if j == BTH_RESV8A => 0xFF,
        LNH_GRH => match j {
            0 => 0x0F,     // traffic class, high nibble
            1..=3 => 0xFF, // traffic class low nibble, flow label
            7 => 0xFF,     // hop limit
            x if x == GRH + BTH_RESV8A => 0xFF,
            _ => 0,
        },
        _ => 0,
    }
}

/// The ICRC of a 9B packet: `covered` runs from the first byte of the LRH
/// through the last payload byte. An empty or one-byte buffer is hashed as
/// it is.
pub fn compute(covered: &[u8]) -> u32 {
    let lnh = covered.get(1).map_or(0, |b| b & 0x03);
    let mut c = Crc32::new();
    for (i, &b) in covered.iter().enumerate() {
        c.byte(b | variant_mask(i, lnh));
    }
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    // A TID RDMA READ_RESP header-only packet: LRH (SC 3, LNH BTH, DLID 1,
    // PktLen 15 words, SLID 2), BTH (opcode 0xE5, pkey 0xFFFF, byte 4 =
    // 0x80 FECN, dest QP 0x800803, PSN 0x12345), KDETH, AETH and the rest
    // of the READ_RESP header, then the ICRC.
    const PKT: [u8; 60] = [
        0x30, 0x02, 0x00, 0x01, 0x00, 0x0F, 0x00, 0x02, // LRH
        0xE5, 0x00, 0xFF, 0xFF, 0x80, 0x80, 0x08, 0x03, // BTH 0..8
        0x00, 0x01, 0x23, 0x45, // BTH PSN
        0x00, 0x80, 0x03, 0x60, 0x20, 0x00, 0x00, 0x00, // KDETH (LE words)
        0x00, 0x00, 0x00, 0x07, // AETH
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0x00, 0x00, 0x10, 0x00, // verbs PSN
        0x00, 0x00, 0x00, 0x11, // verbs QP
        0x00, 0x00, 0x00, 0x00, // ICRC slot
    ];

    #[test]
    fn icrc_masks_variant_fields() {
        let covered = &PKT[..56];
        // Reference value: zlib's CRC-32 over the same bytes with byte 0's
        // high nibble and BTH byte 4 set to ones, computed outside Rust
        // (python3 -c 'import zlib; ...').
        let mut masked = [0u8; 56];
        masked.copy_from_slice(covered);
        masked[0] |= 0xF0;
        masked[12] = 0xFF;
        assert_eq!(compute(covered), crc32(&masked));
        assert_eq!(compute(covered), EXPECTED);
        // Changing a variant field keeps the ICRC; an invariant one does not.
        let mut v = masked;
        v[0] &= 0x0F; // SC 0 instead of 3
        v[12] = 0x40;
        assert_eq!(compute(&v), EXPECTED);
        v[3] ^= 1;
        assert_ne!(compute(&v), EXPECTED);
    }

    const EXPECTED: u32 = 0x9293_B803;

    #[test]
    fn grh_masks_and_short_packets() {
        // Found by the `lrh` fuzz target: a GRH packet shorter than its LRH
        // must not underflow the offset arithmetic.
        assert_eq!(compute(&[0xFF, 0x03, 0xFF]), crc32(&[0xFF, 0x03, 0xFF]));
        let mut grh = [0u8; 8 + 40 + 12];
        grh[1] = LNH_GRH;
        let mut masked = grh;
        masked[0] = 0xF0;
        masked[8] = 0x0F;
        masked[9..12].fill(0xFF);
        masked[15] = 0xFF;
        masked[52] = 0xFF;
        assert_eq!(compute(&grh), crc32(&masked));
    }

    #[test]
    fn icrc_goes_on_the_wire_lsb_first() {
        let mut pkt = PKT;
        let mut p = super::super::lrh::Packet::new_checked(&mut pkt[..]).unwrap();
        assert!(!p.verify_icrc());
        p.fill_icrc();
        assert!(p.verify_icrc());
        assert_eq!(&pkt[56..], &[0x03, 0xB8, 0x93, 0x92]);
    }
}
