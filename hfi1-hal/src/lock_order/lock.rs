// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The lock ([`Lock`]) over a platform spin lock ([`RawSpinLock`]) and
//! its guard ([`Guard`]): taken with the token of a level it may follow,
//! or assumed held when the caller took it.

use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

use super::{LockAfter, LockClass, LockLevel, LockToken};

/// A platform spin lock with interrupts-off semantics.
///
/// Kernel: `spinlock_t` with `spin_lock_irqsave()` /
/// `spin_unlock_irqrestore()` and `lockdep_assert_held()`. The methods take
/// `&self`, so the lock may live in memory the C side owns.
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

    /// Checks that the calling context holds this lock, taken while it held
    /// level `token` of the order (and nothing after it). Kernel:
    /// `lockdep_assert_held()` (a warning, never a panic). Called by
    /// [`Lock::assume_held`].
    fn assert_held(&self, token: &'static LockClass);

    /// Called by [`Lock::lock`] just before `lock_irqsave`, with the class
    /// of the level the caller's token proves it holds. A checking backend
    /// verifies the context really holds that much and no more (a second
    /// root token used while a guard lives shows up here). The kernel's
    /// lockdep checks the order inside `lock_irqsave`, so the default does
    /// nothing.
    fn before_lock(&self, token: &'static LockClass) {
        let _ = token;
    }
}

/// A backend that can make a fresh, unlocked lock of a class by value (a
/// lock that may move: the host and sim backends). A backend whose lock
/// must not move after initialisation (the kernel's `spinlock_t`) builds
/// its locks where they live and uses [`Lock::with_raw`].
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
    /// Kernel: `spin_lock_init()` with the level's class.
    pub fn new(data: T) -> Self {
        Self::with_raw(R::new_with_class(L::class()), data)
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

    /// The raw lock (for platform code, a caller that takes the lock the
    /// way C does before [`Lock::assume_held`], and assertions).
    pub fn raw(&self) -> &R {
        &self.raw
    }

    /// [`Lock::with_raw`] in place, for data too large to build on a
    /// kernel stack: writes `raw` into the lock at `this` and returns where
    /// its data goes, for the caller to write (Rust-for-Linux's pin-init
    /// in spirit).
    ///
    /// # Safety
    ///
    /// `this` is valid for writes of one lock and aligned, and the caller
    /// writes a valid `T` at the returned pointer before the lock is used,
    /// moved or dropped.
    #[cfg(not(loom))]
    pub unsafe fn init_at(this: *mut Self, raw: R) -> *mut T {
        // SAFETY: `this` is valid for writes (the caller's promise);
        // `_level` is zero-sized and needs no write; `UnsafeCell<T>` has
        // `T`'s layout.
        unsafe {
            (&raw mut (*this).raw).write(raw);
            core::cell::UnsafeCell::raw_get(&raw const (*this).data)
        }
    }
}

impl<L: LockLevel, R: RawSpinLock, T> Lock<L, R, T> {
    /// Takes the lock. Needs the caller's current token, of a level this
    /// lock may follow; that token stays borrowed until the guard is gone,
    /// and the guard carries the token of level `L`.
    pub fn lock<'a, F: LockLevel>(&'a self, _token: &'a mut LockToken<'_, F>) -> Guard<'a, L, R, T>
    where
        L: LockAfter<F>,
    {
        self.raw.before_lock(F::class());
        let flags = self.raw.lock_irqsave();
        Guard::make(self, Some(flags))
    }

    /// The guard over this lock when the calling context already holds it
    /// (the driver calls the engine with `qp->s_lock` held). Asserts that
    /// through the backend ([`RawSpinLock::assert_held`]); the guard does
    /// not release the lock when dropped. Rust-for-Linux:
    /// `unsafe fn Guard::new()` with `Backend::assert_is_held()`.
    ///
    /// The token works as for [`Lock::lock`]: it is the level the context
    /// held when it took this lock (the root for a C caller that holds
    /// nothing else of this order), lent for the guard's life.
    ///
    /// # Safety
    ///
    /// - The calling context holds this lock (took it with
    ///   `lock_irqsave` on [`Lock::raw`], or the C caller took it), took it
    ///   while holding no lock of this order beyond `token`'s level, and
    ///   keeps holding it for all of `'a`.
    /// - Nothing else reaches the lock's data during `'a`: the one who took
    ///   the lock does not touch it while the guard lives, and no other
    ///   guard over this lock exists.
    pub unsafe fn assume_held<'a, F: LockLevel>(
        &'a self,
        _token: &'a mut LockToken<'_, F>,
    ) -> Guard<'a, L, R, T>
    where
        L: LockAfter<F>,
    {
        self.raw.assert_held(F::class());
        Guard::make(self, None)
    }
}

/// Proof that a [`Lock`] of level `L` is held, and access to its data.
/// Releases the lock when dropped, unless it was made over a lock the
/// caller holds ([`Lock::assume_held`]).
#[must_use = "dropping the guard releases the lock at once"]
pub struct Guard<'a, L, R: RawSpinLock, T> {
    lock: &'a Lock<L, R, T>,
    /// The flags to restore; `None` for a guard that does not own the
    /// lock (the caller releases it).
    flags: Option<R::IrqFlags>,
    #[cfg(loom)]
    ptr: loom::cell::MutPtr<T>,
    token: LockToken<'a, L>,
}

impl<'a, L, R: RawSpinLock, T> Guard<'a, L, R, T> {
    /// The guard of a lock this context holds now.
    fn make(lock: &'a Lock<L, R, T>, flags: Option<R::IrqFlags>) -> Self {
        Guard {
            lock,
            flags,
            #[cfg(loom)]
            ptr: lock.data.get_mut(),
            token: LockToken::held(),
        }
    }

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

    /// True if dropping this guard releases the lock (it was taken by
    /// [`Lock::lock`], not assumed held).
    pub fn owns_lock(&self) -> bool {
        self.flags.is_some()
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
    use crate::lock_order::{ExpLock, LockClassKey, SLock};
    use crate::sync::SpinLock;

    #[test]
    fn guard_releases_on_drop() {
        let s: Lock<SLock, SpinLock, u32> = Lock::new(5);
        let e: Lock<ExpLock, SpinLock, u32> = Lock::new(7);
        let mut root = LockToken::root();
        {
            let mut g = s.lock(&mut root);
            assert!(s.raw().is_locked() && g.owns_lock());
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

    #[test]
    fn an_assumed_guard_leaves_the_lock_to_its_owner() {
        let s: Lock<SLock, SpinLock, u32> = Lock::new(5);
        let e: Lock<ExpLock, SpinLock, u32> = Lock::new(7);
        s.raw().lock_irqsave();
        let mut root = LockToken::root();
        {
            // SAFETY: this thread took `s` just above and keeps it past the
            // guard; nothing else touches its data meanwhile.
            let mut g = unsafe { s.assume_held(&mut root) };
            assert!(!g.owns_lock());
            *g += 1;
            let mut eg = e.lock(g.token());
            *eg += 1;
        }
        assert!(s.raw().is_locked(), "the assumed guard must not unlock");
        assert!(!e.raw().is_locked());
        // SAFETY: taken above, in this context.
        unsafe { s.raw().unlock_irqrestore(()) };
        let g = s.lock(&mut root);
        assert_eq!(*g, 6);
    }

    /// Debug output names the lock types and shows a guard's data, never
    /// a lock's (reading it would need the lock).
    #[test]
    fn debug_output_names_the_types() {
        use alloc::format;
        let s: Lock<SLock, SpinLock, u32> = Lock::new(5);
        assert_eq!(format!("{s:?}"), "Lock { .. }");
        assert_eq!(format!("{:?}", LockClassKey::new()), "LockClassKey");
        let mut root = LockToken::root();
        assert_eq!(format!("{root:?}"), "LockToken");
        let g = s.lock(&mut root);
        assert_eq!(format!("{g:?}"), "Guard(5)");
    }

    /// The host backend's held-lock check: a guard made over a lock "the
    /// caller holds" while nobody holds it is refused (debug builds).
    #[test]
    #[cfg(debug_assertions)]
    fn assuming_a_free_host_lock_is_refused() {
        let s: Lock<SLock, SpinLock, u32> = Lock::new(5);
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut root = LockToken::root();
            // SAFETY: deliberately broken contract; the backend refuses it
            // before the data is touched.
            drop(unsafe { s.assume_held(&mut root) });
        }));
        assert!(res.is_err());
    }
}
