// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Host memory for the engines ([`SimAllocator`], [`SimBox`]) with a
//! live-allocation count and failure injection.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ops::{Deref, DerefMut};

use super::{FailPlan, Inner};
use crate::services::{AllocContext, InitInPlace, Memory, NoMemory};
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
