// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The driver's lock order, as types (SPEC §4).
//!
//! ```text
//!  Unlocked ──▶ RLock ──▶ SLock ──▶ ExpLock
//!  (work item,  (one QP's  (one QP's  (the receive context's
//!   send engine, r_lock:    s_lock)    exp_lock: flows, TID
//!   test)       receive               groups, wait queues)
//!               path)
//!
//!  transitive: Unlocked → SLock (the send engine), RLock → ExpLock, ...
//!  no edge back: SLock → RLock, ExpLock → SLock, ExpLock → RLock
//!  no edge to itself: two r_locks, two s_locks (never two QPs' locks)
//! ```
//!
//! This follows Fuchsia netstack3's `lock-order` crate. A level is an
//! uninhabited type; [`LockAfter<A>`] says that a lock of this level may be
//! taken while holding level `A`. Edges are declared with
//! [`impl_lock_after!`](crate::impl_lock_after), which also makes the
//! order transitive: `impl_lock_after!(A => B)` lets `B` follow `A` and
//! everything `A` may follow. A cycle in the declarations is a compile
//! error: it makes the blanket impl overlap the direct one (E0119).
//!
//! A [`LockToken<L>`] is the proof that the current context holds level `L`
//! (and nothing after it). Taking a [`Lock`] of level `M` needs
//! `&mut LockToken<L>` with `M: LockAfter<L>`: the token is mutably
//! borrowed for as long as the returned [`Guard`] lives, and the guard
//! carries a `LockToken<M>` of its own. So the only token usable while a
//! guard lives is the guard's, and the only locks it can open are the ones
//! declared after that level.
//!
//! The lock itself is [`Lock<L, R, T>`]: data `T` behind a platform spin lock
//! `R` ([`RawSpinLock`], spin lock with interrupts-off semantics), the
//! Rust-for-Linux `Lock<T, Backend>` shape. Its guard is `#[must_use]` and
//! not `Send` (a spin lock is released by the CPU that took it).
//!
//! **A lock the caller already holds.** The driver enters the engine with
//! the QP's `s_lock` held (`__must_hold(&qp->s_lock)`). For that,
//! [`Lock::assume_held`] makes the guard over a lock the context took
//! itself (Rust-for-Linux's `unsafe fn Guard::new` for locks that C took):
//! it asserts through the backend that the lock is held
//! ([`RawSpinLock::assert_held`]: `lockdep_assert_held` in the kernel, the
//! runtime checker on the software platform) and does not release it on
//! drop.
//!
//! The root token ([`LockToken::root`]) is made at an entry point that
//! holds no lock of this order. The types cannot stop a function from
//! minting a second root while a guard lives; the backend sees it when that
//! root is used ([`RawSpinLock::before_lock`] gets the class of the token a
//! lock is taken with), and the software platform's checker
//! (`sim::lockdep`, lockdep's job in the kernel) reports it. Every test
//! runs with that checker.
//!
//! # What does not compile
//!
//! The legal order builds, through the receive path's `r_lock` or straight
//! from the send engine's root:
//!
//! ```
//! use hfi1_hal::lock_order::{ExpLock, Lock, LockToken, RLock, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let r_lock: Lock<RLock, SpinLock, u32> = Lock::new(0);
//! let s_lock: Lock<SLock, SpinLock, u32> = Lock::new(1);
//! let exp_lock: Lock<ExpLock, SpinLock, u32> = Lock::new(2);
//! let mut root = LockToken::root();
//! {
//!     let mut r = r_lock.lock(&mut root);
//!     let mut s = s_lock.lock(r.token());
//!     let (flags, s_token) = s.parts();
//!     let mut exp = exp_lock.lock(s_token);
//!     *exp += *flags;
//! }
//! let mut s = s_lock.lock(&mut root);
//! let exp = exp_lock.lock(s.token());
//! assert_eq!(*exp, 3);
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
//! Taking an r_lock while holding an s_lock:
//!
//! ```compile_fail,E0277
//! use hfi1_hal::lock_order::{Lock, LockToken, RLock, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let s_lock: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let r_lock: Lock<RLock, SpinLock, u32> = Lock::new(0);
//! let mut root = LockToken::root();
//! let mut s = s_lock.lock(&mut root);
//! let _r = r_lock.lock(s.token()); // RLock is not LockAfter<SLock>
//! ```
//!
//! Taking an r_lock while holding exp_lock:
//!
//! ```compile_fail,E0277
//! use hfi1_hal::lock_order::{ExpLock, Lock, LockToken, RLock, SLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let s_lock: Lock<SLock, SpinLock, u32> = Lock::new(0);
//! let exp_lock: Lock<ExpLock, SpinLock, u32> = Lock::new(0);
//! let r_lock: Lock<RLock, SpinLock, u32> = Lock::new(0);
//! let mut root = LockToken::root();
//! let mut s = s_lock.lock(&mut root);
//! let mut exp = exp_lock.lock(s.token());
//! let _r = r_lock.lock(exp.token()); // RLock is not LockAfter<ExpLock>
//! ```
//!
//! Holding two r_locks:
//!
//! ```compile_fail,E0277
//! use hfi1_hal::lock_order::{Lock, LockToken, RLock};
//! use hfi1_hal::sync::SpinLock;
//!
//! let qp_a: Lock<RLock, SpinLock, u32> = Lock::new(0);
//! let qp_b: Lock<RLock, SpinLock, u32> = Lock::new(0);
//! let mut root = LockToken::root();
//! let mut a = qp_a.lock(&mut root);
//! let _b = qp_b.lock(a.token()); // RLock is not LockAfter<RLock>
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
//! A cycle in the declarations (here `C → A` closing `A → B → C`):
//!
//! ```compile_fail,E0119
//! use hfi1_hal::impl_lock_after;
//! use hfi1_hal::lock_order::{LockAfter, Unlocked};
//!
//! enum A {}
//! enum B {}
//! enum C {}
//! impl LockAfter<Unlocked> for A {}
//! impl_lock_after!(A => B);
//! impl_lock_after!(B => C);
//! impl_lock_after!(C => A); // conflicting implementations of LockAfter<_> for A
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

use core::cell::UnsafeCell;
use core::ffi::CStr;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

/// Room for the kernel's `struct lock_class_key` (16 bytes with lockdep, 0
/// without; the C glue checks `sizeof` against this at build time).
pub const LOCK_CLASS_KEY_BYTES: usize = 16;

/// A lockdep class key: static storage the kernel's lockdep identifies a
/// lock class by. Kernel: `struct lock_class_key` (Rust-for-Linux's
/// `LockClassKey`). Only its address is ever used, by C.
#[repr(C, align(8))]
pub struct LockClassKey(UnsafeCell<[u8; LOCK_CLASS_KEY_BYTES]>);

// SAFETY: Rust never reads or writes the bytes; the kernel's lockdep, which
// owns them once a lock of the class is initialised, synchronises its own
// accesses (under its graph lock).
unsafe impl Sync for LockClassKey {}

// Rust never touches the bytes, so a panic cannot leave them half-written
// as far as Rust is concerned.
impl core::panic::RefUnwindSafe for LockClassKey {}

impl LockClassKey {
    /// A zeroed key, as a static `struct lock_class_key` starts.
    pub const fn new() -> Self {
        Self(UnsafeCell::new([0; LOCK_CLASS_KEY_BYTES]))
    }

    /// The key's address, for the kernel.
    pub fn as_ptr(&self) -> *mut core::ffi::c_void {
        self.0.get().cast()
    }
}

impl Default for LockClassKey {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for LockClassKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockClassKey")
    }
}

/// A lock class: what lockdep calls a class (a name and a key). Every lock
/// of one level shares its class; `rank` orders the classes for the
/// software platform's checker (a lock may be taken only while every held
/// lock has a lower rank).
#[derive(Debug)]
pub struct LockClass {
    /// Name for reports (lockdep prints it).
    pub name: &'static CStr,
    /// Position in the order: higher is taken later.
    pub rank: u8,
    /// The key a kernel lock of this class is initialised with.
    pub key: LockClassKey,
}

impl PartialEq for LockClass {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::eq(self, other)
    }
}

impl Eq for LockClass {}

impl LockClass {
    /// A class named `name` at position `rank` of the order, with its own
    /// zeroed key.
    pub const fn new(name: &'static CStr, rank: u8) -> Self {
        Self {
            name,
            rank,
            key: LockClassKey::new(),
        }
    }

    /// The name as text.
    pub fn name_str(&self) -> &'static str {
        self.name.to_str().unwrap_or("?")
    }
}

/// A lock level.
pub trait LockLevel {
    /// The class every lock of this level belongs to.
    fn class() -> &'static LockClass;
}

/// `Self` may be locked while holding level `A`.
///
/// Declare edges with [`impl_lock_after!`](crate::impl_lock_after) (which
/// adds the transitive ones and makes a cycle a compile error); the only
/// direct impls are the edges from [`Unlocked`].
pub trait LockAfter<A> {}

/// `Self` may be held while taking level `B` (the reverse of
/// [`LockAfter`], blanket-implemented from it; bounds read better with it).
pub trait LockBefore<B> {}

impl<B: LockAfter<A>, A> LockBefore<B> for A {}

/// Declares `$B` lockable while holding `$A`, and while holding anything
/// `$A` may be taken under (the order is transitive). Declaring a cycle
/// does not compile: the second impl then overlaps the first.
#[macro_export]
macro_rules! impl_lock_after {
    ($A:ty => $B:ty) => {
        impl $crate::lock_order::LockAfter<$A> for $B {}
        impl<X: $crate::lock_order::LockBefore<$A>> $crate::lock_order::LockAfter<X> for $B {}
    };
}

/// The level of a context that holds no lock of this hierarchy.
#[derive(Debug)]
pub enum Unlocked {}

/// A QP's `r_lock` (the receive path). Kernel: `qp->r_lock`.
#[derive(Debug)]
pub enum RLock {}

/// A QP's `s_lock`. Kernel: `qp->s_lock`.
#[derive(Debug)]
pub enum SLock {}

/// A receive context's `exp_lock`. Kernel: `rcd->exp_lock`.
#[derive(Debug)]
pub enum ExpLock {}

/// The checker's ranks, in the declared order.
const RANK_UNLOCKED: u8 = 0;
const RANK_R: u8 = 1;
const RANK_S: u8 = 2;
const RANK_EXP: u8 = 3;
const _: () = assert!(RANK_UNLOCKED < RANK_R && RANK_R < RANK_S && RANK_S < RANK_EXP);

/// The class of [`Unlocked`] (no lock is ever made with it).
pub static UNLOCKED_CLASS: LockClass = LockClass::new(c"hfi1_tid_unlocked", RANK_UNLOCKED);

/// The class of every QP's `r_lock` the engine initialises.
pub static R_LOCK_CLASS: LockClass = LockClass::new(c"hfi1_tid_qp_r_lock", RANK_R);

/// The class of every QP's `s_lock` the engine initialises.
pub static S_LOCK_CLASS: LockClass = LockClass::new(c"hfi1_tid_qp_s_lock", RANK_S);

/// The class of every receive context's `exp_lock` the engine initialises.
pub static EXP_LOCK_CLASS: LockClass = LockClass::new(c"hfi1_tid_rcd_exp_lock", RANK_EXP);

impl LockLevel for Unlocked {
    fn class() -> &'static LockClass {
        &UNLOCKED_CLASS
    }
}

impl LockLevel for RLock {
    fn class() -> &'static LockClass {
        &R_LOCK_CLASS
    }
}

impl LockLevel for SLock {
    fn class() -> &'static LockClass {
        &S_LOCK_CLASS
    }
}

impl LockLevel for ExpLock {
    fn class() -> &'static LockClass {
        &EXP_LOCK_CLASS
    }
}

// The whole order. The root edge is written directly (nothing comes
// before `Unlocked`); the rest through the macro, which adds
// Unlocked → SLock, Unlocked → ExpLock and RLock → ExpLock.
impl LockAfter<Unlocked> for RLock {}
impl_lock_after!(RLock => SLock);
impl_lock_after!(SLock => ExpLock);

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
    /// The token of a context that holds no lock of this order: made once
    /// at an entry point (a work item, the send engine's caller, a C entry
    /// point about to assume the caller's `s_lock`, a test thread).
    ///
    /// Making a second root while a guard of the first lives defeats the
    /// type check; the backend sees the root's class when the root is used
    /// ([`RawSpinLock::before_lock`]), and the software platform's checker
    /// reports it then.
    pub fn root() -> Self {
        Self {
            _marker: PhantomData,
        }
    }
}

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
            token: LockToken {
                _marker: PhantomData,
            },
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

    /// What lockdep is given: each class's name as text, and a key whose
    /// address is the class's own static storage (lockdep keys a class by
    /// that address, so two classes must never share one).
    #[test]
    fn classes_give_lockdep_their_names_and_own_keys() {
        let names = [
            UNLOCKED_CLASS.name_str(),
            R_LOCK_CLASS.name_str(),
            S_LOCK_CLASS.name_str(),
            EXP_LOCK_CLASS.name_str(),
        ];
        assert_eq!(
            names,
            [
                "hfi1_tid_unlocked",
                "hfi1_tid_qp_r_lock",
                "hfi1_tid_qp_s_lock",
                "hfi1_tid_rcd_exp_lock"
            ]
        );
        let keys = [
            S_LOCK_CLASS.key.as_ptr(),
            EXP_LOCK_CLASS.key.as_ptr(),
            R_LOCK_CLASS.key.as_ptr(),
        ];
        assert_eq!(keys[0], core::ptr::from_ref(&S_LOCK_CLASS.key) as *mut _);
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2]);
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
