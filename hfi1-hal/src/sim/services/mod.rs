// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Software versions of the kernel services ([`crate::services`]): QP
//! references that count, a scheduler whose work runs when the test says
//! so, an identity DMA map, memory and random numbers, each with counters
//! and, where the kernel can fail, failure injection.
//!
//! # Model assumptions
//!
//! - DMA mapping is the identity: the bus address is the page address
//!   given. The expected-receive model places payloads at that address in
//!   its simulated memory. Mapping a page address that is already mapped
//!   fails (identity bus addresses would collide, and no test maps one
//!   buffer twice on purpose), as does an injected failure.
//! - Scheduled work never runs by itself: the test (or simulator) pops work
//!   items and send-engine requests and runs them, in FIFO order, on the
//!   thread it chooses. A trigger work item is "pending" from
//!   `queue_trigger` until it is popped; so is a second-leg work item from
//!   `schedule_tid_send` (a QP is at most once on that FIFO, as a
//!   `work_struct` is queued at most once).
//! - Pending send-engine and second-leg requests hold a reference to their
//!   QP, so a QP destroyed with work still queued shows up as a live
//!   reference; the kernel cancels the work items at QP reset instead
//!   (`iowait_cancel_work()`), which [`SimScheduler::cancel_tid_send`]
//!   models.
//! - The memory-wait list (`hfi1_wait_kmem()`) is a FIFO of QP
//!   references; its timer ticks only when the test calls
//!   [`SimScheduler::kmem_tick`], which hands out one waiter per tick as
//!   the kernel's `mem_timer` does.
//! - Memory is the host allocator; an injected failure is reported before
//!   anything is allocated.

use alloc::sync::Arc;
use core::cell::UnsafeCell;
use core::ops::Deref;

use crate::lock_order::RawSpinLock;
use crate::services::{QpRef, RandomSource};
use crate::sync::SpinLock;
use crate::sync::atomic::{AtomicUsize, Ordering};

mod allocator;
mod dma;
mod sched;

pub use allocator::{SimAllocator, SimBox};
pub use dma::SimDma;
pub use sched::SimScheduler;

/// Interior state behind the sim's own (unordered, leaf) spin lock. Never
/// held across a call out of the sim.
pub(crate) struct Inner<T> {
    lock: SpinLock,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is reached only inside `with`, under `lock`.
unsafe impl<T: Send> Sync for Inner<T> {}

impl<T> Inner<T> {
    pub(crate) fn new(data: T) -> Self {
        Self {
            lock: SpinLock::new(),
            data: UnsafeCell::new(data),
        }
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.lock.lock_irqsave();
        // SAFETY: the lock is held for the closure's whole run and the
        // borrow cannot escape it.
        let r = f(unsafe { &mut *self.data.get() });
        // SAFETY: taken above, in this context.
        unsafe { self.lock.unlock_irqrestore(()) };
        r
    }
}

/// A shared sim object and its count of live references.
#[derive(Debug)]
struct RefInner<T> {
    live: AtomicUsize,
    value: T,
}

/// A counted reference to a sim object (a QP): [`QpRef::get`] counts up,
/// drop counts down; [`SimRef::live_refs`] reads the count.
#[derive(Debug)]
pub struct SimRef<T> {
    inner: Arc<RefInner<T>>,
}

impl<T> SimRef<T> {
    /// Makes the object; the returned reference is its first (the
    /// creator's, like the reference `rvt_create_qp` leaves).
    pub fn new(value: T) -> Self {
        Self {
            inner: Arc::new(RefInner {
                live: AtomicUsize::new(1),
                value,
            }),
        }
    }

    /// [`SimRef::new`] in place, for an object too large for a kernel
    /// stack (a QP with its protocol state): `init` writes it at the
    /// pointer it is given.
    ///
    /// # Safety
    ///
    /// `init` writes a valid `T` at the pointer before it returns.
    pub unsafe fn new_in_place(init: impl FnOnce(*mut T)) -> Self {
        let mut a = Arc::<RefInner<T>>::new_uninit();
        if let Some(slot) = Arc::get_mut(&mut a) {
            let p = slot.as_mut_ptr();
            // SAFETY: `p` is the fresh, unshared allocation; each field is
            // written once, `value` by `init` (the caller's promise).
            unsafe {
                (&raw mut (*p).live).write(AtomicUsize::new(1));
                init(&raw mut (*p).value);
            }
        }
        // SAFETY: a fresh `Arc` is unique, so `get_mut` gave the slot and
        // both fields were written above.
        let inner = unsafe { a.assume_init() };
        Self { inner }
    }

    /// References alive now, this one included.
    pub fn live_refs(&self) -> usize {
        self.inner.live.load(Ordering::Acquire)
    }
}

impl<T> Deref for SimRef<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner.value
    }
}

impl<T> QpRef for SimRef<T> {
    fn get(this: &Self) -> Self {
        this.inner.live.fetch_add(1, Ordering::AcqRel);
        Self {
            inner: Arc::clone(&this.inner),
        }
    }

    fn same(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.inner, &b.inner)
    }
}

impl<T> Drop for SimRef<T> {
    fn drop(&mut self) {
        self.inner.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A one-shot or persistent failure plan for a fallible sim service.
#[derive(Debug, Default)]
struct FailPlan {
    /// Fail the call this many calls from now (0 = the next one), once.
    at: Option<u64>,
    /// Fail every call while set.
    always: bool,
}

impl FailPlan {
    fn should_fail(&mut self) -> bool {
        if self.always {
            return true;
        }
        match self.at {
            Some(0) => {
                self.at = None;
                true
            }
            Some(n) => {
                self.at = Some(n - 1);
                false
            }
            None => false,
        }
    }
}

/// A seeded xorshift64* generator: deterministic random generations.
#[derive(Debug, Clone)]
pub struct SimRandom {
    state: u64,
}

impl SimRandom {
    /// A generator from `seed` (0 is replaced by a fixed odd constant).
    pub fn new(seed: u64) -> Self {
        Self {
            state: if seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                seed
            },
        }
    }
}

impl RandomSource for SimRandom {
    fn next_u32(&mut self) -> u32 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::services::{AllocContext, DmaMap, Memory};

    /// Failure plans fail every call while on and none once off; the
    /// counters and Debug follow; an unmap must name the mapped length.
    #[test]
    fn failure_plans_and_counters() {
        let d = SimDma::new();
        d.fail_always(true);
        assert!(d.map(0x1000, 4096).is_err() && d.map(0x2000, 4096).is_err());
        d.fail_always(false);
        assert_eq!(d.map(0x1000, 4096), Ok(0x1000));
        d.unmap(0x1000, 8192);
        assert_eq!(
            (d.bad_unmaps(), d.live_mappings()),
            (1, 0),
            "counted, and gone"
        );
        assert_eq!(d.map(0x1000, 4096), Ok(0x1000));
        d.unmap(0x1000, 4096);
        assert_eq!((d.bad_unmaps(), d.live_mappings(), d.maps()), (1, 0, 2));
        assert!(alloc::format!("{d:?}").starts_with("SimDma"));
        let m = SimAllocator::new();
        m.fail_always(true);
        assert!(m.try_box(AllocContext::Atomic, 1u8).is_err());
        assert!(m.try_box(AllocContext::Atomic, 1u8).is_err());
        m.fail_always(false);
        let a = m.try_box(AllocContext::Atomic, 1u8).unwrap();
        let b = m.try_box(AllocContext::MaySleep, 2u8).unwrap();
        let c = m.try_box(AllocContext::Atomic, 3u8).unwrap();
        assert_eq!((m.atomic_allocations(), m.live_allocations()), (2, 3));
        assert!(alloc::format!("{m:?}").starts_with("SimAllocator"));
        assert!(alloc::format!("{a:?}").contains('1'));
        drop((a, b, c));
        assert_eq!(m.live_allocations(), 0);
    }

    /// The generator is xorshift64*: a run is a function of its seed, so
    /// the sequence is pinned (the recorded figures depend on it).
    #[test]
    fn random_numbers_are_xorshift64_star() {
        let mut r = SimRandom::new(1);
        let mut x: u64 = 1;
        for _ in 0..8 {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            assert_eq!(
                r.next_u32(),
                (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
            );
        }
    }

    /// The engine's generic code takes its services by borrow: a borrowed
    /// random source gives the owner's sequence and advances it, a
    /// borrowed DMA map maps and unmaps the owner's mappings.
    #[test]
    fn services_work_through_a_borrow() {
        fn draw(mut r: impl RandomSource) -> [u32; 3] {
            [r.next_u32(), r.next_u32(), r.next_u32()]
        }
        let mut a = SimRandom::new(11);
        let mut b = SimRandom::new(11);
        let direct = [a.next_u32(), a.next_u32(), a.next_u32()];
        assert_eq!(draw(&mut b), direct);
        assert_eq!(b.next_u32(), a.next_u32(), "the borrow advanced the owner");
        fn map_unmap(d: impl DmaMap, page: u64) -> u64 {
            let bus = d.map(page, 4096).unwrap();
            d.unmap(bus, 4096);
            d.map(page, 4096).unwrap()
        }
        let dma = SimDma::new();
        assert_eq!(map_unmap(&dma, 0x7000), 0x7000);
        assert_eq!(
            (dma.live_mappings(), dma.maps(), dma.bad_unmaps()),
            (1, 2, 0)
        );
    }

    #[test]
    fn memory_counts_and_fails() {
        let m = SimAllocator::new();
        let b = m.try_box(AllocContext::Atomic, [7u8; 3]).unwrap();
        assert_eq!(*b, [7; 3]);
        m.fail_in(0);
        assert!(m.try_box(AllocContext::MaySleep, 1).is_err());
        assert_eq!(m.live_allocations(), 1);
        drop(b);
        assert_eq!(m.live_allocations(), 0);
        let mut r = SimRandom::new(1);
        let x = r.next_u32();
        assert_ne!(x, r.next_u32());
    }
}
