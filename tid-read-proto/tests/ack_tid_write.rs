// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A TID WRITE's completion at the requester (`do_rc_completion()` in
//! Linux 6.1's `drivers/infiniband/hw/hfi1/rc.c`, reached from the TID
//! ACK handler of `tid_rdma.c`), seen from outside: the WRITE completes
//! with its TID ACK, and its completion leaves `s_last_psn` where the
//! WRITE_RESPs of the requests after it moved it.
//!
//! The file holds TID WRITEs only, and every loop in it is bounded: with
//! the completion made a no-op a READ's or a plain WRITE's ACK leaves the
//! request at `s_acked` uncompleted (the completion loop of `do_rc_ack()`
//! gives up after a queue's worth of passes), while a TID WRITE completes
//! from the TID ACK's own walk, so these tests show that completion alone.

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
use tid_read_proto::wire::tid_ack::{AckFields, AckKind};
use tid_read_proto::wire::{aeth, tid_ack, tid_entries, write_resp};
use tid_read_proto::write::requester::{TidAckVerdict, WriteRespVerdict, WriteWr};
use tid_read_proto::write::second_leg;

/// The remote address of the first WRITE.
const REMOTE: u64 = 0x5000_0000;
/// One TID WRITE segment (the responder's `max_len`).
const SEG: u32 = 256 * 1024;
/// The flow generation the test's responder hands out.
const GEN: u32 = 9;

/// The local memory as the engines' source.
struct Src<'a>(&'a SimMemory);

impl SourceData for Src<'_> {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        self.0.read(vaddr, out).is_ok()
    }
}

/// One requester QP (first IB PSN 7) on its own context; the test plays
/// the responder.
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

/// Four TID entries of 16 pages from `base`: one 256 KiB segment.
fn entries(base: u32) -> Vec<TidEntry> {
    (0..4)
        .map(|i| TidEntry::new(base + 8 * i, TidCtrl::Pair, 16).unwrap())
        .collect()
}

impl World {
    /// Posts a one-segment TID WRITE of scattered local pages from `pfn`
    /// to `remote`.
    fn post_write(&mut self, wr_id: u64, pfn: u64, remote: u64) {
        let sges: Vec<Sge> = PageAllocator::new(pfn).scattered(u64::from(SEG / 4096));
        doubles::map(&mut self.mem, &sges);
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        let wr = WriteWr {
            wr_id,
            remote_addr: remote,
            rkey: 9,
            sges: &sges,
        };
        qp::post_write(&self.rcd, &self.qp, &mut g, &wr).unwrap();
    }

    /// Runs the first leg once per pending schedule (bounded).
    fn first_leg(&self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        let mut s = Outbox::new();
        for _ in 0..16 {
            let Some(qp) = self.rcd.sched.pop_send() else {
                break;
            };
            qp::send_engine_with(&self.rcd, &qp, &mut root, &mut s, &Src(&self.mem)).unwrap();
        }
        s.drain().collect()
    }

    /// Runs the second leg once per pending work item (bounded).
    fn second_leg(&self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        let mut s = Outbox::new();
        for _ in 0..16 {
            let Some((_, qp)) = self.rcd.sched.pop_tid_send() else {
                break;
            };
            second_leg::do_tid_send(&self.rcd, &qp, &mut root, &mut s, &Src(&self.mem)).unwrap();
        }
        s.drain().collect()
    }

    /// A WRITE_RESP at IB PSN `psn` granting one segment over the entries
    /// from `base`, flow sequences from `spsn`.
    fn write_resp(&self, psn: u32, spsn: u32, base: u32) -> WriteRespVerdict {
        let b = write_resp::build(&write_resp::WriteRespFields {
            remote_qp: TidParams::local(1, 32, 14, false).qp,
            remote_jkey: 32,
            remote_verbs_qp: 0x100,
            aeth: aeth::Repr {
                syndrome: 0x1F,
                msn: 1,
            },
            generation: Generation::new(GEN).unwrap(),
            spsn,
            local_qp: self.remote.qp,
            flow: FlowIndex::new(3).unwrap(),
            ctxt: 2,
            ib_psn: Psn::new(psn),
        });
        let list = entries(base);
        let mut payload = vec![0u8; list.len() * 4];
        tid_entries::emit(&list, &mut payload).unwrap();
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

    /// The TID ACK of the segment whose WRITE_RESP had IB PSN `resp_psn`,
    /// acknowledging flow sequence `seq`.
    fn tid_ack(&self, resp_psn: u32, seq: u32) -> TidAckVerdict {
        let b = tid_ack::build(&AckFields {
            remote_qp: TidParams::local(1, 32, 14, false).qp,
            remote_jkey: 32,
            remote_verbs_qp: 0x100,
            aeth: aeth::Repr {
                syndrome: 0x1F,
                msn: 1,
            },
            local_qp: self.remote.qp,
            flow: FlowIndex::new(3).unwrap(),
            ctxt: 2,
            resp_ib_psn: Psn::new(resp_psn),
            kind: AckKind::Segment {
                last: FlowPsn::new(Generation::new(GEN).unwrap(), seq),
            },
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

    fn poll(&self) -> Option<Completion> {
        let mut root = LockToken::root();
        self.qp.s_lock.lock(&mut root).ext.requester.poll()
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
    w.post_write(1, 0x1000, REMOTE);
    assert_eq!(w.first_leg().len(), 1, "the WRITE_REQ");
    assert_eq!(w.write_resp(7, 0, 0), WriteRespVerdict::Taken);
    assert_eq!(w.second_leg().len(), 64);
    assert_eq!(w.poll(), None, "not before its TID ACK");
    assert!(matches!(
        w.tid_ack(7, 63),
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
    w.post_write(1, 0x1000, REMOTE);
    w.post_write(2, 0x3000, REMOTE + u64::from(SEG));
    assert_eq!(w.first_leg().len(), 2, "both WRITE_REQs");
    assert_eq!(w.write_resp(7, 0, 0), WriteRespVerdict::Taken);
    assert_eq!(w.write_resp(8, 64, 64), WriteRespVerdict::Taken);
    assert_eq!(w.second_leg().len(), 128);
    assert_eq!(w.last_psn_and_outstanding(), (8, 2));
    assert!(matches!(
        w.tid_ack(7, 63),
        TidAckVerdict::Acked { completed: 1, .. }
    ));
    assert_eq!(w.last_psn_and_outstanding(), (8, 1), "s_last_psn kept");
    assert_eq!(
        w.poll().map(|c| (c.wr_id, c.status)),
        Some((1, WcStatus::Success))
    );
    assert_eq!(
        w.write_resp(8, 64, 64),
        WriteRespVerdict::Dropped,
        "a duplicate"
    );
    assert!(matches!(
        w.tid_ack(8, 127),
        TidAckVerdict::Acked { completed: 1, .. }
    ));
    assert_eq!(
        w.poll().map(|c| (c.wr_id, c.status)),
        Some((2, WcStatus::Success))
    );
    assert_eq!(w.last_psn_and_outstanding(), (8, 0));
}
