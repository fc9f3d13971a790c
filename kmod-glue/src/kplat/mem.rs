// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Memory: `kmalloc` through the global allocator, failures reported,
//! values too large for the kernel stack built in place.

use core::mem::MaybeUninit;
use core::ptr::NonNull;

use alloc::boxed::Box;

use hfi1_hal::services::{AllocContext, InitInPlace, Memory, NoMemory};

/// An uninitialised `Box<T>`, or `None` when the allocator fails.
pub fn try_box_uninit<T>() -> Option<Box<MaybeUninit<T>>> {
    let layout = core::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(MaybeUninit::uninit()));
    }
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc::alloc::alloc(layout) }.cast::<MaybeUninit<T>>();
    // SAFETY: a fresh allocation with `T`'s layout, which
    // `MaybeUninit<T>` shares; uninitialised contents are valid for it.
    NonNull::new(p).map(|p| unsafe { Box::from_raw(p.as_ptr()) })
}

/// `Box::new` that reports allocation failure instead of aborting.
pub fn try_box<T>(value: T) -> Option<Box<T>> {
    let layout = core::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(value));
    }
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc::alloc::alloc(layout) }.cast::<T>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation for one `T`, properly aligned.
    unsafe { p.write(value) };
    // SAFETY: `p` owns an initialised `T` allocated with the global
    // allocator and `Layout::new::<T>()`, as `Box` requires.
    Some(unsafe { Box::from_raw(p) })
}

/// Memory for flow records: the global allocator (kmalloc), failures
/// reported.
#[derive(Debug, Default)]
pub struct KMem;

impl Memory for KMem {
    type Boxed<T> = Box<T>;

    fn try_box<T>(&self, _ctx: AllocContext, value: T) -> Result<Box<T>, NoMemory> {
        // The allocator picks GFP_ATOMIC whenever the caller cannot sleep,
        // which covers every `Atomic` caller (they hold a spinlock).
        try_box(value).ok_or(NoMemory)
    }

    /// Allocates first and initialises the allocation in place: the value
    /// (a request's ~15 KiB flow ring) never exists on the 16 KiB kernel
    /// stack.
    fn try_box_in_place<T: InitInPlace>(&self, _ctx: AllocContext) -> Result<Box<T>, NoMemory> {
        try_box_in_place::<T>().ok_or(NoMemory)
    }
}

/// `Box<T>` for a `T` written in place by [`InitInPlace`], or `None` when
/// the allocator fails: the value is never built on the stack.
fn try_box_in_place<T: InitInPlace>() -> Option<Box<T>> {
    let layout = core::alloc::Layout::new::<T>();
    let p = if layout.size() == 0 {
        NonNull::<T>::dangling()
    } else {
        // SAFETY: the layout has a non-zero size.
        NonNull::new(unsafe { alloc::alloc::alloc(layout) }.cast::<T>())?
    };
    // SAFETY: `p` is valid for writes of one `T` and aligned (a fresh
    // allocation with `T`'s layout, or dangling for a zero-sized `T`); its
    // uninitialised contents need no drop.
    unsafe { T::init_in_place(p.as_ptr()) };
    // SAFETY: `init_in_place` left a valid `T` at `p` (the trait's
    // contract), allocated by the global allocator with
    // `Layout::new::<T>()` (or dangling and zero-sized), as `Box` requires.
    Some(unsafe { Box::from_raw(p.as_ptr()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Big enough that building it on a kernel stack would be refused.
    struct Big([u32; 4096]);

    // SAFETY: writes every element, leaving a valid `Big`.
    unsafe impl InitInPlace for Big {
        unsafe fn init_in_place(ptr: *mut Self) {
            let first = ptr.cast::<u32>();
            for i in 0..4096 {
                // SAFETY: `ptr` is valid for one `Big`, i.e. 4096 `u32`s.
                unsafe { first.add(i).write(i as u32 * 3) };
            }
        }
    }

    #[test]
    fn in_place_box_is_initialised_by_the_type() {
        let b = KMem
            .try_box_in_place::<Big>(AllocContext::MaySleep)
            .unwrap();
        assert!(b.0.iter().enumerate().all(|(i, &v)| v == i as u32 * 3));
        let ring = KMem
            .try_box_in_place::<tid_flow::segment::FlowRing>(AllocContext::Atomic)
            .unwrap();
        assert_eq!(ring.len(), 8);
    }
}
