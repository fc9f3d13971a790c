// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's entry points, READ and WRITE: each runs its engine
//! through [`with_requester`], so a call that errors the QP leaves its TID
//! wait.

use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::TidScheduler;
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::SGuard;
use tid_flow::RcvCtxt;

use super::{TidPlatform, with_requester};
use crate::plain_read::RespKind;
use crate::rc::{EngineError, LocalMemory, PacketSink, SourceData};
#[cfg(doc)]
use crate::requester::Requester;
use crate::requester::{AckVerdict, KdethError, ReadWr, RespVerdict};
use crate::wire::{aeth, read_resp, tid_ack, write_resp};
use crate::write::requester::{TidAckVerdict, WriteRespVerdict, WriteWr};

/// Posts an RDMA READ: [`Requester::post_read`].
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
///
/// # Errors
///
/// As [`Requester::post_read`].
pub fn post_read<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    wr: &ReadWr<'_>,
) -> Result<(), EngineError> {
    with_requester(rcd, qp, g, |r, env| r.post_read(env, wr))
}

/// The requester's send engine: takes the QP's `s_lock` and sends every
/// request packet it can ([`Requester::send_requests`]). Kernel:
/// `hfi1_do_send()` → `hfi1_make_rc_req()`.
///
/// # Locking
///
/// Runs with no lock held (`root`); takes the QP's `s_lock`, and
/// `exp_lock` inside it through `tid-flow`.
///
/// # Errors
///
/// As [`Requester::send_requests`].
pub fn send_engine<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    sink: &mut impl PacketSink,
) -> Result<(), EngineError> {
    let mut g = qp.s_lock.lock(root);
    with_requester(rcd, qp, &mut g, |r, env| r.send_requests(env, sink))
}

/// Receives a TID READ_RESP the chip delivered to software
/// ([`Requester::receive_read_resp`]). Kernel:
/// `hfi1_rc_rcv_tid_rdma_read_resp()`, `hfi1_handle_kdeth_eflags()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow` and
/// `qp-wait`.
///
/// # Errors
///
/// As [`Requester::receive_read_resp`].
pub fn receive_read_resp<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    kpsn: FlowPsn,
    hdr: &read_resp::Repr,
    error: Option<KdethError>,
) -> Result<RespVerdict, EngineError> {
    with_requester(rcd, qp, g, |r, env| {
        r.receive_read_resp(env, kpsn, hdr, error)
    })
}

/// Receives an RC ACK or NAK with PSN `psn` ([`Requester::receive_ack`]).
/// Kernel: `rc_rcv_resp()` → `do_rc_ack()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow` and
/// `qp-wait` when it errors the QP.
pub fn receive_ack<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: Psn,
    a: &aeth::Repr,
) -> AckVerdict {
    with_requester(rcd, qp, g, |r, env| r.receive_ack(env, psn, a))
}

/// Receives a plain RDMA READ response, copying its data into `mem`
/// ([`Requester::receive_read_response`]). Kernel: `rc_rcv_resp()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow` and
/// `qp-wait` when it errors the QP.
#[allow(clippy::too_many_arguments)]
pub fn receive_read_response<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: Psn,
    kind: RespKind,
    a: Option<aeth::Repr>,
    payload: &[u8],
    mem: &mut impl LocalMemory,
) -> bool {
    with_requester(rcd, qp, g, |r, env| {
        r.receive_read_response(env, psn, kind, a, payload, mem)
    })
}

/// The retry timer expired: [`Requester::timeout`].
/// Kernel: `rvt_rc_timeout()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` when the budget is
/// spent.
pub fn timeout<P: TidPlatform>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>) -> bool {
    with_requester(rcd, qp, g, |r, env| r.timeout(env))
}

/// The RNR timer expired: [`Requester::rnr_timeout`].
/// Kernel: `rvt_rc_rnr_retry()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn rnr_timeout<P: TidPlatform>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>) -> bool {
    with_requester(rcd, qp, g, |r, env| r.rnr_timeout(env))
}

/// Destroys the QP's requester state (reset or destroy): every READ not
/// completed completes flushed, every TID, flow, flow record and DMA
/// mapping comes back, and any TID wait is unwound.
/// Kernel: `rvt_reset_qp()` → `hfi1_qp_kern_exp_rcv_clear_all()` +
/// `hfi1_kern_clear_hw_flow()` + `hfi1_tid_rdma_flush_wait()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow` and
/// `qp-wait`.
pub fn flush<P: TidPlatform>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>) {
    with_requester(rcd, qp, g, |r, env| r.destroy(env));
    qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
}

/// Posts an RDMA WRITE: [`Requester::post_write`].
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
///
/// # Errors
///
/// As [`Requester::post_write`].
pub fn post_write<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    wr: &WriteWr<'_>,
) -> Result<(), EngineError> {
    with_requester(rcd, qp, g, |r, env| r.post_write(env, wr))
}

/// The first leg of a QP that posts WRITEs: [`send_engine`] with the
/// local memory `src` plain RDMA WRITE payloads are read from
/// ([`Requester::send_requests_with`]). Kernel: `hfi1_do_send()` →
/// `hfi1_make_rc_req()`.
///
/// # Locking
///
/// Runs with no lock held (`root`); takes the QP's `s_lock`, and
/// `exp_lock` inside it through `tid-flow`.
///
/// # Errors
///
/// As [`Requester::send_requests_with`].
pub fn send_engine_with<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    sink: &mut impl PacketSink,
    src: &dyn SourceData,
) -> Result<(), EngineError> {
    let mut g = qp.s_lock.lock(root);
    requests_locked(rcd, qp, &mut g, sink, src)
}

/// The first leg's packets with the QP's `s_lock` already held, as the
/// driver's send engine calls `hfi1_make_rc_req()`: every request packet
/// it can build ([`Requester::send_requests_with`]; `src` gives plain RDMA
/// WRITE payloads).
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow`.
///
/// # Errors
///
/// As [`Requester::send_requests_with`].
pub fn requests_locked<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    sink: &mut impl PacketSink,
    src: &dyn SourceData,
) -> Result<(), EngineError> {
    with_requester(rcd, qp, g, |r, env| r.send_requests_with(env, sink, src))
}

/// Receives a WRITE_RESP: [`Requester::receive_write_resp`].
/// Kernel: `hfi1_rc_rcv_tid_rdma_write_resp()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` when it errors the QP.
pub fn receive_write_resp<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: Psn,
    hdr: &write_resp::Repr,
    payload: &[u8],
) -> WriteRespVerdict
where
    P::Sched: TidScheduler<P::Ref>,
{
    with_requester(rcd, qp, g, |r, env| {
        r.receive_write_resp(env, psn, hdr, payload)
    })
}

/// Receives a TID ACK: [`Requester::receive_tid_ack`].
/// Kernel: `hfi1_rc_rcv_tid_rdma_ack()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn receive_tid_ack<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: FlowPsn,
    hdr: &tid_ack::Repr,
) -> TidAckVerdict
where
    P::Sched: TidScheduler<P::Ref>,
{
    with_requester(rcd, qp, g, |r, env| r.receive_tid_ack(env, psn, hdr))
}

/// The TID retry timer expired: [`Requester::tid_retry_timeout`].
/// Kernel: `hfi1_tid_retry_timeout()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` when the budget is
/// spent.
pub fn tid_retry_timeout<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
) -> bool
where
    P::Sched: TidScheduler<P::Ref>,
{
    with_requester(rcd, qp, g, |r, env| r.tid_retry_timeout(env))
}
