// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A QP's whole TID READ state ([`TidQp`]) and the entry points that take
//! its `s_lock` guard, as the driver enters the engines: posting, the send
//! engines, the receive paths, the retry timer and the flush.
//!
//! A platform that runs the engines names [`TidQp`] as its
//! `WaitPlatform::Ext`; the engines themselves ([`Requester`],
//! [`Responder`]) take only the parts they use, which [`parts`] lends out
//! of the guard. What needs the whole guard is done here: taking the
//! `s_lock` for the send engine, and unwinding the QP's TID wait
//! (`qp_wait::flush_wait`) when the requester went to the error state.
//!
//! # Locking
//!
//! | function | needs | takes |
//! |---|---|---|
//! | [`send_engine`] | nothing (root token) | the QP's `s_lock`, then `exp_lock` |
//! | [`post_read`], [`timeout`] | the QP's `s_lock` (guard) | nothing |
//! | [`receive_read_resp`], [`receive_ack`], [`flush`] | the QP's `s_lock` (guard) | `exp_lock` |
//! | [`receive_read_req`], [`send_responses`] | the QP's `s_lock` (guard) | nothing |

use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::{SGuard, SendState};
use tid_flow::{FlowPlatform, QpFlowState, QpLocked, RcvCtxt};

use crate::rc::{Connection, EngineError, MrTable, PacketSink, SourceData, WcStatus};
use crate::requester::{AckVerdict, ChipFlow, KdethError, ReadWr, Requester, RespVerdict};
use crate::responder::{ReqVerdict, Responder};
use crate::wire::{aeth, read_req, read_resp};

/// A QP's protocol state under its `s_lock`: the hardware-flow state
/// `tid-flow` needs, the connection, and both roles.
/// Kernel: the TID parts of `rvt_qp` and `hfi1_qp_priv`.
///
/// # Locking
///
/// The QP's `s_lock`.
pub struct TidQp<P: FlowPlatform> {
    /// The QP's hardware flow. Kernel: `qpriv->flow_state`.
    pub flow: QpFlowState,
    /// The connection.
    pub conn: Connection,
    /// The requester side.
    pub requester: Requester<P>,
    /// The responder side.
    pub responder: Responder,
}

impl<P: FlowPlatform> core::fmt::Debug for TidQp<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TidQp")
            .field("flow", &self.flow)
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

impl<P: FlowPlatform> TidQp<P> {
    /// A connected QP with empty queues; both PSN spaces start at `psn`.
    pub fn new(conn: Connection, psn: Psn) -> Self {
        Self {
            flow: QpFlowState::default(),
            conn,
            requester: Requester::new(psn),
            responder: Responder::new(psn),
        }
    }
}

impl<P: FlowPlatform> AsMut<QpFlowState> for TidQp<P> {
    fn as_mut(&mut self) -> &mut QpFlowState {
        &mut self.flow
    }
}

/// The parts of a locked QP the engines take, as disjoint borrows.
///
/// # Locking
///
/// Exists only while the QP's `s_lock` is held (`locked` carries its
/// token).
#[derive(Debug)]
pub struct Parts<'a, 't, P: FlowPlatform> {
    /// Flags, flow state and the `s_lock` token, for `tid-flow`.
    pub locked: QpLocked<'a, 't>,
    /// The connection.
    pub conn: &'a Connection,
    /// The requester side.
    pub requester: &'a mut Requester<P>,
    /// The responder side.
    pub responder: &'a mut Responder,
}

/// Lends the parts of a QP's `s_lock` guard.
pub fn parts<'a, 't, P>(g: &'a mut SGuard<'t, P>) -> Parts<'a, 't, P>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let (state, token) = g.parts();
    let SendState { flags, ext } = state;
    let TidQp {
        flow,
        conn,
        requester,
        responder,
    } = ext;
    Parts {
        locked: QpLocked { flags, flow, token },
        conn,
        requester,
        responder,
    }
}

/// Posts an RDMA READ: [`Requester::post_read`].
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
///
/// # Errors
///
/// As [`Requester::post_read`].
pub fn post_read<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    wr: &ReadWr<'_>,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let p = parts(g);
    p.requester.post_read(rcd, qp, p.conn, wr)
}

/// The requester's send engine: takes the QP's `s_lock` and sends every
/// READ_REQ it can ([`Requester::send_requests`]). Kernel:
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
pub fn send_engine<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    sink: &mut impl PacketSink,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let mut g = qp.s_lock.lock(root);
    let p = parts(&mut g);
    p.requester.send_requests(rcd, qp, p.locked, p.conn, sink)
}

/// Receives a READ_RESP the chip delivered to software
/// ([`Requester::receive_read_resp`]); if the requester lost track, the
/// QP also leaves its TID wait, and the packet counts as
/// [`RespVerdict::Dropped`] (the completions in error show the rest).
/// Kernel: `hfi1_rc_rcv_tid_rdma_read_resp()` (with `rvt_rc_error()` when
/// no flow is found).
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow` and
/// `qp-wait`.
///
/// # Errors
///
/// As [`Requester::receive_read_resp`].
pub fn receive_read_resp<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    bth_psn: FlowPsn,
    hdr: &read_resp::Repr,
    error: Option<KdethError>,
    chip: Option<ChipFlow>,
) -> Result<RespVerdict, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let p = parts(g);
    let v = p
        .requester
        .receive_read_resp(rcd, qp, p.locked, bth_psn, hdr, error, chip);
    if v != Ok(RespVerdict::LostTrack) {
        return v;
    }
    qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
    Ok(RespVerdict::Dropped)
}

/// Receives an RC ACK or NAK ([`Requester::receive_ack`]); after a fatal
/// NAK the QP also leaves its TID wait. Kernel: `do_rc_ack()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); a fatal NAK takes `exp_lock` through
/// `tid-flow` and `qp-wait`.
pub fn receive_ack<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    a: &aeth::Repr,
) -> AckVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let p = parts(g);
    let v = p.requester.receive_ack(rcd, qp, p.locked, a);
    if v == AckVerdict::Fatal {
        qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
    }
    v
}

/// The retry timer expired: [`Requester::timeout`].
/// Kernel: `hfi1_rc_timeout()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn timeout<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>) -> bool
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    g.ext.requester.timeout(rcd, qp)
}

/// Flushes the QP (reset or destroy): every request's segments are torn
/// down and its flow records freed, each request completes as flushed,
/// the hardware flow is released and any TID wait is unwound.
/// Kernel: `hfi1_qp_kern_exp_rcv_clear_all()` + `hfi1_kern_clear_hw_flow()`
/// + `hfi1_tid_rdma_flush_wait()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow` and
/// `qp-wait`.
pub fn flush<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>)
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let p = parts(g);
    let status = WcStatus::Flushed;
    p.requester
        .flush_requests(rcd, qp, p.locked, status, status);
    qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
}

/// Receives a READ_REQ: [`Responder::receive_read_req`].
/// Kernel: `hfi1_rc_rcv_tid_rdma_read_req()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn receive_read_req<P>(
    g: &mut SGuard<'_, P>,
    psn: Psn,
    hdr: &read_req::Repr,
    payload: &[u8],
    mrs: &impl MrTable,
) -> ReqVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let TidQp {
        conn, responder, ..
    } = &mut g.ext;
    responder.receive_read_req(conn, psn, hdr, payload, mrs)
}

/// The responder's send engine: [`Responder::send_responses`].
/// Kernel: `hfi1_make_rc_ack()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
///
/// # Errors
///
/// As [`Responder::send_responses`].
pub fn send_responses<P>(
    g: &mut SGuard<'_, P>,
    src: &impl SourceData,
    mrs: &impl MrTable,
    sink: &mut impl PacketSink,
    budget: u32,
) -> Result<bool, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let TidQp {
        conn, responder, ..
    } = &mut g.ext;
    responder.send_responses(conn, src, mrs, sink, budget)
}
