// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The driver's numbers (SPEC §2).
//!
//! Each constant names its kernel counterpart in its doc line so a reader of
//! the C driver can find it. The flag words are [`crate::flags`]; the
//! RNR NAK syndrome is [`IB_RNR_NAK`].

use crate::flags::SFlags;

/// Kernel: `PAGE_SHIFT` (4 KiB pages on x86-64).
pub const PAGE_SHIFT: u32 = 12;
/// Kernel: `PAGE_SIZE`.
pub const PAGE_SIZE: u32 = 1 << PAGE_SHIFT;

/// Kernel: `TID_RDMA_MAX_SEGMENT_SIZE`, the default `max_len` of a segment.
pub const MAX_SEGMENT_SIZE: u32 = 256 * 1024;
/// Pages in the largest segment (64): the capacity of every per-segment array.
pub const MAX_SEGMENT_PAGES: usize = (MAX_SEGMENT_SIZE / PAGE_SIZE) as usize;
/// Kernel: `TID_RDMA_MAX_PAGES`, page sets one segment can produce (64).
pub const MAX_PAGESETS: usize = MAX_SEGMENT_PAGES;
/// Kernel: `MAX_EXPECTED_BUFFER`, the largest buffer one RcvArray entry maps.
pub const MAX_EXPECTED_BUFFER: u32 = 2 * 1024 * 1024;
/// Kernel: `MAX_EXPECTED_PAGES` (512).
pub const MAX_EXPECTED_PAGES: u32 = MAX_EXPECTED_BUFFER / PAGE_SIZE;

/// Kernel: `RXE_NUM_TID_FLOWS`, hardware flows per receive context.
pub const NUM_TID_FLOWS: usize = 32;
/// Kernel: `RXE_NUM_TID_FLOWS` used as an index: "this QP holds no flow".
pub const FLOW_INDEX_NONE: u8 = NUM_TID_FLOWS as u8;

/// Kernel: `dd->rcv_entries.group_size`, RcvArray entries per TID group.
pub const TID_GROUP_SIZE: usize = 8;
/// A full group's map (all eight entries taken).
pub const TID_GROUP_FULL_MAP: u8 = 0xFF;
/// The most TID groups a context can own (the RcvArray has 2048 entries per
/// context at most on this chip; 2048 / 8).
pub const MAX_TID_GROUPS: usize = 256;

/// Kernel: `HFI1_KDETH_BTH_SEQ_SHIFT`, bits of the KDETH sequence.
pub const KDETH_SEQ_SHIFT: u32 = 11;
/// Kernel: `HFI1_KDETH_BTH_SEQ_MASK` (0x7FF).
pub const KDETH_SEQ_MASK: u32 = (1 << KDETH_SEQ_SHIFT) - 1;
/// Kernel: `MAX_TID_FLOW_PSN`, PSNs in one generation (the last one reserved).
pub const MAX_TID_FLOW_PSN: u32 = 1 << KDETH_SEQ_SHIFT;

/// Kernel: `GENERATION_MASK` (20 bits).
pub const GENERATION_MASK: u32 = 0xF_FFFF;
/// Kernel: `KERN_GENERATION_RESERVED`: written to disable a flow, never live.
pub const GENERATION_RESERVED: u32 = GENERATION_MASK;

/// Kernel: `PSN_MASK` for this hardware's 31-bit PSNs.
pub const PSN_MASK: u32 = 0x7FFF_FFFF;
/// Kernel: `PSN_SHIFT`: compare PSNs by the sign of `(a - b) << 1`.
pub const PSN_SHIFT: u32 = 1;

/// Kernel: `TID_RDMA_MAX_READ_SEGS_PER_REQ`.
pub const MAX_READ_SEGS_PER_REQ: usize = 6;
/// Kernel: `TID_RDMA_MAX_WRITE_SEGS_PER_REQ`.
pub const MAX_WRITE_SEGS_PER_REQ: usize = 4;
/// Kernel: `MAX_FLOWS`: flow records per request, the next power of two above
/// the larger of the two limits above.
pub const MAX_FLOWS: usize = 8;

/// Kernel: `TID_RDMA_JKEY`, the kernel's J_KEY for TID RDMA.
pub const TID_RDMA_JKEY: u16 = 32;
/// Kernel: `RVT_KDETH_QP_PREFIX`.
pub const KDETH_QP_PREFIX: u32 = 0x80;
/// Kernel: `RVT_KDETH_QP_PREFIX_SHIFT`.
pub const KDETH_QP_PREFIX_SHIFT: u32 = 16;

/// Kernel: `TID_OP(x)` base: the TID RDMA opcodes are `0xE0 + n`.
pub const TID_OP_BASE: u8 = 0xE0;
/// Kernel: `IB_OPCODE_TID_RDMA_WRITE_REQ`.
pub const OP_TID_RDMA_WRITE_REQ: u8 = TID_OP_BASE;
/// Kernel: `IB_OPCODE_TID_RDMA_WRITE_RESP`.
pub const OP_TID_RDMA_WRITE_RESP: u8 = TID_OP_BASE + 1;
/// Kernel: `IB_OPCODE_TID_RDMA_WRITE_DATA`.
pub const OP_TID_RDMA_WRITE_DATA: u8 = TID_OP_BASE + 2;
/// Kernel: `IB_OPCODE_TID_RDMA_WRITE_DATA_LAST`.
pub const OP_TID_RDMA_WRITE_DATA_LAST: u8 = TID_OP_BASE + 3;
/// Kernel: `IB_OPCODE_TID_RDMA_READ_REQ`.
pub const OP_TID_RDMA_READ_REQ: u8 = TID_OP_BASE + 4;
/// Kernel: `IB_OPCODE_TID_RDMA_READ_RESP`.
pub const OP_TID_RDMA_READ_RESP: u8 = TID_OP_BASE + 5;
/// Kernel: `IB_OPCODE_TID_RDMA_RESYNC`.
pub const OP_TID_RDMA_RESYNC: u8 = TID_OP_BASE + 6;
/// Kernel: `IB_OPCODE_TID_RDMA_ACK`.
pub const OP_TID_RDMA_ACK: u8 = TID_OP_BASE + 7;

/// Kernel: `HFI1_S_WAIT_TID_SPACE` (`qp.h`, BIT(28)), the QP flag set in
/// `qp->s_flags` while it waits on a queue ([`SFlags::WAIT_TID_SPACE`]).
/// Not `HFI1_S_WAIT_TID_RESP` (BIT(27)); the driver's adapter checks the
/// value against the header of the kernel it is built for.
pub const S_WAIT_TID_SPACE: u32 = SFlags::WAIT_TID_SPACE.bits();

/// Kernel: `RVT_S_WAIT_KMEM` (`rdmavt_qp.h`), the QP flag set in
/// `qp->s_flags` while it waits on the device's memory-wait list
/// (`hfi1_wait_kmem()`) ([`SFlags::WAIT_KMEM`]).
pub const S_WAIT_KMEM: u32 = SFlags::WAIT_KMEM.bits();

/// Kernel: `HFI1_S_WAIT_HALT` (`qp.h`): the first leg is halted while a
/// RESYNC is outstanding ([`SFlags::WAIT_HALT`]).
pub const S_WAIT_HALT: u32 = SFlags::WAIT_HALT.bits();

/// Kernel: `TID_RDMA_SEGMENT_SHIFT` (`tid_rdma.h`): `log2` of
/// [`MAX_SEGMENT_SIZE`].
pub const TID_RDMA_SEGMENT_SHIFT: u32 = 18;

/// Kernel: `HFI1_TID_RDMA_WRITE_CNT` (`tid_rdma.h`): TID RDMA WRITEs a
/// requester may have started and not completed, and the extra ack-queue
/// entries the responder keeps for them.
pub const TID_RDMA_WRITE_CNT: usize = 8;

/// Kernel: `HFI1_MAX_RDMA_ATOMIC` (`verbs.h`): the device's
/// `max_rdma_atomic` (RDMA READ and atomic responses in flight).
pub const MAX_RDMA_ATOMIC: usize = 16;

/// Ack-queue entries of a QP (25). Kernel: `rvt_max_atomic(rdi)` =
/// `max_rdma_atomic + extra_rdma_atomic + 1` with hfi1's
/// `HFI1_MAX_RDMA_ATOMIC` and `HFI1_TID_RDMA_WRITE_CNT`; the queue's
/// indices wrap after `rvt_size_atomic(rdi)` = [`ACK_QUEUE_ENTRIES`] - 1.
pub const ACK_QUEUE_ENTRIES: usize = MAX_RDMA_ATOMIC + TID_RDMA_WRITE_CNT + 1;

/// Kernel: `IB_RNR_NAK` (`ib_hdrs.h`): the AETH syndrome of an RNR NAK;
/// the timer index goes in its low five bits ([`IB_AETH_CREDIT_MASK`]).
pub const IB_RNR_NAK: u8 = 0x20;
/// Kernel: `IB_NAK_PSN_ERROR` (`ib_hdrs.h`): the AETH syndrome of a PSN
/// sequence error NAK.
pub const IB_NAK_PSN_ERROR: u8 = 0x60;
/// Kernel: `IB_AETH_CREDIT_MASK` (`ib_hdrs.h`): the five-bit credit (or
/// RNR timer) field of the AETH syndrome.
pub const IB_AETH_CREDIT_MASK: u8 = 0x1F;

// The checks the C driver makes with BUILD_BUG_ON, and the ones our array
// capacities rely on.
const _: () = assert!(MAX_FLOWS.is_power_of_two());
const _: () = assert!(MAX_FLOWS > MAX_READ_SEGS_PER_REQ && MAX_FLOWS > MAX_WRITE_SEGS_PER_REQ);
const _: () = assert!(MAX_FLOWS / 2 <= MAX_READ_SEGS_PER_REQ);
const _: () = assert!(NUM_TID_FLOWS <= 32, "the flow bitmap is a u32");
const _: () = assert!(TID_GROUP_SIZE == 8, "a group map is a u8");
const _: () = assert!(MAX_EXPECTED_PAGES == 512);
const _: () = assert!(MAX_SEGMENT_PAGES == 64);
const _: () = assert!(
    GENERATION_MASK < (1 << 20)
        && (GENERATION_MASK << KDETH_SEQ_SHIFT) | KDETH_SEQ_MASK == PSN_MASK
);
const _: () = assert!(ACK_QUEUE_ENTRIES == 25);
const _: () = assert!(1 << TID_RDMA_SEGMENT_SHIFT == MAX_SEGMENT_SIZE);

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers on the wire and in the driver's tables are SPEC §2's
    /// (the opcodes, the KDETH sequence, the flow and group sizes): a
    /// constant built from another (`TID_OP_BASE + n`, `1 << shift`) is
    /// checked for the value it must come out as, not for how it is built.
    #[test]
    fn the_constants_are_the_spec_numbers() {
        let ops = [
            OP_TID_RDMA_WRITE_REQ,
            OP_TID_RDMA_WRITE_RESP,
            OP_TID_RDMA_WRITE_DATA,
            OP_TID_RDMA_WRITE_DATA_LAST,
            OP_TID_RDMA_READ_REQ,
            OP_TID_RDMA_READ_RESP,
            OP_TID_RDMA_RESYNC,
            OP_TID_RDMA_ACK,
        ];
        assert_eq!(ops, [0xE0, 0xE1, 0xE2, 0xE3, 0xE4, 0xE5, 0xE6, 0xE7]);
        assert_eq!((PAGE_SIZE, PAGE_SHIFT), (4096, 12));
        assert_eq!((MAX_SEGMENT_SIZE, MAX_SEGMENT_PAGES), (256 * 1024, 64));
        assert_eq!(MAX_PAGESETS, 64);
        assert_eq!((MAX_EXPECTED_BUFFER, MAX_EXPECTED_PAGES), (2 << 20, 512));
        assert_eq!((NUM_TID_FLOWS, FLOW_INDEX_NONE), (32, 32));
        assert_eq!((TID_GROUP_SIZE, TID_GROUP_FULL_MAP), (8, 0xFF));
        assert_eq!((KDETH_SEQ_SHIFT, KDETH_SEQ_MASK), (11, 0x7FF));
        assert_eq!(MAX_TID_FLOW_PSN, 2048);
        assert_eq!((GENERATION_MASK, GENERATION_RESERVED), (0xF_FFFF, 0xF_FFFF));
        assert_eq!((PSN_MASK, PSN_SHIFT), (0x7FFF_FFFF, 1));
        assert_eq!((MAX_READ_SEGS_PER_REQ, MAX_WRITE_SEGS_PER_REQ), (6, 4));
        assert_eq!(MAX_FLOWS, 8);
        assert_eq!(TID_RDMA_JKEY, 32);
        assert_eq!((KDETH_QP_PREFIX, KDETH_QP_PREFIX_SHIFT), (0x80, 16));
        assert_eq!(S_WAIT_TID_SPACE, 0x1000_0000);
        assert_eq!(TID_RDMA_SEGMENT_SHIFT, 18);
        assert_eq!(ACK_QUEUE_ENTRIES, 25);
        assert_eq!(
            (IB_RNR_NAK, IB_NAK_PSN_ERROR, IB_AETH_CREDIT_MASK),
            (0x20, 0x60, 0x1F)
        );
    }
}
