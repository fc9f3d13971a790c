// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Platforms on the software chip.
//!
//! With feature `sim-chip` (`no_std` + `alloc`): [`sim_platform!`]
//! (in [`platform`]), which stamps out a platform on the sim chip with the
//! lock backend, DMA map, memory and device counters its user picks; a
//! sim receive context for any such platform ([`new_ctxt_for`]) and the
//! driver's way into an entry point under a held `s_lock`
//! ([`with_s_lock_held`]).
//!
//! With feature `sim` (host, std): a ready platform for tests, benchmarks
//! and the protocol crates, `SimPlatform`: the sim chip, counted QP
//! references, the FIFO scheduler, identity DMA, counted memory, and the
//! runtime lock-order checker as the lock backend (plain spin lock under
//! loom).
//!
//! [`sim_platform!`]: crate::sim_platform

use alloc::boxed::Box;
use alloc::sync::Arc;

use hfi1_hal::lock_order::{LockToken, RawSpinLock, Unlocked};
use hfi1_hal::sim::{SimAllocator, SimContext, SimDma, SimRandom, SimScheduler};
use qp_wait::{DevCounters, Qp, SGuard, WaitPlatform};
#[cfg(feature = "sim")]
use {hfi1_hal::lock_order::Lock, hfi1_hal::sim::SimRef, qp_wait::SendState};

use crate::{CtxtParts, FlowError, FlowPlatform, QpFlowState, RcvCtxt};

pub mod platform;

/// The lock backend: lockdep-checked on the host, loom's under loom.
#[cfg(all(feature = "sim", not(loom)))]
pub type SimLock = hfi1_hal::sim::lockdep::CheckedSpinLock;
/// The lock backend: lockdep-checked on the host, loom's under loom.
#[cfg(all(feature = "sim", loom))]
pub type SimLock = hfi1_hal::sync::SpinLock;

#[cfg(feature = "sim")]
crate::sim_platform! {
    /// The software platform: QPs that keep only their hardware-flow state,
    /// under the default lock ([`SimLock`]), DMA map, memory and device
    /// counters of [`sim_platform!`](crate::sim_platform).
    pub enum SimPlatform { ext: SimQpExt }
}

/// A sim QP's extension state under its `s_lock`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SimQpExt {
    /// Its hardware-flow state.
    pub flow: QpFlowState,
}

impl AsMut<QpFlowState> for SimQpExt {
    fn as_mut(&mut self) -> &mut QpFlowState {
        &mut self.flow
    }
}

/// A counted reference to a sim QP.
#[cfg(feature = "sim")]
pub type SimQp = SimRef<Qp<SimPlatform>>;

/// Calls `entry` the way the driver calls the engine: the caller takes the
/// QP's `s_lock` itself (`spin_lock_irqsave(&qp->s_lock)`, here on the raw
/// lock), and the entry point works on a guard made over the lock it holds
/// ([`Lock::assume_held`](hfi1_hal::lock_order::Lock::assume_held), checked by the runtime checker), which does not
/// release it; the caller unlocks after `entry` returns.
///
/// `root` is the caller's proof that it holds no lock of the order.
///
/// # Locking
///
/// Takes `qp`'s `s_lock` (as the driver's caller); `entry` runs with it
/// held.
pub fn with_s_lock_held<P: WaitPlatform, T>(
    qp: &Qp<P>,
    root: &mut LockToken<'_, Unlocked>,
    entry: impl FnOnce(&mut SGuard<'_, P>) -> T,
) -> T {
    let raw = qp.s_lock.raw();
    let flags = raw.lock_irqsave();
    let out = {
        // SAFETY: this context took the lock just above, holding nothing
        // else of the order (`root`), and releases it only after the guard
        // is gone; nothing else reaches the QP's state meanwhile (the lock
        // excludes other contexts, and this one only goes through the
        // guard).
        let mut g = unsafe { qp.s_lock.assume_held(root) };
        entry(&mut g)
    };
    // SAFETY: taken above in this context, with these flags; the guard made
    // over it is gone.
    unsafe { raw.unlock_irqrestore(flags) };
    out
}

/// A new sim QP (the returned reference is its creator's).
#[cfg(feature = "sim")]
pub fn new_qp(qpn: u32, slot: u32, cpu: u32) -> SimQp {
    SimRef::new(Qp::new(qpn, slot, cpu, Lock::new(SendState::default())))
}

/// A sim context with `ngroups` TID groups at `expected_base`, room for
/// `qp_slots` QPs, and flow generations drawn from `seed`.
///
/// # Errors
///
/// As [`RcvCtxt::new`].
#[cfg(feature = "sim")]
pub fn new_ctxt(
    ctxt: u32,
    expected_base: u32,
    ngroups: usize,
    qp_slots: u32,
    seed: u64,
) -> Result<Box<RcvCtxt<SimPlatform>>, FlowError> {
    new_ctxt_for::<SimPlatform>(ctxt, expected_base, ngroups, qp_slots, seed)
}

/// A sim context as `new_ctxt` (feature `sim`) makes one, for any
/// platform built from the sim's services (the protocol crates' platforms
/// differ only in the QP's `s_lock`-guarded state): the sim chip with its call log off, the FIFO scheduler,
/// identity DMA, counted memory and the device counters.
///
/// # Errors
///
/// As [`RcvCtxt::new`].
pub fn new_ctxt_for<P>(
    ctxt: u32,
    expected_base: u32,
    ngroups: usize,
    qp_slots: u32,
    seed: u64,
) -> Result<Box<RcvCtxt<P>>, FlowError>
where
    P: FlowPlatform<
            Chip = SimContext,
            Dma = SimDma,
            Mem = SimAllocator,
            Dev = Arc<DevCounters>,
            Sched = SimScheduler<<P as WaitPlatform>::Ref>,
        >,
    P::Lock: hfi1_hal::lock_order::NewRawSpinLock,
{
    let entries = u32::try_from(ngroups)
        .unwrap_or(0)
        .saturating_mul(hfi1_hal::consts::TID_GROUP_SIZE as u32);
    let mut chip = SimContext::new(expected_base, entries);
    chip.set_logging(false);
    let parts = CtxtParts {
        ctxt,
        chip,
        expected_base,
        ngroups,
        qp_slots,
        sched: SimScheduler::new(),
        dma: SimDma::new(),
        mem: SimAllocator::new(),
        dev: Arc::new(DevCounters::new()),
    };
    let mut rng = SimRandom::new(seed);
    Ok(Box::new(RcvCtxt::new(parts, &mut rng)?))
}
