// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! In-kernel TID RDMA READ between two software chips (test only): the
//! `tid-read-proto` requester and responder engines on the kernel's locks
//! and allocator, in the `tid-harness` two-node world, with data placed by
//! the software chip's expected-receive model and checked byte by byte.
//!
//! The platform ([`ReadPlatform`]) is the kernel's where it matters to the
//! kernel: every `s_lock` and `exp_lock` is a real `spinlock_t` with its
//! named lockdep class ([`KernelSpinLock`]), every flow ring and context is
//! `kmalloc`ed ([`KMem`], flow rings built in place), flow generations come
//! from `get_random_u32()`. The chips, the DMA map, the QP reference counts
//! and the scheduler are the software ones of `hfi1_hal::sim`: the test
//! drives the trigger work and the send engines itself, one round of the
//! world's actions at a time, so the run is deterministic apart from the
//! random generations.
//!
//! The requester's receive context (context 1, 16 TID groups, its own
//! software chip) and the responder's QPs (context 2 in their parameters;
//! a READ responder only sends), [`QPS`] connected QP pairs, each reading
//! [`READS`] buffers of different sizes (one page up to two segments)
//! from the responder's memory region into scattered pages, every one a
//! TID READ (the test lowers the kernel's 256 KiB threshold to a page:
//! it is about the TID path; the plain READ path runs in tid-sim and the
//! engine tests). With the group count chosen, the requesters run out of
//! RcvArray space and wait for each other on the RcvArray queue.
//!
//! The harness (packet queues, the software chip's memory, QP references)
//! allocates with the ordinary infallible `alloc` collections: it only
//! runs in the self-test module.

use alloc::boxed::Box;

use hfi1_hal::Psn;
use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::lock_order::{EXP_LOCK_CLASS, LockToken, S_LOCK_CLASS, Unlocked};
use hfi1_hal::sim::{SimContext, SimDma, SimRef, SimScheduler};
use qp_wait::{DevCounters, Qp};
use tid_flow::{CtxtParts, RcvCtxt};
use tid_harness::world::{Arrival, AtResponder, Done, Node, Setup, TwoNodes};
use tid_read_proto::qp::TidQp;
use tid_read_proto::rc::{Connection, WcStatus};

use crate::errno::Errno;
use crate::kplat::{KMem, KRandom, KernelSpinLock, kernel, try_box};
use crate::qp::init_send_state;

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
/// Packets the responder builds per turn.
const RESP_BUDGET: u32 = 8;
/// Rounds after which a run that has not finished counts as stuck.
const MAX_STEPS: u64 = 100_000;

tid_harness::sim_platform! {
    /// The READ test's platform: kernel locks and memory, software chip.
    pub enum ReadPlatform {
        ext: TidQp<ReadPlatform>,
        lock: KernelSpinLock,
        mem: KMem,
        dev: Box<DevCounters>,
    }
}

/// A counted reference to one of the test's QPs.
type RQp = SimRef<Qp<ReadPlatform>>;

impl Node for ReadPlatform {
    /// A QP whose `s_lock` is a kernel spinlock of the QP `s_lock` class
    /// (it needs the registered kernel), built in its allocation as the
    /// engine's own QPs are: by value it would take more than a page of
    /// kernel stack.
    fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> Option<RQp> {
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
        RcvCtxt::<ReadPlatform>::try_new_in_with(&KMem, parts, raw, &mut KRandom(k)).ok()
    }

    /// `kmalloc` keeps no count here: the module's object count
    /// (`hfi1_tid_live_objects()`) and KASAN check the flow records.
    fn live_allocations(_mem: &KMem) -> usize {
        0
    }
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

/// The test's state: the two nodes, how far each requester got, the
/// result so far.
struct Run {
    nodes: TwoNodes<ReadPlatform>,
    next_read: [usize; QPS],
    res: ReadTestResult,
}

impl Run {
    /// Posts what requester `i`'s send queue takes: scattered pages for
    /// each buffer.
    fn post_more(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) {
        let Some(next) = self.next_read.get_mut(i) else {
            return;
        };
        while self.nodes.can_post(i, root) {
            let Some(&len) = READ_BYTES.get(*next) else {
                break;
            };
            let sges = self.nodes.pages.scattered(u64::from(len / PAGE_SIZE));
            if self.nodes.post(i, sges, root).is_err() {
                self.res.errors += 1;
                break;
            }
            self.res.posted += 1;
            *next += 1;
        }
    }

    /// Runs the requesters' pending trigger work and send engines.
    fn run_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let ran = self.nodes.run_requesters(root);
        self.res.errors += ran.iter().filter(|r| r.result.is_err()).count() as u64;
        !ran.is_empty()
    }

    /// Delivers the requesters' packets to the responders.
    fn deliver_to_responders(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut progress = false;
        while let Some(bytes) = self.nodes.to_responders.pop() {
            progress = true;
            self.res.to_responder += 1;
            if !matches!(
                self.nodes.deliver_to_responder(&bytes, root),
                AtResponder::Received { .. }
            ) {
                self.res.errors += 1;
            }
        }
        progress
    }

    /// Lets every responder with work build its packets.
    fn run_responders(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let ran = self.nodes.run_responders(RESP_BUDGET, root);
        self.res.errors += ran.iter().filter(|(_, r)| r.is_err()).count() as u64;
        !ran.is_empty()
    }

    /// Delivers the responders' packets: TID READ_RESPs through the
    /// chip's expected receive, ACKs and plain READ responses to the
    /// requester; completed READs are checked and more are posted.
    fn deliver_to_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let mut progress = false;
        while let Some(bytes) = self.nodes.to_requesters.pop() {
            progress = true;
            self.res.to_requester += 1;
            let at = self.nodes.deliver_to_requester(&bytes, root);
            let i = match at.arrival {
                Arrival::ReadResp { qp, verdict, .. } => {
                    if let Some(Err(_)) = verdict {
                        self.res.errors += 1;
                    }
                    qp
                }
                Arrival::Ack { qp, .. } | Arrival::ReadResponse { qp, .. } => qp,
                _ => {
                    self.res.errors += 1;
                    continue;
                }
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

    /// Fires the retry timer of every requester with segments out (only
    /// when nothing else can move).
    fn fire_timers(&mut self, root: &mut LockToken<'_, Unlocked>) -> bool {
        let fired = self.nodes.fire_timers(root) as u64;
        self.res.timeouts += fired;
        fired > 0
    }

    /// Sums what is still held and what was never finished.
    fn left_over(&mut self, root: &mut LockToken<'_, Unlocked>) -> u64 {
        let s = self.nodes.requester_stats(root);
        self.res.segments = s.segments;
        self.res.tid_waits = s.tid_waits;
        let unposted: usize = self
            .next_read
            .iter()
            .map(|&n| READS.saturating_sub(n))
            .sum();
        self.nodes.leaks(root).total() + (self.nodes.outstanding() + unposted) as u64
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
    if kernel().is_none() {
        return Errno::INVAL.to_neg();
    }
    let setup = Setup {
        qps: QPS,
        groups: REQ_GROUPS,
        region_len: u64::from(READ_BYTES.iter().sum::<u32>()),
        tid_read_min: PAGE_SIZE,
        ..Setup::default()
    };
    let Some(nodes) = TwoNodes::new(setup) else {
        return Errno::NOMEM.to_neg();
    };
    let mut run = Run {
        nodes,
        next_read: [0; QPS],
        res: ReadTestResult::default(),
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
