// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! How the two nodes are built: what a platform must give ([`Node`]), the
//! sizes and parameters ([`Setup`]), and the fixed numbering ([`REQUESTER`],
//! [`RESPONDER`], R_Keys, regions).

use alloc::boxed::Box;

use hfi1_hal::Psn;
use hfi1_hal::consts::TID_RDMA_JKEY;
use hfi1_hal::lock_order::{Lock, LockLevel, NewRawSpinLock, SLock};
use hfi1_hal::sim::{SimContext, SimDma, SimRef, SimScheduler};
use qp_wait::{Qp, SendState, WaitPlatform};
use tid_flow::{FlowPlatform, RcvCtxt};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::Path;
use tid_read_proto::qp::TidQp;
use tid_read_proto::qualify::MIN_LENGTH;
use tid_read_proto::rc::{
    Connection, DEFAULT_RETRY_CNT, DEFAULT_RNR_RETRY, DEFAULT_TIMEOUT, MAX_RD_ATOMIC,
};

/// The numbers a node goes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numbering {
    /// Its receive context (the responder's only in its OPFN parameters:
    /// a READ responder receives no TID data).
    pub ctxt: u8,
    /// Its LID.
    pub lid: u16,
    /// Verbs QP number of its QP 0 (QP `i` is this plus `i`).
    pub qpn: u32,
}

/// The requester node's numbers.
pub const REQUESTER: Numbering = Numbering {
    ctxt: 1,
    lid: 1,
    qpn: 0x100,
};

/// The responder node's numbers.
pub const RESPONDER: Numbering = Numbering {
    ctxt: 2,
    lid: 2,
    qpn: 0x400,
};

/// R_Key of QP `i`'s memory region: this plus `i`.
pub const RKEY_BASE: u32 = 0x5000;

/// First remote address of QP `i`'s memory region.
pub fn region_base(i: usize) -> u64 {
    (i as u64).wrapping_add(1) << 40
}

/// R_Key of QP `i`'s remote-writable region: this plus `i`.
pub const WRITE_RKEY_BASE: u32 = 0x6000;

/// First remote address of QP `i`'s remote-writable region (beside its
/// READ region, never overlapping it while that is under 512 GiB).
pub fn write_region_base(i: usize) -> u64 {
    region_base(i) | 1 << 39
}

/// What a platform gives the world: the software chip, its DMA map,
/// counted QP references and the FIFO scheduler (the world reads them all),
/// QPs that keep [`TidQp`], and a way to build them and a context.
pub trait Node: FlowPlatform<Chip = SimContext, Dma = SimDma>
    + WaitPlatform<Ext = TidQp<Self>, Ref = SimRef<Qp<Self>>, Sched = SimScheduler<SimRef<Qp<Self>>>>
{
    /// A connected QP whose lock is ready to use (the returned reference is
    /// the creator's), or `None` without memory.
    fn new_qp(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> Option<Self::Ref>;

    /// A receive context on its own software chip with `ngroups` TID
    /// groups, room for `qp_slots` QPs and flow generations from `seed`
    /// (or the platform's own randomness), or `None`.
    fn new_ctxt(ctxt: u32, ngroups: usize, qp_slots: u32, seed: u64) -> Option<Box<RcvCtxt<Self>>>;

    /// Allocations from `mem` (flow records) not yet freed.
    fn live_allocations(mem: &Self::Mem) -> usize;

    /// A QP's `r_lock` (the receive-path lock a TID WRITE responder is
    /// entered under), or `None` if this platform cannot make one: then
    /// the world's responders refuse WRITE packets
    /// ([`AtResponder::NoReceiveLock`](super::AtResponder::NoReceiveLock)).
    fn new_rlock() -> Option<Self::Lock> {
        None
    }
}

/// A new connected QP on any platform whose QPs keep [`TidQp`] under a
/// lock that builds itself (the returned reference is its creator's):
/// verbs number `qpn`, waiter slot `slot`, trigger work on `cpu`, first
/// PSN `psn` both ways.
pub fn new_qp<P>(qpn: u32, slot: u32, cpu: u32, conn: Connection, psn: Psn) -> SimRef<Qp<P>>
where
    P: FlowPlatform + WaitPlatform<Ext = TidQp<P>>,
    P::Lock: NewRawSpinLock,
{
    let raw = P::Lock::new_with_class(SLock::class());
    new_qp_with(raw, qpn, slot, cpu, conn, psn)
}

/// [`new_qp`] with its `s_lock` already built (a kernel spinlock needs the
/// registered kernel to be made).
pub fn new_qp_with<P>(
    raw: P::Lock,
    qpn: u32,
    slot: u32,
    cpu: u32,
    conn: Connection,
    psn: Psn,
) -> SimRef<Qp<P>>
where
    P: FlowPlatform + WaitPlatform<Ext = TidQp<P>>,
{
    let state = SendState {
        flags: Default::default(),
        ext: TidQp::new(conn, psn),
    };
    SimRef::new(Qp::new(qpn, slot, cpu, Lock::with_raw(raw, state)))
}

/// How the two nodes are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// QP pairs.
    pub qps: usize,
    /// TID groups of the requester node's receive context (a READ's
    /// data lands there).
    pub groups: usize,
    /// TID groups of the responder node's receive context (a TID WRITE's
    /// data lands there).
    pub resp_groups: usize,
    /// Path MTU.
    pub pmtu: u32,
    /// The responder's segment size (its OPFN `max_len`).
    pub seg_len: u32,
    /// Segments of one READ in flight (the responder's OPFN `max_read`).
    pub max_read: u8,
    /// Reads the requester keeps outstanding at most.
    pub max_rd_atomic: u32,
    /// The RC retry count of every requester QP (0..=7).
    pub retry_cnt: u8,
    /// The RNR retry count of every requester QP (7: unlimited).
    pub rnr_retry: u8,
    /// The local ACK timeout exponent of every QP (the retry timer runs
    /// 4.096 us << `timeout`, shifted further for a TID READ_REQ).
    pub timeout: u8,
    /// The smallest READ that becomes a TID READ (the kernel's 256 KiB;
    /// the fuzz world lowers it).
    pub tid_read_min: u32,
    /// First IB PSN of every connection, both ways.
    pub first_psn: Psn,
    /// Seed of the requester context's flow generations.
    pub seed: u64,
    /// Bytes of each responder QP's memory region.
    pub region_len: u64,
    /// Bytes of each responder QP's remote-writable region: that many
    /// bytes of scattered pages in the responder node's memory (0: no
    /// WRITE can land).
    pub write_region_len: u64,
    /// First page frame of the destination pages (the requester node's;
    /// the responder node's writable regions start at this plus 2^28).
    pub first_pfn: u64,
}

impl Default for Setup {
    fn default() -> Self {
        let p = TidParams::local(RESPONDER.ctxt, TID_RDMA_JKEY, 14, false);
        Self {
            qps: 1,
            groups: 16,
            resp_groups: 16,
            pmtu: 4096,
            seg_len: p.max_len,
            max_read: p.max_read,
            max_rd_atomic: MAX_RD_ATOMIC,
            retry_cnt: DEFAULT_RETRY_CNT,
            rnr_retry: DEFAULT_RNR_RETRY,
            timeout: DEFAULT_TIMEOUT,
            tid_read_min: MIN_LENGTH,
            first_psn: Psn::new(0x10),
            seed: 1,
            region_len: 1 << 32,
            write_region_len: 0,
            first_pfn: 0x1000,
        }
    }
}

impl Setup {
    /// The connections of QP pair `i`: the requester's and the responder's.
    pub fn connections(&self, i: usize) -> (Connection, Connection) {
        let req_params = TidParams::local(REQUESTER.ctxt, TID_RDMA_JKEY, 14, false);
        let resp_params = TidParams {
            max_len: self.seg_len,
            max_read: self.max_read,
            ..TidParams::local(RESPONDER.ctxt, TID_RDMA_JKEY, 14, false)
        };
        let n = u32::try_from(i).unwrap_or(u32::MAX);
        let (rq, sq) = (REQUESTER.qpn.wrapping_add(n), RESPONDER.qpn.wrapping_add(n));
        let requester = Connection {
            verbs_qpn: rq,
            remote_verbs_qpn: sq,
            local: req_params,
            remote: resp_params,
            tid: true,
            pmtu: self.pmtu,
            path: Path {
                dlid: RESPONDER.lid,
                slid: REQUESTER.lid,
            },
            max_rd_atomic: self.max_rd_atomic,
            remote_read: false,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            timeout: self.timeout,
            tid_read_min: self.tid_read_min,
            ..Connection::default()
        };
        let responder = Connection {
            verbs_qpn: sq,
            remote_verbs_qpn: rq,
            local: resp_params,
            remote: req_params,
            path: Path {
                dlid: REQUESTER.lid,
                slid: RESPONDER.lid,
            },
            remote_read: true,
            remote_write: true,
            ..requester
        };
        (requester, responder)
    }
}
