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

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};

use crate::flags::SFlags;
use crate::lock_order::RawSpinLock;
use crate::services::{
    AllocContext, DmaError, DmaMap, InitInPlace, Memory, MemoryWait, NoMemory, QpRef, RandomSource,
    Scheduler, TidScheduler,
};
use crate::sync::SpinLock;
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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

struct SchedState<R> {
    work: VecDeque<(u32, R)>,
    sends: VecDeque<R>,
    tid_sends: VecDeque<(u32, R)>,
    kmem: VecDeque<R>,
}

/// The sim scheduler: a FIFO of trigger work items (each holding its QP
/// reference), a FIFO of send-engine requests, a FIFO of second-leg work
/// items (each QP at most once) and the device's memory-wait list (each
/// waiter holding its QP reference).
pub struct SimScheduler<R> {
    state: Inner<SchedState<R>>,
    queued: AtomicU64,
    coalesced: AtomicU64,
    sends: AtomicU64,
    tid_queued: AtomicU64,
    tid_coalesced: AtomicU64,
}

impl<R> Default for SimScheduler<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> core::fmt::Debug for SimScheduler<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimScheduler")
            .field("queued", &self.triggers_queued())
            .field("coalesced", &self.triggers_coalesced())
            .field("sends", &self.sends_scheduled())
            .field("tid_sends", &self.tid_sends_queued())
            .finish()
    }
}

impl<R> SimScheduler<R> {
    /// No work, no counts.
    pub fn new() -> Self {
        Self {
            state: Inner::new(SchedState {
                work: VecDeque::new(),
                sends: VecDeque::new(),
                tid_sends: VecDeque::new(),
                kmem: VecDeque::new(),
            }),
            queued: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
            sends: AtomicU64::new(0),
            tid_queued: AtomicU64::new(0),
            tid_coalesced: AtomicU64::new(0),
        }
    }

    /// Takes the oldest pending second-leg work item (its CPU and a
    /// reference to the QP); it stops being pending, so the next
    /// `schedule_tid_send` queues it again. Kernel: the workqueue starting
    /// `_hfi1_do_tid_send()` (a work item is no longer pending once it
    /// runs).
    pub fn pop_tid_send(&self) -> Option<(u32, R)> {
        self.state.with(|s| s.tid_sends.pop_front())
    }

    /// Second-leg work items pending now.
    pub fn pending_tid_sends(&self) -> usize {
        self.state.with(|s| s.tid_sends.len())
    }

    /// Second-leg work items queued so far (calls that returned true).
    pub fn tid_sends_queued(&self) -> u64 {
        self.tid_queued.load(Ordering::Relaxed)
    }

    /// `schedule_tid_send` calls that found the work already pending.
    pub fn tid_sends_coalesced(&self) -> u64 {
        self.tid_coalesced.load(Ordering::Relaxed)
    }

    /// Takes the oldest pending trigger work item (its CPU and the QP
    /// reference it carries); it stops being pending.
    pub fn pop_work(&self) -> Option<(u32, R)> {
        self.state.with(|s| s.work.pop_front())
    }

    /// Takes the oldest send-engine request (a reference to the QP).
    pub fn pop_send(&self) -> Option<R> {
        self.state.with(|s| s.sends.pop_front())
    }

    /// One tick of the memory-wait timer: takes the oldest QP off the
    /// memory-wait list, with the reference the list held. The caller
    /// wakes it (clears `RVT_S_WAIT_KMEM` under its `s_lock` and schedules
    /// its send engine). Kernel: `mem_timer()` (one QP per tick, the timer
    /// re-armed while the list is not empty).
    pub fn kmem_tick(&self) -> Option<R> {
        self.state.with(|s| s.kmem.pop_front())
    }

    /// QPs on the memory-wait list now.
    pub fn kmem_waiters(&self) -> usize {
        self.state.with(|s| s.kmem.len())
    }

    /// Trigger work items pending now.
    pub fn pending_work(&self) -> usize {
        self.state.with(|s| s.work.len())
    }

    /// Send-engine requests not yet taken.
    pub fn pending_sends(&self) -> usize {
        self.state.with(|s| s.sends.len())
    }

    /// Trigger work items queued so far.
    pub fn triggers_queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// `queue_trigger` calls that found the work already pending.
    pub fn triggers_coalesced(&self) -> u64 {
        self.coalesced.load(Ordering::Relaxed)
    }

    /// `schedule_send` calls so far.
    pub fn sends_scheduled(&self) -> u64 {
        self.sends.load(Ordering::Relaxed)
    }
}

impl<R: QpRef + Send> Scheduler<R> for SimScheduler<R> {
    fn schedule_send(&self, qp: &R) {
        self.sends.fetch_add(1, Ordering::Relaxed);
        let r = QpRef::get(qp);
        self.state.with(|s| s.sends.push_back(r));
    }

    fn queue_trigger(&self, cpu: u32, qp: R) -> Result<(), R> {
        let r = self.state.with(|s| {
            if s.work.iter().any(|(_, w)| QpRef::same(w, &qp)) {
                Err(qp)
            } else {
                s.work.push_back((cpu, qp));
                Ok(())
            }
        });
        match &r {
            Ok(()) => self.queued.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.coalesced.fetch_add(1, Ordering::Relaxed),
        };
        r
    }
}

impl<R: QpRef + Send> TidScheduler<R> for SimScheduler<R> {
    fn schedule_tid_send(&self, cpu: u32, qp: &R) -> bool {
        let queued = self.state.with(|s| {
            if s.tid_sends.iter().any(|(_, w)| QpRef::same(w, qp)) {
                false
            } else {
                s.tid_sends.push_back((cpu, QpRef::get(qp)));
                true
            }
        });
        if queued {
            self.tid_queued.fetch_add(1, Ordering::Relaxed);
        } else {
            self.tid_coalesced.fetch_add(1, Ordering::Relaxed);
        }
        queued
    }
}

impl<R: QpRef + Send> SimScheduler<R> {
    /// Takes `qp`'s pending second-leg work item off the FIFO (QP reset or
    /// destroy), giving back the reference it held. Kernel:
    /// `iowait_cancel_work()` in `flush_qp_waiters()`'s caller
    /// (`cancel_work_sync()` of the TID work).
    pub fn cancel_tid_send(&self, qp: &R) -> Option<R> {
        self.state.with(|s| {
            let at = s.tid_sends.iter().position(|(_, w)| QpRef::same(w, qp))?;
            s.tid_sends.remove(at).map(|(_, r)| r)
        })
    }

    /// Takes `qp` off the memory-wait list if it is there (QP reset or
    /// destroy), giving back the list's reference; true if it was there.
    /// Kernel: the `list_del_init(&priv->s_iowait.list)` of
    /// `flush_qp_waiters()`, with its `rvt_put_qp()`.
    pub fn cancel_kmem(&self, qp: &R) -> Option<R> {
        self.state.with(|s| {
            let at = s.kmem.iter().position(|w| QpRef::same(w, qp))?;
            s.kmem.remove(at)
        })
    }
}

impl<R: QpRef + Send> MemoryWait<R> for SimScheduler<R> {
    fn wait_kmem(&self, qp: &R, s_flags: &mut SFlags) {
        let joined = self.state.with(|s| {
            if s.kmem.iter().any(|w| QpRef::same(w, qp)) {
                false
            } else {
                s.kmem.push_back(QpRef::get(qp));
                true
            }
        });
        if joined {
            s_flags.insert(SFlags::WAIT_KMEM);
        }
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

struct DmaState {
    live: BTreeMap<u64, u32>,
    plan: FailPlan,
    bad_unmaps: u64,
    maps: u64,
}

/// Identity DMA mapping with live-mapping tracking and failure injection.
pub struct SimDma {
    state: Inner<DmaState>,
}

impl Default for SimDma {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for SimDma {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimDma")
            .field("live", &self.live_mappings())
            .finish()
    }
}

impl SimDma {
    /// No mappings, no failures planned.
    pub fn new() -> Self {
        Self {
            state: Inner::new(DmaState {
                live: BTreeMap::new(),
                plan: FailPlan::default(),
                bad_unmaps: 0,
                maps: 0,
            }),
        }
    }

    /// Makes the map call `n` calls from now fail (0 = the next), once.
    pub fn fail_in(&self, n: u64) {
        self.state.with(|s| s.plan.at = Some(n));
    }

    /// Makes every map call fail while `on`.
    pub fn fail_always(&self, on: bool) {
        self.state.with(|s| s.plan.always = on);
    }

    /// Mappings alive now.
    pub fn live_mappings(&self) -> usize {
        self.state.with(|s| s.live.len())
    }

    /// Successful map calls so far.
    pub fn maps(&self) -> u64 {
        self.state.with(|s| s.maps)
    }

    /// Unmaps of an address not mapped (or with another length): should
    /// stay 0.
    pub fn bad_unmaps(&self) -> u64 {
        self.state.with(|s| s.bad_unmaps)
    }
}

impl DmaMap for SimDma {
    fn map(&self, page: u64, len: u32) -> Result<u64, DmaError> {
        self.state.with(|s| {
            if s.plan.should_fail() || s.live.contains_key(&page) {
                return Err(DmaError);
            }
            s.live.insert(page, len);
            s.maps += 1;
            Ok(page)
        })
    }

    fn unmap(&self, bus: u64, len: u32) {
        self.state.with(|s| match s.live.remove(&bus) {
            Some(l) if l == len => {}
            _ => s.bad_unmaps += 1,
        });
    }
}

/// An allocation made by [`SimAllocator`]; counted while alive.
pub struct SimBox<T> {
    value: Box<[T; 1]>,
    live: Arc<AtomicUsize>,
}

impl<T> Deref for SimBox<T> {
    type Target = T;

    fn deref(&self) -> &T {
        let [v] = &*self.value;
        v
    }
}

impl<T> DerefMut for SimBox<T> {
    fn deref_mut(&mut self) -> &mut T {
        let [v] = &mut *self.value;
        v
    }
}

impl<T> Drop for SimBox<T> {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for SimBox<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

/// Host memory with a live-allocation count and failure injection.
pub struct SimAllocator {
    plan: Inner<FailPlan>,
    live: Arc<AtomicUsize>,
    atomic_allocs: AtomicU64,
}

impl Default for SimAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for SimAllocator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimAllocator")
            .field("live", &self.live_allocations())
            .finish()
    }
}

impl SimAllocator {
    /// No allocations, no failures planned.
    pub fn new() -> Self {
        Self {
            plan: Inner::new(FailPlan::default()),
            live: Arc::new(AtomicUsize::new(0)),
            atomic_allocs: AtomicU64::new(0),
        }
    }

    /// Makes the allocation `n` calls from now fail (0 = the next), once.
    pub fn fail_in(&self, n: u64) {
        self.plan.with(|p| p.at = Some(n));
    }

    /// Makes every allocation fail while `on`.
    pub fn fail_always(&self, on: bool) {
        self.plan.with(|p| p.always = on);
    }

    /// Allocations alive now.
    pub fn live_allocations(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Allocations made in [`AllocContext::Atomic`] so far.
    pub fn atomic_allocations(&self) -> u64 {
        self.atomic_allocs.load(Ordering::Relaxed)
    }
}

impl SimAllocator {
    /// Room for one `T` (or the injected failure), counted once filled.
    fn room<T>(&self) -> Result<Vec<T>, NoMemory> {
        if self.plan.with(FailPlan::should_fail) {
            return Err(NoMemory);
        }
        let mut v: Vec<T> = Vec::new();
        v.try_reserve_exact(1).map_err(|_| NoMemory)?;
        Ok(v)
    }

    fn finish<T>(&self, ctx: AllocContext, v: Vec<T>) -> Result<SimBox<T>, NoMemory> {
        let value: Box<[T; 1]> = v.into_boxed_slice().try_into().map_err(|_| NoMemory)?;
        if ctx == AllocContext::Atomic {
            self.atomic_allocs.fetch_add(1, Ordering::Relaxed);
        }
        self.live.fetch_add(1, Ordering::AcqRel);
        Ok(SimBox {
            value,
            live: Arc::clone(&self.live),
        })
    }
}

impl Memory for SimAllocator {
    type Boxed<T> = SimBox<T>;

    fn try_box<T>(&self, ctx: AllocContext, value: T) -> Result<SimBox<T>, NoMemory> {
        let mut v = self.room()?;
        v.push(value);
        self.finish(ctx, v)
    }

    fn try_box_in_place<T: InitInPlace>(&self, ctx: AllocContext) -> Result<SimBox<T>, NoMemory> {
        let mut v: Vec<T> = self.room()?;
        // SAFETY: `try_reserve_exact(1)` made room for one `T` at
        // `as_mut_ptr()`, aligned and valid for writes; `init_in_place`
        // initialises it fully (trait contract), so length 1 is then valid.
        unsafe {
            T::init_in_place(v.as_mut_ptr());
            v.set_len(1);
        }
        self.finish(ctx, v)
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

    /// Every scheduler counter and list length follows what was queued and
    /// taken, one by one; the memory-wait list takes a QP once, hands it
    /// out in order and gives it back on cancel; Debug shows the counts.
    #[test]
    fn scheduler_counts_follow_each_call() {
        let a = SimRef::new(1u32);
        let b = SimRef::new(2u32);
        let s = SimScheduler::new();
        assert_eq!(
            (s.pending_work(), s.pending_sends(), s.kmem_waiters()),
            (0, 0, 0)
        );
        for q in [&a, &b] {
            assert!(s.queue_trigger(0, QpRef::get(q)).is_ok());
        }
        drop(s.queue_trigger(0, QpRef::get(&a)));
        drop(s.queue_trigger(0, QpRef::get(&b)));
        s.schedule_send(&a);
        s.schedule_send(&b);
        assert_eq!(
            (
                s.triggers_queued(),
                s.triggers_coalesced(),
                s.sends_scheduled()
            ),
            (2, 2, 2)
        );
        assert_eq!((s.pending_work(), s.pending_sends()), (2, 2));
        assert!(s.schedule_tid_send(1, &a) && s.schedule_tid_send(1, &b));
        assert!(!s.schedule_tid_send(1, &a) && !s.schedule_tid_send(1, &b));
        assert_eq!(s.tid_sends_coalesced(), 2);
        assert_eq!(
            alloc::format!("{s:?}"),
            "SimScheduler { queued: 2, coalesced: 2, sends: 2, tid_sends: 2 }"
        );
        assert!(s.pop_send().is_some_and(|r| QpRef::same(&r, &a)));
        assert_eq!(s.pending_sends(), 1);
        let (mut fa, mut fb) = (SFlags::empty(), SFlags::empty());
        s.wait_kmem(&a, &mut fa);
        s.wait_kmem(&a, &mut fa);
        s.wait_kmem(&b, &mut fb);
        assert!(fa.waiting_kmem() && fb.waiting_kmem());
        assert_eq!(s.kmem_waiters(), 2);
        assert!(s.cancel_kmem(&b).is_some_and(|r| QpRef::same(&r, &b)));
        assert!(s.cancel_kmem(&b).is_none());
        assert!(s.kmem_tick().is_some_and(|r| QpRef::same(&r, &a)));
        assert!(s.kmem_tick().is_none());
        drop(s);
        assert_eq!((a.live_refs(), b.live_refs()), (1, 1));
    }

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
    fn refs_count_and_scheduler_coalesces() {
        let a = SimRef::new(1u32);
        let b = SimRef::new(2u32);
        let sched = SimScheduler::new();
        assert!(sched.queue_trigger(0, QpRef::get(&a)).is_ok());
        let back = sched.queue_trigger(0, QpRef::get(&a));
        assert!(back.is_err());
        drop(back);
        assert!(sched.queue_trigger(1, QpRef::get(&b)).is_ok());
        assert_eq!(a.live_refs(), 2);
        sched.schedule_send(&b);
        assert_eq!(b.live_refs(), 3);
        let (cpu, w) = sched.pop_work().unwrap();
        assert!(QpRef::same(&w, &a) && cpu == 0);
        drop(w);
        drop(sched);
        assert_eq!((a.live_refs(), b.live_refs()), (1, 1));
    }

    /// `queue_work_on()` semantics for the second leg: pending at most
    /// once per QP, independent of the first leg's requests, runnable again
    /// once popped; cancel gives the reference back.
    #[test]
    fn tid_send_is_pending_at_most_once() {
        let a = SimRef::new(1u32);
        let b = SimRef::new(2u32);
        let sched = SimScheduler::new();
        assert!(sched.schedule_tid_send(3, &a));
        assert!(!sched.schedule_tid_send(3, &a), "already pending");
        sched.schedule_send(&a);
        assert!(sched.schedule_tid_send(0, &b));
        assert_eq!((sched.pending_tid_sends(), sched.pending_sends()), (2, 1));
        assert_eq!(
            (sched.tid_sends_queued(), sched.tid_sends_coalesced()),
            (2, 1)
        );
        assert_eq!(a.live_refs(), 3, "one for the TID work, one for the send");
        let (cpu, w) = sched.pop_tid_send().unwrap();
        assert!(QpRef::same(&w, &a) && cpu == 3);
        assert!(
            sched.schedule_tid_send(3, &a),
            "popped: it may be queued again"
        );
        drop(w);
        let c = sched.cancel_tid_send(&b).unwrap();
        assert!(QpRef::same(&c, &b));
        drop(c);
        assert!(sched.cancel_tid_send(&b).is_none());
        assert_eq!(b.live_refs(), 1);
        drop(sched);
        assert_eq!(a.live_refs(), 1);
    }

    #[test]
    fn dma_is_identity_and_fails_on_request() {
        let d = SimDma::new();
        assert_eq!(d.map(0x5000, 4096), Ok(0x5000));
        d.fail_in(1);
        assert_eq!(d.map(0x6000, 4096), Ok(0x6000));
        assert_eq!(d.map(0x7000, 4096), Err(DmaError));
        assert_eq!(d.map(0x7000, 4096), Ok(0x7000));
        assert_eq!(d.live_mappings(), 3);
        d.unmap(0x5000, 4096);
        d.unmap(0x5000, 4096);
        assert_eq!((d.live_mappings(), d.bad_unmaps()), (2, 1));
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
