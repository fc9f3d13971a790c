// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The receive context that owns `exp_lock`, the traits the engine reaches
//! a context's state through, and the QP's hardware flow
//! (`setup_hw_flow` / `clear_hw_flow`).

use core::fmt;
use core::ops::Deref;

use hfi1_hal::Generation;
use hfi1_hal::lock_order::{
    ExpLock, Guard, Lock, LockLevel, LockToken, NewRawSpinLock, RawSpinLock, SLock,
};
use hfi1_hal::platform::{FlowTable, RcvArray};
use hfi1_hal::services::{
    AllocContext, DmaMap, Memory, MemoryWait, QpRef, RandomSource, Scheduler,
};
use qp_wait::store::{self as wait, WaitCounter, WaitStore};
use qp_wait::{Cpu, DevCounters, QueueKind, SFlags, SendState, WaitPlatform, WaitQueues};
use tid_alloc::TidGroups;
use tid_alloc::groups::GroupStore;

use crate::FlowError;
use crate::flows::{
    FlowStore, HwFlows, QpFlow, QpFlowState, clear_flow, release_flow, reserve_flow, setup_flow,
};

/// What a platform supplies to the flow engine, on top of the wait queues'
/// needs.
pub trait FlowPlatform: WaitPlatform<Sched: MemoryWait<<Self as WaitPlatform>::Ref>> {
    /// One receive context's share of the chip (RcvArray and flow table).
    type Chip: RcvArray + FlowTable;
    /// DMA mapping of receive buffers.
    type Dma: DmaMap;
    /// Memory for flow records.
    type Mem: Memory;
    /// The device's counters, shared by its contexts.
    type Dev: Deref<Target = DevCounters>;
}

/// The `exp_lock`-guarded state of a receive context.
/// Kernel: the parts of `struct hfi1_ctxtdata` that `exp_lock` guards.
///
/// # Locking
///
/// Reachable only through [`RcvCtxt::exp_lock`]'s guard.
pub struct ExpState<P: FlowPlatform> {
    /// The chip: RcvArray and flow-table writes happen under `exp_lock`.
    pub chip: P::Chip,
    /// The hardware flows. Kernel: `rcd->flow_mask`, `rcd->flows[]`.
    pub flows: HwFlows,
    /// The TID groups. Kernel: `rcd->tid_group_list` and friends.
    pub groups: TidGroups,
    /// Both wait queues. Kernel: `rcd->flow_queue`, `rcd->rarr_queue`.
    pub waiters: WaitQueues<P::Ref>,
}

impl<P: FlowPlatform> AsMut<WaitQueues<P::Ref>> for ExpState<P> {
    fn as_mut(&mut self) -> &mut WaitQueues<P::Ref> {
        &mut self.waiters
    }
}

/// The parts of a context's `exp_lock`-guarded state, lent at once.
#[derive(Debug)]
pub struct ExpParts<'a, C, F: ?Sized, G: ?Sized, W: ?Sized> {
    /// The chip (RcvArray and flow table).
    pub chip: &'a mut C,
    /// The flow bitmap and generations.
    pub flows: &'a mut F,
    /// The TID groups.
    pub groups: &'a mut G,
    /// The two wait queues.
    pub waits: &'a mut W,
}

/// A receive context's `exp_lock`-guarded state, wherever it lives: the
/// software platform's [`ExpState`] (Rust tables), the kernel platform's
/// view of the driver's `struct hfi1_ctxtdata`.
///
/// # Locking
///
/// Reached only through the context's `exp_lock` guard.
pub trait ExpStore<R: QpRef> {
    /// The chip.
    type Chip: RcvArray + FlowTable;
    /// The flow bitmap and generations. Kernel: `rcd->flow_mask`,
    /// `rcd->flows[]`.
    type Flows: FlowStore + ?Sized;
    /// The TID groups. Kernel: `rcd->groups`, `rcd->tid_*_list`.
    type Groups: GroupStore + ?Sized;
    /// The wait queues. Kernel: `rcd->flow_queue`, `rcd->rarr_queue`.
    type Waits: WaitStore<R> + ?Sized;

    /// All four parts at once.
    fn split(&mut self) -> ExpParts<'_, Self::Chip, Self::Flows, Self::Groups, Self::Waits>;
}

impl<P: FlowPlatform> ExpStore<P::Ref> for ExpState<P> {
    type Chip = P::Chip;
    type Flows = HwFlows;
    type Groups = TidGroups;
    type Waits = WaitQueues<P::Ref>;

    fn split(&mut self) -> ExpParts<'_, P::Chip, HwFlows, TidGroups, WaitQueues<P::Ref>> {
        ExpParts {
            chip: &mut self.chip,
            flows: &mut self.flows,
            groups: &mut self.groups,
            waits: &mut self.waiters,
        }
    }
}

/// A receive context as the engine sees it: its `exp_lock` and the
/// services its QPs use. [`RcvCtxt`] is the software platform's (and the
/// engine's own objects'); the kernel platform builds one over the
/// driver's `struct hfi1_ctxtdata` for each call.
pub trait Context {
    /// A counted reference to a QP of the context.
    type Ref: QpRef<Target: Cpu>;
    /// The spin-lock backend of `exp_lock`.
    type Lock: RawSpinLock;
    /// The `exp_lock`-guarded state.
    type Exp: ExpStore<Self::Ref>;
    /// Send engines, trigger work and the memory-wait list.
    type Sched: Scheduler<Self::Ref> + MemoryWait<Self::Ref>;
    /// DMA mapping of receive buffers.
    type Dma: DmaMap;
    /// The device's TID-wait counter.
    type Dev: WaitCounter;

    /// Kernel: `rcd->exp_lock` and the state it guards.
    fn exp_lock(&self) -> &Lock<ExpLock, Self::Lock, Self::Exp>;
    /// The scheduler.
    fn sched(&self) -> &Self::Sched;
    /// The DMA map.
    fn dma(&self) -> &Self::Dma;
    /// The device's counters.
    fn dev(&self) -> &Self::Dev;
}

/// The guard of a context's `exp_lock`.
pub type ExpGuard<'a, P> = Guard<'a, ExpLock, <P as WaitPlatform>::Lock, ExpState<P>>;

/// One receive context. Kernel: `struct hfi1_ctxtdata` (the TID RDMA
/// parts).
///
/// A few hundred bytes: the TID group and waiter tables are allocated
/// separately (as the kernel `kcalloc`s them), so building one on a kernel
/// stack is fine; [`RcvCtxt::try_new_in`] puts it straight on the heap.
pub struct RcvCtxt<P: FlowPlatform> {
    ctxt: u32,
    /// Kernel: `rcd->exp_lock` and the state it guards.
    pub exp_lock: Lock<ExpLock, P::Lock, ExpState<P>>,
    /// The scheduler of send engines and trigger work.
    pub sched: P::Sched,
    /// DMA mapping.
    pub dma: P::Dma,
    /// Memory for flow records.
    pub mem: P::Mem,
    /// The device's counters.
    pub dev: P::Dev,
}

impl<P: FlowPlatform> fmt::Debug for RcvCtxt<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RcvCtxt")
            .field("ctxt", &self.ctxt)
            .finish_non_exhaustive()
    }
}

/// The services and sizes a context is built from.
pub struct CtxtParts<P: FlowPlatform> {
    /// Context number (the low byte of the KDETH QPN).
    pub ctxt: u32,
    /// The chip.
    pub chip: P::Chip,
    /// First absolute RcvArray index of the context's TID groups.
    pub expected_base: u32,
    /// Number of TID groups (1..=256).
    pub ngroups: usize,
    /// Waiter-table slots: one per QP that may use this context.
    pub qp_slots: u32,
    /// The scheduler.
    pub sched: P::Sched,
    /// DMA mapping.
    pub dma: P::Dma,
    /// Memory for flow records.
    pub mem: P::Mem,
    /// The device's counters.
    pub dev: P::Dev,
}

impl<P: FlowPlatform> RcvCtxt<P> {
    /// Builds a context around `exp_lock`, a raw lock the platform made
    /// (the kernel's is initialised where it stays, with the `exp_lock`
    /// class): TID groups all free, every flow written disabled with a
    /// random generation from `rng`, empty queues.
    /// Kernel: `hfi1_alloc_ctxt_rcv_groups()` +
    /// `hfi1_kern_init_ctxt_generations()`.
    ///
    /// # Errors
    ///
    /// [`FlowError::Alloc`] for a bad group layout; [`FlowError::Wait`] if
    /// the waiter table cannot be allocated.
    pub fn with_raw_lock(
        mut parts: CtxtParts<P>,
        exp_lock: P::Lock,
        rng: &mut impl RandomSource,
    ) -> Result<Self, FlowError> {
        let groups = TidGroups::new(parts.expected_base, parts.ngroups)?;
        let waiters = WaitQueues::new(parts.qp_slots)?;
        let flows = HwFlows::init(rng, &mut parts.chip);
        Ok(Self {
            ctxt: parts.ctxt,
            exp_lock: Lock::with_raw(
                exp_lock,
                ExpState {
                    chip: parts.chip,
                    flows,
                    groups,
                    waiters,
                },
            ),
            sched: parts.sched,
            dma: parts.dma,
            mem: parts.mem,
            dev: parts.dev,
        })
    }

    /// Builds a context as [`RcvCtxt::with_raw_lock`] does and moves it
    /// into memory from `alloc` (a context that may sleep: context
    /// creation). Kernel: `hfi1_kern_exp_rcv_init()` inside the
    /// `kzalloc`ed `hfi1_ctxtdata`.
    ///
    /// # Errors
    ///
    /// As [`RcvCtxt::with_raw_lock`], and [`FlowError::NoMemory`] if the
    /// box cannot be allocated.
    pub fn try_new_in_with<M: Memory>(
        alloc: &M,
        parts: CtxtParts<P>,
        exp_lock: P::Lock,
        rng: &mut impl RandomSource,
    ) -> Result<M::Boxed<Self>, FlowError> {
        let ctx = Self::with_raw_lock(parts, exp_lock, rng)?;
        alloc
            .try_box(AllocContext::MaySleep, ctx)
            .map_err(|_| FlowError::NoMemory)
    }
}

impl<P: FlowPlatform> RcvCtxt<P>
where
    P::Lock: NewRawSpinLock,
{
    /// [`RcvCtxt::with_raw_lock`] with a fresh lock of a backend that can
    /// make one by value (host and sim backends).
    ///
    /// # Errors
    ///
    /// As [`RcvCtxt::with_raw_lock`].
    pub fn new(parts: CtxtParts<P>, rng: &mut impl RandomSource) -> Result<Self, FlowError> {
        Self::with_raw_lock(parts, P::Lock::new_with_class(ExpLock::class()), rng)
    }

    /// [`RcvCtxt::try_new_in_with`] with a fresh lock, as [`RcvCtxt::new`].
    ///
    /// # Errors
    ///
    /// As [`RcvCtxt::try_new_in_with`].
    pub fn try_new_in<M: Memory>(
        alloc: &M,
        parts: CtxtParts<P>,
        rng: &mut impl RandomSource,
    ) -> Result<M::Boxed<Self>, FlowError> {
        Self::try_new_in_with(alloc, parts, P::Lock::new_with_class(ExpLock::class()), rng)
    }
}

impl<P: FlowPlatform> RcvCtxt<P> {
    /// The context number.
    pub fn ctxt(&self) -> u32 {
        self.ctxt
    }
}

impl<P: FlowPlatform> Context for RcvCtxt<P> {
    type Ref = P::Ref;
    type Lock = P::Lock;
    type Exp = ExpState<P>;
    type Sched = P::Sched;
    type Dma = P::Dma;
    type Dev = DevCounters;

    fn exp_lock(&self) -> &Lock<ExpLock, P::Lock, ExpState<P>> {
        &self.exp_lock
    }

    fn sched(&self) -> &P::Sched {
        &self.sched
    }

    fn dma(&self) -> &P::Dma {
        &self.dma
    }

    fn dev(&self) -> &DevCounters {
        &self.dev
    }
}

/// What the flow engine needs from a QP whose `s_lock` the caller holds:
/// its flags, its flow state and the `s_lock` token, as disjoint borrows
/// (so the caller can keep its requests in the same guarded state).
///
/// # Locking
///
/// Exists only while the QP's `s_lock` is held: the token proves it.
///
/// `F` is where the flow state lives: the software platform's
/// [`QpFlowState`], or the driver's `qpriv->flow_state` on the kernel
/// platform.
pub struct QpLocked<'a, 't, F: ?Sized = QpFlowState> {
    /// The QP's flags (`WAIT_TID_SPACE`).
    pub flags: &'a mut SFlags,
    /// The QP's hardware-flow state.
    pub flow: &'a mut F,
    /// The QP's `s_lock` token, for taking `exp_lock`.
    pub token: &'a mut LockToken<'t, SLock>,
}

impl<'t, F: ?Sized> QpLocked<'_, 't, F> {
    /// Lends the same parts again for one call (the value stays usable
    /// afterwards).
    pub fn again(&mut self) -> QpLocked<'_, 't, F> {
        QpLocked {
            flags: &mut *self.flags,
            flow: &mut *self.flow,
            token: &mut *self.token,
        }
    }
}

impl<'a, 't> QpLocked<'a, 't> {
    /// Lends the parts of a QP's `s_lock` guard whose extension state holds
    /// its [`QpFlowState`].
    pub fn from_guard<L: RawSpinLock, X: AsMut<QpFlowState>>(
        guard: &'a mut Guard<'t, SLock, L, SendState<X>>,
    ) -> Self {
        let (state, token) = guard.parts();
        let SendState { flags, ext } = state;
        Self {
            flags,
            flow: ext.as_mut(),
            token,
        }
    }
}

impl<F: ?Sized> fmt::Debug for QpLocked<'_, '_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QpLocked")
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

/// Gets the QP a hardware flow, or queues it on the flow queue. No-op if it
/// already holds one. Kernel: `hfi1_kern_setup_hw_flow()`.
///
/// Under `exp_lock`: if QPs wait ahead of this one, or no flow is free,
/// the QP is queued and [`FlowError::Again`] returned. Otherwise it takes
/// its last flow if free (else the lowest), a generation saved from a
/// RESYNC overrides the flow's, the flow is armed, the QP's flow PSN
/// restarts at 0 and it leaves the queue it waits on. After unlocking,
/// the new head of the flow queue gets its wake-up scheduled.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
///
/// # Errors
///
/// [`FlowError::Again`] (queued); [`FlowError::Wait`] if the QP cannot be
/// queued (a slot outside the context's table).
pub fn setup_hw_flow_with<C: Context, F: QpFlow + ?Sized>(
    rcd: &C,
    qp: &C::Ref,
    qp_locked: QpLocked<'_, '_, F>,
) -> Result<(), FlowError> {
    let QpLocked { flags, flow, token } = qp_locked;
    if flow.holds_flow() {
        return Ok(());
    }
    let wake = {
        let mut guard = rcd.exp_lock().lock(token);
        let es = guard.split();
        let got = if wait::waiters(&*es.waits, QueueKind::Flow, qp, flags) {
            Err(FlowError::Again)
        } else {
            reserve_flow(es.flows, flow.last_index()).map_err(FlowError::from)
        };
        let f = match got {
            Ok(f) => f,
            Err(e) => {
                wait::enqueue(es.waits, QueueKind::Flow, qp, flags, rcd.dev())?;
                return Err(e);
            }
        };
        flow.set_index(Some(f));
        flow.set_last_index(Some(f));
        if !flow.generation().is_reserved() {
            es.flows.set_generation(f, flow.generation());
        }
        flow.set_generation(setup_flow(es.flows, es.chip, f));
        flow.set_psn(0);
        wait::dequeue(es.waits, QueueKind::Flow, qp, flags);
        wait::first(&*es.waits, QueueKind::Flow)
    };
    wake.schedule(token, rcd.sched());
    Ok(())
}

/// Gives the QP's hardware flow back. No-op without one.
/// Kernel: `hfi1_kern_clear_hw_flow()`.
///
/// Under `exp_lock`: the flow moves to its next generation and is
/// disabled, its bit is freed, the QP's flow state is reset; the head of
/// the flow queue is read. After unlocking it is woken: directly if it is
/// this QP, else by its trigger work.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn clear_hw_flow_with<C: Context, F: QpFlow + ?Sized>(
    rcd: &C,
    qp: &C::Ref,
    qp_locked: QpLocked<'_, '_, F>,
) {
    let QpLocked { flags, flow, token } = qp_locked;
    let Some(f) = flow.index() else {
        return;
    };
    let wake = {
        let mut guard = rcd.exp_lock().lock(token);
        let es = guard.split();
        clear_flow(es.flows, es.chip, f);
        release_flow(es.flows, f);
        flow.set_index(None);
        flow.set_psn(0);
        flow.set_generation(Generation::RESERVED);
        wait::first(&*es.waits, QueueKind::Flow)
    };
    wake.deliver(qp, flags, token, rcd.sched());
}

/// Moves the QP's hardware flow to its next generation and arms it again,
/// keeping the flow; the QP's flow PSN restarts at 0. Returns false (and
/// does nothing) if the QP holds no flow.
///
/// For a requester that restarts the segments it has in flight: packets
/// of the old generation then fail the chip's generation check. Giving
/// the flow back and taking one again ([`clear_hw_flow_with`] +
/// [`setup_hw_flow_with`]) would let a QP that holds TIDs wait for a flow held
/// by QPs that wait for its TIDs. No flow is freed, so nobody is woken.
/// Kernel: no single function; the generation step of
/// `hfi1_kern_clear_hw_flow()` followed by the arming of
/// `hfi1_kern_setup_hw_flow()` on the same flow.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn regenerate_hw_flow_with<C: Context, F: QpFlow + ?Sized>(
    rcd: &C,
    qp_locked: QpLocked<'_, '_, F>,
) -> bool {
    let QpLocked { flow, token, .. } = qp_locked;
    let Some(f) = flow.index() else {
        return false;
    };
    let mut guard = rcd.exp_lock().lock(token);
    let es = guard.split();
    clear_flow(es.flows, es.chip, f);
    flow.set_generation(setup_flow(es.flows, es.chip, f));
    flow.set_psn(0);
    true
}

/// [`setup_hw_flow_with`] on a sim context. Kernel:
/// `hfi1_kern_setup_hw_flow()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
///
/// # Errors
///
/// As [`setup_hw_flow_with`].
pub fn setup_hw_flow<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
) -> Result<(), FlowError> {
    setup_hw_flow_with(rcd, qp, qp_locked)
}

/// [`clear_hw_flow_with`] on a sim context. Kernel:
/// `hfi1_kern_clear_hw_flow()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn clear_hw_flow<P: FlowPlatform>(rcd: &RcvCtxt<P>, qp: &P::Ref, qp_locked: QpLocked<'_, '_>) {
    clear_hw_flow_with(rcd, qp, qp_locked);
}

/// [`regenerate_hw_flow_with`] on a sim context.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn regenerate_hw_flow<P: FlowPlatform>(rcd: &RcvCtxt<P>, qp_locked: QpLocked<'_, '_>) -> bool {
    regenerate_hw_flow_with(rcd, qp_locked)
}
