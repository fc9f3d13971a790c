// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA WRITE responder, driven with WRITE_REQs and WRITE_DATA
//! built by the wire builders (the requester's side played here): the
//! WRITE_RESP, TID ACK and RC NAK bytes it sends, the bytes its chip
//! places in its scattered region pages, and nothing left held (TIDs,
//! flows, queue places, QP references, region references, DMA mappings,
//! flow records).

use std::cell::Cell;

use hfi1_hal::consts::{OP_TID_RDMA_ACK, OP_TID_RDMA_WRITE_DATA_LAST, OP_TID_RDMA_WRITE_RESP};
use hfi1_hal::lock_order::{Lock, LockToken, RLock};
use hfi1_hal::sim::{ExpectedOutcome, RcvError, SimMemory, SimTimers};
use hfi1_hal::timers::{QpTimer, QpTimers};
use hfi1_hal::{FlowPsn, Generation, Psn, TidEntry};
use qp_wait::{QueueKind, WaitPlatform};
use tid_flow::{RcvCtxt, Sge};
use tid_harness::chip::{self, ArrivingData};
use tid_harness::doubles::{self, Outbox, PageAllocator, Regions, fill_pattern};
use tid_harness::platform::{SoftPlatform, SoftQp, new_ctxt, new_qp};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::Path;
use tid_read_proto::qp;
use tid_read_proto::rc::{Connection, MrTable, QpState};
use tid_read_proto::wire::aeth::NakCode;
use tid_read_proto::wire::write_data::{DataBuilder, DataFlow};
use tid_read_proto::wire::{frame, resync, tid_ack, write_req, write_resp};
use tid_read_proto::write::WriteRegions;
use tid_read_proto::write::responder::{
    DataVerdict, ResyncVerdict, RnrNakState, WriteReqVerdict, reap_ns,
};

const SEG: u32 = 256 << 10;
const BASE: u64 = 0x4000_0000;
const RKEY: u32 = 0x99;
/// The requester's KDETH QPN and verbs QPN, the responder's.
const REQ_KDETH: u32 = 0x80_0001;
const REQ_VQP: u32 = 0x100;
const RESP_KDETH: u32 = 0x80_0002;
const RESP_VQP: u32 = 0x400;
const JKEY: u16 = 32;

type RLockOf = Lock<RLock, <SoftPlatform as WaitPlatform>::Lock, ()>;

/// One remote-writable region backed by scattered pages.
struct WRegion {
    base: u64,
    len: u64,
    rkey: u32,
    pages: Vec<Sge>,
    refs: Cell<u64>,
}

/// The responder's regions for writes; refuses every remote read.
#[derive(Default)]
struct WRegions {
    r: Vec<WRegion>,
    misuses: Cell<u64>,
}

impl WRegions {
    fn refs(&self) -> u64 {
        self.r.iter().map(|r| r.refs.get()).sum()
    }
}

impl MrTable for WRegions {
    fn get(&self, _: u64, _: u32, _: u32) -> Option<u32> {
        None
    }

    fn put(&self, mr: u32) {
        match self.r.get(mr as usize) {
            Some(r) if r.refs.get() > 0 => r.refs.set(r.refs.get() - 1),
            _ => self.misuses.set(self.misuses.get() + 1),
        }
    }
}

impl WriteRegions for WRegions {
    fn get_write(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        let (i, r) = self.r.iter().enumerate().find(|(_, r)| {
            r.rkey == rkey && vaddr >= r.base && vaddr + u64::from(len) <= r.base + r.len
        })?;
        r.refs.set(r.refs.get() + 1);
        u32::try_from(i).ok()
    }

    fn write_pages(&self, mr: u32, vaddr: u64) -> Option<(&[Sge], u64)> {
        let r = self.r.get(mr as usize)?;
        (vaddr >= r.base && vaddr < r.base + r.len).then(|| (&r.pages[..], vaddr - r.base))
    }
}

/// A responder node: one QP, its context, its memory and region, its
/// `r_lock`.
struct Node {
    rcd: Box<RcvCtxt<SoftPlatform>>,
    qp: SoftQp,
    r_lock: RLockOf,
    mem: SimMemory,
    wmrs: WRegions,
    out: Outbox,
    psn: u32,
}

impl Node {
    /// `groups` TID groups, a region of `region_pages` scattered pages.
    fn new(groups: usize, region_pages: u64) -> Self {
        let local = TidParams {
            qp: RESP_KDETH,
            ..TidParams::local(2, JKEY, 14, false)
        };
        let remote = TidParams {
            qp: REQ_KDETH,
            ..TidParams::local(1, JKEY, 14, false)
        };
        let conn = Connection {
            verbs_qpn: RESP_VQP,
            remote_verbs_qpn: REQ_VQP,
            local,
            remote,
            pmtu: 4096,
            path: Path { dlid: 1, slid: 2 },
            remote_write: true,
            ..Connection::default()
        };
        let rcd = new_ctxt(2, groups, 4, 7).unwrap();
        let qp = new_qp(RESP_VQP, 0, 0, conn, Psn::new(100));
        let mut mem = SimMemory::new();
        let pages = PageAllocator::new(0x1000).scattered(region_pages);
        doubles::map(&mut mem, &pages);
        let wmrs = WRegions {
            r: vec![WRegion {
                base: BASE,
                len: region_pages * 4096,
                rkey: RKEY,
                pages,
                refs: Cell::new(0),
            }],
            misuses: Cell::new(0),
        };
        Self {
            rcd,
            qp,
            r_lock: Lock::new(()),
            mem,
            wmrs,
            out: Outbox::new(),
            psn: 100,
        }
    }

    /// Delivers a WRITE_REQ for `len` bytes at `vaddr` with PSN `psn`.
    fn write_req(&mut self, psn: u32, vaddr: u64, len: u32, rkey: u32) -> WriteReqVerdict {
        let hdr = write_req::build(&write_req::WriteReqFields {
            remote_qp: RESP_KDETH,
            remote_jkey: JKEY,
            remote_verbs_qp: RESP_VQP,
            remote_addr: vaddr,
            rkey,
            wqe_length: len,
            remaining: len,
            psn: Psn::new(psn),
        })
        .header;
        let mut root = LockToken::root();
        let mut r = self.r_lock.lock(&mut root);
        qp::receive_write_req(
            &self.rcd,
            &self.qp,
            r.token(),
            Psn::new(psn),
            &hdr,
            &self.wmrs,
        )
    }

    /// Runs the first leg; returns the packets it sent.
    fn respond(&mut self) -> Vec<Vec<u8>> {
        let mut root = LockToken::root();
        let src = Regions::new();
        qp::send_write_responses(
            &self.rcd,
            &self.qp,
            &mut root,
            &src,
            &self.wmrs,
            &mut self.out,
            64,
        )
        .unwrap();
        self.out.drain().collect()
    }

    /// Runs the second leg's TID ACK; the packet if one was owed.
    fn tid_ack(&mut self) -> Option<Vec<u8>> {
        let mut root = LockToken::root();
        let sent = qp::send_tid_ack(&self.rcd, &self.qp, &mut root, &mut self.out).unwrap();
        let p = self.out.pop();
        assert_eq!(sent, p.is_some());
        p
    }

    /// Sends segment `k` of a write of `total` bytes from `remote` (the
    /// requester's source: the pattern at the remote address) through the
    /// chip, as the requester's second leg would after `resp`. Returns
    /// the verdicts software gave.
    fn send_segment(&mut self, resp: &Resp, k: u32, total: u32, remote: u64) -> Vec<DataVerdict> {
        let at = resp.hdr.flow_psn;
        let out = self.send_flow(resp, (k, total, remote), at, |_| true);
        let mut verdicts = Vec::new();
        for (last, o, v) in out {
            assert!(o.placed && o.error.is_none(), "{o:?}");
            // Header suppression: only the segment's last packet reaches
            // software.
            assert_eq!(o.delivered, last);
            verdicts.extend(v);
        }
        verdicts
    }

    /// Sends the packets of segment `k` (of `total` bytes from `remote`)
    /// that `keep` keeps (by index), numbered from flow PSN `at`, through
    /// the chip. Returns, per packet sent, whether it was the segment's
    /// last, the chip's outcome and software's verdict.
    fn send_flow(
        &mut self,
        resp: &Resp,
        (k, total, remote): (u32, u32, u64),
        at: FlowPsn,
        keep: impl Fn(usize) -> bool,
    ) -> Vec<(bool, ExpectedOutcome, Option<DataVerdict>)> {
        let off = k * SEG;
        let flow = DataFlow {
            entries: &resp.entries,
            length: SEG.min(total - off),
            pmtu: 4096,
            spsn: at.seq(),
            generation: at.generation(),
            tid_qpn: resp.hdr.tid_flow_qp,
            jkey: JKEY,
            urg: false,
            verbs_qp: RESP_VQP,
            last_segment: off + SEG >= total,
        };
        let mut out = Vec::new();
        for (i, p) in DataBuilder::new(&flow).enumerate() {
            let p = p.unwrap();
            if !keep(i) {
                continue;
            }
            let mut payload = vec![0u8; p.len as usize];
            fill_pattern(remote + u64::from(off + p.data_offset), &mut payload);
            let mut root = LockToken::root();
            let mut r = self.r_lock.lock(&mut root);
            let (o, v) = chip::receive_write_data(
                &self.rcd,
                &self.qp,
                r.token(),
                &mut self.mem,
                ArrivingData {
                    dest_qp: p.bth.dest_qp,
                    psn: FlowPsn::from_raw(p.bth.psn.get()),
                    last_of_request: p.bth.opcode == OP_TID_RDMA_WRITE_DATA_LAST,
                    hdr: &p.header,
                    payload: &payload,
                },
                &self.wmrs,
            );
            out.push((p.last, o, v));
        }
        out
    }

    /// Delivers a RESYNC with BTH PSN `psn`.
    fn resync(&mut self, psn: u32) -> ResyncVerdict {
        let mut root = LockToken::root();
        let mut r = self.r_lock.lock(&mut root);
        qp::receive_resync(&self.rcd, &self.qp, r.token(), FlowPsn::from_raw(psn))
    }

    fn state(&self) -> QpState {
        self.qp.s_lock.lock(&mut LockToken::root()).ext.state
    }

    /// What is held now: (name, count), all zero when nothing leaks.
    fn leaks(&self) -> Vec<(&'static str, u64)> {
        let mut root = LockToken::root();
        let mut g = self.qp.s_lock.lock(&mut root);
        let waiting = u64::from(g.waiting());
        let (_, tok) = g.parts();
        let e = self.rcd.exp_lock.lock(tok);
        let v = vec![
            ("tid_entries", u64::from(e.groups.entries_in_use())),
            ("flows", u64::from(e.flows.mask().count_ones())),
            (
                "queued",
                (e.waiters.len(QueueKind::Flow) + e.waiters.len(QueueKind::RcvArray)) as u64,
            ),
            ("waiting", waiting),
            ("dma", self.rcd.dma.live_mappings() as u64),
            ("qp_refs", self.qp.live_refs() as u64 - 1),
            ("mr_refs", self.wmrs.refs()),
            ("mr_misuses", self.wmrs.misuses.get()),
        ];
        v
    }

    /// Flushes the QP's WRITE responder; then nothing may be held, flow
    /// records included.
    fn flush_and_check(&mut self) {
        {
            let mut root = LockToken::root();
            let mut g = self.qp.s_lock.lock(&mut root);
            qp::flush_write_responder(&self.rcd, &self.qp, &mut g, &self.wmrs);
        }
        let mut l = self.leaks();
        l.push(("flow_records", self.rcd.mem.live_allocations() as u64));
        assert!(l.iter().all(|&(_, n)| n == 0), "{l:?}");
    }

    /// Nothing held, then the flush leaves nothing either.
    fn done(&mut self) {
        assert!(
            self.leaks().iter().all(|&(_, c)| c == 0),
            "{:?}",
            self.leaks()
        );
        self.flush_and_check();
    }

    /// Runs the first leg; the WRITE_RESPs it sent.
    fn resps(&mut self) -> Vec<Resp> {
        self.respond().iter().map(|b| parse_resp(b)).collect()
    }

    fn with_w<T>(&self, f: impl FnOnce(&qp::TidQp<SoftPlatform>) -> T) -> T {
        let mut root = LockToken::root();
        let g = self.qp.s_lock.lock(&mut root);
        f(&g.ext)
    }
}

/// A responder with room to spare, a 512 KiB WRITE accepted at PSN 100,
/// and its two WRITE_RESPs.
fn two_segments() -> (Node, Vec<Resp>) {
    let mut n = Node::new(64, 256);
    let v = n.write_req(100, BASE, 2 * SEG, RKEY);
    assert_eq!(v, WriteReqVerdict::Accepted);
    let resps = n.resps();
    assert_eq!(resps.len(), 2);
    (n, resps)
}

/// A parsed WRITE_RESP.
#[derive(Debug)]
struct Resp {
    psn: Psn,
    dest_qp: u32,
    hdr: write_resp::Repr,
    entries: Vec<TidEntry>,
}

fn parse_resp(bytes: &[u8]) -> Resp {
    let f = frame::parse(bytes).unwrap();
    assert_eq!(f.bth.opcode, OP_TID_RDMA_WRITE_RESP);
    assert!(!f.bth.ack_req);
    let p = write_resp::Packet::new_checked(f.body).unwrap();
    Resp {
        psn: f.bth.psn,
        dest_qp: f.bth.dest_qp,
        hdr: write_resp::Repr::parse(&p).unwrap(),
        entries: p.tid_entries().iter().collect(),
    }
}

/// An RC ACKNOWLEDGE: (PSN, AETH syndrome, MSN).
fn parse_rc_ack(bytes: &[u8]) -> (Psn, u8, u32) {
    let f = frame::parse(bytes).unwrap();
    assert_eq!(f.bth.opcode, 0x11, "RC ACKNOWLEDGE");
    assert_eq!(f.bth.dest_qp, REQ_VQP);
    let w = u32::from_be_bytes(f.body[..4].try_into().unwrap());
    (f.bth.psn, (w >> 24) as u8, w & 0xFF_FFFF)
}

/// A TID ACK: (BTH PSN, header).
fn parse_tid_ack(bytes: &[u8]) -> (Psn, tid_ack::Repr) {
    let f = frame::parse(bytes).unwrap();
    assert_eq!(f.bth.opcode, OP_TID_RDMA_ACK);
    assert_eq!(f.bth.dest_qp, REQ_KDETH);
    let p = tid_ack::Packet::new_checked(f.body).unwrap();
    (f.bth.psn, tid_ack::Repr::parse(&p).unwrap())
}

/// The bytes of the region from `off` for `len` are the pattern of the
/// remote addresses they were written from.
fn check_placed(n: &Node, off: u64, len: u64) {
    let pages = &n.wmrs.r[0].pages;
    let first = (off / 4096) as usize;
    let count = (len / 4096) as usize;
    let c = doubles::check_data(&n.mem, &pages[first..first + count], BASE + off);
    assert_eq!((c.verified, c.mismatched), (len, 0), "{c:?}");
}

/// A 1 MiB TID WRITE (four 256 KiB segments) into 256 scattered pages:
/// one WRITE_RESP per segment with the programmed TID entries and the
/// segment's flow, the chip places every WRITE_DATA byte for byte into
/// the scattered pages and hands software only each segment's last
/// packet, one TID ACK per segment names it, and the entry completes
/// with every TID, the flow and the region reference given back.
/// Kernel: `hfi1_rc_rcv_tid_rdma_write_req()`,
/// `hfi1_build_tid_rdma_write_resp()`, `hfi1_rc_rcv_tid_rdma_write_data()`,
/// `make_tid_rdma_ack()`.
#[test]
fn write_data_is_placed_byte_for_byte_in_scattered_pages() {
    let mut n = Node::new(64, 256);
    let total = 4 * SEG;
    assert_eq!(
        n.write_req(n.psn, BASE, total, RKEY),
        WriteReqVerdict::Accepted
    );
    assert_eq!(n.wmrs.refs(), 1);
    let resps = n.resps();
    assert_eq!(resps.len(), 4);
    let mut gens = Vec::new();
    for (k, r) in resps.iter().enumerate() {
        assert_eq!(r.psn, Psn::new(100 + k as u32), "one IB PSN per segment");
        assert_eq!(r.dest_qp, REQ_KDETH);
        assert_eq!(r.hdr.verbs_qp, REQ_VQP);
        assert_eq!(r.hdr.tid_flow_qp & !0xF8FF, RESP_KDETH & !0xF8FF);
        assert_eq!(r.hdr.tid_flow_qp & 0xFF, 2, "the receive context");
        // 64 scattered pages, each its own buffer.
        assert_eq!(r.entries.iter().map(|e| e.len()).sum::<u32>(), 64);
        assert_eq!(r.hdr.flow_psn.seq(), 64 * k as u32, "consecutive sequences");
        gens.push(r.hdr.flow_psn.generation());
    }
    assert!(gens.windows(2).all(|w| w[0] == w[1]), "one generation");
    assert_eq!(n.with_w(|t| t.responder.expected_psn()), Psn::new(104));
    for (k, r) in resps.iter().enumerate() {
        let v = n.send_segment(r, k as u32, total, BASE);
        let want = if k == 3 {
            DataVerdict::RequestDone
        } else {
            DataVerdict::SegmentDone
        };
        assert_eq!(v, [want]);
        let (psn, a) = parse_tid_ack(&n.tid_ack().expect("a TID ACK per segment"));
        assert_eq!(psn.get(), FlowPsn::new(gens[k], 64 * k as u32 + 63).raw());
        assert_eq!(a.verbs_psn, r.psn, "names the segment's WRITE_RESP");
        assert_eq!(a.tid_flow_qp, r.hdr.tid_flow_qp);
        assert!(!a.aeth.is_nak());
        assert_eq!(a.aeth.msn, 1);
        assert!(n.tid_ack().is_none(), "nothing more owed");
    }
    check_placed(&n, 0, u64::from(total));
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!((s.write_resps, s.segments_received, s.tid_acks), (4, 4, 4));
    assert_eq!(s.requests_received, 1);
    // Complete: TIDs, flow and region reference are back before any flush.
    assert!(n.leaks().iter().all(|&(_, c)| c == 0), "{:?}", n.leaks());
    assert!(n.respond().is_empty());
    n.flush_and_check();
}

/// Never more than the responder's `max_write` (4) segments allocated per
/// QP, across requests: two 1 MiB WRITEs (four segments each) with TIDs
/// to spare get four WRITE_RESPs, all for the first; each of its
/// segments' data lets one segment of the second be allocated and
/// granted. Kernel: the `alloc_w_segs >= local->max_write` stop of
/// `hfi1_tid_write_alloc_resources()`.
///
/// Fails with that stop taken out (checked): all eight segments are
/// allocated at once (a request alone is also held to four by its
/// `n_flows`, so one request could not show it).
#[test]
fn at_most_four_segments_are_allocated_per_qp() {
    let mut n = Node::new(256, 512);
    let one = 4 * SEG;
    assert_eq!(n.write_req(100, BASE, one, RKEY), WriteReqVerdict::Accepted);
    let b = BASE + u64::from(one);
    assert_eq!(n.write_req(104, b, one, RKEY), WriteReqVerdict::Accepted);
    assert_eq!(n.with_w(|t| t.write_responder.alloc_w_segs()), 4);
    let mut resps = n.resps();
    assert_eq!(resps.len(), 4, "four segments granted");
    assert_eq!(n.with_w(|t| t.write_responder.pending_tid_w_segs()), 4);
    for k in 0..8u32 {
        let r = resps.remove(0);
        assert_eq!(r.psn, Psn::new(100 + k));
        let remote = if k < 4 { BASE } else { b };
        n.send_segment(&r, k % 4, one, remote);
        assert!(n.tid_ack().is_some());
        let more = n.resps();
        let want = usize::from(k < 4);
        assert_eq!(more.len(), want, "one more after segment {k}");
        resps.extend(more);
        assert!(n.with_w(|t| t.write_responder.alloc_w_segs()) <= 4);
    }
    check_placed(&n, 0, 2 * u64::from(one));
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!(s.requests_received, 2);
    n.done();
}

/// The responder's TIDs run out: room for one scattered segment (8 groups,
/// 64 entries). A 512 KiB WRITE gets its first segment; the second has to
/// wait, so the QP is queued on the RcvArray queue and an RNR NAK is
/// scheduled for the second segment's PSN, with the timer index of one
/// segment ahead (20 µs at 100 Gb/s: index 2). The first leg sends the
/// first WRITE_RESP, then the NAK at that segment boundary. When the first
/// segment's data arrives its TIDs come back, the QP is woken and gets
/// them, but sends nothing until the requester resends the WRITE_REQ from
/// the NAKed PSN; that resend revives the same entry (no new message
/// sequence number, one region reference) and the second WRITE_RESP
/// follows. Kernel: `hfi1_tid_write_alloc_resources()`, `send_rnr_nak`,
/// `hfi1_compute_tid_rnr_timeout()`, the revive in
/// `hfi1_rc_rcv_tid_rdma_write_req()`, `make_rc_ack()`'s RNR branch.
///
/// Fails with the RNR decision taken out of the receive path (checked):
/// no NAK is scheduled, so the requester would never learn to retry.
#[test]
fn rnr_nak_then_success_when_tids_free() {
    let mut n = Node::new(8, 128);
    let total = 2 * SEG;
    assert_eq!(
        n.write_req(100, BASE, total, RKEY),
        WriteReqVerdict::Accepted
    );
    let (st, waiting, expected) = n.with_w(|t| {
        (
            t.write_responder.rnr_nak_state(),
            t.write_responder.alloc_w_segs(),
            t.responder.expected_psn(),
        )
    });
    assert_eq!(st, RnrNakState::Send);
    assert_eq!(waiting, 1, "the first segment only");
    assert_eq!(
        expected,
        Psn::new(101),
        "r_psn pulled back to the NAKed segment"
    );
    assert_eq!(n.leaks().iter().find(|l| l.0 == "queued").unwrap().1, 1);
    let out = n.respond();
    assert_eq!(out.len(), 2, "WRITE_RESP, then the RNR NAK");
    let r0 = parse_resp(&out[0]);
    assert_eq!(r0.psn, Psn::new(100));
    let (psn, syndrome, msn) = parse_rc_ack(&out[1]);
    assert_eq!(psn, Psn::new(101));
    assert_eq!(syndrome, 0x20 | 2, "RNR NAK, timer index 2 (20 µs)");
    assert_eq!(msn, 1);
    assert_eq!(
        n.with_w(|t| t.write_responder.rnr_nak_state()),
        RnrNakState::Sent
    );
    assert!(n.respond().is_empty(), "nothing before the resend");

    // The first segment's data: its TIDs come back and the QP, woken,
    // takes them for the second segment, but sends nothing yet.
    assert_eq!(
        n.send_segment(&r0, 0, total, BASE),
        [DataVerdict::SegmentDone]
    );
    let (_, a) = parse_tid_ack(&n.tid_ack().unwrap());
    assert_eq!(a.verbs_psn, Psn::new(100));
    assert_eq!(n.leaks().iter().find(|l| l.0 == "queued").unwrap().1, 0);
    assert_eq!(n.with_w(|t| t.write_responder.alloc_w_segs()), 1);
    // The wake-up scheduled the QP's first leg (its reference travels
    // with the work item); running it sends nothing yet.
    let woken = n.rcd.sched.pop_send().expect("the first leg scheduled");
    assert!(std::ptr::eq(&*woken, &*n.qp));
    drop(woken);
    assert!(n.respond().is_empty(), "still waiting for the resend");

    // The requester's RNR timer fired: the WRITE_REQ again, from PSN 101,
    // for what is left.
    assert_eq!(
        n.write_req(101, BASE + u64::from(SEG), SEG, RKEY),
        WriteReqVerdict::Revived
    );
    assert_eq!(n.wmrs.refs(), 1, "the same entry, one region reference");
    assert_eq!(n.with_w(|t| t.responder.msn()), 1, "no new message");
    let out = n.respond();
    assert_eq!(out.len(), 1);
    let r1 = parse_resp(&out[0]);
    assert_eq!(r1.psn, Psn::new(101));
    assert_eq!(
        n.send_segment(&r1, 1, total, BASE),
        [DataVerdict::RequestDone]
    );
    let (_, a) = parse_tid_ack(&n.tid_ack().unwrap());
    assert_eq!(a.verbs_psn, Psn::new(101));
    check_placed(&n, 0, u64::from(total));
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!((s.rnr_scheduled, s.rnr_sent, s.revived), (1, 1, 1));
    n.done();
}

/// A WRITE_REQ whose R_Key does not allow the write: the QP errors, a
/// remote access NAK goes out with the request's PSN, no region reference
/// is kept and no TID is programmed. (6.1 errors the QP without sending
/// the NAK; see the WRITE responder's module doc.) Kernel: the
/// `rvt_rkey_ok()` check of `hfi1_rc_rcv_tid_rdma_write_req()`.
///
/// Fails with 6.1's rule put back (the QP errored, no NAK queued;
/// checked): the refusal carries no NAK.
#[test]
fn bad_rkey_write_req_is_naked_as_a_remote_access_error() {
    let mut n = Node::new(16, 64);
    assert_eq!(
        n.write_req(100, BASE, SEG, RKEY + 1),
        WriteReqVerdict::Refused(Some(NakCode::RemoteAccessError))
    );
    assert_eq!(n.state(), QpState::Error);
    let out = n.respond();
    assert_eq!(out.len(), 1);
    let (psn, syndrome, _) = parse_rc_ack(&out[0]);
    assert_eq!(psn, Psn::new(100));
    assert_eq!(syndrome, NakCode::RemoteAccessError.syndrome());
    // Outside the region, a length that is not a page multiple, a QP
    // without remote write: refused the same way, never a panic.
    let mut m = Node::new(16, 64);
    assert_eq!(
        m.write_req(100, BASE + 63 * 4096, 2 * 4096, RKEY),
        WriteReqVerdict::Refused(Some(NakCode::RemoteAccessError))
    );
    let mut m = Node::new(16, 64);
    assert_eq!(
        m.write_req(100, BASE, 4096 + 1, RKEY),
        WriteReqVerdict::Refused(Some(NakCode::InvalidRequest))
    );
    assert!(n.leaks().iter().all(|&(_, c)| c == 0), "{:?}", n.leaks());
    assert!(m.leaks().iter().all(|&(_, c)| c == 0), "{:?}", m.leaks());
    n.flush_and_check();
    m.flush_and_check();
}

/// An RNR episode holds the receive side's NAK state, as 6.1's
/// `r_nak_state` holds the RNR syndrome: a request with a PSN ahead of
/// the pulled-back `r_psn` (the requester's next WRITE_REQ, sent before
/// the RNR NAK reached it) earns no PSN NAK, whether the RNR NAK is still
/// scheduled or already sent; the wire carries only the WRITE_RESP and the
/// RNR NAK. Once the resend revives the entry the episode is over, and a
/// request ahead gets its PSN NAK again. Kernel: `send_rnr_nak` in
/// `hfi1_tid_write_alloc_resources()` (`qp->r_nak_state = .. |
/// IB_RNR_NAK`), the `diff > 0` branch of `tid_rdma_rcv_error()`
/// (`if (!qp->r_nak_state)`), the revive in
/// `hfi1_rc_rcv_tid_rdma_write_req()`.
///
/// Fails with the RNR kept apart from the NAK state (checked): the
/// request ahead earns a PSN NAK (`Refused(Some(PsnError))`), owed for
/// the same PSN 101 behind the responses.
#[test]
fn a_request_ahead_during_an_rnr_episode_gets_no_psn_nak() {
    let mut n = Node::new(8, 256);
    let total = 2 * SEG;
    assert_eq!(
        n.write_req(100, BASE, total, RKEY),
        WriteReqVerdict::Accepted
    );
    assert_eq!(
        n.with_w(|t| t.write_responder.rnr_nak_state()),
        RnrNakState::Send
    );
    let next = BASE + u64::from(total);
    assert_eq!(
        n.write_req(102, next, SEG, RKEY),
        WriteReqVerdict::Refused(None),
        "RNR scheduled: no PSN NAK"
    );
    let out = n.respond();
    assert_eq!(out.len(), 2, "WRITE_RESP and the RNR NAK only");
    let r0 = parse_resp(&out[0]);
    let (psn, syndrome, _) = parse_rc_ack(&out[1]);
    assert_eq!((psn, syndrome & 0xE0), (Psn::new(101), 0x20));
    assert_eq!(
        n.write_req(102, next, SEG, RKEY),
        WriteReqVerdict::Refused(None),
        "RNR sent: still no PSN NAK"
    );
    assert!(n.respond().is_empty());
    assert_eq!(n.state(), QpState::Rts);

    n.send_segment(&r0, 0, total, BASE);
    assert!(n.tid_ack().is_some());
    assert_eq!(
        n.write_req(101, BASE + u64::from(SEG), SEG, RKEY),
        WriteReqVerdict::Revived
    );
    // The episode is over: a request ahead earns its PSN NAK again.
    assert_eq!(
        n.write_req(103, next, SEG, RKEY),
        WriteReqVerdict::Refused(Some(NakCode::PsnError))
    );
    let out = n.respond();
    let r1 = parse_resp(&out[0]);
    assert_eq!(r1.psn, Psn::new(101));
    let (psn, syndrome, _) = parse_rc_ack(out.last().unwrap());
    assert_eq!(
        (psn, syndrome),
        (Psn::new(102), NakCode::PsnError.syndrome())
    );
    n.send_segment(&r1, 1, total, BASE);
    assert!(n.tid_ack().is_some());
    check_placed(&n, 0, u64::from(total));
    // The wake-up's first leg, run above by hand.
    drop(n.rcd.sched.pop_send());
    n.done();
}

/// A lost segment tail recovered by RESYNC. A 512 KiB WRITE: segment 0
/// arrives and is acknowledged; segment 1 loses its WRITE_DATA_LAST, so
/// the chip places the rest and software hears nothing. The requester's
/// TID retry sends a RESYNC for the generation after the flow's: the
/// responder re-arms its flow there from sequence 0 (the chip takes the
/// resent segment in sequence), renumbers segment 1 into it, and owes one
/// RESYNC ACK: BTH PSN the RESYNC's, AETH an ACK, `tid_flow_psn` the last
/// KDETH PSN received in order (segment 0's last), and `verbs_psn` segment
/// 1's WRITE_RESP (see the ACK builder's deviation). A second RESYNC for
/// the same generation (the ACK lost) is taken again and answered with
/// the same saved PSN; a RESYNC while the ACK is owed, or for a generation
/// out of place, is ignored. The whole segment then comes again in the new
/// generation and completes the write, every byte in place, nothing held.
/// Kernel: `hfi1_rc_rcv_tid_rdma_resync()`, the RESYNC branches of
/// `make_tid_rdma_ack()` and `hfi1_build_tid_rdma_write_ack()`,
/// `hfi1_tid_rdma_is_resync_psn()`.
///
/// Fails with the flow left in its generation (checked: the
/// `resync_hw_flow` call taken out): the QP's flow is still in the old
/// generation. Fails with 6.1's naming put back (checked): the RESYNC
/// ACK's `verbs_psn` is 100, segment 0's, below the requester's oldest
/// unacknowledged segment.
#[test]
fn resync_moves_the_flow_and_its_ack_names_the_unacked_segment() {
    let (mut n, resps) = two_segments();
    let total = 2 * SEG;
    assert_eq!(
        n.send_segment(&resps[0], 0, total, BASE),
        [DataVerdict::SegmentDone]
    );
    assert!(n.tid_ack().is_some());
    let g = resps[1].hdr.flow_psn.generation();
    let out = n.send_flow(&resps[1], (1, total, BASE), resps[1].hdr.flow_psn, |i| {
        i < 63
    });
    assert!(
        out.iter()
            .all(|(_, o, v)| o.placed && !o.delivered && v.is_none())
    );

    let rpsn = resync::psn_before(g.next()).get();
    let far = resync::psn_before(g.next().next()).get();
    assert_eq!(
        n.resync(far),
        ResyncVerdict::Ignored,
        "a generation out of place"
    );
    assert_eq!(n.resync(rpsn), ResyncVerdict::Resynced);
    assert_eq!(n.with_w(|t| t.flow.generation), g.next());
    assert_eq!(n.resync(rpsn), ResyncVerdict::Ignored, "its ACK still owed");
    let saved = FlowPsn::new(g, 63);
    for _ in 0..2 {
        let (psn, a) = parse_tid_ack(&n.tid_ack().expect("the RESYNC ACK"));
        assert_eq!(psn.get(), rpsn, "the RESYNC's PSN");
        assert!(!a.aeth.is_nak());
        assert_eq!(a.resync_psn, saved, "segment 0's last flow PSN");
        assert_eq!(a.verbs_psn, Psn::new(101), "segment 1 is not acknowledged");
        assert!(n.tid_ack().is_none());
        // The ACK lost: the requester's next RESYNC names the same
        // generation, the flow's current one.
        assert_eq!(n.resync(rpsn), ResyncVerdict::Resynced);
    }
    assert_eq!(n.with_w(|t| t.flow.generation), g.next());
    assert!(n.tid_ack().is_some(), "the last RESYNC's ACK");

    let again = n.send_flow(
        &resps[1],
        (1, total, BASE),
        FlowPsn::new(g.next(), 0),
        |_| true,
    );
    assert!(again.iter().all(|(_, o, _)| o.placed && o.error.is_none()));
    let verdicts: Vec<_> = again.iter().filter_map(|(_, _, v)| *v).collect();
    assert_eq!(verdicts, [DataVerdict::RequestDone]);
    let (psn, a) = parse_tid_ack(&n.tid_ack().unwrap());
    assert_eq!(psn.get(), FlowPsn::new(g.next(), 63).raw());
    assert_eq!(a.verbs_psn, Psn::new(101));
    check_placed(&n, 0, u64::from(total));
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!((s.resyncs, s.resyncs_ignored, s.resync_acks), (3, 2, 3));
    n.done();
}

/// The first segment of a `total`-byte WRITE received, the second's
/// last packet lost, then a RESYNC into the next generation taken and its
/// ACK sent: returns the segments' generation and the RESYNC's PSN.
fn resynced_after_a_lost_packet(n: &mut Node, resps: &[Resp], total: u32) -> (Generation, u32) {
    assert_eq!(
        n.send_segment(&resps[0], 0, total, BASE),
        [DataVerdict::SegmentDone]
    );
    assert!(n.tid_ack().is_some());
    let g = resps[1].hdr.flow_psn.generation();
    let lost = n.send_flow(&resps[1], (1, total, BASE), resps[1].hdr.flow_psn, |i| {
        i < 63
    });
    assert!(lost.iter().all(|(_, _, v)| v.is_none()));
    let rpsn = resync::psn_before(g.next()).get();
    assert_eq!(n.resync(rpsn), ResyncVerdict::Resynced);
    assert!(n.tid_ack().is_some(), "the RESYNC ACK");
    (g, rpsn)
}

/// A copy of a RESYNC the fabric held back reaches the responder after
/// the RESYNC was taken, its ACK sent and the renumbered segment received
/// in the new generation: it names the flow's current generation, as a
/// resent RESYNC after a lost ACK does, but a segment of that generation
/// has come since, so it is ignored (counted `stale_resyncs`, no ACK
/// owed, the flow left where it is). Kernel:
/// `hfi1_rc_rcv_tid_rdma_resync()` (see the deviation in
/// `receive_resync`).
///
/// Fails with 6.1's rule (checked: the copy is taken, `Resynced`, and its
/// ACK owed). In the fuzz world (`write_pair/late-copy-of-a-taken-resync`)
/// the copy's renumbering put the next segments onto the sequences of the
/// one received, the requester renumbered one of them to no packets and
/// its second leg could not build it.
#[test]
fn a_late_copy_of_a_taken_resync_is_ignored() {
    let mut n = Node::new(64, 256);
    let total = 3 * SEG;
    assert_eq!(
        n.write_req(100, BASE, total, RKEY),
        WriteReqVerdict::Accepted
    );
    let resps = n.resps();
    assert_eq!(resps.len(), 3);
    let (g, rpsn) = resynced_after_a_lost_packet(&mut n, &resps, total);
    let again = n.send_flow(
        &resps[1],
        (1, total, BASE),
        FlowPsn::new(g.next(), 0),
        |_| true,
    );
    let verdicts: Vec<_> = again.iter().filter_map(|(_, _, v)| *v).collect();
    assert_eq!(verdicts, [DataVerdict::SegmentDone]);
    assert!(n.tid_ack().is_some(), "the segment's ACK");
    assert_eq!(n.resync(rpsn), ResyncVerdict::Ignored, "a late copy");
    assert!(n.tid_ack().is_none(), "no ACK for the copy");
    // The last segment keeps the sequences the RESYNC gave it, after
    // the 64 of the one received.
    assert_eq!(n.with_w(|t| t.flow.generation), g.next());
    let last = n.send_flow(
        &resps[2],
        (2, total, BASE),
        FlowPsn::new(g.next(), 64),
        |_| true,
    );
    let verdicts: Vec<_> = last.iter().filter_map(|(_, _, v)| *v).collect();
    assert_eq!(verdicts, [DataVerdict::RequestDone]);
    check_placed(&n, 0, u64::from(total));
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!((s.resyncs, s.stale_resyncs, s.resync_acks), (1, 1, 1));
    n.done();
}

/// As [`a_late_copy_of_a_taken_resync_is_ignored`], with only the first
/// ten packets of the renumbered segment come: the chip placed them
/// without handing them to software (header suppression), and its flow
/// register says so, so the late copy is ignored all the same and the
/// rest of the segment completes the write. With the rule reading only
/// what software saw (checked) the copy was taken: the flow went back to
/// sequence 0 and the rest of the segment was NAKed, as in the fuzz input
/// `write_pair/resync-ack-acknowledges-a-segment-not-received`.
#[test]
fn a_late_copy_of_a_taken_resync_is_ignored_once_the_chip_placed_data() {
    let (mut n, resps) = two_segments();
    let total = 2 * SEG;
    let (g, rpsn) = resynced_after_a_lost_packet(&mut n, &resps, total);
    let again = FlowPsn::new(g.next(), 0);
    let first = n.send_flow(&resps[1], (1, total, BASE), again, |i| i < 10);
    assert!(
        first
            .iter()
            .all(|(_, o, v)| o.placed && !o.delivered && v.is_none())
    );
    assert_eq!(n.resync(rpsn), ResyncVerdict::Ignored, "a late copy");
    assert!(n.tid_ack().is_none(), "no ACK for the copy");
    let rest = n.send_flow(&resps[1], (1, total, BASE), again, |i| i >= 10);
    let verdicts: Vec<_> = rest.iter().filter_map(|(_, _, v)| *v).collect();
    assert_eq!(verdicts, [DataVerdict::RequestDone]);
    check_placed(&n, 0, u64::from(total));
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!((s.resyncs, s.stale_resyncs, s.resync_acks), (1, 1, 1));
    n.done();
}

/// A WRITE_REQ behind `r_psn` whose PSN names a plain READ entry (no
/// TID WRITE there: a forged or misdirected packet) is dropped and
/// counted, not taken as a duplicate of a TID WRITE.
/// Deviation from 6.1, which would handle it by the entry's opcode (the
/// module doc's list). With every entry taken for a TID WRITE (checked:
/// `Responder::is_write` always true) it was handled as a duplicate of
/// one.
#[test]
fn a_write_req_naming_a_read_entry_is_dropped() {
    let mut n = Node::new(64, 256);
    let mut root = LockToken::root();
    {
        let mut g = n.qp.s_lock.lock(&mut root);
        g.ext.conn.remote_read = true;
        // Zero bytes: no region needed (this node's table lends none for
        // reading).
        let r = tid_read_proto::wire::reth::Repr {
            vaddr: 0,
            rkey: 0,
            length: 0,
        };
        let v = qp::receive_plain_read::<SoftPlatform>(&mut g, Psn::new(100), &r, &n.wmrs);
        assert_eq!(v, tid_read_proto::responder::ReqVerdict::Accepted);
    }
    assert_eq!(n.write_req(101, BASE, SEG, RKEY), WriteReqVerdict::Accepted);
    assert_eq!(n.write_req(100, BASE, SEG, RKEY), WriteReqVerdict::Dropped);
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!((s.duplicates, s.duplicates_dropped), (0, 1));
}

/// A lost WRITE_RESP, and the requester's go-back-N resend of the
/// WRITE_REQ (its RC retry restarts from the request's first PSN): the
/// responder finds the entry behind `r_psn`, rewinds it to the segment the
/// PSN names and sends both WRITE_RESPs again with the same IB PSNs, flow
/// PSNs, flow and TID entries; nothing is allocated or programmed again
/// and no new message is counted. The data then completes the write.
/// Kernel: the TID WRITE branch of `tid_rdma_rcv_error()`, the
/// `TID_REQUEST_RESEND_ACTIVE` path of `hfi1_build_tid_rdma_write_resp()`.
///
/// Fails with the duplicate left alone (checked: it returned at once, as
/// when it was dropped): nothing is sent again, so the requester, missing
/// the first WRITE_RESP, never sends the data.
#[test]
fn duplicate_write_req_resends_the_same_write_resps() {
    let (mut n, first) = two_segments();
    let total = 2 * SEG;
    let before = n.leaks();
    let allocated = n.with_w(|t| t.write_responder.stats.segments_allocated);
    // The first WRITE_RESP is lost; the requester resends the WRITE_REQ.
    assert_eq!(
        n.write_req(100, BASE, total, RKEY),
        WriteReqVerdict::Duplicate
    );
    let again = n.resps();
    assert_eq!(again.len(), 2, "both segments' WRITE_RESPs again");
    for (a, b) in first.iter().zip(&again) {
        assert_eq!((a.psn, a.hdr, &a.entries), (b.psn, b.hdr, &b.entries));
    }
    assert_eq!(n.leaks(), before, "nothing programmed or taken again");
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!((s.segments_allocated, s.duplicates), (allocated, 1));
    assert_eq!(n.with_w(|t| t.responder.msn()), 1);
    assert_eq!(n.with_w(|t| t.write_responder.pending_tid_w_segs()), 2);
    assert!(n.respond().is_empty());
    for (k, r) in again.iter().enumerate() {
        n.send_segment(r, k as u32, total, BASE);
        assert!(n.tid_ack().is_some());
    }
    check_placed(&n, 0, u64::from(total));
    n.done();
}

/// A copy of WRITE_REQ #1 arriving while #1 has had no WRITE_RESP yet
/// (its first leg has not run) and #2 waits behind it: nothing is resent
/// or allocated again, and #2 is set to wait for its own resend
/// (`INIT_RESEND`, 6.1's go-back-N assumption): the first leg answers
/// #1 only; #2's WRITE_RESP goes out once its own WRITE_REQ comes again.
/// Kernel: the `old_req || TID_REQUEST_INIT` branch of
/// `tid_rdma_rcv_error()`, `make_rc_ack()` skipping `INIT_RESEND`
/// entries.
///
/// Fails with the later entries left as they were (checked: the
/// `INIT_RESEND` marking taken out): #2's WRITE_RESP goes out with #1's.
#[test]
fn duplicate_of_an_unanswered_write_req_holds_the_later_ones() {
    let mut n = Node::new(64, 256);
    let b = BASE + u64::from(SEG);
    assert_eq!(n.write_req(100, BASE, SEG, RKEY), WriteReqVerdict::Accepted);
    assert_eq!(n.write_req(101, b, SEG, RKEY), WriteReqVerdict::Accepted);
    assert_eq!(
        n.write_req(100, BASE, SEG, RKEY),
        WriteReqVerdict::Duplicate
    );
    let out = n.resps();
    assert_eq!(out.len(), 1, "#1 only");
    assert_eq!(out[0].psn, Psn::new(100));
    assert_eq!(n.write_req(101, b, SEG, RKEY), WriteReqVerdict::Duplicate);
    let out2 = n.resps();
    assert_eq!(out2.len(), 1, "#2 after its own resend");
    assert_eq!(out2[0].psn, Psn::new(101));
    n.send_segment(&out[0], 0, SEG, BASE);
    assert!(n.tid_ack().is_some());
    n.send_segment(&out2[0], 0, SEG, b);
    assert!(n.tid_ack().is_some());
    check_placed(&n, 0, 2 * u64::from(SEG));
    assert_eq!(n.with_w(|t| t.responder.msn()), 2);
    n.done();
}

/// Both WRITE_REQs allocated and neither answered when copies of both
/// come (the first leg has not run): the copy of #1 sets #2 waiting for
/// its resend; the copy of #2, a request already scheduled, brings it
/// back and moves the send pointer to #2, past #1 (6.1 re-processes from
/// the copy's own entry). #1 then gets no WRITE_RESP, neither from the
/// first leg nor for the requester's resend of it, which only sets #2
/// waiting again: the requester's retries run out. Kept as 6.1 runs it,
/// and counted (`send_pointer_skips`) so the fuzz interpreter can tell
/// this stop from a lost request. Kernel: the end of the TID WRITE
/// branch of `tid_rdma_rcv_error()` (`s_tail_ack_queue = prev` with
/// `old_req` set), `find_prev_entry()`, `make_rc_ack()`.
///
/// Fails if the pointer is left where it was for a scheduled copy
/// (checked): #1's WRITE_RESP goes out first.
#[test]
fn a_copy_of_a_scheduled_write_req_skips_an_unanswered_one_as_6_1_does() {
    let mut n = Node::new(64, 256);
    let b = BASE + u64::from(SEG);
    assert_eq!(n.write_req(100, BASE, SEG, RKEY), WriteReqVerdict::Accepted);
    assert_eq!(n.write_req(101, b, SEG, RKEY), WriteReqVerdict::Accepted);
    let dup = |n: &mut Node, psn, va| n.write_req(psn, va, SEG, RKEY);
    assert_eq!(dup(&mut n, 100, BASE), WriteReqVerdict::Duplicate);
    assert_eq!(dup(&mut n, 101, b), WriteReqVerdict::Duplicate);
    assert_eq!(n.with_w(|t| t.write_responder.stats.send_pointer_skips), 1);
    let out = n.resps();
    assert_eq!(out.len(), 1, "#2 only");
    assert_eq!(out[0].psn, Psn::new(101));
    for _ in 0..3 {
        assert_eq!(dup(&mut n, 100, BASE), WriteReqVerdict::Duplicate);
        assert!(n.resps().is_empty(), "#1 is never answered");
    }
    assert_eq!(n.with_w(|t| t.write_responder.stats.send_pointer_skips), 1);
    // The requester's retries run out; the flush gives both entries'
    // TIDs, flow and region references back.
    n.flush_and_check();
}

/// Two one-segment WRITEs, both WRITE_RESPs out and no data in yet, then
/// a fabric copy of WRITE_REQ #1 (the send pointer back at #1, #2 to be
/// resent) and, before the first leg runs again, the requester's RESYNC
/// (its TID retry): the requester
/// renumbers both segments it knows into the new generation, #1's from
/// sequence 0 and #2's after it, and the responder must number them the
/// same way. Then both come in the new generation and each lands in its
/// own buffer. Kernel: `hfi1_rc_rcv_tid_rdma_resync()`, whose walk stops
/// at the send pointer (see the deviation in the RESYNC handler).
///
/// Fails with 6.1's walk put back (checked): #2's segment keeps its old
/// generation and PSNs, and its last packet in the new one is NAKed.
#[test]
fn a_resync_after_a_rewinding_duplicate_renumbers_every_segment() {
    let mut n = Node::new(64, 256);
    let b = BASE + u64::from(SEG);
    assert_eq!(n.write_req(100, BASE, SEG, RKEY), WriteReqVerdict::Accepted);
    assert_eq!(n.write_req(101, b, SEG, RKEY), WriteReqVerdict::Accepted);
    let out = n.resps();
    assert_eq!(out.len(), 2);
    assert_eq!(
        n.write_req(100, BASE, SEG, RKEY),
        WriteReqVerdict::Duplicate
    );
    // The RESYNC comes before the first leg runs again: the send pointer
    // is still at #1.
    let g = out[0].hdr.flow_psn.generation();
    assert_eq!(
        n.resync(resync::psn_before(g.next()).get()),
        ResyncVerdict::Resynced
    );
    assert!(n.tid_ack().is_some(), "the RESYNC ACK");
    let again = n.resps();
    assert_eq!(again.len(), 1, "#1's WRITE_RESP again");
    assert_eq!(again[0].hdr.flow_psn, FlowPsn::new(g.next(), 0));
    let first = n.send_flow(&out[0], (0, SEG, BASE), FlowPsn::new(g.next(), 0), |_| true);
    let second = n.send_flow(&out[1], (0, SEG, b), FlowPsn::new(g.next(), 64), |_| true);
    for (k, seg) in [first, second].iter().enumerate() {
        assert!(
            seg.iter().all(|(_, o, _)| o.placed && o.error.is_none()),
            "#{}",
            k + 1
        );
        let v: Vec<_> = seg.iter().filter_map(|(_, _, v)| *v).collect();
        assert_eq!(v, [DataVerdict::RequestDone], "#{}", k + 1);
    }
    check_placed(&n, 0, 2 * u64::from(SEG));
    while n.tid_ack().is_some() {}
    n.done();
}

/// An eight-segment WRITE with four segments allocated and answered;
/// before the first leg runs again, a fabric copy of the WRITE_REQ resend
/// from segment 1 and then the resend from segment 4, the first not
/// allocated (as after an RNR NAK there). Nothing is left to resend, so
/// the resend ends: when the four segments' data come in and four more
/// are allocated, the first leg answers segments 4 to 7 with their own
/// flow records, and every byte lands in place. Kernel: the TID WRITE
/// branch of `tid_rdma_rcv_error()` (see the deviation in `dup`),
/// `hfi1_build_tid_rdma_write_resp()`.
///
/// Fails with 6.1's rewind put back (checked): the second copy moves
/// `flow_idx` to the end and leaves `cur_seg` at 1, and the next
/// WRITE_RESP names PSN 101 for segment 4's flow.
#[test]
fn a_second_copy_past_the_allocated_segments_ends_the_resend() {
    let mut n = Node::new(256, 512);
    let total = 8 * SEG;
    assert_eq!(
        n.write_req(100, BASE, total, RKEY),
        WriteReqVerdict::Accepted
    );
    let first = n.resps();
    assert_eq!(first.len(), 4);
    for psn in [101, 104] {
        let v = n.write_req(psn, BASE, total, RKEY);
        assert_eq!(v, WriteReqVerdict::Duplicate, "copy at {psn}");
    }
    for (k, r) in first.iter().enumerate() {
        n.send_segment(r, k as u32, total, BASE);
        assert!(n.tid_ack().is_some());
    }
    let second = n.resps();
    let psns: Vec<u32> = second.iter().map(|r| r.psn.get()).collect();
    assert_eq!(psns, [104, 105, 106, 107]);
    for (k, r) in second.iter().enumerate() {
        n.send_segment(r, 4 + k as u32, total, BASE);
        assert!(n.tid_ack().is_some());
    }
    check_placed(&n, 0, u64::from(total));
    assert_eq!(n.with_w(|t| t.write_responder.stats.requests_received), 1);
    n.done();
}

/// A lost WRITE_DATA in the middle of a segment: the chip places the
/// packets after it (their TIDs are valid) but hands each to software with
/// a flow sequence error. The first starts software PSN checking from the
/// chip's flow register and owes one TID NAK for the lost packet; the
/// rest of the episode owes no other. The NAK names the segment's
/// WRITE_RESP and the expected flow PSN; the requester resends from there
/// and the segment completes, every byte in place. A packet from another
/// generation (a stale copy) is a generation error: not placed, and a NAK
/// for the packet expected. Kernel: the TID WRITE half of
/// `hfi1_handle_kdeth_eflags()` (`RHF_RTE_EXPECTED_FLOW_SEQ_ERR`,
/// `_GEN_ERR`, `nak_psn`), `read_r_next_psn()`.
///
/// Fails with the errors left to the caller as before (checked: the chip
/// receive handing software nothing for a flagged packet): no NAK is owed
/// and the requester never learns of the loss.
#[test]
fn a_sequence_error_naks_the_lost_packet_once() {
    let (mut n, resps) = two_segments();
    let total = 2 * SEG;
    let at = resps[0].hdr.flow_psn;
    let g = at.generation();
    let out = n.send_flow(&resps[0], (0, total, BASE), at, |i| i != 10);
    // Packets 11..=63: placed, each flagged and each a NAK verdict.
    assert_eq!(out.len(), 63);
    let flagged = out.iter().filter(|(_, o, v)| {
        o.placed && o.error == Some(RcvError::FlowSeq) && *v == Some(DataVerdict::Nak)
    });
    assert_eq!(flagged.count(), 53, "{out:?}");
    let (psn, a) = parse_tid_ack(&n.tid_ack().expect("one TID NAK"));
    assert!(a.aeth.is_nak());
    assert_eq!(a.aeth.syndrome, NakCode::PsnError.syndrome());
    assert_eq!(psn.get(), FlowPsn::new(g, 10).raw(), "the lost packet");
    assert_eq!(a.verbs_psn, Psn::new(100));
    assert!(n.tid_ack().is_none(), "once per episode");

    // The requester resends from the NAKed packet.
    // The chip expects it still: the resend is in sequence, suppressed
    // but for the segment's last packet.
    let again = n.send_flow(&resps[0], (0, total, BASE), at, |i| i >= 10);
    let v: Vec<_> = again.iter().filter_map(|(_, _, v)| *v).collect();
    assert_eq!(v, [DataVerdict::SegmentDone], "{again:?}");
    let (psn, a) = parse_tid_ack(&n.tid_ack().unwrap());
    assert!(!a.aeth.is_nak());
    assert_eq!(psn.get(), FlowPsn::new(g, 63).raw());

    // A stale copy from another generation while segment 1 waits.
    let stale = FlowPsn::new(g.next(), 64);
    let out = n.send_flow(&resps[1], (1, total, BASE), stale, |i| i == 0);
    assert!(
        out.iter()
            .all(|(_, o, v)| !o.placed && *v == Some(DataVerdict::Nak))
    );
    let (psn, a) = parse_tid_ack(&n.tid_ack().expect("a NAK for the stale packet"));
    assert!(a.aeth.is_nak());
    assert_eq!(
        psn.get(),
        FlowPsn::new(g, 64).raw(),
        "segment 1's first packet"
    );
    assert_eq!(a.verbs_psn, Psn::new(101));
    let s = n.with_w(|t| t.write_responder.stats);
    assert!(s.seq_errors > 0 && s.gen_errors == 1, "{s:?}");

    assert_eq!(
        n.send_segment(&resps[1], 1, total, BASE),
        [DataVerdict::RequestDone]
    );
    assert!(n.tid_ack().is_some());
    check_placed(&n, 0, u64::from(total));
    n.done();
}

/// The reap timer on the timer service: armed with the first WRITE_RESP
/// for `reap_ns(remote timeout)`; if the data never comes its expiry gives
/// back the flow, every TID and the region reference and errors the QP
/// (no NAK is sent), and later WRITE_DATA is dropped. An expiry with the
/// flag clear does nothing: one injected before any WRITE_RESP, and a
/// late one after the data came in time (the data stopped the timer).
/// Kernel: `hfi1_tid_timeout()`, `hfi1_add_tid_reap_timer()`,
/// `hfi1_stop_tid_reap_timer()`.
///
/// Fails with the flag test taken out (checked): the injected expiry
/// errors a QP that has nothing outstanding.
#[test]
fn reap_timer_expiry_errors_the_qp_and_gives_everything_back() {
    let timers: SimTimers<SoftQp> = SimTimers::new();
    let fire = |n: &mut Node| -> Vec<bool> {
        let mut acted = Vec::new();
        while let Some((qp, t)) = timers.pop_due() {
            assert_eq!(t, QpTimer::Reap);
            assert!(std::ptr::eq(&*qp, &*n.qp));
            let mut root = LockToken::root();
            let mut r = n.r_lock.lock(&mut root);
            acted.push(qp::reap_timeout(&n.rcd, &n.qp, r.token(), &n.wmrs));
        }
        acted
    };
    let mut n = Node::new(64, 128);
    assert_eq!(n.write_req(100, BASE, SEG, RKEY), WriteReqVerdict::Accepted);
    timers.inject(&n.qp, QpTimer::Reap);
    assert_eq!(fire(&mut n), [false], "nothing outstanding: ignored");
    assert_eq!(n.state(), QpState::Rts);
    let resp = parse_resp(&n.respond()[0]);
    let ns = n.with_w(|t| t.write_responder.reap_timer().armed());
    assert_eq!(ns, Some(reap_ns(14)));
    timers.arm(&n.qp, QpTimer::Reap, reap_ns(14));
    timers.advance_to(reap_ns(14) - 1);
    assert!(fire(&mut n).is_empty());
    timers.advance_to(reap_ns(14));
    assert_eq!(fire(&mut n), [true]);
    assert_eq!(n.state(), QpState::Error);
    assert!(n.respond().is_empty(), "no NAK");
    let s = n.with_w(|t| t.write_responder.stats);
    assert_eq!(s.reap_expiries, 1);
    assert!(n.leaks().iter().all(|&(_, c)| c == 0), "{:?}", n.leaks());
    let late = n.send_flow(&resp, (0, SEG, BASE), resp.hdr.flow_psn, |_| true);
    assert!(
        late.iter()
            .all(|(_, _, v)| v.is_none() || *v == Some(DataVerdict::Dropped))
    );
    n.flush_and_check();

    // The data in time: the timer is stopped, a late expiry is ignored.
    let mut m = Node::new(64, 128);
    assert_eq!(m.write_req(100, BASE, SEG, RKEY), WriteReqVerdict::Accepted);
    let resp = parse_resp(&m.respond()[0]);
    timers.arm(&m.qp, QpTimer::Reap, reap_ns(14));
    m.send_segment(&resp, 0, SEG, BASE);
    assert!(m.tid_ack().is_some());
    assert_eq!(m.with_w(|t| t.write_responder.reap_timer().armed()), None);
    timers.advance_to(2 * reap_ns(14));
    assert_eq!(fire(&mut m), [false]);
    assert_eq!(m.state(), QpState::Rts);
    check_placed(&m, 0, u64::from(SEG));
    m.flush_and_check();
}
