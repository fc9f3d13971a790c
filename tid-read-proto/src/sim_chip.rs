// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's receive path on the software chip (feature
//! `sim-chip`, no `std`: the kernel self-test uses it too): the chip's
//! expected receive of one READ_RESP, then, if the chip delivers it to
//! software, [`requester::rcv_read_resp`] with the chip's error and its
//! flow register read after the packet. Every harness that plays a
//! fabric (tid-sim, the fuzz targets, the in-kernel READ test, the engine
//! tests) receives through here.

use hfi1_hal::FlowPsn;
use hfi1_hal::platform::FlowTable;
use hfi1_hal::sim::{ExpectedOutcome, ExpectedPacket, RcvError, SimContext, SimMemory};
use qp_wait::SGuard;
use tid_flow::{FlowPlatform, RcvCtxt};

use crate::rc::{EngineError, TidQp};
use crate::requester::{self, ChipFlow, KdethError, RespVerdict};
use crate::wire::read_resp;

impl From<RcvError> for KdethError {
    fn from(e: RcvError) -> Self {
        match e {
            RcvError::Tid => Self::Tid,
            RcvError::FlowSeq => Self::FlowSeq,
            RcvError::FlowGen => Self::FlowGen,
        }
    }
}

/// The software chip receives a READ_RESP addressed to `dest_qp` with
/// flow PSN `psn` (placement, flow checks, header suppression); if it
/// delivers the packet, the requester handles it. Returns the chip's
/// outcome and, for a delivered packet, the requester's verdict.
///
/// The software chip's state lives under `exp_lock`, so it is reached
/// here under the QP's `s_lock` and `exp_lock`; a real chip needs no
/// lock.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` for the chip, then
/// releases it before the requester runs (which takes it again through
/// `tid-flow`).
#[allow(clippy::too_many_arguments)]
pub fn receive_read_resp<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    mem: &mut SimMemory,
    dest_qp: u32,
    psn: FlowPsn,
    hdr: &read_resp::Repr,
    payload: &[u8],
) -> (ExpectedOutcome, Option<Result<RespVerdict, EngineError>>)
where
    P: FlowPlatform<Chip = SimContext, Ext = TidQp<P>>,
{
    let (o, chip) = {
        let (_, tok) = g.parts();
        let mut e = rcd.exp_lock.lock(tok);
        let o = e.chip.receive_expected(
            mem,
            ExpectedPacket {
                dest_qp,
                psn,
                kdeth0: hdr.kdeth.kdeth0,
                payload,
            },
        );
        let next = e.chip.read_flow(o.flow).next_psn();
        (o, ChipFlow { flow: o.flow, next })
    };
    if !o.delivered {
        return (o, None);
    }
    let v = requester::rcv_read_resp(
        rcd,
        qp,
        g,
        psn,
        hdr,
        o.error.map(KdethError::from),
        Some(chip),
    );
    (o, Some(v))
}
