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
//! behind it until then), and then, as `rvt_error_qp()` does, scheduling
//! the send engine if the requester still has work posted (a responder's
//! `rvt_rc_error()` leaves it there; the send engine completes it
//! flushed).
//!
//! The entries live in two files by role, each covering READ and WRITE:
//! `requester.rs` runs every requester entry through `with_requester`,
//! `responder.rs` the TID WRITE responder's through
//! `with_write_responder` (entered from the receive path, the reap timer
//! or the first and second legs); both are `unwinding`, so any entry that
//! moves the QP to the error state leaves its TID wait. So do the READ
//! responder's receive entries given the context ([`receive_read_req_in`],
//! [`receive_plain_read_in`]); [`receive_read_req`], [`receive_plain_read`]
//! and [`send_responses`] lend the guard's [`parts`] and take no other
//! lock (the first two leave a TID wait of a QP they error to [`flush`]).
//! Every entry is re-exported here: `qp::post_read`,
//! `qp::receive_write_req` and so on.
//!
//! # Locking
//!
//! | function | needs | takes |
//! |---|---|---|
//! | [`send_engine`], [`send_engine_with`] | nothing (root token) | the QP's `s_lock`, then `exp_lock` |
//! | [`post_read`], [`post_write`] | the QP's `s_lock` (guard) | `exp_lock` if the post errors the QP |
//! | [`requests_locked`] | the QP's `s_lock` (guard) | `exp_lock` |
//! | [`receive_read_resp`], [`receive_ack`], [`receive_read_response`], [`timeout`], [`rnr_timeout`], [`flush`], [`receive_write_resp`], [`receive_tid_ack`], [`tid_retry_timeout`] | the QP's `s_lock` (guard) | `exp_lock` |
//! | [`receive_read_req`], [`receive_plain_read`], [`send_responses`] | the QP's `s_lock` (guard) | nothing |
//! | [`receive_read_req_in`], [`receive_plain_read_in`] | the QP's `s_lock` (guard) | `exp_lock` if the request errors the QP |
//! | [`receive_write_req`], [`receive_write_data`], [`receive_write_data_error`], [`receive_resync`], [`reap_timeout`] | the QP's `r_lock` (its token) | the QP's `s_lock`, then `exp_lock` |
//! | [`send_write_responses`], [`send_tid_ack`] | nothing (root token) | the QP's `s_lock` (then `exp_lock` for the first) |
//! | [`write_responses_locked`], [`tid_ack_locked`], [`flush_write_responder`] | the QP's `s_lock` (guard) | `exp_lock` |

use hfi1_hal::Psn;
use hfi1_hal::services::Scheduler;
use qp_wait::{SGuard, SendState};
use tid_flow::{FlowPlatform, QpFlowState, QpLocked, RcvCtxt};

use crate::rc::{Connection, QpState};
use crate::requester::{Env, Requester};
use crate::responder::Responder;
use crate::write::responder::{self as wresp, WriteResponder};

mod requester;
mod responder;

pub use requester::{
    flush, post_read, post_write, receive_ack, receive_read_resp, receive_read_response,
    receive_tid_ack, receive_write_resp, requests_locked, rnr_timeout, send_engine,
    send_engine_with, tid_retry_timeout, timeout,
};
pub use responder::{
    flush_write_responder, reap_timeout, receive_plain_read, receive_plain_read_in,
    receive_read_req, receive_read_req_in, receive_resync, receive_write_data,
    receive_write_data_error, receive_write_req, send_responses, send_tid_ack,
    send_write_responses, tid_ack_locked, write_responses_locked,
};

/// A platform whose QPs keep their protocol state in [`TidQp`] (its
/// `WaitPlatform::Ext`): the bound of every entry point here. Any
/// `FlowPlatform<Ext = TidQp<P>>` is one.
pub trait TidPlatform: FlowPlatform<Ext = TidQp<Self>> {}

impl<P: FlowPlatform<Ext = TidQp<P>>> TidPlatform for P {}

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
pub fn parts<'a, 't, P: TidPlatform>(g: &'a mut SGuard<'t, P>) -> Parts<'a, 't, P> {
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
/// state, the QP then leaves its TID wait, its requester's retry and RNR
/// timers stop, and its send engine is
/// scheduled if READs or WRITEs it posted are still outstanding (the send
/// engine of a QP in the error state completes them flushed).
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); what `f` takes, then `exp_lock` through
/// `qp-wait`.
fn unwinding<P: TidPlatform, T>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    f: impl FnOnce(Parts<'_, '_, P>) -> T,
) -> T {
    let before = g.ext.state;
    let out = f(parts(g));
    if before.receives() && !g.ext.state.receives() {
        qp_wait::flush_wait::<P, _>(qp, g, &rcd.exp_lock, &rcd.sched);
        // As `rvt_error_qp()`: the requester's timers stop whichever half
        // raised the error, so no expiry reaches a QP in the error state.
        g.ext.requester.stop_timers();
        // As `rvt_error_qp()`: the send engine drains the send queue. An
        // error the requester raised has drained it already; one the
        // responder raised (`rvt_rc_error()`) leaves the READs posted.
        if g.ext.requester.outstanding() > 0 {
            rcd.sched.schedule_send(qp);
        }
    }
    out
}

/// Runs `f` on the requester with its [`Env`] ([`unwinding`]).
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); what `f` takes, then `exp_lock` through
/// `qp-wait`.
pub(crate) fn with_requester<P: TidPlatform, T>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    f: impl FnOnce(&mut Requester<P>, &mut Env<'_, '_, P>) -> T,
) -> T {
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

/// Runs `f` on the WRITE responder's view of a locked QP ([`unwinding`]).
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); what `f` takes, then `exp_lock` through
/// `qp-wait`.
pub(crate) fn with_write_responder<P: TidPlatform, T>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    f: impl FnOnce(&mut wresp::Env<'_, '_, P>) -> T,
) -> T {
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
