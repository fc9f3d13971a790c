// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The kernel services of the stateful engine: spinlocks, QP references,
//! scheduling, DMA mapping and random numbers on C callbacks.
//!
//! The C side registers one [`PlatformOps`] table at module load
//! ([`hfi1_tid_platform_register`]). Registration checks that every
//! callback is there and yields a [`Kernel`]: the only way to reach the
//! callbacks, and the value every lock, QP reference, scheduler and DMA map
//! below is built from. So nothing can lock, count a reference or map a
//! page without a registered table: there is no "not registered" branch
//! anywhere after construction. The table can only be withdrawn when no
//! object is left ([`LIVE`]).
//!
//! Spinlocks live where they are initialised and never move: a QP's
//! `s_lock` is the C QP's own `spinlock_t` (initialised by its owner,
//! [`KernelSpinLock::external`]); a lock the engine owns gets its own
//! `kmalloc`ed `spinlock_t`, initialised there with its level's named
//! class key ([`KernelSpinLock::try_new`], one `struct lock_class_key` per
//! level in [`hfi1_hal::lock_order`]) and freed with the lock.
//!
//! | engine need | callback | kernel primitive |
//! |---|---|---|
//! | `RawSpinLock` | `spin_lock_init`, `spin_lock_irqsave`, `spin_unlock_irqrestore`, `lockdep_assert_held` | `spinlock_t` with `lockdep_set_class_and_name()` |
//! | `QpRef` get / put | `qp_get`, `qp_put` | `rvt_get_qp()` / `rvt_put_qp()` |
//! | `Scheduler::queue_trigger` | `queue_trigger` | `queue_work_on()`; `false` = already pending |
//! | `Scheduler::schedule_send` | `schedule_send` | `hfi1_schedule_send()` (under `s_lock`) |
//! | the trigger work's send engine | `do_send` | `hfi1_do_send()` (no lock held) |
//! | `DmaMap` | `dma_map`, `dma_unmap` | `dma_map_page()` / `dma_unmap_page()` |
//! | `MemoryWait` | `wait_kmem` | `hfi1_wait_kmem()` |
//! | `TidScheduler::schedule_tid_send` | `queue_tid_send` | `queue_work_on()` of the QP's second-leg work (`hfi1_schedule_tid_send()`); `false` = already pending |
//! | `RandomSource` | `random_u32` | `get_random_u32()` (the driver's `prandom_u32()`) |
//! | `Memory` | the global allocator | `kmalloc()` with `GFP_ATOMIC` when the caller cannot sleep |
//!
//! # Locking
//!
//! Registration and unregistration run with no lock held, once each, at
//! module load and unload, while no other `hfi1_tid_*` call runs. The
//! callbacks are called with spinlocks held and interrupts off, except
//! `do_send` (no lock held).

use core::cell::UnsafeCell;
use core::ffi::{c_char, c_void};
use core::mem::MaybeUninit;
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use alloc::boxed::Box;

use hfi1_hal::lock_order::{LockClass, RawSpinLock};
use hfi1_hal::services::{
    AllocContext, DmaError, DmaMap, InitInPlace, Memory, MemoryWait, NoMemory, QpRef, RandomSource,
    Scheduler, TidScheduler,
};
use qp_wait::{DevCounters, Qp, SFlags, WaitPlatform};
use tid_flow::FlowPlatform;
use tid_read_proto::qp::TidQp;

use crate::errno::Errno;
use crate::platform::KernelChip;

/// `spin_lock_init(lock)` + `lockdep_set_class_and_name(lock, key, name)`.
pub type SpinLockInitFn =
    unsafe extern "C" fn(lock: *mut c_void, name: *const c_char, key: *mut c_void);
/// `spin_lock_irqsave(lock, flags)`; returns the flags.
pub type SpinLockIrqsaveFn = unsafe extern "C" fn(lock: *mut c_void) -> usize;
/// `spin_unlock_irqrestore(lock, flags)`.
pub type SpinUnlockIrqrestoreFn = unsafe extern "C" fn(lock: *mut c_void, flags: usize);
/// `lockdep_assert_held(lock)` (a warning on a lockdep kernel, nothing
/// otherwise).
pub type AssertHeldFn = unsafe extern "C" fn(lock: *mut c_void);
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
/// `hfi1_wait_kmem(qp)`: the QP joins the memory-wait list; `s_flags` is
/// its flags word (`RVT_S_WAIT_KMEM` is set there).
pub type WaitKmemFn = unsafe extern "C" fn(qp: *mut c_void, s_flags: *mut u32);

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
    /// Asserts that the calling context holds a spinlock.
    pub lockdep_assert_held: Option<AssertHeldFn>,
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
    /// Puts a QP on the memory-wait list.
    pub wait_kmem: Option<WaitKmemFn>,
    /// A random number.
    pub random_u32: Option<RandomFn>,
    /// Queues a QP's second-leg work on a CPU (s_lock held; no reference
    /// changes hands: the QP's destroy cancels the work).
    pub queue_tid_send: Option<QueueTriggerFn>,
}

/// The checked table: every callback present.
#[derive(Debug, Clone, Copy)]
struct Ops {
    spin_lock_init: SpinLockInitFn,
    spin_lock_irqsave: SpinLockIrqsaveFn,
    spin_unlock_irqrestore: SpinUnlockIrqrestoreFn,
    lockdep_assert_held: AssertHeldFn,
    qp_get: QpRefFn,
    qp_put: QpRefFn,
    queue_trigger: QueueTriggerFn,
    schedule_send: SendFn,
    do_send: SendFn,
    dma_map: DmaMapFn,
    dma_unmap: DmaUnmapFn,
    wait_kmem: WaitKmemFn,
    random_u32: RandomFn,
    queue_tid_send: QueueTriggerFn,
}

impl Ops {
    fn check(o: &PlatformOps) -> Option<Self> {
        Some(Self {
            spin_lock_init: o.spin_lock_init?,
            spin_lock_irqsave: o.spin_lock_irqsave?,
            spin_unlock_irqrestore: o.spin_unlock_irqrestore?,
            lockdep_assert_held: o.lockdep_assert_held?,
            qp_get: o.qp_get?,
            qp_put: o.qp_put?,
            queue_trigger: o.queue_trigger?,
            schedule_send: o.schedule_send?,
            do_send: o.do_send?,
            dma_map: o.dma_map?,
            dma_unmap: o.dma_unmap?,
            wait_kmem: o.wait_kmem?,
            random_u32: o.random_u32?,
            queue_tid_send: o.queue_tid_send?,
        })
    }
}

/// Where the registered table lives: written once per registration, read
/// through [`Kernel`] values only while it is registered.
struct Slot {
    state: AtomicU8,
    ops: UnsafeCell<MaybeUninit<Ops>>,
}

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

// SAFETY: `ops` is written only by the registration that moved `state`
// from EMPTY to WRITING, and read only after `state` is READY (Release
// store, Acquire load); unregistration moves READY back to EMPTY only
// with no object (and so no `Kernel` value in use) left.
unsafe impl Sync for Slot {}

static SLOT: Slot = Slot {
    state: AtomicU8::new(EMPTY),
    ops: UnsafeCell::new(MaybeUninit::uninit()),
};

/// Objects (contexts, QPs, requests, owned locks) alive now; the table
/// cannot be withdrawn while this is non-zero.
pub static LIVE: AtomicU64 = AtomicU64::new(0);

/// The registered kernel services: what registration yields, and the only
/// way to call them.
///
/// # Invariants
///
/// `ops` is the registered, fully checked table; it stays valid while any
/// object built from this value lives (those count in [`LIVE`], and
/// unregistration refuses while it is non-zero).
#[derive(Clone, Copy)]
pub struct Kernel {
    ops: &'static Ops,
}

impl core::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Kernel")
    }
}

/// The registered services, or `None` before registration.
pub fn kernel() -> Option<Kernel> {
    if SLOT.state.load(Ordering::Acquire) != READY {
        return None;
    }
    // SAFETY: READY means the registration finished writing the table
    // (the Acquire load pairs with its Release store), and it is not
    // rewritten until unregistered (see `Slot`).
    let ops = unsafe { (*SLOT.ops.get()).assume_init_ref() };
    // INVARIANT: the table is registered and checked.
    Some(Kernel { ops })
}

/// Registers the kernel callbacks. Returns 0, `-EINVAL` if one is missing
/// (or `ops` is null), or `-EBUSY` if a table is already registered.
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
    if SLOT
        .state
        .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return Errno::BUSY.to_neg();
    }
    // SAFETY: the EMPTY -> WRITING transition above gives this call alone
    // the slot; nobody reads it before READY.
    unsafe { (*SLOT.ops.get()).write(checked) };
    SLOT.state.store(READY, Ordering::Release);
    0
}

/// Withdraws the callbacks. Returns 0, or `-EBUSY` while any context, QP,
/// request or lock made through this interface is alive (nothing changes
/// then).
///
/// # Locking
///
/// None; call at module unload, with no other `hfi1_tid_*` call running.
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_platform_unregister() -> i32 {
    if LIVE.load(Ordering::Acquire) != 0 {
        return Errno::BUSY.to_neg();
    }
    // Nothing to free: the slot is static. READY -> EMPTY (a second call,
    // or one without registration, finds EMPTY and changes nothing).
    let _ = SLOT
        .state
        .compare_exchange(READY, EMPTY, Ordering::AcqRel, Ordering::Relaxed);
    0
}

/// Initialises a C-owned spinlock in the engine's `s_lock` class (name
/// `hfi1_tid_qp_s_lock`, the level's static key), so lockdep sees a QP's
/// `s_lock` the C side owns in the same class as the engine's own. Returns
/// 0, or `-EINVAL` for a null lock or no registered platform.
///
/// # Safety
///
/// `lock` is null or points to a `spinlock_t` that is not in use.
///
/// # Locking
///
/// None held; the lock is not in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_s_lock_init(lock: *mut c_void) -> i32 {
    let (Some(k), false) = (kernel(), lock.is_null()) else {
        return Errno::INVAL.to_neg();
    };
    let class = &hfi1_hal::lock_order::S_LOCK_CLASS;
    // SAFETY: `lock` is a `spinlock_t` not in use (the caller); the class's
    // name and key are static.
    unsafe { (k.ops.spin_lock_init)(lock, class.name.as_ptr(), class.key.as_ptr()) };
    0
}

/// Contexts, QPs, requests and owned locks alive now (0 after a clean
/// teardown).
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_live_objects() -> u64 {
    LIVE.load(Ordering::Acquire)
}

pub(crate) fn live_inc() {
    LIVE.fetch_add(1, Ordering::AcqRel);
}

pub(crate) fn live_dec() {
    LIVE.fetch_sub(1, Ordering::AcqRel);
}

/// An uninitialised `Box<T>`, or `None` when the allocator fails.
pub fn try_box_uninit<T>() -> Option<Box<MaybeUninit<T>>> {
    let layout = core::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(MaybeUninit::uninit()));
    }
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc::alloc::alloc(layout) }.cast::<MaybeUninit<T>>();
    // SAFETY: a fresh allocation with `T`'s layout, which
    // `MaybeUninit<T>` shares; uninitialised contents are valid for it.
    NonNull::new(p).map(|p| unsafe { Box::from_raw(p.as_ptr()) })
}

/// `Box::new` that reports allocation failure instead of aborting.
pub fn try_box<T>(value: T) -> Option<Box<T>> {
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

/// Bytes reserved for a `spinlock_t` the engine owns (the C glue checks
/// `sizeof(spinlock_t)` against it at build time: 4 bytes on Debian's
/// kernel, about 64 with lockdep and spinlock debugging).
pub const SPINLOCK_BYTES: usize = 128;

/// Room for one `spinlock_t`, only ever touched by C.
#[repr(C, align(8))]
struct SpinStorage(UnsafeCell<[u8; SPINLOCK_BYTES]>);

/// Where a [`KernelSpinLock`]'s `spinlock_t` is.
enum Place {
    /// In C memory, initialised and owned by C (a QP's `s_lock`).
    External(NonNull<c_void>),
    /// In a block of its own that this lock owns: it was initialised there
    /// and never moves (the box moves, its contents do not).
    Owned(Box<SpinStorage>),
}

/// A kernel `spinlock_t`, reached through the registered callbacks.
///
/// # Invariants
///
/// The `spinlock_t` is initialised, stays where it is for the life of this
/// value, and `k` is the registration it was made with.
pub struct KernelSpinLock {
    at: Place,
    k: Kernel,
}

// SAFETY: the lock is a kernel spinlock reached only through the
// registered callbacks, which are safe from any CPU.
unsafe impl Send for KernelSpinLock {}
// SAFETY: as above; `&KernelSpinLock` only hands out the lock's address.
unsafe impl Sync for KernelSpinLock {}

impl core::fmt::Debug for KernelSpinLock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KernelSpinLock")
            .field("external", &matches!(self.at, Place::External(_)))
            .finish()
    }
}

impl KernelSpinLock {
    /// A lock living in C memory, already initialised by its owner (the
    /// C QP's `s_lock`). `None` for a null pointer.
    ///
    /// # Safety
    ///
    /// `lock` is null or points to an initialised `spinlock_t` that stays
    /// there, initialised, for the life of the returned value.
    pub unsafe fn external(k: Kernel, lock: *mut c_void) -> Option<Self> {
        // INVARIANT: initialised and unmoving, by the caller.
        NonNull::new(lock).map(|p| Self {
            at: Place::External(p),
            k,
        })
    }

    /// A lock of its own: allocates a `spinlock_t` and initialises it where
    /// it stays, with `class`'s name and key (Rust-for-Linux's
    /// `new_spinlock!` with a named static `LockClassKey`).
    ///
    /// # Errors
    ///
    /// [`NoMemory`] if the `spinlock_t` cannot be allocated.
    pub fn try_new(k: Kernel, class: &'static LockClass) -> Result<Self, NoMemory> {
        let storage = try_box(SpinStorage(UnsafeCell::new([0; SPINLOCK_BYTES]))).ok_or(NoMemory)?;
        let lock = storage.0.get().cast::<c_void>();
        // SAFETY: `lock` is room for a `spinlock_t` (size checked by the C
        // glue, 8-aligned), not in use, and stays where it is (a heap block
        // this value owns); the class's name and key are static.
        unsafe { (k.ops.spin_lock_init)(lock, class.name.as_ptr(), class.key.as_ptr()) };
        live_inc();
        // INVARIANT: initialised just above, in a block that never moves.
        Ok(Self {
            at: Place::Owned(storage),
            k,
        })
    }

    fn ptr(&self) -> *mut c_void {
        match &self.at {
            Place::External(p) => p.as_ptr(),
            Place::Owned(b) => b.0.get().cast(),
        }
    }
}

impl Drop for KernelSpinLock {
    fn drop(&mut self) {
        if matches!(self.at, Place::Owned(_)) {
            live_dec();
        }
    }
}

// SAFETY: mutual exclusion and release/acquire ordering are the kernel
// spinlock's; the callbacks are those of the registration the lock was
// made with (type invariant), valid while the lock lives.
unsafe impl RawSpinLock for KernelSpinLock {
    type IrqFlags = usize;

    fn lock_irqsave(&self) -> usize {
        // SAFETY: the spinlock is initialised and unmoving (type invariant).
        unsafe { (self.k.ops.spin_lock_irqsave)(self.ptr()) }
    }

    unsafe fn unlock_irqrestore(&self, flags: usize) {
        // SAFETY: the caller holds the lock and passes its flags.
        unsafe { (self.k.ops.spin_unlock_irqrestore)(self.ptr(), flags) }
    }

    /// `lockdep_assert_held()`: lockdep knows which locks this context
    /// holds and in which order, so only the lock is passed.
    fn assert_held(&self, _token: &'static LockClass) {
        // SAFETY: the spinlock is initialised (type invariant).
        unsafe { (self.k.ops.lockdep_assert_held)(self.ptr()) }
    }
}

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
