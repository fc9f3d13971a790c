// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Synchronisation primitives shared by the engine crates, and the
//! host/loom spin-lock backend.
//!
//! The engine never names `core::sync::atomic` or `loom` directly: it goes
//! through [`atomic`] and [`SpinLock`], which switch to loom's primitives
//! when the workspace is built with `RUSTFLAGS="--cfg loom"` (the tokio
//! habit), so the same code is model-checked.
//!
//! [`SpinLock`] is the backend for host builds (tests, benchmarks, the
//! simulator): a test-and-test-and-set lock on an atomic flag. Without
//! `std` it spins with `core::hint::spin_loop`; with `std` it yields the
//! thread between attempts (two cores are shared by several processes on
//! the CI machine, so a pure spin would waste a whole time slice); under
//! loom it yields to the model checker, which is what lets loom explore a
//! contended lock without an unbounded loop. There are no interrupts in
//! user space, so its IRQ flags are `()`; the kernel backend (in
//! `kmod-glue`) wraps a C `spinlock_t` with `spin_lock_irqsave` /
//! `spin_unlock_irqrestore` and carries the saved flags instead.

use crate::lock_order::{LockClass, NewRawSpinLock, RawSpinLock};

/// Atomics: `core::sync::atomic` normally, loom's under `cfg(loom)`.
pub mod atomic {
    #[cfg(loom)]
    pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

    #[cfg(not(loom))]
    pub use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

use atomic::{AtomicBool, Ordering};

/// Gives way while waiting for a lock: yields to loom or to the OS
/// scheduler where there is one, else a CPU spin hint.
#[inline]
pub fn relax() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(all(not(loom), feature = "std"))]
    std::thread::yield_now();
    #[cfg(all(not(loom), not(feature = "std")))]
    core::hint::spin_loop();
}

/// The host (and loom) spin-lock backend.
#[derive(Debug)]
pub struct SpinLock {
    locked: AtomicBool,
}

impl SpinLock {
    /// An unlocked lock.
    pub fn new() -> Self {
        Self {
            locked: AtomicBool::new(false),
        }
    }

    /// True while some context holds the lock (for assertions only: the
    /// answer may be stale when it is read).
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}

impl Default for SpinLock {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `lock_irqsave` returns only after it changed `locked` from false
// to true with Acquire ordering, and only `unlock_irqrestore` (called by the
// holder, per its contract) stores false again with Release ordering, so at
// most one context holds the lock and the holder's writes are visible to
// the next one.
unsafe impl RawSpinLock for SpinLock {
    type IrqFlags = ();

    fn lock_irqsave(&self) {
        loop {
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            while self.locked.load(Ordering::Relaxed) {
                relax();
            }
        }
    }

    unsafe fn unlock_irqrestore(&self, _flags: ()) {
        self.locked.store(false, Ordering::Release);
    }

    /// This lock does not know its holder: it can only check that someone
    /// holds it (debug builds).
    fn assert_held(&self, _token: &'static LockClass) {
        debug_assert!(self.is_locked(), "lock assumed held but it is free");
    }
}

impl NewRawSpinLock for SpinLock {
    fn new_with_class(_class: &'static LockClass) -> Self {
        Self::new()
    }
}
