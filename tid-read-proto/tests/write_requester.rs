// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA WRITE requester and its second leg, with the responder
//! played by the test through the wire builders: the WRITE_REQ's bytes,
//! WRITE_DATA per segment after each WRITE_RESP (header, flow PSNs, SH,
//! payload from the source memory), completion with the byte count after
//! the TID ACKs, a PSN NAK that resends from its packet, the plain RDMA
//! WRITE path, the READ/WRITE interlock in the real send path, bad
//! input, and nothing held at the end.

use hfi1_hal::consts::{
    OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST, OP_TID_RDMA_WRITE_REQ,
};
use hfi1_hal::lock_order::LockToken;
use hfi1_hal::sim::SimMemory;
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Psn, TidCtrl, TidEntry};
use tid_flow::{RcvCtxt, Sge};
use tid_harness::doubles::{self, Outbox, PageAllocator};
use tid_harness::platform::{SoftPlatform, SoftQp, new_ctxt, new_qp};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::Path;
use tid_read_proto::qp;
use tid_read_proto::rc::{Completion, Connection, SourceData, WcStatus};
use tid_read_proto::requester::ReadWr;
use tid_read_proto::wire::tid_ack::{AckFields, AckKind};
use tid_read_proto::wire::{
    aeth, frame, reth, tid_ack, tid_entries, write_data, write_req, write_resp,
};
use tid_read_proto::write::requester::{
    OP_RDMA_WRITE_FIRST, OP_RDMA_WRITE_LAST, OP_RDMA_WRITE_MIDDLE, TidAckVerdict, WriteRespVerdict,
    WriteWr,
};
use tid_read_proto::write::second_leg;

const REMOTE: u64 = 0x5000_0000;
const SEG: u32 = 256 * 1024;
const GEN: u32 = 9;

/// The local memory as the engines' source.
struct Src<'a>(&'a SimMemory);

impl SourceData for Src<'_> {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        self.0.read(vaddr, out).is_ok()
    }
}

/// One requester QP on its own context; the test plays the responder.
struct World {
    rcd: Box<RcvCtxt<SoftPlatform>>,
    qp: SoftQp,
    mem: SimMemory,
    remote: TidParams,
}

fn world() -> World {
    let remote = TidParams::local(2, 32, 14, false);
    let conn = Connection {
        verbs_qpn: 0x100,
        remote_verbs_qpn: 0x400,
        local: TidParams::local(1, 32, 14, false),
        remote,
        pmtu: 4096,
        path: Path { dlid: 2, slid: 1 },
        ..Connection::default()
    };
    World {
        rcd: new_ctxt(1, 8, 4, 9).unwrap(),
        qp: new_qp(0x100, 0, 0, conn, Psn::new(7)),
        mem: SimMemory::new(),
        remote,
    }
}

impl World {
    /// `len` bytes of scattered local pages holding the pattern of the
    /// remote range they are written to.
    fn source(&mut self, pfn: u64, len: u32, remote: u64) -> Vec<Sge> {
        let sges = PageAllocator::new(pfn).scattered(u64::from(len.div_ceil(4096)));
        doubles::map(&mut self.mem, &sges);
        let mut off = 0u64;
        for s in &sges {
            let mut b = vec![0u8; s.length as usize];
            doubles::fill_pattern(remote + off, &mut b);
            self.mem.write(s.vaddr, &b).unwrap();
            off += u64::from(s.length);
        }
        sges
    }

    /// A 256 KiB TID WRITE posted, its WRITE_REQ out, its WRITE_RESP
    /// taken and all its data sent.
    fn one_segment_sent(&mut self) {
        let src = self.source(0x1000, SEG, REMOTE);
        self.post_write(1, REMOTE, &src);
        assert_eq!(self.first_leg().len(), 1);
        assert_eq!(self.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
        assert_eq!(self.second_leg().len(), 64);
    }

    /// A TID WRITE of `segs` 256 KiB segments posted, its WRITE_REQ out,
    /// the first WRITE_RESP taken and that segment's data sent.
    fn first_of_segments_sent(&mut self, segs: u32) {
        let src = self.source(0x1000, segs * SEG, REMOTE);
        self.post_write(1, REMOTE, &src);
        assert_eq!(self.first_leg().len(), 1);
        assert_eq!(self.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
        assert_eq!(self.second_leg().len(), 64);
    }

    fn post_write(&self, wr_id: u64, remote: u64, sges: &[Sge]) {
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        qp::post_write(
            &self.rcd,
            &self.qp,
            &mut g,
            &WriteWr {
                wr_id,
                remote_addr: remote,
                rkey: 9,
                sges,
            },
        )
        .unwrap();
    }

    fn post_read(&self, wr_id: u64, sges: &[Sge]) {
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        qp::post_read(
            &self.rcd,
            &self.qp,
            &mut g,
            &ReadWr {
                wr_id,
                remote_addr: REMOTE,
                rkey: 9,
                sges,
            },
        )
        .unwrap();
    }

    /// Runs the first leg once per pending schedule.
    fn first_leg(&self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        let mut s = Outbox::new();
        while let Some(qp) = self.rcd.sched.pop_send() {
            qp::send_engine_with(&self.rcd, &qp, &mut root, &mut s, &Src(&self.mem)).unwrap();
        }
        s.drain().collect()
    }

    /// Runs the second leg once per pending work item.
    fn second_leg(&self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        let mut s = Outbox::new();
        while let Some((_, qp)) = self.rcd.sched.pop_tid_send() {
            second_leg::do_tid_send(&self.rcd, &qp, &mut root, &mut s, &Src(&self.mem)).unwrap();
        }
        s.drain().collect()
    }

    /// A WRITE_RESP for a segment at IB PSN `psn` over `entries`, flow
    /// sequences from `spsn`.
    fn write_resp(&self, psn: u32, spsn: u32, entries: &[TidEntry]) -> WriteRespVerdict {
        self.write_resp_in(GEN, psn, spsn, entries)
    }

    /// [`Self::write_resp`] with its flow PSNs in generation `generation`.
    fn write_resp_in(
        &self,
        generation: u32,
        psn: u32,
        spsn: u32,
        entries: &[TidEntry],
    ) -> WriteRespVerdict {
        let b = write_resp::build(&write_resp::WriteRespFields {
            remote_qp: TidParams::local(1, 32, 14, false).qp,
            remote_jkey: 32,
            remote_verbs_qp: 0x100,
            aeth: aeth::Repr {
                syndrome: 0x1F,
                msn: 1,
            },
            generation: Generation::new(generation).unwrap(),
            spsn,
            local_qp: self.remote.qp,
            flow: FlowIndex::new(3).unwrap(),
            ctxt: 2,
            ib_psn: Psn::new(psn),
        });
        let mut payload = vec![0u8; entries.len() * 4];
        tid_entries::emit(entries, &mut payload).unwrap();
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        qp::receive_write_resp(
            &self.rcd,
            &self.qp,
            &mut g,
            Psn::new(psn),
            &b.header,
            &payload,
        )
    }

    /// A TID ACK (`nak`: a PSN NAK expecting `seq`) for the segment
    /// whose WRITE_RESP had IB PSN `resp_psn`.
    fn tid_ack(&self, resp_psn: u32, seq: u32, nak: bool) -> TidAckVerdict {
        let g9 = Generation::new(GEN).unwrap();
        let kind = if nak {
            AckKind::Nak {
                expected: FlowPsn::new(g9, seq),
            }
        } else {
            AckKind::Segment {
                last: FlowPsn::new(g9, seq),
            }
        };
        self.tid_ack_of(resp_psn, kind, if nak { 0x60 } else { 0x1F })
    }

    /// A TID ACK of `kind` with AETH `syndrome`.
    fn tid_ack_of(&self, resp_psn: u32, kind: AckKind, syndrome: u8) -> TidAckVerdict {
        let b = tid_ack::build(&AckFields {
            remote_qp: TidParams::local(1, 32, 14, false).qp,
            remote_jkey: 32,
            remote_verbs_qp: 0x100,
            aeth: aeth::Repr { syndrome, msn: 1 },
            local_qp: self.remote.qp,
            flow: FlowIndex::new(3).unwrap(),
            ctxt: 2,
            resp_ib_psn: Psn::new(resp_psn),
            kind,
        });
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        qp::receive_tid_ack(
            &self.rcd,
            &self.qp,
            &mut g,
            FlowPsn::from_raw(b.bth.psn.get()),
            &b.header,
        )
    }

    /// The TID ACK of flow sequence `seq` completes the only WRITE
    /// successfully; the first leg then has nothing to send and nothing
    /// is held.
    fn complete_with_ack(&self, resp_psn: u32, seq: u32) {
        assert!(matches!(
            self.tid_ack(resp_psn, seq, false),
            TidAckVerdict::Acked { completed: 1, .. }
        ));
        assert_eq!(self.poll().map(|c| c.status), Some(WcStatus::Success));
        assert!(self.first_leg().is_empty());
        assert_eq!(self.held(), (0, 1));
    }

    /// An RNR NAK (timer index 2) for IB PSN `psn`: nothing goes until
    /// the RNR timer fires; returns what the first leg sends then.
    fn rnr_nak_then_timer(&self, psn: u32) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        let rnr = aeth::Repr {
            syndrome: 0x22,
            msn: 0,
        };
        let _ = qp::receive_ack(&self.rcd, &self.qp, &mut g, Psn::new(psn), &rnr);
        assert!(g.ext.requester.rnr_timer().is_armed());
        drop(g);
        assert!(self.first_leg().is_empty());
        let mut g = self.qp.s_lock.lock(&mut root);
        assert!(qp::rnr_timeout(&self.rcd, &self.qp, &mut g));
        drop(g);
        self.first_leg()
    }

    /// The RESYNC ACK `resync` taken: the second leg resends `n` packets
    /// in generation `GEN + 1` from sequence 0, carrying the segment's
    /// pages from page `from`; returns them.
    fn resync_acked(&self, resync: AckKind, n: usize, from: u64) -> Vec<Vec<u8>> {
        let v = self.tid_ack_of(7, resync, 0x1F);
        assert!(matches!(v, TidAckVerdict::Acked { segments: 0, .. }));
        let again = self.second_leg();
        assert_eq!(again.len(), n);
        for (k, p) in again.iter().enumerate() {
            let f = frame::parse(p).unwrap();
            assert_eq!(f.bth.psn.get(), (GEN + 1) << 11 | k as u32);
            let v = write_data::Packet::new_checked(f.body).unwrap();
            let at = REMOTE + 4096 * (from + k as u64);
            assert_eq!(doubles::mismatched_bytes(at, v.payload()), 0);
        }
        again
    }

    /// The TID retry timer expires (it was running); returns what the
    /// second leg sends then.
    fn tid_retry_expiry(&self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        assert!(qp::tid_retry_timeout(&self.rcd, &self.qp, &mut g));
        drop(g);
        self.second_leg()
    }

    fn poll(&self) -> Option<Completion> {
        let mut root = LockToken::root();
        self.qp.s_lock.lock(&mut root).ext.requester.poll()
    }

    /// Flow records, QP references and region pages held beyond the QP's
    /// own.
    fn held(&self) -> (usize, usize) {
        (self.rcd.mem.live_allocations(), self.qp.live_refs())
    }

    /// The requester's `s_last_psn` and work requests not completed.
    fn last_psn_and_outstanding(&self) -> (u32, u32) {
        let mut root = LockToken::root();
        let g = self.qp.s_lock.lock(&mut root);
        let r = &g.ext.requester;
        (r.last_psn().get(), r.outstanding())
    }
}

/// The TID ACK of a one-segment TID WRITE's last packet completes it,
/// successfully and with its byte count, and nothing is left outstanding.
/// Kernel: `hfi1_rc_rcv_tid_rdma_ack()` → `do_rc_completion()`.
#[test]
fn a_tid_write_completes_with_its_tid_ack() {
    let mut w = world();
    let src = w.source(0x1000, SEG, REMOTE);
    w.post_write(1, REMOTE, &src);
    assert_eq!(w.first_leg().len(), 1, "the WRITE_REQ");
    assert_eq!(w.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
    assert_eq!(w.second_leg().len(), 64);
    assert_eq!(w.poll(), None, "not before its TID ACK");
    assert!(matches!(
        w.tid_ack(7, 63, false),
        TidAckVerdict::Acked { completed: 1, .. }
    ));
    assert_eq!(
        w.poll(),
        Some(Completion {
            wr_id: 1,
            length: SEG,
            status: WcStatus::Success
        })
    );
    assert_eq!(w.last_psn_and_outstanding(), (7, 0));
}

/// Two one-segment TID WRITEs (IB PSNs 7 and 8) with both WRITE_RESPs
/// taken: `s_last_psn` is 8. The first WRITE's TID ACK then completes it,
/// leaving the second (and only it) outstanding, without moving
/// `s_last_psn` back to its own last PSN (7), which would take a
/// duplicate of the second WRITE_RESP for a new one; the second's TID ACK
/// completes it. Kernel: `do_rc_completion()` moves `s_acked` one on
/// (`s_cur` is past it) and `s_last_psn` only for a request that is not a
/// TID WRITE (whose TID ACKs come after later requests' WRITE_RESPs).
#[test]
fn a_tid_writes_completion_does_not_move_s_last_psn_back() {
    let mut w = world();
    let first = w.source(0x1000, SEG, REMOTE);
    let second = w.source(0x3000, SEG, REMOTE + u64::from(SEG));
    w.post_write(1, REMOTE, &first);
    w.post_write(2, REMOTE + u64::from(SEG), &second);
    assert_eq!(w.first_leg().len(), 2, "both WRITE_REQs");
    assert_eq!(w.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
    assert_eq!(w.write_resp(8, 64, &entries(64)), WriteRespVerdict::Taken);
    assert_eq!(w.second_leg().len(), 128);
    assert_eq!(w.last_psn_and_outstanding(), (8, 2));
    assert!(matches!(
        w.tid_ack(7, 63, false),
        TidAckVerdict::Acked { completed: 1, .. }
    ));
    assert_eq!(w.last_psn_and_outstanding(), (8, 1), "s_last_psn kept");
    assert_eq!(
        w.poll().map(|c| (c.wr_id, c.status)),
        Some((1, WcStatus::Success))
    );
    assert_eq!(
        w.write_resp(8, 64, &entries(64)),
        WriteRespVerdict::Dropped,
        "a duplicate"
    );
    assert!(matches!(
        w.tid_ack(8, 127, false),
        TidAckVerdict::Acked { completed: 1, .. }
    ));
    assert_eq!(
        w.poll().map(|c| (c.wr_id, c.status)),
        Some((2, WcStatus::Success))
    );
    assert_eq!(w.last_psn_and_outstanding(), (8, 0));
}

/// The RESYNC ACK into `newest` of a two-segment WRITE whose responder
/// had the first segment's first 40 packets: the second leg resends the
/// other 24 and the second segment's 64 as `newest`:0..87; an ACK of 23
/// acknowledges the first segment, one of 47 nothing of the second, the
/// one of 87 completes the WRITE.
fn resync_then_24_and_64(w: &World, newest: Generation) {
    let g = |seq| FlowPsn::new(newest, seq);
    let resync = AckKind::Resync {
        generation: newest,
        saved: FlowPsn::new(Generation::new(GEN).unwrap(), 39),
    };
    let v = w.tid_ack_of(7, resync, 0x1F);
    assert!(
        matches!(v, TidAckVerdict::Acked { segments: 0, .. }),
        "{v:?}"
    );
    let data = w.second_leg();
    assert_eq!(data.len(), 24 + 64);
    for (k, p) in data.iter().enumerate() {
        let f = frame::parse(p).unwrap();
        assert_eq!(f.bth.psn.get(), g(k as u32).raw());
    }
    // Each ACK names the WRITE_RESP of the segment it reaches; what it
    // did as (segments acknowledged, WRITEs completed).
    let ack = |resp, seq| match w.tid_ack_of(resp, AckKind::Segment { last: g(seq) }, 0x1F) {
        TidAckVerdict::Acked {
            segments,
            completed,
        } => Some((segments, completed)),
        _ => None,
    };
    assert_eq!(ack(7, 23), Some((1, 0)), "the first segment");
    assert_eq!(ack(8, 47), Some((0, 0)), "the second's sequence 47");
    assert_eq!(ack(8, 87), Some((1, 1)), "the second's last");
    assert_eq!(w.poll().map(|c| c.status), Some(WcStatus::Success));
}

/// Four TID entries of 16 pages: one 256 KiB segment.
/// The one WRITE_REQ in `out`, at IB PSN `psn`: its RETH address and
/// length.
fn only_write_req(out: &[Vec<u8>], psn: u32) -> (u64, u32) {
    assert_eq!(out.len(), 1);
    let f = frame::parse(&out[0]).unwrap();
    assert_eq!(
        (f.bth.opcode, f.bth.psn),
        (OP_TID_RDMA_WRITE_REQ, Psn::new(psn))
    );
    let r = write_req::Repr::parse(&write_req::Packet::new_checked(f.body).unwrap()).unwrap();
    (r.reth.vaddr, r.reth.length)
}

fn entries(base: u32) -> Vec<TidEntry> {
    (0..4)
        .map(|i| TidEntry::new(base + 8 * i, TidCtrl::Pair, 16).unwrap())
        .collect()
}

/// Checks a segment's WRITE_DATA stream: 64 packets in flow PSN order
/// from `spsn`, SH on all but the last, the last asking for an ACK and
/// carrying `last_op`, every payload the pattern of the remote bytes at
/// `remote`.
fn check_segment(pkts: &[Vec<u8>], spsn: u32, remote: u64, last_op: u8) {
    assert_eq!(pkts.len(), 64);
    for (k, p) in pkts.iter().enumerate() {
        let f = frame::parse(p).unwrap();
        let last = k == 63;
        let want = if last {
            last_op
        } else {
            OP_TID_RDMA_WRITE_DATA
        };
        assert_eq!(f.bth.opcode, want, "packet {k}");
        assert_eq!(
            f.bth.psn.get(),
            FlowPsn::new(Generation::new(GEN).unwrap(), spsn + k as u32).raw()
        );
        assert_eq!(f.bth.ack_req, last);
        // tid_flow_qp: responder KDETH QP | flow 3 << 11 | ctxt 2.
        assert_eq!(
            f.bth.dest_qp,
            (TidParams::local(2, 32, 14, false).qp & !0xFFFF) | 3 << 11 | 2
        );
        let v = write_data::Packet::new_checked(f.body).unwrap();
        let h = write_data::Repr::parse(&v).unwrap();
        assert_eq!(h.kdeth.kdeth0.sh(), !last);
        assert_eq!(h.verbs_qp, 0x400);
        let data = v.payload();
        assert_eq!(data.len(), 4096);
        assert_eq!(
            doubles::mismatched_bytes(remote + 4096 * k as u64, data),
            0,
            "packet {k} payload"
        );
    }
}

/// Kernel: `hfi1_build_tid_rdma_write_req()`, `hfi1_rc_rcv_tid_rdma_write_resp()`,
/// `hfi1_make_tid_rdma_pkt()`, `hfi1_rc_rcv_tid_rdma_ack()`. A 512 KiB
/// TID WRITE: one WRITE_REQ with the kernel's header, each WRITE_RESP
/// schedules the second leg, which sends that segment's 64 packets (the
/// very last a WRITE_DATA_LAST), and the second TID ACK completes the
/// WRITE with its byte count; nothing is held afterwards.
#[test]
fn tid_write_round_trip() {
    let mut w = world();
    let src = w.source(0x1000, 2 * SEG, REMOTE);
    w.post_write(1, REMOTE, &src);
    let out = w.first_leg();
    assert_eq!(out.len(), 1);
    let f = frame::parse(&out[0]).unwrap();
    assert_eq!(f.bth.opcode, OP_TID_RDMA_WRITE_REQ);
    assert_eq!(f.bth.psn, Psn::new(7));
    assert!(f.bth.ack_req);
    assert_eq!(f.bth.dest_qp, w.remote.qp);
    let r = write_req::Repr::parse(&write_req::Packet::new_checked(f.body).unwrap()).unwrap();
    assert_eq!(
        r.reth,
        reth::Repr {
            vaddr: REMOTE,
            rkey: 9,
            length: 2 * SEG
        }
    );
    assert_eq!(r.verbs_qp, 0x400);
    assert_eq!(r.kdeth.kdeth1.raw(), 32);
    // No data before a response.
    assert!(w.second_leg().is_empty());

    assert_eq!(w.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
    let seg0 = w.second_leg();
    check_segment(&seg0, 0, REMOTE, OP_TID_RDMA_WRITE_DATA);
    assert_eq!(w.write_resp(8, 64, &entries(64)), WriteRespVerdict::Taken);
    let seg1 = w.second_leg();
    check_segment(
        &seg1,
        64,
        REMOTE + u64::from(SEG),
        OP_TID_RDMA_WRITE_DATA_LAST,
    );

    assert_eq!(
        w.tid_ack(7, 63, false),
        TidAckVerdict::Acked {
            segments: 1,
            completed: 0
        }
    );
    assert_eq!(w.poll(), None);
    assert_eq!(
        w.tid_ack(8, 127, false),
        TidAckVerdict::Acked {
            segments: 1,
            completed: 1
        }
    );
    assert_eq!(
        w.poll(),
        Some(Completion {
            wr_id: 1,
            length: 2 * SEG,
            status: WcStatus::Success
        })
    );
    // The ACK schedules the first leg, which has nothing to send.
    assert!(w.first_leg().is_empty());
    let mut root = LockToken::root();
    let g = w.qp.s_lock.lock(&mut root);
    let ws = g.ext.requester.write_state();
    assert_eq!(ws.started(), 0);
    assert!(!ws.tid_retry_timer().is_armed());
    assert!(!g.ext.requester.retry_timer().is_armed());
    assert_eq!(ws.stats.data_packets, 128);
    assert_eq!(ws.stats.segments_acked, 2);
    drop(g);
    assert_eq!(w.held(), (0, 1));
}

/// Kernel: the PSN-sequence NAK branch of `hfi1_rc_rcv_tid_rdma_ack()`
/// and `hfi1_tid_rdma_restart_req()`. A NAK expecting packet 10 of the
/// only segment makes the second leg resend from exactly that packet, its
/// payload the right bytes; the later ACK completes the WRITE.
#[test]
fn psn_nak_resends_from_its_packet() {
    let mut w = world();
    w.one_segment_sent();
    assert_eq!(w.tid_ack(7, 10, true), TidAckVerdict::Restart);
    let again = w.second_leg();
    assert_eq!(again.len(), 54);
    let f = frame::parse(&again[0]).unwrap();
    assert_eq!(f.bth.psn.get() & 0x7FF, 10);
    let v = write_data::Packet::new_checked(f.body).unwrap();
    assert_eq!(
        doubles::mismatched_bytes(REMOTE + 10 * 4096, v.payload()),
        0
    );
    let last = frame::parse(again.last().unwrap()).unwrap();
    assert_eq!(last.bth.opcode, OP_TID_RDMA_WRITE_DATA_LAST);
    w.complete_with_ack(7, 63);
}

/// Kernel: `hfi1_setup_tid_rdma_wqe()` (WRITE half) and the
/// `IB_WR_RDMA_WRITE` case of `hfi1_make_rc_req()`. A WRITE to an
/// unaligned remote address stays a plain RDMA WRITE: FIRST (with RETH),
/// MIDDLE, LAST packets at consecutive IB PSNs carrying the source bytes,
/// completed by the RC ACK of its last PSN.
#[test]
fn unaligned_write_goes_plain_and_completes_on_the_rc_ack() {
    let mut w = world();
    let remote = REMOTE + 0x200;
    let src = w.source(0x1000, 3 * 4096, remote);
    w.post_write(5, remote, &src);
    let out = w.first_leg();
    let ops: Vec<u8> = out
        .iter()
        .map(|p| frame::parse(p).unwrap().bth.opcode)
        .collect();
    assert_eq!(
        ops,
        [
            OP_RDMA_WRITE_FIRST,
            OP_RDMA_WRITE_MIDDLE,
            OP_RDMA_WRITE_LAST
        ]
    );
    for (k, p) in out.iter().enumerate() {
        let f = frame::parse(p).unwrap();
        assert_eq!(f.bth.psn, Psn::new(7 + k as u32));
        assert_eq!(f.bth.dest_qp, 0x400);
        let data = if k == 0 {
            let r = reth::Repr::parse(&reth::Packet::new_checked(f.body).unwrap()).unwrap();
            assert_eq!((r.vaddr, r.length), (remote, 3 * 4096));
            &f.body[reth::HEADER_LEN..]
        } else {
            f.body
        };
        assert_eq!(doubles::mismatched_bytes(remote + 4096 * k as u64, data), 0);
    }
    let mut root = LockToken::root();
    let mut g = w.qp.s_lock.lock(&mut root);
    let a = aeth::Repr {
        syndrome: 0x1F,
        msn: 1,
    };
    let _ = qp::receive_ack(&w.rcd, &w.qp, &mut g, Psn::new(9), &a);
    drop(g);
    assert_eq!(
        w.poll(),
        Some(Completion {
            wr_id: 5,
            length: 3 * 4096,
            status: WcStatus::Success
        })
    );
    assert_eq!(w.held(), (0, 1));
}

/// Kernel: `hfi1_tid_rdma_wqe_interlock()` and `do_rc_completion()`. A
/// READ posted after a TID WRITE waits in the real first leg until the
/// WRITE's last segment is acknowledged; then its request goes out.
/// With the rule taken out (`prev_write_pending` false in
/// `Requester::interlocked`) the READ request leaves with the WRITE_REQ.
#[test]
fn read_after_unfinished_tid_write_waits() {
    let mut w = world();
    let src = w.source(0x1000, SEG, REMOTE);
    let dst = w.source(0x9000, 8192, REMOTE);
    w.post_write(1, REMOTE, &src);
    w.post_read(2, &dst);
    let out = w.first_leg();
    let ops: Vec<u8> = out
        .iter()
        .map(|p| frame::parse(p).unwrap().bth.opcode)
        .collect();
    assert_eq!(ops, [OP_TID_RDMA_WRITE_REQ]);
    assert_eq!(w.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
    assert_eq!(w.second_leg().len(), 64);
    // The data is out, not acknowledged: still held.
    assert!(w.first_leg().is_empty());
    assert!(matches!(
        w.tid_ack(7, 63, false),
        TidAckVerdict::Acked { completed: 1, .. }
    ));
    let out = w.first_leg();
    assert_eq!(out.len(), 1);
    // An RDMA READ request (the READ is 8 KiB, under the TID threshold).
    assert_eq!(frame::parse(&out[0]).unwrap().bth.opcode, 0x0C);
    assert_eq!(frame::parse(&out[0]).unwrap().bth.psn, Psn::new(8));
}

/// Kernel: `do_rc_completion()` and the `TID_OP(WRITE_RESP)` case of
/// `hfi1_make_rc_req()`. A TID WRITE with a plain READ interlocked behind
/// it: an RNR NAK (a late one, the WRITE_RESP already taken) backs the
/// send state up to the WRITE (`TID_OP(WRITE_RESP)`, `s_cur` at it) while
/// the RNR timer holds the send engine; the TID ACK then completes the
/// WRITE, which moves `s_cur` on to the READ, the next request not yet
/// started. When the RNR timer fires, the READ request goes out.
///
/// Deviation from 6.1, whose completion resets the send state only when
/// a started request follows: the state names the WRITE's resend while
/// `s_cur` is at the READ, and 6.1's send engine would build a WRITE_REQ
/// from the READ's WQE. With the send state kept (checked), nothing was
/// sent, no timer ran and the READ never went: the fuzz world's
/// `write_pair` input `interlocked-read-never-sent` (an RC retry expiry
/// and a TID retry expiry in one step) ended that way.
#[test]
fn a_write_completing_under_a_restart_lets_the_read_behind_it_go() {
    let mut w = world();
    let src = w.source(0x1000, SEG, REMOTE);
    let dst = w.source(0x9000, 8192, REMOTE);
    w.post_write(1, REMOTE, &src);
    w.post_read(2, &dst);
    assert_eq!(only_write_req(&w.first_leg(), 7), (REMOTE, SEG));
    assert_eq!(w.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
    assert_eq!(w.second_leg().len(), 64);
    let mut root = LockToken::root();
    let mut g = w.qp.s_lock.lock(&mut root);
    let rnr = aeth::Repr {
        syndrome: 0x22,
        msn: 0,
    };
    let _ = qp::receive_ack(&w.rcd, &w.qp, &mut g, Psn::new(8), &rnr);
    assert!(g.ext.requester.rnr_timer().is_armed());
    drop(g);
    assert!(w.first_leg().is_empty());
    assert!(matches!(
        w.tid_ack(7, 63, false),
        TidAckVerdict::Acked { completed: 1, .. }
    ));
    assert_eq!(w.poll().map(|c| c.status), Some(WcStatus::Success));
    // The RNR timer still holds the send engine.
    assert!(w.first_leg().is_empty());
    let mut g = w.qp.s_lock.lock(&mut root);
    assert!(qp::rnr_timeout(&w.rcd, &w.qp, &mut g));
    drop(g);
    let out = w.first_leg();
    assert_eq!(out.len(), 1);
    let f = frame::parse(&out[0]).unwrap();
    assert_eq!((f.bth.opcode, f.bth.psn), (0x0C, Psn::new(8)));
}

/// Kernel: the checks of `hfi1_rc_rcv_tid_rdma_write_resp()` and
/// `hfi1_rc_rcv_tid_rdma_ack()`. Bad input is dropped or fails the QP
/// with a status, never panics: a WRITE_RESP before any WRITE_REQ, one
/// at a PSN ahead, a TID ACK with nothing outstanding, a WRITE_RESP
/// whose TID list does not cover the segment (LOC_LEN_ERR, the QP in
/// error, everything released).
#[test]
fn bad_input_is_dropped_or_fails_the_qp() {
    let mut w = world();
    assert_eq!(w.write_resp(7, 0, &entries(0)), WriteRespVerdict::Dropped);
    assert_eq!(w.tid_ack(7, 63, false), TidAckVerdict::Dropped);
    let src = w.source(0x1000, 2 * SEG, REMOTE);
    w.post_write(1, REMOTE, &src);
    assert_eq!(w.first_leg().len(), 1);
    assert_eq!(w.write_resp(100, 0, &entries(0)), WriteRespVerdict::Dropped);
    assert_eq!(w.write_resp(8, 0, &entries(0)), WriteRespVerdict::Dropped);
    // A stale ACK for a segment never responded to.
    assert_eq!(w.tid_ack(7, 63, false), TidAckVerdict::Dropped);
    let short = [TidEntry::new(0, TidCtrl::Pair, 16).unwrap()];
    assert_eq!(
        w.write_resp(7, 0, &short),
        WriteRespVerdict::Fatal(WcStatus::LocalLength)
    );
    assert_eq!(w.poll().map(|c| c.status), Some(WcStatus::LocalLength));
    while w.rcd.sched.pop_send().is_some() {}
    while w.rcd.sched.pop_tid_send().is_some() {}
    assert_eq!(w.held(), (0, 1));
}

/// Kernel: the RNR case of `do_rc_ack()` for a TID WRITE
/// (`reset_psn(s_last_psn + 1)`) and `rvt_rc_rnr_retry()`. An RNR NAK for
/// the WRITE_REQ's PSN (the responder had no TIDs) stops sending until
/// the RNR timer fires; then the whole WRITE_REQ goes again at the same
/// PSN and the WRITE completes normally.
#[test]
fn rnr_nak_on_write_req_resends_it_whole_after_the_timer() {
    let mut w = world();
    let src = w.source(0x1000, SEG, REMOTE);
    w.post_write(1, REMOTE, &src);
    assert_eq!(w.first_leg().len(), 1);
    let out = w.rnr_nak_then_timer(7);
    assert_eq!(only_write_req(&out, 7), (REMOTE, SEG));
    assert_eq!(w.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
    check_segment(&w.second_leg(), 0, REMOTE, OP_TID_RDMA_WRITE_DATA_LAST);
    w.complete_with_ack(7, 63);
}

/// Kernel: the RNR case of `do_rc_ack()` for a TID WRITE
/// (`reset_psn(s_last_psn + 1)`, `s_last_psn` left alone). A 3-segment
/// WRITE: the first WRITE_RESP comes, the second is lost, and the
/// responder (out of TIDs) RNR-NAKs the third segment's PSN. After the
/// RNR timer the WRITE_REQ goes again from the segment whose WRITE_RESP
/// never came (PSN 8, its address, two segments' length), which the
/// responder takes as a duplicate and answers with the WRITE_RESP it
/// holds. With the RNR case moving `s_last_psn` to the NAK's PSN - 1 as
/// for other operations, the resend started at PSN 9 (asserted PSN 8,
/// got 9): the responder RNR-NAKs that forever while it holds segment
/// 8's TIDs for data never sent.
#[test]
fn rnr_nak_after_a_lost_write_resp_resends_from_the_missing_segment() {
    let mut w = world();
    w.first_of_segments_sent(3);
    let out = w.rnr_nak_then_timer(9);
    assert_eq!(only_write_req(&out, 8), (REMOTE + u64::from(SEG), 2 * SEG));
    assert_eq!(w.write_resp(8, 64, &entries(64)), WriteRespVerdict::Taken);
    check_segment(
        &w.second_leg(),
        64,
        REMOTE + u64::from(SEG),
        OP_TID_RDMA_WRITE_DATA,
    );
}

/// Kernel: `rvt_rc_timeout()` → `hfi1_restart_rc(s_last_psn + 1)` →
/// `reset_psn()`'s `TID_OP(WRITE_RESP)` state and the
/// `TID_OP(WRITE_RESP)` case of `hfi1_make_rc_req()`. With the second
/// WRITE_RESP of a 2-segment WRITE lost, the retry timer's expiry sends a
/// WRITE_REQ for the second segment only (its PSN, its address, its
/// length). With `reset_psn()` not knowing TID WRITEs (the READ
/// requester's rule alone) the expiry sent an RDMA READ request instead.
#[test]
fn lost_write_resp_resends_the_write_req_for_the_rest() {
    let mut w = world();
    w.first_of_segments_sent(2);
    let mut root = LockToken::root();
    let mut g = w.qp.s_lock.lock(&mut root);
    assert!(g.ext.requester.retry_timer().is_armed());
    assert!(qp::timeout(&w.rcd, &w.qp, &mut g));
    drop(g);
    let out = w.first_leg();
    assert_eq!(only_write_req(&out, 8), (REMOTE + u64::from(SEG), SEG));
    assert_eq!(w.write_resp(8, 64, &entries(64)), WriteRespVerdict::Taken);
    check_segment(
        &w.second_leg(),
        64,
        REMOTE + u64::from(SEG),
        OP_TID_RDMA_WRITE_DATA_LAST,
    );
    assert!(matches!(
        w.tid_ack(8, 127, false),
        TidAckVerdict::Acked {
            segments: 2,
            completed: 1
        }
    ));
    assert_eq!(w.poll().map(|c| c.status), Some(WcStatus::Success));
}

/// Kernel: `hfi1_tid_retry_timeout()`, `hfi1_build_tid_rdma_resync()`,
/// the RESYNC-ACK branch of `hfi1_rc_rcv_tid_rdma_ack()`. The TID ACK of
/// the only segment never comes: the expiry halts the first leg and
/// sends one RESYNC, PSN the last sequence of the flow's generation; the
/// second leg then waits; the RESYNC ACK (nothing of the segment
/// received) renumbers the segment into the next generation from 0, and
/// the whole segment goes again there; its ACK completes the WRITE.
/// Each further expiry sends another RESYNC; with the budget spent the
/// WRITE completes `RETRY_EXC_ERR`.
#[test]
fn tid_retry_sends_a_resync_and_its_ack_renumbers() {
    let mut w = world();
    w.one_segment_sent();
    let out = w.tid_retry_expiry();
    assert_eq!(out.len(), 1);
    let f = frame::parse(&out[0]).unwrap();
    assert_eq!(f.bth.opcode, hfi1_hal::consts::OP_TID_RDMA_RESYNC);
    assert_eq!(f.bth.psn.get(), GEN << 11 | 0x7FF);
    assert!(f.bth.ack_req);
    assert_eq!(f.bth.dest_qp, w.remote.qp);
    // Waiting for the RESYNC's ACK: nothing more, an ordinary ACK dropped.
    assert!(w.second_leg().is_empty());
    assert_eq!(w.tid_ack(7, 63, false), TidAckVerdict::Dropped);
    let resync = AckKind::Resync {
        generation: Generation::new(GEN + 1).unwrap(),
        saved: FlowPsn::new(Generation::new(GEN - 1).unwrap(), 0x7FE),
    };
    w.resync_acked(resync, 64, 0);
    let last = AckKind::Segment {
        last: FlowPsn::new(Generation::new(GEN + 1).unwrap(), 63),
    };
    let v = w.tid_ack_of(7, last, 0x1F);
    assert!(matches!(v, TidAckVerdict::Acked { completed: 1, .. }));
    assert_eq!(w.poll().map(|c| c.status), Some(WcStatus::Success));
    while w.rcd.sched.pop_send().is_some() {}
    assert_eq!(w.held(), (0, 1));
}

/// Kernel: the RESYNC-ACK branch of `hfi1_rc_rcv_tid_rdma_ack()`
/// (`resync_npkts`) and `hfi1_tid_rdma_restart_req()` (the walk adds
/// `resync_npkts` to `delta_pkts`, `pkt -= resync_npkts`). The RESYNC ACK says the
/// responder has the segment's first 40 packets: the segment is
/// renumbered to 24 packets from sequence 0 of the next generation, and
/// the resend starts at the segment's 41st page with PSN sequence 0 and
/// sends only those 24. With the restart ignoring `resync_npkts` the
/// whole segment went again from its first page (asserted 24 packets,
/// got 64): in the simulator the requester then took a TID NAK inside
/// them as acknowledging the shortened flow, while the responder kept
/// the segment's TIDs waiting for its data, RNR-NAKing the next segment
/// until the retry budget ran out.
#[test]
fn resync_ack_resends_only_what_the_responder_lacks() {
    let mut w = world();
    w.one_segment_sent();
    assert_eq!(w.tid_retry_expiry().len(), 1);
    let resync = AckKind::Resync {
        generation: Generation::new(GEN + 1).unwrap(),
        saved: FlowPsn::new(Generation::new(GEN).unwrap(), 39),
    };
    let again = w.resync_acked(resync, 24, 40);
    let last = frame::parse(&again[23]).unwrap();
    assert_eq!(last.bth.opcode, OP_TID_RDMA_WRITE_DATA_LAST);
    let ack = AckKind::Segment {
        last: FlowPsn::new(Generation::new(GEN + 1).unwrap(), 23),
    };
    let v = w.tid_ack_of(7, ack, 0x1F);
    assert!(matches!(v, TidAckVerdict::Acked { completed: 1, .. }));
    assert_eq!(w.poll().map(|c| c.status), Some(WcStatus::Success));
}

/// A two-segment WRITE: the first segment's data sent, no TID ACK; the
/// TID retry sends a RESYNC, and while it is out the second segment's
/// WRITE_RESP comes, built by a responder that had already taken the
/// RESYNC: it had the first 40 packets of the first segment, renumbered
/// its last 24 to `GEN + 1`:0..23 and gave the second `GEN + 1`:24..87.
/// The RESYNC ACK says so; the requester numbers both segments the same
/// way, resends the 24 and the second segment's 64, and an ACK of
/// sequence 47 acknowledges nothing of the second segment; its ACK of 87
/// completes the WRITE. Kernel: the RESYNC-ACK branch of
/// `hfi1_rc_rcv_tid_rdma_ack()` (see the deviation in `resync_ack`).
///
/// Fails with 6.1's count put back (checked): the second segment is
/// counted 2072 packets, its last PSN wraps to sequence 47, and the ACK
/// of 47 completes the WRITE with 40 of its packets never sent.
#[test]
fn a_write_resp_during_a_resync_keeps_its_packet_count() {
    let mut w = world();
    w.first_of_segments_sent(2);
    assert_eq!(w.tid_retry_expiry().len(), 1, "the RESYNC");
    let next = GEN + 1;
    assert_eq!(
        w.write_resp_in(next, 8, 24, &entries(64)),
        WriteRespVerdict::Taken
    );
    resync_then_24_and_64(&w, Generation::new(next).unwrap());
}

/// A two-segment WRITE: the first segment's data sent, no TID ACK. The
/// TID retry sends a RESYNC (naming `GEN + 1`) whose ACK is lost; the
/// responder, which had the first segment's first 40 packets, took it:
/// the first segment's last 24 became `GEN + 1`:0..23, and the second
/// segment's WRITE_RESP it built then names `GEN + 1`:24. The next
/// expiry's RESYNC names `GEN + 2`, after that newest segment; its ACK
/// (the first 40 packets received) renumbers the 24 to `GEN + 2`:0..23
/// and the second segment, with its own 64 packets, to 24..87; an ACK of
/// 47 acknowledges nothing of it, the ACK of 87 completes the WRITE.
/// Kernel: the RESYNC-ACK branch of `hfi1_rc_rcv_tid_rdma_ack()` (see
/// the deviation in `resync_ack`).
///
/// Fails with only segments of the new generation keeping their count
/// (checked): the second segment, in `GEN + 1`, is counted from the old
/// generation's PSNs, 2048 packets more; its last PSN wraps to 47 and
/// the ACK of 47 completes the WRITE (the fuzz input
/// `write_pair/write-resp-from-a-resync-whose-ack-was-lost`, where the
/// next segment then started on that one's sequences).
#[test]
fn a_write_resp_from_a_resync_whose_ack_was_lost_keeps_its_packet_count() {
    let mut w = world();
    w.first_of_segments_sent(2);
    assert_eq!(w.tid_retry_expiry().len(), 1, "the first RESYNC");
    assert_eq!(
        w.write_resp_in(GEN + 1, 8, 24, &entries(64)),
        WriteRespVerdict::Taken
    );
    let second = w.tid_retry_expiry();
    assert_eq!(second.len(), 1, "the second RESYNC");
    let f = frame::parse(&second[0]).unwrap();
    assert_eq!(f.bth.psn.get(), (GEN + 1) << 11 | 0x7FF);
    resync_then_24_and_64(&w, Generation::new(GEN + 2).unwrap());
}

/// A two-segment WRITE: the first segment's data sent, no TID ACK; the
/// TID retry's RESYNC is answered (nothing received), the first segment
/// goes again at `GEN + 1`:0..63; then the second segment's WRITE_RESP,
/// built before the RESYNC and held back by the fabric, comes naming
/// `GEN`:64. The responder renumbered that segment with the rest, to
/// `GEN + 1`:64..127, and the requester sends its data there; their ACK
/// completes the WRITE. Kernel: `hfi1_rc_rcv_tid_rdma_write_resp()` (see
/// the deviation in `WriteState::after_resync`).
///
/// Fails with 6.1's rule put back (checked): the second segment's data
/// goes out in generation `GEN`, which the responder's flow has left.
#[test]
fn a_write_resp_from_before_a_resync_is_renumbered() {
    let mut w = world();
    w.first_of_segments_sent(2);
    assert_eq!(w.tid_retry_expiry().len(), 1, "the RESYNC");
    let next = GEN + 1;
    let resync = AckKind::Resync {
        generation: Generation::new(next).unwrap(),
        saved: FlowPsn::new(Generation::new(GEN - 1).unwrap(), 0x7FE),
    };
    w.resync_acked(resync, 64, 0);
    assert_eq!(w.write_resp(8, 64, &entries(64)), WriteRespVerdict::Taken);
    let data = w.second_leg();
    assert_eq!(data.len(), 64);
    for (k, p) in data.iter().enumerate() {
        let f = frame::parse(p).unwrap();
        assert_eq!(f.bth.psn.get(), next << 11 | (64 + k as u32), "packet {k}");
    }
    let last = AckKind::Segment {
        last: FlowPsn::new(Generation::new(next).unwrap(), 127),
    };
    let v = w.tid_ack_of(7, last, 0x1F);
    assert!(
        matches!(
            v,
            TidAckVerdict::Acked {
                segments: 2,
                completed: 1
            }
        ),
        "{v:?}"
    );
    assert_eq!(w.poll().map(|c| c.status), Some(WcStatus::Success));
}

/// Kernel: `hfi1_tid_retry_timeout()`. Data sent and no TID ACK ever:
/// each expiry sends one RESYNC while retries are left; with none left
/// the WRITE completes `RETRY_EXC_ERR`, the QP is in error and nothing
/// is held.
#[test]
fn tid_retry_expiries_exhaust_the_budget() {
    let mut w = world();
    w.one_segment_sent();
    let mut root = LockToken::root();
    for n in 0..7 {
        let mut g = w.qp.s_lock.lock(&mut root);
        assert!(
            g.ext.requester.write_state().tid_retry_timer().is_armed(),
            "try {n}"
        );
        assert!(qp::tid_retry_timeout(&w.rcd, &w.qp, &mut g));
        drop(g);
        let again = w.second_leg();
        assert_eq!(again.len(), 1, "try {n}");
        assert_eq!(
            frame::parse(&again[0]).unwrap().bth.opcode,
            hfi1_hal::consts::OP_TID_RDMA_RESYNC
        );
    }
    let mut g = w.qp.s_lock.lock(&mut root);
    assert!(qp::tid_retry_timeout(&w.rcd, &w.qp, &mut g));
    drop(g);
    assert_eq!(w.poll().map(|c| c.status), Some(WcStatus::RetryExceeded));
    assert!(w.second_leg().is_empty());
    while w.rcd.sched.pop_send().is_some() {}
    assert_eq!(w.held(), (0, 1));
}

/// A small deterministic random source (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Kernel: every requester WRITE entry point. Random sequences of posts,
/// both legs, WRITE_RESPs (right and wrong PSNs, short, empty and
/// LEN-0 TID lists), TID ACKs and NAKs at random flow PSNs, RC ACKs,
/// RNR NAKs and every timer's expiry never panic, every WRITE completes
/// (after a destroy at the latest) and nothing is held at the end.
#[test]
fn random_input_never_panics_and_leaks_nothing() {
    let mut ok = 0u64;
    for seed in 1..=40u64 {
        let mut w = world();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let src = w.source(0x1000, 3 * SEG, REMOTE);
        let mut posted = 0u64;
        let mut done = 0u64;
        let mut root = LockToken::root();
        for _ in 0..300 {
            match rng.below(10) {
                0 if posted < 12 => {
                    let len = [SEG, 2 * SEG, 3 * SEG, 8192][rng.below(4) as usize];
                    let off = [0, 0x200][rng.below(2) as usize];
                    let mut g = w.qp.s_lock.lock(&mut root);
                    let _ = qp::post_write(
                        &w.rcd,
                        &w.qp,
                        &mut g,
                        &WriteWr {
                            wr_id: posted,
                            remote_addr: REMOTE + off,
                            rkey: 9,
                            sges: &src[..(len as usize).div_ceil(4096)],
                        },
                    );
                    posted += 1;
                }
                1 => drop(w.first_leg()),
                2 => drop(w.second_leg()),
                3 | 4 => {
                    let psn = 7 + rng.below(8) as u32;
                    let spsn = 64 * rng.below(4) as u32;
                    let e = match rng.below(5) {
                        0 => vec![],
                        1 => vec![TidEntry::from_raw(0)],
                        2 => entries(0)[..1].to_vec(),
                        _ => entries(spsn),
                    };
                    let _ = w.write_resp(psn, spsn, &e);
                }
                5 | 6 => {
                    let psn = 7 + rng.below(8) as u32;
                    let seq = rng.below(300) as u32;
                    let _ = w.tid_ack(psn, seq, rng.below(4) == 0);
                }
                7 => {
                    let mut g = w.qp.s_lock.lock(&mut root);
                    let syndrome = [0x1F, 0x22, 0x60, 0x62][rng.below(4) as usize];
                    let a = aeth::Repr { syndrome, msn: 1 };
                    let psn = Psn::new(7 + rng.below(8) as u32);
                    let _ = qp::receive_ack(&w.rcd, &w.qp, &mut g, psn, &a);
                }
                8 => {
                    let mut g = w.qp.s_lock.lock(&mut root);
                    match rng.below(3) {
                        0 => drop(qp::timeout(&w.rcd, &w.qp, &mut g)),
                        1 => drop(qp::rnr_timeout(&w.rcd, &w.qp, &mut g)),
                        _ => drop(qp::tid_retry_timeout(&w.rcd, &w.qp, &mut g)),
                    }
                }
                _ => {
                    while let Some(c) = w.poll() {
                        done += 1;
                        ok += u64::from(c.status == WcStatus::Success);
                    }
                }
            }
        }
        let mut g = w.qp.s_lock.lock(&mut root);
        qp::flush(&w.rcd, &w.qp, &mut g);
        drop(g);
        while w.poll().is_some() {
            done += 1;
        }
        assert_eq!(done, posted, "seed {seed}");
        while w.rcd.sched.pop_send().is_some() {}
        while w.rcd.sched.pop_tid_send().is_some() {}
        assert_eq!(w.held(), (0, 1), "seed {seed}");
    }
    // Plain WRITEs are completed by the random RC ACKs.
    eprintln!("successes: {ok}");
    assert!(ok > 0);
}

/// Kernel: the filter at the top of `rc_rcv_resp()`. With one WRITE_REQ
/// out (PSN 7, so `s_last_psn` 6 and `s_next_psn` 8), an ACK for PSN 8,
/// a request never sent, and one for PSN 6, already acknowledged, are
/// dropped and counted; nothing changes and the WRITE then completes.
#[test]
fn acks_outside_the_outstanding_psns_are_dropped() {
    let mut w = world();
    let src = w.source(0x1000, SEG, REMOTE);
    w.post_write(1, REMOTE, &src);
    assert_eq!(only_write_req(&w.first_leg(), 7), (REMOTE, SEG));
    let ack = aeth::Repr {
        syndrome: 0x1F,
        msn: 1,
    };
    let mut root = LockToken::root();
    for psn in [8, 6] {
        let mut g = w.qp.s_lock.lock(&mut root);
        let v = qp::receive_ack(&w.rcd, &w.qp, &mut g, Psn::new(psn), &ack);
        assert_eq!(v, tid_read_proto::requester::AckVerdict::Ignored, "{psn}");
    }
    assert_eq!(
        w.qp.s_lock.lock(&mut root).ext.requester.stats.ack_dropped,
        2
    );
    assert_eq!(w.write_resp(7, 0, &entries(0)), WriteRespVerdict::Taken);
    assert_eq!(w.second_leg().len(), 64);
    w.complete_with_ack(7, 63);
}
