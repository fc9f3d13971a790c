// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! RcvArray TID entries (SPEC §3): the words a requester sends to name
//! the responder's RcvArray entries.

use super::{FieldError, fit, get32};

/// Which half (or both) of an RcvArray entry pair a TID entry addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TidCtrl {
    /// CTRL 1: only the even entry of the pair.
    Even = 1,
    /// CTRL 2: only the odd entry of the pair.
    Odd = 2,
    /// CTRL 3: both entries; LEN covers the pages of both.
    Pair = 3,
}

impl TidCtrl {
    /// The two-bit wire value.
    pub const fn bits(self) -> u32 {
        self as u32
    }

    /// Decodes the two-bit field; 0 is not a valid CTRL.
    pub const fn from_bits(bits: u32) -> Option<Self> {
        match bits & 3 {
            1 => Some(Self::Even),
            2 => Some(Self::Odd),
            3 => Some(Self::Pair),
            _ => None,
        }
    }
}

/// A TID entry: the 32-bit word a requester sends to name one RcvArray entry
/// or an entry pair.
///
/// Layout: LEN bits 0..=10 (pages), CTRL bits 20..=21, IDX bits 22..=31
/// (pair index relative to the context's expected base).
/// Kernel: `EXP_TID_SET(IDX, ...) | EXP_TID_SET(CTRL, ...) | EXP_TID_SET(LEN, ...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct TidEntry(u32);

impl TidEntry {
    const LEN_SHIFT: u32 = 0;
    const LEN_BITS: u32 = 11;
    const CTRL_SHIFT: u32 = 20;
    const CTRL_BITS: u32 = 2;
    const IDX_SHIFT: u32 = 22;
    const IDX_BITS: u32 = 10;

    /// Builds an entry; fails if `idx` needs more than 10 bits or `len` more
    /// than 11.
    pub const fn new(idx: u32, ctrl: TidCtrl, len: u32) -> Result<Self, FieldError> {
        let idx = match fit("tid.idx", idx as u64, Self::IDX_BITS) {
            Ok(v) => v as u32,
            Err(e) => return Err(e),
        };
        let len = match fit("tid.len", len as u64, Self::LEN_BITS) {
            Ok(v) => v as u32,
            Err(e) => return Err(e),
        };
        Ok(Self(
            idx << Self::IDX_SHIFT | ctrl.bits() << Self::CTRL_SHIFT | len << Self::LEN_SHIFT,
        ))
    }

    /// Wraps a raw word as received from the wire.
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The raw word.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// LEN: pages covered (both entries' pages for a pair).
    pub const fn len(self) -> u32 {
        get32(self.0, Self::LEN_SHIFT, Self::LEN_BITS)
    }

    /// True when LEN is zero (a malformed entry; the responder rejects it).
    pub const fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The raw two-bit CTRL field (0 is malformed).
    pub const fn ctrl_bits(self) -> u32 {
        get32(self.0, Self::CTRL_SHIFT, Self::CTRL_BITS)
    }

    /// CTRL decoded; `None` for the malformed value 0.
    pub const fn ctrl(self) -> Option<TidCtrl> {
        TidCtrl::from_bits(self.ctrl_bits())
    }

    /// IDX: the pair index relative to the context's expected base.
    pub const fn idx(self) -> u32 {
        get32(self.0, Self::IDX_SHIFT, Self::IDX_BITS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tid_entry_layout() {
        let e = TidEntry::new(0x3FF, TidCtrl::Pair, 64).unwrap();
        assert_eq!(e.raw(), 0x3FF << 22 | 3 << 20 | 64);
        assert_eq!(
            (e.idx(), e.ctrl(), e.len()),
            (0x3FF, Some(TidCtrl::Pair), 64)
        );
        assert!(TidEntry::new(0x400, TidCtrl::Even, 1).is_err());
        assert!(TidEntry::new(0, TidCtrl::Even, 0x800).is_err());
        assert_eq!(TidEntry::from_raw(0).ctrl(), None);
    }

    /// Every TID-entry field sits where SPEC §3 puts it (LEN 0..=10, CTRL
    /// 20..=21, IDX 22..=31), alone, and decodes back from a received word;
    /// bits 11..=19 belong to no field.
    #[test]
    fn tid_entry_fields_decode_from_their_own_bits() {
        assert_eq!(
            TidEntry::new(0, TidCtrl::Even, 0x7FF).unwrap().raw(),
            1 << 20 | 0x7FF
        );
        assert_eq!(TidEntry::new(0, TidCtrl::Odd, 0).unwrap().raw(), 2 << 20);
        assert_eq!(
            TidEntry::new(1, TidCtrl::Even, 0).unwrap().raw(),
            1 << 22 | 1 << 20
        );
        for (ctrl, bits) in [(TidCtrl::Even, 1), (TidCtrl::Odd, 2), (TidCtrl::Pair, 3)] {
            assert_eq!(ctrl.bits(), bits);
            assert_eq!(TidCtrl::from_bits(bits), Some(ctrl));
            let e = TidEntry::from_raw(bits << 20);
            assert_eq!(
                (e.ctrl_bits(), e.ctrl(), e.idx(), e.len()),
                (bits, Some(ctrl), 0, 0)
            );
        }
        assert_eq!(TidCtrl::from_bits(0), None);
        let all = TidEntry::from_raw(u32::MAX);
        assert_eq!(
            (all.idx(), all.ctrl(), all.len()),
            (0x3FF, Some(TidCtrl::Pair), 0x7FF)
        );
        assert_eq!(all.raw(), u32::MAX);
        let e = TidEntry::from_raw(0x2A5 << 22 | 1 << 20 | 0xFF800 | 0x123);
        assert_eq!(
            (e.idx(), e.ctrl(), e.len()),
            (0x2A5, Some(TidCtrl::Even), 0x123)
        );
        assert!(!e.is_empty());
        assert!(TidEntry::from_raw(0xFFF_FF800).is_empty());
        // A field error names the field, the value and the width.
        assert_eq!(
            TidEntry::new(0, TidCtrl::Even, 0x800),
            Err(FieldError {
                field: "tid.len",
                value: 0x800,
                bits: 11
            })
        );
    }
}
