// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a TID RDMA WRITE responder asks of a receive context besides
//! setup and teardown: re-arming its flow in the generation a RESYNC
//! names ([`resync_hw_flow_with`]), and where it waits after an
//! [`FlowError::Again`](crate::FlowError::Again) ([`wait_position_with`]),
//! which scales the RNR NAK timer it sends.
//!
//! # Locking
//!
//! Both take the QP's `s_lock` ([`QpLocked`]) and take `exp_lock` inside
//! (`r_lock` → `s_lock` → `exp_lock` on the receive path that calls them).

use hfi1_hal::Generation;
use qp_wait::QueueKind;
use qp_wait::store::{self as wait, WaitStore};

use crate::ctxt::{Context, ExpStore, FlowPlatform, QpLocked, RcvCtxt};
use crate::flows::{FlowStore, QpFlow, setup_flow};

/// Puts the QP's flow in `generation`, from sequence 0, as a RESYNC
/// demands: if the QP holds a flow, the context's generation for it is set
/// and the register armed again (header suppression on unless it is the
/// reserved generation); if not, the generation is saved in the QP's flow
/// state for its next [`setup_hw_flow_with`](crate::setup_hw_flow_with).
/// The QP's flow PSN restarts at 0 either way. Returns true if a held
/// flow was re-armed. No flow is taken or freed, so nobody is woken.
///
/// The protocol validates `generation` (the flow's next or current one)
/// and leaves software PSN checking; this is only the `exp_lock` part.
/// Kernel: the `spin_lock(&rcd->exp_lock)` block of
/// `hfi1_rc_rcv_tid_rdma_resync()` (`rcd->flows[fs->index].generation =
/// generation; fs->generation = kern_setup_hw_flow(rcd, fs->index)`).
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn resync_hw_flow_with<C: Context, F: QpFlow + ?Sized>(
    rcd: &C,
    qp_locked: QpLocked<'_, '_, F>,
    generation: Generation,
) -> bool {
    let QpLocked { flow, token, .. } = qp_locked;
    let mut guard = rcd.exp_lock().lock(token);
    let es = guard.split();
    let rearmed = match flow.index() {
        None => {
            flow.set_generation(generation);
            false
        }
        Some(f) => {
            es.flows.set_generation(f, generation);
            flow.set_generation(setup_flow(es.flows, es.chip, f));
            true
        }
    };
    flow.set_psn(0);
    rearmed
}

/// [`resync_hw_flow_with`] on a sim context.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn resync_hw_flow<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    qp_locked: QpLocked<'_, '_>,
    generation: Generation,
) -> bool {
    resync_hw_flow_with(rcd, qp_locked, generation)
}

/// The queue `qp` waits on and its position there
/// ([`qp_wait::store::position`]), or `None` if it waits on none. Read
/// under `exp_lock`, after the [`FlowError::Again`](crate::FlowError::Again)
/// of a setup: the QP cannot leave its queue meanwhile (leaving needs its
/// own `s_lock`, which the caller holds), only move up as QPs ahead leave.
///
/// Unlike the driver, the position is taken on the queue the QP waits on,
/// not on the queue the failed step would have queued it on: a QP already
/// queued for RcvArray space that then misses a flow is not queued again
/// (queueing is idempotent), and the driver's `position_in_queue(qpriv,
/// &rcd->flow_queue)` then mixes its RcvArray ticket with the flow queue's
/// count. Kernel: the `position_in_queue()` calls of
/// `hfi1_tid_write_alloc_resources()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn wait_position_with<C: Context, F: QpFlow + ?Sized>(
    rcd: &C,
    qp: &C::Ref,
    qp_locked: QpLocked<'_, '_, F>,
) -> Option<(QueueKind, u32)> {
    let QpLocked { token, .. } = qp_locked;
    let mut guard = rcd.exp_lock().lock(token);
    let es = guard.split();
    match WaitStore::membership(&*es.waits, qp) {
        qp_wait::Membership::Idle => None,
        qp_wait::Membership::Queued(kind) => Some((kind, wait::position(&*es.waits, kind, qp))),
    }
}

/// [`wait_position_with`] on a sim context.
///
/// # Locking
///
/// The QP's `s_lock` held (`qp_locked`); takes `exp_lock`.
pub fn wait_position<P: FlowPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    qp_locked: QpLocked<'_, '_>,
) -> Option<(QueueKind, u32)> {
    wait_position_with(rcd, qp, qp_locked)
}
