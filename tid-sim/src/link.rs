// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a node hands its link: the packets an engine sent, each with its
//! kind (for the fabric's faults) and its QP (for the fabric's per-flow
//! order).

use hfi1_hal::Kdeth0;
use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_RESYNC, OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST,
    OP_TID_RDMA_WRITE_REQ, OP_TID_RDMA_WRITE_RESP,
};
use tid_harness::doubles::Outbox;
use tid_read_proto::wire::class::{self, Class};
use tid_read_proto::wire::tid_header;

use crate::fabric::{Link, Packet, PacketKind};
use crate::rng::Rng;

/// A packet on the fabric.
#[derive(Debug, Clone)]
pub struct WirePacket {
    /// The bytes, LRH through ICRC.
    pub bytes: Vec<u8>,
    kind: PacketKind,
    flow: u32,
}

impl Packet for WirePacket {
    fn kind(&self) -> PacketKind {
        self.kind
    }

    fn flow(&self) -> u32 {
        self.flow
    }
}

/// Offset of the BTH opcode in a 9B packet (after the LRH).
const OPCODE: usize = 8;
/// Offset of KDETH word 0 (after the LRH and the BTH).
const KDETH0: usize = 20;

/// The kind of a TID WRITE packet from its opcode and, for WRITE_DATA,
/// its KDETH SH bit; `None` for any other opcode.
fn write_kind(bytes: &[u8]) -> Option<PacketKind> {
    Some(match *bytes.get(OPCODE)? {
        OP_TID_RDMA_WRITE_REQ => PacketKind::WriteReq,
        OP_TID_RDMA_WRITE_RESP => PacketKind::WriteResp,
        OP_TID_RDMA_WRITE_DATA_LAST => PacketKind::WriteDataTail,
        OP_TID_RDMA_WRITE_DATA => {
            let w = bytes.get(KDETH0..KDETH0 + 4)?;
            let raw = u32::from_le_bytes(w.try_into().ok()?);
            if Kdeth0::from_raw(raw).sh() {
                PacketKind::WriteData
            } else {
                PacketKind::WriteDataTail
            }
        }
        OP_TID_RDMA_RESYNC => PacketKind::Resync,
        OP_TID_RDMA_ACK => PacketKind::TidAck,
        _ => return None,
    })
}

/// The flow a packet belongs to for the fabric's per-flow order: the
/// verbs QP, which every TID WRITE header carries in its last word, else
/// what [`class::verbs_qp`] reads.
fn flow_of(bytes: &[u8], kind: PacketKind) -> u32 {
    let at = KDETH0 + tid_header::HEADER_LEN - 4;
    let write = matches!(
        kind,
        PacketKind::WriteReq
            | PacketKind::WriteResp
            | PacketKind::WriteData
            | PacketKind::WriteDataTail
            | PacketKind::Resync
            | PacketKind::TidAck
    );
    if write {
        bytes
            .get(at..at + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map(u32::from_be_bytes)
    } else {
        class::verbs_qp(bytes)
    }
    .unwrap_or(u32::MAX)
}

/// The kind of a built packet, for fault injection: its opcode and SH bit
/// (no parse and no CRC; the packet was built here). A plain RDMA READ
/// counts as the TID packet of the same role.
fn kind_of(bytes: &[u8]) -> PacketKind {
    if let Some(k) = write_kind(bytes) {
        return k;
    }
    match class::classify(bytes) {
        Class::ReadReq | Class::PlainReadReq => PacketKind::ReadReq,
        Class::ReadRespMiddle | Class::PlainReadRespMiddle => PacketKind::ReadRespMiddle,
        Class::ReadRespLast | Class::PlainReadRespLast => PacketKind::ReadRespLast,
        Class::Ack => PacketKind::Ack,
        Class::Other => PacketKind::Other,
    }
}

/// Moves what an engine sent onto a link; returns the packets the fault
/// injector dropped (for the capture, and to recycle), each with its flow
/// (the verbs QP it was sent to).
pub fn ship(
    outbox: &mut Outbox,
    link: &mut Link<WirePacket>,
    rng: &mut Rng,
) -> Vec<(Vec<u8>, u32)> {
    let mut dropped = Vec::new();
    for bytes in outbox.drain() {
        let kind = kind_of(&bytes);
        let flow = flow_of(&bytes, kind);
        if let Some(p) = link.send(WirePacket { bytes, kind, flow }, rng) {
            dropped.push((p.bytes, flow));
        }
    }
    dropped
}
