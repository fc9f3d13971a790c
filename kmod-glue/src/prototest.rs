// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! In-kernel TID RDMA READ, WRITE and mixed runs between two software
//! chips (test only): the `tid-read-proto` requester and responder
//! engines on the kernel's locks and allocator, in the `tid-harness`
//! two-node world, with every byte checked: a READ's in the requester's
//! scattered pages (placed by its chip's expected receive), a WRITE's in
//! the responder's scattered pages (placed by the responder's chip).
//!
//! The platform ([`ProtoPlatform`]) is the kernel's where it matters to
//! the kernel: every `r_lock`, `s_lock` and `exp_lock` is a real
//! `spinlock_t` with its level's named lockdep class
//! ([`KernelSpinLock`]), every flow ring, flow record and context is
//! `kmalloc`ed ([`KMem`], flow rings built in place), flow generations
//! come from `get_random_u32()`. The chips, the DMA maps, the QP
//! reference counts and the schedulers are the software ones of
//! `hfi1_hal::sim`: the test drives the trigger work, the send engines
//! and both second legs itself, one round of the world's actions at a
//! time, so a run is deterministic apart from the random generations.
//!
//! A WRITE packet reaches its responder under that QP's `r_lock`, and the
//! responder allocates the segment's TIDs inside it: lockdep records the
//! chain `r_lock` → `s_lock` → `exp_lock` of the driver's receive path
//! (`hfi1_rc_rcv_tid_rdma_write_req()` → `hfi1_tid_write_alloc_resources()`).
//!
//! Three runs ([`Phase`]), [`QPS`] connected QP pairs each:
//!
//! - READ: each QP reads one page, 16 pages and 80 pages (two segments)
//!   from the responder's memory region into scattered pages, every one
//!   a TID READ (the test lowers the kernel's 256 KiB threshold to a
//!   page: it is about the TID path). The requester context's 16 groups
//!   hold two scattered segments: the requesters wait on its RcvArray
//!   queue.
//! - WRITE: each QP writes two segments and then one (TID WRITE needs
//!   256 KiB at least) from scattered source pages into its remote-writable
//!   region's scattered pages. The responder context's 16 groups hold two
//!   scattered segments: responders queue on its RcvArray queue and
//!   RNR-NAK, and the RNR timer brings the WRITE_REQ back.
//! - mixed: each QP alternates READs and WRITEs on one send queue, IB PSN
//!   space and ack queue, both contexts short of room.
//!
//! The harness (packet queues, the software chip's memory, QP references)
//! allocates with the ordinary infallible `alloc` collections: it only
//! runs in the self-test module.

use alloc::boxed::Box;
use alloc::vec::Vec;

use hfi1_hal::Psn;
use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::lock_order::{EXP_LOCK_CLASS, LockToken, R_LOCK_CLASS, S_LOCK_CLASS, Unlocked};
use hfi1_hal::sim::{SimContext, SimDma, SimRef, SimScheduler};
use qp_wait::{DevCounters, Qp};
use tid_flow::{CtxtParts, RcvCtxt, Sge};
use tid_harness::world::{Arrival, AtResponder, Done, Node, Setup, TwoNodes};
use tid_read_proto::qp::TidQp;
use tid_read_proto::rc::{Connection, EngineError, WcStatus};

use crate::errno::Errno;
use crate::kplat::{KMem, KRandom, KernelSpinLock, kernel, try_box};
use crate::qp::init_send_state;

/// QP pairs.
pub const QPS: usize = 4;
/// One TID segment (the responder's OPFN `max_len`): the smallest TID
/// WRITE.
const SEG: u32 = 256 * 1024;
/// Bytes of each READ of the READ run: one page, 16 pages, and 80 pages
/// (two segments: 256 KiB and 64 KiB).
pub const READ_BYTES: [u32; 3] = [4096, 64 * 1024, 320 * 1024];
/// Bytes of each WRITE of the WRITE run: one segment, then two (the order
/// in which a second WRITE queued behind an RNR NAK must keep its data).
pub const WRITE_BYTES: [u32; 2] = [SEG, 2 * SEG];
/// The mixed run's requests, in posting order: bytes, and whether a WRITE.
pub const MIX_OPS: [(u32, bool); 4] = [
    (SEG, true),
    (64 * 1024, false),
    (2 * SEG, true),
    (SEG, false),
];
/// TID groups of each receive context: 128 RcvArray entries, two 64-page
/// segments of scattered pages at a time.
const GROUPS: usize = 16;
/// Packets a responder builds per turn.
const RESP_BUDGET: u32 = 8;
/// Rounds after which a run that has not finished counts as stuck.
const MAX_STEPS: u64 = 100_000;

tid_harness::sim_platform! {
    /// The runs' platform: kernel locks and memory, software chips.
    pub enum ProtoPlatform {
        ext: TidQp<ProtoPlatform>,
        lock: KernelSpinLock,
        mem: KMem,
        dev: Box<DevCounters>,
    }
}

/// A counted reference to one of the test's QPs.
type PQp = SimRef<Qp<ProtoPlatform>>;

impl Node for ProtoPlatform {
    /// A QP whose `s_lock` is a kernel spinlock of the QP `s_lock` class
    /// (it needs the registered kernel), built in its allocation as the
    /// engine's own QPs are: by value it would take more than a page of
    /// kernel stack.
    fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> Option<PQp> {
        let raw = KernelSpinLock::try_new(kernel()?, &S_LOCK_CLASS).ok()?;
        // SAFETY: the closure writes the whole QP: its numbers and lock
        // (`Qp::init_at`), then every field of its state.
        Some(unsafe {
            SimRef::new_in_place(|q| {
                let st = Qp::init_at(q, qpn, slot, cpu, raw);
                init_send_state(st, conn, psn);
            })
        })
    }

    /// A context on its own software chip, `kmalloc`ed, with generations
    /// from the kernel's randomness (`seed` is not used).
    fn new_ctxt(
        ctxt: u32,
        ngroups: usize,
        qp_slots: u32,
        _seed: u64,
    ) -> Option<Box<RcvCtxt<Self>>> {
        let entries = (ngroups as u32).saturating_mul(8);
        let chip = SimContext::try_new(0, entries).ok()?;
        let parts = CtxtParts {
            ctxt,
            chip,
            expected_base: 0,
            ngroups,
            qp_slots,
            sched: SimScheduler::new(),
            dma: SimDma::new(),
            mem: KMem,
            dev: try_box(DevCounters::new())?,
        };
        let k = kernel()?;
        let raw = KernelSpinLock::try_new(k, &EXP_LOCK_CLASS).ok()?;
        RcvCtxt::<ProtoPlatform>::try_new_in_with(&KMem, parts, raw, &mut KRandom(k)).ok()
    }

    /// `kmalloc` keeps no count here: the module's object count
    /// (`hfi1_tid_live_objects()`), KASAN and kmemleak check the flow
    /// records.
    fn live_allocations(_mem: &KMem) -> usize {
        0
    }

    /// The QP's receive-path lock: a kernel spinlock of the `r_lock`
    /// class, taken around every WRITE packet the responder receives.
    fn new_rlock() -> Option<KernelSpinLock> {
        KernelSpinLock::try_new(kernel()?, &R_LOCK_CLASS).ok()
    }
}

/// What a run saw (`struct hfi1_tid_proto_result`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProtoTestResult {
    /// READs and WRITEs posted.
    pub posted: u64,
    /// Of them, WRITEs.
    pub writes: u64,
    /// Completed successfully.
    pub completed: u64,
    /// Completed with an error status.
    pub failed: u64,
    /// Bytes checked equal to the source (READs: the requester's pages;
    /// WRITEs: the responder's).
    pub verified_bytes: u64,
    /// Bytes that differ (or were never placed).
    pub mismatched_bytes: u64,
    /// TID READ segments the requesters set up.
    pub segments: u64,
    /// Times a requester waited for RcvArray space.
    pub tid_waits: u64,
    /// TID WRITE segments whose data the responders received.
    pub write_segments: u64,
    /// RNR NAKs the WRITE responders sent (no RcvArray room).
    pub rnr_naks: u64,
    /// RNR timer firings (each sends an RNR-NAKed WRITE_REQ again).
    pub rnr_timeouts: u64,
    /// TID ACKs the responders sent.
    pub tid_acks: u64,
    /// Requester second-leg runs (WRITE_DATA).
    pub second_leg_runs: u64,
    /// Packets from the requesters.
    pub to_responder: u64,
    /// Packets from the responders.
    pub to_requester: u64,
    /// Retry and TID retry timer firings (none expected without loss).
    pub timeouts: u64,
    /// Engine calls that returned an error, and unexpected packets.
    pub errors: u64,
    /// Steps the run took.
    pub steps: u64,
    /// Held at the end: on both nodes, TID entries, flows, waiters, DMA
    /// mappings, MR references, QP references beyond the test's own;
    /// and unfinished requests.
    pub left_over: u64,
}

/// Which run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// [`READ_BYTES`] on every QP.
    Read,
    /// [`WRITE_BYTES`] on every QP.
    Write,
    /// [`MIX_OPS`] on every QP.
    Mixed,
}

impl Phase {
    /// Request `k` of a QP: bytes, and whether a WRITE.
    fn op(self, k: usize) -> Option<(u32, bool)> {
        match self {
            Self::Read => READ_BYTES.get(k).map(|&n| (n, false)),
            Self::Write => WRITE_BYTES.get(k).map(|&n| (n, true)),
            Self::Mixed => MIX_OPS.get(k).copied(),
        }
    }

    /// Requests per QP.
    pub fn ops(self) -> usize {
        match self {
            Self::Read => READ_BYTES.len(),
            Self::Write => WRITE_BYTES.len(),
            Self::Mixed => MIX_OPS.len(),
        }
    }

    /// The bytes of one QP's requests: READs, WRITEs.
    fn bytes(self) -> (u64, u64) {
        (0..self.ops())
            .filter_map(|k| self.op(k))
            .fold((0, 0), |(r, w), (n, wr)| {
                if wr {
                    (r, w + u64::from(n))
                } else {
                    (r + u64::from(n), w)
                }
            })
    }

    /// The world: READ regions and writable regions as large as one QP's
    /// requests, so nothing wraps.
    fn setup(self) -> Setup {
        let (read, write) = self.bytes();
        Setup {
            qps: QPS,
            groups: GROUPS,
            resp_groups: GROUPS,
            region_len: read.max(u64::from(PAGE_SIZE)),
            write_region_len: write,
            tid_read_min: PAGE_SIZE,
            ..Setup::default()
        }
    }
}

/// The test's state: the two nodes, how far each requester got, the
/// result so far.
struct Run {
    phase: Phase,
    nodes: TwoNodes<ProtoPlatform>,
    next: [usize; QPS],
    res: ProtoTestResult,
}

impl Run {
    /// Posts what requester `i`'s send queue takes: scattered pages for
    /// each buffer.
    fn post_more(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) {
        let Some(next) = self.next.get_mut(i) else {
            return;
        };
        while self.nodes.can_post(i, root) {
            let Some((len, write)) = self.phase.op(*next) else {
                break;
            };
            if write && !self.nodes.can_post_write(i, len, root) {
                break;
            }
            let sges = self.nodes.pages.scattered(u64::from(len / PAGE_SIZE));
            let posted = if write {
                post_write(&mut self.nodes, i, sges, root)
            } else {
                post_read(&mut self.nodes, i, sges, root)
            };
            if posted.is_err() {
                self.res.errors += 1;
                break;
            }
            self.res.posted += 1;
            self.res.writes += u64::from(write);
            *next += 1;
        }
    }

    /// Runs the requesters' trigger work, send engines and second legs.
    fn run_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let ran = self.nodes.run_requesters(root);
        self.res.errors += ran.iter().filter(|r| r.result.is_err()).count() as u64;
        !ran.is_empty()
    }

    /// Delivers the requesters' packets to the responders (READ
    /// requests; WRITE_REQs and WRITE_DATA under the responder's
    /// `r_lock`).
    fn deliver_to_responders(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut progress = false;
        while let Some(bytes) = self.nodes.to_responders.pop() {
            progress = true;
            self.res.to_responder += 1;
            let taken = match self.nodes.deliver_to_responder(&bytes, root) {
                // A WRITE_DATA the chip placed without handing it to
                // software (header suppression) has no verdict: taken.
                AtResponder::Received { .. }
                | AtResponder::WriteReq { .. }
                | AtResponder::WriteData { .. }
                | AtResponder::Resync { .. } => true,
                _ => false,
            };
            self.res.errors += u64::from(!taken);
        }
        progress
    }

    /// Lets every responder with work run: woken QPs' first legs, the
    /// responses, and the TID ACKs owed.
    fn run_responders(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let ran = self.nodes.run_responders(RESP_BUDGET, root);
        self.res.errors += ran.iter().filter(|(_, r)| r.is_err()).count() as u64;
        !ran.is_empty()
    }

    /// Delivers the responders' packets: TID READ_RESPs through the
    /// chip's expected receive, the rest to the QP; completed requests
    /// are checked and more are posted.
    fn deliver_to_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut progress = false;
        while let Some(bytes) = self.nodes.to_requesters.pop() {
            progress = true;
            self.res.to_requester += 1;
            let at = self.nodes.deliver_to_requester(&bytes, root);
            if let Arrival::ReadResp {
                verdict: Some(Err(_)),
                ..
            } = at.arrival
            {
                self.res.errors += 1;
            }
            let Some(i) = at.arrival.qp() else {
                self.res.errors += 1;
                continue;
            };
            at.done.iter().for_each(|d| self.count(d));
            self.post_more(i, root);
        }
        progress
    }

    /// Counts one completion and what its data check found.
    fn count(&mut self, d: &Done) {
        if d.posted.is_none() {
            self.res.errors += 1;
        } else if d.completion.status != WcStatus::Success {
            self.res.failed += 1;
        } else {
            let data = d.data.unwrap_or_default();
            self.res.completed += 1;
            self.res.mismatched_bytes += data.mismatched;
            self.res.verified_bytes += data.verified;
        }
    }

    /// When nothing else can move: the RNR timers of every requester an
    /// RNR NAK stopped fire (that is their job), and only if none ran,
    /// the retry and TID retry timers (the answer to a loss, which
    /// counts against the run).
    fn fire_timers(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let rnr = (0..QPS)
            .filter(|&i| self.nodes.fire_rnr_timer(i, root))
            .count() as u64;
        self.res.rnr_timeouts += rnr;
        if rnr > 0 {
            return true;
        }
        let lost = (0..QPS)
            .map(|i| {
                u64::from(self.nodes.fire_timer(i, root))
                    + u64::from(self.nodes.fire_tid_retry_timer(i, root))
            })
            .sum::<u64>();
        self.res.timeouts += lost;
        lost > 0
    }

    /// True when every request is posted and completed. (A requester's
    /// retry timer may still be armed then: it would find nothing to
    /// resend.)
    fn all_done(&self) -> bool {
        self.nodes.outstanding() == 0 && self.next.iter().all(|&n| n >= self.phase.ops())
    }

    /// Reads the engines' counters and sums what is still held and what
    /// was never finished.
    fn finish(&mut self, root: &mut LockToken<'_, Unlocked>) {
        let s = self.nodes.requester_stats(root);
        self.res.segments = s.segments;
        self.res.tid_waits = s.tid_waits;
        for qp in &self.nodes.requesters {
            let g = qp.s_lock.lock(root);
            self.res.second_leg_runs += g.ext.requester.write_state().stats.second_leg_runs;
        }
        for qp in &self.nodes.responders {
            let g = qp.s_lock.lock(root);
            let w = &g.ext.write_responder.stats;
            self.res.write_segments += w.segments_received;
            self.res.rnr_naks += w.rnr_sent;
            self.res.tid_acks += w.tid_acks;
        }
        let unposted: usize = self
            .next
            .iter()
            .map(|&n| self.phase.ops().saturating_sub(n))
            .sum();
        self.res.left_over =
            self.nodes.leaks(root).total() + (self.nodes.outstanding() + unposted) as u64;
    }
}

/// Posts a READ on requester `i` ([`TwoNodes::post`]), in a frame of its
/// own: inlined beside [`post_write`], the two posts' frames add up to
/// more than a page of kernel stack.
///
/// # Locking
///
/// None held; takes the QP's `s_lock`, then the context's `exp_lock`.
#[inline(never)]
fn post_read(
    nodes: &mut TwoNodes<ProtoPlatform>,
    i: usize,
    sges: Vec<Sge>,
    root: &mut LockToken<'_, Unlocked>,
) -> Result<u64, EngineError> {
    nodes.post(i, sges, root)
}

/// Posts a WRITE on requester `i` ([`TwoNodes::post_write`]), in a frame
/// of its own (see [`post_read`]).
///
/// # Locking
///
/// As [`post_read`].
#[inline(never)]
fn post_write(
    nodes: &mut TwoNodes<ProtoPlatform>,
    i: usize,
    sges: Vec<Sge>,
    root: &mut LockToken<'_, Unlocked>,
) -> Result<u64, EngineError> {
    nodes.post_write(i, sges, root)
}

/// Runs `phase` into `out`: 0, `-EINVAL` (null `out`, or no platform
/// registered: the runs need the kernel's locks) or `-ENOMEM`.
///
/// # Safety
///
/// `out` is null or valid for writes.
///
/// # Locking
///
/// None held; takes one QP's locks at a time: its `r_lock` (a WRITE
/// packet at the responder), its `s_lock`, then the context's `exp_lock`.
unsafe fn run(phase: Phase, out: *mut ProtoTestResult) -> i32 {
    // SAFETY: the caller promises `out` is null or writable.
    let Some(out) = (unsafe { out.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    if kernel().is_none() {
        return Errno::INVAL.to_neg();
    }
    let Some(nodes) = TwoNodes::new(phase.setup()) else {
        return Errno::NOMEM.to_neg();
    };
    let mut run = Run {
        phase,
        nodes,
        next: [0; QPS],
        res: ProtoTestResult::default(),
    };
    let mut root = LockToken::<Unlocked>::root();
    for i in 0..QPS {
        run.post_more(i, &mut root);
    }
    let mut idle = 0;
    while run.res.steps < MAX_STEPS {
        run.res.steps += 1;
        let mut progress = run.run_requesters(&mut root);
        progress |= run.deliver_to_responders(&mut root);
        progress |= run.run_responders(&mut root);
        progress |= run.deliver_to_requesters(&mut root);
        if progress {
            idle = 0;
            continue;
        }
        if run.all_done() {
            break;
        }
        // Nothing moved and something is unfinished: an RNR wait (the
        // RNR timer's business), a lost packet (none here) or a lost
        // wake-up (the retry timers' answer). Three idle rounds in a row
        // end the run.
        idle += 1;
        if idle > 3 || !run.fire_timers(&mut root) {
            break;
        }
    }
    run.finish(&mut root);
    *out = run.res;
    0
}

/// The READ run ([`Phase::Read`]); fills `out`. Returns 0, `-EINVAL`
/// (null `out`, or no platform registered) or `-ENOMEM`.
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
pub unsafe extern "C" fn hfi1_tid_read_test(out: *mut ProtoTestResult) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { run(Phase::Read, out) }
}

/// The TID WRITE run ([`Phase::Write`]); as [`hfi1_tid_read_test`].
///
/// # Safety
///
/// `out` is null or valid for writes.
///
/// # Locking
///
/// None held; takes one QP's locks at a time: its `r_lock` for a packet
/// at the responder, its `s_lock`, then the context's `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_write_test(out: *mut ProtoTestResult) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { run(Phase::Write, out) }
}

/// The mixed READ and WRITE run ([`Phase::Mixed`]); as
/// [`hfi1_tid_read_test`].
///
/// # Safety
///
/// `out` is null or valid for writes.
///
/// # Locking
///
/// As [`hfi1_tid_write_test`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_mix_test(out: *mut ProtoTestResult) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { run(Phase::Mixed, out) }
}
