// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The traits the engine drives the chip through.
//!
//! Each trait is small and object-per-context: an implementation stands for
//! one receive context's share of the chip. Forwarding impls for `&mut T`
//! let a caller lend its platform to a function generic over the trait
//! (the embedded-hal habit). The kernel implementation lives in `kmod-glue`;
//! the software chip in `sim` (feature `sim`).

use crate::fields::{FlowIndex, FlowTableReg};

/// The type an RcvArray entry is programmed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RcvType {
    /// Kernel: `PT_EXPECTED`: the entry maps a DMA buffer.
    Expected,
    /// Kernel: `PT_INVALID`: the entry maps nothing (fillers, and every
    /// entry being released).
    Invalid,
}

/// A receive context's RcvArray.
pub trait RcvArray {
    /// Programs one entry (absolute index `rcventry`) with a type, a DMA
    /// address and an order (`log2(pages) + 1`; 0 for INVALID).
    /// Kernel: `hfi1_put_tid()`.
    fn put_tid(&mut self, rcventry: u32, ty: RcvType, pa: u64, order: u8);

    /// Fills the write-combining buffer for an entry this call does not
    /// program, so the chip sees whole cache lines.
    /// Kernel: `rcv_array_wc_fill()`.
    fn wc_fill(&mut self, rcventry: u32);
}

/// A receive context's hardware flow table.
pub trait FlowTable {
    /// Writes a flow's register. Kernel: `write_uctxt_csr(RCV_TID_FLOW_TABLE + 8 * flow)`.
    fn write_flow(&mut self, flow: FlowIndex, value: FlowTableReg);

    /// Reads a flow's register back (the chip's next expected flow PSN is
    /// in its low 31 bits). Kernel: `read_uctxt_csr(RCV_TID_FLOW_TABLE + 8 * flow)`.
    fn read_flow(&self, flow: FlowIndex) -> FlowTableReg;
}

impl<T: RcvArray + ?Sized> RcvArray for &mut T {
    fn put_tid(&mut self, rcventry: u32, ty: RcvType, pa: u64, order: u8) {
        (**self).put_tid(rcventry, ty, pa, order);
    }

    fn wc_fill(&mut self, rcventry: u32) {
        (**self).wc_fill(rcventry);
    }
}

impl<T: FlowTable + ?Sized> FlowTable for &mut T {
    fn write_flow(&mut self, flow: FlowIndex, value: FlowTableReg) {
        (**self).write_flow(flow, value);
    }

    fn read_flow(&self, flow: FlowIndex) -> FlowTableReg {
        (**self).read_flow(flow)
    }
}
