// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Typed register and header words (SPEC §3).
//!
//! Every type is a transparent wrapper over the raw word. Constructors that
//! take field values check them and return [`FieldError`] instead of
//! silently truncating; `from_raw` accepts any word (every bit pattern is a
//! value the hardware or the wire can produce) and the accessors mask.

use crate::consts::{GENERATION_RESERVED, KDETH_SEQ_SHIFT, NUM_TID_FLOWS, PSN_MASK};
use crate::flags::{FlowCtrl, Kdeth0Flags};
use crate::psn::{FlowPsn, Generation};

/// A field value did not fit its bit width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{field} = {value:#x} does not fit in {bits} bits")]
pub struct FieldError {
    /// Name of the field.
    pub field: &'static str,
    /// The rejected value.
    pub value: u64,
    /// Width of the field in bits.
    pub bits: u32,
}

/// Checks that `value` fits in `bits` bits.
const fn fit(field: &'static str, value: u64, bits: u32) -> Result<u64, FieldError> {
    if value >> bits == 0 {
        Ok(value)
    } else {
        Err(FieldError { field, value, bits })
    }
}

/// Extracts `bits` bits at `shift` from a 32-bit word.
const fn get32(w: u32, shift: u32, bits: u32) -> u32 {
    (w >> shift) & ((1u32 << bits) - 1)
}

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
