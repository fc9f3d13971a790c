// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The READ responder's entry points: the engine on the parts of the
//! guard ([`parts`]).

use hfi1_hal::Psn;
use qp_wait::SGuard;

use super::{TidPlatform, parts};
use crate::rc::{EngineError, MrTable, PacketSink, SourceData};
use crate::responder::ReqVerdict;
#[cfg(doc)]
use crate::responder::Responder;
use crate::wire::{read_req, reth};

/// Receives a TID READ_REQ: [`Responder::receive_read_req`].
/// Kernel: `hfi1_rc_rcv_tid_rdma_read_req()`.
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
    let p = parts::<P>(g);
    p.responder
        .receive_read_req(p.conn, p.state, psn, hdr, payload, mrs)
}

/// Receives a plain RDMA READ request: [`Responder::receive_plain_read`].
/// Kernel: `hfi1_rc_rcv()`.
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
    let p = parts::<P>(g);
    p.responder.receive_plain_read(p.conn, p.state, psn, r, mrs)
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
