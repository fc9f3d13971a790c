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
//! simulator's packets and capture files carry a correct one and a
//! receiver can check it.
//!
//! # Speed
//!
//! Only the first bytes of a packet can be masked (at most
//! [`MASKED_PREFIX`]: LRH, GRH and the BTH through byte 4). [`compute`]
//! copies that prefix, masks it with a table chosen once by the LNH, and
//! hands prefix and payload to `crc32fast`. In builds with `std` (tid-sim,
//! the tests, the benchmarks) `crc32fast` picks its PCLMULQDQ folding at
//! run time; on `x86_64-unknown-none` (the kernel object, no SSE) it has
//! no SIMD path and uses its slicing-by-16 table, 16 bytes per step, with
//! no vector register.
//!
//! # Once per packet
//!
//! A builder calls [`seal`] (or `lrh::Packet::fill_icrc`) once, after
//! every header and the payload are in place. A receiver calls
//! [`Verified::check`] once and hands the [`Verified`] packet on, so no
//! later layer has to compute the CRC again. To sort packets for
//! statistics without either, see [`super::class`].

use super::lrh::{self, LNH_BTH, LNH_GRH};

/// Bytes of the LRH.
const LRH: usize = lrh::HEADER_LEN;
/// Bytes of the GRH.
const GRH: usize = 40;
/// Offset of the BTH's Resv8a byte (FECN/BECN) inside the BTH.
const BTH_RESV8A: usize = 4;

/// The longest prefix of a packet that holds a masked byte: LRH, GRH and
/// the BTH up to its Resv8a byte.
pub const MASKED_PREFIX: usize = LRH + GRH + BTH_RESV8A + 1;

/// The mask (bits read as one) for byte `i` of a packet whose LRH says
/// `lnh`.
const fn variant_mask(i: usize, lnh: u8) -> u8 {
    if i == 0 {
        return 0xF0; // VL / SC
    }
    if i < LRH {
        return 0;
    }
    let j = i - LRH;
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

/// The masks of the first `N` bytes for `lnh`, worked out at compile time.
// Evaluated at compile time only (it initialises a `static`): an index out
// of range would fail the build, never panic at run time.
#[allow(clippy::indexing_slicing)]
const fn mask_table<const N: usize>(lnh: u8) -> [u8; N] {
    let mut t = [0u8; N];
    let mut i = 0;
    while i < N {
        t[i] = variant_mask(i, lnh);
        i += 1;
    }
    t
}

/// Masks for LNH 2 (BTH): SC and the BTH's Resv8a.
static MASK_BTH: [u8; BTH_PREFIX] = mask_table(LNH_BTH);
/// Masks for LNH 3 (GRH): SC, the GRH's variant fields and Resv8a.
static MASK_GRH: [u8; MASKED_PREFIX] = mask_table(LNH_GRH);
/// Masks for the other LNH values: SC only.
static MASK_OTHER: [u8; OTHER_PREFIX] = mask_table(0);

/// Prefix lengths of the mask tables.
const BTH_PREFIX: usize = LRH + BTH_RESV8A + 1;
const OTHER_PREFIX: usize = 1;

// Every byte a mask applies to lies inside its table: past a table's end
// the rule masks nothing (checked far past the longest prefix).
const _: () = {
    let mut lnh = 0;
    while lnh < 4 {
        let mut i = match lnh {
            LNH_BTH => BTH_PREFIX,
            LNH_GRH => MASKED_PREFIX,
            _ => OTHER_PREFIX,
        };
        while i < 4 * MASKED_PREFIX {
            assert!(variant_mask(i, lnh) == 0);
            i += 1;
        }
        lnh += 1;
    }
};

/// CRC-32 (Ethernet / zlib) state: feed bytes, then [`Crc32::finish`].
#[derive(Debug, Clone, Default)]
pub struct Crc32(crc32fast::Hasher);

impl Crc32 {
    /// A fresh CRC (register all ones).
    pub fn new() -> Self {
        Self(crc32fast::Hasher::new())
    }

    /// Feeds one byte.
    pub fn byte(&mut self, b: u8) {
        self.0.update(&[b]);
    }

    /// Feeds bytes.
    pub fn bytes(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The CRC value (register complemented).
    pub fn finish(self) -> u32 {
        self.0.finalize()
    }
}

/// Plain CRC-32 of `data` (no masking).
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// The ICRC of a 9B packet: `covered` runs from the first byte of the LRH
/// through the last payload byte. An empty or one-byte buffer is hashed as
/// it is (the LNH is read from byte 1; a missing byte 1 reads as LNH 0).
pub fn compute(covered: &[u8]) -> u32 {
    let lnh = covered.get(1).map_or(0, |b| b & 0x03);
    let mask: &[u8] = match lnh {
        LNH_BTH => &MASK_BTH,
        LNH_GRH => &MASK_GRH,
        _ => &MASK_OTHER,
    };
    let n = mask.len().min(covered.len());
    let (head, rest) = covered.split_at_checked(n).unwrap_or((covered, &[]));
    let mut masked = [0u8; MASKED_PREFIX];
    for (m, (&b, &v)) in masked.iter_mut().zip(head.iter().zip(mask)) {
        *m = b | v;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(masked.get(..n).unwrap_or(&[]));
    h.update(rest);
    h.finalize()
}

/// Why a packet's ICRC could not be checked or stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IcrcError {
    /// The LRH's PktLen does not fit the buffer, or is too short to hold
    /// an LRH and an ICRC.
    #[error("lrh: {0}")]
    Length(#[from] super::Error),
    /// The stored ICRC differs from the one computed over the packet.
    #[error("bad ICRC")]
    Mismatch,
}

/// The covered length (LRH through payload) of a packet whose LRH holds a
/// usable PktLen.
fn layout(packet: &[u8]) -> Result<usize, IcrcError> {
    let l = lrh::Packet::new_checked(packet)?;
    // check_len: PktLen holds at least the LRH and the ICRC.
    Ok(l.packet_len().saturating_sub(lrh::ICRC_LEN))
}

/// Computes the ICRC of a built packet (LRH through ICRC slot, PktLen set,
/// every header and the payload in place) and stores it in the slot, least
/// significant byte first. Returns the value stored. Bytes past PktLen are
/// neither covered nor touched. Call it once, last.
///
/// # Errors
///
/// [`IcrcError::Length`] if PktLen does not fit the buffer.
pub fn seal(packet: &mut [u8]) -> Result<u32, IcrcError> {
    let end = layout(packet)?;
    let (covered, slot) = packet
        .split_at_mut_checked(end)
        .ok_or(IcrcError::Length(super::Error::Truncated))?;
    let crc = compute(covered);
    let slot = slot
        .get_mut(..lrh::ICRC_LEN)
        .ok_or(IcrcError::Length(super::Error::Truncated))?;
    slot.copy_from_slice(&crc.to_le_bytes());
    Ok(crc)
}

/// A 9B packet whose length and ICRC were checked once, on receipt. Only
/// [`Verified::check`] makes one, so a layer that takes a `Verified` does
/// not need to (and should not) compute the CRC again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified<'a> {
    /// LRH through ICRC (PktLen bytes; link padding past it dropped).
    packet: &'a [u8],
}

impl<'a> Verified<'a> {
    /// Checks the LRH's PktLen against the buffer and the stored ICRC
    /// against the one computed over the packet.
    ///
    /// # Errors
    ///
    /// [`IcrcError::Length`] for a PktLen that does not fit,
    /// [`IcrcError::Mismatch`] for a wrong ICRC.
    pub fn check(buf: &'a [u8]) -> Result<Self, IcrcError> {
        let end = layout(buf)?;
        let packet = buf
            .get(..end + lrh::ICRC_LEN)
            .ok_or(IcrcError::Length(super::Error::Truncated))?;
        let (covered, stored) = packet
            .split_at_checked(end)
            .ok_or(IcrcError::Length(super::Error::Truncated))?;
        let stored = match stored {
            &[a, b, c, d] => u32::from_le_bytes([a, b, c, d]),
            _ => return Err(IcrcError::Length(super::Error::Truncated)),
        };
        if compute(covered) == stored {
            Ok(Self { packet })
        } else {
            Err(IcrcError::Mismatch)
        }
    }

    /// The packet, LRH through ICRC (PktLen bytes).
    pub const fn packet(self) -> &'a [u8] {
        self.packet
    }

    /// The bytes the ICRC covers: LRH through the last payload byte.
    pub fn covered(self) -> &'a [u8] {
        let end = self.packet.len().saturating_sub(lrh::ICRC_LEN);
        self.packet.get(..end).unwrap_or(&[])
    }

    /// The LRH view of the packet (its `check_len` is known to pass).
    pub const fn lrh(self) -> lrh::Packet<&'a [u8]> {
        lrh::Packet::new_unchecked(self.packet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// CRC-32 one bit at a time, straight from the polynomial: the
    /// reference the table and SIMD paths are compared with.
    fn crc32_bitwise(data: &[u8]) -> u32 {
        let mut c = 0xFFFF_FFFFu32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0xEDB8_8320
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    /// The ICRC by the rule as written: every byte masked by its own
    /// `variant_mask`, then the bitwise CRC.
    fn icrc_reference(covered: &[u8]) -> u32 {
        let lnh = covered.get(1).map_or(0, |b| b & 0x03);
        let masked: Vec<u8> = covered
            .iter()
            .enumerate()
            .map(|(i, &b)| b | variant_mask(i, lnh))
            .collect();
        crc32_bitwise(&masked)
    }

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32_bitwise(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        let mut c = Crc32::new();
        c.bytes(b"1234");
        c.byte(b'5');
        c.bytes(b"6789");
        assert_eq!(c.finish(), 0xCBF4_3926);
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
        assert_eq!(icrc_reference(covered), EXPECTED);
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
        assert_eq!(compute(&[]), crc32(&[]));
        assert_eq!(compute(&[0x0F]), crc32(&[0xFF]));
        let mut grh = [0u8; 8 + 40 + 12];
        grh[1] = LNH_GRH;
        let mut masked = grh;
        masked[0] = 0xF0;
        masked[8] = 0x0F;
        masked[9..12].fill(0xFF);
        masked[15] = 0xFF;
        masked[52] = 0xFF;
        assert_eq!(compute(&grh), crc32(&masked));
        // Every prefix of it, across the end of each mask table.
        for n in 0..grh.len() {
            assert_eq!(compute(&grh[..n]), icrc_reference(&grh[..n]), "{n}");
        }
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

    #[test]
    fn seal_once_then_verified_once() {
        let mut pkt = [0u8; 64];
        pkt[..60].copy_from_slice(&PKT);
        pkt[60..].fill(0xEE); // link padding past PktLen
        assert_eq!(Verified::check(&pkt), Err(IcrcError::Mismatch));
        assert_eq!(seal(&mut pkt), Ok(EXPECTED));
        assert_eq!(&pkt[56..60], &[0x03, 0xB8, 0x93, 0x92]);
        assert_eq!(&pkt[60..], &[0xEE; 4], "padding untouched");
        let v = Verified::check(&pkt).unwrap();
        assert_eq!(v.packet(), &pkt[..60]);
        assert_eq!(v.covered(), &pkt[..56]);
        assert_eq!(v.lrh().icrc(), EXPECTED);
        // A switch may rewrite SC and FECN/BECN; nothing else.
        let mut hop = pkt;
        hop[0] = 0x70;
        hop[12] = 0x40;
        assert!(Verified::check(&hop).is_ok());
        hop[30] ^= 0x10;
        assert_eq!(Verified::check(&hop), Err(IcrcError::Mismatch));
        // PktLen past the buffer, or too short for LRH + ICRC.
        assert_eq!(
            Verified::check(&pkt[..59]),
            Err(IcrcError::Length(super::super::Error::Truncated))
        );
        let mut short = pkt;
        short[5] = 2;
        assert!(matches!(seal(&mut short), Err(IcrcError::Length(_))));
        assert!(matches!(Verified::check(&short), Err(IcrcError::Length(_))));
        assert!(matches!(Verified::check(&[]), Err(IcrcError::Length(_))));
    }

    /// Random packets whose byte 1 names any LNH, at lengths that cross
    /// every mask table's end and the fast paths' block sizes.
    fn packets() -> impl Strategy<Value = Vec<u8>> {
        (
            proptest::collection::vec(any::<u8>(), 0..9000),
            0u8..4,
            any::<u8>(),
        )
            .prop_map(|(mut v, lnh, hi)| {
                if let Some(b) = v.get_mut(1) {
                    *b = (hi & 0xFC) | lnh;
                }
                v
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn fast_icrc_is_the_bitwise_rule(p in packets()) {
            prop_assert_eq!(compute(&p), icrc_reference(&p));
        }

        #[test]
        fn short_packets_match_bit_for_bit(
            p in proptest::collection::vec(any::<u8>(), 0..4 * MASKED_PREFIX),
            lnh in 0u8..4,
        ) {
            let mut p = p;
            if let Some(b) = p.get_mut(1) {
                *b = (*b & 0xFC) | lnh;
            }
            prop_assert_eq!(compute(&p), icrc_reference(&p));
        }

        #[test]
        fn crc32_in_pieces_is_the_bitwise_crc(
            p in proptest::collection::vec(any::<u8>(), 0..3000),
            cut in any::<prop::sample::Index>(),
        ) {
            let (a, b) = p.split_at(cut.index(p.len() + 1));
            let mut c = Crc32::new();
            c.bytes(a);
            c.bytes(b);
            prop_assert_eq!(c.finish(), crc32_bitwise(&p));
            prop_assert_eq!(crc32(&p), crc32_bitwise(&p));
        }

        #[test]
        fn seal_then_check_round_trips(
            body in proptest::collection::vec(any::<u8>(), 12..2048),
            flip in any::<prop::sample::Index>(),
        ) {
            let words = (8 + body.len() + 4) / 4;
            let len = words * 4;
            let mut pkt = vec![0u8; len];
            pkt[..8].copy_from_slice(&[0x30, 0x02, 0, 1, (words >> 8) as u8, words as u8, 0, 2]);
            let n = (len - 12).min(body.len());
            pkt[8..8 + n].copy_from_slice(&body[..n]);
            let crc = seal(&mut pkt).unwrap();
            prop_assert_eq!(crc, icrc_reference(&pkt[..len - 4]));
            prop_assert!(Verified::check(&pkt).is_ok());
            // Any single-bit change outside the variant fields and the LRH
            // length is caught.
            let i = 6 + flip.index(len - 6);
            if i != 12 {
                pkt[i] ^= 1;
                prop_assert_eq!(Verified::check(&pkt), Err(IcrcError::Mismatch));
            }
        }
    }
}
