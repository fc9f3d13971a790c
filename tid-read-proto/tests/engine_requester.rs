// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester engine against the software chip, with the responder
//! played by the test: a segment's round trip with header suppression,
//! software PSN checking after a flow sequence error with one restart
//! per episode (SPEC §5, §7), stale packets dropped after a restart
//! (SPEC §7), later segments not advanced (SPEC §7), a sequence error
//! naming no segment, a QP destroyed while it waits for TID space (SPEC
//! §7), NAKs, and posting. Each SPEC §7 test's doc says which fix it
//! needs. The QP takes READs of two pages and more as TID READs (the
//! kernel's threshold is 256 KiB; the behaviour tested does not depend on
//! it).

mod common;

use common::lone;
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::sim::{RcvError, SimMemory};
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::QueueKind;
use tid_flow::{RcvCtxt, Sge};
use tid_harness::chip::{Arriving, receive_read_resp};
use tid_harness::doubles::{self, PageAllocator};
use tid_harness::platform::{SoftPlatform, SoftQp, new_ctxt, new_qp};
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::qp;
use tid_read_proto::rc::{EngineError, WcStatus};
use tid_read_proto::requester::{self, RespVerdict};
use tid_read_proto::response_stream::{RespBuilder, RespFlow, RespPacket};
use tid_read_proto::wire::aeth;
use tid_read_proto::wire::read_resp;
use tid_read_proto::wire::tid_entries::Entries;

/// One requester QP on its own context; the test plays the responder.
struct World {
    rcd: Box<RcvCtxt<SoftPlatform>>,
    qp: SoftQp,
    mem: SimMemory,
}

fn world(groups: usize) -> World {
    let conn = lone::requester_conn(0x100);
    World {
        rcd: new_ctxt(1, groups, 4, 9).unwrap(),
        qp: new_qp(0x100, 0, 0, conn, Psn::new(7)),
        mem: SimMemory::new(),
    }
}

/// `pages` scattered pages (every other pfn) from `pfn`, in `mem`.
fn scattered(mem: &mut SimMemory, pfn: u64, pages: u64) -> Vec<Sge> {
    let sges = PageAllocator::new(pfn).scattered(pages);
    doubles::map(mem, &sges);
    sges
}

impl World {
    fn post(&self, wr_id: u64, sges: &[Sge]) -> Result<(), EngineError> {
        lone::post_read(&self.rcd, &self.qp, wr_id, sges)
    }

    /// Runs the send engine once per pending request for it.
    fn send(&self) -> Vec<Vec<u8>> {
        lone::send(&self.rcd)
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
        let pkt = Arriving {
            dest_qp: *dest,
            psn: FlowPsn::from_raw(p.bth_psn.raw()),
            hdr,
            payload: &payload,
        };
        let (o, v) = receive_read_resp(&self.rcd, &self.qp, &mut g, &mut self.mem, pkt);
        (o.error, v.map(Result::unwrap))
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
    let c = w.qp.s_lock.lock(&mut root).ext.requester.poll().unwrap();
    assert_eq!(
        (c.wr_id, c.length, c.status),
        (1, 8 * 4096, WcStatus::Success)
    );
    assert_eq!(w.in_use(), (0, 0), "TIDs and the flow released");
    assert_eq!(w.rcd.dma.live_mappings(), 0);
    assert_eq!(w.rcd.mem.live_allocations(), 0, "flow records freed");
}

impl World {
    fn stats(&self) -> requester::ReqStats {
        let mut root = LockToken::root();
        self.qp.s_lock.lock(&mut root).ext.requester.stats
    }

    fn poll(&self) -> Option<(u64, WcStatus)> {
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        g.ext.requester.poll().map(|c| (c.wr_id, c.status))
    }

    fn page(&self, sge: &Sge) -> [u8; 4096] {
        let mut b = [0u8; 4096];
        self.mem.read(sge.vaddr, &mut b).unwrap();
        b
    }
}

/// SPEC §7: a stale READ_RESP after a restart is dropped by both the
/// verbs PSN check and the KDETH generation check, and places nothing.
///
/// Fails without the fix (checked): with the `[s_last_psn, s_psn]` check
/// taken out of `receive_read_resp`, the stale middle packet is not dropped
/// by the verbs PSN check (`psn_dropped` 0, expected 1). The stale last
/// packet's verbs PSN is `s_last_psn` itself, in range: only the
/// generation check (the flow left the generation when nothing was in
/// flight) drops it.
#[test]
fn stale_packets_after_a_restart_are_dropped_unplaced() {
    let mut w = world(16);
    let sges = scattered(&mut w.mem, 0x100, 4);
    w.post(1, &sges).unwrap();
    let old = World::responses(&w.send()[0]);
    // Packet 0 is lost; the rest arrive out of sequence.
    for r in &old[1..] {
        assert_eq!(
            w.receive(r, 0xAA),
            (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
        );
    }
    assert_eq!(w.stats().seq_restarts, 1, "one restart for the episode");
    let again = w.send();
    assert_eq!(again.len(), 1, "the READ_REQ goes out again");
    let new = World::responses(&again[0]);
    assert_eq!(new.len(), 4);
    assert_eq!(new[0].2.bth_psn, old[0].2.bth_psn, "the same flow PSNs");
    assert_eq!(new[0].2.verbs_psn, old[0].2.verbs_psn, "the same IB PSNs");
    // The repeated stream brings the chip back in sequence.
    for (i, r) in new.iter().enumerate() {
        let (err, v) = w.receive(r, 0xBB);
        assert_eq!(err, None, "packet {i} in sequence");
        assert_eq!(v, (i == 3).then_some(RespVerdict::Completed));
    }
    assert_eq!(w.poll(), Some((1, WcStatus::Success)));
    assert_eq!(w.in_use(), (0, 0), "TIDs and flow released");
    // Copies of the first stream show up late.
    let before = w.stats();
    let (err, v) = w.receive(&old[1], 0xEE);
    assert_eq!(v, Some(RespVerdict::Dropped), "{err:?}");
    assert_eq!(w.stats().psn_dropped, before.psn_dropped + 1, "verbs PSN");
    let (err, v) = w.receive(&old[3], 0xEE);
    assert_eq!(
        (err, v),
        (Some(RcvError::FlowGen), Some(RespVerdict::Dropped)),
        "the last packet's verbs PSN is s_last_psn: the generation check drops it"
    );
    for (i, s) in sges.iter().enumerate() {
        assert!(w.page(s).iter().all(|&x| x == 0xBB), "page {i}");
    }
    assert_eq!(w.stats().restarts, 1);
    assert_eq!(w.poll(), None);
}

/// Two one-segment READs in flight (A: flow PSNs 0..=3, B: 4..=7); A's
/// packet 0 is lost and everything else arrives, every packet a sequence
/// error: the first restarts both READs (their READ_REQs, returned, go
/// out again before the rest arrive, so those pass the IB PSN window).
fn lost_first_packet(w: &mut World) -> (Vec<Sge>, Vec<Sge>, Vec<Vec<u8>>) {
    let a = scattered(&mut w.mem, 0x100, 4);
    let b = scattered(&mut w.mem, 0x200, 4);
    w.post(1, &a).unwrap();
    w.post(2, &b).unwrap();
    let reqs = w.send();
    assert_eq!(reqs.len(), 2);
    let ra = World::responses(&reqs[0]);
    let rb = World::responses(&reqs[1]);
    assert_eq!(rb[0].2.bth_psn.seq(), ra[3].2.bth_psn.seq() + 1);
    assert_eq!(
        w.receive(&ra[1], 0xAA),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
    );
    let again = w.send();
    for r in ra[2..].iter().chain(&rb) {
        assert_eq!(
            w.receive(r, 0xAA),
            (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
        );
    }
    (a, b, again)
}

/// SPEC §7: no restart storm: one restart per error episode, however
/// many late packets follow the first sequence error, those of the later
/// READ B included (each of them shows READ A unfinished).
/// Kernel: the `RVT_R_RDMAR_SEQ` tests of `handle_read_kdeth_eflags()`.
///
/// Fails without the fix (checked): with the `rdmar_seq` test taken out
/// of the walk over earlier READs, each of B's four packets restarts A
/// again (`seq_restarts` 5).
#[test]
fn no_restart_storm_per_late_packet() {
    let mut w = world(16);
    let (_, _, again) = lost_first_packet(&mut w);
    let st = w.stats();
    assert_eq!((st.seq_errors, st.seq_restarts), (7, 1));
    assert_eq!(st.sw_dropped, 7, "first of the episode, then six ahead");
    assert_eq!(again.len(), 2, "both segments requested once more");
    assert_eq!(w.stats().restarts, 1);
}

/// SPEC §7: after a sequence error, packets of later segments do not
/// advance their flows: B's packets, placed by the chip while software
/// checked PSNs, do not complete B; only B's repeated stream does.
/// Kernel: `handle_read_kdeth_eflags()` (only the oldest segment is
/// checked).
///
/// Fails without the fix (checked): with the software check taken against
/// the packet's own segment, B's ahead packets are `Counted`, not
/// `Dropped`, the moment they arrive.
#[test]
fn later_segments_do_not_advance_after_a_sequence_error() {
    let mut w = world(16);
    let (a, b, again) = lost_first_packet(&mut w);
    assert_eq!(w.stats().segments_done, 0);
    let na = World::responses(&again[0]);
    let nb = World::responses(&again[1]);
    // A's stream: the chip stood at A's packet 0 and takes it in
    // sequence; A completes.
    for r in &na {
        assert_eq!(w.receive(r, 0xBB).0, None);
    }
    assert_eq!(w.stats().segments_done, 1, "B did not advance");
    for r in &nb {
        w.receive(r, 0xCC);
    }
    assert_eq!(w.stats().segments_done, 2);
    assert_eq!(w.poll(), Some((1, WcStatus::Success)));
    assert_eq!(w.poll(), Some((2, WcStatus::Success)));
    for s in &a {
        assert!(w.page(s).iter().all(|&x| x == 0xBB));
    }
    for s in &b {
        assert!(w.page(s).iter().all(|&x| x == 0xCC));
    }
    assert_eq!(w.in_use(), (0, 0));
}

/// SPEC §5: software PSN checking starts at the chip's next expected PSN
/// and asks for one restart; until the restart's READ_REQ is sent the IB
/// PSN window ends at the rewound `s_psn`; then a packet behind the
/// expected one is dropped (ending the restart episode), one ahead is
/// dropped without a new restart, the expected one is taken, and the
/// segment's last packet taken that way completes it.
/// Kernel: `handle_read_kdeth_eflags()`.
///
/// Fails without the fix (checked): with the behind branch not clearing
/// `rdmar_seq` the restart mark stays set; with the equal branch dropping,
/// the expected packet is `Dropped`, not `Counted`.
#[test]
fn software_psn_checking_drops_ahead_and_behind_and_takes_the_next() {
    let mut w = world(16);
    let sges = scattered(&mut w.mem, 0x100, 4);
    w.post(1, &sges).unwrap();
    let s = World::responses(&w.send()[0]);
    // 0 and 1 in sequence; 2 is late; 3 first: the episode starts with
    // the chip expecting 2.
    assert_eq!(w.receive(&s[0], 1), (None, None));
    assert_eq!(w.receive(&s[1], 2), (None, None));
    assert_eq!(
        w.receive(&s[3], 4),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
    );
    assert_eq!(w.stats().seq_restarts, 1);
    // Until the READ_REQ goes out again, the window ends at s_psn.
    let st = w.stats();
    assert_eq!(w.receive(&s[1], 2).1, Some(RespVerdict::Dropped));
    assert_eq!(w.stats().psn_dropped, st.psn_dropped + 1);
    let again = World::responses(&w.send()[0]);
    // A copy of 1 (behind): dropped. 3 again (ahead): dropped, and no
    // new restart in the episode.
    let st = w.stats();
    assert_eq!(w.receive(&s[1], 2).1, Some(RespVerdict::Dropped));
    assert_eq!(w.receive(&s[3], 4).1, Some(RespVerdict::Dropped));
    assert_eq!(w.stats().sw_dropped, st.sw_dropped + 2);
    assert_eq!(w.stats().seq_restarts, 1);
    // 2 arrives: the chip, still expecting it, takes it in sequence and
    // silently (its register moves to 3); software still expects 2.
    assert_eq!(w.receive(&s[2], 3), (None, None));
    // The repeated stream: 0 and 1 are behind both (dropped); 2 is behind
    // the chip but the one software expects (taken); 3 is in sequence
    // for the chip, delivered as a segment's last packet: complete.
    let st = w.stats();
    assert_eq!(w.receive(&again[0], 1).1, Some(RespVerdict::Dropped));
    assert_eq!(w.receive(&again[1], 2).1, Some(RespVerdict::Dropped));
    assert_eq!(w.stats().sw_dropped, st.sw_dropped + 2, "behind");
    assert_eq!(
        w.receive(&again[2], 3),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Counted))
    );
    assert_eq!(
        w.receive(&again[3], 4),
        (None, Some(RespVerdict::Completed))
    );
    assert_eq!(w.poll(), Some((1, WcStatus::Success)));
    for (i, sg) in sges.iter().enumerate() {
        assert!(w.page(sg).iter().all(|&x| x == i as u8 + 1), "page {i}");
    }
    assert_eq!(w.in_use(), (0, 0));
}

/// A sequence error whose flow PSN names no segment of the QP is judged
/// against the oldest segment, as every sequence error is: the first of
/// an episode restarts the oldest READ; nothing completes in error.
/// Kernel: `handle_read_kdeth_eflags()` (`req->flows[req->clear_tail]`).
///
/// Fails with the segment search the engine had (checked): the packet
/// was taken for a lost track, and READ 1 completed `LOC_QP_OP_ERR`.
#[test]
fn a_sequence_error_naming_no_segment_restarts_the_oldest() {
    let mut w = world(16);
    let a = scattered(&mut w.mem, 0x100, 4);
    let b = scattered(&mut w.mem, 0x200, 4);
    w.post(1, &a).unwrap();
    w.post(2, &b).unwrap();
    let reqs = w.send();
    let s = World::responses(&reqs[0]);
    // Packet 3's header with a flow sequence far past every segment.
    let mut bad = s[3];
    bad.2.bth_psn = FlowPsn::new(bad.2.bth_psn.generation(), bad.2.bth_psn.seq() + 100);
    let (err, v) = w.receive(&bad, 0xEE);
    assert_eq!(
        (err, v),
        (Some(RcvError::FlowSeq), Some(RespVerdict::Dropped))
    );
    assert_eq!(w.stats().seq_restarts, 1);
    assert_eq!(w.poll(), None);
    assert_eq!(w.send().len(), 2, "both READs requested again");
}

/// SPEC §7: a QP destroyed while it waits for TID space leaves the queue
/// and drops the reference the queue held (no leak, no use after free).
///
/// Fails without the fix (checked): with `flush` not unwinding the TID
/// wait (`qp_wait::flush_wait`), the QP is still waiting after the flush.
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
        assert_eq!(g.ext.requester.stats.tid_waits, 1);
        let (_, tok) = g.parts();
        let e = w.rcd.exp_lock.lock(tok);
        assert_eq!(e.waiters.len(QueueKind::RcvArray), 1);
    }
    assert_eq!(w.qp.live_refs(), base + 1, "the queue holds a reference");
    let mut root = LockToken::root();
    let mut g = w.qp.s_lock.lock(&mut root);
    qp::flush(&w.rcd, &w.qp, &mut g);
    assert!(!g.waiting());
    assert_eq!(
        g.ext.requester.poll().map(|c| (c.wr_id, c.status)),
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

/// A PSN NAK restarts at its PSN; a remote access NAK completes the READ
/// `REM_ACCESS_ERR` and releases everything. Kernel: `do_rc_ack()`.
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
        let _ = qp::receive_ack(&w.rcd, &w.qp, &mut g, Psn::new(7), &nak);
    }
    assert_eq!(w.send().len(), 1, "READ_REQ sent again");
    let mut g = w.qp.s_lock.lock(&mut root);
    assert_eq!(g.ext.requester.stats.restarts, 1);
    let fatal = aeth::Repr {
        syndrome: aeth::NakCode::RemoteAccessError.syndrome(),
        msn: 0,
    };
    let _ = qp::receive_ack(&w.rcd, &w.qp, &mut g, Psn::new(7), &fatal);
    assert_eq!(
        g.ext.requester.poll().map(|c| c.status),
        Some(WcStatus::RemoteAccess)
    );
    drop(g);
    assert_eq!(w.in_use(), (0, 0));
    assert_eq!(w.rcd.dma.live_mappings(), 0);
}

/// A READ that is not page-aligned, or empty, is accepted (as a plain
/// READ); the send queue holds 16.
#[test]
fn posting_takes_any_scatter_list_until_the_queue_is_full() {
    let mut w = world(16);
    let odd = [Sge {
        vaddr: 0x1800,
        length: 4096,
    }];
    w.post(1, &odd).unwrap();
    w.post(2, &[]).unwrap();
    let sges = scattered(&mut w.mem, 0x100, 1);
    for i in 2..16 {
        w.post(i, &sges).unwrap();
    }
    assert_eq!(w.post(16, &sges), Err(EngineError::QueueFull));
    let st = w.stats();
    assert_eq!(st.not_qualified, 16, "plain READs");
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
    assert_eq!(g.ext.requester.stats.psn_dropped, 1);
    assert_eq!(
        g.ext.requester.stats.segments_done, 0,
        "no completion from a bad PSN"
    );
}
