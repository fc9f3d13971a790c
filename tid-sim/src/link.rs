// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What a node hands its link: the packets an engine sent, each with its
//! kind (for the fabric's faults), also written to the capture file.

use std::io::Write;

use tid_harness::doubles::Outbox;
use tid_read_proto::wire::class::{self, Class};

use crate::fabric::{Link, Packet, PacketKind};
use crate::pcap::PcapWriter;
use crate::report::Report;
use crate::rng::Rng;

/// A packet on the fabric.
#[derive(Debug, Clone)]
pub struct WirePacket {
    /// The bytes, LRH through ICRC.
    pub bytes: Vec<u8>,
    kind: PacketKind,
}

impl Packet for WirePacket {
    fn kind(&self) -> PacketKind {
        self.kind
    }
}

/// The kind of a built packet, for fault injection: its opcode and SH bit
/// (no parse and no CRC; the packet was built here).
fn kind_of(bytes: &[u8]) -> PacketKind {
    match class::classify(bytes) {
        Class::ReadReq => PacketKind::ReadReq,
        Class::ReadRespMiddle => PacketKind::ReadRespMiddle,
        Class::ReadRespLast => PacketKind::ReadRespLast,
        Class::Ack => PacketKind::Ack,
        Class::Other => PacketKind::Other,
    }
}

/// Where a shipped packet is also written: the capture file, if any.
pub struct Capture<'c, 'a, W: Write> {
    /// The capture file.
    pub pcap: &'c mut Option<&'a mut PcapWriter<W>>,
    /// Room for one ERF record.
    pub erf_buf: &'c mut [u8],
    /// Simulated time of the send.
    pub sim_ns: f64,
    /// The ERF interface: 0 from the requester, 1 from the responder.
    pub interface: u8,
}

/// Moves what an engine sent onto a link (and into the capture).
pub fn ship<W: Write>(
    outbox: &mut Outbox,
    link: &mut Link<WirePacket>,
    cap: Capture<'_, '_, W>,
    rng: &mut Rng,
    rep: &mut Report,
) {
    for bytes in outbox.drain() {
        if let Some(w) = cap.pcap.as_deref_mut() {
            let ts = tid_read_proto::wire::erf::timestamp_from_nanos(cap.sim_ns as u64);
            match tid_read_proto::wire::erf::encode(ts, cap.interface, &bytes, cap.erf_buf) {
                Ok(n) => {
                    if w.record(cap.sim_ns as u64, &cap.erf_buf[..n]).is_err() {
                        rep.engine_errors += 1;
                    }
                }
                Err(_) => rep.engine_errors += 1,
            }
        }
        let kind = kind_of(&bytes);
        link.send(WirePacket { bytes, kind }, rng);
    }
}
