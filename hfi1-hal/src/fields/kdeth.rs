// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! KDETH header words (SPEC §3): word 0 (offset, TID, flags, version)
//! and word 1 (J_KEY, header CRC).

use super::{FieldError, fit, get32};
use crate::flags::Kdeth0Flags;

/// KDETH word 0 (host order; the wire holds it little-endian).
///
/// OFFSET 0..=14, OM 15, TID 16..=25, TIDCTRL 26..=27, INTR 28, SH 29,
/// KVER 30..=31.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct Kdeth0(u32);

/// The field values of a [`Kdeth0`], for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kdeth0Fields {
    /// Offset inside the TID buffer, in units of 64 (OM) or 4 bytes.
    pub offset: u32,
    /// Offset mode: true = 64-byte units.
    pub om: bool,
    /// TID: the pair index (IDX of the TID entry).
    pub tid: u32,
    /// TIDCTRL (CTRL of the TID entry).
    pub tidctrl: u32,
    /// Interrupt on receipt.
    pub intr: bool,
    /// Header suppression requested.
    pub sh: bool,
}

impl Kdeth0 {
    const OFFSET_BITS: u32 = 15;
    const TID_SHIFT: u32 = 16;
    const TID_BITS: u32 = 10;
    const TIDCTRL_SHIFT: u32 = 26;
    const KVER_SHIFT: u32 = 30;
    /// The only KDETH version (KVER = 1).
    pub const KVER: u32 = 1;
    /// A word with KVER = 1 and every other field zero (what the TID
    /// packets without a TID entry carry: requests, responses without
    /// data, ACKs, RESYNC).
    pub const VERSION_ONLY: Self = Self(Self::KVER << Self::KVER_SHIFT);

    /// Builds word 0 with KVER = 1; fails if a field is too wide.
    pub const fn new(f: Kdeth0Fields) -> Result<Self, FieldError> {
        if let Err(e) = fit("kdeth.offset", f.offset as u64, Self::OFFSET_BITS) {
            return Err(e);
        }
        if let Err(e) = fit("kdeth.tid", f.tid as u64, Self::TID_BITS) {
            return Err(e);
        }
        if let Err(e) = fit("kdeth.tidctrl", f.tidctrl as u64, 2) {
            return Err(e);
        }
        let w = f.offset | f.tid << Self::TID_SHIFT | f.tidctrl << Self::TIDCTRL_SHIFT;
        let mut flags = Kdeth0Flags::empty();
        if f.om {
            flags = flags.union(Kdeth0Flags::OM);
        }
        if f.intr {
            flags = flags.union(Kdeth0Flags::INTR);
        }
        if f.sh {
            flags = flags.union(Kdeth0Flags::SH);
        }
        Ok(Self(Self::VERSION_ONLY.0 | w | flags.bits()))
    }

    /// Wraps a raw (host-order) word.
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The raw (host-order) word.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The one-bit fields (OM, INTR, SH).
    pub const fn flags(self) -> Kdeth0Flags {
        Kdeth0Flags::from_bits_truncate(self.0)
    }

    /// With the one-bit fields of `flags` set or cleared; every other field
    /// kept (a segment's last WRITE_DATA clears SH and INTR).
    pub const fn with_flags(self, flags: Kdeth0Flags, on: bool) -> Self {
        if on {
            Self(self.0 | flags.bits())
        } else {
            Self(self.0 & !flags.bits())
        }
    }

    /// OFFSET in units given by [`Self::om`].
    pub const fn offset(self) -> u32 {
        get32(self.0, 0, Self::OFFSET_BITS)
    }

    /// OM: true when OFFSET counts 64-byte units, false for 4-byte units.
    pub const fn om(self) -> bool {
        self.flags().contains(Kdeth0Flags::OM)
    }

    /// The byte offset OFFSET × (64 or 4).
    pub const fn byte_offset(self) -> u32 {
        self.offset() * if self.om() { 64 } else { 4 }
    }

    /// TID: the RcvArray pair index.
    pub const fn tid(self) -> u32 {
        get32(self.0, Self::TID_SHIFT, Self::TID_BITS)
    }

    /// TIDCTRL.
    pub const fn tidctrl(self) -> u32 {
        get32(self.0, Self::TIDCTRL_SHIFT, 2)
    }

    /// INTR.
    pub const fn intr(self) -> bool {
        self.flags().contains(Kdeth0Flags::INTR)
    }

    /// SH: header suppression requested for this packet.
    pub const fn sh(self) -> bool {
        self.flags().contains(Kdeth0Flags::SH)
    }

    /// KVER (1 on every valid packet).
    pub const fn kver(self) -> u32 {
        self.0 >> Self::KVER_SHIFT
    }
}

/// KDETH word 1 (host order): JKEY 0..=7, HCRC upper 16..=23, lower 24..=31.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct Kdeth1(u32);

impl Kdeth1 {
    /// Word 1 carrying only a J_KEY (the low eight bits of `jkey`, as the
    /// driver's `KDETH_SET` masks it).
    pub const fn with_jkey(jkey: u16) -> Self {
        Self((jkey & 0xFF) as u32)
    }

    /// Wraps a raw (host-order) word.
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The raw (host-order) word.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// JKEY.
    pub const fn jkey(self) -> u8 {
        self.0 as u8
    }

    /// HCRC upper byte.
    pub const fn hcrc_upper(self) -> u8 {
        (self.0 >> 16) as u8
    }

    /// HCRC lower byte.
    pub const fn hcrc_lower(self) -> u8 {
        (self.0 >> 24) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kdeth0_layout() {
        let k = Kdeth0::new(Kdeth0Fields {
            offset: 0x7FFF,
            om: true,
            tid: 0x3FF,
            tidctrl: 3,
            intr: true,
            sh: true,
        })
        .unwrap();
        assert_eq!(k.raw(), 0x7FFF_FFFF, "KVER is 1: bit 31 stays clear");
        assert_eq!(k.kver(), 1);
        assert_eq!(k.byte_offset(), 0x7FFF * 64);
        assert!(
            Kdeth0::new(Kdeth0Fields {
                offset: 0x8000,
                ..Default::default()
            })
            .is_err()
        );
        assert_eq!(Kdeth1::with_jkey(0x1FF).raw(), 0xFF);
        assert_eq!(Kdeth0::VERSION_ONLY.raw(), 1 << 30);
        let last = k.with_flags(Kdeth0Flags::SH | Kdeth0Flags::INTR, false);
        assert_eq!(last.raw(), 0x4FFF_FFFF);
        assert!(!last.sh() && !last.intr() && last.om());
        assert_eq!(last.flags(), Kdeth0Flags::OM);
        // Setting bits sets them and keeps every other field, whether they
        // were clear or set already.
        assert_eq!(
            last.with_flags(Kdeth0Flags::SH | Kdeth0Flags::INTR, true),
            k
        );
        assert_eq!(k.with_flags(Kdeth0Flags::OM | Kdeth0Flags::SH, true), k);
    }

    /// Every KDETH word-0 field sits where SPEC §3 puts it, alone, both
    /// when built and when decoded from a received word.
    #[test]
    fn kdeth0_fields_decode_from_their_own_bits() {
        let kver = 1 << 30;
        let one = |f: Kdeth0Fields| Kdeth0::new(f).unwrap().raw() & !kver;
        let none = Kdeth0Fields::default();
        assert_eq!(Kdeth0::new(none).unwrap().raw(), kver);
        assert_eq!(
            one(Kdeth0Fields {
                offset: 0x7FFF,
                ..none
            }),
            0x7FFF
        );
        assert_eq!(one(Kdeth0Fields { om: true, ..none }), 1 << 15);
        assert_eq!(one(Kdeth0Fields { tid: 0x3FF, ..none }), 0x3FF << 16);
        assert_eq!(one(Kdeth0Fields { tidctrl: 3, ..none }), 3 << 26);
        assert_eq!(one(Kdeth0Fields { intr: true, ..none }), 1 << 28);
        assert_eq!(one(Kdeth0Fields { sh: true, ..none }), 1 << 29);
        assert!(Kdeth0::new(Kdeth0Fields { tid: 0x400, ..none }).is_err());
        assert!(Kdeth0::new(Kdeth0Fields { tidctrl: 4, ..none }).is_err());

        let w = 0x2A5 << 16 | 2 << 26 | 0x1234;
        let k = Kdeth0::from_raw(w);
        assert_eq!(k.raw(), w);
        assert_eq!(
            (k.offset(), k.om(), k.tid(), k.tidctrl()),
            (0x1234, false, 0x2A5, 2)
        );
        assert_eq!((k.intr(), k.sh(), k.kver()), (false, false, 0));
        assert_eq!(k.byte_offset(), 0x1234 * 4);
        let k = Kdeth0::from_raw(3 << 30 | 1 << 29 | 1 << 28 | 1 << 15 | 3);
        assert_eq!((k.offset(), k.om(), k.tid(), k.tidctrl()), (3, true, 0, 0));
        assert_eq!((k.intr(), k.sh(), k.kver()), (true, true, 3));
        assert_eq!(k.byte_offset(), 3 * 64);
        let k = Kdeth0::from_raw(1 << 28);
        assert_eq!((k.intr(), k.sh(), k.om()), (true, false, false));
        let k = Kdeth0::from_raw(1 << 29);
        assert_eq!((k.intr(), k.sh(), k.om()), (false, true, false));
    }

    /// KDETH word 1: JKEY 0..=7, HCRC upper 16..=23, lower 24..=31.
    #[test]
    fn kdeth1_fields_decode_from_their_own_bits() {
        let k = Kdeth1::from_raw(0xAABB_CCDD);
        assert_eq!(k.raw(), 0xAABB_CCDD);
        assert_eq!(
            (k.jkey(), k.hcrc_upper(), k.hcrc_lower()),
            (0xDD, 0xBB, 0xAA)
        );
        assert_eq!(Kdeth1::with_jkey(32).raw(), 32);
        assert_eq!(Kdeth1::with_jkey(32).jkey(), 32);
    }
}
