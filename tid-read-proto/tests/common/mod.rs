// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the regression tests share: the harness's two nodes driven step
//! by step, with the packets in flight under the test's hand; and, for
//! the capture tests, the pcap file and its check by Wireshark
//! ([`capture`]); one requester QP driven by hand ([`lone`]).
#![allow(dead_code)]

pub mod capture;
pub mod lone;

use hfi1_hal::Psn;
use hfi1_hal::lock_order::LockToken;
use tid_flow::ExpState;
use tid_flow::Sge;
use tid_harness::platform::SoftPlatform;
use tid_harness::world::{AtRequester, AtResponder, Done, Setup, TwoNodes};
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::rc::{QpState, WcStatus};
use tid_read_proto::requester::{ReqStats, Requester};
use tid_read_proto::responder::{ReqVerdict, RespStats};

/// Two nodes and the packets between them.
pub struct Pair {
    /// The world.
    pub n: TwoNodes<SoftPlatform>,
    /// Completions taken so far, per QP, as (wr_id, status).
    pub done: Vec<Vec<(u64, WcStatus)>>,
}

/// What a packet is, for the tests' filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A TID READ_REQ: its IB PSN.
    TidReq(Psn),
    /// A plain RDMA READ request: its PSN.
    PlainReq(Psn),
    /// A TID READ_RESP: its verbs PSN and whether it is the segment's last.
    TidResp(Psn, bool),
    /// A plain READ response: its PSN.
    PlainResp(Psn),
    /// An ACK or NAK: its PSN and syndrome.
    Ack(Psn, u8),
}

/// The kind of a packet.
pub fn kind(p: &[u8]) -> Kind {
    match packet::parse(p).expect("a packet an engine built parses").1 {
        Parsed::ReadReq { bth, .. } => Kind::TidReq(bth.psn),
        Parsed::ReadRequest { bth, .. } => Kind::PlainReq(bth.psn),
        Parsed::ReadResp { hdr, .. } => Kind::TidResp(hdr.verbs_psn, !hdr.kdeth.kdeth0.sh()),
        Parsed::ReadResponse { bth, .. } => Kind::PlainResp(bth.psn),
        Parsed::Ack { bth, aeth } => Kind::Ack(bth.psn, aeth.syndrome),
    }
}

impl Pair {
    /// Two nodes built from `setup`.
    pub fn new(setup: Setup) -> Self {
        let qps = setup.qps;
        Self {
            n: TwoNodes::new(setup).expect("both nodes"),
            done: vec![Vec::new(); qps],
        }
    }

    /// One QP pair, `groups` TID groups, TID READs from `tid_read_min`
    /// bytes, 4 KiB segments (the responder's `max_len`), the retry count
    /// given.
    pub fn small(groups: usize, tid_read_min: u32, retry_cnt: u8) -> Self {
        Self::new(Setup {
            groups,
            tid_read_min,
            seg_len: 4096,
            retry_cnt,
            ..Setup::default()
        })
    }

    /// Posts a READ of `pages` scattered pages on QP `i`.
    pub fn post(&mut self, i: usize, pages: u64) -> u64 {
        let sges = self.n.pages.scattered(pages);
        self.post_sges(i, sges)
    }

    /// Posts a READ into `sges` on QP `i`.
    pub fn post_sges(&mut self, i: usize, sges: Vec<Sge>) -> u64 {
        self.n
            .post(i, sges, &mut LockToken::root())
            .expect("the post is accepted")
    }

    /// The opening of most scenarios: posts a READ of `pages` scattered
    /// pages on QP `i`, carries its requests to the responder and runs
    /// it; returns the READ's `wr_id` and the responses, not delivered.
    pub fn serve(&mut self, i: usize, pages: u64) -> (u64, Vec<Vec<u8>>) {
        let wr = self.post(i, pages);
        let reqs = self.send();
        (wr, self.answer(&reqs))
    }

    /// Delivers `reqs` to the responder node and runs it; returns what it
    /// sent.
    pub fn answer(&mut self, reqs: &[Vec<u8>]) -> Vec<Vec<u8>> {
        self.give_responder(reqs);
        self.respond()
    }

    /// The close of most scenarios: runs the fabric fault-free until
    /// every READ completed ([`Pair::finish`] on QP `i`), checks that QP
    /// `i` completed exactly `wrs`, each successfully, and tears down
    /// with nothing left held.
    pub fn finish_clean(mut self, i: usize, wrs: &[u64]) {
        self.finish(i);
        let want: Vec<_> = wrs.iter().map(|&w| (w, WcStatus::Success)).collect();
        assert_eq!(self.done[i], want);
        self.teardown_clean();
    }

    /// Runs `f` on requester QP `i`'s requester, under its `s_lock`.
    pub fn requester<T>(&self, i: usize, f: impl FnOnce(&Requester<SoftPlatform>) -> T) -> T {
        let mut root = LockToken::root();
        let g = self.n.requesters[i].s_lock.lock(&mut root);
        f(&g.ext.requester)
    }

    /// Runs `f` on the requester node's context state, under requester
    /// QP 0's `s_lock` and the context's `exp_lock`.
    pub fn requester_ctxt<T>(&self, f: impl FnOnce(&mut ExpState<SoftPlatform>) -> T) -> T {
        let mut root = LockToken::root();
        let mut g = self.n.requesters[0].s_lock.lock(&mut root);
        let (_, tok) = g.parts();
        f(&mut self.n.rcd.exp_lock.lock(tok))
    }

    /// Runs every requester engine and trigger; returns what they sent.
    pub fn send(&mut self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        for r in self.n.run_requesters(&mut root) {
            r.result.expect("the send engine runs");
        }
        self.poll_all();
        self.n.to_responders.drain().collect()
    }

    /// Delivers `pkts` to the responder node.
    pub fn give_responder(&mut self, pkts: &[Vec<u8>]) -> Vec<ReqVerdict> {
        let mut root = LockToken::root();
        pkts.iter()
            .filter_map(|p| match self.n.deliver_to_responder(p, &mut root) {
                AtResponder::Received { verdict, .. } => Some(verdict),
                _ => None,
            })
            .collect()
    }

    /// Runs every responder until it has nothing left; returns what they
    /// sent.
    pub fn respond(&mut self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        while !self.n.run_responders(64, &mut root).is_empty() {}
        self.n.to_requesters.drain().collect()
    }

    /// Delivers `pkts` to the requester node, taking the completions.
    pub fn give_requester(&mut self, pkts: &[Vec<u8>]) -> Vec<AtRequester> {
        let mut root = LockToken::root();
        let out: Vec<AtRequester> = pkts
            .iter()
            .map(|p| self.n.deliver_to_requester(p, &mut root))
            .collect();
        for at in &out {
            self.note(&at.done);
        }
        out
    }

    fn note(&mut self, done: &[Done]) {
        for d in done {
            assert!(d.posted.is_some(), "a completion of a READ never posted");
            if d.completion.status == WcStatus::Success {
                let data = d.data.unwrap_or_default();
                assert_eq!(data.mismatched, 0, "READ {} bytes", d.completion.wr_id);
                assert!(data.verified > 0, "READ {} checked", d.completion.wr_id);
            }
            self.done[d.qp].push((d.completion.wr_id, d.completion.status));
        }
    }

    /// Takes every QP's completions.
    pub fn poll_all(&mut self) {
        let mut root = LockToken::root();
        for i in 0..self.done.len() {
            let d = self.n.poll(i, &mut root);
            self.note(&d);
        }
    }

    /// Requests, responses, delivered both ways until nothing moves;
    /// `keep` decides which packets the fabric carries.
    pub fn run(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        loop {
            let reqs: Vec<_> = self.send().into_iter().filter(|p| keep(p)).collect();
            self.give_responder(&reqs);
            let resps: Vec<_> = self.respond().into_iter().filter(|p| keep(p)).collect();
            self.give_requester(&resps);
            self.poll_all();
            if reqs.is_empty()
                && resps.is_empty()
                && self.n.pending_sends() == 0
                && self.n.pending_work() == 0
            {
                return;
            }
        }
    }

    /// Runs the fabric fault-free until every READ posted completed,
    /// letting the retry timer of QP `i` expire whenever nothing moves (a
    /// packet the test dropped).
    pub fn finish(&mut self, i: usize) {
        for _ in 0..32 {
            self.run(|_| true);
            if self.n.outstanding() == 0 {
                return;
            }
            if !self.expire(i) {
                break;
            }
        }
        assert_eq!(self.n.outstanding(), 0, "READs left");
    }

    /// Requester `i`'s retry timer expires (if it runs).
    pub fn expire(&mut self, i: usize) -> bool {
        let f = self.n.fire_timer(i, &mut LockToken::root());
        self.poll_all();
        f
    }

    /// Requester `i`'s retry timer: the duration it was armed with.
    pub fn retry_timer(&self, i: usize) -> Option<u64> {
        self.n
            .timers(i, &mut LockToken::root())
            .and_then(|(r, _)| r.armed())
    }

    /// Requester `i`'s RNR timer: the duration it was armed with.
    pub fn rnr_timer(&self, i: usize) -> Option<u64> {
        self.n
            .timers(i, &mut LockToken::root())
            .and_then(|(_, r)| r.armed())
    }

    /// The states of QP pair `i`.
    pub fn states(&self, i: usize) -> (QpState, QpState) {
        self.n.states(i, &mut LockToken::root())
    }

    /// The requesters' counters.
    pub fn req_stats(&self) -> ReqStats {
        self.n.requester_stats(&mut LockToken::root())
    }

    /// The responders' counters.
    pub fn resp_stats(&self) -> RespStats {
        self.n.responder_stats(&mut LockToken::root())
    }

    /// What is held now, over everything (0 when nothing is), once the
    /// wake-ups queued have run.
    pub fn held(&mut self) -> u64 {
        let _ = self.send();
        self.n.leaks(&mut LockToken::root()).total()
    }

    /// Destroys every QP; asserts nothing was left held.
    pub fn teardown_clean(mut self) {
        let t = self.n.teardown(&mut LockToken::root());
        assert_eq!(t.leaks.total(), 0, "{:?}", t.leaks);
    }
}

/// An ACK or NAK with `syndrome` for IB PSN `psn`, to requester QP 0.
pub fn ack(psn: u32, syndrome: u8) -> Vec<u8> {
    let mut buf = vec![0u8; 64];
    let a = tid_read_proto::wire::aeth::Repr { syndrome, msn: 0 };
    let n = packet::build_ack(
        &mut buf,
        packet::Path::default(),
        tid_harness::world::REQUESTER.qpn,
        Psn::new(psn),
        a,
    )
    .expect("an ACK fits 64 bytes");
    buf.truncate(n);
    buf
}

/// A TID READ_RESP rebuilt after `f` changed its BTH destination QP, BTH
/// (flow) PSN and header (the payload kept; the ICRC is computed again).
pub fn forge_resp(
    p: &[u8],
    f: impl FnOnce(&mut u32, &mut hfi1_hal::FlowPsn, &mut tid_read_proto::wire::read_resp::Repr),
) -> Vec<u8> {
    let (
        lrh,
        Parsed::ReadResp {
            bth,
            mut hdr,
            payload,
        },
    ) = packet::parse(p).unwrap()
    else {
        panic!("not a READ_RESP");
    };
    let mut dest = bth.dest_qp;
    let mut psn = hfi1_hal::FlowPsn::from_raw(bth.psn.get());
    f(&mut dest, &mut psn, &mut hdr);
    let mut buf = vec![0u8; tid_read_proto::packet::MAX_PACKET];
    let path = tid_read_proto::packet::Path {
        dlid: lrh.dlid,
        slid: lrh.slid,
    };
    let n = tid_read_proto::response_stream::write_packet(
        &mut buf,
        path,
        dest,
        psn.as_psn(),
        &hdr,
        payload.len(),
        |o| {
            o.copy_from_slice(payload);
            true
        },
    )
    .unwrap();
    buf.truncate(n);
    buf
}

/// The segment-last READ_RESPs among `pkts` and the rest, in order.
pub fn split_last(pkts: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    pkts.iter()
        .cloned()
        .partition(|p| matches!(kind(p), Kind::TidResp(_, true)))
}

/// The packets among `pkts` for requester QP `i` (by the verbs QP a
/// response names).
pub fn for_qp(pkts: &[Vec<u8>], i: usize) -> Vec<Vec<u8>> {
    let qpn = tid_harness::world::REQUESTER.qpn + i as u32;
    let resp = tid_harness::world::RESPONDER.qpn + i as u32;
    pkts.iter()
        .filter(|p| match packet::parse(p).unwrap().1 {
            Parsed::ReadResp { hdr, .. } => hdr.verbs_qp == qpn,
            Parsed::ReadReq { hdr, .. } => hdr.verbs_qp == resp,
            Parsed::ReadRequest { bth, .. } => bth.dest_qp == resp,
            Parsed::ReadResponse { bth, .. } | Parsed::Ack { bth, .. } => bth.dest_qp == qpn,
        })
        .cloned()
        .collect()
}
