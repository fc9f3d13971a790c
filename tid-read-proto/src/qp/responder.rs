// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's entry points, READ and WRITE. The READ responder's
//! receive entries that are given the context (`receive_read_req_in`,
//! `receive_plain_read_in`) run through [`unwinding`], the others take
//! the guard's [`parts`] and no other lock (the send engine cannot error
//! the QP: it reads the state by value); the TID WRITE responder's run
//! the engine through [`with_write_responder`] (the receive path's under
//! [`on_recv_path`], which takes the `s_lock` under the `r_lock` token),
//! so a call that errors the QP leaves its TID wait.

use hfi1_hal::lock_order::{LockToken, RLock, Unlocked};
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::SGuard;
use tid_flow::RcvCtxt;

#[cfg(doc)]
use super::flush;
use super::{TidPlatform, parts, unwinding, with_write_responder};
use crate::rc::{EngineError, MrTable, PacketSink, QpState, SourceData};
use crate::requester::KdethError;
use crate::responder::ReqVerdict;
#[cfg(doc)]
use crate::responder::Responder;
use crate::wire::{read_req, reth, write_req};
use crate::write::WriteRegions;
use crate::write::responder::{
    self as wresp, DataVerdict, RecvPath, ResyncVerdict, WriteReqVerdict,
};

/// Receives a TID READ_REQ: [`Responder::receive_read_req`].
/// Kernel: `hfi1_rc_rcv_tid_rdma_read_req()`.
///
/// Without the context it cannot unwind a TID wait: a request that errors
/// the QP leaves the QP on the context's wait queues until [`flush`]
/// (destroy or reset, where 6.1 unwinds it). The receive path calls
/// [`receive_read_req_in`].
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn receive_read_req<P: TidPlatform>(
    g: &mut SGuard<'_, P>,
    psn: Psn,
    hdr: &read_req::Repr,
    payload: &[u8],
    mrs: &impl MrTable,
) -> ReqVerdict {
    let before = g.ext.state;
    let p = parts::<P>(g);
    let v = p
        .responder
        .receive_read_req(p.conn, p.state, psn, hdr, payload, mrs);
    stop_timers_on_error::<P>(g, before);
    v
}

/// Receives a plain RDMA READ request: [`Responder::receive_plain_read`].
/// Kernel: `hfi1_rc_rcv()`.
///
/// As [`receive_read_req`], a request that errors the QP leaves its TID
/// wait to [`flush`]; the receive path calls [`receive_plain_read_in`].
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
pub fn receive_plain_read<P: TidPlatform>(
    g: &mut SGuard<'_, P>,
    psn: Psn,
    r: &reth::Repr,
    mrs: &impl MrTable,
) -> ReqVerdict {
    let before = g.ext.state;
    let p = parts::<P>(g);
    let v = p.responder.receive_plain_read(p.conn, p.state, psn, r, mrs);
    stop_timers_on_error::<P>(g, before);
    v
}

/// If the QP left the receiving states (from `before`), its requester's
/// retry and RNR timers stop, as `rvt_error_qp()` stops them whichever
/// half raised the error.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`).
fn stop_timers_on_error<P: TidPlatform>(g: &mut SGuard<'_, P>, before: QpState) {
    if before.receives() && !g.ext.state.receives() {
        g.ext.requester.stop_timers();
    }
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
pub fn send_responses<P: TidPlatform>(
    g: &mut SGuard<'_, P>,
    src: &impl SourceData,
    mrs: &impl MrTable,
    sink: &mut impl PacketSink,
    budget: u32,
) -> Result<bool, EngineError> {
    let p = parts::<P>(g);
    p.responder
        .send_responses(p.conn, *p.state, src, mrs, sink, budget)
}

/// Receives a TID READ_REQ as [`receive_read_req`] does, for the QP `qp`
/// of the receive context `rcd`: a request that moves the QP to the error
/// state (`rvt_rc_error()`) also takes it off the context's TID wait
/// queues, as every other entry that can error the QP does.
/// Kernel: `hfi1_rc_rcv_tid_rdma_read_req()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `qp-wait` if
/// the request errors the QP.
pub fn receive_read_req_in<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: Psn,
    hdr: &read_req::Repr,
    payload: &[u8],
    mrs: &impl MrTable,
) -> ReqVerdict {
    unwinding(rcd, qp, g, |p| {
        p.responder
            .receive_read_req(p.conn, p.state, psn, hdr, payload, mrs)
    })
}

/// Receives a plain RDMA READ request as [`receive_plain_read`] does, for
/// the QP `qp` of the receive context `rcd`: a request that moves the QP
/// to the error state also takes it off the context's TID wait queues.
/// Kernel: `hfi1_rc_rcv()`.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` through `qp-wait` if
/// the request errors the QP.
pub fn receive_plain_read_in<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    psn: Psn,
    r: &reth::Repr,
    mrs: &impl MrTable,
) -> ReqVerdict {
    unwinding(rcd, qp, g, |p| {
        p.responder.receive_plain_read(p.conn, p.state, psn, r, mrs)
    })
}

// ---- The TID WRITE responder ----

/// Runs `f` on the WRITE responder with the receive path's proof: takes
/// the QP's `s_lock` under the `r_lock` token `r` ([`with_write_responder`]).
///
/// # Locking
///
/// The QP's `r_lock` held (`r`); takes the QP's `s_lock`, what `f` takes,
/// then `exp_lock` through `qp-wait`.
fn on_recv_path<P: TidPlatform, T>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    f: impl FnOnce(&mut wresp::Env<'_, '_, P>, &RecvPath) -> T,
) -> T {
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
pub fn receive_write_req<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    psn: Psn,
    hdr: &write_req::Repr,
    wmrs: &impl WriteRegions,
) -> WriteReqVerdict {
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
pub fn receive_write_data<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    psn: FlowPsn,
    last_of_request: bool,
    wmrs: &impl WriteRegions,
) -> DataVerdict {
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
pub fn receive_write_data_error<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    (psn, last_of_request): (FlowPsn, bool),
    error: KdethError,
    wmrs: &impl WriteRegions,
) -> DataVerdict {
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
pub fn receive_resync<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    psn: FlowPsn,
) -> ResyncVerdict {
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
pub fn reap_timeout<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    wmrs: &impl WriteRegions,
) -> bool {
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
pub fn send_write_responses<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    src: &impl SourceData,
    wmrs: &impl WriteRegions,
    sink: &mut impl PacketSink,
    budget: u32,
) -> Result<bool, EngineError> {
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
pub fn write_responses_locked<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    src: &impl SourceData,
    wmrs: &impl WriteRegions,
    sink: &mut impl PacketSink,
    budget: u32,
) -> Result<bool, EngineError> {
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
pub fn send_tid_ack<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    root: &mut LockToken<'_, Unlocked>,
    sink: &mut impl PacketSink,
) -> Result<bool, EngineError> {
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
pub fn tid_ack_locked<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    sink: &mut impl PacketSink,
) -> Result<bool, EngineError> {
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
pub fn flush_write_responder<P: TidPlatform>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    wmrs: &impl WriteRegions,
) {
    with_write_responder(rcd, qp, g, |env| env.flush(wmrs));
    qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
}
