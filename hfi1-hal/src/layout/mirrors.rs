// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The `#[repr(C)]` mirrors of the driver structures whose layout does
//! not depend on the kernel's configuration, each with its rows of the
//! field table and a `const` check of every field against them.

use core::mem::{offset_of, size_of};

use super::Field;
use crate::consts::MAX_PAGESETS;

/// Declares a `#[repr(C)]` mirror of a driver structure, its rows in the
/// table, and a `const` assertion per field that the mirror matches them.
macro_rules! mirror {
    (
        $(#[$meta:meta])*
        $name:ident = $c_struct:literal, $size:literal {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $off:literal, $fsize:literal; )*
        }
        $vis:vis $fields:ident
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        $vis const $fields: &[Field] = &[
            $( Field {
                c_struct: $c_struct,
                c_field: stringify!($field),
                offset: Some($off),
                size: $fsize,
            }, )*
        ];

        const _: () = {
            assert!(size_of::<$name>() == $size, concat!("size of ", $c_struct));
            $(
                assert!(
                    offset_of!($name, $field) == $off,
                    concat!("offset of ", $c_struct, ".", stringify!($field))
                );
                assert!(
                    size_of::<$ty>() == $fsize,
                    concat!("size of ", $c_struct, ".", stringify!($field))
                );
            )*
        };
    };
}

mirror! {
    /// Kernel: `struct list_head`.
    CListHead = "list_head", 16 {
        /// Next entry (the head itself when empty).
        next: *mut CListHead = 0, 8;
        /// Previous entry.
        prev: *mut CListHead = 8, 8;
    }
    pub(super) LIST_HEAD_FIELDS
}

mirror! {
    /// A QP's hardware-flow state. Kernel: `struct tid_flow_state`
    /// (`qpriv->flow_state`; also `rcd->flows[]`, of which the engine uses
    /// only `generation`). `index` and `last_index` are
    /// `RXE_NUM_TID_FLOWS` for "none".
    CTidFlowState = "tid_flow_state", 12 {
        /// The flow's generation.
        generation: u32 = 0, 4;
        /// The next flow sequence to hand out.
        psn: u32 = 4, 4;
        /// The flow the QP holds.
        index: u8 = 8, 1;
        /// The flow it held last.
        last_index: u8 = 9, 1;
    }
    pub(super) TID_FLOW_STATE_FIELDS
}

mirror! {
    /// One segment's sequence numbers. Kernel: `struct flow_state` inside
    /// `struct tid_rdma_flow`.
    CFlowState = "flow_state", 32 {
        /// Protocol flags.
        flags: u32 = 0, 4;
        /// The IB PSN of the response for this flow.
        resp_ib_psn: u32 = 4, 4;
        /// The flow's generation.
        generation: u32 = 8, 4;
        /// First flow sequence.
        spsn: u32 = 12, 4;
        /// Last flow sequence.
        lpsn: u32 = 16, 4;
        /// Next full flow PSN expected.
        r_next_psn: u32 = 20, 4;
        /// First IB PSN.
        ib_spsn: u32 = 24, 4;
        /// Last IB PSN.
        ib_lpsn: u32 = 28, 4;
    }
    pub(super) FLOW_STATE_FIELDS
}

mirror! {
    /// A TID group. Kernel: `struct tid_group` (`exp_rcv.h`).
    CTidGroup = "tid_group", 24 {
        /// Its link on one of the context's three group lists.
        list: CListHead = 0, 16;
        /// Absolute RcvArray index of its first entry.
        base: u32 = 16, 4;
        /// Entries (8).
        size: u8 = 20, 1;
        /// Entries in use.
        used: u8 = 21, 1;
        /// Bit i = entry `base + i` in use.
        map: u8 = 22, 1;
    }
    pub(super) TID_GROUP_FIELDS
}

mirror! {
    /// One of a context's three group lists. Kernel: `struct exp_tid_set`.
    CExpTidSet = "exp_tid_set", 24 {
        /// The list head.
        list: CListHead = 0, 16;
        /// Groups on the list.
        count: u32 = 16, 4;
    }
    pub(super) EXP_TID_SET_FIELDS
}

mirror! {
    /// One of a context's two wait queues. Kernel: `struct tid_queue`
    /// (`hfi.h`): `rcd->flow_queue`, `rcd->rarr_queue`.
    CTidQueue = "tid_queue", 24 {
        /// QPs waiting, linked through `qpriv->tid_wait`.
        queue_head: CListHead = 0, 16;
        /// QPs that ever joined.
        enqueue: u32 = 16, 4;
        /// QPs that ever left.
        dequeue: u32 = 20, 4;
    }
    pub(super) TID_QUEUE_FIELDS
}

mirror! {
    /// One group a segment's RcvArray entries are in. Kernel:
    /// `struct kern_tid_node`.
    CKernTidNode = "kern_tid_node", 16 {
        /// The group (in `rcd->groups`).
        grp: *mut CTidGroup = 0, 8;
        /// The group's map when it was chosen.
        map: u8 = 8, 1;
        /// Entries taken in it.
        cnt: u8 = 9, 1;
    }
    pub(super) KERN_TID_NODE_FIELDS
}

/// One page set in the driver's bitfield form. Kernel:
/// `struct tid_rdma_pageset` (`dma_addr_t addr:48; u8 idx:8; u8 count:7;
/// u8 mapped:1`), one 64-bit word on x86-64: `addr` in bits 0..48, `idx`
/// in 48..56, `count` in 56..63, `mapped` in bit 63 (checked by
/// `BUILD_BUG_ON` on the real structure in `hfi1_tid_layout.h`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CTidRdmaPageset(pub u64);

impl CTidRdmaPageset {
    /// Bit position and width of `addr`.
    pub const ADDR: (u32, u32) = (0, 48);
    /// Bit position and width of `idx`.
    pub const IDX: (u32, u32) = (48, 8);
    /// Bit position and width of `count`.
    pub const COUNT: (u32, u32) = (56, 7);
    /// Bit position and width of `mapped`.
    pub const MAPPED: (u32, u32) = (63, 1);

    const fn get(self, (at, bits): (u32, u32)) -> u64 {
        (self.0 >> at) & ((1u64 << bits) - 1)
    }

    const fn with(self, (at, bits): (u32, u32), v: u64) -> Self {
        let mask = ((1u64 << bits) - 1) << at;
        Self((self.0 & !mask) | ((v << at) & mask))
    }

    /// The bus address (48 bits).
    pub const fn addr(self) -> u64 {
        self.get(Self::ADDR)
    }

    /// The index of the set's first page in the segment's page list.
    pub const fn idx(self) -> u8 {
        self.get(Self::IDX) as u8
    }

    /// Pages in the set (0: filler).
    pub const fn count(self) -> u8 {
        self.get(Self::COUNT) as u8
    }

    /// True once DMA-mapped.
    pub const fn mapped(self) -> bool {
        self.get(Self::MAPPED) != 0
    }

    /// With `addr` set (low 48 bits kept, as the bitfield assignment does).
    pub const fn with_addr(self, addr: u64) -> Self {
        self.with(Self::ADDR, addr)
    }

    /// With `idx` set.
    pub const fn with_idx(self, idx: u8) -> Self {
        self.with(Self::IDX, idx as u64)
    }

    /// With `count` set (low 7 bits kept).
    pub const fn with_count(self, count: u8) -> Self {
        self.with(Self::COUNT, count as u64)
    }

    /// With `mapped` set.
    pub const fn with_mapped(self, mapped: bool) -> Self {
        self.with(Self::MAPPED, mapped as u64)
    }
}

mirror! {
    /// One segment of a request. Kernel: `struct tid_rdma_flow`.
    CTidRdmaFlow = "tid_rdma_flow", 1856 {
        /// Sequence numbers.
        flow_state: CFlowState = 0, 32;
        /// The request (`struct tid_rdma_request *`).
        req: *mut core::ffi::c_void = 32, 8;
        /// The KDETH QP number of the segment.
        tid_qpn: u32 = 40, 4;
        /// Byte offset in the current TID entry.
        tid_offset: u32 = 44, 4;
        /// Bytes of the segment.
        length: u32 = 48, 4;
        /// Bytes sent.
        sent: u32 = 52, 4;
        /// Groups in `tnode`.
        tnode_cnt: u8 = 56, 1;
        /// TID entries in `tid_entry`.
        tidcnt: u8 = 57, 1;
        /// Current TID entry.
        tid_idx: u8 = 58, 1;
        /// The hardware flow.
        idx: u8 = 59, 1;
        /// Page sets in `pagesets`.
        npagesets: u8 = 60, 1;
        /// Packets of the segment.
        npkts: u8 = 61, 1;
        /// Packets sent or received.
        pkt: u8 = 62, 1;
        /// Packets counted for a RESYNC.
        resync_npkts: u8 = 63, 1;
        /// The groups the entries are in.
        tnode: [CKernTidNode; MAX_PAGESETS] = 64, 1024;
        /// The page sets.
        pagesets: [CTidRdmaPageset; MAX_PAGESETS] = 1088, 512;
        /// The TID entries for the peer.
        tid_entry: [u32; MAX_PAGESETS] = 1600, 256;
    }
    pub(super) TID_RDMA_FLOW_FIELDS
}

mirror! {
    /// One scatter-gather element in use. Kernel: `struct rvt_sge`
    /// (`rdmavt_mr.h`).
    CRvtSge = "rvt_sge", 32 {
        /// The memory region (`struct rvt_mregion *`).
        mr: *mut core::ffi::c_void = 0, 8;
        /// Kernel virtual address of the next byte.
        vaddr: *mut core::ffi::c_void = 8, 8;
        /// Bytes left in the SGE.
        sge_length: u32 = 16, 4;
        /// Bytes left in the current segment of the region's map.
        length: u32 = 20, 4;
        /// Current map index (`mr->map[m]`).
        m: u16 = 24, 2;
        /// Current segment in it (`mr->map[m]->segs[n]`).
        n: u16 = 26, 2;
    }
    pub(super) RVT_SGE_FIELDS
}

mirror! {
    /// A request's scatter list and where its walk stands. Kernel:
    /// `struct rvt_sge_state`.
    CRvtSgeState = "rvt_sge_state", 48 {
        /// The SGEs after the first (`sg_list[isge - 1]` is SGE `isge`).
        sg_list: *mut CRvtSge = 0, 8;
        /// The SGE being walked.
        sge: CRvtSge = 8, 32;
        /// Bytes in the list.
        total_len: u32 = 40, 4;
        /// SGEs in the list.
        num_sge: u8 = 44, 1;
    }
    pub(super) RVT_SGE_STATE_FIELDS
}

mirror! {
    /// One TID RDMA request. Kernel: `struct tid_rdma_request`.
    CTidRdmaRequest = "tid_rdma_request", 152 {
        /// Its QP (`struct rvt_qp *`).
        qp: *mut core::ffi::c_void = 0, 8;
        /// Its receive context (`struct hfi1_ctxtdata *`).
        rcd: *mut core::ffi::c_void = 8, 8;
        /// Its send WQE or ack entry.
        e: *mut core::ffi::c_void = 16, 8;
        /// The `MAX_FLOWS` flow records, or null.
        flows: *mut CTidRdmaFlow = 24, 8;
        /// The request's own scatter list (TID RDMA WRITE).
        ss: CRvtSgeState = 32, 48;
        /// Segments allowed in flight.
        n_flows: u16 = 80, 2;
        /// Next record to set up.
        setup_head: u16 = 82, 2;
        /// Next record to clear.
        clear_tail: u16 = 84, 2;
        /// The record the protocol is building or sending.
        flow_idx: u16 = 86, 2;
        /// Oldest unacknowledged record (TID RDMA WRITE).
        acked_tail: u16 = 88, 2;
        /// Bytes per segment.
        seg_len: u32 = 92, 4;
        /// Bytes of the request.
        total_len: u32 = 96, 4;
        /// Next expected ACK PSN.
        r_ack_psn: u32 = 100, 4;
        /// IB PSN of the next segment's start.
        r_flow_psn: u32 = 104, 4;
        /// IB PSN of the last acknowledged packet.
        r_last_acked: u32 = 108, 4;
        /// IB PSN of the next segment's start (READ).
        s_next_psn: u32 = 112, 4;
        /// Segments of the request.
        total_segs: u32 = 116, 4;
        /// Current segment.
        cur_seg: u32 = 120, 4;
        /// Last completed segment.
        comp_seg: u32 = 124, 4;
        /// Last acknowledged segment.
        ack_seg: u32 = 128, 4;
        /// Next segment to allocate.
        alloc_seg: u32 = 132, 4;
        /// The SGE the walk is at.
        isge: u32 = 136, 4;
        /// ACKs pending.
        ack_pending: u32 = 140, 4;
        /// `enum tid_rdma_req_state`.
        state: u32 = 144, 4;
    }
    pub(super) TID_RDMA_REQUEST_FIELDS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pageset_bits_round_trip() {
        let p = CTidRdmaPageset::default()
            .with_addr(0xFFFF_1234_5678_9000)
            .with_idx(63)
            .with_count(64)
            .with_mapped(true);
        assert_eq!(p.addr(), 0x1234_5678_9000);
        assert_eq!((p.idx(), p.count(), p.mapped()), (63, 64, true));
        assert_eq!(p.0, 0x1234_5678_9000 | 63 << 48 | 64 << 56 | 1 << 63);
        let q = p.with_count(1).with_mapped(false);
        assert_eq!((q.idx(), q.count(), q.mapped()), (63, 1, false));
        assert_eq!(q.addr(), p.addr());
    }
}
