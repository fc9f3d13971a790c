// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The kernel services the engine uses besides the chip: QP references,
//! scheduling, DMA mapping, memory for flow records and random numbers.
//!
//! Each is a small trait with `&self` methods (the services are shared by
//! every QP of a device and called from several CPUs). The kernel
//! implementations live in `kmod-glue`; the software ones in `sim`
//! (feature `sim`), with counters and failure injection for tests.

use core::mem::MaybeUninit;
use core::ops::{Deref, DerefMut};

use alloc::vec::Vec;

use crate::flags::SFlags;

/// A counted reference to a QP that keeps it alive.
///
/// Taking another reference is [`QpRef::get`]; dropping one is the put.
/// Kernel: `rvt_get_qp()` / `rvt_put_qp()` (the kernel implementation
/// holds a pointer to the `rvt_qp` and calls `rvt_put_qp` in `Drop`).
pub trait QpRef: Deref + Sized {
    /// Takes another reference to the same QP. Kernel: `rvt_get_qp()`.
    fn get(this: &Self) -> Self;

    /// True if both references name the same QP (pointer identity).
    fn same(a: &Self, b: &Self) -> bool;
}

/// Scheduling of a QP's send engine and of its deferred trigger work.
pub trait Scheduler<R> {
    /// Schedules the QP's send engine to run soon (the caller holds the
    /// QP's s_lock). Kernel: `hfi1_schedule_send()`.
    fn schedule_send(&self, qp: &R);

    /// Queues the QP's trigger work on `cpu`. The reference goes with the
    /// work item when it is queued (`Ok`); if that work item was already
    /// pending, nothing is queued and the reference comes back (`Err`) for
    /// the caller to drop. Kernel: `queue_work_on(cpu, ppd->hfi1_wq,
    /// &priv->tid_rdma.trigger_work)`.
    fn queue_trigger(&self, cpu: u32, qp: R) -> Result<(), R>;
}

/// The QP's second work item: the TID RDMA send engine ("second leg"),
/// which sends WRITE_DATA, RESYNC and TID ACKs beside the first leg
/// ([`Scheduler::schedule_send`]). The two are separate work items of one
/// `iowait`, so each is pending at most once and either may run while the
/// other is queued.
///
/// A trait of its own so platforms that run no TID RDMA WRITE (the READ
/// self-test module) need not provide it.
pub trait TidScheduler<R> {
    /// Queues the QP's second-leg work item on `cpu` unless it is already
    /// pending; true if this call queued it, false if it was pending (it
    /// runs once either way). The caller holds the QP's `s_lock` and has
    /// checked that the second leg may run (`hfi1_send_tid_ok()`).
    /// Kernel: `_hfi1_schedule_tid_send()` → `iowait_tid_schedule()` →
    /// `queue_work_on(cpu, ppd->hfi1_wq, &wait[IOWAIT_TID_SE].iowork)`.
    fn schedule_tid_send(&self, cpu: u32, qp: &R) -> bool;
}

/// The device's memory-wait list: a QP whose DMA mapping failed waits
/// there and is woken by a timer tick.
pub trait MemoryWait<R> {
    /// Puts `qp` on the memory-wait list unless it already waits for
    /// something there: sets `RVT_S_WAIT_KMEM` in its flags word
    /// (`s_flags`, which the caller holds under the QP's `s_lock`; on the
    /// kernel platform it is the driver's own `qp->s_flags`), takes a
    /// reference for the list and starts the tick if the list was empty.
    /// Kernel: `hfi1_wait_kmem()`.
    fn wait_kmem(&self, qp: &R, s_flags: &mut SFlags);
}

/// A DMA mapping failed. Kernel: `dma_mapping_error()` was true.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("DMA mapping failed")]
pub struct DmaError;

/// Streaming DMA mapping of receive buffers (device-to-memory).
pub trait DmaMap {
    /// Maps `len` bytes starting at the page address `page`; returns the
    /// bus address. Kernel: `dma_map_page(.., DMA_FROM_DEVICE)` +
    /// `dma_mapping_error()`.
    fn map(&self, page: u64, len: u32) -> Result<u64, DmaError>;

    /// Unmaps what [`DmaMap::map`] returned. Kernel: `dma_unmap_page()`.
    fn unmap(&self, bus: u64, len: u32);
}

/// The context an allocation is made from. Kernel: the GFP flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocContext {
    /// Must not sleep (the send engine, under a spin lock). Kernel:
    /// `GFP_ATOMIC`.
    Atomic,
    /// May sleep (QP creation). Kernel: `GFP_KERNEL`.
    MaySleep,
}

/// An allocation failed. Kernel: `kmalloc` returned NULL (ENOMEM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("out of memory")]
pub struct NoMemory;

/// A type that can initialise itself in uninitialised memory, piece by
/// piece, so a large value (a request's 18 KiB flow ring) never has to be
/// built on the stack first: the kernel's stack is 16 KiB.
///
/// # Safety
///
/// [`InitInPlace::init_in_place`] must leave `*ptr` a fully initialised,
/// valid `Self`.
pub unsafe trait InitInPlace: Sized {
    /// Writes a fresh value into `*ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is valid for writes of one `Self` and properly aligned; its old
    /// contents are not dropped.
    unsafe fn init_in_place(ptr: *mut Self);
}

/// Fallible memory for the lazily allocated flow records.
/// Kernel: `kmalloc_node()` / `kfree()`.
pub trait Memory {
    /// An owning pointer to one allocated value; dropping it frees it.
    type Boxed<T>: DerefMut<Target = T>;

    /// Allocates room for `value` and moves it there, or gives
    /// [`NoMemory`] (the value is dropped).
    fn try_box<T>(&self, ctx: AllocContext, value: T) -> Result<Self::Boxed<T>, NoMemory>;

    /// Allocates a `T` initialised by [`InitInPlace`]. The provided version
    /// initialises it on the stack and moves it with
    /// [`Memory::try_box`]; an implementation with a small stack (the
    /// kernel's) should override it to allocate first and initialise the
    /// allocation in place.
    fn try_box_in_place<T: InitInPlace>(
        &self,
        ctx: AllocContext,
    ) -> Result<Self::Boxed<T>, NoMemory> {
        let mut v = MaybeUninit::<T>::uninit();
        // SAFETY: `v` is valid for writes of one `T` and aligned.
        unsafe { T::init_in_place(v.as_mut_ptr()) };
        // SAFETY: `init_in_place` fully initialised it (trait contract).
        self.try_box(ctx, unsafe { v.assume_init() })
    }
}

/// A source of random numbers for flow generations.
/// Kernel: `prandom_u32()` / `get_random_u32()`.
pub trait RandomSource {
    /// The next random 32-bit number.
    fn next_u32(&mut self) -> u32;
}

impl<T: RandomSource + ?Sized> RandomSource for &mut T {
    fn next_u32(&mut self) -> u32 {
        (**self).next_u32()
    }
}

impl<T: DmaMap + ?Sized> DmaMap for &T {
    fn map(&self, page: u64, len: u32) -> Result<u64, DmaError> {
        (**self).map(page, len)
    }

    fn unmap(&self, bus: u64, len: u32) {
        (**self).unmap(bus, len);
    }
}

/// Makes `v` exactly `n` copies of `value`, allocating fallibly: the
/// kernel's `kcalloc()` of a per-context table (TID groups, waiter slots).
/// See [`try_fill_vec_with`].
///
/// # Errors
///
/// [`NoMemory`] if the room cannot be reserved; `v` is then unchanged.
pub fn try_fill_vec<T: Clone>(v: &mut Vec<T>, n: usize, value: T) -> Result<(), NoMemory> {
    try_fill_vec_with(v, n, || value.clone())
}

/// Makes `v` exactly `n` values made by `make`, allocating fallibly.
///
/// Growing reserves the missing room with `try_reserve_exact` and writes
/// the new elements straight into it, so no infallible allocation path
/// (and no panic on allocation failure) is compiled in. Existing elements
/// are replaced; extra ones are dropped. After a successful
/// `try_reserve_exact` for the missing room this cannot fail.
///
/// # Errors
///
/// [`NoMemory`] if the room cannot be reserved; `v` is then unchanged.
pub fn try_fill_vec_with<T>(
    v: &mut Vec<T>,
    n: usize,
    mut make: impl FnMut() -> T,
) -> Result<(), NoMemory> {
    if let Some(missing) = n.checked_sub(v.len()) {
        v.try_reserve_exact(missing).map_err(|_| NoMemory)?;
    }
    v.truncate(n);
    for x in v.iter_mut() {
        *x = make();
    }
    let len = v.len();
    let mut written = 0usize;
    for slot in v
        .spare_capacity_mut()
        .iter_mut()
        .take(n.saturating_sub(len))
    {
        slot.write(make());
        written = written.wrapping_add(1);
    }
    // SAFETY: the `written` elements right after the first `len` were just
    // initialised, and they lie within the capacity (`spare_capacity_mut`
    // yields only that room), so `len + written <= capacity` and every
    // element below it is initialised.
    unsafe { v.set_len(len.wrapping_add(written)) };
    // Always equal: the room for `n` was reserved above.
    if v.len() == n { Ok(()) } else { Err(NoMemory) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn fill_grows_shrinks_and_overwrites() {
        let mut v: Vec<u32> = Vec::new();
        try_fill_vec(&mut v, 5, 7).unwrap();
        assert_eq!(v, [7, 7, 7, 7, 7]);
        v[1] = 3;
        try_fill_vec(&mut v, 2, 9).unwrap();
        assert_eq!(v, [9, 9]);
        let mut n = 0;
        try_fill_vec_with(&mut v, 4, || {
            n += 1;
            n
        })
        .unwrap();
        assert_eq!(v, [1, 2, 3, 4]);
        try_fill_vec(&mut v, 0, 1).unwrap();
        assert!(v.is_empty());
    }

    #[test]
    fn fill_refuses_impossible_sizes_unchanged() {
        let mut v = vec![1u64, 2];
        assert_eq!(try_fill_vec(&mut v, usize::MAX, 0), Err(NoMemory));
        assert_eq!(v, [1, 2]);
    }
}
