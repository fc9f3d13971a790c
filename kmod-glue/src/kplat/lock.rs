// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! [`KernelSpinLock`]: a kernel `spinlock_t`, initialised where it
//! lives, reached through the registered callbacks.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::ptr::NonNull;

use alloc::boxed::Box;

use hfi1_hal::lock_order::{LockClass, RawSpinLock};
use hfi1_hal::services::NoMemory;

use super::{Kernel, live_dec, live_inc, try_box};

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
