// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The software platform (feature `std`): the sim chip, counted QP
//! references, the FIFO scheduler, identity DMA, counted memory and the
//! runtime lock-order checker as the lock backend, over any QP state.
//!
//! A platform names the state its QPs keep under `s_lock`, and for the
//! READ engines that state ([`TidQp`]) names the platform again, so the
//! platform cannot be one generic type: [`soft_platform!`](crate::soft_platform) stamps one
//! out for a given state, lock backend and DMA map. [`SoftPlatform`] is
//! the READ engines' ([`TidQp`] state, checked locks, [`SimDma`]).

use alloc::boxed::Box;

use hfi1_hal::Psn;
use hfi1_hal::lock_order::{Lock, NewRawSpinLock};
use hfi1_hal::sim::{SimAllocator, SimContext, SimDma, SimRef, SimScheduler};
use qp_wait::{DevCounters, Qp, SendState, WaitPlatform};
use tid_flow::{FlowPlatform, RcvCtxt};
use tid_read_proto::qp::TidQp;
use tid_read_proto::rc::Connection;

use crate::world::Node;

#[doc(hidden)]
pub mod __private {
    pub use alloc::sync::Arc;
    pub use hfi1_hal::sim::{SimAllocator, SimContext, SimDma, SimRef, SimScheduler};
    pub use qp_wait::{DevCounters, Qp, WaitPlatform};
    pub use tid_flow::FlowPlatform;
    pub use tid_flow::sim::SimLock;
}

/// Defines a software platform: `soft_platform!(pub enum Name { ext:
/// State })`, optionally with `lock: Backend` (default: the lock-order
/// checked [`tid_flow::sim::SimLock`]) and `dma: Map` (default
/// [`SimDma`]). The rest is the sim's: [`SimContext`], [`SimRef`] QP
/// references, the [`SimScheduler`], [`SimAllocator`] memory and shared
/// device counters.
#[macro_export]
macro_rules! soft_platform {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            ext: $ext:ty
            $(, lock: $lock:ty)?
            $(, dma: $dma:ty)?
            $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis enum $name {}

        impl $crate::platform::__private::WaitPlatform for $name {
            type Lock = $crate::soft_platform!(@or $($lock)?; $crate::platform::__private::SimLock);
            type Ext = $ext;
            type Ref = $crate::platform::__private::SimRef<$crate::platform::__private::Qp<$name>>;
            type Sched = $crate::platform::__private::SimScheduler<
                $crate::platform::__private::SimRef<$crate::platform::__private::Qp<$name>>,
            >;
        }

        impl $crate::platform::__private::FlowPlatform for $name {
            type Chip = $crate::platform::__private::SimContext;
            type Dma = $crate::soft_platform!(@or $($dma)?; $crate::platform::__private::SimDma);
            type Mem = $crate::platform::__private::SimAllocator;
            type Dev = $crate::platform::__private::Arc<$crate::platform::__private::DevCounters>;
        }
    };
    (@or $given:ty; $default:ty) => { $given };
    (@or ; $default:ty) => { $default };
}

soft_platform! {
    /// The software platform of the READ engines: [`TidQp`] under a
    /// lock-order checked `s_lock`.
    pub enum SoftPlatform { ext: TidQp<SoftPlatform> }
}

/// A counted reference to a QP of [`SoftPlatform`].
pub type SoftQp = SimRef<Qp<SoftPlatform>>;

/// A new connected QP of [`SoftPlatform`] (the returned reference is its
/// creator's): verbs number `qpn`, waiter slot `slot`, trigger work on
/// `cpu`, first PSN `psn` both ways.
pub fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> SoftQp {
    new_qp_for(qpn, slot, cpu, conn, psn)
}

/// A receive context of [`SoftPlatform`]: see [`new_ctxt_for`].
///
/// # Errors
///
/// As [`RcvCtxt::new`].
pub fn new_ctxt(
    ctxt: u32,
    ngroups: usize,
    qp_slots: u32,
    seed: u64,
) -> Result<Box<RcvCtxt<SoftPlatform>>, tid_flow::FlowError> {
    new_ctxt_for(ctxt, ngroups, qp_slots, seed)
}

/// [`new_qp`] on any software platform whose QPs keep [`TidQp`].
pub fn new_qp_for<P>(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> SimRef<Qp<P>>
where
    P: FlowPlatform<Ext = TidQp<P>, Ref = SimRef<Qp<P>>>,
    P::Lock: NewRawSpinLock,
{
    SimRef::new(Qp::new(
        qpn,
        slot,
        cpu,
        Lock::new(SendState {
            flags: Default::default(),
            ext: TidQp::new(conn, psn),
        }),
    ))
}

/// A receive context numbered `ctxt` on its own software chip (call log
/// off), with `ngroups` TID groups at RcvArray index 0, room for
/// `qp_slots` QPs, flow generations drawn from `seed`, on any software
/// platform with the sim's DMA map.
///
/// # Errors
///
/// As [`RcvCtxt::new`].
pub fn new_ctxt_for<P>(
    ctxt: u32,
    ngroups: usize,
    qp_slots: u32,
    seed: u64,
) -> Result<Box<RcvCtxt<P>>, tid_flow::FlowError>
where
    P: FlowPlatform<
            Chip = SimContext,
            Dma = SimDma,
            Mem = SimAllocator,
            Dev = alloc::sync::Arc<DevCounters>,
            Sched = SimScheduler<<P as WaitPlatform>::Ref>,
        >,
    P::Lock: NewRawSpinLock,
{
    tid_flow::sim::new_ctxt_for::<P>(ctxt, 0, ngroups, qp_slots, seed)
}

impl Node for SoftPlatform {
    fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> Option<SoftQp> {
        Some(new_qp(qpn, slot, cpu, conn, psn))
    }

    fn new_ctxt(ctxt: u32, ngroups: usize, qp_slots: u32, seed: u64) -> Option<Box<RcvCtxt<Self>>> {
        new_ctxt(ctxt, ngroups, qp_slots, seed).ok()
    }

    fn live_allocations(mem: &SimAllocator) -> usize {
        mem.live_allocations()
    }
}
