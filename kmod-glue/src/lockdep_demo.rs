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
//! an explicit `unsafe`. The demo ([`hfi1_tid_lockdep_demo_invert`]) makes
//! two locks of the kernel platform ([`KernelSpinLock::try_new`], which
//! initialises each where it stays with its level's named lockdep class,
//! `hfi1_tid_rcd_exp_lock` and `hfi1_tid_qp_s_lock`, through the registered
//! C callbacks), takes them the legal way ([`lock_in_order`]), so lockdep
//! learns `s_lock -> exp_lock`, and then the inverted way; lockdep must
//! answer with a "possible circular locking dependency" report that names
//! both classes.
//!
//! Kernel: no counterpart. The driver has no such path; this is the bug
//! lockdep would report if it had one.

use hfi1_hal::lock_order::{
    EXP_LOCK_CLASS, ExpLock, Lock, LockLevel, LockToken, RawSpinLock, S_LOCK_CLASS, SLock,
};

use crate::errno::Errno;
use crate::kplat::{KernelSpinLock, kernel};

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

/// Takes two fresh kernel-platform locks (a receive context's `exp_lock`
/// and a QP's `s_lock`, each of its named lockdep class) in the driver's
/// order, then inverted. Returns 0, `-EINVAL` when no kernel platform is
/// registered, or `-ENOMEM`.
///
/// The locks are [`KernelSpinLock`]s made as the engine makes its
/// context's `exp_lock` ([`KernelSpinLock::try_new`] with the level's
/// class), so lockdep sees the platform's own lock path and classes.
///
/// # Locking
///
/// The caller holds no spinlock and has registered the platform
/// ([`crate::kplat::hfi1_tid_platform_register`]).
#[unsafe(no_mangle)]
pub extern "C" fn hfi1_tid_lockdep_demo_invert() -> i32 {
    let Some(k) = kernel() else {
        return Errno::INVAL.to_neg();
    };
    let (Ok(e), Ok(s)) = (
        KernelSpinLock::try_new(k, ExpLock::class()),
        KernelSpinLock::try_new(k, SLock::class()),
    ) else {
        return Errno::NOMEM.to_neg();
    };
    debug_assert!(core::ptr::eq(ExpLock::class(), &EXP_LOCK_CLASS));
    debug_assert!(core::ptr::eq(SLock::class(), &S_LOCK_CLASS));
    let exp: Lock<ExpLock, KernelSpinLock, ()> = Lock::with_raw(e, ());
    let s: Lock<SLock, KernelSpinLock, ()> = Lock::with_raw(s, ());
    lock_in_order(&s, &exp);
    // SAFETY: both locks are local to this call: nothing else can take them.
    unsafe { lock_inverted(&exp, &s) };
    0
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

        fn assert_held(&self, _token: &'static hfi1_hal::lock_order::LockClass) {
            assert!(*self.held.borrow(), "{} not held", self.name);
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

    /// The C entry point on a registered platform whose spinlock callbacks
    /// record what the kernel would be asked to do.
    mod entry {
        use core::ffi::{CStr, c_char, c_void};
        use std::string::{String, ToString};
        use std::sync::Mutex;
        use std::vec::Vec;

        use crate::errno::EINVAL;
        use crate::kplat::{
            PlatformOps, hfi1_tid_live_objects, hfi1_tid_platform_register,
            hfi1_tid_platform_unregister,
        };
        use crate::lockdep_demo::hfi1_tid_lockdep_demo_invert;
        use hfi1_hal::lock_order::{EXP_LOCK_CLASS, S_LOCK_CLASS};

        /// `(operation, class name)`: `i`nit, `l`ock, `u`nlock.
        static EVENTS: Mutex<Vec<(char, String)>> = Mutex::new(Vec::new());
        /// Lock address to the class name and key it was initialised with.
        static CLASSES: Mutex<Vec<(usize, String, usize)>> = Mutex::new(Vec::new());

        fn class_of(lock: *mut c_void) -> String {
            CLASSES
                .lock()
                .unwrap()
                .iter()
                .find(|(p, _, _)| *p == lock as usize)
                .map_or_else(|| "?".to_string(), |(_, c, _)| c.clone())
        }
        unsafe extern "C" fn init(lock: *mut c_void, name: *const c_char, key: *mut c_void) {
            // SAFETY: the engine passes a class's static C string.
            let name = unsafe { CStr::from_ptr(name) }
                .to_str()
                .unwrap()
                .to_string();
            CLASSES
                .lock()
                .unwrap()
                .push((lock as usize, name.clone(), key as usize));
            EVENTS.lock().unwrap().push(('i', name));
        }
        unsafe extern "C" fn lock(lock: *mut c_void) -> usize {
            EVENTS.lock().unwrap().push(('l', class_of(lock)));
            0
        }
        unsafe extern "C" fn unlock(lock: *mut c_void, _flags: usize) {
            EVENTS.lock().unwrap().push(('u', class_of(lock)));
        }
        unsafe extern "C" fn held(_: *mut c_void) {}
        unsafe extern "C" fn qp(_: *mut c_void) {}
        unsafe extern "C" fn trigger(_: *mut c_void, _: u32) -> bool {
            false
        }
        unsafe extern "C" fn map(_: *mut c_void, _: u64, _: u32, _: *mut u64) -> i32 {
            -EINVAL
        }
        unsafe extern "C" fn unmap(_: *mut c_void, _: u64, _: u32) {}
        unsafe extern "C" fn kmem(_: *mut c_void, _: *mut u32) {}
        unsafe extern "C" fn random() -> u32 {
            4
        }

        #[test]
        fn needs_a_platform_then_inverts_kernel_locks() {
            assert_eq!(hfi1_tid_lockdep_demo_invert(), -EINVAL);
            assert!(EVENTS.lock().unwrap().is_empty());
            let ops = PlatformOps {
                spin_lock_init: Some(init),
                spin_lock_irqsave: Some(lock),
                spin_unlock_irqrestore: Some(unlock),
                lockdep_assert_held: Some(held),
                qp_get: Some(qp),
                qp_put: Some(qp),
                queue_trigger: Some(trigger),
                schedule_send: Some(qp),
                do_send: Some(qp),
                dma_map: Some(map),
                dma_unmap: Some(unmap),
                wait_kmem: Some(kmem),
                random_u32: Some(random),
                queue_tid_send: Some(trigger),
            };
            // SAFETY: the callbacks are plain functions, callable until the
            // end of the program.
            assert_eq!(unsafe { hfi1_tid_platform_register(&ops) }, 0);
            let ret = hfi1_tid_lockdep_demo_invert();
            assert_eq!(hfi1_tid_live_objects(), 0, "the owned locks are freed");
            assert_eq!(hfi1_tid_platform_unregister(), 0);
            assert_eq!(ret, 0);
            let (e, s) = ("hfi1_tid_rcd_exp_lock", "hfi1_tid_qp_s_lock");
            let ev: Vec<(char, &str)> = EVENTS
                .lock()
                .unwrap()
                .iter()
                .map(|(c, n)| {
                    (
                        *c,
                        if n == e {
                            e
                        } else if n == s {
                            s
                        } else {
                            "?"
                        },
                    )
                })
                .collect();
            assert_eq!(
                ev,
                [
                    ('i', e),
                    ('i', s),
                    ('l', s),
                    ('l', e),
                    ('u', e),
                    ('u', s),
                    ('l', e),
                    ('l', s),
                    ('u', s),
                    ('u', e),
                ]
            );
            // One static key per level, the level's own.
            let keys: Vec<usize> = CLASSES.lock().unwrap().iter().map(|c| c.2).collect();
            assert_eq!(
                keys,
                [
                    EXP_LOCK_CLASS.key.as_ptr() as usize,
                    S_LOCK_CLASS.key.as_ptr() as usize
                ]
            );
        }
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
