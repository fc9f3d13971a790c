// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The one definition of a platform on the software chip,
//! [`sim_platform!`](crate::sim_platform): the sim chip, counted QP
//! references and the FIFO scheduler, with the lock backend, DMA map,
//! memory and device counters a user picks. Every software platform of
//! the workspace (this crate's `SimPlatform`, the benchmarks', the loom
//! models', the harness's and the kernel self-test's) is stamped out by
//! it, so they differ only where their user chose.
//!
//! A platform names the state its QPs keep under `s_lock`, and for the
//! protocol crates' engines that state names the platform again, so the
//! platform cannot be one generic type (proving such a type a
//! [`FlowPlatform`](crate::FlowPlatform) recurses without end): the macro
//! stamps one out.

/// The paths [`sim_platform!`](crate::sim_platform) expands to, so that a
/// user needs no dependency of its own on the crates they come from.
#[doc(hidden)]
pub mod __private {
    pub use crate::FlowPlatform;
    pub use alloc::sync::Arc;
    pub use hfi1_hal::sim::{SimAllocator, SimContext, SimDma, SimRef, SimScheduler};
    pub use qp_wait::{DevCounters, Qp, WaitPlatform};

    #[cfg(feature = "sim")]
    pub use crate::sim::SimLock;
}

/// Defines a platform on the software chip: `sim_platform!(pub enum Name
/// { ext: State })`, then optionally, in this order, `lock: Backend`
/// (default, with feature `sim`: `tid_flow::sim::SimLock`, the lock-order
/// checked spin lock, loom's plain one under loom; without it the lock
/// must be named), `dma: Map` (default `SimDma`), `mem: Allocator`
/// (default `SimAllocator`) and `dev: Counters` (default
/// `Arc<DevCounters>`). The chip is `SimContext`, QP references are
/// `SimRef`s and the scheduler is the `SimScheduler`.
///
/// # Example
///
#[cfg_attr(feature = "sim", doc = "```")]
#[cfg_attr(not(feature = "sim"), doc = "```ignore")]
/// use hfi1_hal::sync::SpinLock;
/// use tid_flow::sim::SimQpExt;
///
/// tid_flow::sim_platform! {
///     /// QPs that keep only their flow state, under a plain spin lock.
///     pub enum Plain { ext: SimQpExt, lock: SpinLock }
/// }
///
/// let rcd = tid_flow::sim::new_ctxt_for::<Plain>(1, 0, 16, 4, 7).unwrap();
/// assert_eq!(rcd.ctxt(), 1);
/// ```
#[macro_export]
macro_rules! sim_platform {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            ext: $ext:ty
            $(, lock: $lock:ty)?
            $(, dma: $dma:ty)?
            $(, mem: $mem:ty)?
            $(, dev: $dev:ty)?
            $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis enum $name {}

        impl $crate::sim::platform::__private::WaitPlatform for $name {
            type Lock = $crate::sim_platform!(
                @or $($lock)?;
                $crate::sim::platform::__private::SimLock
            );
            type Ext = $ext;
            type Ref = $crate::sim::platform::__private::SimRef<
                $crate::sim::platform::__private::Qp<$name>,
            >;
            type Sched = $crate::sim::platform::__private::SimScheduler<
                $crate::sim::platform::__private::SimRef<
                    $crate::sim::platform::__private::Qp<$name>,
                >,
            >;
        }

        impl $crate::sim::platform::__private::FlowPlatform for $name {
            type Chip = $crate::sim::platform::__private::SimContext;
            type Dma = $crate::sim_platform!(
                @or $($dma)?;
                $crate::sim::platform::__private::SimDma
            );
            type Mem = $crate::sim_platform!(
                @or $($mem)?;
                $crate::sim::platform::__private::SimAllocator
            );
            type Dev = $crate::sim_platform!(
                @or $($dev)?;
                $crate::sim::platform::__private::Arc<
                    $crate::sim::platform::__private::DevCounters,
                >
            );
        }
    };
    (@or $given:ty; $default:ty) => { $given };
    (@or ; $default:ty) => { $default };
}
