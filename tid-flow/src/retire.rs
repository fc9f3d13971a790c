// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Retiring a completed segment's RcvArray entries in two steps, for a
//! requester that releases them when the segment completes (as the kernel
//! does) but must not hand them to another segment while a late packet of
//! the flow generation they served can still be placed through them.
//!
//! 1. [`retire_segment`] at the segment's last packet: the entries are
//!    written INVALID (a late packet then meets a TID error and nothing is
//!    placed), the buffers are unmapped, the page sets forgotten and
//!    `clear_tail` advances, as [`crate::setup::clear_segment_with`]
//!    does; but the entries stay reserved in the TID groups and come back
//!    as a [`Retired`] reservation.
//! 2. [`release_retired`] once the flow has left that generation: the
//!    groups take the entries back and the RcvArray queue's head is woken.
//!
//! The two steps together do what `hfi1_kern_exp_rcv_clear()` does in one.
//! Written over the same traits as [`crate::setup`], so either platform's
//! request and context serve.
//!
//! # Locking
//!
//! Both steps run with the request's QP's `s_lock` held (a [`QpLocked`])
//! and take the context's `exp_lock` inside.

use arrayvec::ArrayVec;
use hfi1_hal::consts::MAX_PAGESETS;
use hfi1_hal::{RcvArray, RcvType};
use qp_wait::QueueKind;
use qp_wait::store as wait;
use tid_alloc::TidNode;
use tid_alloc::groups::{self, GroupStore, NodeList};

use crate::FlowError;
use crate::ctxt::{Context, ExpStore, QpLocked};
use crate::segment::{ring_count, ring_next};
use crate::setup::{FlowRingStore, SegmentRecord, unmap_flow};

/// RcvArray entries a retired segment still reserves: its TID groups'
/// nodes. Kernel: the `tnode[]` of the `struct tid_rdma_flow` it came
/// from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retired(ArrayVec<TidNode, MAX_PAGESETS>);

impl Retired {
    /// True if it reserves nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Entries reserved.
    pub fn entries(&self) -> u32 {
        self.0.iter().map(|n| u32::from(n.cnt())).sum()
    }
}

/// Retires the oldest segment of `req`. Kernel: `hfi1_kern_exp_rcv_clear()`
/// (its unprogramming, unmapping and `clear_tail` step).
///
/// Step 1 of the module doc: the TID groups' release is left to
/// [`release_retired`].
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`, `req`); takes `exp_lock`.
///
/// # Errors
///
/// [`FlowError::Invalid`] on an empty ring; [`FlowError::NoFlowRecords`]
/// without records.
pub fn retire_segment<C, Q, F>(
    rcd: &C,
    req: &mut Q,
    qp_locked: QpLocked<'_, '_, F>,
) -> Result<Retired, FlowError>
where
    C: Context,
    Q: FlowRingStore + ?Sized,
    F: ?Sized,
{
    let tail = req.clear_tail();
    if ring_count(req.setup_head(), tail) == 0 {
        return Err(FlowError::Invalid);
    }
    let mut rec = req.record(tail).ok_or(FlowError::NoFlowRecords)?;
    let mut kept = ArrayVec::new();
    {
        let mut guard = rcd.exp_lock().lock(qp_locked.token);
        let es = guard.split();
        let mut nodes = rec.nodes_mut();
        for i in 0..nodes.len() {
            let Some(node) = nodes.node(i) else { break };
            let base = es
                .groups
                .base(u16::try_from(node.group_index()).unwrap_or(u16::MAX));
            // The entries taken, lowest first: one step per set bit.
            let mut taken = node.taken();
            while taken != 0 {
                es.chip.put_tid(
                    base.wrapping_add(taken.trailing_zeros()),
                    RcvType::Invalid,
                    0,
                    0,
                );
                taken &= taken - 1;
            }
            // Cannot fail: the record holds at most as many nodes.
            let _ = kept.try_push(node);
        }
        nodes.clear();
    }
    unmap_flow(&mut rec, rcd.dma());
    rec.forget_pagesets();
    drop(rec);
    req.set_clear_tail(ring_next(tail));
    Ok(Retired(kept))
}

/// Gives a retired segment's entries back to the TID groups and wakes the
/// RcvArray queue's head (directly if it is this QP) (step 2 of the
/// module doc). Kernel: the group release of `hfi1_kern_exp_rcv_clear()`
/// (`kern_unprogram_rcv_group()`, which writes the entries INVALID once
/// more).
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn release_retired<C, F>(rcd: &C, qp: &C::Ref, qp_locked: QpLocked<'_, '_, F>, r: Retired)
where
    C: Context,
    F: ?Sized,
{
    let QpLocked { flags, token, .. } = qp_locked;
    if r.0.is_empty() {
        return;
    }
    let wake = {
        let mut guard = rcd.exp_lock().lock(token);
        let es = guard.split();
        groups::unprogram_rcvarray(es.groups, es.chip, &r.0);
        wait::first(&*es.waits, QueueKind::RcvArray)
    };
    wake.deliver(qp, flags, token, rcd.sched());
}
