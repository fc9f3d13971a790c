// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A QP's whole READ state ([`TidQp`]) and the entry points that take its
//! `s_lock` guard, as the driver enters the engines: posting, the send
//! engines, the receive paths, the two timers and the destroy.
//!
//! A platform that runs the engines names [`TidQp`] as its
//! `WaitPlatform::Ext`; the engines themselves ([`Requester`],
//! [`Responder`]) take only the parts they use, which [`parts`] lends out
//! of the guard. What needs the whole guard is done here: taking the
//! `s_lock` for the send engine, and unwinding the QP's TID wait
//! (`qp_wait::flush_wait`) whenever a call moved the QP to the error state
//! (a deviation from 6.1, which leaves the wait queues only at reset: an
//! errored QP at the head of the RcvArray queue would block every QP
//! behind it until then).
//!
//! # Locking
//!
//! | function | needs | takes |
//! |---|---|---|
//! | [`send_engine`] | nothing (root token) | the QP's `s_lock`, then `exp_lock` |
//! | [`post_read`] | the QP's `s_lock` (guard) | `exp_lock` if the post errors the QP |
//! | [`requests_locked`] | the QP's `s_lock` (guard) | `exp_lock` |
//! | [`receive_read_resp`], [`receive_ack`], [`receive_read_response`], [`timeout`], [`rnr_timeout`], [`flush`] | the QP's `s_lock` (guard) | `exp_lock` |
//! | [`receive_read_req`], [`receive_plain_read`], [`send_responses`] | the QP's `s_lock` (guard) | nothing |
//! | [`receive_write_req`], [`receive_write_data`], [`receive_write_data_error`], [`receive_resync`], [`reap_timeout`] | the QP's `r_lock` (its token) | the QP's `s_lock`, then `exp_lock` |
//! | [`send_write_responses`], [`send_tid_ack`] | nothing (root token) | the QP's `s_lock` (then `exp_lock` for the first) |
//! | [`write_responses_locked`], [`tid_ack_locked`], [`flush_write_responder`] | the QP's `s_lock` (guard) | `exp_lock` |

use hfi1_hal::lock_order::{LockToken, RLock, Unlocked};
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::{SGuard, SendState};
use tid_flow::{FlowPlatform, QpFlowState, QpLocked, RcvCtxt};

use crate::plain_read::RespKind;
use crate::rc::{Connection, EngineError, LocalMemory, MrTable, PacketSink, QpState, SourceData};
use crate::requester::{AckVerdict, Env, KdethError, ReadWr, Requester, RespVerdict};
use crate::responder::{ReqVerdict, Responder};
use crate::wire::{aeth, read_req, read_resp, reth, write_req};
use crate::write::WriteRegions;
use crate::write::responder::{
    self as wresp, DataVerdict, RecvPath, ResyncVerdict, WriteReqVerdict, WriteResponder,
};

/// A QP's protocol state under its `s_lock`: the hardware-flow state
/// `tid-flow` needs, the connection, the QP state both roles share, and
/// both roles. Kernel: the READ parts of `rvt_qp` and `hfi1_qp_priv`.
///
/// # Locking
///
/// The QP's `s_lock`.
pub struct TidQp<P: FlowPlatform> {
    /// The QP's hardware flow. Kernel: `qpriv->flow_state`.
    pub flow: QpFlowState,
    /// The connection.
    pub conn: Connection,
    /// The QP's state. Kernel: `qp->state`.
    pub state: QpState,
    /// The requester side.
    pub requester: Requester<P>,
    /// The responder side.
    pub responder: Responder,
    /// The TID WRITE responder (its entries share `responder`'s ack
    /// queue).
    pub write_responder: WriteResponder<P>,
}

impl<P: FlowPlatform> core::fmt::Debug for TidQp<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TidQp")
            .field("flow", &self.flow)
            .field("conn", &self.conn)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<P: FlowPlatform> TidQp<P> {
    /// A connected QP ready to send with empty queues; both PSN spaces
    /// start at `psn`.
    pub fn new(conn: Connection, psn: Psn) -> Self {
        Self {
            flow: QpFlowState::default(),
            requester: Requester::new(&conn, psn),
            conn,
            state: QpState::Rts,
            responder: Responder::new(psn),
            write_responder: WriteResponder::new(),
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
    /// The QP's state.
    pub state: &'a mut QpState,
    /// The requester side.
    pub requester: &'a mut Requester<P>,
    /// The responder side.
    pub responder: &'a mut Responder,
    /// The TID WRITE responder.
    pub write_responder: &'a mut WriteResponder<P>,
}

/// Lends the parts of a QP's `s_lock` guard.
pub fn parts<'a, 't, P>(g: &'a mut SGuard<'t, P>) -> Parts<'a, 't, P>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let (st, token) = g.parts();
    let SendState { flags, ext } = st;
    let TidQp {
        flow,
        conn,
        state,
        requester,
        responder,
        write_responder,
    } = ext;
    Parts {
        locked: QpLocked { flags, flow, token },
        conn,
        state,
        requester,
        responder,
        write_responder,
    }
}

/// Runs `f` on the parts of a locked QP; if it moved the QP to the error
/// state, the QP then leaves its TID wait.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); what `f` takes, then `exp_lock` through
/// `qp-wait`.
fn unwinding<P, T>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    f: impl FnOnce(Parts<'_, '_, P>) -> T,
) -> T
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let before = g.ext.state;
    let out = f(parts(g));
    if before.receives() && !g.ext.state.receives() {
        qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
    }
    out
}

/// Runs `f` on the requester with its [`Env`] ([`unwinding`]).
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); what `f` takes, then `exp_lock` through
/// `qp-wait`.
pub(crate) fn with_requester<P, T>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    f: impl FnOnce(&mut Requester<P>, &mut Env<'_, '_, P>) -> T,
) -> T
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    unwinding(rcd, qp, g, |p| {
        let mut env = Env {
            rcd,
            qp,
            locked: p.locked,
            conn: p.conn,
            state: p.state,
        };
        f(p.requester, &mut env)
    })
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
pub fn receive_read_resp<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    kpsn: FlowPsn,
    hdr: &read_resp::Repr,
    error: Option<KdethError>,
) -> Result<RespVerdict, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
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
pub fn receive_ack<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: Psn,
    a: &aeth::Repr,
) -> AckVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
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
pub fn receive_read_response<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: Psn,
    kind: RespKind,
    a: Option<aeth::Repr>,
    payload: &[u8],
    mem: &mut impl LocalMemory,
) -> bool
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
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
pub fn timeout<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>) -> bool
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    with_requester(rcd, qp, g, |r, env| r.timeout(env))
}

/// The RNR timer expired: [`Requester::rnr_timeout`].
/// Kernel: `rvt_rc_rnr_retry()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn rnr_timeout<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>) -> bool
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
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
pub fn flush<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>)
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    with_requester(rcd, qp, g, |r, env| r.destroy(env));
    qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
}

/// Receives a TID READ_REQ: [`Responder::receive_read_req`].
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
        conn,
        state,
        responder,
        ..
    } = &mut g.ext;
    responder.receive_read_req(conn, state, psn, hdr, payload, mrs)
}

/// Receives a plain RDMA READ request: [`Responder::receive_plain_read`].
/// Kernel: `hfi1_rc_rcv()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn receive_plain_read<P>(
    g: &mut SGuard<'_, P>,
    psn: Psn,
    r: &reth::Repr,
    mrs: &impl MrTable,
) -> ReqVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let TidQp {
        conn,
        state,
        responder,
        ..
    } = &mut g.ext;
    responder.receive_plain_read(conn, state, psn, r, mrs)
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
        conn,
        state,
        responder,
        ..
    } = &mut g.ext;
    responder.send_responses(conn, *state, src, mrs, sink, budget)
}

// ---- The TID WRITE responder ----

/// Runs `f` on the WRITE responder's view of a locked QP ([`unwinding`]).
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); what `f` takes, then `exp_lock` through
/// `qp-wait`.
fn with_write_responder<P, T>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    f: impl FnOnce(&mut wresp::Env<'_, '_, P>) -> T,
) -> T
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    unwinding(rcd, qp, g, |p| {
        f(&mut wresp::Env {
            rcd,
            qp,
            locked: p.locked,
            conn: p.conn,
            state: p.state,
            rsp: p.responder,
            w: p.write_responder,
        })
    })
}

/// Runs `f` on the WRITE responder with the receive path's proof: takes
/// the QP's `s_lock` under the `r_lock` token `r` ([`with_write_responder`]).
///
/// # Locking
///
/// The QP's `r_lock` held (`r`); takes the QP's `s_lock`, what `f` takes,
/// then `exp_lock` through `qp-wait`.
fn on_recv_path<P, T>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    f: impl FnOnce(&mut wresp::Env<'_, '_, P>, &RecvPath) -> T,
) -> T
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let intr = RecvPath::held(r);
    let mut g = qp.s_lock.lock(r);
    with_write_responder(rcd, qp, &mut g, |env| f(env, &intr))
}

/// Receives a TID WRITE_REQ with IB PSN `psn`: validation, the ack-queue
/// entry (or the revive of an RNR-NAKed one), and the first allocation,
/// which may queue the QP and schedule an RNR NAK. The first leg
/// ([`send_write_responses`]) must run afterwards if the responder
/// [`Responder::has_work`]. Kernel: `hfi1_rc_rcv_tid_rdma_write_req()`.
///
/// # Locking
///
/// The QP's `r_lock` held (`r`, the receive path); takes the QP's
/// `s_lock`, and `exp_lock` inside it through `tid-flow`.
pub fn receive_write_req<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    psn: Psn,
    hdr: &write_req::Repr,
    wmrs: &impl WriteRegions,
) -> WriteReqVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    on_recv_path(rcd, qp, r, |env, intr| {
        env.receive_write_req(intr, psn, hdr, wmrs)
    })
}

/// Receives a WRITE_DATA or WRITE_DATA_LAST (`last_of_request`) that the
/// chip delivered without an error: a segment's last packet releases its
/// TIDs, allocates more and makes a TID ACK owed ([`send_tid_ack`]).
/// Kernel: `hfi1_rc_rcv_tid_rdma_write_data()`.
///
/// # Locking
///
/// The QP's `r_lock` held (`r`); takes the QP's `s_lock`, and `exp_lock`
/// inside it through `tid-flow`.
pub fn receive_write_data<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    psn: FlowPsn,
    last_of_request: bool,
    wmrs: &impl WriteRegions,
) -> DataVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    on_recv_path(rcd, qp, r, |env, intr| {
        env.receive_write_data(intr, psn, last_of_request, wmrs)
    })
}

/// Receives a WRITE_DATA or WRITE_DATA_LAST (`last_of_request`) that the
/// chip delivered with `error`: a flow sequence error starts software PSN
/// checking with a TID NAK for the packet the chip expected, a generation
/// error earns a NAK, and in software checking an in-order last packet of
/// a segment is received as [`receive_write_data`] receives it. Kernel:
/// the TID WRITE half of `hfi1_handle_kdeth_eflags()`.
///
/// # Locking
///
/// The QP's `r_lock` held (`r`); takes the QP's `s_lock`, and `exp_lock`
/// inside it (the flow register, and `tid-flow`).
pub fn receive_write_data_error<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    (psn, last_of_request): (FlowPsn, bool),
    error: KdethError,
    wmrs: &impl WriteRegions,
) -> DataVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    on_recv_path(rcd, qp, r, |env, intr| {
        env.receive_write_data_error(intr, psn, last_of_request, error, wmrs)
    })
}

/// Receives a RESYNC with BTH PSN `psn`: the QP's flow moves to the
/// generation it names, from sequence 0, every allocated segment not yet
/// received is renumbered there, and a RESYNC ACK is owed
/// ([`send_tid_ack`]). Kernel: `hfi1_rc_rcv_tid_rdma_resync()`.
///
/// # Locking
///
/// The QP's `r_lock` held (`r`); takes the QP's `s_lock`, and `exp_lock`
/// inside it through `tid-flow`.
pub fn receive_resync<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    psn: FlowPsn,
) -> ResyncVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    on_recv_path(rcd, qp, r, |env, intr| env.receive_resync(intr, psn))
}

/// The reap timer ([`hfi1_hal::timers::QpTimer::Reap`]) expired: if a
/// WRITE_RESP still waits for its data (`HFI1_R_TID_RSC_TIMER`), the flow,
/// every TID and region reference come back, the QP goes to the error
/// state and leaves any TID wait. True if it acted; a late or stale
/// expiry does nothing. Kernel: `hfi1_tid_timeout()`.
///
/// # Locking
///
/// The QP's `r_lock` held (`r`, as the kernel's handler takes it); takes
/// the QP's `s_lock`, and `exp_lock` inside it through `tid-flow` and
/// `qp-wait`.
pub fn reap_timeout<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    wmrs: &impl WriteRegions,
) -> bool
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    on_recv_path(rcd, qp, r, |env, intr| env.reap_timeout(intr, wmrs))
}

/// The responder's first leg with TID WRITE entries: takes the QP's
/// `s_lock` and sends up to `budget` packets ([`write_responses_locked`]).
/// Kernel: `hfi1_do_send()` → `make_rc_ack()`.
///
/// # Locking
///
/// Runs with no lock held (`root`); takes the QP's `s_lock`, and
/// `exp_lock` inside it through `tid-flow`.
///
/// # Errors
///
/// As [`write_responses_locked`].
#[allow(clippy::too_many_arguments)]
pub fn send_write_responses<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    src: &impl SourceData,
    wmrs: &impl WriteRegions,
    sink: &mut impl PacketSink,
    budget: u32,
) -> Result<bool, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let mut g = qp.s_lock.lock(root);
    write_responses_locked(rcd, qp, &mut g, src, wmrs, sink, budget)
}

/// Up to `budget` response packets in ack-queue order: READ responses,
/// WRITE_RESPs (allocating first), and a scheduled RNR NAK at its segment
/// boundary. Returns true if it may send more now. Kernel: `make_rc_ack()`,
/// `hfi1_build_tid_rdma_write_resp()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow`.
///
/// # Errors
///
/// A packet that could not be built.
#[allow(clippy::too_many_arguments)]
pub fn write_responses_locked<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    src: &impl SourceData,
    wmrs: &impl WriteRegions,
    sink: &mut impl PacketSink,
    budget: u32,
) -> Result<bool, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    with_write_responder(rcd, qp, g, |env| {
        wresp::respond(env, src, wmrs, sink, budget)
    })
}

/// The second leg's TID ACK for the responder: takes the QP's `s_lock`
/// and builds the owed ACK or NAK ([`tid_ack_locked`]).
/// Kernel: `hfi1_do_tid_send()` → `make_tid_rdma_ack()`.
///
/// # Locking
///
/// Runs with no lock held (`root`); takes the QP's `s_lock`.
///
/// # Errors
///
/// As [`tid_ack_locked`].
pub fn send_tid_ack<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    sink: &mut impl PacketSink,
) -> Result<bool, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    let mut g = qp.s_lock.lock(root);
    tid_ack_locked(rcd, qp, &mut g, sink)
}

/// Builds the owed TID ACK (or TID NAK) into `sink`; false if none was
/// owed. Kernel: `make_tid_rdma_ack()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
///
/// # Errors
///
/// A packet that could not be built.
pub fn tid_ack_locked<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    sink: &mut impl PacketSink,
) -> Result<bool, EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    with_write_responder(rcd, qp, g, |env| env.make_tid_ack(sink))
}

/// Gives back everything the WRITE responder holds (reset, destroy): the
/// flow, every TID, mapping and flow record, every region reference of
/// the ack queue, and any TID wait. Kernel: `hfi1_qp_kern_exp_rcv_clear_all()`
/// (WRITE half), `hfi1_kern_clear_hw_flow()`, `hfi1_tid_rdma_flush_wait()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `tid-flow` and
/// `qp-wait`.
pub fn flush_write_responder<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    wmrs: &impl WriteRegions,
) where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    with_write_responder(rcd, qp, g, |env| env.flush(wmrs));
    qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
}

// --- TID RDMA WRITE requester entry points ---

/// Posts an RDMA WRITE: [`Requester::post_write`].
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
///
/// # Errors
///
/// As [`Requester::post_write`].
pub fn post_write<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    wr: &crate::write::requester::WriteWr<'_>,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
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
pub fn send_engine_with<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    sink: &mut impl PacketSink,
    src: &dyn SourceData,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
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
pub fn requests_locked<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    sink: &mut impl PacketSink,
    src: &dyn SourceData,
) -> Result<(), EngineError>
where
    P: FlowPlatform<Ext = TidQp<P>>,
{
    with_requester(rcd, qp, g, |r, env| r.send_requests_with(env, sink, src))
}

/// Receives a WRITE_RESP: [`Requester::receive_write_resp`].
/// Kernel: `hfi1_rc_rcv_tid_rdma_write_resp()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` when it errors the QP.
pub fn receive_write_resp<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: Psn,
    hdr: &crate::wire::write_resp::Repr,
    payload: &[u8],
) -> crate::write::requester::WriteRespVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
    P::Sched: hfi1_hal::services::TidScheduler<P::Ref>,
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
pub fn receive_tid_ack<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: FlowPsn,
    hdr: &crate::wire::tid_ack::Repr,
) -> crate::write::requester::TidAckVerdict
where
    P: FlowPlatform<Ext = TidQp<P>>,
    P::Sched: hfi1_hal::services::TidScheduler<P::Ref>,
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
pub fn tid_retry_timeout<P>(rcd: &RcvCtxt<P>, qp: &P::Ref, g: &mut SGuard<'_, P>) -> bool
where
    P: FlowPlatform<Ext = TidQp<P>>,
    P::Sched: hfi1_hal::services::TidScheduler<P::Ref>,
{
    with_requester(rcd, qp, g, |r, env| r.tid_retry_timeout(env))
}
