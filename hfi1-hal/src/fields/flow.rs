// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Hardware flows (SPEC §3): a receive context's flow index and its
//! flow-table register.

use crate::consts::{GENERATION_RESERVED, KDETH_SEQ_SHIFT, NUM_TID_FLOWS, PSN_MASK};
use crate::flags::FlowCtrl;
use crate::psn::{FlowPsn, Generation};

/// Index of one of the 32 hardware flows of a receive context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct FlowIndex(u8);

impl FlowIndex {
    /// Flow 0.
    pub const MIN: Self = Self(0);

    /// Checked constructor: `None` for 32 and above.
    pub const fn new(index: u32) -> Option<Self> {
        if (index as usize) < NUM_TID_FLOWS {
            Some(Self(index as u8))
        } else {
            None
        }
    }

    /// The index as a number 0..32.
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The index for array access.
    pub const fn as_usize(self) -> usize {
        self.0 as usize
    }
}

/// One flow-table register (`RCV_TID_FLOW_TABLE + 8 * flow`).
///
/// Bits 0..=10 next sequence, 11..=30 generation, and the control and
/// status bits of [`FlowCtrl`]: 32 FLOW_VALID, 33 HDR_SUPP_EN,
/// 34 KEEP_AFTER_SEQ_ERR, 35 KEEP_ON_GEN_ERR, 37 SEQ_MISMATCH,
/// 38 GEN_MISMATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct FlowTableReg(u64);

impl FlowTableReg {
    /// FLOW_VALID ([`FlowCtrl::FLOW_VALID`] as a word).
    pub const FLOW_VALID: u64 = FlowCtrl::FLOW_VALID.bits();
    /// HDR_SUPP_EN: header suppression for in-sequence packets.
    pub const HDR_SUPP_EN: u64 = FlowCtrl::HDR_SUPP_EN.bits();
    /// KEEP_AFTER_SEQ_ERR.
    pub const KEEP_AFTER_SEQ_ERR: u64 = FlowCtrl::KEEP_AFTER_SEQ_ERR.bits();
    /// KEEP_ON_GEN_ERR.
    pub const KEEP_ON_GEN_ERR: u64 = FlowCtrl::KEEP_ON_GEN_ERR.bits();
    /// STATUS_SEQ_MISMATCH.
    pub const SEQ_MISMATCH: u64 = FlowCtrl::SEQ_MISMATCH.bits();
    /// STATUS_GEN_MISMATCH.
    pub const GEN_MISMATCH: u64 = FlowCtrl::GEN_MISMATCH.bits();

    /// What software sets, with every register write, besides the PSN:
    /// valid, keep the flow after errors, clear both status bits (they
    /// are write-1-to-clear). Kernel: `kern_set_hw_flow()`.
    const ARMED: FlowCtrl = FlowCtrl::FLOW_VALID
        .union(FlowCtrl::KEEP_AFTER_SEQ_ERR)
        .union(FlowCtrl::KEEP_ON_GEN_ERR)
        .union(FlowCtrl::SEQ_MISMATCH)
        .union(FlowCtrl::GEN_MISMATCH);

    /// The value software writes to arm a flow with `generation` (sequence
    /// 0). Header suppression is on unless the generation is the reserved
    /// one, which is how a flow is disabled.
    /// Kernel: `kern_set_hw_flow()`.
    pub const fn for_generation(generation: Generation) -> Self {
        let g = generation.get();
        let ctrl = if g == GENERATION_RESERVED {
            Self::ARMED
        } else {
            Self::ARMED.union(FlowCtrl::HDR_SUPP_EN)
        };
        Self((g as u64) << KDETH_SEQ_SHIFT | ctrl.bits())
    }

    /// Wraps a raw register value.
    pub const fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw register value.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The chip's next expected flow PSN (`reg & 0x7FFF_FFFF`).
    pub const fn next_psn(self) -> FlowPsn {
        FlowPsn::from_raw((self.0 as u32) & PSN_MASK)
    }

    /// Replaces the 31-bit next-PSN part (what the chip does as it advances).
    pub const fn with_next_psn(self, psn: FlowPsn) -> Self {
        Self((self.0 & !(PSN_MASK as u64)) | psn.raw() as u64)
    }

    /// The control and status bits.
    pub const fn ctrl(self) -> FlowCtrl {
        FlowCtrl::from_bits_truncate(self.0)
    }

    /// True if every bit of `bits` is set.
    pub const fn contains(self, bits: FlowCtrl) -> bool {
        self.ctrl().contains(bits)
    }

    /// With the bits of `bits` set or cleared; every other bit kept.
    pub const fn with_ctrl(self, bits: FlowCtrl, on: bool) -> Self {
        if on {
            Self(self.0 | bits.bits())
        } else {
            Self(self.0 & !bits.bits())
        }
    }

    /// True if `bit` (one of the associated word constants) is set. Kept
    /// for callers of the word form; [`FlowTableReg::contains`] takes the
    /// typed bits.
    pub const fn has(self, bit: u64) -> bool {
        self.0 & bit != 0
    }

    /// Sets or clears `bit` (a word constant); see
    /// [`FlowTableReg::with_ctrl`] for the typed form.
    pub const fn with(self, bit: u64, on: bool) -> Self {
        if on {
            Self(self.0 | bit)
        } else {
            Self(self.0 & !bit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_reg_matches_vector_readme() {
        // flows.jsonl README: every clear writes 0x6D7FFFF800.
        let r = FlowTableReg::for_generation(Generation::RESERVED);
        assert_eq!(r.raw(), 0x6D_7FFF_F800);
        let g = Generation::new(5).unwrap();
        assert_eq!(
            FlowTableReg::for_generation(g).raw(),
            (5 << 11) | 0x6D_0000_0000 | 0x2_0000_0000
        );
        assert_eq!(FlowTableReg::for_generation(g).next_psn().raw(), 5 << 11);
    }

    #[test]
    fn flow_reg_typed_bits() {
        let g = Generation::new(5).unwrap();
        let r = FlowTableReg::for_generation(g);
        assert!(r.contains(FlowCtrl::FLOW_VALID | FlowCtrl::HDR_SUPP_EN));
        let off = FlowTableReg::for_generation(Generation::RESERVED);
        assert!(!off.contains(FlowCtrl::HDR_SUPP_EN) && off.contains(FlowCtrl::FLOW_VALID));
        let s = r.with_ctrl(FlowCtrl::SEQ_MISMATCH | FlowCtrl::GEN_MISMATCH, false);
        assert_eq!(s.raw(), r.raw() & !(3 << 37));
        assert_eq!(s.next_psn(), r.next_psn());
        assert_eq!(
            s.with_ctrl(FlowCtrl::SEQ_MISMATCH | FlowCtrl::GEN_MISMATCH, true),
            r
        );
        assert_eq!(
            r.with_ctrl(FlowCtrl::FLOW_VALID | FlowCtrl::SEQ_MISMATCH, true),
            r
        );
        assert_eq!(
            r.with(FlowTableReg::HDR_SUPP_EN, false),
            r.with_ctrl(FlowCtrl::HDR_SUPP_EN, false)
        );
    }

    #[test]
    fn flow_index_covers_the_32_flows() {
        assert_eq!(FlowIndex::MIN.get(), 0);
        let last = FlowIndex::new(31).unwrap();
        assert_eq!((last.get(), last.as_usize()), (31, 31));
        assert_eq!(FlowIndex::new(7).map(FlowIndex::as_usize), Some(7));
        assert_eq!(FlowIndex::new(32), None);
        assert_eq!(FlowIndex::new(u32::MAX), None);
    }

    /// The flow-table bits of SPEC §3, each read and written on its own:
    /// the chip's next PSN is the low 31 bits, and replacing it keeps every
    /// other bit (bit 31 included).
    #[test]
    fn flow_reg_bits_read_and_write_independently() {
        let bits = [
            (FlowTableReg::FLOW_VALID, 32),
            (FlowTableReg::HDR_SUPP_EN, 33),
            (FlowTableReg::KEEP_AFTER_SEQ_ERR, 34),
            (FlowTableReg::KEEP_ON_GEN_ERR, 35),
            (FlowTableReg::SEQ_MISMATCH, 37),
            (FlowTableReg::GEN_MISMATCH, 38),
        ];
        for (bit, at) in bits {
            assert_eq!(bit, 1 << at);
            let r = FlowTableReg::from_raw(0);
            assert!(!r.has(bit));
            let set = r.with(bit, true);
            assert_eq!(set.raw(), bit);
            assert!(set.has(bit));
            assert_eq!(set.with(bit, true).raw(), bit, "setting twice keeps it set");
            let full = FlowTableReg::from_raw(u64::MAX);
            assert_eq!(full.with(bit, false).raw(), !bit);
            assert!(!full.with(bit, false).has(bit));
            assert_eq!(r.with(bit, false).raw(), 0);
        }
        let g = Generation::masked(0xFFFFE);
        assert_eq!(
            FlowTableReg::for_generation(g).raw(),
            0xFFFFE << 11 | 0x6F_0000_0000,
            "a live generation also turns HDR_SUPP_EN on"
        );
        let reg = FlowTableReg::from_raw(0xFFFF_FFFF_8000_0000 | 0x1234_5678);
        assert_eq!(reg.next_psn(), FlowPsn::from_raw(0x1234_5678));
        let moved = reg.with_next_psn(FlowPsn::from_raw(0x0765_4321));
        assert_eq!(moved.raw(), 0xFFFF_FFFF_8000_0000 | 0x0765_4321);
        assert_eq!(
            FlowTableReg::from_raw(0x5_0000_0000)
                .with_next_psn(FlowPsn::from_raw(1))
                .raw(),
            0x5_0000_0001
        );
    }
}
