// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The kernel platform of the stateful engine: spinlocks, QP references,
//! scheduling, DMA mapping and random numbers on C callbacks.
//!
//! The C side registers one [`PlatformOps`] table at module load
//! ([`hfi1_tid_platform_register`]); every lock, QP reference, scheduler and
//! DMA map below calls through it. A global table (instead of one per
//! object) is what lets [`KernelSpinLock`] implement `NewRawSpinLock`, whose
//! constructor takes no argument. Objects can only be made while a table
//! is registered, and the table can only be withdrawn when no object is
//! left ([`LIVE`]), so no callback is ever missing when one is needed.
//!
//! | engine need | callback | kernel primitive |
//! |---|---|---|
//! | `RawSpinLock` | `spin_lock_init`, `spin_lock_irqsave`, `spin_unlock_irqrestore` | `spinlock_t` with a named lockdep class per level |
//! | `QpRef` get / put | `qp_get`, `qp_put` | `rvt_get_qp()` / `rvt_put_qp()` |
//! | `Scheduler::queue_trigger` | `queue_trigger` | `queue_work_on()`; `false` = already pending |
//! | `Scheduler::schedule_send` | `schedule_send` | `hfi1_schedule_send()` (under `s_lock`) |
//! | the trigger work's send engine | `do_send` | `hfi1_do_send()` (no lock held) |
//! | `DmaMap` | `dma_map`, `dma_unmap` | `dma_map_page()` / `dma_unmap_page()` |
//! | `RandomSource` | `random_u32` | `get_random_u32()` (the driver's `prandom_u32()`) |
//! | `Memory` | the global allocator | `kmalloc()` with `GFP_ATOMIC` when the caller cannot sleep |

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use alloc::boxed::Box;

use hfi1_hal::lock_order::{LockClass, NewRawSpinLock, RawSpinLock};
use hfi1_hal::services::{
    AllocContext, DmaError, DmaMap, InitInPlace, Memory, NoMemory, QpRef, RandomSource, Scheduler,
};
use qp_wait::{DevCounters, Qp, WaitPlatform};
use tid_flow::{FlowPlatform, QpFlowState};

use crate::errno::Errno;
use crate::platform::KernelChip;

/// `spin_lock_init(lock)` with the lockdep class `class` (0: the receive
/// context's `exp_lock`, 1: a QP's `s_lock`).
pub type SpinLockInitFn = unsafe extern "C" fn(lock: *mut c_void, class: u32);
/// `spin_lock_irqsave(lock, flags)`; returns the flags.
pub type SpinLockIrqsaveFn = unsafe extern "C" fn(lock: *mut c_void) -> usize;
/// `spin_unlock_irqrestore(lock, flags)`.
pub type SpinUnlockIrqrestoreFn = unsafe extern "C" fn(lock: *mut c_void, flags: usize);
/// `rvt_get_qp()` / `rvt_put_qp()` on a QP cookie.
pub type QpRefFn = unsafe extern "C" fn(qp: *mut c_void);
/// `queue_work_on(cpu, wq, &trigger_work)`: true if queued, false if the
/// work item was already pending.
pub type QueueTriggerFn = unsafe extern "C" fn(qp: *mut c_void, cpu: u32) -> bool;
/// `hfi1_schedule_send(qp)` (s_lock held) or `hfi1_do_send(qp)` (no lock).
pub type SendFn = unsafe extern "C" fn(qp: *mut c_void);
/// `dma_map_page()`: maps `len` bytes at kernel address `addr` for the
/// device `dev`, stores the bus address; 0 or a negative errno.
pub type DmaMapFn =
    unsafe extern "C" fn(dev: *mut c_void, addr: u64, len: u32, bus: *mut u64) -> i32;
/// `dma_unmap_page()`.
pub type DmaUnmapFn = unsafe extern "C" fn(dev: *mut c_void, bus: u64, len: u32);
/// `get_random_u32()`.
pub type RandomFn = unsafe extern "C" fn() -> u32;

/// The kernel services (`struct hfi1_tid_platform_ops`). Every member must
/// be set. Callbacks may be called with spinlocks held and interrupts off,
/// except `do_send`, which is called with no lock held.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PlatformOps {
    /// Initialises a spinlock with a named lock class.
    pub spin_lock_init: Option<SpinLockInitFn>,
    /// Takes a spinlock, interrupts off.
    pub spin_lock_irqsave: Option<SpinLockIrqsaveFn>,
    /// Releases a spinlock, interrupts restored.
    pub spin_unlock_irqrestore: Option<SpinUnlockIrqrestoreFn>,
    /// Takes a QP reference.
    pub qp_get: Option<QpRefFn>,
    /// Drops a QP reference (may free the QP, which then calls
    /// `hfi1_tid_qp_destroy`).
    pub qp_put: Option<QpRefFn>,
    /// Queues a QP's trigger work on a CPU.
    pub queue_trigger: Option<QueueTriggerFn>,
    /// Schedules a QP's send engine (s_lock held).
    pub schedule_send: Option<SendFn>,
    /// Runs a QP's send engine from its trigger work (no lock held).
    pub do_send: Option<SendFn>,
    /// Maps a buffer for DMA.
    pub dma_map: Option<DmaMapFn>,
    /// Unmaps it.
    pub dma_unmap: Option<DmaUnmapFn>,
    /// A random number.
    pub random_u32: Option<RandomFn>,
}

/// The checked table: every callback present.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ops {
    spin_lock_init: SpinLockInitFn,
    spin_lock_irqsave: SpinLockIrqsaveFn,
    spin_unlock_irqrestore: SpinUnlockIrqrestoreFn,
    qp_get: QpRefFn,
    qp_put: QpRefFn,
    queue_trigger: QueueTriggerFn,
    schedule_send: SendFn,
    do_send: SendFn,
    dma_map: DmaMapFn,
    dma_unmap: DmaUnmapFn,
    random_u32: RandomFn,
}

impl Ops {
    fn check(o: &PlatformOps) -> Option<Self> {
        Some(Self {
            spin_lock_init: o.spin_lock_init?,
            spin_lock_irqsave: o.spin_lock_irqsave?,
            spin_unlock_irqrestore: o.spin_unlock_irqrestore?,
            qp_get: o.qp_get?,
            qp_put: o.qp_put?,
            queue_trigger: o.queue_trigger?,
            schedule_send: o.schedule_send?,
            do_send: o.do_send?,
            dma_map: o.dma_map?,
            dma_unmap: o.dma_unmap?,
            random_u32: o.random_u32?,
        })
    }
}

/// The registered table (a leaked `Box<Ops>`), or null.
static OPS: AtomicPtr<Ops> = AtomicPtr::new(core::ptr::null_mut());

/// Objects (contexts, QPs, requests) alive now; the table cannot be
/// withdrawn while this is non-zero.
pub static LIVE: AtomicU64 = AtomicU64::new(0);

/// The registered callbacks.
///
/// # Invariants
///
/// Non-null from registration until unregistration, which needs `LIVE`
/// at 0: every object (and so every caller of this) exists in between.
pub(crate) fn ops() -> Option<&'static Ops> {
    // SAFETY: the pointer is null or a leaked box that stays valid until
    // unregistration, which only happens with no object left to call us.
    unsafe { OPS.load(Ordering::Acquire).as_ref() }
}

/// Registers the kernel callbacks. Returns 0, `-EINVAL` if one is missing
/// (or `ops` is null), `-EBUSY` if a table is already registered, or
/// `-ENOMEM`.
///
/// # Safety
///
/// `ops` is null or points to a valid table whose callbacks stay callable
/// until [`hfi1_tid_platform_unregister`] succeeds.
///
/// # Locking
///
/// None; call once at module load, before any other `hfi1_tid_*` call
/// that creates an object.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_platform_register(ops: *const PlatformOps) -> i32 {
    // SAFETY: the caller promises `ops` is null or valid.
    let Some(checked) = (unsafe { ops.as_ref() }).and_then(Ops::check) else {
        return Errno::INVAL.to_neg();
    };
    let Some(b) = try_box(checked) else {
        return Errno::NOMEM.to_neg();
    };
    let p = Box::into_raw(b);
    match OPS.compare_exchange(
        core::ptr::null_mut(),
        p,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => 0,
        Err(_) => {
            // SAFETY: `p` came from `Box::into_raw` above and was not
            // published.
            drop(unsafe { Box::from_raw(p) });
            Errno::BUSY.to_neg()
        }
    }
}

/// Withdraws the callbacks. Returns 0, or `-EBUSY` while any context, QP or
/// request made through this interface is alive (nothing changes then).
///
/// # Locking
///
/// None; call at module unload.
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_platform_unregister() -> i32 {
    if LIVE.load(Ordering::Acquire) != 0 {
        return Errno::BUSY.to_neg();
    }
    let p = OPS.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: `p` is the leaked box from registration; no object is
        // left that could still use it.
        drop(unsafe { Box::from_raw(p) });
    }
    0
}

/// Contexts, QPs and requests alive now (0 after a clean teardown).
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_live_objects() -> u64 {
    LIVE.load(Ordering::Acquire)
}

/// `Box::new` that reports allocation failure instead of aborting.
pub(crate) fn try_box<T>(value: T) -> Option<Box<T>> {
    let layout = core::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(value));
    }
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc::alloc::alloc(layout) }.cast::<T>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation for one `T`, properly aligned.
    unsafe { p.write(value) };
    // SAFETY: `p` owns an initialised `T` allocated with the global
    // allocator and `Layout::new::<T>()`, as `Box` requires.
    Some(unsafe { Box::from_raw(p) })
}

/// Bytes reserved for a `spinlock_t` embedded in a Rust object (the C glue
/// checks `sizeof(spinlock_t)` against it at build time: 4 bytes on
/// Debian's kernel, about 64 with lockdep and spinlock debugging).
pub const SPINLOCK_BYTES: usize = 128;

#[repr(C, align(8))]
struct SpinStorage(UnsafeCell<[u8; SPINLOCK_BYTES]>);

/// The lock class numbers passed to `spin_lock_init`.
pub const LOCK_CLASS_EXP: u32 = 0;
/// See [`LOCK_CLASS_EXP`].
pub const LOCK_CLASS_S: u32 = 1;

/// A kernel `spinlock_t`: either one in C memory (a QP's `s_lock`, which
/// the driver owns) or one embedded here (the context's `exp_lock`).
///
/// An embedded lock is made by `NewRawSpinLock::new_with_class` before the
/// object reaches its final place, so it must be initialised there with
/// [`KernelSpinLock::init_in_place`] before first use.
pub struct KernelSpinLock {
    external: *mut c_void,
    storage: SpinStorage,
    class: u32,
}

// SAFETY: the lock is a kernel spinlock reached only through the
// registered callbacks, which are safe from any CPU.
unsafe impl Send for KernelSpinLock {}
// SAFETY: as above; `&KernelSpinLock` only hands out the lock's address.
unsafe impl Sync for KernelSpinLock {}

impl core::fmt::Debug for KernelSpinLock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KernelSpinLock")
            .field("external", &!self.external.is_null())
            .field("class", &self.class)
            .finish()
    }
}

impl KernelSpinLock {
    /// A lock living in C memory, already initialised by its owner.
    ///
    /// # Safety
    ///
    /// `lock` points to an initialised `spinlock_t` that outlives this value.
    pub unsafe fn external(lock: *mut c_void, class: u32) -> Self {
        Self {
            external: lock,
            storage: SpinStorage(UnsafeCell::new([0; SPINLOCK_BYTES])),
            class,
        }
    }

    fn ptr(&self) -> *mut c_void {
        if self.external.is_null() {
            self.storage.0.get().cast()
        } else {
            self.external
        }
    }

    /// Initialises an embedded lock where it now lives (no-op for an
    /// external one).
    ///
    /// # Safety
    ///
    /// The lock is not in use and will not move again.
    pub unsafe fn init_in_place(&self) {
        if let (true, Some(o)) = (self.external.is_null(), ops()) {
            // SAFETY: the storage is large and aligned enough (checked by
            // the C glue) and not in use, by the caller.
            unsafe { (o.spin_lock_init)(self.ptr(), self.class) }
        }
    }
}

// SAFETY: mutual exclusion and release/acquire ordering are the kernel
// spinlock's; the registered table is present whenever a lock exists.
unsafe impl RawSpinLock for KernelSpinLock {
    type IrqFlags = usize;

    fn lock_irqsave(&self) -> usize {
        match ops() {
            // SAFETY: the lock is initialised (external, or
            // `init_in_place` ran before the object was shared).
            Some(o) => unsafe { (o.spin_lock_irqsave)(self.ptr()) },
            None => 0,
        }
    }

    unsafe fn unlock_irqrestore(&self, flags: usize) {
        if let Some(o) = ops() {
            // SAFETY: the caller holds the lock and passes its flags.
            unsafe { (o.spin_unlock_irqrestore)(self.ptr(), flags) }
        }
    }
}

impl NewRawSpinLock for KernelSpinLock {
    fn new_with_class(class: &'static LockClass) -> Self {
        let class = if class.rank >= 2 {
            LOCK_CLASS_EXP
        } else {
            LOCK_CLASS_S
        };
        Self {
            external: core::ptr::null_mut(),
            storage: SpinStorage(UnsafeCell::new([0; SPINLOCK_BYTES])),
            class,
        }
    }
}

/// The kernel platform.
#[derive(Debug)]
pub enum KernelPlatform {}

/// A QP's state under its `s_lock`, besides its flags.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KQpExt {
    /// The hardware-flow state. Kernel: `priv->flow_state`.
    pub flow: QpFlowState,
}

impl AsMut<QpFlowState> for KQpExt {
    fn as_mut(&mut self) -> &mut QpFlowState {
        &mut self.flow
    }
}

/// A QP as the engine sees it, with the C QP it belongs to.
pub struct KQp {
    /// The engine's view.
    pub qp: Qp<KernelPlatform>,
    /// The C QP (`struct rvt_qp *` in the driver), passed to callbacks.
    pub cookie: *mut c_void,
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
        if let Some(o) = ops() {
            // SAFETY: the QP is live; the cookie is its C QP.
            unsafe { (o.qp_get)(qp.as_ref().cookie) };
        }
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
        if let Some(o) = ops() {
            // SAFETY: we own one reference (type invariant); after this
            // call the QP may be gone, and `self` is not used again.
            unsafe { (o.qp_put)(self.cookie()) };
        }
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
#[derive(Debug, Default)]
pub struct KSched;

impl Scheduler<KRef> for KSched {
    fn schedule_send(&self, qp: &KRef) {
        if let Some(o) = ops() {
            // SAFETY: the reference keeps the QP alive for the call.
            unsafe { (o.schedule_send)(qp.cookie()) }
        }
    }

    fn queue_trigger(&self, cpu: u32, qp: KRef) -> Result<(), KRef> {
        let Some(o) = ops() else {
            return Err(qp);
        };
        // SAFETY: the reference keeps the QP alive for the call.
        if unsafe { (o.queue_trigger)(qp.cookie(), cpu) } {
            // The reference now belongs to the queued work item, which
            // gives it back through `hfi1_tid_trigger_resume`.
            core::mem::forget(qp);
            Ok(())
        } else {
            Err(qp)
        }
    }
}

/// DMA mapping for one device.
#[derive(Debug)]
pub struct KDma {
    /// The device cookie (`&dd->pcidev->dev` in the driver).
    pub dev: *mut c_void,
}

// SAFETY: the cookie is only passed back to the C callbacks, which are
// safe from any CPU.
unsafe impl Send for KDma {}
// SAFETY: as above.
unsafe impl Sync for KDma {}

impl DmaMap for KDma {
    fn map(&self, page: u64, len: u32) -> Result<u64, DmaError> {
        let o = ops().ok_or(DmaError)?;
        let mut bus = 0u64;
        // SAFETY: `bus` is a valid out-pointer; the callback accepts any
        // address and length (it maps or fails).
        match unsafe { (o.dma_map)(self.dev, page, len, &mut bus) } {
            0 => Ok(bus),
            _ => Err(DmaError),
        }
    }

    fn unmap(&self, bus: u64, len: u32) {
        if let Some(o) = ops() {
            // SAFETY: `bus` came from `map` with the same length.
            unsafe { (o.dma_unmap)(self.dev, bus, len) }
        }
    }
}

/// Memory for flow records: the global allocator (kmalloc), failures
/// reported.
#[derive(Debug, Default)]
pub struct KMem;

impl Memory for KMem {
    type Boxed<T> = Box<T>;

    fn try_box<T>(&self, _ctx: AllocContext, value: T) -> Result<Box<T>, NoMemory> {
        // The allocator picks GFP_ATOMIC whenever the caller cannot sleep,
        // which covers every `Atomic` caller (they hold a spinlock).
        try_box(value).ok_or(NoMemory)
    }

    /// Allocates first and initialises the allocation in place: the value
    /// (a request's ~15 KiB flow ring) never exists on the 16 KiB kernel
    /// stack.
    fn try_box_in_place<T: InitInPlace>(&self, _ctx: AllocContext) -> Result<Box<T>, NoMemory> {
        try_box_in_place::<T>().ok_or(NoMemory)
    }
}

/// `Box<T>` for a `T` written in place by [`InitInPlace`], or `None` when
/// the allocator fails: the value is never built on the stack.
pub(crate) fn try_box_in_place<T: InitInPlace>() -> Option<Box<T>> {
    let layout = core::alloc::Layout::new::<T>();
    let p = if layout.size() == 0 {
        NonNull::<T>::dangling()
    } else {
        // SAFETY: the layout has a non-zero size.
        NonNull::new(unsafe { alloc::alloc::alloc(layout) }.cast::<T>())?
    };
    // SAFETY: `p` is valid for writes of one `T` and aligned (a fresh
    // allocation with `T`'s layout, or dangling for a zero-sized `T`); its
    // uninitialised contents need no drop.
    unsafe { T::init_in_place(p.as_ptr()) };
    // SAFETY: `init_in_place` left a valid `T` at `p` (the trait's
    // contract), allocated by the global allocator with
    // `Layout::new::<T>()` (or dangling and zero-sized), as `Box` requires.
    Some(unsafe { Box::from_raw(p.as_ptr()) })
}

/// Random numbers from the kernel.
#[derive(Debug, Default)]
pub struct KRandom;

impl RandomSource for KRandom {
    fn next_u32(&mut self) -> u32 {
        match ops() {
            // SAFETY: plain callback.
            Some(o) => unsafe { (o.random_u32)() },
            None => 0,
        }
    }
}

impl WaitPlatform for KernelPlatform {
    type Lock = KernelSpinLock;
    type Ext = KQpExt;
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
    if let Some(o) = ops() {
        // SAFETY: the reference keeps the QP alive for the call.
        unsafe { (o.do_send)(qp.cookie()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Big enough that building it on a kernel stack would be refused.
    struct Big([u32; 4096]);

    // SAFETY: writes every element, leaving a valid `Big`.
    unsafe impl InitInPlace for Big {
        unsafe fn init_in_place(ptr: *mut Self) {
            let first = ptr.cast::<u32>();
            for i in 0..4096 {
                // SAFETY: `ptr` is valid for one `Big`, i.e. 4096 `u32`s.
                unsafe { first.add(i).write(i as u32 * 3) };
            }
        }
    }

    #[test]
    fn in_place_box_is_initialised_by_the_type() {
        let b = KMem
            .try_box_in_place::<Big>(AllocContext::MaySleep)
            .unwrap();
        assert!(b.0.iter().enumerate().all(|(i, &v)| v == i as u32 * 3));
        let ring = KMem
            .try_box_in_place::<tid_flow::segment::FlowRing>(AllocContext::Atomic)
            .unwrap();
        assert_eq!(ring.len(), 8);
    }
}
