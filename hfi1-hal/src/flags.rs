// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The driver's flag words as `bitflags` types: a QP's `qp->s_flags`
//! ([`SFlags`]), its TID private `priv->s_flags` ([`TidFlags`]), the
//! control and status bits of a flow-table register ([`FlowCtrl`]) and the
//! one-bit fields of KDETH word 0 ([`Kdeth0Flags`]).
//!
//! Every value is checked against the headers of the kernel being built
//! through [`crate::layout::VALUES`] (`BUILD_BUG_ON` in `kmod-glue`).
//!
//! Bits these types do not name are kept as they are: the words are the
//! driver's own (a `&mut SFlags` may point at `qp->s_flags`, which rdmavt
//! and the rest of `hfi1` also use), so `insert`, `remove` and `set` touch
//! only the bits they name, and [`SFlags::from_bits_retain`] wraps any
//! word.
//!
//! # Locking
//!
//! Plain values. [`SFlags`] and [`TidFlags`] live in a QP's
//! `s_lock`-guarded state; [`FlowCtrl`] is part of a flow register the
//! chip holds under the context's `exp_lock`.

use bitflags::bitflags;

bitflags! {
    /// A QP's send flags. Kernel: `qp->s_flags` (`RVT_S_*` of
    /// `rdmavt_qp.h`, `HFI1_S_*` of `qp.h`).
    ///
    /// `#[repr(transparent)]` over the `u32`: the kernel platform makes a
    /// `&mut SFlags` over the driver's own word while the caller holds the
    /// QP's `s_lock`.
    #[repr(transparent)]
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct SFlags: u32 {
        /// Kernel: `RVT_S_SIGNAL_REQ_WR`.
        const SIGNAL_REQ_WR = 0x0001;
        /// Kernel: `RVT_S_BUSY`: the first leg (send engine) runs.
        const BUSY = 0x0002;
        /// Kernel: `RVT_S_TIMER`: the RC retry timer is armed.
        const TIMER = 0x0004;
        /// Kernel: `RVT_S_RESP_PENDING`: responses are waiting to be sent.
        const RESP_PENDING = 0x0008;
        /// Kernel: `RVT_S_ACK_PENDING`: an ACK is owed.
        const ACK_PENDING = 0x0010;
        /// Kernel: `RVT_S_WAIT_FENCE`.
        const WAIT_FENCE = 0x0020;
        /// Kernel: `RVT_S_WAIT_RDMAR`.
        const WAIT_RDMAR = 0x0040;
        /// Kernel: `RVT_S_WAIT_RNR`: the RNR timer runs.
        const WAIT_RNR = 0x0080;
        /// Kernel: `RVT_S_WAIT_SSN_CREDIT`.
        const WAIT_SSN_CREDIT = 0x0100;
        /// Kernel: `RVT_S_WAIT_DMA`.
        const WAIT_DMA = 0x0200;
        /// Kernel: `RVT_S_WAIT_PIO`.
        const WAIT_PIO = 0x0400;
        /// Kernel: `RVT_S_WAIT_TX`.
        const WAIT_TX = 0x0800;
        /// Kernel: `RVT_S_WAIT_DMA_DESC`.
        const WAIT_DMA_DESC = 0x1000;
        /// Kernel: `RVT_S_WAIT_KMEM`: on the device's memory-wait list
        /// (`hfi1_wait_kmem()`).
        const WAIT_KMEM = 0x2000;
        /// Kernel: `RVT_S_WAIT_PSN`.
        const WAIT_PSN = 0x4000;
        /// Kernel: `RVT_S_WAIT_ACK`.
        const WAIT_ACK = 0x8000;
        /// Kernel: `RVT_S_SEND_ONE`.
        const SEND_ONE = 0x1_0000;
        /// Kernel: `RVT_S_UNLIMITED_CREDIT`.
        const UNLIMITED_CREDIT = 0x2_0000;
        /// Kernel: `RVT_S_ECN`.
        const ECN = 0x4_0000;
        /// Kernel: `HFI1_S_WAIT_HALT`: the first leg is halted while a
        /// RESYNC is outstanding.
        const WAIT_HALT = 0x0400_0000;
        /// Kernel: `HFI1_S_WAIT_TID_RESP`: waiting for a TID RDMA WRITE
        /// response (bookkeeping only in 6.1: nothing waits on it).
        const WAIT_TID_RESP = 0x0800_0000;
        /// Kernel: `HFI1_S_WAIT_TID_SPACE` (BIT(28)): on one of a receive
        /// context's TID wait queues.
        const WAIT_TID_SPACE = 0x1000_0000;
        /// Kernel: `HFI1_S_WAIT_PIO_DRAIN`.
        const WAIT_PIO_DRAIN = 0x2000_0000;
        /// Kernel: `HFI1_S_AHG_CLEAR`.
        const AHG_CLEAR = 0x4000_0000;
        /// Kernel: `HFI1_S_AHG_VALID`.
        const AHG_VALID = 0x8000_0000;

        /// Kernel: `RVT_S_ANY_WAIT_IO`: waits that stop every packet.
        const ANY_WAIT_IO = Self::WAIT_PIO.bits()
            | Self::WAIT_TX.bits()
            | Self::WAIT_DMA_DESC.bits()
            | Self::WAIT_KMEM.bits();
        /// Kernel: `RVT_S_ANY_WAIT_SEND`: waits that stop new requests.
        const ANY_WAIT_SEND = Self::WAIT_FENCE.bits()
            | Self::WAIT_RDMAR.bits()
            | Self::WAIT_RNR.bits()
            | Self::WAIT_SSN_CREDIT.bits()
            | Self::WAIT_DMA.bits()
            | Self::WAIT_PSN.bits()
            | Self::WAIT_ACK.bits();
        /// Kernel: `HFI1_S_ANY_WAIT_IO` (`RVT_S_ANY_WAIT_IO` and PIO drain).
        const HFI1_ANY_WAIT_IO = Self::ANY_WAIT_IO.bits() | Self::WAIT_PIO_DRAIN.bits();
        /// Kernel: `HFI1_S_ANY_TID_WAIT_SEND`.
        const ANY_TID_WAIT_SEND = Self::WAIT_SSN_CREDIT.bits() | Self::WAIT_DMA.bits();
    }
}

// A `&mut SFlags` over the driver's `u32` word needs the same size and
// alignment (`repr(transparent)` gives it; this states what the platforms
// rely on).
const _: () = assert!(
    core::mem::size_of::<SFlags>() == 4
        && core::mem::align_of::<SFlags>() == core::mem::align_of::<u32>()
        && core::mem::size_of::<TidFlags>() == 4
);

impl SFlags {
    /// True if the QP waits for TID space (`HFI1_S_WAIT_TID_SPACE`).
    pub const fn waiting(&self) -> bool {
        self.contains(Self::WAIT_TID_SPACE)
    }

    /// True if the QP waits on the device's memory-wait list
    /// (`RVT_S_WAIT_KMEM`).
    pub const fn waiting_kmem(&self) -> bool {
        self.contains(Self::WAIT_KMEM)
    }
}

bitflags! {
    /// A QP's TID RDMA private flags. Kernel: `qpriv->s_flags`
    /// (`tid_rdma.h`): the second leg's own copies of `RVT_S_BUSY`,
    /// `RVT_S_RESP_PENDING`, `RVT_S_ACK_PENDING`, `RVT_S_WAIT_ACK` and
    /// `RVT_S_SEND_ONE` (same bit values as in [`SFlags`], a separate
    /// word), and the `HFI1_S_TID_*` / `HFI1_R_TID_*` bits, which use the
    /// bit positions `qp->s_flags` leaves free for them.
    #[repr(transparent)]
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct TidFlags: u32 {
        /// Kernel: `HFI1_S_TID_BUSY_SET`: the second leg built a first-leg
        /// packet and holds the first leg's `RVT_S_BUSY` while it is sent.
        const S_TID_BUSY_SET = 1 << 0;
        /// Kernel: `RVT_S_BUSY` in `priv->s_flags`: the second leg runs.
        const BUSY = SFlags::BUSY.bits();
        /// Kernel: `HFI1_R_TID_RSC_TIMER`: the reap timer is armed.
        const R_TID_RSC_TIMER = 1 << 2;
        /// Kernel: `RVT_S_RESP_PENDING` in `priv->s_flags` (tested by
        /// `hfi1_send_tid_ok()`, never set in 6.1).
        const RESP_PENDING = SFlags::RESP_PENDING.bits();
        /// Kernel: `RVT_S_ACK_PENDING` in `priv->s_flags`: a TID ACK is
        /// owed.
        const ACK_PENDING = SFlags::ACK_PENDING.bits();
        /// Kernel: `HFI1_S_TID_WAIT_INTERLCK`: the requester's interlock
        /// holds the first leg.
        const S_TID_WAIT_INTERLCK = 1 << 5;
        /// Kernel: `HFI1_R_TID_WAIT_INTERLCK`: the responder's interlock
        /// holds a READ response.
        const R_TID_WAIT_INTERLCK = 1 << 6;
        /// Kernel: `RVT_S_WAIT_ACK` in `priv->s_flags`: the second leg
        /// waits for a TID ACK.
        const WAIT_ACK = SFlags::WAIT_ACK.bits();
        /// Kernel: `RVT_S_SEND_ONE` in `priv->s_flags`: send one packet
        /// (a RESYNC), then wait for its ACK.
        const SEND_ONE = SFlags::SEND_ONE.bits();
        /// Kernel: `HFI1_S_TID_RETRY_TIMER`: the TID retry timer is armed.
        const S_TID_RETRY_TIMER = 1 << 17;
        /// Kernel: `HFI1_R_TID_SW_PSN`: the responder checks KDETH PSNs in
        /// software after a flow error.
        const R_TID_SW_PSN = 1 << 19;
    }
}

bitflags! {
    /// The control and status bits of a flow-table register
    /// (`RCV_TID_FLOW_TABLE + 8 * flow`); bits 0..=30 are the next flow
    /// PSN ([`crate::FlowTableReg::next_psn`]). Kernel:
    /// `RCV_TID_FLOW_TABLE_CTRL_*_SMASK`, `RCV_TID_FLOW_TABLE_STATUS_*_SMASK`.
    #[repr(transparent)]
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct FlowCtrl: u64 {
        /// FLOW_VALID.
        const FLOW_VALID = 1 << 32;
        /// HDR_SUPP_EN: header suppression for in-sequence packets.
        const HDR_SUPP_EN = 1 << 33;
        /// KEEP_AFTER_SEQ_ERR.
        const KEEP_AFTER_SEQ_ERR = 1 << 34;
        /// KEEP_ON_GEN_ERR.
        const KEEP_ON_GEN_ERR = 1 << 35;
        /// STATUS_SEQ_MISMATCH.
        const SEQ_MISMATCH = 1 << 37;
        /// STATUS_GEN_MISMATCH.
        const GEN_MISMATCH = 1 << 38;
    }
}

bitflags! {
    /// The one-bit fields of KDETH word 0 (host order). Kernel:
    /// `KDETH_OM_*`, `KDETH_INTR_*`, `KDETH_SH_*` of `exp_rcv.h` (each
    /// `MASK << SHIFT`).
    #[repr(transparent)]
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Kdeth0Flags: u32 {
        /// OM: OFFSET counts 64-byte units (else 4-byte units).
        const OM = 1 << 15;
        /// INTR: interrupt on receipt.
        const INTR = 1 << 28;
        /// SH: header suppression requested.
        const SH = 1 << 29;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each wait test reads its own bit only.
    #[test]
    fn each_wait_test_reads_its_own_bit() {
        let none = SFlags::empty();
        assert!(!none.waiting() && !none.waiting_kmem());
        let kmem = SFlags::WAIT_KMEM;
        assert!(kmem.waiting_kmem() && !kmem.waiting());
        let tid = SFlags::WAIT_TID_SPACE;
        assert!(tid.waiting() && !tid.waiting_kmem());
        assert!(SFlags::all().waiting() && SFlags::all().waiting_kmem());
    }

    #[test]
    fn unnamed_bits_survive_changes() {
        let mut f = SFlags::from_bits_retain(0x0080_0001 | SFlags::WAIT_TID_SPACE.bits());
        assert!(f.waiting());
        f.remove(SFlags::WAIT_TID_SPACE);
        f.insert(SFlags::WAIT_KMEM);
        assert_eq!(f.bits(), 0x0080_0001 | 0x2000, "bit 23 is not ours, kept");
        assert!(f.waiting_kmem() && !f.waiting());
    }

    #[test]
    fn composite_masks_are_the_kernel_ones() {
        assert_eq!(SFlags::ANY_WAIT_IO.bits(), 0x1C00 | 0x2000);
        assert_eq!(SFlags::ANY_WAIT_SEND.bits(), 0xC3E0);
        assert_eq!(SFlags::HFI1_ANY_WAIT_IO.bits(), 0x2000_3C00);
        assert_eq!(SFlags::ANY_TID_WAIT_SEND.bits(), 0x0300);
        // The TID bits sit where qp->s_flags has no bit of their own.
        let tid_only = TidFlags::S_TID_BUSY_SET
            | TidFlags::R_TID_RSC_TIMER
            | TidFlags::S_TID_WAIT_INTERLCK
            | TidFlags::R_TID_WAIT_INTERLCK
            | TidFlags::S_TID_RETRY_TIMER
            | TidFlags::R_TID_SW_PSN;
        let rvt_reused = SFlags::SIGNAL_REQ_WR
            | SFlags::TIMER
            | SFlags::WAIT_FENCE
            | SFlags::WAIT_RDMAR
            | SFlags::UNLIMITED_CREDIT;
        assert_eq!(
            tid_only.bits() & !rvt_reused.bits(),
            1 << 19,
            "only R_TID_SW_PSN is a bit rdmavt leaves unused"
        );
        assert_eq!(TidFlags::all().bits().count_ones(), 11);
    }
}
