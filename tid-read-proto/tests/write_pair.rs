// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA WRITE between two nodes, both halves real: node A's requester
//! (first leg, second leg from its scheduler's TID work, TID ACK
//! receive) against node B's responder (WRITE_REQ receive, allocation,
//! WRITE_RESP, its software chip placing WRITE_DATA into scattered region
//! pages, TID ACK), on a clean fabric. B's memory is checked byte for
//! byte against the source pattern, and after the run nothing is held on
//! either node (TIDs, flows, queue places, QP references, region
//! references, DMA mappings, flow records).

use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST, OP_TID_RDMA_WRITE_REQ,
    OP_TID_RDMA_WRITE_RESP,
};
use hfi1_hal::lock_order::{Lock, LockToken, RLock};
use hfi1_hal::sim::SimMemory;
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::{QueueKind, WaitPlatform};
use tid_flow::RcvCtxt;
use tid_harness::chip::{self, ArrivingData};
use tid_harness::doubles::{self, MemSource, Outbox, PageAllocator, Regions, WritableRegion};
use tid_harness::platform::{SoftPlatform, SoftQp, new_ctxt, new_qp};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::Path;
use tid_read_proto::qp;
use tid_read_proto::rc::{Connection, WcStatus};
use tid_read_proto::wire::{frame, tid_ack, write_data, write_req, write_resp};
use tid_read_proto::write::requester::{TidAckVerdict, WriteRespVerdict, WriteWr};
use tid_read_proto::write::second_leg;

const BASE: u64 = 0x4000_0000;
const RKEY: u32 = 0x99;
const A_KDETH: u32 = 0x80_0001;
const A_VQP: u32 = 0x100;
const B_KDETH: u32 = 0x80_0002;
const B_VQP: u32 = 0x400;
const JKEY: u16 = 32;

type RLockOf = Lock<RLock, <SoftPlatform as WaitPlatform>::Lock, ()>;

fn conn(
    verbs: u32,
    remote_verbs: u32,
    local: (u8, u32),
    remote: (u8, u32),
    path: Path,
) -> Connection {
    Connection {
        verbs_qpn: verbs,
        remote_verbs_qpn: remote_verbs,
        local: TidParams {
            qp: local.1,
            ..TidParams::local(local.0, JKEY, 14, false)
        },
        remote: TidParams {
            qp: remote.1,
            ..TidParams::local(remote.0, JKEY, 14, false)
        },
        pmtu: 4096,
        path,
        remote_write: true,
        ..Connection::default()
    }
}

/// The two nodes.
struct Pair {
    a_rcd: Box<RcvCtxt<SoftPlatform>>,
    a: SoftQp,
    a_mem: SimMemory,
    b_rcd: Box<RcvCtxt<SoftPlatform>>,
    b: SoftQp,
    b_rlock: RLockOf,
    b_mem: SimMemory,
    region: Regions,
    counts: [u64; 6],
}

impl Pair {
    fn new(b_groups: usize, region_pages: u64) -> Self {
        let a_conn = conn(
            A_VQP,
            B_VQP,
            (1, A_KDETH),
            (2, B_KDETH),
            Path { dlid: 2, slid: 1 },
        );
        let b_conn = conn(
            B_VQP,
            A_VQP,
            (2, B_KDETH),
            (1, A_KDETH),
            Path { dlid: 1, slid: 2 },
        );
        let mut b_mem = SimMemory::new();
        let pages = PageAllocator::new(0x10_0000).scattered(region_pages);
        doubles::map(&mut b_mem, &pages);
        let mut region = Regions::new();
        region.add_writable(WritableRegion {
            base: BASE,
            rkey: RKEY,
            pages,
        });
        Self {
            a_rcd: new_ctxt(1, 8, 4, 3).unwrap(),
            a: new_qp(A_VQP, 0, 0, a_conn, Psn::new(100)),
            a_mem: SimMemory::new(),
            b_rcd: new_ctxt(2, b_groups, 4, 7).unwrap(),
            b: new_qp(B_VQP, 0, 0, b_conn, Psn::new(100)),
            b_rlock: Lock::new(()),
            b_mem,
            region,
            counts: [0; 6],
        }
    }

    /// Posts a WRITE of `len` bytes from fresh local pages holding the
    /// pattern of the remote bytes at `BASE + off`.
    fn post(&mut self, wr_id: u64, off: u64, len: u32, pfn: u64) {
        let sges = PageAllocator::new(pfn).scattered(u64::from(len / 4096));
        doubles::map(&mut self.a_mem, &sges);
        let mut at = BASE + off;
        for s in &sges {
            let mut b = vec![0u8; s.length as usize];
            doubles::fill_pattern(at, &mut b);
            self.a_mem.write(s.vaddr, &b).unwrap();
            at += u64::from(s.length);
        }
        let mut root = LockToken::root();
        let mut g = self.a.s_lock.lock(&mut root);
        qp::post_write(
            &self.a_rcd,
            &self.a,
            &mut g,
            &WriteWr {
                wr_id,
                remote_addr: BASE + off,
                rkey: RKEY,
                sges: &sges,
            },
        )
        .unwrap();
    }

    /// Runs every pending work item of both nodes and delivers every
    /// packet, until nothing moves. Returns the number of rounds.
    fn run(&mut self) -> u32 {
        let mut root = LockToken::root();
        let mut rounds = 0;
        loop {
            let mut to_b = Outbox::new();
            let mut to_a = Outbox::new();
            while let Some(q) = self.a_rcd.sched.pop_send() {
                qp::send_engine_with(
                    &self.a_rcd,
                    &q,
                    &mut root,
                    &mut to_b,
                    &MemSource(&self.a_mem),
                )
                .unwrap();
            }
            while let Some((_, q)) = self.a_rcd.sched.pop_tid_send() {
                let n = second_leg::do_tid_send(
                    &self.a_rcd,
                    &q,
                    &mut root,
                    &mut to_b,
                    &MemSource(&self.a_mem),
                )
                .unwrap();
                self.counts[4] += u64::from(n);
            }
            // The responder's first leg runs every round (its receive
            // paths leave the scheduling to the caller).
            while self.b_rcd.sched.pop_send().is_some() {}
            {
                qp::send_write_responses(
                    &self.b_rcd,
                    &self.b,
                    &mut root,
                    &Regions::new(),
                    &self.region,
                    &mut to_a,
                    64,
                )
                .unwrap();
            }
            while let Some((_, q)) = self.b_rcd.sched.pop_work() {
                let (rcd, region) = (&self.b_rcd, &self.region);
                qp_wait::trigger_resume::<SoftPlatform>(q, &mut root, |q, root| {
                    let src = Regions::new();
                    qp::send_write_responses(rcd, q, root, &src, region, &mut to_a, 64).unwrap();
                });
            }
            let _ = qp::send_tid_ack(&self.b_rcd, &self.b, &mut root, &mut to_a).unwrap();
            let moved = !to_a.is_empty() || !to_b.is_empty();
            for p in to_b.drain().collect::<Vec<_>>() {
                self.deliver_to_b(&p);
            }
            for p in to_a.drain().collect::<Vec<_>>() {
                self.deliver_to_a(&p);
            }
            rounds += 1;
            if rounds > 10_000 {
                return rounds;
            }
            if !moved && !self.fire_a_timer() {
                return rounds;
            }
        }
    }

    /// Nothing moved: A's running timer fires (RNR first, then the TID
    /// retry, then the RC retry), as simulated time would reach it; false
    /// if none runs.
    fn fire_a_timer(&mut self) -> bool {
        let mut root = LockToken::root();
        let mut g = self.a.s_lock.lock(&mut root);
        let r = &g.ext.requester;
        let (rnr, tid, rc) = (
            r.rnr_timer().is_armed(),
            r.write_state().tid_retry_timer().is_armed(),
            r.retry_timer().is_armed(),
        );
        if rnr {
            self.counts[5] += 1;
            qp::rnr_timeout(&self.a_rcd, &self.a, &mut g)
        } else if tid {
            qp::tid_retry_timeout(&self.a_rcd, &self.a, &mut g)
        } else if rc {
            qp::timeout(&self.a_rcd, &self.a, &mut g)
        } else {
            false
        }
    }

    /// B receives a packet from A.
    fn deliver_to_b(&mut self, p: &[u8]) {
        let f = frame::parse(p).unwrap();
        let mut root = LockToken::root();
        let mut r = self.b_rlock.lock(&mut root);
        match f.bth.opcode {
            OP_TID_RDMA_WRITE_REQ => {
                self.counts[0] += 1;
                let h = write_req::Repr::parse(&write_req::Packet::new_checked(f.body).unwrap())
                    .unwrap();
                let _ = qp::receive_write_req(
                    &self.b_rcd,
                    &self.b,
                    r.token(),
                    f.bth.psn,
                    &h,
                    &self.region,
                );
            }
            OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST => {
                self.counts[1] += 1;
                let v = write_data::Packet::new_checked(f.body).unwrap();
                let h = write_data::Repr::parse(&v).unwrap();
                let (o, _) = chip::receive_write_data(
                    &self.b_rcd,
                    &self.b,
                    r.token(),
                    &mut self.b_mem,
                    ArrivingData {
                        dest_qp: f.bth.dest_qp,
                        psn: FlowPsn::from_raw(f.bth.psn.get()),
                        last_of_request: f.bth.opcode == OP_TID_RDMA_WRITE_DATA_LAST,
                        hdr: &h,
                        payload: v.payload(),
                    },
                    &self.region,
                );
                assert!(o.placed && o.error.is_none(), "{o:?}");
            }
            op => panic!("A sent opcode {op:#x}"),
        }
    }

    /// A receives a packet from B.
    fn deliver_to_a(&mut self, p: &[u8]) {
        let f = frame::parse(p).unwrap();
        let mut root = LockToken::root();
        let mut g = self.a.s_lock.lock(&mut root);
        match f.bth.opcode {
            OP_TID_RDMA_WRITE_RESP => {
                self.counts[2] += 1;
                let v = write_resp::Packet::new_checked(f.body).unwrap();
                let h = write_resp::Repr::parse(&v).unwrap();
                let r = qp::receive_write_resp(
                    &self.a_rcd,
                    &self.a,
                    &mut g,
                    f.bth.psn,
                    &h,
                    v.payload(),
                );
                assert_eq!(r, WriteRespVerdict::Taken);
            }
            OP_TID_RDMA_ACK => {
                self.counts[3] += 1;
                let h =
                    tid_ack::Repr::parse(&tid_ack::Packet::new_checked(f.body).unwrap()).unwrap();
                let v = qp::receive_tid_ack(
                    &self.a_rcd,
                    &self.a,
                    &mut g,
                    FlowPsn::from_raw(f.bth.psn.get()),
                    &h,
                );
                assert!(matches!(v, TidAckVerdict::Acked { .. }), "{v:?}");
            }
            0x11 => {
                let a = tid_read_proto::wire::aeth::Repr::parse(
                    &tid_read_proto::wire::aeth::Packet::new_checked(f.body).unwrap(),
                )
                .unwrap();
                let _ = qp::receive_ack(&self.a_rcd, &self.a, &mut g, f.bth.psn, &a);
            }
            op => panic!("B sent opcode {op:#x}"),
        }
    }

    /// What either node still holds: (name, count).
    fn leaks(&self) -> Vec<(&'static str, u64)> {
        let mut root = LockToken::root();
        let mut v = Vec::new();
        for (name, rcd, q) in [("A", &self.a_rcd, &self.a), ("B", &self.b_rcd, &self.b)] {
            let mut g = q.s_lock.lock(&mut root);
            let waiting = u64::from(g.waiting());
            let (_, tok) = g.parts();
            let e = rcd.exp_lock.lock(tok);
            v.push((name, 0));
            v.push(("tid_entries", u64::from(e.groups.entries_in_use())));
            v.push(("flows", u64::from(e.flows.mask().count_ones())));
            let queued = e.waiters.len(QueueKind::Flow) + e.waiters.len(QueueKind::RcvArray);
            v.push(("queued", queued as u64));
            v.push(("waiting", waiting));
            drop(e);
            drop(g);
            v.push(("dma", rcd.dma.live_mappings() as u64));
            v.push(("qp_refs", q.live_refs() as u64 - 1));
            v.push(("flow_records", rcd.mem.live_allocations() as u64));
        }
        v.push(("mr_refs", self.region.refs()));
        v
    }

    fn flush_b(&mut self) {
        let mut root = LockToken::root();
        let mut g = self.b.s_lock.lock(&mut root);
        qp::flush_write_responder(&self.b_rcd, &self.b, &mut g, &self.region);
    }
}

/// Kernel: the whole TID WRITE walk (`hfi1_make_rc_req()`,
/// `hfi1_rc_rcv_tid_rdma_write_req()`, `hfi1_build_tid_rdma_write_resp()`,
/// `hfi1_rc_rcv_tid_rdma_write_resp()`, `hfi1_do_tid_send()`,
/// `hfi1_rc_rcv_tid_rdma_write_data()`, `make_tid_rdma_ack()`,
/// `hfi1_rc_rcv_tid_rdma_ack()`). Three WRITEs (1, 2 and 5 segments of
/// 256 KiB) from A into B's scattered region complete successfully with
/// their byte counts, every byte in B's pages is the source pattern, and
/// after B's flush nothing is held on either node.
#[test]
fn tid_writes_between_two_nodes_land_byte_for_byte() {
    let seg = 256 * 1024u32;
    let mut p = Pair::new(64, 8 * 64 + 64);
    p.post(1, 0, seg, 0x1000);
    p.post(2, u64::from(seg), 2 * seg, 0x4000);
    p.post(3, 3 * u64::from(seg), 5 * seg, 0x8000);
    let rounds = p.run();
    assert!(rounds < 10_000);
    let mut root = LockToken::root();
    let mut done = Vec::new();
    {
        let mut g = p.a.s_lock.lock(&mut root);
        while let Some(c) = g.ext.requester.poll() {
            done.push((c.wr_id, c.length, c.status));
        }
    }
    assert_eq!(
        done,
        [
            (1, seg, WcStatus::Success),
            (2, 2 * seg, WcStatus::Success),
            (3, 5 * seg, WcStatus::Success)
        ]
    );
    let c = doubles::check_data(
        &p.b_mem,
        &p.region.writable(0).unwrap().pages[..8 * 64],
        BASE,
    );
    assert_eq!((c.verified, c.mismatched), (8 * u64::from(seg), 0), "{c:?}");
    // 3 WRITE_REQs, 8 x 64 data packets, 8 WRITE_RESPs; TID ACKs are
    // coalesced (one may cover segments of several WRITEs).
    assert_eq!(p.counts[0], 3);
    assert_eq!(p.counts[1], 8 * 64);
    assert_eq!(p.counts[2], 8);
    assert!((1..=8).contains(&p.counts[3]), "{:?}", p.counts);
    assert_eq!(p.counts[4], 8 * 64);
    p.flush_b();
    let l = p.leaks();
    assert!(l.iter().all(|&(_, n)| n == 0), "{l:?}");
}

/// Kernel: `hfi1_tid_write_alloc_resources()`'s RNR NAK and the
/// requester's RNR case of `do_rc_ack()`. B has room for one scattered
/// segment at a time (8 groups, 64 entries): a 4-segment WRITE is
/// RNR-NAKed at each segment it cannot allocate, A waits its RNR timer
/// and sends the WRITE_REQ for the rest, and the WRITE completes with
/// every byte placed and nothing held.
#[test]
fn rnr_heavy_write_completes_one_segment_at_a_time() {
    let seg = 256 * 1024u32;
    let mut p = Pair::new(8, 4 * 64);
    p.post(1, 0, 4 * seg, 0x1000);
    let rounds = p.run();
    assert!(rounds < 10_000);
    let mut root = LockToken::root();
    let c = p.a.s_lock.lock(&mut root).ext.requester.poll();
    assert_eq!(
        c.map(|c| (c.length, c.status)),
        Some((4 * seg, WcStatus::Success))
    );
    assert!(p.counts[5] > 0, "no RNR wait: {:?}", p.counts);
    let c = doubles::check_data(
        &p.b_mem,
        &p.region.writable(0).unwrap().pages[..4 * 64],
        BASE,
    );
    assert_eq!((c.verified, c.mismatched), (4 * u64::from(seg), 0), "{c:?}");
    p.flush_b();
    let l = p.leaks();
    assert!(l.iter().all(|&(_, n)| n == 0), "{l:?}");
}
