// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The order itself: lockdep's class keys and classes, the levels, the
//! edges between them ([`LockAfter`], [`impl_lock_after!`](crate::impl_lock_after))
//! and the token that proves a level is held.

use core::cell::UnsafeCell;
use core::ffi::CStr;
use core::fmt;
use core::marker::PhantomData;

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
    /// ([`RawSpinLock::before_lock`](super::RawSpinLock::before_lock)),
    /// and the software platform's checker reports it then.
    pub fn root() -> Self {
        Self::held()
    }
}

impl<L> LockToken<'_, L> {
    /// The token of a level the context has just taken (only a guard
    /// makes one).
    pub(super) fn held() -> Self {
        Self {
            _marker: PhantomData,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

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
}
