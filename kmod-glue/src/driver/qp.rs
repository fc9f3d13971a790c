// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The driver's QPs and locks as the engine's platform traits: a
//! `spinlock_t` of the driver ([`DrvSpinLock`]), a counted reference to a
//! `struct rvt_qp` ([`DrvRef`], `rvt_get_qp()` / `rvt_put_qp()`), its
//! `s_lock`-guarded flags and flow state ([`DrvQpState`]; the flow state
//! is `qpriv->flow_state` itself, `tid_flow::QpFlow` on the layout mirror), the
//! scheduler ([`DrvSched`]: `hfi1_schedule_send()`, the trigger work's
//! `queue_work_on()`, `hfi1_wait_kmem()`), DMA mapping ([`DrvDma`]) and
//! the device's TID-wait counter ([`DrvDev`]).
//!
//! # Locking
//!
//! As the driver's: a QP's flags and flow state under its `s_lock`, the
//! device counter under the context's `exp_lock`.

use core::ffi::c_void;
use core::ptr::NonNull;

use hfi1_hal::layout::{CListHead, CTidFlowState, DMA_FROM_DEVICE};
use hfi1_hal::lock_order::{LockClass, RawSpinLock};
use hfi1_hal::services::{DmaError, DmaMap, MemoryWait, QpRef, Scheduler};
use qp_wait::store::WaitCounter;
use qp_wait::{Cpu, SFlags};

use super::ops::{DrvQpView, Ops};
use super::queues::DrvWaiter;

/// A `spinlock_t` of the driver (`&qp->s_lock`, `&rcd->exp_lock`).
///
/// # Invariants
///
/// `lock` is an initialised spinlock that outlives this value; `ops` is a
/// checked table of the driver's.
#[derive(Debug)]
pub struct DrvSpinLock<'o> {
    lock: NonNull<c_void>,
    ops: &'o Ops,
}

impl<'o> DrvSpinLock<'o> {
    /// The lock at `lock`.
    ///
    /// # Safety
    ///
    /// `lock` is an initialised `spinlock_t` that outlives the value.
    pub unsafe fn new(ops: &'o Ops, lock: NonNull<c_void>) -> Self {
        // INVARIANT: by the caller.
        Self { lock, ops }
    }
}

// SAFETY: mutual exclusion and ordering are the kernel spinlock's; the
// callbacks are the driver's `spin_lock_irqsave()` / `_irqrestore()`.
unsafe impl RawSpinLock for DrvSpinLock<'_> {
    type IrqFlags = usize;

    fn lock_irqsave(&self) -> usize {
        // SAFETY: the lock is initialised (type invariant).
        unsafe { (self.ops.lock)(self.lock.as_ptr()) }
    }

    unsafe fn unlock_irqrestore(&self, flags: usize) {
        // SAFETY: the caller holds the lock and passes its flags.
        unsafe { (self.ops.unlock)(self.lock.as_ptr(), flags) }
    }

    /// `lockdep_assert_held()`: lockdep knows the order itself.
    fn assert_held(&self, _token: &'static LockClass) {
        // SAFETY: the lock is initialised (type invariant).
        unsafe { (self.ops.assert_held)(self.lock.as_ptr()) }
    }
}

/// The driver's QP as the engine sees it: its view (pointers into its
/// `struct rvt_qp` / `struct hfi1_qp_priv`) and the services table.
#[derive(Debug, Clone, Copy)]
pub struct DrvQp<'o> {
    /// The view.
    pub view: DrvQpView,
    /// The services.
    pub ops: &'o Ops,
}

impl Cpu for DrvQp<'_> {
    fn cpu(&self) -> u32 {
        self.view.cpu
    }
}

/// A counted reference to a driver QP.
///
/// # Invariants
///
/// Owns one reference of `qp.view.qp` (`rvt_get_qp()`), given back on
/// drop (`rvt_put_qp()`); the view's pointers stay valid while it is held.
#[derive(Debug)]
pub struct DrvRef<'o> {
    qp: DrvQp<'o>,
}

impl<'o> DrvRef<'o> {
    /// Takes a new reference to the QP of `view`.
    ///
    /// # Safety
    ///
    /// `view` describes a live QP (the caller holds a reference to it).
    pub unsafe fn get(ops: &'o Ops, view: DrvQpView) -> Self {
        // SAFETY: the QP is live.
        unsafe { (ops.qp_get)(view.qp) };
        // INVARIANT: we own the reference just taken.
        Self {
            qp: DrvQp { view, ops },
        }
    }

    /// Adopts a reference the caller owns.
    ///
    /// # Safety
    ///
    /// `view` describes a live QP and the caller hands over one reference.
    pub unsafe fn adopt(ops: &'o Ops, view: DrvQpView) -> Self {
        // INVARIANT: handed over by the caller.
        Self {
            qp: DrvQp { view, ops },
        }
    }

    /// The view of the QP a wait link belongs to.
    ///
    /// # Safety
    ///
    /// `link` is the `tid_wait` of a live QP.
    unsafe fn view_of(ops: &Ops, link: *mut CListHead) -> DrvQpView {
        // SAFETY: by the caller.
        let qp = unsafe { (ops.qp_of_wait)(link) };
        let mut view = core::mem::MaybeUninit::<DrvQpView>::uninit();
        // SAFETY: `qp` is live; the callback fills every member.
        unsafe {
            (ops.qp_view)(qp, view.as_mut_ptr());
            view.assume_init()
        }
    }
}

impl<'o> core::ops::Deref for DrvRef<'o> {
    type Target = DrvQp<'o>;

    fn deref(&self) -> &DrvQp<'o> {
        &self.qp
    }
}

impl Drop for DrvRef<'_> {
    fn drop(&mut self) {
        // SAFETY: we own one reference (type invariant).
        unsafe { (self.qp.ops.qp_put)(self.qp.view.qp) }
    }
}

impl QpRef for DrvRef<'_> {
    fn get(this: &Self) -> Self {
        // SAFETY: `this` holds a reference, so the QP is live.
        unsafe { Self::get(this.qp.ops, this.qp.view) }
    }

    fn same(a: &Self, b: &Self) -> bool {
        core::ptr::eq(a.qp.view.qp, b.qp.view.qp)
    }
}

// SAFETY: `tid_wait` and `tid_enqueue` are the view's pointers into the
// QP's private part; a link goes back to its QP through the driver's own
// `container_of` (`qp_of_wait`).
unsafe impl<'o> DrvWaiter for DrvQp<'o> {
    type Ref = DrvRef<'o>;
    type Ctx = &'o Ops;

    fn tid_wait(&self) -> *mut CListHead {
        self.view.tid_wait
    }

    fn tid_enqueue(&self) -> *mut u32 {
        self.view.tid_enqueue
    }

    unsafe fn get_waiter(ctx: &&'o Ops, link: *mut CListHead) -> DrvRef<'o> {
        // SAFETY: `link` is a live QP's `tid_wait` (the caller).
        unsafe { DrvRef::get(ctx, DrvRef::view_of(ctx, link)) }
    }

    unsafe fn adopt_waiter(ctx: &&'o Ops, link: *mut CListHead) -> DrvRef<'o> {
        // SAFETY: as above; the queue's reference is handed over.
        unsafe { DrvRef::adopt(ctx, DrvRef::view_of(ctx, link)) }
    }
}

/// A QP's `s_lock`-guarded state in the driver: `qp->s_flags` and
/// `qpriv->flow_state`.
///
/// # Invariants
///
/// Both point into a live QP; they are read or written only while its
/// `s_lock` is held (the value lives inside that lock's `Lock`).
#[derive(Debug)]
pub struct DrvQpState {
    /// `&qp->s_flags`.
    pub s_flags: NonNull<SFlags>,
    /// `&qpriv->flow_state`.
    pub flow_state: NonNull<CTidFlowState>,
}

impl DrvQpState {
    /// The state of the QP of `view`; `None` for a null pointer.
    pub fn of(view: &DrvQpView) -> Option<Self> {
        Some(Self {
            // `SFlags` is `repr(transparent)` over the `u32`.
            s_flags: NonNull::new(view.s_flags)?.cast(),
            flow_state: NonNull::new(view.flow_state)?,
        })
    }

    /// The flags and the flow state, borrowed together.
    ///
    /// # Safety
    ///
    /// The QP's `s_lock` is held for the borrows' lifetime (the caller
    /// reached `self` through that lock's guard).
    pub unsafe fn parts(&mut self) -> (&mut SFlags, &mut CTidFlowState) {
        // SAFETY: live and exclusively ours under the lock (invariant and
        // caller); the two fields do not overlap.
        unsafe { (self.s_flags.as_mut(), self.flow_state.as_mut()) }
    }
}

impl AsRef<SFlags> for DrvQpState {
    fn as_ref(&self) -> &SFlags {
        // SAFETY: reached only through the `s_lock` guard (invariant).
        unsafe { self.s_flags.as_ref() }
    }
}

/// The driver's scheduler.
#[derive(Debug, Clone, Copy)]
pub struct DrvSched<'o>(pub &'o Ops);

impl<'o> Scheduler<DrvRef<'o>> for DrvSched<'o> {
    fn schedule_send(&self, qp: &DrvRef<'o>) {
        // SAFETY: the reference keeps the QP alive.
        unsafe { (self.0.schedule_send)(qp.view.qp) }
    }

    fn queue_trigger(&self, cpu: u32, qp: DrvRef<'o>) -> Result<(), DrvRef<'o>> {
        let cpu = i32::try_from(cpu).unwrap_or(0);
        // SAFETY: the reference keeps the QP (and its work item) alive.
        if unsafe { (self.0.queue_work_on)(cpu, qp.view.wq, qp.view.trigger_work) } {
            // The queued work item owns the reference now; its function
            // (`tid_rdma_trigger_resume()`) drops it.
            core::mem::forget(qp);
            Ok(())
        } else {
            Err(qp)
        }
    }
}

impl<'o> MemoryWait<DrvRef<'o>> for DrvSched<'o> {
    fn wait_kmem(&self, qp: &DrvRef<'o>, s_flags: &mut SFlags) {
        // `SFlags` is `repr(transparent)` over the `u32` word.
        let word = core::ptr::from_mut(s_flags).cast::<u32>();
        // SAFETY: the reference keeps the QP alive; `s_flags` is its
        // `qp->s_flags`, which the caller holds under its `s_lock` and
        // lends to the call.
        unsafe { (self.0.wait_kmem)(qp.view.qp, word) }
    }
}

/// DMA mapping on the driver's device.
#[derive(Debug, Clone, Copy)]
pub struct DrvDma<'o> {
    /// The services.
    pub ops: &'o Ops,
    /// `&dd->pcidev->dev`.
    pub dev: *mut c_void,
}

impl DmaMap for DrvDma<'_> {
    /// `dma_map_page(dev, virt_to_page(page), 0, len, DMA_FROM_DEVICE)`
    /// and `dma_mapping_error()`.
    fn map(&self, page: u64, len: u32) -> Result<u64, DmaError> {
        // SAFETY: `page` is the address of a page of the segment (from
        // `page_address()`); the callbacks are the driver's.
        unsafe {
            let p = (self.ops.page_of)(page);
            let bus = (self.ops.dma_map)(self.dev, p, 0, len as usize, DMA_FROM_DEVICE);
            if (self.ops.dma_error)(self.dev, bus) != 0 {
                return Err(DmaError);
            }
            Ok(bus)
        }
    }

    fn unmap(&self, bus: u64, len: u32) {
        // SAFETY: `bus` was mapped with this length.
        unsafe { (self.ops.dma_unmap)(self.dev, bus, len as usize, DMA_FROM_DEVICE) }
    }
}

/// The device's TID-wait counter, `dd->verbs_dev.n_tidwait`.
///
/// # Invariants
///
/// Points to the live counter; bumped only under the context's
/// `exp_lock`, as the driver does.
#[derive(Debug)]
pub struct DrvDev(pub NonNull<u64>);

impl WaitCounter for DrvDev {
    fn count_wait(&self) {
        // SAFETY: live, and `exp_lock` is held (type invariant).
        unsafe { *self.0.as_ptr() = (*self.0.as_ptr()).wrapping_add(1) }
    }
}
