// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA WRITE behaviours end to end, one scenario each, on the
//! two-node world (`tid_harness::TwoNodes`): both engines real, a scripted
//! fabric that drops, holds back or alters chosen packets, and simulated
//! time that reaches the first running timer whenever nothing else can
//! happen. Every scenario ends with the WRITE's bytes checked in the
//! responder's scattered pages and nothing held on either node after
//! teardown.

use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_READ_REQ, OP_TID_RDMA_READ_RESP, OP_TID_RDMA_RESYNC,
    OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST, OP_TID_RDMA_WRITE_REQ,
    OP_TID_RDMA_WRITE_RESP,
};
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::sim::RcvError;
use hfi1_hal::{FlowPsn, Psn};
use tid_harness::platform::SoftPlatform;
use tid_harness::world::{Arrival, AtResponder, Done, Setup, TwoNodes};
use tid_read_proto::rc::WcStatus;
use tid_read_proto::wire::{
    aeth, frame, lrh, read_req, read_resp, tid_ack, write_data, write_req, write_resp,
};
use tid_read_proto::write::requester::TidAckVerdict;
use tid_read_proto::write::responder::{ResyncVerdict, WriteReqVerdict};

const SEG: u32 = 256 << 10;
/// The RC ACK opcode (an ACK, or a NAK by its AETH).
const OP_ACK: u8 = 0x11;
/// The plain RDMA READ request opcode.
const OP_READ_REQUEST: u8 = 0x0C;

/// Which way a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Requester node to responder node.
    ToResponder,
    /// Responder node to requester node.
    ToRequester,
}

/// What the script does with one packet.
enum Fate {
    Deliver,
    Drop,
    /// Kept aside; the script gets it back through [`Net::held`].
    Hold,
}

/// A packet on the wire: its direction, the QP pair it belongs to, its
/// opcode and BTH PSN, and (an RC ACK) its AETH syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    dir: Dir,
    qp: usize,
    op: u8,
    psn: u32,
    syndrome: Option<u8>,
}

impl Seen {
    /// True for an RC RNR NAK.
    fn is_rnr_nak(&self) -> bool {
        self.syndrome.is_some_and(|s| s >> 5 == 1)
    }
}

/// The timers the scenario's simulated time reached, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Fired {
    rnr: u32,
    tid_retry: u32,
    retry: u32,
}

/// What happened at the responder, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtB {
    WriteReq(WriteReqVerdict),
    Data(Option<RcvError>, bool),
    Resync(ResyncVerdict),
    Other,
}

/// The two nodes, the log of the wire and the script's state.
struct Net {
    n: TwoNodes<SoftPlatform>,
    wire: Vec<Seen>,
    at_b: Vec<AtB>,
    tid_acks: Vec<TidAckVerdict>,
    done: Vec<Done>,
    held: Vec<(Dir, Vec<u8>)>,
    fired: Fired,
    /// [`Self::fired`] when the last completion came (a timer still
    /// running after it is not part of the recovery).
    fired_to_done: Fired,
}

/// The wire log in short: (opcode, low 11 bits of the PSN) per packet.
fn short(wire: &[Seen]) -> Vec<(u8, u32)> {
    wire.iter().map(|s| (s.op, s.psn & 0x7FF)).collect()
}

/// What the wire log keeps of packet `p` going `dir`. The QP pair is the
/// low byte of the verbs QP number the packet names (the world numbers
/// pair `i`'s QPs `0x100 + i` and `0x400 + i`).
fn seen(dir: Dir, p: &[u8]) -> Seen {
    let f = frame::parse(p).unwrap();
    let op = f.bth.opcode;
    let verbs_qp = match op {
        OP_TID_RDMA_WRITE_REQ => {
            write_req::Repr::parse(&write_req::Packet::new_checked(f.body).unwrap())
                .unwrap()
                .verbs_qp
        }
        OP_TID_RDMA_WRITE_RESP => {
            write_resp::Repr::parse(&write_resp::Packet::new_checked(f.body).unwrap())
                .unwrap()
                .verbs_qp
        }
        OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST | OP_TID_RDMA_RESYNC => {
            write_data::Repr::parse(&write_data::Packet::new_checked(f.body).unwrap())
                .unwrap()
                .verbs_qp
        }
        OP_TID_RDMA_ACK => {
            tid_ack::Repr::parse(&tid_ack::Packet::new_checked(f.body).unwrap())
                .unwrap()
                .verbs_qp
        }
        OP_TID_RDMA_READ_REQ => {
            read_req::Repr::parse(&read_req::Packet::new_checked(f.body).unwrap())
                .unwrap()
                .verbs_qp
        }
        OP_TID_RDMA_READ_RESP => {
            read_resp::Repr::parse(&read_resp::Packet::new_checked(f.body).unwrap())
                .unwrap()
                .verbs_qp
        }
        _ => f.bth.dest_qp,
    };
    let syndrome = (op == OP_ACK).then(|| {
        aeth::Repr::parse(&aeth::Packet::new_checked(f.body).unwrap())
            .unwrap()
            .syndrome
    });
    Seen {
        dir,
        qp: (verbs_qp & 0xFF) as usize,
        op,
        psn: f.bth.psn.get(),
        syndrome,
    }
}

impl Net {
    /// `qps` QP pairs, the responder context with `resp_groups` groups.
    fn new(qps: usize, resp_groups: usize) -> Self {
        let n = TwoNodes::new(Setup {
            qps,
            groups: 16,
            resp_groups,
            first_psn: Psn::new(0x10),
            region_len: 64 << 20,
            write_region_len: 4 << 20,
            ..Setup::default()
        })
        .unwrap();
        Self {
            n,
            wire: Vec::new(),
            at_b: Vec::new(),
            tid_acks: Vec::new(),
            done: Vec::new(),
            held: Vec::new(),
            fired: Fired::default(),
            fired_to_done: Fired::default(),
        }
    }

    /// Posts a TID WRITE of `segs` segments on QP `i` from scattered pages.
    fn write(&mut self, i: usize, segs: u32) -> u64 {
        let mut root = LockToken::root();
        let pages = self.n.pages.scattered(u64::from(segs * SEG / 4096));
        self.n.post_write(i, pages, &mut root).unwrap()
    }

    /// Posts a READ of `pages` scattered pages on QP `i`.
    fn read(&mut self, i: usize, pages: u64) -> u64 {
        let mut root = LockToken::root();
        let sges = self.n.pages.scattered(pages);
        self.n.post(i, sges, &mut root).unwrap()
    }

    /// Delivers `p` (going `dir`) and records what became of it.
    fn deliver(&mut self, dir: Dir, p: &[u8]) {
        let mut root = LockToken::root();
        match dir {
            Dir::ToResponder => {
                let at = match self.n.deliver_to_responder(p, &mut root) {
                    AtResponder::WriteReq { verdict, .. } => AtB::WriteReq(verdict),
                    AtResponder::WriteData { outcome, .. } => {
                        AtB::Data(outcome.error, outcome.placed)
                    }
                    AtResponder::Resync { verdict, .. } => AtB::Resync(verdict),
                    _ => AtB::Other,
                };
                self.at_b.push(at);
            }
            Dir::ToRequester => {
                let at = self.n.deliver_to_requester(p, &mut root);
                if let Arrival::TidAck { verdict, .. } = at.arrival {
                    self.tid_acks.push(verdict);
                }
                self.done.extend(at.done);
            }
        }
    }

    /// Runs both nodes and carries every packet through `script` until
    /// nothing moves; then, with `time`, lets time reach the first running
    /// timer (RNR, then TID retry, then RC retry, as their lengths order
    /// them), and again, until no timer runs.
    fn run(&mut self, time: bool, script: &mut impl FnMut(&Seen, &[u8], &mut Self) -> Fate) {
        let mut root = LockToken::root();
        let mut done = self.done.len();
        for _ in 0..10_000 {
            let mut moved = !self.n.run_requesters(&mut root).is_empty();
            moved |= self.carry(Dir::ToResponder, script);
            moved |= !self.n.run_responders(64, &mut root).is_empty();
            moved |= self.carry(Dir::ToRequester, script);
            for i in 0..self.n.setup().qps {
                let d = self.n.poll(i, &mut root);
                self.done.extend(d);
            }
            if self.done.len() != done {
                done = self.done.len();
                self.fired_to_done = self.fired;
            }
            let ticked = !moved && time && self.tick();
            if !moved && !ticked {
                return;
            }
        }
        panic!("no end after 10,000 rounds");
    }

    fn carry(
        &mut self,
        dir: Dir,
        script: &mut impl FnMut(&Seen, &[u8], &mut Self) -> Fate,
    ) -> bool {
        let mut moved = false;
        loop {
            let out = match dir {
                Dir::ToResponder => &mut self.n.to_responders,
                Dir::ToRequester => &mut self.n.to_requesters,
            };
            let Some(p) = out.pop() else {
                return moved;
            };
            moved = true;
            let seen = seen(dir, &p);
            self.wire.push(seen);
            match script(&seen, &p, self) {
                Fate::Deliver => self.deliver(dir, &p),
                Fate::Drop => {}
                Fate::Hold => self.held.push((dir, p)),
            }
        }
    }

    /// The first running timer of any requester expires. False if none
    /// runs.
    fn tick(&mut self) -> bool {
        let mut root = LockToken::root();
        for i in 0..self.n.setup().qps {
            let (retry, rnr) = self.n.timers(i, &mut root).unwrap();
            let tid = self.n.tid_retry_timer(i, &mut root).unwrap();
            let (kind, fired) = if rnr.is_armed() {
                (&mut self.fired.rnr, self.n.fire_rnr_timer(i, &mut root))
            } else if tid.is_armed() {
                (
                    &mut self.fired.tid_retry,
                    self.n.fire_tid_retry_timer(i, &mut root),
                )
            } else if retry.is_armed() {
                (&mut self.fired.retry, self.n.fire_timer(i, &mut root))
            } else {
                continue;
            };
            *kind += u32::from(fired);
            if fired {
                let d = self.n.poll(i, &mut root);
                self.done.extend(d);
                return true;
            }
        }
        false
    }

    /// [`Self::run`] with time, dropping the first packet of opcode `op`;
    /// returns its PSN.
    fn run_dropping_first(&mut self, op: u8) -> u32 {
        let mut lost = None;
        self.run(true, &mut |s: &Seen, _: &[u8], _: &mut Net| {
            if s.op == op && lost.is_none() {
                lost = Some(s.psn);
                return Fate::Drop;
            }
            Fate::Deliver
        });
        lost.expect("a packet of that opcode went")
    }

    /// The responder's verdicts on the WRITE_REQs it received, in order.
    fn write_req_verdicts(&self) -> Vec<WriteReqVerdict> {
        self.at_b
            .iter()
            .filter_map(|b| match b {
                AtB::WriteReq(v) => Some(*v),
                _ => None,
            })
            .collect()
    }

    /// Where the first packet of one of `ops` is in the wire log.
    fn first_of(&self, ops: &[u8]) -> Option<usize> {
        self.wire.iter().position(|s| ops.contains(&s.op))
    }

    /// Packets on the wire going `dir` with opcode `op`.
    fn count(&self, dir: Dir, op: u8) -> usize {
        self.wire
            .iter()
            .filter(|s| s.dir == dir && s.op == op)
            .count()
    }

    /// Every WRITE and READ completed successfully with its bytes, in
    /// `ids` order per QP.
    fn assert_all_succeeded(&self, ids: &[u64]) {
        let got: Vec<u64> = self.done.iter().map(|d| d.completion.wr_id).collect();
        assert_eq!(got, ids, "{:?}", self.done);
        for d in &self.done {
            assert_eq!(d.completion.status, WcStatus::Success, "{d:?}");
            let c = d.data.expect("a successful request is checked");
            assert_eq!(
                (c.verified, c.mismatched),
                (u64::from(d.completion.length), 0),
                "{d:?}"
            );
        }
    }

    /// Tears both nodes down: nothing flushed, nothing held.
    fn assert_clean(mut self) {
        let mut root = LockToken::root();
        let t = self.n.teardown(&mut root);
        assert!(t.flushed.is_empty(), "{:?}", t.flushed);
        let held: Vec<_> = t.leaks.iter().filter(|&(_, v)| v != 0).collect();
        assert!(held.is_empty(), "{held:?}");
    }
}

fn deliver_all(_: &Seen, _: &[u8], _: &mut Net) -> Fate {
    Fate::Deliver
}

/// Delivers what [`Net::held`] keeps.
fn release_held(net: &mut Net) {
    for (d, p) in std::mem::take(&mut net.held) {
        let s = seen(d, &p);
        net.wire.push(s);
        net.deliver(d, &p);
    }
}

/// Kernel: `hfi1_tid_write_alloc_resources()` (queueing on the RcvArray
/// queue and the RNR NAK), `hfi1_compute_tid_rnr_timeout()`, the revive
/// branch of `hfi1_rc_rcv_tid_rdma_write_req()`, `do_rc_ack()`'s RNR case.
/// The responder context has room for one scattered segment (8 groups,
/// 64 entries). QP 1's WRITE takes it and its data is held back; QP 0's
/// WRITE_REQ is then answered by exactly one RC RNR NAK and no WRITE_RESP.
/// Once QP 1's data is let through and its TIDs come back, QP 0's RNR timer
/// expires, its WRITE_REQ goes again with the same PSN and is revived,
/// and both WRITEs complete with their bytes.
#[test]
fn write_rnr_then_success() {
    let mut net = Net::new(2, 8);
    let b = net.write(1, 1);
    // QP 1 alone first: its WRITE_REQ takes the context's TIDs, and its
    // data waits on the wire.
    net.run(false, &mut |s: &Seen, _: &[u8], _: &mut Net| match s.op {
        OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST => Fate::Hold,
        _ => Fate::Deliver,
    });
    assert_eq!(net.count(Dir::ToRequester, OP_TID_RDMA_WRITE_RESP), 1);
    assert_eq!(net.held.len(), 64);
    let a = net.write(0, 1);
    // QP 0's WRITE_REQ can only queue: its RNR NAK is the moment QP 1's
    // data goes through, which gives the TIDs back and wakes QP 0.
    net.run(true, &mut |s: &Seen, _: &[u8], net: &mut Net| {
        if s.is_rnr_nak() && !net.held.is_empty() {
            assert!(
                net.wire
                    .iter()
                    .all(|w| !(w.qp == 0 && w.op == OP_TID_RDMA_WRITE_RESP)),
                "a WRITE_RESP before the RNR NAK"
            );
            release_held(net);
        }
        Fate::Deliver
    });
    let of_a = |op: u8| -> Vec<&Seen> {
        net.wire
            .iter()
            .filter(|w| w.qp == 0 && w.op == op)
            .collect()
    };
    let naks: Vec<_> = net.wire.iter().filter(|w| w.is_rnr_nak()).collect();
    let write_reqs = of_a(OP_TID_RDMA_WRITE_REQ);
    assert_eq!(naks.len(), 1, "{:?}", short(&net.wire));
    assert_eq!(naks[0].qp, 0);
    assert_eq!(
        write_reqs.len(),
        2,
        "the WRITE_REQ again after the RNR wait"
    );
    assert_eq!(
        write_reqs[0].psn, write_reqs[1].psn,
        "resent with the same PSN"
    );
    assert_eq!(
        naks[0].psn, write_reqs[0].psn,
        "the NAK names the WRITE_REQ"
    );
    assert_eq!(of_a(OP_TID_RDMA_WRITE_RESP).len(), 1);
    let rnr_only = Fired {
        rnr: 1,
        tid_retry: 0,
        retry: 0,
    };
    assert_eq!(net.fired_to_done, rnr_only);
    let verdicts = net.write_req_verdicts();
    let revived = verdicts
        .iter()
        .filter(|&&v| v == WriteReqVerdict::Revived)
        .count();
    assert_eq!(revived, 1, "{verdicts:?}");
    net.assert_all_succeeded(&[b, a]);
    net.assert_clean();
}

/// Kernel: `hfi1_tid_retry_timeout()`, `hfi1_build_tid_rdma_resync()`,
/// `hfi1_rc_rcv_tid_rdma_resync()`, the RESYNC-ACK branch of
/// `hfi1_rc_rcv_tid_rdma_ack()`. One one-segment WRITE whose
/// WRITE_DATA_LAST is lost: the responder sees every other packet placed
/// in sequence and nothing more, the requester's TID retry timer expires
/// once, exactly one RESYNC goes (flow PSN `(g << 11) | 0x7FF`, the last
/// sequence of the data's generation), its ACK carries the same PSN, the
/// segment goes again in the next generation from sequence 0, and the
/// WRITE completes with its bytes without an RC retry.
#[test]
fn lost_write_data_last_recovered_by_tid_retry() {
    let mut net = Net::new(1, 16);
    let a = net.write(0, 1);
    let lost = FlowPsn::from_raw(net.run_dropping_first(OP_TID_RDMA_WRITE_DATA_LAST));
    let resyncs: Vec<_> = net
        .wire
        .iter()
        .filter(|s| s.op == OP_TID_RDMA_RESYNC)
        .copied()
        .collect();
    assert_eq!(resyncs.len(), 1, "{:?}", short(&net.wire));
    let resync = FlowPsn::from_raw(resyncs[0].psn);
    assert_eq!(resync.generation(), lost.generation());
    assert_eq!(resync.seq(), 0x7FF);
    // The RESYNC's ACK is the TID ACK right after it, on its PSN.
    let at = net
        .wire
        .iter()
        .position(|s| s.op == OP_TID_RDMA_RESYNC)
        .unwrap();
    let ack = net.wire[at..]
        .iter()
        .find(|s| s.op == OP_TID_RDMA_ACK)
        .expect("the RESYNC is acknowledged");
    assert_eq!(ack.psn, resyncs[0].psn);
    // The segment again, whole, in the next generation from sequence 0.
    let again: Vec<FlowPsn> = net.wire[at..]
        .iter()
        .filter(|s| matches!(s.op, OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST))
        .map(|s| FlowPsn::from_raw(s.psn))
        .collect();
    assert_eq!(again.len(), 64, "the whole segment again");
    assert_ne!(again[0].generation(), lost.generation());
    assert_eq!(again[0].seq(), 0);
    assert!(
        again
            .iter()
            .all(|p| p.generation() == again[0].generation())
    );
    assert!(
        net.at_b.iter().all(|b| !matches!(b, AtB::Data(Some(_), _))),
        "the responder saw no error: {:?}",
        net.at_b
    );
    assert_eq!(net.fired_to_done.tid_retry, 1, "{:?}", net.fired_to_done);
    assert_eq!(net.fired_to_done.retry, 0, "{:?}", net.fired_to_done);
    net.assert_all_succeeded(&[a]);
    net.assert_clean();
}

/// Kernel: the generation-error branch of `hfi1_handle_kdeth_eflags()`
/// (a stale generation is not placed and gets at most one TID NAK), on
/// the recovery of [`lost_write_data_last_recovered_by_tid_retry`]. A copy
/// of a middle WRITE_DATA of the first generation, its payload poisoned,
/// is held back and delivered once the responder took the RESYNC: the
/// chip flags a generation error and places nothing, and the WRITE
/// completes with the source's bytes (no poison in the pages).
#[test]
fn resync_after_generation_error() {
    let mut net = Net::new(1, 16);
    let a = net.write(0, 1);
    let mut kept = false;
    let mut lost = false;
    net.run(true, &mut |s: &Seen, p: &[u8], net: &mut Net| {
        match s.op {
            OP_TID_RDMA_WRITE_DATA if !kept && FlowPsn::from_raw(s.psn).seq() == 10 => {
                kept = true;
                let mut copy = p.to_vec();
                let n = copy.len();
                // The payload (before the ICRC) is poisoned; the ICRC is
                // made right so the chip sees a good packet.
                copy[n - 100..n - 8].fill(0xEE);
                lrh::Packet::new_unchecked(&mut copy[..]).fill_icrc();
                net.held.push((s.dir, copy));
            }
            OP_TID_RDMA_WRITE_DATA_LAST if !lost => {
                lost = true;
                return Fate::Drop;
            }
            OP_TID_RDMA_ACK
                if !net.held.is_empty() && net.at_b.iter().any(|b| matches!(b, AtB::Resync(_))) =>
            {
                release_held(net);
            }
            _ => {}
        }
        Fate::Deliver
    });
    assert!(kept && lost && net.held.is_empty());
    let stale: Vec<_> = net
        .at_b
        .iter()
        .filter(|b| matches!(b, AtB::Data(Some(RcvError::FlowGen), _)))
        .collect();
    assert_eq!(stale, [&AtB::Data(Some(RcvError::FlowGen), false)]);
    assert_eq!(net.count(Dir::ToResponder, OP_TID_RDMA_RESYNC), 1);
    net.assert_all_succeeded(&[a]);
    net.assert_clean();
}

/// Kernel: the TID WRITE branch of `tid_rdma_rcv_error()` (a duplicate
/// WRITE_REQ finds its ack entry and resends its WRITE_RESPs) and the
/// requester's restart from the missing response (`do_rc_ack()`'s
/// sequence check on a WRITE_RESP, `hfi1_restart_rc()`). A two-segment
/// WRITE whose first WRITE_RESP is lost: the WRITE_REQ goes again, the
/// responder takes it as a duplicate without allocating anything new,
/// the lost WRITE_RESP's PSN is answered again, and the WRITE completes
/// with its bytes.
#[test]
fn duplicate_write_req_after_a_lost_write_resp() {
    let mut net = Net::new(1, 32);
    let a = net.write(0, 2);
    let lost = net.run_dropping_first(OP_TID_RDMA_WRITE_RESP);
    assert_eq!(net.count(Dir::ToResponder, OP_TID_RDMA_WRITE_REQ), 2);
    assert_eq!(
        net.write_req_verdicts(),
        [WriteReqVerdict::Accepted, WriteReqVerdict::Duplicate]
    );
    let answered = net
        .wire
        .iter()
        .filter(|s| s.op == OP_TID_RDMA_WRITE_RESP && s.psn == lost)
        .count();
    assert_eq!(
        answered,
        2,
        "the lost WRITE_RESP again: {:?}",
        short(&net.wire)
    );
    net.assert_all_succeeded(&[a]);
    net.assert_clean();
}

/// Kernel: `tid_rdma_rcv_error()`'s WRITE branch for a fabric copy. A
/// copy of the WRITE_REQ of a two-segment WRITE arrives between the two
/// segments' data: the responder takes it as a duplicate, allocates
/// nothing new, and whatever it resends the requester drops; the WRITE
/// completes with its bytes and both nodes end with nothing held.
#[test]
fn duplicate_write_req_from_the_fabric_mid_transfer() {
    let mut net = Net::new(1, 32);
    let a = net.write(0, 2);
    let mut copy = None;
    net.run(true, &mut |s: &Seen, p: &[u8], net: &mut Net| {
        if s.op == OP_TID_RDMA_WRITE_REQ && copy.is_none() {
            copy = Some(p.to_vec());
        }
        // The segments share the flow's sequence: 0..=63 is the first
        // segment, 64 begins the second.
        let seq = FlowPsn::from_raw(s.psn).seq();
        if s.op == OP_TID_RDMA_WRITE_DATA && seq == 63 {
            if let Some(c) = copy.take() {
                net.held.push((Dir::ToResponder, c));
            }
        }
        if s.op == OP_TID_RDMA_WRITE_DATA && seq == 64 && !net.held.is_empty() {
            release_held(net);
        }
        Fate::Deliver
    });
    assert_eq!(
        net.write_req_verdicts(),
        [WriteReqVerdict::Accepted, WriteReqVerdict::Duplicate]
    );
    net.assert_all_succeeded(&[a]);
    net.assert_clean();
}

/// Kernel: `hfi1_tid_rdma_wqe_interlock()` and `do_rc_completion()`,
/// through both engines: a TID READ posted after a TID WRITE on the same
/// QP sends no READ request until the requester has taken the TID ACK
/// that completes the WRITE; then the READ runs and both complete with
/// their bytes, in order.
#[test]
fn read_after_unfinished_tid_write_waits() {
    let mut net = Net::new(1, 16);
    let w = net.write(0, 1);
    let r = net.read(0, 64);
    net.run(true, &mut deliver_all);
    let read_req = net
        .first_of(&[OP_TID_RDMA_READ_REQ, OP_READ_REQUEST])
        .expect("the READ went");
    let final_ack = net
        .first_of(&[OP_TID_RDMA_ACK])
        .expect("the WRITE was acknowledged");
    assert!(
        final_ack < read_req,
        "the READ request went before the WRITE's TID ACK: {:?}",
        short(&net.wire)
    );
    net.assert_all_succeeded(&[w, r]);
    net.assert_clean();
}

/// [`read_after_unfinished_tid_write_waits`] with the WRITE's TID ACK
/// lost: the READ stays held through the recovery (TID retry, RESYNC,
/// its ACK) and goes only after the RESYNC's ACK completed the WRITE.
#[test]
fn read_after_a_tid_write_waits_through_its_recovery() {
    let mut net = Net::new(1, 16);
    let w = net.write(0, 1);
    let r = net.read(0, 64);
    net.run_dropping_first(OP_TID_RDMA_ACK);
    let read_req = net
        .first_of(&[OP_TID_RDMA_READ_REQ, OP_READ_REQUEST])
        .expect("the READ went");
    let resync = net
        .first_of(&[OP_TID_RDMA_RESYNC])
        .expect("the lost ACK is recovered by a RESYNC");
    assert!(
        resync < read_req,
        "the READ request went during the recovery: {:?}",
        short(&net.wire)
    );
    net.assert_all_succeeded(&[w, r]);
    net.assert_clean();
}
