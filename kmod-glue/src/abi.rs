// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The functions a C driver calls (declared in `include/hfi1_tid.h`).
//!
//! Every function is `extern "C"`, has a `hfi1_tid_` name and takes only
//! integers, `#[repr(C)]` structs and opaque pointers. Functions that can
//! fail return `0` or a negative errno. The `# Locking` section of each
//! function names the lock the caller must hold, in the C driver's terms.

use core::ffi::c_void;

use hfi1_hal::{FlowIndex, FlowTable, FlowTableReg, Generation, consts::NUM_TID_FLOWS};

use crate::chip::{ChipOps, KernelChip};
use crate::errno::{self, Errno};

/// The version of this interface; the header's `HFI1_TID_ABI_VERSION` must
/// match (checked by the C glue at load).
pub const ABI_VERSION: u32 = 1;

/// Returns [`ABI_VERSION`].
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_abi_version() -> u32 {
    ABI_VERSION
}

/// The next live flow generation after `generation` (masked to 20 bits,
/// skipping the reserved value).
///
/// Kernel: `kern_flow_generation_next()`.
///
/// # Locking
///
/// None: a pure function.
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_generation_next(generation: u32) -> u32 {
    Generation::masked(generation).next().get()
}

/// Writes every one of the context's 32 flow registers with the reserved
/// generation, which disables the flow (what context init does after
/// choosing the generations). Returns 0 or `-EINVAL` (missing callback).
///
/// Kernel: the register half of `hfi1_kern_init_ctxt_generations()`.
///
/// # Safety
///
/// `ops` is null or points to a valid table whose callbacks accept `chip`.
///
/// # Locking
///
/// The context's `exp_lock`, or exclusive ownership of a context not yet
/// visible to other threads (init).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_flows_disable(ops: *const ChipOps, chip: *mut c_void) -> i32 {
    // SAFETY: the caller promises `ops` is null or valid.
    let Some(ops) = (unsafe { ops.as_ref() }) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: the caller promises the callbacks accept `chip`.
    let mut hw = match unsafe { KernelChip::new(ops, chip) } {
        Ok(hw) => hw,
        Err(e) => return e.to_neg(),
    };
    let off = FlowTableReg::for_generation(Generation::RESERVED);
    for f in 0..NUM_TID_FLOWS as u32 {
        if let Some(flow) = FlowIndex::new(f) {
            hw.write_flow(flow, off);
        }
    }
    errno::ret(Ok(()))
}

#[cfg(feature = "sim")]
pub use sim_abi::*;

#[cfg(feature = "sim")]
mod sim_abi {
    //! The software chip, exported so the kernel self-test can run the
    //! engine between in-kernel chip models.

    use alloc::boxed::Box;
    use core::ffi::c_void;

    use hfi1_hal::sim::SimContext;

    use crate::chip::{ChipOps, sim::SIM_OPS};

    /// Creates a software chip context owning RcvArray entries
    /// `expected_base .. expected_base + entries`. Returns null if
    /// `entries` exceeds 65536 or memory is short.
    ///
    /// # Locking
    ///
    /// None; may allocate (with `GFP_ATOMIC` when the caller cannot sleep).
    #[unsafe(no_mangle)]
    pub extern "C" fn hfi1_tid_sim_create(expected_base: u32, entries: u32) -> *mut c_void {
        if entries > 65536 || expected_base.checked_add(entries).is_none() {
            return core::ptr::null_mut();
        }
        // Both the entry table and the box are fallible allocations; the
        // call log is off.
        let Ok(c) = SimContext::try_new(expected_base, entries) else {
            return core::ptr::null_mut();
        };
        match crate::kplat::try_box(c) {
            Some(b) => Box::into_raw(b).cast(),
            None => core::ptr::null_mut(),
        }
    }

    /// Frees a chip from [`hfi1_tid_sim_create`]; null is ignored.
    ///
    /// # Safety
    ///
    /// `chip` is null or came from [`hfi1_tid_sim_create`] and is not used
    /// again.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn hfi1_tid_sim_destroy(chip: *mut c_void) {
        if !chip.is_null() {
            // SAFETY: the caller gives back ownership of the box.
            drop(unsafe { Box::from_raw(chip.cast::<SimContext>()) });
        }
    }

    /// The callback table for a software-chip cookie.
    #[unsafe(no_mangle)]
    pub extern "C" fn hfi1_tid_sim_ops() -> *const ChipOps {
        &SIM_OPS
    }

    /// Reads a flow register of the software chip (`u64::MAX` for a null
    /// chip or a flow out of range).
    ///
    /// # Safety
    ///
    /// `chip` is null or a live pointer from [`hfi1_tid_sim_create`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn hfi1_tid_sim_read_flow(chip: *const c_void, flow: u32) -> u64 {
        use hfi1_hal::FlowTable;
        // SAFETY: guaranteed by the caller.
        let c = unsafe { chip.cast::<SimContext>().as_ref() };
        match (c, hfi1_hal::FlowIndex::new(flow)) {
            (Some(c), Some(f)) => c.read_flow(f).raw(),
            _ => u64::MAX,
        }
    }

    /// Number of EXPECTED entries and faults (out-of-range writes) of the
    /// software chip, as `expected | faults << 32`; `u64::MAX` for null.
    ///
    /// # Safety
    ///
    /// `chip` is null or a live pointer from [`hfi1_tid_sim_create`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn hfi1_tid_sim_stats(chip: *const c_void) -> u64 {
        // SAFETY: guaranteed by the caller.
        match unsafe { chip.cast::<SimContext>().as_ref() } {
            Some(c) => {
                (c.expected_entries() as u64 & 0xFFFF_FFFF) | (c.faults().min(0xFFFF_FFFF) << 32)
            }
            None => u64::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_next_matches_spec() {
        assert_eq!(hfi1_tid_generation_next(0), 1);
        assert_eq!(hfi1_tid_generation_next(0xFFFFD), 0xFFFFE);
        assert_eq!(hfi1_tid_generation_next(0xFFFFE), 0);
        assert_eq!(hfi1_tid_generation_next(0xFFFFF), 0);
        assert_eq!(hfi1_tid_generation_next(u32::MAX), 0);
        assert_eq!(hfi1_tid_generation_next(0x12_3456), 0x2_3457);
    }

    #[test]
    fn null_ops_is_einval() {
        // SAFETY: null is allowed.
        let r = unsafe { hfi1_tid_flows_disable(core::ptr::null(), core::ptr::null_mut()) };
        assert_eq!(r, -errno::EINVAL);
    }

    #[cfg(feature = "sim")]
    #[test]
    fn flows_disable_on_sim() {
        let chip = hfi1_tid_sim_create(0, 64);
        assert!(!chip.is_null());
        // SAFETY: `SIM_OPS` with a sim cookie.
        let r = unsafe { hfi1_tid_flows_disable(hfi1_tid_sim_ops(), chip) };
        assert_eq!(r, 0);
        for f in 0..32 {
            // SAFETY: live chip.
            let v = unsafe { hfi1_tid_sim_read_flow(chip, f) };
            assert_eq!(v, FlowTableReg::for_generation(Generation::RESERVED).raw());
        }
        // SAFETY: live chip.
        assert_eq!(unsafe { hfi1_tid_sim_read_flow(chip, 32) }, u64::MAX);
        // SAFETY: given back once.
        unsafe { hfi1_tid_sim_destroy(chip) };
        assert!(hfi1_tid_sim_create(u32::MAX, 2).is_null());
    }
}
