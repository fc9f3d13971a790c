// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The driver's lock order, as types (SPEC §4).
//!
//! ```text
//!            LockAfter            LockAfter
//!  Unlocked ───────────▶ SLock ───────────▶ ExpLock
//!  (entry point:         (one QP's          (the receive context's
//!   work item, send       s_lock)            exp_lock: flows, TID
//!   engine, test)                            groups, wait queues)
//!
//!  no edge SLock → SLock      : a path never holds two QPs' s_locks
//!  no edge ExpLock → SLock    : nothing under exp_lock takes an s_lock
//!  no edge Unlocked → ExpLock : exp_lock is taken with an s_lock held
//! ```
//!
//! This follows Fuchsia netstack3's `lock-order` crate. A level is an
//! uninhabited type; [`LockAfter<A>`] declares that a lock of this level may
//! be taken while holding level `A`. A [`LockToken<L>`] is the proof that the
//! current context holds level `L` (and nothing after it). Taking a
//! [`Lock`] of level `M` needs `&mut LockToken<L>` with `M: LockAfter<L>`:
//! the token is mutably borrowed for as long as the returned [`Guard`]
//! lives, and the guard carries a `LockToken<M>` of its own. So the only
//! token usable while a guard lives is the guard's, and the only locks it can
//! open are the ones declared after that level.
//!
//! The lock itself is [`Lock<L, R, T>`]: data `T` behind a platform spin lock
//! `R` ([`RawSpinLock`], spin lock with interrupts-off semantics), the
//! Rust-for-Linux `Lock<T, Backend>` shape. Its guard is `#[must_use]` and
//! not `Send` (a spin lock is released by the CPU that took it).
//!
//! The root token ([`LockToken::root`]) is made at an entry point that
//! holds no lock. The types cannot stop a function from minting a second root
//! while a guard lives; the software platform's runtime checker
//! (`sim::lockdep`, lockdep's job in the kernel) catches that at run time,
//! and every test runs with it.
//!
//! # What does not compile
//!
//! The legal order builds:
//!
//! ```
//! use hfi1_hal::lock_order::{ExpLock, Lock, LockToken, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let s_lock: Lock<SLock, SpinLock, u32> = Lock::new(1);
//! let exp_lock: Lock<ExpLock, SpinLock, u32> = Lock::new(2);
//! let mut root = LockToken::root();
//! let mut s = s_lock.lock(&mut root);
//! let (flags, s_token) = s.parts();
//! let mut exp = exp_lock.lock(s_token);
//! *exp += *flags;
//! drop(exp);
//! drop(s);
//! ```
//!
//! Taking an s_lock while holding exp_lock:
//!
//! ```compile_fail,E0277
//! use hfi1_hal::lock_order::{ExpLock, Lock, LockToken, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let qp_a: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let qp_b: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let exp_lock: Lock<ExpLock, SpinLock, u32> = Lock::new(0);
//! let mut root = LockToken::root();
//! let mut a = qp_a.lock(&mut root);
//! let mut exp = exp_lock.lock(a.token());
//! let _b = qp_b.lock(exp.token()); // SLock is not LockAfter<ExpLock>
//! ```
//!
//! Holding two s_locks, through the first one's token:
//!
//! ```compile_fail,E0277
//! use hfi1_hal::lock_order::{Lock, LockToken, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let qp_a: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let qp_b: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let mut root = LockToken::root();
//! let mut a = qp_a.lock(&mut root);
//! let _b = qp_b.lock(a.token()); // SLock is not LockAfter<SLock>
//! ```
//!
//! or through the root token again:
//!
//! ```compile_fail,E0499
//! use hfi1_hal::lock_order::{Lock, LockToken, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let qp_a: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let qp_b: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let mut root = LockToken::root();
//! let a = qp_a.lock(&mut root);
//! let b = qp_b.lock(&mut root); // root is still lent to `a`
//! drop((a, b));
//! ```
//!
//! Taking exp_lock without an s_lock:
//!
//! ```compile_fail,E0277
//! use hfi1_hal::lock_order::{ExpLock, Lock, LockToken};
//! use hfi1_hal::sync::SpinLock;
//!
//! let exp_lock: Lock<ExpLock, SpinLock, u32> = Lock::new(0);
//! let mut root = LockToken::root();
//! let _exp = exp_lock.lock(&mut root); // ExpLock is not LockAfter<Unlocked>
//! ```
//!
//! Reaching exp_lock-guarded state without its guard: a shared lock gives no
//! access to its data,
//!
//! ```compile_fail,E0596
//! use hfi1_hal::lock_order::{ExpLock, Lock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let exp_lock: Lock<ExpLock, SpinLock, u32> = Lock::new(0);
//! let shared = &exp_lock;
//! *shared.get_mut() = 1; // get_mut needs the lock exclusively
//! ```
//!
//! and nothing borrowed from the guard outlives it:
//!
//! ```compile_fail,E0597
//! use hfi1_hal::lock_order::{ExpLock, Lock, LockToken, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let s_lock: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let exp_lock: Lock<ExpLock, SpinLock, u32> = Lock::new(0);
//! let mut root = LockToken::root();
//! let mut s = s_lock.lock(&mut root);
//! let escaped: &mut u32;
//! {
//!     let mut exp = exp_lock.lock(s.token());
//!     escaped = &mut *exp;
//! }
//! *escaped = 1;
//! ```
//!
//! A guard cannot move to another thread:
//!
//! ```compile_fail,E0277
//! use hfi1_hal::lock_order::{Lock, LockToken, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! static S: std::sync::LazyLock<Lock<SLock, SpinLock, u32>> =
//!     std::sync::LazyLock::new(|| Lock::new(0));
//! let mut root = LockToken::root();
//! let g = S.lock(&mut root);
//! std::thread::spawn(move || drop(g));
//! ```

use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

/// A lock class: what lockdep calls a `lock_class_key`. Every lock of one
/// level shares its class; `rank` orders the classes (a lock may be taken
/// only while every held lock has a lower rank).
#[derive(Debug, PartialEq, Eq)]
pub struct LockClass {
    /// Name for reports.
    pub name: &'static str,
    /// Position in the order: higher is taken later.
    pub rank: u8,
}

/// A lock level.
pub trait LockLevel {
    /// The class every lock of this level belongs to.
    const CLASS: &'static LockClass;
}

/// `Self` may be locked while holding level `A`.
pub trait LockAfter<A> {}

/// The level of a context that holds no lock of this hierarchy.
#[derive(Debug)]
pub enum Unlocked {}

/// A QP's `s_lock`. Kernel: `qp->s_lock`.
#[derive(Debug)]
pub enum SLock {}

/// A receive context's `exp_lock`. Kernel: `rcd->exp_lock`.
#[derive(Debug)]
pub enum ExpLock {}

impl LockLevel for Unlocked {
    const CLASS: &'static LockClass = &LockClass {
        name: "unlocked",
        rank: 0,
    };
}

impl LockLevel for SLock {
    const CLASS: &'static LockClass = &LockClass {
        name: "qp->s_lock",
        rank: 1,
    };
}

impl LockLevel for ExpLock {
    const CLASS: &'static LockClass = &LockClass {
        name: "rcd->exp_lock",
        rank: 2,
    };
}

// The whole order. Deliberately absent: SLock after SLock, SLock after
// ExpLock, ExpLock after Unlocked.
impl LockAfter<Unlocked> for SLock {}
impl LockAfter<SLock> for ExpLock {}

const _: () = assert!(SLock::CLASS.rank < ExpLock::CLASS.rank);

/// Proof that the current context holds level `L` and nothing after it.
///
/// Not `Send`: the proof belongs to the context (thread, CPU) that took
/// the locks.
#[must_use]
pub struct LockToken<'a, L> {
    _marker: TokenMarker<'a, L>,
}

/// Borrows like `&'a mut`, names the level, and is neither `Send` nor
/// `Sync`.
type TokenMarker<'a, L> = PhantomData<(&'a mut (), fn() -> L, *const ())>;

impl<L> fmt::Debug for LockToken<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockToken")
    }
}

impl LockToken<'static, Unlocked> {
    /// The token of a context that holds no lock: made once at an entry
    /// point (a work item, the send engine's caller, a test thread).
    ///
    /// Making a second root while a guard of the first lives defeats the
    /// type check; the software platform's runtime checker reports it.
    pub fn root() -> Self {
        #[cfg(all(feature = "sim", feature = "std", not(loom)))]
        crate::sim::lockdep::on_root();
        Self {
            _marker: PhantomData,
        }
    }
}

/// A platform spin lock with interrupts-off semantics.
///
/// Kernel: `spinlock_t` with `spin_lock_irqsave()` /
/// `spin_unlock_irqrestore()`. The methods take `&self`, so the lock may
/// live in memory the C side owns (the kernel backend holds a pointer to a
/// `spinlock_t` and calls the two functions through the C ABI, returning
/// the saved flags as [`RawSpinLock::IrqFlags`]).
///
/// # Safety
///
/// An implementation must provide mutual exclusion: after `lock_irqsave`
/// returns, no other call to `lock_irqsave` on the same object returns
/// until `unlock_irqrestore` is called, and the unlock must make the
/// holder's writes visible to the next holder (release/acquire).
pub unsafe trait RawSpinLock {
    /// What `lock_irqsave` saves and `unlock_irqrestore` restores (the
    /// interrupt state in the kernel; `()` in user space).
    type IrqFlags;

    /// Takes the lock, disabling local interrupts; returns the previous
    /// interrupt state.
    fn lock_irqsave(&self) -> Self::IrqFlags;

    /// Releases the lock and restores the interrupt state.
    ///
    /// # Safety
    ///
    /// The caller holds the lock (from a `lock_irqsave` on this object in
    /// this context) and passes that call's flags.
    unsafe fn unlock_irqrestore(&self, flags: Self::IrqFlags);
}

/// A backend that can make a fresh, unlocked lock of a class (the kernel's
/// `spin_lock_init` with a lockdep key). Host and sim backends implement
/// it; a backend whose lock lives in C memory builds its locks itself and
/// uses [`Lock::with_raw`].
pub trait NewRawSpinLock: RawSpinLock {
    /// A new unlocked lock of `class`.
    fn new_with_class(class: &'static LockClass) -> Self;
}

#[cfg(loom)]
type Cell<T> = loom::cell::UnsafeCell<T>;
#[cfg(not(loom))]
type Cell<T> = core::cell::UnsafeCell<T>;

/// Data of type `T` behind a spin lock `R` of level `L`.
pub struct Lock<L, R, T> {
    raw: R,
    data: Cell<T>,
    _level: PhantomData<fn() -> L>,
}

// SAFETY: the data is reached only through a guard, which exists only while
// the raw lock is held (or through `&mut Lock`), so sharing the lock shares
// `T` between contexts one at a time: `T: Send` is what that needs.
unsafe impl<L, R: Sync, T: Send> Sync for Lock<L, R, T> {}

impl<L, R, T: fmt::Debug> fmt::Debug for Lock<L, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lock { .. }")
    }
}

impl<L: LockLevel, R: NewRawSpinLock, T> Lock<L, R, T> {
    /// A new unlocked lock of level `L` around `data`.
    /// Kernel: `spin_lock_init()`.
    pub fn new(data: T) -> Self {
        Self::with_raw(R::new_with_class(L::CLASS), data)
    }
}

impl<L, R, T> Lock<L, R, T> {
    /// A lock around `data` using a raw lock the platform made.
    pub fn with_raw(raw: R, data: T) -> Self {
        Self {
            raw,
            data: Cell::new(data),
            _level: PhantomData,
        }
    }

    /// The data, reached without locking because `&mut self` proves no
    /// one else can reach it (initialisation and teardown).
    pub fn get_mut(&mut self) -> &mut T {
        #[cfg(loom)]
        {
            // SAFETY: `&mut self` excludes every other access to the cell for
            // the returned borrow's lifetime.
            self.data.with_mut(|p| unsafe { &mut *p })
        }
        #[cfg(not(loom))]
        {
            self.data.get_mut()
        }
    }

    /// The raw lock (for platform code and assertions).
    pub fn raw(&self) -> &R {
        &self.raw
    }
}

impl<L, R: RawSpinLock, T> Lock<L, R, T> {
    /// Takes the lock. Needs the caller's current token, of a level this
    /// lock may follow; that token stays borrowed until the guard is gone,
    /// and the guard carries the token of level `L`.
    pub fn lock<'a, F>(&'a self, _token: &'a mut LockToken<'_, F>) -> Guard<'a, L, R, T>
    where
        L: LockAfter<F>,
    {
        let flags = self.raw.lock_irqsave();
        Guard {
            lock: self,
            flags: Some(flags),
            #[cfg(loom)]
            ptr: self.data.get_mut(),
            token: LockToken {
                _marker: PhantomData,
            },
        }
    }
}

/// Proof that a [`Lock`] of level `L` is held, and access to its data.
/// Releases the lock when dropped.
#[must_use = "dropping the guard releases the lock at once"]
pub struct Guard<'a, L, R: RawSpinLock, T> {
    lock: &'a Lock<L, R, T>,
    flags: Option<R::IrqFlags>,
    #[cfg(loom)]
    ptr: loom::cell::MutPtr<T>,
    token: LockToken<'a, L>,
}

impl<'a, L, R: RawSpinLock, T> Guard<'a, L, R, T> {
    /// The data and this level's token at once, so a caller can change the
    /// data and take the next lock in the order together (netstack3's
    /// `lock_and`).
    pub fn parts(&mut self) -> (&mut T, &mut LockToken<'a, L>) {
        #[cfg(loom)]
        {
            // SAFETY: the guard holds the lock, so the cell is ours until it
            // drops; the borrow is tied to `&mut self`.
            let data = unsafe { self.ptr.deref() };
            (data, &mut self.token)
        }
        #[cfg(not(loom))]
        {
            // SAFETY: the guard holds the lock, so no other context reaches
            // the data until it drops; the borrow is tied to `&mut self`.
            let data = unsafe { &mut *self.lock.data.get() };
            (data, &mut self.token)
        }
    }

    /// This level's token (to take a lock that follows this one).
    pub fn token(&mut self) -> &mut LockToken<'a, L> {
        &mut self.token
    }
}

impl<L, R: RawSpinLock, T> Deref for Guard<'_, L, R, T> {
    type Target = T;

    fn deref(&self) -> &T {
        #[cfg(loom)]
        {
            // SAFETY: the guard holds the lock (see `parts`).
            unsafe { &*self.ptr.deref() }
        }
        #[cfg(not(loom))]
        {
            // SAFETY: the guard holds the lock (see `parts`).
            unsafe { &*self.lock.data.get() }
        }
    }
}

impl<L, R: RawSpinLock, T> DerefMut for Guard<'_, L, R, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.parts().0
    }
}

impl<L, R: RawSpinLock, T> Drop for Guard<'_, L, R, T> {
    fn drop(&mut self) {
        if let Some(flags) = self.flags.take() {
            // SAFETY: this guard was made by `lock`, which took the lock in
            // this context and saved these flags; `flags` is taken out, so
            // the lock is released exactly once.
            unsafe { self.lock.raw.unlock_irqrestore(flags) };
        }
    }
}

impl<L, R: RawSpinLock, T: fmt::Debug> fmt::Debug for Guard<'_, L, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Guard").field(&**self).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::SpinLock;

    #[test]
    fn guard_releases_on_drop() {
        let s: Lock<SLock, SpinLock, u32> = Lock::new(5);
        let e: Lock<ExpLock, SpinLock, u32> = Lock::new(7);
        let mut root = LockToken::root();
        {
            let mut g = s.lock(&mut root);
            assert!(s.raw().is_locked());
            let (v, t) = g.parts();
            let mut eg = e.lock(t);
            *eg += *v;
            assert!(e.raw().is_locked());
        }
        assert!(!s.raw().is_locked() && !e.raw().is_locked());
        let mut g = s.lock(&mut root);
        let mut eg = e.lock(g.token());
        assert_eq!(*eg, 12);
        *eg = 0;
    }
}
