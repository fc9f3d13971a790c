// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The runtime lock-order checker (lockdep's job in the kernel).
//!
//! [`CheckedSpinLock`] is the sim platform's lock backend. Each context
//! (thread) keeps the stack of locks it holds; taking a lock whose class
//! rank is not above every held lock's rank is a violation: an s_lock under
//! exp_lock, a second s_lock, exp_lock taken twice. So is minting a root
//! [`LockToken`](crate::lock_order::LockToken) while a lock is held. A
//! violation panics with both lock names, like a lockdep splat, so the test
//! that caused it fails; [`violations`] counts them as well.
//!
//! The types make most violations impossible to write; this checker
//! catches what they cannot see (a second root token, a lock taken through
//! platform code, an unlock by the wrong context).
//!
//! Host only (feature `std`): it needs per-thread storage. Under loom the
//! plain [`SpinLock`] is used (loom runs all model threads on one OS thread
//! and checks the protocol itself).
#![allow(clippy::panic)] // a lock-order violation is a failed test, by design

use std::cell::RefCell;
use std::vec::Vec;

use crate::lock_order::{LockClass, NewRawSpinLock, RawSpinLock};
use crate::sync::SpinLock;
use crate::sync::atomic::{AtomicU64, Ordering};

std::thread_local! {
    static HELD: RefCell<Vec<(&'static LockClass, usize)>> = const { RefCell::new(Vec::new()) };
}

static VIOLATIONS: AtomicU64 = AtomicU64::new(0);
static ACQUIRES: AtomicU64 = AtomicU64::new(0);

/// Lock-order violations seen by this process so far.
pub fn violations() -> u64 {
    VIOLATIONS.load(Ordering::Relaxed)
}

/// Checked acquisitions so far (proof that the checker ran).
pub fn acquisitions() -> u64 {
    ACQUIRES.load(Ordering::Relaxed)
}

/// Locks the calling thread holds now.
pub fn held_by_this_thread() -> usize {
    HELD.with(|h| h.borrow().len())
}

fn violation(msg: core::fmt::Arguments<'_>) -> ! {
    VIOLATIONS.fetch_add(1, Ordering::Relaxed);
    panic!("lock-order violation: {msg}");
}

/// Called when a root token is made: the thread must hold no lock.
pub(crate) fn on_root() {
    HELD.with(|h| {
        if let Some((c, _)) = h.borrow().last() {
            violation(format_args!(
                "root lock token made while holding {}",
                c.name
            ));
        }
    });
}

/// A spin lock that checks the lock order on every acquisition.
#[derive(Debug)]
pub struct CheckedSpinLock {
    inner: SpinLock,
    class: &'static LockClass,
}

impl CheckedSpinLock {
    /// The class this lock was made with.
    pub fn class(&self) -> &'static LockClass {
        self.class
    }

    fn id(&self) -> usize {
        core::ptr::from_ref(self) as usize
    }
}

// SAFETY: mutual exclusion is the inner `SpinLock`'s; the checks only add
// bookkeeping around it.
unsafe impl RawSpinLock for CheckedSpinLock {
    type IrqFlags = ();

    fn lock_irqsave(&self) {
        let id = self.id();
        HELD.with(|h| {
            for (c, held_id) in h.borrow().iter() {
                if *held_id == id {
                    violation(format_args!("{} taken twice (self-deadlock)", c.name));
                }
                if c.rank >= self.class.rank {
                    violation(format_args!(
                        "{} (rank {}) taken while holding {} (rank {})",
                        self.class.name, self.class.rank, c.name, c.rank
                    ));
                }
            }
        });
        self.inner.lock_irqsave();
        ACQUIRES.fetch_add(1, Ordering::Relaxed);
        HELD.with(|h| h.borrow_mut().push((self.class, id)));
    }

    unsafe fn unlock_irqrestore(&self, flags: ()) {
        let id = self.id();
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            match h.iter().rposition(|(_, i)| *i == id) {
                Some(pos) => {
                    h.remove(pos);
                }
                None => violation(format_args!(
                    "{} released by a context that does not hold it",
                    self.class.name
                )),
            }
        });
        // SAFETY: forwarded contract: the caller holds the lock.
        unsafe { self.inner.unlock_irqrestore(flags) };
    }
}

impl NewRawSpinLock for CheckedSpinLock {
    fn new_with_class(class: &'static LockClass) -> Self {
        Self {
            inner: SpinLock::new(),
            class,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock_order::{ExpLock, LockLevel, SLock};

    #[test]
    fn in_order_is_quiet_and_out_of_order_panics() {
        let s = CheckedSpinLock::new_with_class(SLock::CLASS);
        let s2 = CheckedSpinLock::new_with_class(SLock::CLASS);
        let e = CheckedSpinLock::new_with_class(ExpLock::CLASS);
        s.lock_irqsave();
        e.lock_irqsave();
        assert_eq!(held_by_this_thread(), 2);
        // SAFETY: both held by this thread.
        unsafe {
            e.unlock_irqrestore(());
            s.unlock_irqrestore(());
        }
        assert_eq!(held_by_this_thread(), 0);

        // exp_lock, then an s_lock: must panic.
        let r = std::panic::catch_unwind(|| {
            e.lock_irqsave();
            s.lock_irqsave();
        });
        assert!(r.is_err());
        // SAFETY: `e` is held by this thread (the panic came before `s`).
        unsafe { e.unlock_irqrestore(()) };
        // Two s_locks: must panic.
        let r = std::panic::catch_unwind(|| {
            s.lock_irqsave();
            s2.lock_irqsave();
        });
        assert!(r.is_err());
        // SAFETY: `s` is held by this thread.
        unsafe { s.unlock_irqrestore(()) };
        assert_eq!(held_by_this_thread(), 0);
        assert!(violations() >= 2);
    }
}
