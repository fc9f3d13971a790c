// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester engine against the software chip, with the responder
//! played by the test: a segment's round trip with header suppression,
//! restart in a fresh generation with stale packets dropped (SPEC §7), a
//! QP destroyed while it waits for TID space (SPEC §7), no restart per
//! late packet (SPEC §7), and posting errors.

use hfi1_hal::lock_order::LockToken;
use hfi1_hal::platform::FlowTable;
use hfi1_hal::sim::{ExpectedPacket, RcvError, SimMemory};
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::QueueKind;
use tid_flow::{RcvCtxt, Sge};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, Parsed, Path};
use tid_read_proto::rc::{Connection, EngineError, PacketSink, WcStatus};
use tid_read_proto::read_resp::{RespBuilder, RespFlow, RespPacket};
use tid_read_proto::requester::{self, ChipFlow, KdethError, ReadWr, RespVerdict};
use tid_read_proto::sim::{EnginePlatform, EngineQp, new_ctxt, new_qp};
use tid_read_proto::wire::aeth;
use tid_read_proto::wire::read_resp;
use tid_read_proto::wire::tid_entries::Entries;

struct Sink {
    buf: Vec<u8>,
    out: Vec<Vec<u8>>,
}

impl PacketSink for Sink {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }
    fn send(&mut self, len: usize) {
        self.out.push(self.buf[..len].to_vec());
    }
}

fn sink() -> Sink {
    Sink {
        buf: vec![0; packet::MAX_PACKET],
        out: Vec::new(),
    }
}

struct World {
    rcd: Box<RcvCtxt<EnginePlatform>>,
    qp: EngineQp,
    mem: SimMemory,
}

fn world(groups: usize) -> World {
    let conn = Connection {
        verbs_qpn: 0x100,
        remote_verbs_qpn: 0x400,
        local: TidParams::local(1, 32, 14, false),
        remote: TidParams::local(2, 32, 14, false),
        pmtu: 4096,
        path: Path { dlid: 2, slid: 1 },
        max_rd_atomic: 16,
        remote_read: false,
    };
    World {
        rcd: new_ctxt(1, 0, groups, 4, 9).unwrap(),
        qp: new_qp(0x100, 0, 0, conn, Psn::new(7)),
        mem: SimMemory::new(),
    }
}

/// `pages` scattered pages (every other pfn) from `pfn`.
fn scattered(mem: &mut SimMemory, pfn: u64, pages: u64) -> Vec<Sge> {
    (0..pages)
        .map(|i| {
            mem.add_page(pfn + 2 * i);
            Sge {
                vaddr: (pfn + 2 * i) << 12,
                length: 4096,
            }
        })
        .collect()
}

impl World {
    fn post(&self, wr_id: u64, sges: &[Sge]) -> Result<(), EngineError> {
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        requester::post_read(
            &self.rcd,
            &self.qp,
            &mut g,
            &ReadWr {
                wr_id,
                remote_addr: 0x5000_0000,
                rkey: 9,
                sges,
            },
        )
    }

    /// Runs the send engine once per pending request for it.
    fn send(&self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        let mut s = sink();
        while let Some(qp) = self.rcd.sched.pop_send() {
            requester::send_engine(&self.rcd, &qp, &mut root, &mut s).unwrap();
        }
        s.out
    }

    /// The READ_RESP stream a responder would send for a READ_REQ.
    fn responses(req: &[u8]) -> Vec<(u32, read_resp::Repr, RespPacket)> {
        let Parsed::ReadReq { bth, hdr, payload } = packet::parse(req).unwrap().1 else {
            panic!("not a READ_REQ")
        };
        let entries: Vec<_> = Entries::new_checked(payload).unwrap().iter().collect();
        let flow = RespFlow {
            entries: &entries,
            length: hdr.reth.length,
            pmtu: 4096,
            spsn: hdr.flow_psn.seq(),
            generation: hdr.flow_psn.generation(),
            ib_spsn: bth.psn,
            jkey: 32,
            urg: false,
        };
        RespBuilder::new(&flow)
            .map(|p| {
                let p = p.unwrap();
                let r = read_resp::Repr {
                    kdeth: tid_read_proto::wire::kdeth::Repr {
                        kdeth0: p.kdeth0,
                        kdeth1: p.kdeth1,
                    },
                    aeth: aeth::Repr {
                        syndrome: 0x1F,
                        msn: 1,
                    },
                    verbs_psn: p.verbs_psn,
                    verbs_qp: 0x100,
                };
                (hdr.tid_flow_qp, r, p)
            })
            .collect()
    }

    /// The chip receives one READ_RESP (payload byte = `fill`); software
    /// gets it if delivered. Returns the chip's error and the verdict.
    fn receive(
        &mut self,
        r: &(u32, read_resp::Repr, RespPacket),
        fill: u8,
    ) -> (Option<RcvError>, Option<RespVerdict>) {
        let (dest, hdr, p) = r;
        let payload = vec![fill; p.len as usize];
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        let (o, chip) = {
            let (_, tok) = g.parts();
            let mut e = self.rcd.exp_lock.lock(tok);
            let o = e.chip.receive_expected(
                &mut self.mem,
                ExpectedPacket {
                    dest_qp: *dest,
                    psn: p.bth_psn,
                    kdeth0: p.kdeth0,
                    payload: &payload,
                },
            );
            let next = e.chip.read_flow(o.flow).next_psn();
            (o, ChipFlow { flow: o.flow, next })
        };
        if !o.delivered {
            return (o.error, None);
        }
        let err = o.error.map(|e| match e {
            RcvError::Tid => KdethError::Tid,
            RcvError::FlowSeq => KdethError::FlowSeq,
            RcvError::FlowGen => KdethError::FlowGen,
        });
        let v = requester::rcv_read_resp(
            &self.rcd,
            &self.qp,
            &mut g,
            FlowPsn::from_raw(p.bth_psn.raw()),
            hdr,
            err,
            Some(chip),
        )
        .unwrap();
        (o.error, Some(v))
    }

    fn in_use(&self) -> (u32, u32) {
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        let (_, tok) = g.parts();
        let e = self.rcd.exp_lock.lock(tok);
        (e.groups.entries_in_use(), e.flows.mask().count_ones())
    }
}

#[test]
fn a_segment_round_trip_with_header_suppression() {
    let mut w = world(16);
    let sges = scattered(&mut w.mem, 0x100, 8);
    w.post(1, &sges).unwrap();
    let reqs = w.send();
    assert_eq!(reqs.len(), 1);
    let Parsed::ReadReq { bth, hdr, .. } = packet::parse(&reqs[0]).unwrap().1 else {
        panic!()
    };
    assert_eq!(bth.psn, Psn::new(7));
    assert_eq!(bth.dest_qp, 0x80_0002);
    assert_eq!(
        (hdr.reth.length, hdr.reth.vaddr, hdr.reth.rkey),
        (8 * 4096, 0x5000_0000, 9)
    );
    assert_eq!(hdr.verbs_qp, 0x400);
    assert_eq!(hdr.tid_flow_qp & 0xFF, 1);
    let resps = World::responses(&reqs[0]);
    assert_eq!(resps.len(), 8);
    for (i, r) in resps.iter().enumerate() {
        let (err, verdict) = w.receive(r, i as u8 + 1);
        assert_eq!(err, None);
        if i < 7 {
            assert_eq!(verdict, None, "suppressed");
        } else {
            assert_eq!(verdict, Some(RespVerdict::Completed));
        }
    }
    for (i, s) in sges.iter().enumerate() {
        let mut b = [0u8; 4096];
        w.mem.read(s.vaddr, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == i as u8 + 1), "page {i}");
    }
    let mut root = LockToken::root();
    let c = w.qp.s_lock.lock(&mut root).ext.req.poll().unwrap();
    assert_eq!(
        (c.wr_id, c.length, c.status),
        (1, 8 * 4096, WcStatus::Success)
    );
    assert_eq!(w.in_use(), (0, 0), "TIDs and the flow released");
    assert_eq!(w.rcd.dma.live_mappings(), 0);
    assert_eq!(w.rcd.mem.live_allocations(), 0, "flow records freed");
}

#[test]
fn stale_packets_after_a_restart_are_dropped_unplaced() {
    let mut w = world(16);
    let sges = scattered(&mut w.mem, 0x100, 4);
    w.post(1, &sges).unwrap();
    let old = World::responses(&w.send()[0]);
    // Packet 0 is lost; the rest arrive out of sequence and are placed.
    for r in &old[1..] {
        assert_eq!(w.receive(r, 0xAA).0, Some(RcvError::FlowSeq));
    }
    {
        let mut root = LockToken::root();
        let mut g = w.qp.s_lock.lock(&mut root);
        assert_eq!(g.ext.req.stats.restarts, 0, "no restart per late packet");
        requester::timeout(&w.rcd, &w.qp, &mut g);
    }
    let again = w.send();
    assert_eq!(again.len(), 1, "the READ_REQ goes out again");
    let new = World::responses(&again[0]);
    assert_ne!(
        new[0].2.bth_psn.generation(),
        old[0].2.bth_psn.generation(),
        "a fresh generation"
    );
    assert_eq!(new[0].2.verbs_psn, old[0].2.verbs_psn, "the same IB PSNs");
    // The lost packet of the old generation shows up late: dropped.
    let (err, v) = w.receive(&old[0], 0xEE);
    assert_eq!(
        (err, v),
        (Some(RcvError::FlowGen), Some(RespVerdict::Dropped))
    );
    let mut b = [0u8; 4096];
    w.mem.read(sges[0].vaddr, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0), "nothing placed");
    for r in &new {
        w.receive(r, 0xBB);
    }
    let mut root = LockToken::root();
    let mut g = w.qp.s_lock.lock(&mut root);
    assert_eq!(g.ext.req.poll().map(|c| c.status), Some(WcStatus::Success));
    assert_eq!(g.ext.req.stats.restarts, 1);
    assert!(g.ext.req.stats.stale_dropped >= 1);
    drop(g);
    assert_eq!(w.in_use(), (0, 0));
}

#[test]
fn a_qp_destroyed_while_queued_leaves_the_queue_and_its_reference() {
    // One group: a segment of 16 scattered pages never fits.
    let mut w = world(1);
    let sges = scattered(&mut w.mem, 0x100, 16);
    let base = w.qp.live_refs();
    w.post(5, &sges).unwrap();
    assert!(w.send().is_empty());
    {
        let mut root = LockToken::root();
        let mut g = w.qp.s_lock.lock(&mut root);
        assert!(g.waiting());
        assert_eq!(g.ext.req.stats.tid_waits, 1);
        let (_, tok) = g.parts();
        let e = w.rcd.exp_lock.lock(tok);
        assert_eq!(e.waiters.len(QueueKind::RcvArray), 1);
    }
    assert_eq!(w.qp.live_refs(), base + 1, "the queue holds a reference");
    let mut root = LockToken::root();
    let mut g = w.qp.s_lock.lock(&mut root);
    requester::flush(&w.rcd, &w.qp, &mut g);
    assert!(!g.waiting());
    assert_eq!(
        g.ext.req.poll().map(|c| (c.wr_id, c.status)),
        Some((5, WcStatus::Flushed))
    );
    {
        let (_, tok) = g.parts();
        let e = w.rcd.exp_lock.lock(tok);
        assert!(e.waiters.is_empty());
        assert_eq!(e.flows.mask(), 0);
    }
    drop(g);
    while w.rcd.sched.pop_work().is_some() {}
    assert_eq!(w.qp.live_refs(), base);
    assert_eq!(w.rcd.dma.live_mappings(), 0);
    assert_eq!(w.rcd.mem.live_allocations(), 0);
}

#[test]
fn a_psn_nak_restarts_and_a_fatal_nak_flushes() {
    let mut w = world(16);
    let sges = scattered(&mut w.mem, 0x100, 2);
    w.post(1, &sges).unwrap();
    assert_eq!(w.send().len(), 1);
    let mut root = LockToken::root();
    {
        let mut g = w.qp.s_lock.lock(&mut root);
        let nak = aeth::Repr {
            syndrome: aeth::NakCode::PsnError.syndrome(),
            msn: 0,
        };
        requester::rcv_ack(&w.rcd, &w.qp, &mut g, &nak);
    }
    assert_eq!(w.send().len(), 1, "READ_REQ sent again");
    let mut g = w.qp.s_lock.lock(&mut root);
    assert_eq!(g.ext.req.stats.restarts, 1);
    let fatal = aeth::Repr {
        syndrome: aeth::NakCode::RemoteAccessError.syndrome(),
        msn: 0,
    };
    requester::rcv_ack(&w.rcd, &w.qp, &mut g, &fatal);
    assert_eq!(
        g.ext.req.poll().map(|c| c.status),
        Some(WcStatus::RemoteError)
    );
    drop(g);
    assert_eq!(w.in_use(), (0, 0));
    assert_eq!(w.rcd.dma.live_mappings(), 0);
}

#[test]
fn posting_checks_the_scatter_list_and_the_queue() {
    let mut w = world(16);
    assert_eq!(
        w.post(
            1,
            &[Sge {
                vaddr: 0x1800,
                length: 4096
            }]
        ),
        Err(EngineError::BadSgl)
    );
    assert_eq!(w.post(1, &[]), Err(EngineError::BadSgl));
    let sges = scattered(&mut w.mem, 0x100, 1);
    for i in 0..16 {
        w.post(i, &sges).unwrap();
    }
    assert_eq!(w.post(16, &sges), Err(EngineError::QueueFull));
}

#[test]
fn a_resp_whose_verbs_psn_names_no_segment_is_dropped() {
    let mut w = world(16);
    let sges = scattered(&mut w.mem, 0x100, 4);
    w.post(1, &sges).unwrap();
    let resps = World::responses(&w.send()[0]);
    // Packets 0 and 1 arrive; then a copy of the last one whose verbs PSN
    // lies outside the request, ahead of packet 2: the chip flags it
    // (sequence error) and software must not count it.
    for r in &resps[..2] {
        assert_eq!(w.receive(r, 1), (None, None));
    }
    let mut bad = resps[3];
    bad.1.verbs_psn = bad.1.verbs_psn.add(1000);
    let (err, v) = w.receive(&bad, 1);
    assert_eq!(
        (err, v),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
    );
    // Packet 2 arrives in sequence (placed silently); the real last one
    // never does, so the segment must not complete.
    assert_eq!(w.receive(&resps[2], 1), (None, None));
    let mut root = LockToken::root();
    let g = w.qp.s_lock.lock(&mut root);
    assert_eq!(g.ext.req.stats.psn_dropped, 1);
    assert_eq!(
        g.ext.req.stats.segments_done, 0,
        "no completion from a bad PSN"
    );
}
