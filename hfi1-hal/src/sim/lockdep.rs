// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The runtime lock-order checker (lockdep's job in the kernel).
//!
//! [`CheckedSpinLock`] is the sim platform's lock backend; the checker
//! hooks into the order through it alone (the lock-order core knows
//! nothing of it). Each context (thread) keeps the stack of locks it holds,
//! in the order it took them. A violation panics with the lock names, like
//! a lockdep splat, so the test that caused it fails; [`violations`] counts
//! them as well. What it reports:
//!
//! - taking a lock whose class rank is not above every held lock's rank:
//!   an s_lock under exp_lock, an r_lock under an s_lock, a second s_lock,
//!   exp_lock taken twice;
//! - a lock taken with a token that does not match what the thread holds
//!   ([`RawSpinLock::before_lock`]): a second root token used while a lock
//!   is held, or a level's token used after a later lock was taken;
//! - a guard made over a lock "the caller holds" when this thread does not
//!   hold it, or holds more than the token says
//!   ([`RawSpinLock::assert_held`], the driver's `lockdep_assert_held`);
//! - an unlock by a context that does not hold the lock.
//!
//! The types make most violations impossible to write; this checker
//! catches what they cannot see (a second root token, a lock taken through
//! platform code, the contract of a held-lock guard).
//!
//! Host only (feature `std`): it needs per-thread storage. Under loom
//! (`cfg(loom)`) that storage is loom's own thread-local, one stack per
//! model thread (loom runs every model thread on one OS thread, where a
//! `std` thread-local would be shared by all of them), so a loom model can
//! run with the checker as its lock backend. The counters are plain
//! `core` atomics in both builds: they only count, and loom's atomics
//! cannot live in a `static`.
#![allow(clippy::panic)] // a lock-order violation is a failed test, by design

use std::cell::RefCell;

use core::sync::atomic::{AtomicU64, Ordering};

use crate::lock_order::{LockClass, NewRawSpinLock, RawSpinLock, UNLOCKED_CLASS};
use crate::sync::SpinLock;

/// Most locks one thread holds at once (the engines hold three at most:
/// r_lock, s_lock, exp_lock); more is reported as a violation.
const MAX_HELD: usize = 16;

/// The locks a thread holds, in the order it took them: a fixed array
/// (no destructor, so the thread-local needs no lazy registration and an
/// access is an address computation).
#[derive(Clone, Copy)]
struct Held {
    len: usize,
    locks: [(&'static LockClass, usize); MAX_HELD],
}

impl Held {
    const fn new() -> Self {
        Self {
            len: 0,
            locks: [(&UNLOCKED_CLASS, 0); MAX_HELD],
        }
    }

    fn as_slice(&self) -> &[(&'static LockClass, usize)] {
        self.locks.get(..self.len).unwrap_or(&[])
    }

    /// Records `lock` on top; `Err` if the stack is full.
    fn push(&mut self, lock: (&'static LockClass, usize)) -> Result<(), Fault> {
        let slot = self.locks.get_mut(self.len).ok_or(Fault::Full)?;
        *slot = lock;
        self.len += 1;
        Ok(())
    }

    /// Drops lock `id` from the stack; false if this thread does not hold
    /// it. The lock on top (the usual, last-taken-first-released case)
    /// goes without a search or a move.
    fn release(&mut self, id: usize) -> bool {
        let Some(top) = self.len.checked_sub(1) else {
            return false;
        };
        if self.locks.get(top).is_some_and(|&(_, i)| i == id) {
            self.len = top;
            return true;
        }
        match self.as_slice().iter().rposition(|&(_, i)| i == id) {
            Some(pos) => {
                self.locks.copy_within(pos + 1..self.len, pos);
                self.len = top;
                true
            }
            None => false,
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    static HELD: RefCell<Held> = const { RefCell::new(Held::new()) };
}

#[cfg(loom)]
loom::thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Held::new());
}

static VIOLATIONS: AtomicU64 = AtomicU64::new(0);
static ACQUIRES: AtomicU64 = AtomicU64::new(0);
static ASSUMED: AtomicU64 = AtomicU64::new(0);

/// Lock-order violations seen by this process so far.
pub fn violations() -> u64 {
    VIOLATIONS.load(Ordering::Relaxed)
}

/// Checked acquisitions so far (proof that the checker ran).
pub fn acquisitions() -> u64 {
    ACQUIRES.load(Ordering::Relaxed)
}

/// Guards made over a lock the caller held, checked so far (proof that an
/// entry point ran the way the driver enters it).
pub fn assumed_held() -> u64 {
    ASSUMED.load(Ordering::Relaxed)
}

/// Locks the calling thread holds now.
pub fn held_by_this_thread() -> usize {
    HELD.with(|h| h.borrow().len)
}

fn violation(msg: core::fmt::Arguments<'_>) -> ! {
    VIOLATIONS.fetch_add(1, Ordering::Relaxed);
    panic!("lock-order violation: {msg}");
}

/// What a check found wrong. The checks run on every acquisition and
/// release, so they only compare class and lock ids and return this; the
/// message is formatted out of line ([`report`]), off the fast path, once
/// the thread-local is released.
#[derive(Clone, Copy)]
enum Fault {
    /// The lock is already held by this thread.
    Twice(&'static LockClass),
    /// A held lock's rank is not below the new one's.
    Rank(&'static LockClass),
    /// [`MAX_HELD`] locks are held already.
    Full,
    /// Released by a context that does not hold it.
    NotHeld,
    /// The token does not name the top of the stack (`None`: nothing held).
    Token(&'static LockClass, Option<&'static LockClass>),
    /// Assumed held, but a later lock is on top.
    NotOnTop,
    /// Assumed held by a context that does not hold it.
    NotAssumable,
    /// Assumed held with a token below it that does not match.
    AssumedToken(&'static LockClass),
}

/// Counts and panics for `fault` of lock class `class`.
#[cold]
#[inline(never)]
fn report(class: &'static LockClass, fault: Fault) -> ! {
    let name = class.name_str();
    match fault {
        Fault::Twice(c) => violation(format_args!("{} taken twice (self-deadlock)", c.name_str())),
        Fault::Rank(c) => violation(format_args!(
            "{name} (rank {}) taken while holding {} (rank {})",
            class.rank,
            c.name_str(),
            c.rank
        )),
        Fault::Full => violation(format_args!("{name} taken while holding {MAX_HELD} locks")),
        Fault::NotHeld => violation(format_args!(
            "{name} released by a context that does not hold it"
        )),
        Fault::Token(token, top) => violation(format_args!(
            "{name} taken with a {} token while the thread holds {} on top",
            token.name_str(),
            top.map_or("nothing", LockClass::name_str)
        )),
        Fault::NotOnTop => violation(format_args!(
            "{name} assumed held, but the thread took another lock after it"
        )),
        Fault::NotAssumable => violation(format_args!(
            "{name} assumed held by a context that does not hold it"
        )),
        Fault::AssumedToken(token) => violation(format_args!(
            "{name} assumed held with a {} token, but the thread holds more",
            token.name_str()
        )),
    }
}

/// True if `token` names what the thread holds on top of `below`: nothing
/// for the root, else a lock of that class.
fn token_matches(below: Option<&(&'static LockClass, usize)>, token: &'static LockClass) -> bool {
    match below {
        None => *token == UNLOCKED_CLASS,
        Some((c, _)) => *c == token,
    }
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
        let rank = self.class.rank;
        let checked = HELD.with(|h| {
            let mut h = h.borrow_mut();
            for &(c, held_id) in h.as_slice() {
                if held_id == id {
                    return Err(Fault::Twice(c));
                }
                if c.rank >= rank {
                    return Err(Fault::Rank(c));
                }
            }
            // Recorded before the lock is taken (one thread-local access,
            // not two): only this thread reads its stack, and it is
            // spinning until the lock is its own.
            h.push((self.class, id))
        });
        if let Err(fault) = checked {
            report(self.class, fault);
        }
        self.inner.lock_irqsave();
        ACQUIRES.fetch_add(1, Ordering::Relaxed);
    }

    unsafe fn unlock_irqrestore(&self, flags: ()) {
        let id = self.id();
        let found = HELD.with(|h| h.borrow_mut().release(id));
        if !found {
            report(self.class, Fault::NotHeld);
        }
        // SAFETY: forwarded contract: the caller holds the lock.
        unsafe { self.inner.unlock_irqrestore(flags) };
    }

    fn before_lock(&self, token: &'static LockClass) {
        let top = HELD.with(|h| h.borrow().as_slice().last().map(|&(c, _)| c));
        let matches = match top {
            None => *token == UNLOCKED_CLASS,
            Some(c) => c == token,
        };
        if !matches {
            report(self.class, Fault::Token(token, top));
        }
    }

    fn assert_held(&self, token: &'static LockClass) {
        let id = self.id();
        let checked = HELD.with(|h| {
            let h = h.borrow();
            let h = h.as_slice();
            let n = h.len();
            match h.last() {
                Some((_, top)) if *top == id => {}
                Some(_) if h.iter().any(|(_, i)| *i == id) => return Err(Fault::NotOnTop),
                _ => return Err(Fault::NotAssumable),
            }
            if !token_matches(n.checked_sub(2).and_then(|i| h.get(i)), token) {
                return Err(Fault::AssumedToken(token));
            }
            Ok(())
        });
        if let Err(fault) = checked {
            report(self.class, fault);
        }
        ASSUMED.fetch_add(1, Ordering::Relaxed);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lock_order::{
        ExpLock, Lock, LockLevel, LockToken, R_LOCK_CLASS, RLock, S_LOCK_CLASS, SLock,
    };

    #[test]
    fn in_order_is_quiet_and_out_of_order_panics() {
        let s = CheckedSpinLock::new_with_class(SLock::class());
        let s2 = CheckedSpinLock::new_with_class(SLock::class());
        let e = CheckedSpinLock::new_with_class(ExpLock::class());
        let r = CheckedSpinLock::new_with_class(RLock::class());
        r.lock_irqsave();
        s.lock_irqsave();
        e.lock_irqsave();
        assert_eq!(held_by_this_thread(), 3);
        // SAFETY: all three held by this thread.
        unsafe {
            e.unlock_irqrestore(());
            s.unlock_irqrestore(());
            r.unlock_irqrestore(());
        }
        assert_eq!(held_by_this_thread(), 0);

        // exp_lock, then an s_lock: must panic.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            e.lock_irqsave();
            s.lock_irqsave();
        }));
        assert!(res.is_err());
        // SAFETY: `e` is held by this thread (the panic came before `s`).
        unsafe { e.unlock_irqrestore(()) };
        // Two s_locks: must panic.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            s.lock_irqsave();
            s2.lock_irqsave();
        }));
        assert!(res.is_err());
        // An r_lock under the s_lock: must panic.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.lock_irqsave()));
        assert!(res.is_err());
        // SAFETY: `s` is held by this thread.
        unsafe { s.unlock_irqrestore(()) };
        assert_eq!(held_by_this_thread(), 0);
        assert!(violations() >= 3);
    }

    #[test]
    fn a_second_root_used_under_a_guard_is_reported() {
        let a: Lock<SLock, CheckedSpinLock, u32> = Lock::new(0);
        let b: Lock<SLock, CheckedSpinLock, u32> = Lock::new(0);
        let mut root = LockToken::root();
        let g = a.lock(&mut root);
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut second = LockToken::root();
            drop(b.lock(&mut second));
        }));
        assert!(res.is_err());
        drop(g);
        assert_eq!(held_by_this_thread(), 0);
    }

    #[test]
    fn assumed_held_needs_the_lock_on_top_and_nothing_more() {
        let s: Lock<SLock, CheckedSpinLock, u32> = Lock::new(0);
        let r: Lock<RLock, CheckedSpinLock, u32> = Lock::new(0);
        let before = assumed_held();
        // Not held at all.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut root = LockToken::root();
            // SAFETY: deliberately broken contract; the checker refuses it
            // before any data is touched.
            drop(unsafe { s.assume_held(&mut root) });
        }));
        assert!(res.is_err());
        // Held, as the driver's caller holds it: accepted and counted.
        s.raw().lock_irqsave();
        {
            let mut root = LockToken::root();
            // SAFETY: this thread holds `s` and nothing else of the order.
            let mut g = unsafe { s.assume_held(&mut root) };
            *g = 1;
        }
        assert_eq!(assumed_held(), before + 1);
        // Held under an r_lock the root token does not account for.
        // SAFETY: `s` is held by this thread.
        unsafe { s.raw().unlock_irqrestore(()) };
        r.raw().lock_irqsave();
        s.raw().lock_irqsave();
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut root = LockToken::root();
            // SAFETY: deliberately broken contract (the thread holds more
            // than the token says); refused before the data is touched.
            drop(unsafe { s.assume_held(&mut root) });
        }));
        assert!(res.is_err());
        // SAFETY: both held by this thread.
        unsafe {
            s.raw().unlock_irqrestore(());
            r.raw().unlock_irqrestore(());
        }
        // With the r_lock taken through its guard, the r_lock's token is
        // the right one (the receive path's READ_RESP handler: r_lock held,
        // then s_lock).
        {
            let mut root = LockToken::root();
            let mut rg = r.lock(&mut root);
            s.raw().lock_irqsave();
            // SAFETY: this thread holds `s`, taken while holding `r` only.
            let g = unsafe { s.assume_held(rg.token()) };
            assert_eq!(*g, 1);
            drop(g);
            // SAFETY: taken just above, in this context.
            unsafe { s.raw().unlock_irqrestore(()) };
        }
        assert_eq!(held_by_this_thread(), 0);
        assert_eq!(assumed_held(), before + 2);
        assert_eq!(R_LOCK_CLASS.name, c"hfi1_tid_qp_r_lock");
        assert_eq!(S_LOCK_CLASS.rank, 2);
    }

    /// The panic message of `f`, which must panic.
    fn splat(f: impl FnOnce()) -> std::string::String {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
        e.downcast_ref::<std::string::String>()
            .cloned()
            .unwrap_or_default()
    }

    /// A root token used for exp_lock while an s_lock guard lives is in
    /// rank order (exp_lock above s_lock), so only the token check can see
    /// it: it must, since the code that did it could take a second s_lock
    /// the same way.
    #[test]
    fn a_root_token_under_an_s_lock_is_caught_by_the_token_check() {
        let s: Lock<SLock, CheckedSpinLock, u32> = Lock::new(0);
        let e: Lock<ExpLock, CheckedSpinLock, u32> = Lock::new(0);
        let before = acquisitions();
        let mut root = LockToken::root();
        let g = s.lock(&mut root);
        let msg = splat(|| {
            let mut second = LockToken::root();
            drop(e.lock(&mut second));
        });
        assert!(
            msg.contains("taken with a hfi1_tid_unlocked token"),
            "{msg}"
        );
        drop(g);
        assert_eq!(held_by_this_thread(), 0);
        assert!(acquisitions() > before);
    }

    /// A held-lock guard over a lock the thread does not hold is refused
    /// even while it holds another; over one it holds under a later lock
    /// it is refused for that reason. Each report says which.
    #[test]
    fn assumed_held_reports_what_is_wrong() {
        let a: Lock<SLock, CheckedSpinLock, u32> = Lock::new(0);
        let b: Lock<SLock, CheckedSpinLock, u32> = Lock::new(0);
        let e: Lock<ExpLock, CheckedSpinLock, u32> = Lock::new(0);
        let before = acquisitions();
        a.raw().lock_irqsave();
        let msg = splat(|| {
            let mut root = LockToken::root();
            // SAFETY: deliberately broken contract (`b` is not held);
            // refused before the data is touched.
            drop(unsafe { b.assume_held(&mut root) });
        });
        assert!(msg.contains("by a context that does not hold it"), "{msg}");
        e.raw().lock_irqsave();
        let msg = splat(|| {
            let mut root = LockToken::root();
            // SAFETY: deliberately broken contract (`e` was taken after
            // `a`); refused before the data is touched.
            drop(unsafe { a.assume_held(&mut root) });
        });
        assert!(msg.contains("took another lock after it"), "{msg}");
        // SAFETY: both held by this thread.
        unsafe {
            e.raw().unlock_irqrestore(());
            a.raw().unlock_irqrestore(());
        }
        assert_eq!(held_by_this_thread(), 0);
        assert!(acquisitions() >= before + 2);
    }

    #[test]
    fn release_out_of_order_and_release_of_a_lock_not_held() {
        let s = CheckedSpinLock::new_with_class(SLock::class());
        let e = CheckedSpinLock::new_with_class(ExpLock::class());
        let r = CheckedSpinLock::new_with_class(RLock::class());
        r.lock_irqsave();
        s.lock_irqsave();
        e.lock_irqsave();
        // SAFETY: `s` is held by this thread; it is not on top.
        unsafe { s.unlock_irqrestore(()) };
        assert_eq!(held_by_this_thread(), 2);
        // r and exp_lock stay, in order: a new s_lock is now below
        // exp_lock's rank and must be refused; exp_lock again is a
        // self-deadlock.
        for again in [&s, &e] {
            let res =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| again.lock_irqsave()));
            assert!(res.is_err());
        }
        // SAFETY: both held by this thread.
        unsafe {
            r.unlock_irqrestore(());
            e.unlock_irqrestore(());
        }
        assert_eq!(held_by_this_thread(), 0);
        // Released again: this thread no longer holds it.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: deliberately wrong: the checker must refuse before
            // the inner lock is touched.
            unsafe { e.unlock_irqrestore(()) }
        }));
        let msg = res.err().and_then(|p| p.downcast_ref::<String>().cloned());
        assert!(
            msg.as_deref()
                .is_some_and(|m| m.contains("released by a context that does not hold it")),
            "{msg:?}"
        );
    }
}
