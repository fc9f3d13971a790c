// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A ready software platform for the READ engines (feature `sim`): the
//! same services as `tid_flow::sim` (sim chip, counted QP references,
//! FIFO scheduler, identity DMA, counted memory, lock-order checker), with
//! [`TidQp`] as the QP's `s_lock`-guarded state.

use alloc::boxed::Box;
use alloc::sync::Arc;

use hfi1_hal::Psn;
use hfi1_hal::lock_order::Lock;
use hfi1_hal::sim::{SimAllocator, SimContext, SimDma, SimRef, SimScheduler};
use qp_wait::{DevCounters, Qp, SendState, WaitPlatform};
use tid_flow::sim::SimLock;
use tid_flow::{FlowError, FlowPlatform, RcvCtxt};

use crate::rc::{Connection, TidQp};

/// The software platform of the READ engines.
#[derive(Debug)]
pub enum EnginePlatform {}

/// A counted reference to a sim QP.
pub type EngineQp = SimRef<Qp<EnginePlatform>>;

impl WaitPlatform for EnginePlatform {
    type Lock = SimLock;
    type Ext = TidQp<EnginePlatform>;
    type Ref = EngineQp;
    type Sched = SimScheduler<EngineQp>;
}

impl FlowPlatform for EnginePlatform {
    type Chip = SimContext;
    type Dma = SimDma;
    type Mem = SimAllocator;
    type Dev = Arc<DevCounters>;
}

/// A new connected QP (the returned reference is its creator's): verbs
/// number `qpn`, waiter slot `slot`, trigger work on `cpu`, first PSN
/// `psn` for both directions.
pub fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> EngineQp {
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

/// A sim context numbered `ctxt` with `ngroups` TID groups at
/// `expected_base`, room for `qp_slots` QPs, flow generations drawn from
/// `seed`.
///
/// # Errors
///
/// As [`RcvCtxt::new`].
pub fn new_ctxt(
    ctxt: u32,
    expected_base: u32,
    ngroups: usize,
    qp_slots: u32,
    seed: u64,
) -> Result<Box<RcvCtxt<EnginePlatform>>, FlowError> {
    tid_flow::sim::new_ctxt_for::<EnginePlatform>(ctxt, expected_base, ngroups, qp_slots, seed)
}
