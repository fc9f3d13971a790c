// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A receive context in the driver's `struct hfi1_ctxtdata`, as the
//! engine's stores: the flow bitmap and generations ([`DrvFlows`]:
//! `rcd->flow_mask`, `rcd->flows[]`), the TID groups ([`DrvGroups`]:
//! `rcd->groups[]` and the three `struct exp_tid_set` lists), the chip
//! ([`DrvChip`]: `hfi1_put_tid()`, `rcv_array_wc_fill()`,
//! `write_uctxt_csr()`), the wait queues (`super::queues::DrvQueues`),
//! all behind the context's own `exp_lock` ([`DrvCtxt`], a
//! `tid_flow::Context`).
//!
//! # Locking
//!
//! The context's `exp_lock`: a [`DrvExp`] lives inside the `Lock` made
//! over `&rcd->exp_lock`, so its stores are reached only through that
//! lock's guard.

use core::ptr::{self, NonNull};

use hfi1_hal::consts::{NUM_TID_FLOWS, TID_GROUP_SIZE};
use hfi1_hal::layout::{
    CExpTidSet, CListHead, CTidFlowState, CTidGroup, PT_EXPECTED, PT_INVALID, RCV_TID_FLOW_TABLE,
};
use hfi1_hal::lock_order::{ExpLock, Lock};
use hfi1_hal::{FlowIndex, FlowTable, FlowTableReg, Generation, RcvArray, RcvType};
use tid_alloc::GroupList;
use tid_alloc::groups::GroupStore;
use tid_flow::{Context, ExpParts, ExpStore, FlowStore};

use super::list;
use super::ops::{DrvRcdView, Ops};
use super::qp::{DrvDev, DrvDma, DrvQp, DrvRef, DrvSched, DrvSpinLock};
use super::queues::DrvQueues;

/// `rcd->flow_mask` and `rcd->flows[]`.
///
/// # Invariants
///
/// Both point into a live context whose `exp_lock` is held while the
/// value is used (it lives inside that lock's `Lock`).
#[derive(Debug)]
pub struct DrvFlows {
    mask: NonNull<u64>,
    flows: NonNull<CTidFlowState>,
}

impl DrvFlows {
    fn slot(&self, f: FlowIndex) -> *mut CTidFlowState {
        // `FlowIndex` is below 32, the length of `rcd->flows`.
        self.flows.as_ptr().wrapping_add(f.as_usize())
    }
}

impl FlowStore for DrvFlows {
    /// The low 32 bits of the `unsigned long`: the driver's
    /// `RXE_NUM_TID_FLOWS` flows (its `BUILD_BUG_ON` keeps them there).
    fn mask(&self) -> u32 {
        // SAFETY: live and locked (type invariant).
        unsafe { *self.mask.as_ptr() as u32 }
    }

    fn set_mask(&mut self, mask: u32) {
        // SAFETY: live and locked (type invariant).
        unsafe {
            let p = self.mask.as_ptr();
            *p = (*p & !u64::from(u32::MAX)) | u64::from(mask);
        }
    }

    fn generation(&self, f: FlowIndex) -> Generation {
        // SAFETY: inside `rcd->flows`, live and locked.
        Generation::masked(unsafe { (*self.slot(f)).generation })
    }

    fn set_generation(&mut self, f: FlowIndex, g: Generation) {
        // SAFETY: inside `rcd->flows`, live and locked.
        unsafe { (*self.slot(f)).generation = g.get() }
    }
}

/// `rcd->groups[]` and `rcd->tid_group_list` / `tid_used_list` /
/// `tid_full_list`, groups named by their index in `rcd->groups`.
///
/// # Invariants
///
/// `groups` points to `ngroups` live groups, each linked on one of the
/// three live lists; the context's `exp_lock` is held while the value is
/// used.
#[derive(Debug)]
pub struct DrvGroups {
    groups: *mut CTidGroup,
    ngroups: u16,
    lists: [NonNull<CExpTidSet>; 3],
    expected_base: u32,
}

impl DrvGroups {
    /// The groups at `groups` and the lists of `rcd`.
    ///
    /// # Safety
    ///
    /// As the type invariant, for as long as the value lives.
    pub unsafe fn new(groups: *mut CTidGroup, ngroups: u16, rcd: &DrvRcdView) -> Option<Self> {
        Some(Self {
            groups,
            ngroups,
            lists: [
                NonNull::new(rcd.tid_group_list)?,
                NonNull::new(rcd.tid_used_list)?,
                NonNull::new(rcd.tid_full_list)?,
            ],
            expected_base: rcd.expected_base,
        })
    }

    fn set(&self, l: GroupList) -> *mut CExpTidSet {
        match l {
            GroupList::Free => self.lists[0].as_ptr(),
            GroupList::Used => self.lists[1].as_ptr(),
            GroupList::Full => self.lists[2].as_ptr(),
        }
    }

    fn head(&self, l: GroupList) -> *mut CListHead {
        // SAFETY: only the address of the live set's list is taken.
        unsafe { &raw mut (*self.set(l)).list }
    }

    fn group(&self, g: u16) -> *mut CTidGroup {
        self.groups.wrapping_add(usize::from(g))
    }

    /// The index of the group whose `list` link is `link`, if it is one of
    /// this context's groups (`hfi1_tid_group_to_idx()`).
    fn index_of(&self, link: *mut CListHead) -> Option<u16> {
        // `list` is the first member of `struct tid_group`.
        let off = (link as usize).checked_sub(self.groups as usize)?;
        let size = core::mem::size_of::<CTidGroup>();
        let i = off / size;
        (off % size == 0 && i < usize::from(self.ngroups)).then_some(i as u16)
    }
}

impl GroupStore for DrvGroups {
    fn expected_base(&self) -> u32 {
        self.expected_base
    }

    fn first(&self, l: GroupList) -> Option<u16> {
        // SAFETY: a live, locked list (type invariant).
        let first = unsafe { list::first(self.head(l)) }?;
        self.index_of(first)
    }

    fn next(&self, g: u16) -> Option<u16> {
        // SAFETY: a live group on a live, locked list.
        let next = unsafe { (*self.group(g)).list.next };
        if [GroupList::Free, GroupList::Used, GroupList::Full]
            .iter()
            .any(|&l| ptr::eq(next, self.head(l)))
        {
            return None;
        }
        self.index_of(next)
    }

    fn base(&self, g: u16) -> u32 {
        // SAFETY: a live group (type invariant; `g` came from this store).
        unsafe { (*self.group(g)).base }
    }

    fn counters(&self, g: u16) -> (u8, u8) {
        // SAFETY: as in `base`.
        unsafe { ((*self.group(g)).used, (*self.group(g)).map) }
    }

    fn set_counters(&mut self, g: u16, used: u8, map: u8) {
        // SAFETY: as in `base`; locked.
        unsafe {
            (*self.group(g)).used = used;
            (*self.group(g)).map = map;
        }
    }

    /// Kernel: `tid_group_move()` (`tid_group_remove()` +
    /// `tid_group_add_tail()`).
    fn move_to(&mut self, g: u16, from: GroupList, to: GroupList) {
        // SAFETY: the group is on `from` (the caller's bookkeeping); both
        // lists are live and locked.
        unsafe {
            let link = &raw mut (*self.group(g)).list;
            list::del_init(link);
            (*self.set(from)).count = (*self.set(from)).count.wrapping_sub(1);
            list::add_tail(link, self.head(to));
            (*self.set(to)).count = (*self.set(to)).count.wrapping_add(1);
        }
    }
}

/// The chip of one context: the driver's `hfi1_put_tid()`,
/// `rcv_array_wc_fill()` and flow-table CSRs.
#[derive(Debug)]
pub struct DrvChip<'o> {
    ops: &'o Ops,
    dd: *mut core::ffi::c_void,
    ctxt: i32,
}

impl RcvArray for DrvChip<'_> {
    fn put_tid(&mut self, rcventry: u32, ty: RcvType, pa: u64, order: u8) {
        let ty = match ty {
            RcvType::Expected => PT_EXPECTED,
            RcvType::Invalid => PT_INVALID,
        };
        // SAFETY: the driver's own callback on its device.
        unsafe { (self.ops.put_tid)(self.dd, rcventry, ty, pa, u16::from(order)) }
    }

    fn wc_fill(&mut self, rcventry: u32) {
        // SAFETY: as above.
        unsafe { (self.ops.wc_fill)(self.dd, rcventry) }
    }
}

impl FlowTable for DrvChip<'_> {
    fn write_flow(&mut self, flow: FlowIndex, value: FlowTableReg) {
        let off = RCV_TID_FLOW_TABLE.wrapping_add(8 * u32::from(flow.get()));
        // SAFETY: as above; `flow` is below 32.
        unsafe { (self.ops.write_csr)(self.dd, self.ctxt, off, value.raw()) }
    }

    fn read_flow(&self, flow: FlowIndex) -> FlowTableReg {
        let off = RCV_TID_FLOW_TABLE.wrapping_add(8 * u32::from(flow.get()));
        // SAFETY: as above.
        FlowTableReg::from_raw(unsafe { (self.ops.read_csr)(self.dd, self.ctxt, off) })
    }
}

/// The `exp_lock`-guarded state of a driver context.
#[derive(Debug)]
pub struct DrvExp<'o> {
    /// The chip.
    pub chip: DrvChip<'o>,
    /// `rcd->flow_mask`, `rcd->flows[]`.
    pub flows: DrvFlows,
    /// `rcd->groups` and the group lists.
    pub groups: DrvGroups,
    /// `rcd->flow_queue`, `rcd->rarr_queue`.
    pub waits: DrvQueues<DrvQp<'o>>,
}

impl<'o> ExpStore<DrvRef<'o>> for DrvExp<'o> {
    type Chip = DrvChip<'o>;
    type Flows = DrvFlows;
    type Groups = DrvGroups;
    type Waits = DrvQueues<DrvQp<'o>>;

    fn split(&mut self) -> ExpParts<'_, DrvChip<'o>, DrvFlows, DrvGroups, DrvQueues<DrvQp<'o>>> {
        ExpParts {
            chip: &mut self.chip,
            flows: &mut self.flows,
            groups: &mut self.groups,
            waits: &mut self.waits,
        }
    }
}

/// A driver context as the engine sees it, made for one call over the
/// driver's `struct hfi1_ctxtdata` (through its view).
#[derive(Debug)]
pub struct DrvCtxt<'o> {
    exp_lock: Lock<ExpLock, DrvSpinLock<'o>, DrvExp<'o>>,
    sched: DrvSched<'o>,
    dma: DrvDma<'o>,
    dev: DrvDev,
}

impl<'o> DrvCtxt<'o> {
    /// The context of `rcd`; `None` if a pointer of the view is null or
    /// its groups are not the driver's eight-entry ones.
    ///
    /// # Safety
    ///
    /// `rcd` describes a live, initialised context (its lists, queues and
    /// `exp_lock` initialised; `rcd->groups` null or `expected_count /
    /// group_size` groups) that outlives the value, and whose state is
    /// reached only under its `exp_lock` meanwhile.
    pub unsafe fn new(ops: &'o Ops, rcd: &DrvRcdView) -> Option<Self> {
        if rcd.group_size as usize != TID_GROUP_SIZE {
            return None;
        }
        let ngroups = u16::try_from(rcd.expected_count / rcd.group_size.max(1)).ok()?;
        // SAFETY: `&rcd->groups` of a live context (the caller).
        let groups = unsafe { *NonNull::new(rcd.groups)?.as_ptr() };
        let exp = DrvExp {
            chip: DrvChip {
                ops,
                dd: rcd.dd,
                ctxt: i32::try_from(rcd.ctxt).ok()?,
            },
            flows: DrvFlows {
                mask: NonNull::new(rcd.flow_mask)?,
                flows: NonNull::new(rcd.flows)?,
            },
            // SAFETY: by the caller (live groups and lists, locked use).
            groups: unsafe { DrvGroups::new(groups, ngroups, rcd)? },
            // SAFETY: the context's two live queues; every QP on them is a
            // driver QP holding a queue reference (the driver's rule).
            waits: unsafe {
                DrvQueues::new(
                    NonNull::new(rcd.flow_queue)?,
                    NonNull::new(rcd.rarr_queue)?,
                    ops,
                )
            },
        };
        // SAFETY: `&rcd->exp_lock`, initialised, of a live context.
        let raw = unsafe { DrvSpinLock::new(ops, NonNull::new(rcd.exp_lock)?) };
        Some(Self {
            exp_lock: Lock::with_raw(raw, exp),
            sched: DrvSched(ops),
            dma: DrvDma { ops, dev: rcd.dev },
            dev: DrvDev(NonNull::new(rcd.n_tidwait)?),
        })
    }

    /// The `exp_lock` and its state.
    pub fn exp(&self) -> &Lock<ExpLock, DrvSpinLock<'o>, DrvExp<'o>> {
        &self.exp_lock
    }

    /// The state, without locking: `&mut` proves nobody else reaches the
    /// context (its initialisation).
    pub fn exp_mut(&mut self) -> &mut DrvExp<'o> {
        self.exp_lock.get_mut()
    }
}

impl<'o> Context for DrvCtxt<'o> {
    type Ref = DrvRef<'o>;
    type Lock = DrvSpinLock<'o>;
    type Exp = DrvExp<'o>;
    type Sched = DrvSched<'o>;
    type Dma = DrvDma<'o>;
    type Dev = DrvDev;

    fn exp_lock(&self) -> &Lock<ExpLock, DrvSpinLock<'o>, DrvExp<'o>> {
        &self.exp_lock
    }

    fn sched(&self) -> &DrvSched<'o> {
        &self.sched
    }

    fn dma(&self) -> &DrvDma<'o> {
        &self.dma
    }

    fn dev(&self) -> &DrvDev {
        &self.dev
    }
}

// Every flow of `rcd->flows` is a `FlowIndex`.
const _: () = assert!(NUM_TID_FLOWS <= 32);
