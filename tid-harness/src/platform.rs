// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Platforms on the software chip: the sim chip, counted QP references
//! and the FIFO scheduler, with the lock backend, DMA map, memory and
//! device counters a user picks ([`sim_platform!`](crate::sim_platform),
//! tid-flow's, re-exported), and the ready one of the host tests and
//! tid-sim (`SoftPlatform`, feature `std`: the runtime lock-order checker
//! as the lock backend, identity DMA, counted memory, QPs that keep the
//! READ and WRITE engines' state).

#[cfg(feature = "std")]
pub use soft::{SoftPlatform, SoftQp, new_ctxt, new_ctxt_for, new_qp};

/// The ready platform of the host tests and tid-sim (feature `std`).
#[cfg(feature = "std")]
mod soft {
    use alloc::boxed::Box;

    use hfi1_hal::Psn;
    use hfi1_hal::lock_order::NewRawSpinLock;
    use hfi1_hal::sim::{SimAllocator, SimContext, SimDma, SimRef, SimScheduler};
    use qp_wait::{DevCounters, Qp, WaitPlatform};
    use tid_flow::{FlowPlatform, RcvCtxt};
    use tid_read_proto::rc::Connection;

    #[cfg(doc)]
    use tid_read_proto::qp::TidQp;

    tid_flow::sim_platform! {
        /// The software platform of the READ and WRITE engines: [`TidQp`] under a
        /// lock-order checked `s_lock`, identity DMA, counted memory.
        pub enum SoftPlatform { ext: tid_read_proto::qp::TidQp<SoftPlatform> }
    }

    /// A counted reference to a QP of [`SoftPlatform`].
    pub type SoftQp = SimRef<Qp<SoftPlatform>>;

    /// A new connected QP of [`SoftPlatform`]: see [`crate::world::new_qp`].
    pub fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> SoftQp {
        crate::world::new_qp(qpn, slot, cpu, conn, psn)
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

    /// A receive context numbered `ctxt` on its own software chip (call log
    /// off), with `ngroups` TID groups at RcvArray index 0, room for
    /// `qp_slots` QPs, flow generations drawn from `seed`, on any platform of
    /// the sim's DMA map, memory and device counters.
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

    impl crate::world::Node for SoftPlatform {
        fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> Option<SoftQp> {
            Some(new_qp(qpn, slot, cpu, conn, psn))
        }

        fn new_ctxt(
            ctxt: u32,
            ngroups: usize,
            qp_slots: u32,
            seed: u64,
        ) -> Option<Box<RcvCtxt<Self>>> {
            new_ctxt(ctxt, ngroups, qp_slots, seed).ok()
        }

        fn live_allocations(mem: &SimAllocator) -> usize {
            mem.live_allocations()
        }

        fn new_rlock() -> Option<<Self as WaitPlatform>::Lock> {
            use hfi1_hal::lock_order::{LockLevel, RLock};
            Some(<Self as WaitPlatform>::Lock::new_with_class(RLock::class()))
        }
    }
}
