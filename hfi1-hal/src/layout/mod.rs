// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The driver's structures and numbers as the engine sees them: one table,
//! checked on both sides at build time.
//!
//! The kernel platform reaches the driver's own state in the driver's own
//! structures (`qp->s_flags`, `qpriv->flow_state`, a request's flow ring,
//! the context's groups and queues). What it reads and writes there is
//! described once, here:
//!
//! - [`VALUES`]: the flag values and sizes the engine shares with the
//!   driver (`HFI1_S_WAIT_TID_SPACE`, `RXE_NUM_TID_FLOWS`, the flow table
//!   bits, ...), each taken from this crate's own constants;
//! - [`FIELDS`] and [`SIZES`]: offset and size of every field of the
//!   driver's structures the engine touches, and the size of each
//!   structure; the `#[repr(C)]` mirrors (`CTidFlowState`,
//!   `CTidRdmaFlow`, ...) are how Rust code reads them, and a `const`
//!   assertion next to each mirror field checks the mirror against the
//!   table.
//!
//! `kmod-glue` turns the table into `include/hfi1_tid_layout.h` (its test
//! `layout.rs` fails if the file is stale), whose macros check the real
//! structures and constants of the kernel source being built with
//! `BUILD_BUG_ON` (`offsetof`, `sizeof_field`, `sizeof`, the values, and the
//! bit positions of `struct tid_rdma_pageset`): in `hfi1/hfi1_tid_layout.c`
//! for the headers, inside `tid_rdma.c` (through the routed wrappers) for
//! the constants that file defines itself. A kernel whose layout differs
//! fails to build, rather than run with the wrong offsets. No kernel source
//! text is in the table: names, numbers and the mirrors' field types.
//!
//! Only structures whose layout does not depend on the kernel's
//! configuration are mirrored (no spinlock or debug member inside). Fields
//! of configuration-dependent structures (`struct rvt_qp`,
//! `struct hfi1_qp_priv`, `struct hfi1_ctxtdata`) are reached through
//! pointers the C adapter computes; the table checks only their type's
//! size there.
//!
//! # Locking
//!
//! Plain data. Who may touch a mirrored field is the driver's rule, kept
//! by the platform that hands out `&mut` to it: a QP's fields under its
//! `s_lock`, a context's under its `exp_lock`.

use core::mem::size_of;

use crate::consts::{
    GENERATION_MASK, GENERATION_RESERVED, KDETH_SEQ_MASK, KDETH_SEQ_SHIFT, MAX_FLOWS, MAX_PAGESETS,
    MAX_READ_SEGS_PER_REQ, MAX_SEGMENT_SIZE, MAX_TID_FLOW_PSN, MAX_WRITE_SEGS_PER_REQ,
    NUM_TID_FLOWS, S_WAIT_KMEM, S_WAIT_TID_SPACE, TID_RDMA_JKEY,
};
use crate::consts::{
    IB_AETH_CREDIT_MASK, IB_NAK_PSN_ERROR, IB_RNR_NAK, MAX_RDMA_ATOMIC, TID_RDMA_SEGMENT_SHIFT,
    TID_RDMA_WRITE_CNT,
};
use crate::fields::FlowTableReg;
use crate::flags::{Kdeth0Flags, SFlags, TidFlags};
use crate::rnr::{
    OPA_LINK_SPEED_25G, OPA_LINK_WIDTH_1X, OPA_LINK_WIDTH_2X, OPA_LINK_WIDTH_3X, OPA_LINK_WIDTH_4X,
};

/// Where the driver defines a value: in a header (checked by
/// `hfi1_tid_layout.c`), or in `tid_rdma.c` itself (checked inside that
/// file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defined {
    /// A header of `drivers/infiniband/hw/hfi1/`.
    Header,
    /// `tid_rdma.c`.
    TidRdmaC,
}

/// One value the engine shares with the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value {
    /// The driver's name for it (a macro or constant expression).
    pub c_name: &'static str,
    /// The value this crate uses.
    pub value: u64,
    /// Where the driver defines it.
    pub defined: Defined,
}

const fn header(c_name: &'static str, value: u64) -> Value {
    Value {
        c_name,
        value,
        defined: Defined::Header,
    }
}

/// A 32-bit flag word's bit (or mask) defined in a header.
const fn flag(c_name: &'static str, bits: u32) -> Value {
    header(c_name, bits as u64)
}

const fn tid_rdma_c(c_name: &'static str, value: u64) -> Value {
    Value {
        c_name,
        value,
        defined: Defined::TidRdmaC,
    }
}

/// Kernel: `PT_EXPECTED` (`hfi.h`), the RcvArray type of a programmed entry.
pub const PT_EXPECTED: u32 = 0;
/// Kernel: `PT_INVALID` (`hfi.h`), the RcvArray type of a released entry.
pub const PT_INVALID: u32 = 3;

/// Kernel: `RCV_TID_FLOW_TABLE` (`chip_registers.h`), the offset of flow
/// 0's register in a context's user CSR space (`write_uctxt_csr()`); flow
/// `f`'s is 8 f further.
pub const RCV_TID_FLOW_TABLE: u32 = 0x130_0800;
/// Kernel: `DMA_FROM_DEVICE` (`enum dma_data_direction`).
pub const DMA_FROM_DEVICE: i32 = 2;
/// Kernel: `RVT_SEGSZ` (`rdmavt_mr.h`), segments per `struct
/// rvt_segarray` of a memory region's map.
pub const RVT_SEGSZ: u16 = 256;

/// The values, with the driver's names.
pub const VALUES: &[Value] = &[
    header("HFI1_S_WAIT_TID_SPACE", S_WAIT_TID_SPACE as u64),
    header("RVT_S_WAIT_KMEM", S_WAIT_KMEM as u64),
    header("RXE_NUM_TID_FLOWS", NUM_TID_FLOWS as u64),
    header("TID_RDMA_MAX_SEGMENT_SIZE", MAX_SEGMENT_SIZE as u64),
    header("TID_RDMA_MAX_PAGES", MAX_PAGESETS as u64),
    header("HFI1_KDETH_BTH_SEQ_SHIFT", KDETH_SEQ_SHIFT as u64),
    header("HFI1_KDETH_BTH_SEQ_MASK", KDETH_SEQ_MASK as u64),
    header("PT_EXPECTED", PT_EXPECTED as u64),
    header("PT_INVALID", PT_INVALID as u64),
    header("RCV_TID_FLOW_TABLE", RCV_TID_FLOW_TABLE as u64),
    header("DMA_FROM_DEVICE", DMA_FROM_DEVICE as u64),
    header("RVT_SEGSZ", RVT_SEGSZ as u64),
    flag("RVT_S_SIGNAL_REQ_WR", SFlags::SIGNAL_REQ_WR.bits()),
    flag("RVT_S_BUSY", SFlags::BUSY.bits()),
    flag("RVT_S_TIMER", SFlags::TIMER.bits()),
    flag("RVT_S_RESP_PENDING", SFlags::RESP_PENDING.bits()),
    flag("RVT_S_ACK_PENDING", SFlags::ACK_PENDING.bits()),
    flag("RVT_S_WAIT_FENCE", SFlags::WAIT_FENCE.bits()),
    flag("RVT_S_WAIT_RDMAR", SFlags::WAIT_RDMAR.bits()),
    flag("RVT_S_WAIT_RNR", SFlags::WAIT_RNR.bits()),
    flag("RVT_S_WAIT_SSN_CREDIT", SFlags::WAIT_SSN_CREDIT.bits()),
    flag("RVT_S_WAIT_DMA", SFlags::WAIT_DMA.bits()),
    flag("RVT_S_WAIT_PIO", SFlags::WAIT_PIO.bits()),
    flag("RVT_S_WAIT_TX", SFlags::WAIT_TX.bits()),
    flag("RVT_S_WAIT_DMA_DESC", SFlags::WAIT_DMA_DESC.bits()),
    flag("RVT_S_WAIT_PSN", SFlags::WAIT_PSN.bits()),
    flag("RVT_S_WAIT_ACK", SFlags::WAIT_ACK.bits()),
    flag("RVT_S_SEND_ONE", SFlags::SEND_ONE.bits()),
    flag("RVT_S_UNLIMITED_CREDIT", SFlags::UNLIMITED_CREDIT.bits()),
    flag("RVT_S_ECN", SFlags::ECN.bits()),
    flag("HFI1_S_WAIT_HALT", SFlags::WAIT_HALT.bits()),
    flag("HFI1_S_WAIT_TID_RESP", SFlags::WAIT_TID_RESP.bits()),
    flag("HFI1_S_WAIT_PIO_DRAIN", SFlags::WAIT_PIO_DRAIN.bits()),
    flag("HFI1_S_AHG_CLEAR", SFlags::AHG_CLEAR.bits()),
    flag("HFI1_S_AHG_VALID", SFlags::AHG_VALID.bits()),
    flag("RVT_S_ANY_WAIT_IO", SFlags::ANY_WAIT_IO.bits()),
    flag("RVT_S_ANY_WAIT_SEND", SFlags::ANY_WAIT_SEND.bits()),
    flag("HFI1_S_ANY_WAIT_IO", SFlags::HFI1_ANY_WAIT_IO.bits()),
    flag("HFI1_S_ANY_TID_WAIT_SEND", SFlags::ANY_TID_WAIT_SEND.bits()),
    flag("HFI1_S_TID_BUSY_SET", TidFlags::S_TID_BUSY_SET.bits()),
    flag("HFI1_R_TID_RSC_TIMER", TidFlags::R_TID_RSC_TIMER.bits()),
    flag(
        "HFI1_S_TID_WAIT_INTERLCK",
        TidFlags::S_TID_WAIT_INTERLCK.bits(),
    ),
    flag(
        "HFI1_R_TID_WAIT_INTERLCK",
        TidFlags::R_TID_WAIT_INTERLCK.bits(),
    ),
    flag("HFI1_S_TID_RETRY_TIMER", TidFlags::S_TID_RETRY_TIMER.bits()),
    flag("HFI1_R_TID_SW_PSN", TidFlags::R_TID_SW_PSN.bits()),
    flag("KDETH_OM_MASK << KDETH_OM_SHIFT", Kdeth0Flags::OM.bits()),
    flag(
        "KDETH_INTR_MASK << KDETH_INTR_SHIFT",
        Kdeth0Flags::INTR.bits(),
    ),
    flag("KDETH_SH_MASK << KDETH_SH_SHIFT", Kdeth0Flags::SH.bits()),
    header("HFI1_TID_RDMA_WRITE_CNT", TID_RDMA_WRITE_CNT as u64),
    header("HFI1_MAX_RDMA_ATOMIC", MAX_RDMA_ATOMIC as u64),
    header("TID_RDMA_SEGMENT_SHIFT", TID_RDMA_SEGMENT_SHIFT as u64),
    header("IB_RNR_NAK", IB_RNR_NAK as u64),
    header("IB_NAK_PSN_ERROR", IB_NAK_PSN_ERROR as u64),
    header("IB_AETH_CREDIT_MASK", IB_AETH_CREDIT_MASK as u64),
    header("OPA_LINK_SPEED_25G", OPA_LINK_SPEED_25G as u64),
    header("OPA_LINK_WIDTH_1X", OPA_LINK_WIDTH_1X as u64),
    header("OPA_LINK_WIDTH_2X", OPA_LINK_WIDTH_2X as u64),
    header("OPA_LINK_WIDTH_3X", OPA_LINK_WIDTH_3X as u64),
    header("OPA_LINK_WIDTH_4X", OPA_LINK_WIDTH_4X as u64),
    tid_rdma_c("GENERATION_MASK", GENERATION_MASK as u64),
    tid_rdma_c("KERN_GENERATION_RESERVED", GENERATION_RESERVED as u64),
    tid_rdma_c("MAX_TID_FLOW_PSN", MAX_TID_FLOW_PSN as u64),
    tid_rdma_c("TID_RDMA_JKEY", TID_RDMA_JKEY as u64),
    tid_rdma_c(
        "TID_RDMA_MAX_READ_SEGS_PER_REQ",
        MAX_READ_SEGS_PER_REQ as u64,
    ),
    tid_rdma_c(
        "TID_RDMA_MAX_WRITE_SEGS_PER_REQ",
        MAX_WRITE_SEGS_PER_REQ as u64,
    ),
    tid_rdma_c(
        "RCV_TID_FLOW_TABLE_CTRL_FLOW_VALID_SMASK",
        FlowTableReg::FLOW_VALID,
    ),
    tid_rdma_c(
        "RCV_TID_FLOW_TABLE_CTRL_HDR_SUPP_EN_SMASK",
        FlowTableReg::HDR_SUPP_EN,
    ),
    tid_rdma_c(
        "RCV_TID_FLOW_TABLE_CTRL_KEEP_AFTER_SEQ_ERR_SMASK",
        FlowTableReg::KEEP_AFTER_SEQ_ERR,
    ),
    tid_rdma_c(
        "RCV_TID_FLOW_TABLE_CTRL_KEEP_ON_GEN_ERR_SMASK",
        FlowTableReg::KEEP_ON_GEN_ERR,
    ),
    tid_rdma_c(
        "RCV_TID_FLOW_TABLE_STATUS_SEQ_MISMATCH_SMASK",
        FlowTableReg::SEQ_MISMATCH,
    ),
    tid_rdma_c(
        "RCV_TID_FLOW_TABLE_STATUS_GEN_MISMATCH_SMASK",
        FlowTableReg::GEN_MISMATCH,
    ),
];

/// One field of a driver structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The structure (`struct <c_struct>`).
    pub c_struct: &'static str,
    /// The member, as `offsetof` names it.
    pub c_field: &'static str,
    /// Its offset; `None` for a structure whose layout depends on the
    /// kernel's configuration (only the size is checked then).
    pub offset: Option<usize>,
    /// Its size (`sizeof_field`).
    pub size: usize,
}

/// The size of one driver structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// The structure (`struct <c_struct>`).
    pub c_struct: &'static str,
    /// `sizeof(struct <c_struct>)`.
    pub size: usize,
}

mod mirrors;

pub use mirrors::{
    CExpTidSet, CFlowState, CKernTidNode, CListHead, CRvtSge, CRvtSgeState, CTidFlowState,
    CTidGroup, CTidQueue, CTidRdmaFlow, CTidRdmaPageset, CTidRdmaRequest,
};
use mirrors::{
    EXP_TID_SET_FIELDS, FLOW_STATE_FIELDS, KERN_TID_NODE_FIELDS, LIST_HEAD_FIELDS, RVT_SGE_FIELDS,
    RVT_SGE_STATE_FIELDS, TID_FLOW_STATE_FIELDS, TID_GROUP_FIELDS, TID_QUEUE_FIELDS,
    TID_RDMA_FLOW_FIELDS, TID_RDMA_REQUEST_FIELDS,
};

/// A field of a configuration-dependent structure: size only.
const fn outer(c_struct: &'static str, c_field: &'static str, size: usize) -> Field {
    Field {
        c_struct,
        c_field,
        offset: None,
        size,
    }
}

/// Fields of configuration-dependent structures: only their size (and so
/// their type's width) is checked; the C adapter hands out pointers to
/// them.
const OUTER_FIELDS: &[Field] = &[
    outer("rvt_qp", "s_flags", 4),
    outer("hfi1_qp_priv", "flow_state", size_of::<CTidFlowState>()),
    outer("hfi1_qp_priv", "tid_wait", size_of::<CListHead>()),
    outer("hfi1_qp_priv", "tid_enqueue", 4),
    outer("hfi1_ctxtdata", "flow_mask", 8),
    outer(
        "hfi1_ctxtdata",
        "flows",
        NUM_TID_FLOWS * size_of::<CTidFlowState>(),
    ),
    outer("hfi1_ctxtdata", "tid_group_list", size_of::<CExpTidSet>()),
    outer("hfi1_ctxtdata", "tid_used_list", size_of::<CExpTidSet>()),
    outer("hfi1_ctxtdata", "tid_full_list", size_of::<CExpTidSet>()),
    outer("hfi1_ctxtdata", "flow_queue", size_of::<CTidQueue>()),
    outer("hfi1_ctxtdata", "rarr_queue", size_of::<CTidQueue>()),
    outer("hfi1_ctxtdata", "groups", 8),
    outer("hfi1_ctxtdata", "jkey", 2),
    outer("hfi1_ibdev", "n_tidwait", 8),
];

/// Every field in the table: the mirrors' and the outer structures'.
pub const FIELDS: &[&[Field]] = &[
    LIST_HEAD_FIELDS,
    TID_FLOW_STATE_FIELDS,
    FLOW_STATE_FIELDS,
    TID_GROUP_FIELDS,
    EXP_TID_SET_FIELDS,
    TID_QUEUE_FIELDS,
    KERN_TID_NODE_FIELDS,
    TID_RDMA_FLOW_FIELDS,
    RVT_SGE_FIELDS,
    RVT_SGE_STATE_FIELDS,
    TID_RDMA_REQUEST_FIELDS,
    OUTER_FIELDS,
];

/// The size of mirror `T`, as `struct <c_struct>`'s.
const fn size<T>(c_struct: &'static str) -> Size {
    Size {
        c_struct,
        size: size_of::<T>(),
    }
}

/// The size of every mirrored structure.
pub const SIZES: &[Size] = &[
    size::<CListHead>("list_head"),
    size::<CTidFlowState>("tid_flow_state"),
    size::<CFlowState>("flow_state"),
    size::<CTidGroup>("tid_group"),
    size::<CExpTidSet>("exp_tid_set"),
    size::<CTidQueue>("tid_queue"),
    size::<CKernTidNode>("kern_tid_node"),
    size::<CTidRdmaPageset>("tid_rdma_pageset"),
    size::<CTidRdmaFlow>("tid_rdma_flow"),
    size::<CRvtSge>("rvt_sge"),
    size::<CRvtSgeState>("rvt_sge_state"),
    size::<CTidRdmaRequest>("tid_rdma_request"),
];

// `MAX_FLOWS` is `roundup_pow_of_two(MAX_REQ + 1)` in tid_rdma.c, which the
// compiler does not fold for BUILD_BUG_ON (a statement expression under
// `max_t`); its two inputs are in the table, and the rule is checked here.
const _: () = {
    let max_req = if MAX_READ_SEGS_PER_REQ > MAX_WRITE_SEGS_PER_REQ {
        MAX_READ_SEGS_PER_REQ
    } else {
        MAX_WRITE_SEGS_PER_REQ
    };
    assert!(MAX_FLOWS == (max_req + 1).next_power_of_two());
};

// The engine's own constants agree with what the mirrors hold.
const _: () = assert!(NUM_TID_FLOWS <= u8::MAX as usize);
const _: () = assert!(MAX_PAGESETS <= u8::MAX as usize);
const _: () = assert!(
    S_WAIT_TID_SPACE == 1 << 28,
    "HFI1_S_WAIT_TID_SPACE is BIT(28)"
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The C name a flag's value is checked under, if the table has it.
    fn checked(candidates: &[alloc::string::String], bits: u64) -> bool {
        VALUES
            .iter()
            .any(|v| candidates.iter().any(|c| c == v.c_name) && v.value == bits)
    }

    /// Every bit the flag types name (and every composite) is in the table
    /// with the same value, so the kernel build checks it: a flag added
    /// without its check fails here.
    #[test]
    fn every_named_flag_is_checked_against_the_headers() {
        use alloc::format;
        use alloc::vec;
        use bitflags::Flags;
        for f in SFlags::FLAGS {
            let n = f.name();
            let c = match n.strip_prefix("HFI1_") {
                Some(rest) => vec![format!("HFI1_S_{rest}")],
                None => vec![format!("RVT_S_{n}"), format!("HFI1_S_{n}")],
            };
            assert!(checked(&c, u64::from(f.value().bits())), "SFlags::{n}");
        }
        for f in TidFlags::FLAGS {
            let n = f.name();
            let c = vec![format!("HFI1_{n}"), format!("RVT_S_{n}")];
            assert!(checked(&c, u64::from(f.value().bits())), "TidFlags::{n}");
        }
        for f in crate::flags::FlowCtrl::FLAGS {
            let n = f.name();
            let c = vec![
                format!("RCV_TID_FLOW_TABLE_CTRL_{n}_SMASK"),
                format!("RCV_TID_FLOW_TABLE_STATUS_{n}_SMASK"),
            ];
            assert!(checked(&c, f.value().bits()), "FlowCtrl::{n}");
        }
        for f in Kdeth0Flags::FLAGS {
            let n = f.name();
            let c = vec![format!("KDETH_{n}_MASK << KDETH_{n}_SHIFT")];
            assert!(checked(&c, u64::from(f.value().bits())), "Kdeth0Flags::{n}");
        }
    }

    /// The context's flow table is 32 records (SPEC 2, the driver's
    /// `flows[RXE_NUM_TID_FLOWS]`), each a `tid_flow_state`, and a QP's
    /// flow state is one such record.
    #[test]
    fn the_flow_table_field_is_thirty_two_flow_records() {
        let size = |s: &str, f: &str| {
            FIELDS
                .iter()
                .flat_map(|t| t.iter())
                .find(|x| x.c_struct == s && x.c_field == f)
                .map(|x| x.size)
        };
        let one = size_of::<CTidFlowState>();
        assert_eq!(size("hfi1_ctxtdata", "flows"), Some(32 * one));
        assert_eq!(size("hfi1_qp_priv", "flow_state"), Some(one));
    }

    #[test]
    fn every_value_and_field_is_named_once() {
        let mut names: alloc::vec::Vec<_> = VALUES.iter().map(|v| v.c_name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len());
        let mut fields: alloc::vec::Vec<_> = FIELDS
            .iter()
            .flat_map(|f| f.iter())
            .map(|f| (f.c_struct, f.c_field))
            .collect();
        fields.sort_unstable();
        let n = fields.len();
        fields.dedup();
        assert_eq!(n, fields.len());
        assert!(n > 40);
    }
}
