// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A deliberately wrong lock order, for the kernel's lockdep to catch.
//!
//! Built only with the non-default feature `lockdep-demo`, and linked only
//! into the `LOCKDEP_DEMO=1` variant of the self-test module, which
//! `scripts/lockdep-test.sh` boots on its own in a debug kernel. The normal
//! module never contains this code.
//!
//! The driver's order is a QP's `s_lock`, then the receive context's
//! `exp_lock` (SPEC §4), and [`hfi1_hal::lock_order`] makes the reverse fail
//! to compile. So the only way to write the reverse is to step below the
//! lock types to the raw platform locks, which [`lock_inverted`] does behind
//! an explicit `unsafe`. A demo run first takes both locks the legal way
//! ([`lock_in_order`]), so lockdep learns `s_lock -> exp_lock`, and then
//! the inverted way; lockdep must answer with a "possible circular locking
//! dependency" report that names both lock classes
//! (`hfi1_tid_qp_s_lock`, `hfi1_tid_rcd_exp_lock`, set by the C glue).
//!
//! Kernel: no counterpart. The driver has no such path; this is the bug
//! lockdep would report if it had one.

use hfi1_hal::lock_order::{ExpLock, Lock, LockToken, RawSpinLock, SLock};

/// Takes `s` and then `exp`, the driver's order, through lock tokens, and
/// releases both.
///
/// # Locking
///
/// The caller holds no lock of the hierarchy (this mints a root token).
pub fn lock_in_order<R: RawSpinLock, A, B>(s: &Lock<SLock, R, A>, exp: &Lock<ExpLock, R, B>) {
    let mut root = LockToken::root();
    let mut s_guard = s.lock(&mut root);
    let exp_guard = exp.lock(s_guard.token());
    drop(exp_guard);
    drop(s_guard);
}

/// Takes `exp` and then `s`, the order the lock types forbid, by going
/// around them to the raw platform locks; releases both in reverse.
///
/// This is the test hook that bypasses [`hfi1_hal::lock_order`]: it exists
/// so that lockdep has a real inversion to report.
///
/// # Safety
///
/// It breaks the lock order on purpose: if another context takes the same
/// two locks in the driver's order at the same time, both can deadlock.
/// Call it only where nothing else can reach `exp` or `s` (a dedicated
/// test boot).
///
/// # Locking
///
/// The caller holds neither lock, nor any other lock of the hierarchy.
pub unsafe fn lock_inverted<R: RawSpinLock, A, B>(
    exp: &Lock<ExpLock, R, A>,
    s: &Lock<SLock, R, B>,
) {
    let exp_flags = exp.raw().lock_irqsave();
    let s_flags = s.raw().lock_irqsave();
    // SAFETY: both locks were taken just above, in this context, with these
    // flags; they are released once each, in reverse order.
    unsafe {
        s.raw().unlock_irqrestore(s_flags);
        exp.raw().unlock_irqrestore(exp_flags);
    }
}

#[cfg(target_os = "none")]
pub use kernel::hfi1_tid_lockdep_demo_invert;

/// The C entry point and a raw lock on a C `spinlock_t` (kernel build only).
#[cfg(target_os = "none")]
mod kernel {
    use core::ffi::c_void;

    use hfi1_hal::lock_order::{ExpLock, Lock, RawSpinLock, SLock};

    use super::{lock_in_order, lock_inverted};
    use crate::errno::Errno;

    unsafe extern "C" {
        /// `spin_lock_irqsave(lock, flags)`; returns the flags.
        fn hfi1_tid_demo_lock_irqsave(lock: *mut c_void) -> u64;
        /// `spin_unlock_irqrestore(lock, flags)`.
        fn hfi1_tid_demo_unlock_irqrestore(lock: *mut c_void, flags: u64);
    }

    /// A C `spinlock_t` the glue initialised with its lockdep class.
    ///
    /// # Invariants
    ///
    /// The pointer is a live, initialised `spinlock_t` for this value's
    /// lifetime (promised to [`hfi1_tid_lockdep_demo_invert`]).
    struct CSpinLock(*mut c_void);

    // SAFETY: the kernel's spin_lock_irqsave/spin_unlock_irqrestore give
    // mutual exclusion with acquire/release ordering; by the invariant the
    // lock is live and initialised.
    unsafe impl RawSpinLock for CSpinLock {
        type IrqFlags = u64;

        fn lock_irqsave(&self) -> u64 {
            // SAFETY: by the invariant the pointer is a live spinlock_t.
            unsafe { hfi1_tid_demo_lock_irqsave(self.0) }
        }

        unsafe fn unlock_irqrestore(&self, flags: u64) {
            // SAFETY: the caller holds the lock and passes its flags.
            unsafe { hfi1_tid_demo_unlock_irqrestore(self.0, flags) }
        }
    }

    /// Takes the two locks in the driver's order, then inverted. Returns 0,
    /// or `-EINVAL` for a null lock.
    ///
    /// # Safety
    ///
    /// `exp` and `s` are null or distinct, initialised `spinlock_t`s (of
    /// the exp_lock and s_lock classes, in that order) that no other
    /// context uses during the call; the caller holds no spinlock.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn hfi1_tid_lockdep_demo_invert(exp: *mut c_void, s: *mut c_void) -> i32 {
        if exp.is_null() || s.is_null() || exp == s {
            return Errno::INVAL.to_neg();
        }
        // INVARIANT: the caller promised live, initialised locks.
        let exp: Lock<ExpLock, CSpinLock, ()> = Lock::with_raw(CSpinLock(exp), ());
        let s: Lock<SLock, CSpinLock, ()> = Lock::with_raw(CSpinLock(s), ());
        lock_in_order(&s, &exp);
        // SAFETY: the caller promised that nothing else uses these locks.
        unsafe { lock_inverted(&exp, &s) };
        0
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::vec::Vec;

    use hfi1_hal::lock_order::{ExpLock, Lock, RawSpinLock, SLock};

    use super::{lock_in_order, lock_inverted};

    type Log = RefCell<Vec<(&'static str, bool)>>;

    /// A raw lock that records `(name, taken)` events in a shared log and
    /// checks it is never taken twice.
    struct Recording<'a> {
        name: &'static str,
        held: RefCell<bool>,
        log: &'a Log,
    }

    // SAFETY: single-threaded test double; `held` enforces exclusion by
    // refusing a second acquisition.
    unsafe impl RawSpinLock for Recording<'_> {
        type IrqFlags = ();

        fn lock_irqsave(&self) {
            assert!(!self.held.replace(true), "{} taken twice", self.name);
            self.log.borrow_mut().push((self.name, true));
        }

        unsafe fn unlock_irqrestore(&self, _flags: ()) {
            assert!(self.held.replace(false), "{} released unheld", self.name);
            self.log.borrow_mut().push((self.name, false));
        }
    }

    fn locks(
        log: &Log,
    ) -> (
        Lock<SLock, Recording<'_>, ()>,
        Lock<ExpLock, Recording<'_>, ()>,
    ) {
        let raw = |name| Recording {
            name,
            held: RefCell::new(false),
            log,
        };
        (Lock::with_raw(raw("s"), ()), Lock::with_raw(raw("exp"), ()))
    }

    #[test]
    fn in_order_takes_s_then_exp() {
        let log = Log::default();
        let (s, exp) = locks(&log);
        lock_in_order(&s, &exp);
        assert_eq!(
            log.borrow().as_slice(),
            &[("s", true), ("exp", true), ("exp", false), ("s", false)]
        );
    }

    #[test]
    fn inverted_takes_exp_then_s() {
        let log = Log::default();
        let (s, exp) = locks(&log);
        // SAFETY: nothing else can reach these locks.
        unsafe { lock_inverted(&exp, &s) };
        assert_eq!(
            log.borrow().as_slice(),
            &[("exp", true), ("s", true), ("s", false), ("exp", false)]
        );
    }
}
