// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! PSN arithmetic: 31-bit IB PSNs, flow generations and flow PSNs.
//!
//! This hardware carries 31-bit PSNs (`PSN_MASK` 0x7FFF_FFFF). Two PSNs are
//! compared by the sign of their difference shifted left by one, so the
//! comparison is correct across the wrap as long as the two are less than
//! 2^30 apart. Kernel: `mask_psn()`, `cmp_psn()`, `delta_psn()`.

use core::cmp::Ordering;

use crate::consts::{
    GENERATION_MASK, GENERATION_RESERVED, KDETH_SEQ_MASK, KDETH_SEQ_SHIFT, PSN_MASK, PSN_SHIFT,
};

/// A 31-bit IB packet sequence number. Always masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct Psn(u32);

impl Psn {
    /// Masks `v` to 31 bits. Kernel: `mask_psn()`.
    pub const fn new(v: u32) -> Self {
        Self(v & PSN_MASK)
    }

    /// The 31-bit value.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// `self + n`, wrapping at 2^31.
    pub const fn add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// `self - n`, wrapping at 2^31.
    pub const fn sub(self, n: u32) -> Self {
        Self::new(self.0.wrapping_sub(n))
    }

    /// The signed distance `self - other` on the 31-bit circle.
    /// Kernel: `delta_psn()`.
    pub const fn delta(self, other: Self) -> i32 {
        ((self.0.wrapping_sub(other.0) << PSN_SHIFT) as i32) >> PSN_SHIFT
    }

    /// Circular comparison. Kernel: `cmp_psn()`.
    pub const fn cmp_psn(self, other: Self) -> Ordering {
        let d = (self.0.wrapping_sub(other.0) << PSN_SHIFT) as i32;
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// True if `lo <= self <= hi` on the circle.
    pub const fn within(self, lo: Self, hi: Self) -> bool {
        !matches!(self.cmp_psn(lo), Ordering::Less)
            && !matches!(self.cmp_psn(hi), Ordering::Greater)
    }
}

/// A 20-bit flow generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Generation(u32);

impl Generation {
    /// The reserved generation that disables a flow; never live.
    /// Kernel: `KERN_GENERATION_RESERVED`.
    pub const RESERVED: Self = Self(GENERATION_RESERVED);

    /// Checked constructor: `None` if `g` needs more than 20 bits.
    pub const fn new(g: u32) -> Option<Self> {
        if g & !GENERATION_MASK == 0 {
            Some(Self(g))
        } else {
            None
        }
    }

    /// Masks `g` to 20 bits. Kernel: `mask_generation()`.
    pub const fn masked(g: u32) -> Self {
        Self(g & GENERATION_MASK)
    }

    /// The 20-bit value.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// True for [`Self::RESERVED`].
    pub const fn is_reserved(self) -> bool {
        self.0 == GENERATION_RESERVED
    }

    /// The next live generation: `(g + 1) & 0xFFFFF`, skipping the reserved
    /// value (so both 0xFFFFE and 0xFFFFF advance to 0).
    /// Kernel: `kern_flow_generation_next()`.
    pub const fn next(self) -> Self {
        // Every constructor keeps the value within 20 bits, so `g + 1`
        // needs no mask: it is 0xFFFFF (reserved) or 0x100000 (wrapped)
        // exactly when `g` is one of the two top values.
        if self.0 >= GENERATION_RESERVED - 1 {
            Self(0)
        } else {
            Self(self.0.wrapping_add(1))
        }
    }
}

/// A flow PSN: `generation << 11 | sequence`, 31 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct FlowPsn(u32);

impl FlowPsn {
    /// Builds from a generation and an 11-bit sequence (masked).
    pub const fn new(generation: Generation, seq: u32) -> Self {
        Self((generation.get() << KDETH_SEQ_SHIFT | (seq & KDETH_SEQ_MASK)) & PSN_MASK)
    }

    /// Wraps a raw value, masked to 31 bits.
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw & PSN_MASK)
    }

    /// The raw 31-bit value.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The generation part.
    pub const fn generation(self) -> Generation {
        Generation::masked(self.0 >> KDETH_SEQ_SHIFT)
    }

    /// The 11-bit sequence part.
    pub const fn seq(self) -> u32 {
        self.0 & KDETH_SEQ_MASK
    }

    /// The next PSN in the same generation: the sequence wraps at 2048
    /// without touching the generation, as the chip does.
    pub const fn next_seq(self) -> Self {
        Self::new(self.generation(), self.seq().wrapping_add(1))
    }

    /// As an IB PSN, for circular comparison.
    pub const fn as_psn(self) -> Psn {
        Psn::new(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_wraps_and_compares() {
        let top = Psn::new(PSN_MASK);
        assert_eq!(top.add(1).get(), 0);
        assert_eq!(Psn::new(0).sub(1), top);
        assert_eq!(Psn::new(0).delta(top), 1);
        assert_eq!(top.delta(Psn::new(0)), -1);
        assert_eq!(Psn::new(0).cmp_psn(top), Ordering::Greater);
        assert_eq!(Psn::new(5).cmp_psn(Psn::new(5)), Ordering::Equal);
        assert!(Psn::new(1).within(top, Psn::new(2)));
        assert!(!Psn::new(3).within(top, Psn::new(2)));
        assert_eq!(Psn::new(u32::MAX).get(), PSN_MASK);
    }

    #[test]
    fn generation_next_skips_reserved() {
        assert_eq!(Generation::masked(0xFFFFD).next().get(), 0xFFFFE);
        assert_eq!(Generation::masked(0xFFFFE).next().get(), 0);
        assert_eq!(Generation::RESERVED.next().get(), 0);
        assert_eq!(Generation::new(0x100000), None);
    }

    #[test]
    fn flow_psn_sequence_wraps_inside_generation() {
        let g = Generation::masked(7);
        let p = FlowPsn::new(g, 2047).next_seq();
        assert_eq!((p.generation(), p.seq()), (g, 0));
        assert_eq!(FlowPsn::new(Generation::RESERVED, 2047).raw(), PSN_MASK);
    }

    /// The sign of the difference decides, across the wrap: the top PSN is
    /// just before 0, and a PSN 2^30 - 1 ahead is still ahead.
    #[test]
    fn psn_order_is_circular() {
        let top = Psn::new(PSN_MASK);
        assert_eq!(top.cmp_psn(Psn::new(0)), Ordering::Less);
        assert_eq!(Psn::new(3).cmp_psn(Psn::new(5)), Ordering::Less);
        assert_eq!(Psn::new(5).cmp_psn(Psn::new(3)), Ordering::Greater);
        let far = Psn::new((1 << 30) - 1);
        assert_eq!(far.cmp_psn(Psn::new(0)), Ordering::Greater);
        assert_eq!(far.delta(Psn::new(0)), (1 << 30) - 1);
        assert_eq!(Psn::new(0).delta(far), -((1 << 30) - 1));
        assert_eq!(Psn::new(7).delta(Psn::new(3)), 4);
        assert_eq!(Psn::new(3).delta(Psn::new(7)), -4);
        assert_eq!(Psn::new(10).add(5).get(), 15);
        assert_eq!(Psn::new(10).sub(5).get(), 5);
        assert_eq!(top.add(3), Psn::new(2));
        // The bounds are inclusive.
        assert!(Psn::new(2).within(Psn::new(2), Psn::new(4)));
        assert!(Psn::new(4).within(Psn::new(2), Psn::new(4)));
        assert!(!Psn::new(1).within(Psn::new(2), Psn::new(4)));
        assert!(!Psn::new(5).within(Psn::new(2), Psn::new(4)));
    }

    #[test]
    fn generation_masks_to_20_bits() {
        assert_eq!(Generation::masked(0xABC_DEF12).get(), 0xDEF12);
        assert_eq!(Generation::new(0xFFFFF), Some(Generation::RESERVED));
        assert_eq!(Generation::new(0x12345).map(Generation::get), Some(0x12345));
        assert!(Generation::RESERVED.is_reserved());
        assert!(!Generation::masked(0xFFFFE).is_reserved());
        assert!(!Generation::masked(0).is_reserved());
        assert_eq!(Generation::masked(41).next().get(), 42);
    }

    /// A flow PSN is `generation << 11 | sequence` in 31 bits, and the
    /// next sequence keeps the generation.
    #[test]
    fn flow_psn_splits_into_generation_and_sequence() {
        let p = FlowPsn::from_raw(0xFFFF_FFFF);
        assert_eq!(p.raw(), PSN_MASK);
        let p = FlowPsn::from_raw(0x12345 << 11 | 0x2AB);
        assert_eq!((p.generation().get(), p.seq()), (0x12345, 0x2AB));
        assert_eq!(p.as_psn(), Psn::new(0x12345 << 11 | 0x2AB));
        let n = p.next_seq();
        assert_eq!((n.generation().get(), n.seq()), (0x12345, 0x2AC));
        assert_eq!(n.raw(), 0x12345 << 11 | 0x2AC);
        let q = FlowPsn::new(Generation::masked(3), 0x7FF | 0x800);
        assert_eq!((q.generation().get(), q.seq()), (3, 0x7FF));
    }
}
