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

mod levels;
mod lock;

pub use levels::{
    EXP_LOCK_CLASS, ExpLock, LOCK_CLASS_KEY_BYTES, LockAfter, LockBefore, LockClass, LockClassKey,
    LockLevel, LockToken, R_LOCK_CLASS, RLock, S_LOCK_CLASS, SLock, UNLOCKED_CLASS, Unlocked,
};
pub use lock::{Guard, Lock, NewRawSpinLock, RawSpinLock};
