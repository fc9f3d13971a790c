// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! [`TwoNodes`]: a requester node (one receive context on a software chip,
//! its QPs, the destination memory the chip places into) and a responder
//! node (the peer QPs and their memory regions), with the five actions a
//! fabric schedules between them and the resource accounting at the end.
//!
//! The world holds no fabric: what the engines send waits in
//! [`TwoNodes::to_responders`] and [`TwoNodes::to_requesters`], and the
//! caller carries it over its own links (in order, shuffled, dropped,
//! copied) into [`TwoNodes::deliver_to_responder`] and
//! [`TwoNodes::deliver_to_requester`].

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use hfi1_hal::consts::TID_RDMA_JKEY;
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::sim::{ExpectedOutcome, SimContext, SimDma, SimMemory, SimRef, SimScheduler};
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::{Qp, QueueKind, WaitPlatform};
use tid_alloc::groups::GroupList;
use tid_flow::{FlowPlatform, RcvCtxt, Sge};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, PacketError, Parsed, Path};
use tid_read_proto::rc::{Completion, Connection, EngineError, MAX_RD_ATOMIC, TidQp, WcStatus};
use tid_read_proto::requester::{self, ReadWr, ReqStats, RespVerdict};
use tid_read_proto::responder::{self, ReqVerdict, RespStats};
use tid_read_proto::wire::aeth;

use crate::chip::{self, Arriving};
use crate::doubles::{self, DataCheck, Outbox, PageAllocator, Region, Regions};

/// The requester node's receive context number.
pub const REQUESTER_CTXT: u8 = 1;
/// The responder node's context number (in its OPFN parameters only: a
/// READ responder receives no TID data).
pub const RESPONDER_CTXT: u8 = 2;
/// The requester node's LID.
pub const REQUESTER_LID: u16 = 1;
/// The responder node's LID.
pub const RESPONDER_LID: u16 = 2;
/// Verbs QP number of requester QP 0 (QP `i` is this plus `i`).
pub const REQUESTER_QPN: u32 = 0x100;
/// Verbs QP number of responder QP 0.
pub const RESPONDER_QPN: u32 = 0x400;
/// R_Key of QP `i`'s memory region: this plus `i`.
pub const RKEY_BASE: u32 = 0x5000;

/// First remote address of QP `i`'s memory region.
pub fn region_base(i: usize) -> u64 {
    (i as u64).wrapping_add(1) << 40
}

/// What a platform gives the world: the software chip, its DMA map,
/// counted QP references and the FIFO scheduler (the world reads them all),
/// QPs that keep [`TidQp`], and a way to build them and a context.
pub trait Node: FlowPlatform<Chip = SimContext, Dma = SimDma>
    + WaitPlatform<Ext = TidQp<Self>, Ref = SimRef<Qp<Self>>, Sched = SimScheduler<SimRef<Qp<Self>>>>
{
    /// A connected QP whose lock is ready to use (the returned reference is
    /// the creator's), or `None` without memory.
    fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> Option<Self::Ref>;

    /// A receive context on its own software chip with `ngroups` TID
    /// groups, room for `qp_slots` QPs and flow generations from `seed`
    /// (or the platform's own randomness), or `None`.
    fn new_ctxt(ctxt: u32, ngroups: usize, qp_slots: u32, seed: u64) -> Option<Box<RcvCtxt<Self>>>;

    /// Allocations from `mem` (flow records) not yet freed.
    fn live_allocations(mem: &Self::Mem) -> usize;
}

/// How the two nodes are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// QP pairs.
    pub qps: usize,
    /// TID groups of the requester's receive context.
    pub groups: usize,
    /// Path MTU.
    pub pmtu: u32,
    /// The responder's segment size (its OPFN `max_len`).
    pub seg_len: u32,
    /// Segments of one READ in flight (the responder's OPFN `max_read`).
    pub max_read: u8,
    /// Reads the requester keeps outstanding at most.
    pub max_rd_atomic: u32,
    /// First IB PSN of every connection, both ways.
    pub first_psn: Psn,
    /// Seed of the requester context's flow generations.
    pub seed: u64,
    /// Bytes of each responder QP's memory region.
    pub region_len: u64,
    /// First page frame of the destination pages.
    pub first_pfn: u64,
}

impl Default for Setup {
    fn default() -> Self {
        let p = TidParams::local(RESPONDER_CTXT, TID_RDMA_JKEY, 14, false);
        Self {
            qps: 1,
            groups: 16,
            pmtu: 4096,
            seg_len: p.max_len,
            max_read: p.max_read,
            max_rd_atomic: MAX_RD_ATOMIC,
            first_psn: Psn::new(0x10),
            seed: 1,
            region_len: 1 << 32,
            first_pfn: 0x1000,
        }
    }
}

impl Setup {
    /// The connections of QP pair `i`: the requester's and the responder's.
    pub fn connections(&self, i: usize) -> (Connection, Connection) {
        let req_params = TidParams::local(REQUESTER_CTXT, TID_RDMA_JKEY, 14, false);
        let resp_params = TidParams {
            max_len: self.seg_len,
            max_read: self.max_read,
            ..TidParams::local(RESPONDER_CTXT, TID_RDMA_JKEY, 14, false)
        };
        let n = u32::try_from(i).unwrap_or(u32::MAX);
        let (rq, sq) = (REQUESTER_QPN.wrapping_add(n), RESPONDER_QPN.wrapping_add(n));
        let requester = Connection {
            verbs_qpn: rq,
            remote_verbs_qpn: sq,
            local: req_params,
            remote: resp_params,
            pmtu: self.pmtu,
            path: Path {
                dlid: RESPONDER_LID,
                slid: REQUESTER_LID,
            },
            max_rd_atomic: self.max_rd_atomic,
            remote_read: false,
        };
        let responder = Connection {
            verbs_qpn: sq,
            remote_verbs_qpn: rq,
            local: resp_params,
            remote: req_params,
            pmtu: self.pmtu,
            path: Path {
                dlid: REQUESTER_LID,
                slid: RESPONDER_LID,
            },
            max_rd_atomic: self.max_rd_atomic,
            remote_read: true,
        };
        (requester, responder)
    }
}

/// A READ posted and not yet completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// Its work-request id.
    pub wr_id: u64,
    /// Where it reads from.
    pub remote: u64,
    /// Where it reads to.
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
    /// The READ it completes; `None` if no such READ was outstanding (an
    /// engine bug).
    pub posted: Option<Posted>,
    /// For a successful READ: its destination compared with the source.
    pub data: Option<DataCheck>,
}

/// One requester send-engine run (trigger work or a scheduled send).
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
    /// Responder `qp` handled it.
    Received {
        /// The responder QP.
        qp: usize,
        /// What it did.
        verdict: ReqVerdict,
    },
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
    },
}

impl Arrival {
    /// The requester QP it reached, if any.
    pub fn qp(&self) -> Option<usize> {
        match *self {
            Self::ReadResp { qp, .. } | Self::Ack { qp, .. } => Some(qp),
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

/// What is still held, and the misuses the doubles counted. All zero after
/// a clean run.
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
            ("dma_mappings", self.dma_mappings),
            ("flow_records", self.flow_records),
            ("mr_refs", self.mr_refs),
            ("mr_misuses", self.mr_misuses),
            ("chip_faults", self.chip_faults),
            ("oversized_packets", self.oversized_packets),
        ]
        .into_iter()
    }

    /// The sum of every count.
    pub fn total(&self) -> u64 {
        self.iter().map(|(_, n)| n).sum()
    }
}

/// What [`TwoNodes::teardown`] left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teardown {
    /// The completions the flush produced.
    pub flushed: Vec<Done>,
    /// What was still held after it.
    pub leaks: Leaks,
}

/// The two nodes.
///
/// # Locking
///
/// Every action runs with no lock held (the `root` token) and takes one
/// QP's `s_lock` at a time, and the requester context's `exp_lock` inside
/// it.
pub struct TwoNodes<P: Node> {
    setup: Setup,
    /// The requester node's receive context.
    pub rcd: Box<RcvCtxt<P>>,
    /// The requester QPs.
    pub requesters: Vec<P::Ref>,
    /// Their peers on the responder node.
    pub responders: Vec<P::Ref>,
    /// The responder node's memory regions, one per QP.
    pub regions: Regions,
    /// The requester node's memory: every destination page.
    pub mem: SimMemory,
    /// Where destination pages come from.
    pub pages: PageAllocator,
    /// Packets the requesters sent, for the fabric to carry.
    pub to_responders: Outbox,
    /// Packets the responders sent.
    pub to_requesters: Outbox,
    posted: Vec<BTreeMap<u64, Posted>>,
    next_remote: Vec<u64>,
    next_wr: u64,
    ready: Vec<bool>,
    ready_queue: VecDeque<usize>,
}

impl<P: Node> core::fmt::Debug for TwoNodes<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TwoNodes")
            .field("setup", &self.setup)
            .field("outstanding", &self.outstanding())
            .finish_non_exhaustive()
    }
}

impl<P: Node> TwoNodes<P> {
    /// Builds both nodes, or `None` without memory.
    pub fn new(setup: Setup) -> Option<Self> {
        let slots = u32::try_from(setup.qps).ok()?;
        let rcd = P::new_ctxt(u32::from(REQUESTER_CTXT), setup.groups, slots, setup.seed)?;
        let mut requesters = Vec::new();
        let mut responders = Vec::new();
        let mut regions = Regions::new();
        for i in 0..setup.qps {
            let (rc, sc) = setup.connections(i);
            let (slot, cpu) = (u32::try_from(i).ok()?, u32::try_from(i % 4).ok()?);
            requesters.push(P::new_qp(rc.verbs_qpn, slot, cpu, rc, setup.first_psn)?);
            responders.push(P::new_qp(sc.verbs_qpn, slot, cpu, sc, setup.first_psn)?);
            regions.add(Region {
                base: region_base(i),
                len: setup.region_len,
                rkey: RKEY_BASE.wrapping_add(slot),
            });
        }
        Some(Self {
            setup,
            rcd,
            requesters,
            responders,
            regions,
            mem: SimMemory::new(),
            pages: PageAllocator::new(setup.first_pfn),
            to_responders: Outbox::new(),
            to_requesters: Outbox::new(),
            posted: (0..setup.qps).map(|_| BTreeMap::new()).collect(),
            next_remote: (0..setup.qps).map(region_base).collect(),
            next_wr: 1,
            ready: (0..setup.qps).map(|_| false).collect(),
            ready_queue: VecDeque::new(),
        })
    }

    /// How the nodes were built.
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    /// READs posted and not yet completed, over every QP.
    pub fn outstanding(&self) -> usize {
        self.posted.iter().map(BTreeMap::len).sum()
    }

    /// READs of requester `i` posted and not yet completed.
    pub fn posted(&self, i: usize) -> impl Iterator<Item = &Posted> {
        self.posted
            .iter()
            .skip(i)
            .take(1)
            .flat_map(BTreeMap::values)
    }

    /// True if requester `i`'s send queue takes another READ.
    pub fn can_post(&self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        self.requesters
            .get(i)
            .is_some_and(|qp| qp.s_lock.lock(root).ext.req.can_post())
    }

    /// Posts a READ on requester `i` into `sges` (their pages join the
    /// destination memory) from the next bytes of its region. Returns the
    /// work-request id.
    ///
    /// # Errors
    ///
    /// What the requester refused the READ with (its pages leave the
    /// memory again).
    pub fn post(
        &mut self,
        i: usize,
        sges: Vec<Sge>,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Result<u64, EngineError> {
        let (Some(qp), Some(next)) = (self.requesters.get(i), self.next_remote.get_mut(i)) else {
            return Err(EngineError::QueueFull);
        };
        doubles::map(&mut self.mem, &sges);
        let wr_id = self.next_wr;
        let remote = *next;
        let rkey = RKEY_BASE.wrapping_add(u32::try_from(i).unwrap_or(u32::MAX));
        let r = {
            let mut g = qp.s_lock.lock(root);
            let wr = ReadWr {
                wr_id,
                remote_addr: remote,
                rkey,
                sges: &sges,
            };
            requester::post_read(&self.rcd, qp, &mut g, &wr)
        };
        if let Err(e) = r {
            doubles::unmap(&mut self.mem, &sges);
            return Err(e);
        }
        let length = sges.iter().map(|s| s.length).sum();
        *next = next.wrapping_add(u64::from(length));
        self.next_wr += 1;
        if let Some(p) = self.posted.get_mut(i) {
            p.insert(
                wr_id,
                Posted {
                    wr_id,
                    remote,
                    sges,
                    length,
                },
            );
        }
        Ok(wr_id)
    }

    /// Trigger work items (wake-ups) waiting.
    pub fn pending_work(&self) -> usize {
        self.rcd.sched.pending_work()
    }

    /// Requester send-engine runs scheduled.
    pub fn pending_sends(&self) -> usize {
        self.rcd.sched.pending_sends()
    }

    /// The requester index of a requester QP reference.
    fn requester_index(qp: &P::Ref) -> usize {
        qp.qpn().wrapping_sub(REQUESTER_QPN) as usize
    }

    /// Action 1a: runs the oldest trigger work item (a wake-up: the QP's
    /// send engine if it still waits). `None` if none is queued.
    pub fn run_trigger_work(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let (_, qp) = self.rcd.sched.pop_work()?;
        let i = Self::requester_index(&qp);
        let (rcd, out) = (&self.rcd, &mut self.to_responders);
        let mut result = Ok(());
        qp_wait::trigger_resume::<P>(qp, root, |qp, root| {
            result = requester::send_engine(rcd, qp, root, out);
        });
        Some(Ran { qp: i, result })
    }

    /// Action 1b: runs the oldest scheduled requester send engine. `None`
    /// if none is scheduled.
    pub fn run_requester_send(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let qp = self.rcd.sched.pop_send()?;
        let result = requester::send_engine(&self.rcd, &qp, root, &mut self.to_responders);
        Some(Ran {
            qp: Self::requester_index(&qp),
            result,
        })
    }

    /// Action 1: every trigger work item, then every scheduled send engine.
    pub fn run_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> Vec<Ran> {
        let mut ran = Vec::new();
        while let Some(r) = self.run_trigger_work(root) {
            ran.push(r);
        }
        while let Some(r) = self.run_requester_send(root) {
            ran.push(r);
        }
        ran
    }

    /// Marks responder `i` as having something to send.
    fn mark_ready(&mut self, i: usize) {
        if let Some(r) = self.ready.get_mut(i) {
            if !*r {
                *r = true;
                self.ready_queue.push_back(i);
            }
        }
    }

    /// Responders with something to send.
    pub fn responders_ready(&self) -> usize {
        self.ready_queue.len()
    }

    /// Action 2: the responder node receives `bytes`.
    pub fn deliver_to_responder(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> AtResponder {
        let (bth, hdr, payload) = match packet::parse(bytes) {
            Ok((_, Parsed::ReadReq { bth, hdr, payload })) => (bth, hdr, payload),
            Ok(_) => return AtResponder::Unexpected,
            Err(e) => return AtResponder::Unparsable(e),
        };
        let i = hdr.verbs_qp.wrapping_sub(RESPONDER_QPN) as usize;
        let Some(qp) = self.responders.get(i) else {
            return AtResponder::NoSuchQp;
        };
        let (verdict, work) = {
            let mut g = qp.s_lock.lock(root);
            let v = responder::rcv_read_req::<P>(&mut g, bth.psn, &hdr, payload, &self.regions);
            (v, g.ext.resp.has_work())
        };
        if work {
            self.mark_ready(i);
        }
        AtResponder::Received { qp: i, verdict }
    }

    /// Action 3: responder `i` sends up to `budget` packets, if it has
    /// something to send (`None` if not). Returns whether more wait.
    pub fn run_responder(
        &mut self,
        i: usize,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Option<Result<bool, EngineError>> {
        if !self.ready.get(i).copied().unwrap_or(false) {
            return None;
        }
        let r = self.send_responses(i, budget, root);
        if !matches!(r, Ok(true)) {
            if let Some(f) = self.ready.get_mut(i) {
                *f = false;
            }
            self.ready_queue.retain(|&k| k != i);
        }
        Some(r)
    }

    /// Action 3, in turn: the responder that became ready first sends up
    /// to `budget` packets, and goes to the back of the line if more wait.
    pub fn run_next_responder(
        &mut self,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Option<(usize, Result<bool, EngineError>)> {
        let i = self.ready_queue.pop_front()?;
        if let Some(f) = self.ready.get_mut(i) {
            *f = false;
        }
        let r = self.send_responses(i, budget, root);
        if matches!(r, Ok(true)) {
            self.mark_ready(i);
        }
        Some((i, r))
    }

    /// Action 3, for all: every responder with something to send sends up
    /// to `budget` packets, in QP order.
    pub fn run_responders(
        &mut self,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Vec<(usize, Result<bool, EngineError>)> {
        (0..self.responders.len())
            .filter_map(|i| self.run_responder(i, budget, root).map(|r| (i, r)))
            .collect()
    }

    fn send_responses(
        &mut self,
        i: usize,
        budget: u32,
        root: &mut LockToken<'_, Unlocked>,
    ) -> Result<bool, EngineError> {
        let Some(qp) = self.responders.get(i) else {
            return Ok(false);
        };
        let mut g = qp.s_lock.lock(root);
        responder::make_resp::<P>(
            &mut g,
            &self.regions,
            &self.regions,
            &mut self.to_requesters,
            budget,
        )
    }

    /// Action 4: the requester node receives `bytes`: a READ_RESP through
    /// its chip, an ACK or NAK straight to the QP; then that QP's
    /// completions are taken, matched and checked.
    pub fn deliver_to_requester(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> AtRequester {
        let arrival = self.arrive(bytes, root);
        let done = match arrival.qp() {
            Some(i) => self.poll(i, root),
            None => Vec::new(),
        };
        AtRequester { arrival, done }
    }

    fn arrive(&mut self, bytes: &[u8], root: &mut LockToken<'_, Unlocked>) -> Arrival {
        let p = match packet::parse(bytes) {
            Ok((_, p)) => p,
            Err(e) => return Arrival::Unparsable(e),
        };
        let i = match p {
            Parsed::ReadResp { hdr, .. } => hdr.verbs_qp.wrapping_sub(REQUESTER_QPN),
            Parsed::Ack { bth, .. } => bth.dest_qp.wrapping_sub(REQUESTER_QPN),
            Parsed::ReadReq { .. } => return Arrival::Unexpected,
        } as usize;
        let Some(qp) = self.requesters.get(i) else {
            return Arrival::NoSuchQp;
        };
        let mut g = qp.s_lock.lock(root);
        match p {
            Parsed::ReadResp { bth, hdr, payload } => {
                let pkt = Arriving {
                    dest_qp: bth.dest_qp,
                    psn: FlowPsn::from_raw(bth.psn.get()),
                    hdr: &hdr,
                    payload,
                };
                let (outcome, verdict) =
                    chip::receive_read_resp(&self.rcd, qp, &mut g, &mut self.mem, pkt);
                Arrival::ReadResp {
                    qp: i,
                    outcome,
                    verdict,
                }
            }
            Parsed::Ack { aeth, .. } => {
                requester::rcv_ack(&self.rcd, qp, &mut g, &aeth);
                Arrival::Ack { qp: i, aeth }
            }
            Parsed::ReadReq { .. } => Arrival::Unexpected,
        }
    }

    /// Takes requester `i`'s completions: each is matched with its READ,
    /// a successful one's destination is compared with the source, and
    /// the READ's pages leave the destination memory.
    pub fn poll(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> Vec<Done> {
        let mut taken = Vec::new();
        if let Some(qp) = self.requesters.get(i) {
            let mut g = qp.s_lock.lock(root);
            while let Some(c) = g.ext.req.poll() {
                taken.push(c);
            }
        }
        taken.into_iter().map(|c| self.finish(i, c)).collect()
    }

    fn finish(&mut self, i: usize, c: Completion) -> Done {
        let posted = self.posted.get_mut(i).and_then(|p| p.remove(&c.wr_id));
        let data = posted.as_ref().and_then(|p| {
            let ok = c.status == WcStatus::Success;
            let check = ok.then(|| doubles::check_data(&self.mem, &p.sges, p.remote));
            doubles::unmap(&mut self.mem, &p.sges);
            check
        });
        Done {
            qp: i,
            completion: c,
            posted,
            data,
        }
    }

    /// Action 5, for one QP: requester `i`'s retry timer expires. Returns
    /// true if it had segments outstanding (and so restarts them).
    pub fn fire_timer(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        let Some(qp) = self.requesters.get(i) else {
            return false;
        };
        let mut g = qp.s_lock.lock(root);
        let outstanding = g.ext.req.pending_segments() > 0;
        requester::timeout(&self.rcd, qp, &mut g);
        outstanding
    }

    /// Action 5: every requester's retry timer expires. Returns how many
    /// had segments outstanding.
    pub fn fire_timers(&mut self, root: &mut LockToken<'_, Unlocked>) -> usize {
        (0..self.requesters.len())
            .filter(|&i| self.fire_timer(i, root))
            .count()
    }

    /// The requesters' counters, summed.
    pub fn requester_stats(&self, root: &mut LockToken<'_, Unlocked>) -> ReqStats {
        let mut s = ReqStats::default();
        for qp in &self.requesters {
            s += qp.s_lock.lock(root).ext.req.stats;
        }
        s
    }

    /// The responders' counters, summed.
    pub fn responder_stats(&self, root: &mut LockToken<'_, Unlocked>) -> RespStats {
        let mut s = RespStats::default();
        for qp in &self.responders {
            s += qp.s_lock.lock(root).ext.resp.stats;
        }
        s
    }

    /// What is held now, read from the real state: the requester context's
    /// RcvArray, groups, flows and queues, every QP's flags and references,
    /// the DMA map, the flow-record allocator, the regions and the chip.
    pub fn leaks(&self, root: &mut LockToken<'_, Unlocked>) -> Leaks {
        let mut l = Leaks::default();
        if let Some(qp) = self.requesters.first() {
            // Context-wide: any QP's s_lock lets us take exp_lock.
            let mut g = qp.s_lock.lock(root);
            let (_, tok) = g.parts();
            let e = self.rcd.exp_lock.lock(tok);
            l.tid_entries = u64::from(e.groups.entries_in_use());
            l.tid_groups =
                (e.groups.list_len(GroupList::Used) + e.groups.list_len(GroupList::Full)) as u64;
            l.flows = u64::from(e.flows.mask().count_ones());
            l.queued_qps =
                (e.waiters.len(QueueKind::Flow) + e.waiters.len(QueueKind::RcvArray)) as u64;
            l.chip_faults = e.chip.faults();
        }
        for qp in &self.requesters {
            l.waiting_qps += u64::from(qp.s_lock.lock(root).waiting());
        }
        l.qp_refs = self
            .requesters
            .iter()
            .chain(&self.responders)
            .map(|qp| qp.live_refs().saturating_sub(1) as u64)
            .sum();
        l.dma_mappings = self.rcd.dma.live_mappings() as u64;
        l.flow_records = P::live_allocations(&self.rcd.mem) as u64;
        l.mr_refs = self.regions.refs();
        l.mr_misuses = self.regions.misuses();
        l.oversized_packets = self.to_responders.oversized() + self.to_requesters.oversized();
        l
    }

    /// Destroys the QPs' state: every requester is flushed (its READs
    /// complete as flushed and its TIDs, flows and records go back), every
    /// responder drops its region references, and the scheduler's queues
    /// are emptied. Returns the flush's completions and what is still held.
    pub fn teardown(&mut self, root: &mut LockToken<'_, Unlocked>) -> Teardown {
        let mut flushed = Vec::new();
        for i in 0..self.requesters.len() {
            if let Some(qp) = self.requesters.get(i) {
                let mut g = qp.s_lock.lock(root);
                requester::flush(&self.rcd, qp, &mut g);
            }
            flushed.extend(self.poll(i, root));
            if let Some(qp) = self.responders.get(i) {
                qp.s_lock.lock(root).ext.resp.release_all(&self.regions);
            }
        }
        while self.rcd.sched.pop_work().is_some() {}
        while self.rcd.sched.pop_send().is_some() {}
        self.ready.iter_mut().for_each(|r| *r = false);
        self.ready_queue.clear();
        Teardown {
            flushed,
            leaks: self.leaks(root),
        }
    }
}
