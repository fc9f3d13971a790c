// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! In-kernel TID RDMA READ between two software chips (test only): the
//! `tid-read-proto` requester and responder engines on the kernel's locks
//! and allocator, with data placed by the software chip's expected-receive
//! model and checked byte by byte.
//!
//! The platform ([`ReadPlatform`]) is the kernel's where it matters to the
//! kernel: every `s_lock` and `exp_lock` is a real `spinlock_t` with its
//! named lockdep class ([`KernelSpinLock`]), every flow ring and context is
//! `kmalloc`ed ([`KMem`], flow rings built in place), flow generations come
//! from `get_random_u32()`. The chips, the DMA map, the QP reference counts
//! and the scheduler are the software ones of `hfi1_hal::sim`: the test
//! drives the trigger work and the send engines itself, one step at a time,
//! so the run is deterministic apart from the random generations.
//!
//! The requester's receive context (context 1, 16 TID groups, its own
//! software chip) and the responder's QPs (context 2 in their parameters;
//! a READ responder only sends), [`QPS`] connected QP pairs, each reading
//! [`READS`] buffers of different sizes (one page up to two segments)
//! from the responder's memory region into scattered pages. With the
//! group count chosen, the requesters run out of RcvArray space and wait
//! for each other on the RcvArray queue.
//!
//! The test harness itself (packet queues, the software chip's memory, QP
//! references) allocates with the ordinary infallible `alloc` collections:
//! it only runs in the self-test module.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

use hfi1_hal::consts::{PAGE_SIZE, TID_RDMA_JKEY};
use hfi1_hal::lock_order::{EXP_LOCK_CLASS, Lock, LockToken, S_LOCK_CLASS, Unlocked};
use hfi1_hal::sim::{SimContext, SimDma, SimMemory, SimRef, SimScheduler};
use hfi1_hal::{FlowPsn, Psn};
use qp_wait::{DevCounters, Qp, QueueKind, SendState, WaitPlatform};
use tid_alloc::groups::GroupList;
use tid_flow::{CtxtParts, FlowPlatform, RcvCtxt, Sge};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::{self, MAX_PACKET, Parsed, Path};
use tid_read_proto::rc::{
    Connection, MAX_RD_ATOMIC, MrTable, PacketSink, SourceData, TidQp, WcStatus,
};
use tid_read_proto::requester::{self, ReadWr};
use tid_read_proto::responder;
use tid_read_proto::sim_chip;

use crate::errno::Errno;
use crate::kplat::{KMem, KRandom, Kernel, KernelSpinLock, kernel, try_box};

/// QP pairs.
pub const QPS: usize = 4;
/// READs each requester posts.
pub const READS: usize = 3;
/// Bytes of each READ: one page, 16 pages, and 80 pages (two segments:
/// 256 KiB and 64 KiB).
const READ_BYTES: [u32; READS] = [4096, 64 * 1024, 320 * 1024];
/// TID groups of the requester's context: 128 RcvArray entries, two
/// 64-page segments of scattered pages at a time.
const REQ_GROUPS: usize = 16;
const REQ_CTXT: u8 = 1;
const RESP_CTXT: u8 = 2;
const REQ_QPN_BASE: u32 = 0x100;
const RESP_QPN_BASE: u32 = 0x400;
const FIRST_PSN: u32 = 0x10;
/// Packets the responder builds per turn.
const RESP_BUDGET: u32 = 8;
/// Steps after which a run that has not finished counts as stuck.
const MAX_STEPS: u32 = 100_000;

/// The READ test's platform: kernel locks and memory, software chip.
#[derive(Debug)]
pub enum ReadPlatform {}

/// A counted reference to one of the test's QPs.
type RQp = SimRef<Qp<ReadPlatform>>;

impl WaitPlatform for ReadPlatform {
    type Lock = KernelSpinLock;
    type Ext = TidQp<ReadPlatform>;
    type Ref = RQp;
    type Sched = SimScheduler<RQp>;
}

impl FlowPlatform for ReadPlatform {
    type Chip = SimContext;
    type Dma = SimDma;
    type Mem = KMem;
    type Dev = Box<DevCounters>;
}

/// What the READ test saw (`struct hfi1_tid_read_result`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadTestResult {
    /// READs posted.
    pub posted: u64,
    /// READs completed successfully.
    pub completed: u64,
    /// READs completed with an error status.
    pub failed: u64,
    /// Bytes checked equal to the responder's data.
    pub verified_bytes: u64,
    /// Bytes that differ (or were never placed).
    pub mismatched_bytes: u64,
    /// Segments the requesters set up.
    pub segments: u64,
    /// Times a requester waited for RcvArray space.
    pub tid_waits: u64,
    /// Packets from the requesters (READ_REQs).
    pub to_responder: u64,
    /// Packets from the responders (READ_RESPs, ACKs).
    pub to_requester: u64,
    /// Retry-timer firings (none expected without packet loss).
    pub timeouts: u64,
    /// Engine calls that returned an error, and unexpected packets.
    pub errors: u64,
    /// Steps the run took.
    pub steps: u64,
    /// Held at the end: TID entries, flows, waiters, DMA mappings, MR
    /// references, QP references beyond the test's own, unfinished READs.
    pub left_over: u64,
}

/// The responder's memory regions: one per QP, `rkey = 0x5000 + i`.
struct Mrs {
    base: [u64; QPS],
    len: u64,
    refs: [Cell<i64>; QPS],
}

impl Mrs {
    fn region(i: usize) -> u64 {
        (i as u64).wrapping_add(1) << 40
    }
}

impl MrTable for Mrs {
    fn get(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        let i = rkey.checked_sub(0x5000)? as usize;
        let base = *self.base.get(i)?;
        let end = vaddr.checked_add(u64::from(len))?;
        if vaddr < base || end > base.saturating_add(self.len) {
            return None;
        }
        let r = self.refs.get(i)?;
        r.set(r.get().wrapping_add(1));
        u32::try_from(i).ok()
    }

    fn put(&self, mr: u32) {
        if let Some(r) = self.refs.get(mr as usize) {
            r.set(r.get().wrapping_sub(1));
        }
    }
}

impl SourceData for Mrs {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        let end = vaddr.saturating_add(out.len() as u64);
        if !self
            .base
            .iter()
            .any(|&b| vaddr >= b && end <= b.saturating_add(self.len))
        {
            return false;
        }
        fill_pattern(vaddr, out);
        true
    }
}

/// The responder's byte at `addr`: a mix of its address, so a byte placed
/// at the wrong offset or from the wrong region shows.
fn pattern(addr: u64) -> u8 {
    let mut z = addr.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as u8
}

fn fill_pattern(addr: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = pattern(addr.wrapping_add(i as u64));
    }
}

/// Packets an engine built, in order.
struct Outbox {
    buf: Vec<u8>,
    out: VecDeque<Vec<u8>>,
}

impl PacketSink for Outbox {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn send(&mut self, len: usize) {
        if let Some(p) = self.buf.get(..len) {
            self.out.push_back(p.to_vec());
        }
    }
}

/// One READ a requester posted.
struct Posted {
    wr_id: u64,
    remote: u64,
    sges: Vec<Sge>,
}

/// One requester QP and its peer.
struct Pair {
    req: RQp,
    resp: RQp,
    posted: Vec<Posted>,
    next_read: usize,
    next_remote: u64,
    resp_ready: bool,
}

/// A QP whose `s_lock` is a kernel spinlock, initialised where it lives.
fn new_qp(k: Kernel, qpn: u32, slot: u32, conn: Connection) -> Option<RQp> {
    let raw = KernelSpinLock::try_new(k, &S_LOCK_CLASS).ok()?;
    Some(SimRef::new(Qp::new(
        qpn,
        slot,
        slot,
        Lock::with_raw(
            raw,
            SendState {
                flags: Default::default(),
                ext: TidQp::new(conn, Psn::new(FIRST_PSN)),
            },
        ),
    )))
}

/// A receive context on its own software chip with `ngroups` groups.
fn new_ctxt(k: Kernel, ctxt: u8, ngroups: usize, slots: u32) -> Option<Box<RcvCtxt<ReadPlatform>>> {
    let entries = (ngroups as u32).saturating_mul(8);
    let chip = SimContext::try_new(0, entries).ok()?;
    let parts = CtxtParts {
        ctxt: u32::from(ctxt),
        chip,
        expected_base: 0,
        ngroups,
        qp_slots: slots,
        sched: SimScheduler::new(),
        dma: SimDma::new(),
        mem: KMem,
        dev: try_box(DevCounters::new())?,
    };
    let raw = KernelSpinLock::try_new(k, &EXP_LOCK_CLASS).ok()?;
    RcvCtxt::<ReadPlatform>::try_new_in_with(&KMem, parts, raw, &mut KRandom(k)).ok()
}

fn connections(i: usize) -> (Connection, Connection) {
    let req_params = TidParams::local(REQ_CTXT, TID_RDMA_JKEY, 14, false);
    let resp_params = TidParams::local(RESP_CTXT, TID_RDMA_JKEY, 14, false);
    let (rq, sq) = (REQ_QPN_BASE + i as u32, RESP_QPN_BASE + i as u32);
    let req = Connection {
        verbs_qpn: rq,
        remote_verbs_qpn: sq,
        local: req_params,
        remote: resp_params,
        pmtu: 4096,
        path: Path { dlid: 2, slid: 1 },
        max_rd_atomic: MAX_RD_ATOMIC,
        remote_read: false,
    };
    let resp = Connection {
        verbs_qpn: sq,
        remote_verbs_qpn: rq,
        local: resp_params,
        remote: req_params,
        pmtu: 4096,
        path: Path { dlid: 1, slid: 2 },
        max_rd_atomic: MAX_RD_ATOMIC,
        remote_read: true,
    };
    (req, resp)
}

/// The test's state.
struct Run {
    req_rcd: Box<RcvCtxt<ReadPlatform>>,
    pairs: Vec<Pair>,
    mrs: Mrs,
    mem: SimMemory,
    next_pfn: u64,
    to_resp: Outbox,
    to_req: Outbox,
    res: ReadTestResult,
}

impl Run {
    /// Posts what the send queue takes: scattered pages (every other pfn)
    /// for each buffer.
    fn post_more(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) {
        let Some(p) = self.pairs.get_mut(i) else {
            return;
        };
        let mut g = p.req.s_lock.lock(root);
        while g.ext.req.can_post() {
            let Some(&len) = READ_BYTES.get(p.next_read) else {
                break;
            };
            let pages = u64::from(len / PAGE_SIZE);
            let mut sges = Vec::new();
            for k in 0..pages {
                let pfn = self.next_pfn.wrapping_add(2 * k);
                self.mem.add_page(pfn);
                sges.push(Sge {
                    vaddr: pfn << 12,
                    length: PAGE_SIZE,
                });
            }
            self.next_pfn = self.next_pfn.wrapping_add(2 * pages + 1);
            let wr_id = p.next_read as u64 + 1;
            let wr = ReadWr {
                wr_id,
                remote_addr: p.next_remote,
                rkey: 0x5000 + i as u32,
                sges: &sges,
            };
            if requester::post_read(&self.req_rcd, &p.req, &mut g, &wr).is_err() {
                self.res.errors += 1;
                break;
            }
            self.res.posted += 1;
            p.posted.push(Posted {
                wr_id,
                remote: p.next_remote,
                sges,
            });
            p.next_remote = p.next_remote.wrapping_add(u64::from(len));
            p.next_read += 1;
        }
    }

    /// Runs the requesters' pending trigger work and send engines.
    fn run_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut progress = false;
        while let Some((_cpu, qp)) = self.req_rcd.sched.pop_work() {
            progress = true;
            let (rcd, out, res) = (&self.req_rcd, &mut self.to_resp, &mut self.res);
            qp_wait::trigger_resume::<ReadPlatform>(qp, root, |qp, root| {
                if requester::send_engine(rcd, qp, root, out).is_err() {
                    res.errors += 1;
                }
            });
        }
        while let Some(qp) = self.req_rcd.sched.pop_send() {
            progress = true;
            if requester::send_engine(&self.req_rcd, &qp, root, &mut self.to_resp).is_err() {
                self.res.errors += 1;
            }
        }
        progress
    }

    /// Delivers the requesters' packets to the responders.
    fn deliver_to_responders(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut progress = false;
        while let Some(bytes) = self.to_resp.out.pop_front() {
            progress = true;
            self.res.to_responder += 1;
            let Ok((_, Parsed::ReadReq { bth, hdr, payload })) = packet::parse(&bytes) else {
                self.res.errors += 1;
                continue;
            };
            let i = hdr.verbs_qp.wrapping_sub(RESP_QPN_BASE) as usize;
            let Some(p) = self.pairs.get_mut(i) else {
                self.res.errors += 1;
                continue;
            };
            let mut g = p.resp.s_lock.lock(root);
            let _ =
                responder::rcv_read_req::<ReadPlatform>(&mut g, bth.psn, &hdr, payload, &self.mrs);
            p.resp_ready |= g.ext.resp.has_work();
        }
        progress
    }

    /// Lets every responder with work build its packets.
    fn run_responders(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut progress = false;
        for p in &mut self.pairs {
            if !p.resp_ready {
                continue;
            }
            progress = true;
            let mut g = p.resp.s_lock.lock(root);
            match responder::make_resp::<ReadPlatform>(
                &mut g,
                &self.mrs,
                &self.mrs,
                &mut self.to_req,
                RESP_BUDGET,
            ) {
                Ok(more) => p.resp_ready = more,
                Err(_) => {
                    self.res.errors += 1;
                    p.resp_ready = false;
                }
            }
        }
        progress
    }

    /// Delivers the responders' packets: READ_RESPs through the chip's
    /// expected receive, ACKs to the requester; completed READs are
    /// checked and more are posted.
    fn deliver_to_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut progress = false;
        while let Some(bytes) = self.to_req.out.pop_front() {
            progress = true;
            self.res.to_requester += 1;
            let i = match packet::parse(&bytes) {
                Ok((_, Parsed::ReadResp { bth, hdr, payload })) => {
                    let i = hdr.verbs_qp.wrapping_sub(REQ_QPN_BASE) as usize;
                    let Some(p) = self.pairs.get(i) else {
                        self.res.errors += 1;
                        continue;
                    };
                    let mut g = p.req.s_lock.lock(root);
                    // The chip's expected receive (placement, flow
                    // checks, header suppression), then the requester.
                    let (_, verdict) = sim_chip::receive_read_resp(
                        &self.req_rcd,
                        &p.req,
                        &mut g,
                        &mut self.mem,
                        bth.dest_qp,
                        FlowPsn::from_raw(bth.psn.get()),
                        &hdr,
                        payload,
                    );
                    if let Some(Err(_)) = verdict {
                        self.res.errors += 1;
                    }
                    i
                }
                Ok((_, Parsed::Ack { bth, aeth })) => {
                    let i = bth.dest_qp.wrapping_sub(REQ_QPN_BASE) as usize;
                    let Some(p) = self.pairs.get(i) else {
                        self.res.errors += 1;
                        continue;
                    };
                    let mut g = p.req.s_lock.lock(root);
                    requester::rcv_ack(&self.req_rcd, &p.req, &mut g, &aeth);
                    i
                }
                _ => {
                    self.res.errors += 1;
                    continue;
                }
            };
            self.complete(i, root);
            self.post_more(i, root);
        }
        progress
    }

    /// Takes QP `i`'s completions and checks their data.
    fn complete(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) {
        let Some(p) = self.pairs.get_mut(i) else {
            return;
        };
        loop {
            let c = {
                let mut g = p.req.s_lock.lock(root);
                g.ext.req.poll()
            };
            let Some(c) = c else { break };
            let Some(at) = p.posted.iter().position(|x| x.wr_id == c.wr_id) else {
                self.res.errors += 1;
                continue;
            };
            let done = p.posted.swap_remove(at);
            if c.status != WcStatus::Success {
                self.res.failed += 1;
                continue;
            }
            self.res.completed += 1;
            let mut got = vec![0u8; PAGE_SIZE as usize];
            let mut want = vec![0u8; PAGE_SIZE as usize];
            let mut remote = done.remote;
            for s in &done.sges {
                fill_pattern(remote, &mut want);
                let bad = match self.mem.read(s.vaddr, &mut got) {
                    Ok(()) => got.iter().zip(&want).filter(|(a, b)| a != b).count() as u64,
                    Err(_) => u64::from(PAGE_SIZE),
                };
                self.res.mismatched_bytes += bad;
                self.res.verified_bytes += u64::from(PAGE_SIZE) - bad;
                self.mem.remove_page(s.vaddr >> 12);
                remote = remote.wrapping_add(u64::from(s.length));
            }
        }
    }

    /// Fires the retry timer of every requester with segments out (only
    /// when nothing else can move).
    fn fire_timers(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut fired = false;
        for p in &self.pairs {
            let mut g = p.req.s_lock.lock(root);
            if g.ext.req.pending_segments() > 0 {
                requester::timeout(&self.req_rcd, &p.req, &mut g);
                fired = true;
                self.res.timeouts += 1;
            }
        }
        fired
    }

    /// Sums what is still held.
    fn left_over(&mut self, root: &mut LockToken<'_, Unlocked>) -> u64 {
        let mut left = 0u64;
        if let Some(p) = self.pairs.first() {
            // Context-wide: any QP's s_lock lets us take exp_lock.
            let mut g = p.req.s_lock.lock(root);
            let (_, tok) = g.parts();
            let e = self.req_rcd.exp_lock.lock(tok);
            left += u64::from(e.groups.entries_in_use());
            left += u64::from(e.flows.mask().count_ones());
            left +=
                (e.groups.list_len(GroupList::Used) + e.groups.list_len(GroupList::Full)) as u64;
            left += (e.waiters.len(QueueKind::Flow) + e.waiters.len(QueueKind::RcvArray)) as u64;
        }
        for p in &self.pairs {
            left += p.posted.len() as u64 + READS.saturating_sub(p.next_read) as u64;
            let g = p.req.s_lock.lock(root);
            let s = g.ext.req.stats;
            self.res.segments += s.segments;
            self.res.tid_waits += s.tid_waits;
            left += u64::from(g.waiting());
        }
        left += self.req_rcd.dma.live_mappings() as u64;
        left += self
            .mrs
            .refs
            .iter()
            .map(|r| r.get().unsigned_abs())
            .sum::<u64>();
        // The test holds one reference to each QP; queues, wake-ups and
        // work items must have given theirs back.
        for p in &self.pairs {
            left +=
                (p.req.live_refs().saturating_sub(1) + p.resp.live_refs().saturating_sub(1)) as u64;
        }
        left
    }
}

/// Runs the READ test; fills `out`. Returns 0, `-EINVAL` (null `out`, or
/// no platform registered: the test needs the kernel's locks) or
/// `-ENOMEM`.
///
/// # Safety
///
/// `out` is null or valid for writes.
///
/// # Locking
///
/// None held; takes each QP's `s_lock` and the requester context's
/// `exp_lock` (in that order), one QP at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_read_test(out: *mut ReadTestResult) -> i32 {
    // SAFETY: the caller promises `out` is null or writable.
    let Some(out) = (unsafe { out.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    let Some(k) = kernel() else {
        return Errno::INVAL.to_neg();
    };
    let Some(req_rcd) = new_ctxt(k, REQ_CTXT, REQ_GROUPS, QPS as u32) else {
        return Errno::NOMEM.to_neg();
    };
    let mut pairs = Vec::new();
    for i in 0..QPS {
        let (rc, sc) = connections(i);
        let (Some(req), Some(resp)) = (
            new_qp(k, REQ_QPN_BASE + i as u32, i as u32, rc),
            new_qp(k, RESP_QPN_BASE + i as u32, i as u32, sc),
        ) else {
            return Errno::NOMEM.to_neg();
        };
        pairs.push(Pair {
            req,
            resp,
            posted: Vec::new(),
            next_read: 0,
            next_remote: Mrs::region(i),
            resp_ready: false,
        });
    }
    let total: u32 = READ_BYTES.iter().sum();
    let mut run = Run {
        req_rcd,
        pairs,
        mrs: Mrs {
            base: core::array::from_fn(Mrs::region),
            len: u64::from(total),
            refs: Default::default(),
        },
        mem: SimMemory::new(),
        next_pfn: 0x1000,
        to_resp: Outbox {
            buf: vec![0; MAX_PACKET],
            out: VecDeque::new(),
        },
        to_req: Outbox {
            buf: vec![0; MAX_PACKET],
            out: VecDeque::new(),
        },
        res: ReadTestResult::default(),
    };
    let mut root = LockToken::<Unlocked>::root();
    for i in 0..QPS {
        run.post_more(i, &mut root);
    }
    let mut idle = 0;
    while run.res.steps < u64::from(MAX_STEPS) {
        run.res.steps += 1;
        let mut progress = run.run_requesters(&mut root);
        progress |= run.deliver_to_responders(&mut root);
        progress |= run.run_responders(&mut root);
        progress |= run.deliver_to_requesters(&mut root);
        if progress {
            idle = 0;
            continue;
        }
        // Nothing moved: either done, or a lost packet (none here) or a
        // lost wake-up. The retry timer is the driver's answer to the
        // first; three idle rounds in a row end the run.
        idle += 1;
        if idle > 3 || !run.fire_timers(&mut root) {
            break;
        }
    }
    run.res.left_over = run.left_over(&mut root);
    *out = run.res;
    0
}
