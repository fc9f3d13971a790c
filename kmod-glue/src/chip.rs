// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The chip as the kernel driver reaches it: CSR writes and RcvArray
//! programming as C callbacks.
//!
//! A C caller fills a [`ChipOps`] table once (the rebuilt driver points it at
//! `hfi1_put_tid()`, `rcv_array_wc_fill()` and `write_uctxt_csr()`; the
//! self-test at a register file of its own or at the software chip) and
//! passes it with an opaque `chip` cookie. [`KernelChip`] turns the pair into
//! the `hfi1-hal` platform traits the engine crates are generic over.

use core::ffi::c_void;

use hfi1_hal::{FlowIndex, FlowTable, FlowTableReg, RcvArray, RcvType};

use crate::errno::Errno;

/// `put_tid(chip, rcventry, type, pa, order)`: type 0 = EXPECTED,
/// 1 = INVALID. Kernel: `hfi1_put_tid()`.
pub type PutTidFn =
    unsafe extern "C" fn(chip: *mut c_void, rcventry: u32, ty: u32, pa: u64, order: u32);
/// `wc_fill(chip, rcventry)`. Kernel: `rcv_array_wc_fill()`.
pub type WcFillFn = unsafe extern "C" fn(chip: *mut c_void, rcventry: u32);
/// `write_flow(chip, flow, value)`.
/// Kernel: `write_uctxt_csr(dd, ctxt, RCV_TID_FLOW_TABLE + 8 * flow, value)`.
pub type WriteFlowFn = unsafe extern "C" fn(chip: *mut c_void, flow: u32, value: u64);
/// `read_flow(chip, flow)`.
/// Kernel: `read_uctxt_csr(dd, ctxt, RCV_TID_FLOW_TABLE + 8 * flow)`.
pub type ReadFlowFn = unsafe extern "C" fn(chip: *mut c_void, flow: u32) -> u64;

/// The C side of one receive context's chip access (`struct
/// hfi1_tid_chip_ops` in the header). Every member must be set.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ChipOps {
    /// Programs one RcvArray entry.
    pub put_tid: Option<PutTidFn>,
    /// Write-combining fill of an entry not programmed by this call.
    pub wc_fill: Option<WcFillFn>,
    /// Writes a flow-table register.
    pub write_flow: Option<WriteFlowFn>,
    /// Reads a flow-table register.
    pub read_flow: Option<ReadFlowFn>,
}

/// RcvArray type codes on the C side.
pub const RCV_TYPE_EXPECTED: u32 = 0;
/// See [`RCV_TYPE_EXPECTED`].
pub const RCV_TYPE_INVALID: u32 = 1;

/// A checked [`ChipOps`] bound to its cookie: implements the platform
/// traits by calling the C functions.
///
/// # Invariants
///
/// The callbacks and `chip` were promised valid for as long as this value
/// lives (see [`KernelChip::new`]).
#[derive(Debug)]
pub struct KernelChip {
    put_tid: PutTidFn,
    wc_fill: WcFillFn,
    write_flow: WriteFlowFn,
    read_flow: ReadFlowFn,
    chip: *mut c_void,
}

impl KernelChip {
    /// Binds `ops` to `chip`; `EINVAL` if any callback is missing.
    ///
    /// # Safety
    ///
    /// Every callback must be safe to call with `chip` and any flow index
    /// below 32 / any `rcventry`, from any context the engine runs in
    /// (including under spinlocks with interrupts off), for the lifetime of
    /// the returned value.
    pub unsafe fn new(ops: &ChipOps, chip: *mut c_void) -> Result<Self, Errno> {
        match (ops.put_tid, ops.wc_fill, ops.write_flow, ops.read_flow) {
            (Some(put_tid), Some(wc_fill), Some(write_flow), Some(read_flow)) => {
                // INVARIANT: the caller promised validity for our lifetime.
                Ok(Self {
                    put_tid,
                    wc_fill,
                    write_flow,
                    read_flow,
                    chip,
                })
            }
            _ => Err(Errno::INVAL),
        }
    }
}

impl RcvArray for KernelChip {
    fn put_tid(&mut self, rcventry: u32, ty: RcvType, pa: u64, order: u8) {
        let ty = match ty {
            RcvType::Expected => RCV_TYPE_EXPECTED,
            RcvType::Invalid => RCV_TYPE_INVALID,
        };
        // SAFETY: by the type invariant the callback and cookie are valid.
        unsafe { (self.put_tid)(self.chip, rcventry, ty, pa, u32::from(order)) }
    }

    fn wc_fill(&mut self, rcventry: u32) {
        // SAFETY: by the type invariant the callback and cookie are valid.
        unsafe { (self.wc_fill)(self.chip, rcventry) }
    }
}

impl FlowTable for KernelChip {
    fn write_flow(&mut self, flow: FlowIndex, value: FlowTableReg) {
        // SAFETY: by the type invariant the callback and cookie are valid;
        // `flow` is below 32 by construction of `FlowIndex`.
        unsafe { (self.write_flow)(self.chip, u32::from(flow.get()), value.raw()) }
    }

    fn read_flow(&self, flow: FlowIndex) -> FlowTableReg {
        // SAFETY: as in `write_flow`.
        FlowTableReg::from_raw(unsafe { (self.read_flow)(self.chip, u32::from(flow.get())) })
    }
}

#[cfg(feature = "sim")]
pub mod sim {
    //! [`ChipOps`] callbacks on the software chip, so a C test can run the
    //! engine against `hfi1_hal::sim::SimContext` inside the kernel.

    use core::ffi::c_void;

    use hfi1_hal::sim::SimContext;
    use hfi1_hal::{FlowIndex, FlowTable, FlowTableReg, RcvArray, RcvType};

    use super::{ChipOps, RCV_TYPE_EXPECTED};

    /// Recovers the chip from a cookie made by `hfi1_tid_sim_create()`.
    ///
    /// # Safety
    ///
    /// `chip` is null or a live pointer from `hfi1_tid_sim_create()` with no
    /// other reference to it in use.
    unsafe fn chip<'a>(chip: *mut c_void) -> Option<&'a mut SimContext> {
        // SAFETY: guaranteed by the caller.
        unsafe { chip.cast::<SimContext>().as_mut() }
    }

    unsafe extern "C" fn put_tid(c: *mut c_void, rcventry: u32, ty: u32, pa: u64, order: u32) {
        let ty = if ty == RCV_TYPE_EXPECTED {
            RcvType::Expected
        } else {
            RcvType::Invalid
        };
        // SAFETY: `SIM_OPS` is only handed out with sim cookies.
        if let Some(s) = unsafe { chip(c) } {
            s.put_tid(rcventry, ty, pa, u8::try_from(order).unwrap_or(u8::MAX));
        }
    }

    unsafe extern "C" fn wc_fill(c: *mut c_void, rcventry: u32) {
        // SAFETY: as in `put_tid`.
        if let Some(s) = unsafe { chip(c) } {
            s.wc_fill(rcventry);
        }
    }

    unsafe extern "C" fn write_flow(c: *mut c_void, flow: u32, value: u64) {
        // SAFETY: as in `put_tid`.
        if let (Some(s), Some(f)) = (unsafe { chip(c) }, FlowIndex::new(flow)) {
            s.write_flow(f, FlowTableReg::from_raw(value));
        }
    }

    unsafe extern "C" fn read_flow(c: *mut c_void, flow: u32) -> u64 {
        // SAFETY: as in `put_tid`.
        match (unsafe { chip(c) }, FlowIndex::new(flow)) {
            (Some(s), Some(f)) => s.read_flow(f).raw(),
            _ => 0,
        }
    }

    /// The callbacks for a software-chip cookie.
    pub static SIM_OPS: ChipOps = ChipOps {
        put_tid: Some(put_tid),
        wc_fill: Some(wc_fill),
        write_flow: Some(write_flow),
        read_flow: Some(read_flow),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_callback_is_einval() {
        let ops = ChipOps {
            put_tid: None,
            wc_fill: None,
            write_flow: None,
            read_flow: None,
        };
        // SAFETY: no callback is ever called.
        let r = unsafe { KernelChip::new(&ops, core::ptr::null_mut()) };
        assert_eq!(r.err(), Some(Errno::INVAL));
    }
}
