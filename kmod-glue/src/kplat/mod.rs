// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The kernel services of the stateful engine: spinlocks, QP references,
//! scheduling, DMA mapping and random numbers on C callbacks.
//!
//! This module holds the callback table, its registration and the live
//! object count; `lock` the [`KernelSpinLock`], `mem` the `kmalloc` boxes
//! and [`KMem`], `qp` the [`KernelPlatform`] with its QPs, references,
//! scheduler, DMA map and randomness.
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

mod lock;
mod mem;
mod qp;

pub use lock::{KernelSpinLock, SPINLOCK_BYTES};
pub use mem::{KMem, try_box, try_box_uninit};
pub(crate) use qp::do_send;
pub use qp::{KDma, KQp, KRandom, KRef, KSched, KernelPlatform};

use core::cell::UnsafeCell;
use core::ffi::{c_char, c_void};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::errno::Errno;

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
