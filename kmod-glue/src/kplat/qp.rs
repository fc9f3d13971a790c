// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The engine's kernel platform ([`KernelPlatform`]): QPs and their
//! counted references, scheduling, DMA mapping and random numbers on the
//! registered callbacks.

use core::ffi::c_void;
use core::ops::Deref;
use core::ptr::NonNull;

use alloc::boxed::Box;

use hfi1_hal::services::{
    DmaError, DmaMap, MemoryWait, QpRef, RandomSource, Scheduler, TidScheduler,
};
use qp_wait::{DevCounters, Qp, SFlags, WaitPlatform};
use tid_flow::FlowPlatform;
use tid_read_proto::qp::TidQp;

use super::{KMem, Kernel, KernelSpinLock};
use crate::chip::KernelChip;

/// The kernel platform of the engine's own objects (contexts, QPs and
/// requests made through `engine.rs`).
#[derive(Debug)]
pub enum KernelPlatform {}

/// A QP as the engine sees it, with the C QP it belongs to.
pub struct KQp {
    /// The engine's view.
    pub qp: Qp<KernelPlatform>,
    /// The C QP (`struct rvt_qp *` in the driver), passed to callbacks.
    pub cookie: *mut c_void,
    /// The services its references and wake-ups use.
    pub k: Kernel,
}

impl core::fmt::Debug for KQp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KQp")
            .field("qp", &self.qp)
            .finish_non_exhaustive()
    }
}

/// A counted reference to a QP: the count is the C QP's.
///
/// # Invariants
///
/// `ptr` points to a live [`KQp`]; this value owns one reference of the
/// C QP, which keeps it (and so the `KQp`, freed by the C QP's release)
/// alive.
pub struct KRef {
    ptr: NonNull<KQp>,
}

// SAFETY: the referenced QP is shared state protected by its s_lock and
// kept alive by the C reference count, which is SMP-safe.
unsafe impl Send for KRef {}
// SAFETY: as above.
unsafe impl Sync for KRef {}

impl KRef {
    /// Takes a new reference to `qp`.
    ///
    /// # Safety
    ///
    /// `qp` is live (the caller holds a reference to it).
    pub unsafe fn get_raw(qp: NonNull<KQp>) -> Self {
        // SAFETY: the QP is live; the cookie is its C QP.
        let q = unsafe { qp.as_ref() };
        // SAFETY: the QP's registration is valid while it lives.
        unsafe { (q.k.ops.qp_get)(q.cookie) };
        // INVARIANT: we now own the reference just taken.
        Self { ptr: qp }
    }

    /// Adopts a reference the C side already took (the trigger work's).
    ///
    /// # Safety
    ///
    /// `qp` is live and the caller gives this value one reference it owns.
    pub unsafe fn adopt(qp: NonNull<KQp>) -> Self {
        // INVARIANT: the caller handed over its reference.
        Self { ptr: qp }
    }

    /// The C QP.
    pub fn cookie(&self) -> *mut c_void {
        self.kqp().cookie
    }

    fn kqp(&self) -> &KQp {
        // SAFETY: by the type invariant the `KQp` is live.
        unsafe { self.ptr.as_ref() }
    }

    /// The services of this QP's registration.
    pub fn kernel(&self) -> Kernel {
        self.kqp().k
    }
}

impl core::fmt::Debug for KRef {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.kqp().fmt(f)
    }
}

impl Deref for KRef {
    type Target = Qp<KernelPlatform>;

    fn deref(&self) -> &Self::Target {
        &self.kqp().qp
    }
}

impl Drop for KRef {
    fn drop(&mut self) {
        let (put, cookie) = {
            let q = self.kqp();
            (q.k.ops.qp_put, q.cookie)
        };
        // SAFETY: we own one reference (type invariant); after this call
        // the QP may be gone, and `self` is not used again.
        unsafe { put(cookie) };
    }
}

impl QpRef for KRef {
    fn get(this: &Self) -> Self {
        // SAFETY: `this` holds a reference, so the QP is live.
        unsafe { Self::get_raw(this.ptr) }
    }

    fn same(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }
}

/// The scheduler: the QP's send engine and its trigger work.
#[derive(Debug, Clone, Copy)]
pub struct KSched(pub Kernel);

impl Scheduler<KRef> for KSched {
    fn schedule_send(&self, qp: &KRef) {
        // SAFETY: the reference keeps the QP alive for the call.
        unsafe { (self.0.ops.schedule_send)(qp.cookie()) }
    }

    fn queue_trigger(&self, cpu: u32, qp: KRef) -> Result<(), KRef> {
        // SAFETY: the reference keeps the QP alive for the call.
        if unsafe { (self.0.ops.queue_trigger)(qp.cookie(), cpu) } {
            // The reference now belongs to the queued work item, which
            // gives it back through `hfi1_tid_trigger_resume`.
            core::mem::forget(qp);
            Ok(())
        } else {
            Err(qp)
        }
    }
}

impl TidScheduler<KRef> for KSched {
    fn schedule_tid_send(&self, cpu: u32, qp: &KRef) -> bool {
        // SAFETY: the reference keeps the QP alive for the call.
        unsafe { (self.0.ops.queue_tid_send)(qp.cookie(), cpu) }
    }
}

impl MemoryWait<KRef> for KSched {
    fn wait_kmem(&self, qp: &KRef, s_flags: &mut SFlags) {
        // `SFlags` is `repr(transparent)` over the `u32` word.
        let word = core::ptr::from_mut(s_flags).cast::<u32>();
        // SAFETY: the reference keeps the QP alive for the call; `s_flags`
        // is the QP's flags word, valid and exclusively ours for the call.
        unsafe { (self.0.ops.wait_kmem)(qp.cookie(), word) }
    }
}

/// DMA mapping for one device.
#[derive(Debug)]
pub struct KDma {
    /// The device cookie (`&dd->pcidev->dev` in the driver).
    pub dev: *mut c_void,
    /// The services.
    pub k: Kernel,
}

// SAFETY: the cookie is only passed back to the C callbacks, which are
// safe from any CPU.
unsafe impl Send for KDma {}
// SAFETY: as above.
unsafe impl Sync for KDma {}

impl DmaMap for KDma {
    fn map(&self, page: u64, len: u32) -> Result<u64, DmaError> {
        let mut bus = 0u64;
        // SAFETY: `bus` is a valid out-pointer; the callback accepts any
        // address and length (it maps or fails).
        match unsafe { (self.k.ops.dma_map)(self.dev, page, len, &mut bus) } {
            0 => Ok(bus),
            _ => Err(DmaError),
        }
    }

    fn unmap(&self, bus: u64, len: u32) {
        // SAFETY: `bus` came from `map` with the same length.
        unsafe { (self.k.ops.dma_unmap)(self.dev, bus, len) }
    }
}

/// Random numbers from the kernel.
#[derive(Debug, Clone, Copy)]
pub struct KRandom(pub Kernel);

impl RandomSource for KRandom {
    fn next_u32(&mut self) -> u32 {
        // SAFETY: plain callback.
        unsafe { (self.0.ops.random_u32)() }
    }
}

impl WaitPlatform for KernelPlatform {
    type Lock = KernelSpinLock;
    /// The QP's whole protocol state (flow, connection, both roles), as
    /// the driver keeps it in `rvt_qp` and `hfi1_qp_priv`.
    type Ext = TidQp<KernelPlatform>;
    type Ref = KRef;
    type Sched = KSched;
}

impl FlowPlatform for KernelPlatform {
    type Chip = KernelChip;
    type Dma = KDma;
    type Mem = KMem;
    type Dev = Box<DevCounters>;
}

/// Runs the registered `do_send` for a QP (the trigger work's send engine).
pub(crate) fn do_send(qp: &KRef) {
    // SAFETY: the reference keeps the QP alive for the call.
    unsafe { (qp.kernel().ops.do_send)(qp.cookie()) }
}
