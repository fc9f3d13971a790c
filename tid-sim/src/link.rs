// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a node hands its link: the packets an engine sent, each with its
//! kind (for the fabric's faults) and its QP (for the fabric's per-flow
//! order).

use tid_harness::doubles::Outbox;
use tid_read_proto::wire::class::{self, Class};

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

/// The kind of a built packet, for fault injection: its opcode and SH bit
/// (no parse and no CRC; the packet was built here). A plain RDMA READ
/// counts as the TID packet of the same role.
fn kind_of(bytes: &[u8]) -> PacketKind {
    match class::classify(bytes) {
        Class::ReadReq | Class::PlainReadReq => PacketKind::ReadReq,
        Class::ReadRespMiddle | Class::PlainReadRespMiddle => PacketKind::ReadRespMiddle,
        Class::ReadRespLast | Class::PlainReadRespLast => PacketKind::ReadRespLast,
        Class::Ack => PacketKind::Ack,
        Class::Other => PacketKind::Other,
    }
}

/// Moves what an engine sent onto a link; returns the packets the fault
/// injector dropped (for the capture, and to recycle).
pub fn ship(outbox: &mut Outbox, link: &mut Link<WirePacket>, rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut dropped = Vec::new();
    for bytes in outbox.drain() {
        let kind = kind_of(&bytes);
        let flow = class::verbs_qp(&bytes).unwrap_or(u32::MAX);
        if let Some(p) = link.send(WirePacket { bytes, kind, flow }, rng) {
            dropped.push(p.bytes);
        }
    }
    dropped
}
