// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's receive path on the software chip: the chip's expected
//! receive of one TID READ_RESP (placement, flow checks, header
//! suppression) and, if the chip hands the packet to software, the
//! requester's receive with the chip's error; and the eager receive of
//! everything else (software copies a plain READ response into the
//! READ's buffer through [`DestMemory`]). Every harness that plays a
//! fabric receives READ responses through here.
//!
//! The TID WRITE responder's receive path is the same chip on the other
//! node ([`receive_write_data`]): its expected receive places WRITE_DATA
//! into the responder's scattered region pages and hands software only
//! a segment's last packet, or a packet with an error.

use hfi1_hal::lock_order::{LockToken, RLock};
use hfi1_hal::sim::{ExpectedOutcome, ExpectedPacket, RcvError, SimContext, SimMemory};
use hfi1_hal::{FlowPsn, Kdeth0};
use qp_wait::SGuard;
use tid_flow::{FlowPlatform, RcvCtxt};
use tid_read_proto::qp::{self, TidQp};
use tid_read_proto::rc::{EngineError, LocalMemory};
use tid_read_proto::requester::{KdethError, RespVerdict};
use tid_read_proto::wire::{read_resp, write_data};
use tid_read_proto::write::WriteRegions;
use tid_read_proto::write::responder::DataVerdict;

/// The requester node's memory as the place software copies eager data
/// to (a plain READ response). Kernel: the kernel virtual addresses
/// `rvt_copy_sge()` writes through.
#[derive(Debug)]
pub struct DestMemory<'a>(pub &'a mut SimMemory);

impl LocalMemory for DestMemory<'_> {
    fn write(&mut self, addr: u64, data: &[u8]) -> bool {
        self.0.write(addr, data).is_ok()
    }
}

/// The requester's name for an error the software chip reported.
pub fn kdeth_error(e: RcvError) -> KdethError {
    match e {
        RcvError::Tid => KdethError::Tid,
        RcvError::FlowSeq => KdethError::FlowSeq,
        RcvError::FlowGen => KdethError::FlowGen,
    }
}

/// One READ_RESP as it arrives: BTH destination QP and flow PSN, the
/// header after the BTH, the payload.
#[derive(Debug, Clone, Copy)]
pub struct Arriving<'a> {
    /// BTH destination QP (the requester's `tid_flow_qp`).
    pub dest_qp: u32,
    /// BTH PSN: the flow PSN.
    pub psn: FlowPsn,
    /// The READ_RESP header.
    pub hdr: &'a read_resp::Repr,
    /// The data.
    pub payload: &'a [u8],
}

/// The software chip receives a READ_RESP into `mem`; if it delivers the
/// packet, the requester handles it. Returns the chip's outcome and, for a
/// delivered packet, the requester's verdict.
///
/// The software chip's state lives under `exp_lock`, so it is reached
/// here under the QP's `s_lock` and `exp_lock`; a real chip needs no lock.
///
/// # Locking
///
/// The QP's `s_lock` held (`g`); takes `exp_lock` for the chip and releases
/// it before the requester runs (which takes it again through `tid-flow`).
pub fn receive_read_resp<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    g: &mut SGuard<'_, P>,
    mem: &mut SimMemory,
    pkt: Arriving<'_>,
) -> (ExpectedOutcome, Option<Result<RespVerdict, EngineError>>)
where
    P: FlowPlatform<Chip = SimContext, Ext = TidQp<P>>,
{
    let (o, software) = chip_receive(rcd, g, mem, &pkt);
    let v = software.map(|e| qp::receive_read_resp(rcd, qp, g, pkt.psn, pkt.hdr, e));
    (o, v)
}

/// One WRITE_DATA as it arrives at the responder.
#[derive(Debug, Clone, Copy)]
pub struct ArrivingData<'a> {
    /// BTH destination QP (the responder's `tid_flow_qp`).
    pub dest_qp: u32,
    /// BTH PSN: the flow PSN.
    pub psn: FlowPsn,
    /// The opcode is WRITE_DATA_LAST (the request's last packet).
    pub last_of_request: bool,
    /// The WRITE_DATA header.
    pub hdr: &'a write_data::Repr,
    /// The data.
    pub payload: &'a [u8],
}

/// The responder's software chip receives a WRITE_DATA into `mem` (the
/// region pages its RcvArray entries point at); if it delivers the packet,
/// the WRITE responder handles it, through its KDETH error path if the
/// chip flagged one. Returns the chip's outcome and, for a packet software
/// handled, the responder's verdict.
///
/// The chip's state lives under `exp_lock`, reached here with the QP's
/// `s_lock`; both are dropped before the responder runs, which takes
/// them again (6.1 drops `r_lock` between the two as well).
///
/// # Locking
///
/// The QP's `r_lock` held (`r`); takes the QP's `s_lock` and `exp_lock`
/// for the chip, then the responder's locks.
pub fn receive_write_data<P>(
    rcd: &RcvCtxt<P>,
    qp: &P::Ref,
    r: &mut LockToken<'_, RLock>,
    mem: &mut SimMemory,
    pkt: ArrivingData<'_>,
    wmrs: &impl WriteRegions,
) -> (ExpectedOutcome, Option<DataVerdict>)
where
    P: FlowPlatform<Chip = SimContext, Ext = TidQp<P>>,
{
    let (o, software) = chip_receive(rcd, &mut qp.s_lock.lock(r), mem, &pkt);
    let at = (pkt.psn, pkt.last_of_request);
    let v = software.map(|e| match e {
        None => qp::receive_write_data(rcd, qp, r, at.0, at.1, wmrs),
        Some(e) => qp::receive_write_data_error(rcd, qp, r, at, e, wmrs),
    });
    (o, v)
}

/// A TID packet as the chip places it: a READ_RESP at the requester, a
/// WRITE_DATA at the responder go through the same expected receive.
trait Placed {
    /// What the chip reads of the packet.
    fn expected(&self) -> ExpectedPacket<'_>;
}

impl Placed for Arriving<'_> {
    fn expected(&self) -> ExpectedPacket<'_> {
        packet(self.dest_qp, self.psn, self.hdr.kdeth.kdeth0, self.payload)
    }
}

impl Placed for ArrivingData<'_> {
    fn expected(&self) -> ExpectedPacket<'_> {
        packet(self.dest_qp, self.psn, self.hdr.kdeth.kdeth0, self.payload)
    }
}

/// The chip's view of a TID packet from its BTH and KDETH fields.
fn packet(dest_qp: u32, psn: FlowPsn, kdeth0: Kdeth0, payload: &[u8]) -> ExpectedPacket<'_> {
    ExpectedPacket {
        dest_qp,
        psn,
        kdeth0,
        payload,
    }
}

/// The chip's expected receive of `pkt` into `mem`, its placement (the
/// READ's buffer at the requester, the region pages at the responder),
/// under `exp_lock` (where the software chip's state lives; a real chip
/// takes no lock). Returns the chip's outcome and, if the chip hands the
/// packet to software, the error software receives it with (`None`: no
/// error).
///
/// # Locking
///
/// A QP's `s_lock` held (`g`); takes `exp_lock`.
fn chip_receive<P>(
    rcd: &RcvCtxt<P>,
    g: &mut SGuard<'_, P>,
    mem: &mut SimMemory,
    pkt: &impl Placed,
) -> (ExpectedOutcome, Option<Option<KdethError>>)
where
    P: FlowPlatform<Chip = SimContext, Ext = TidQp<P>>,
{
    let (_, tok) = g.parts();
    let o = rcd
        .exp_lock
        .lock(tok)
        .chip
        .receive_expected(mem, pkt.expected());
    (o, o.delivered.then(|| o.error.map(kdeth_error)))
}
