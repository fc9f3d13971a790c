// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the world's actions report: engine runs, deliveries, completions
//! matched with their READs and WRITEs, and the resources left at the end
//! on both nodes.

use alloc::vec::Vec;

use hfi1_hal::sim::{ExpectedOutcome, SimMemory};
use tid_flow::Sge;
use tid_read_proto::packet::PacketError;
use tid_read_proto::rc::{Completion, EngineError};
use tid_read_proto::requester::{AckVerdict, RespVerdict};
use tid_read_proto::responder::ReqVerdict;
use tid_read_proto::wire::aeth;
use tid_read_proto::write::requester::{TidAckVerdict, WriteRespVerdict};
use tid_read_proto::write::responder::{DataVerdict, ResyncVerdict, WriteReqVerdict};

use crate::doubles::DataCheck;

/// A READ or WRITE posted and not yet completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// Its work-request id.
    pub wr_id: u64,
    /// True for an RDMA WRITE (TID or plain), false for a READ.
    pub write: bool,
    /// Where it reads from (a WRITE: where it writes to).
    pub remote: u64,
    /// Where it reads to (a WRITE: its local source pages).
    pub sges: Vec<Sge>,
    /// Bytes.
    pub length: u32,
}

/// A completion taken from a requester, matched with what was posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// The requester QP.
    pub qp: usize,
    /// The completion.
    pub completion: Completion,
    /// The READ or WRITE it completes; `None` if no such request was
    /// outstanding (an engine bug).
    pub posted: Option<Posted>,
    /// For a successful READ: its destination compared with the source;
    /// for a successful WRITE: the responder's pages it wrote compared
    /// with the source.
    pub data: Option<DataCheck>,
}

/// One requester send-engine run (trigger work or a scheduled send), or
/// a memory-timer wake-up (`Ok`: the engine is scheduled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    /// The requester QP.
    pub qp: usize,
    /// What the engine returned.
    pub result: Result<(), EngineError>,
}

/// What became of a packet delivered to the responder node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtResponder {
    /// It does not parse.
    Unparsable(PacketError),
    /// It parses but is not a READ_REQ.
    Unexpected,
    /// Its verbs QP is none of the responders.
    NoSuchQp,
    /// Responder `qp` handled it (a READ request).
    Received {
        /// The responder QP.
        qp: usize,
        /// What it did.
        verdict: ReqVerdict,
    },
    /// Responder `qp` received a TID WRITE_REQ.
    WriteReq {
        /// The responder QP.
        qp: usize,
        /// What it did.
        verdict: WriteReqVerdict,
    },
    /// A WRITE_DATA went through the responder node's chip for `qp`.
    WriteData {
        /// The responder QP.
        qp: usize,
        /// What the chip did.
        outcome: ExpectedOutcome,
        /// The responder's verdict if software handled it.
        verdict: Option<DataVerdict>,
    },
    /// Responder `qp` received a RESYNC.
    Resync {
        /// The responder QP.
        qp: usize,
        /// What it did.
        verdict: ResyncVerdict,
    },
    /// A packet for responder `qp` that it has no receive path for yet
    /// (a plain RDMA WRITE): dropped.
    NotReceived {
        /// The responder QP.
        qp: usize,
        /// Its BTH opcode.
        opcode: u8,
    },
    /// A WRITE packet on a platform whose world has no `r_lock`
    /// ([`super::Node::new_rlock`]): dropped.
    NoReceiveLock,
}

impl AtResponder {
    /// The responder QP it reached, if any.
    pub fn qp(&self) -> Option<usize> {
        match *self {
            Self::Received { qp, .. }
            | Self::WriteReq { qp, .. }
            | Self::WriteData { qp, .. }
            | Self::Resync { qp, .. }
            | Self::NotReceived { qp, .. } => Some(qp),
            _ => None,
        }
    }
}

/// What became of a packet delivered to the requester node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// It does not parse.
    Unparsable(PacketError),
    /// It parses but is neither a READ_RESP nor an ACK.
    Unexpected,
    /// Its QP is none of the requesters.
    NoSuchQp,
    /// A READ_RESP went through the chip of requester `qp`.
    ReadResp {
        /// The requester QP.
        qp: usize,
        /// What the chip did.
        outcome: ExpectedOutcome,
        /// The requester's verdict if the chip delivered it to software.
        verdict: Option<Result<RespVerdict, EngineError>>,
    },
    /// An ACK or NAK reached requester `qp`.
    Ack {
        /// The requester QP.
        qp: usize,
        /// Its AETH.
        aeth: aeth::Repr,
        /// What the requester did with it.
        verdict: AckVerdict,
    },
    /// A plain RDMA READ response reached requester `qp` (eager receive).
    ReadResponse {
        /// The requester QP.
        qp: usize,
        /// It passed the requester's PSN filter.
        taken: bool,
    },
    /// A WRITE_RESP reached requester `qp`.
    WriteResp {
        /// The requester QP.
        qp: usize,
        /// What the requester did with it.
        verdict: WriteRespVerdict,
    },
    /// A TID ACK (or TID NAK, or RESYNC ACK) reached requester `qp`.
    TidAck {
        /// The requester QP.
        qp: usize,
        /// What the requester did with it.
        verdict: TidAckVerdict,
    },
}

impl Arrival {
    /// The requester QP it reached, if any.
    pub fn qp(&self) -> Option<usize> {
        match *self {
            Self::ReadResp { qp, .. }
            | Self::Ack { qp, .. }
            | Self::ReadResponse { qp, .. }
            | Self::WriteResp { qp, .. }
            | Self::TidAck { qp, .. } => Some(qp),
            _ => None,
        }
    }
}

/// A delivery to the requester node: what became of the packet, and the
/// completions the QP it reached produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtRequester {
    /// What became of the packet.
    pub arrival: Arrival,
    /// Completions it caused, matched and checked.
    pub done: Vec<Done>,
}

/// What is still held on both nodes, and the misuses the doubles counted.
/// All zero after a clean run. The plain names are the requester node's
/// receive context (a READ's TIDs); `resp_*` are the responder node's (a
/// TID WRITE's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Leaks {
    /// RcvArray entries in use.
    pub tid_entries: u64,
    /// TID groups on the used or full lists.
    pub tid_groups: u64,
    /// Hardware flows reserved.
    pub flows: u64,
    /// QPs on the flow or RcvArray wait queue.
    pub queued_qps: u64,
    /// QPs flagged as waiting for TID space.
    pub waiting_qps: u64,
    /// QP references beyond each creator's one.
    pub qp_refs: u64,
    /// QPs whose references were dropped below the creator's one (a
    /// reference put twice).
    pub qp_refs_over_released: u64,
    /// DMA mappings alive.
    pub dma_mappings: u64,
    /// Flow-record allocations alive.
    pub flow_records: u64,
    /// Memory-region references held.
    pub mr_refs: u64,
    /// Memory-region puts of an unknown handle or with no reference left.
    pub mr_misuses: u64,
    /// Chip writes outside the context's RcvArray or to a page no buffer
    /// owns.
    pub chip_faults: u64,
    /// Packets an engine sent that did not fit its buffer.
    pub oversized_packets: u64,
    /// Responder node: RcvArray entries in use.
    pub resp_tid_entries: u64,
    /// Responder node: TID groups on the used or full lists.
    pub resp_tid_groups: u64,
    /// Responder node: hardware flows reserved.
    pub resp_flows: u64,
    /// Responder node: QPs on the flow or RcvArray wait queue.
    pub resp_queued_qps: u64,
    /// Responder node: QPs flagged as waiting for TID space.
    pub resp_waiting_qps: u64,
    /// Responder node: DMA mappings alive.
    pub resp_dma_mappings: u64,
    /// Responder node: flow-record allocations alive beyond the one block
    /// each WRITE ack-queue slot keeps for the QP's life.
    pub resp_flow_records: u64,
    /// Responder node: chip writes outside its RcvArray or to a page no
    /// buffer owns.
    pub resp_chip_faults: u64,
}

impl Leaks {
    /// Every count by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("tid_entries", self.tid_entries),
            ("tid_groups", self.tid_groups),
            ("flows", self.flows),
            ("queued_qps", self.queued_qps),
            ("waiting_qps", self.waiting_qps),
            ("qp_refs", self.qp_refs),
            ("qp_refs_over_released", self.qp_refs_over_released),
            ("dma_mappings", self.dma_mappings),
            ("flow_records", self.flow_records),
            ("mr_refs", self.mr_refs),
            ("mr_misuses", self.mr_misuses),
            ("chip_faults", self.chip_faults),
            ("oversized_packets", self.oversized_packets),
            ("resp_tid_entries", self.resp_tid_entries),
            ("resp_tid_groups", self.resp_tid_groups),
            ("resp_flows", self.resp_flows),
            ("resp_queued_qps", self.resp_queued_qps),
            ("resp_waiting_qps", self.resp_waiting_qps),
            ("resp_dma_mappings", self.resp_dma_mappings),
            ("resp_flow_records", self.resp_flow_records),
            ("resp_chip_faults", self.resp_chip_faults),
        ]
        .into_iter()
    }

    /// The sum of every count.
    pub fn total(&self) -> u64 {
        self.iter().map(|(_, n)| n).sum()
    }
}

/// What [`TwoNodes::teardown`](super::TwoNodes::teardown) left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teardown {
    /// The completions the flush produced.
    pub flushed: Vec<Done>,
    /// What was still held after it.
    pub leaks: Leaks,
}

/// Compares `sges` in `mem` byte by byte with the source bytes from
/// remote address `remote` on: [`crate::doubles::check_data`] for a
/// scatter list whose elements do not all start and end on a page (a
/// plain READ's), where the page check would compare the wrong bytes.
pub fn check_bytes(mem: &SimMemory, sges: &[Sge], remote: u64) -> DataCheck {
    let mut c = DataCheck::default();
    let mut from = remote;
    let mut got = Vec::new();
    let mut want = Vec::new();
    for s in sges {
        let len = s.length as usize;
        got.resize(len, 0);
        want.resize(len, 0);
        crate::doubles::fill_pattern(from, &mut want);
        let bad = match mem.read(s.vaddr, &mut got) {
            Ok(()) => got.iter().zip(&want).filter(|(a, b)| a != b).count() as u64,
            Err(_) => u64::from(s.length),
        };
        if bad > 0 && c.first_bad.is_none() {
            c.first_bad = Some((s.vaddr, from));
        }
        c.mismatched += bad;
        c.verified += u64::from(s.length) - bad;
        from = from.wrapping_add(u64::from(s.length));
    }
    c
}
