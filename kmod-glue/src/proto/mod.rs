// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA READ and WRITE protocol's C entry points on the engine's
//! own QPs and contexts: posting, building requests, receiving requests,
//! building responses, receiving responses, data and ACKs, the KDETH
//! error path, the timers that restart a request, the second leg, polling
//! and reset. Each is `tid_read_proto::qp`'s function of the same role,
//! entered with the locks the driver holds when it calls the kernel
//! function it names, and asserting them (`lockdep_assert_held`).
//!
//! Packets cross as whole frames (LRH through ICRC) in the caller's
//! memory: a receive entry parses and checks its frame (`-EBADMSG` if it
//! does not parse, `-EPROTO` for an opcode that is not its own), a build
//! entry writes into the caller's buffer and hands each packet to the
//! caller's `send` (`struct hfi1_tid_io`). The caller's memory regions,
//! source data and local memory come in through the same table
//! ([`VerbsOps`]). Data a chip places (TID READ_RESP and WRITE_DATA
//! payloads) is the caller's: these entries see only the packets the chip
//! hands to software.
//!
//! A receive entry returns one of the `HFI1_TID_RCV_*` outcomes ([`Rcv`])
//! or a negative errno; engine errors map to errno here only.
//!
//! # Locking
//!
//! | entry | replaces | held on entry | takes |
//! |---|---|---|---|
//! | [`hfi1_tid_post_read`], [`hfi1_tid_post_write`] | `hfi1_setup_tid_rdma_wqe()` and the post | `s_lock` | `exp_lock` if the post errors the QP |
//! | [`hfi1_tid_make_req`] | `hfi1_make_rc_req()` (`hfi1_build_tid_rdma_read_req()`, `_write_req()`) | `s_lock` | `exp_lock` |
//! | [`hfi1_tid_rcv_read_req`] | `hfi1_rc_rcv_tid_rdma_read_req()` (and the plain READ of `hfi1_rc_rcv()`) | `r_lock` | `s_lock` |
//! | [`hfi1_tid_rcv_write_req`] | `hfi1_rc_rcv_tid_rdma_write_req()` | `r_lock` | `s_lock`, `exp_lock` |
//! | [`hfi1_tid_make_resp`] | `make_rc_ack()` (`hfi1_build_tid_rdma_read_resp()`, `_write_resp()`) | `s_lock` | `exp_lock` |
//! | [`hfi1_tid_rcv_read_resp`] | `hfi1_rc_rcv_tid_rdma_read_resp()` | `r_lock` | `s_lock`, `exp_lock` |
//! | [`hfi1_tid_kdeth_eflags`] | `hfi1_handle_kdeth_eflags()` (READ and WRITE halves) | none | `r_lock`, `s_lock`, `exp_lock` |
//! | [`hfi1_tid_rcv_resync`] | `hfi1_rc_rcv_tid_rdma_resync()` | `r_lock` | `s_lock`, `exp_lock` |
//! | [`hfi1_tid_reap_timeout`] | `hfi1_tid_timeout()` | `r_lock` | `s_lock`, `exp_lock` |
//! | [`hfi1_tid_rcv_rc_resp`] | `rc_rcv_resp()` (ACK, NAK, plain READ response) | `r_lock` | `s_lock`, `exp_lock` |
//! | [`hfi1_tid_rcv_write_resp`] | `hfi1_rc_rcv_tid_rdma_write_resp()` | `r_lock` | `s_lock`, `exp_lock` |
//! | [`hfi1_tid_rcv_write_data`] | `hfi1_rc_rcv_tid_rdma_write_data()` | `r_lock` | `s_lock`, `exp_lock` |
//! | [`hfi1_tid_rcv_tid_ack`] | `hfi1_rc_rcv_tid_rdma_ack()` | `r_lock` | `s_lock`, `exp_lock` |
//! | [`hfi1_tid_rc_timeout`] | `rvt_rc_timeout()` → `hfi1_restart_rc()` → `hfi1_tid_rdma_restart_req()` | `s_lock` | `exp_lock` |
//! | [`hfi1_tid_rnr_timeout`] | `rvt_rc_rnr_retry()` | `s_lock` | — |
//! | [`hfi1_tid_tid_retry_timeout`] | `hfi1_tid_retry_timeout()` (RESYNC) | `s_lock` | `exp_lock` |
//! | [`hfi1_tid_do_tid_send`] | `hfi1_do_tid_send()` (the second leg's work) | none | `s_lock` per packet, `exp_lock` |
//! | [`hfi1_tid_make_tid_ack`] | `make_tid_rdma_ack()` | `s_lock` | `exp_lock` |
//! | [`hfi1_tid_poll`] | the send completion (`hfi1_send_complete()`) | `s_lock` | — |
//! | [`hfi1_tid_qp_reset`] | `rvt_reset_qp()` → `hfi1_qp_kern_exp_rcv_clear_all()` and the flow's and wait's release | `s_lock` | `exp_lock` |

use core::ffi::c_void;

use hfi1_hal::consts::{OP_TID_RDMA_ACK, OP_TID_RDMA_WRITE_DATA_LAST};
use hfi1_hal::{FlowPsn, Psn};
use tid_flow::Sge;
use tid_read_proto::packet::{self, MAX_PACKET, Parsed};
use tid_read_proto::qp;
use tid_read_proto::rc::{
    Connection, EngineError, LocalMemory, MAX_RD_ATOMIC, MrTable, PacketSink, SourceData, WcStatus,
};
use tid_read_proto::requester::{AckVerdict, KdethError, ReadWr, RespVerdict};
use tid_read_proto::responder::ReqVerdict;
use tid_read_proto::wire::{frame, tid_ack, write_data, write_req, write_resp};
use tid_read_proto::write::WriteRegions;
use tid_read_proto::write::requester::{TidAckVerdict, WriteRespVerdict, WriteWr};
use tid_read_proto::write::responder::{DataVerdict, ResyncVerdict, WriteReqVerdict};

use crate::engine::{Rcd, SgeC};
use crate::errno::Errno;
use crate::kplat::{KQp, KernelPlatform};
use crate::route::OpfnParams;

mod entry;
mod requester;
mod responder;

use entry::{Entry, RLockIs, Takes, bytes};

pub use requester::*;
pub use responder::*;

/// A connected QP's parameters (`struct hfi1_tid_conn`): the RC
/// attributes and what OPFN negotiated. Kernel: `struct rvt_qp`'s
/// attributes and `qpriv->tid_rdma.local` / `.remote`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnC {
    /// Our TID parameters (`qp` is our KDETH QPN).
    pub local: OpfnParams,
    /// The peer's TID parameters.
    pub remote: OpfnParams,
    /// Our verbs QP number.
    pub verbs_qpn: u32,
    /// The peer's verbs QP number. Kernel: `qp->remote_qpn`.
    pub remote_verbs_qpn: u32,
    /// The first PSN, both ways.
    pub psn: u32,
    /// Path MTU: 4096 or 8192.
    pub pmtu: u32,
    /// Reads outstanding at most (1..=16). Kernel: `qp->s_max_rd_atomic`.
    pub max_rd_atomic: u32,
    /// Smallest READ that goes TID (the kernel's 256 KiB).
    pub tid_read_min: u32,
    /// Destination LID.
    pub dlid: u16,
    /// Source LID.
    pub slid: u16,
    /// OPFN negotiated TID RDMA.
    pub tid: bool,
    /// Remote reads allowed (`IB_ACCESS_REMOTE_READ`).
    pub remote_read: bool,
    /// Remote writes allowed (`IB_ACCESS_REMOTE_WRITE`).
    pub remote_write: bool,
    /// Retries (0..=7). Kernel: `qp->s_retry_cnt`.
    pub retry_cnt: u8,
    /// RNR retries (0..=7, 7 unlimited). Kernel: `qp->s_rnr_retry_cnt`.
    pub rnr_retry: u8,
    /// Local ACK timeout exponent (0..=31). Kernel: `qp->timeout`.
    pub timeout: u8,
}

impl ConnC {
    /// The engine's connection and first PSN; `None` for a value out of
    /// range.
    pub fn to_connection(&self) -> Option<(Connection, Psn)> {
        let ok = matches!(self.pmtu, 4096 | 8192)
            && (1..=MAX_RD_ATOMIC).contains(&self.max_rd_atomic)
            && self.retry_cnt <= 7
            && self.rnr_retry <= 7
            && self.timeout <= 31;
        ok.then(|| {
            let conn = Connection {
                verbs_qpn: self.verbs_qpn,
                remote_verbs_qpn: self.remote_verbs_qpn,
                local: self.local.into(),
                remote: self.remote.into(),
                tid: self.tid,
                pmtu: self.pmtu,
                path: packet::Path {
                    dlid: self.dlid,
                    slid: self.slid,
                },
                max_rd_atomic: self.max_rd_atomic,
                remote_read: self.remote_read,
                retry_cnt: self.retry_cnt,
                rnr_retry: self.rnr_retry,
                timeout: self.timeout,
                tid_read_min: self.tid_read_min,
                remote_write: self.remote_write,
                ..Connection::default()
            };
            (conn, Psn::new(self.psn))
        })
    }
}

/// A READ or WRITE work request (`struct hfi1_tid_wr`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct WrC {
    /// The caller's id, given back in the completion.
    pub wr_id: u64,
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Elements at `sges` (at least 1).
    pub nsges: u32,
    /// The local buffer.
    pub sges: *const SgeC,
}

/// A completion (`struct hfi1_tid_wc`). Kernel: `struct ib_wc`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WcC {
    /// The work request's id.
    pub wr_id: u64,
    /// Bytes moved.
    pub length: u32,
    /// `enum ib_wc_status`: 0 success, 5 flushed, 12 retry exceeded, ...
    pub status: u32,
}

/// The kernel's `enum ib_wc_status` value.
const fn ib_wc_status(s: WcStatus) -> u32 {
    match s {
        WcStatus::Success => 0,
        WcStatus::LocalLength => 1,
        WcStatus::LocalQpOperation => 2,
        WcStatus::Flushed => 5,
        WcStatus::RemoteInvalidRequest => 9,
        WcStatus::RemoteAccess => 10,
        WcStatus::RemoteOperational => 11,
        WcStatus::RetryExceeded => 12,
        WcStatus::RnrRetryExceeded => 13,
    }
}

/// `rvt_rkey_ok()`: a reference on the region in `*mr` when it allows
/// `len` bytes at `vaddr` (for a remote write if `write`).
pub type MrGetFn = unsafe extern "C" fn(
    cookie: *mut c_void,
    vaddr: u64,
    len: u32,
    rkey: u32,
    write: bool,
    mr: *mut u32,
) -> bool;
/// `rvt_put_mr()`.
pub type MrPutFn = unsafe extern "C" fn(cookie: *mut c_void, mr: u32);
/// The region's pages (valid while the reference is held) and the offset
/// of `vaddr` in them; null if `vaddr` is outside.
pub type MrPagesFn = unsafe extern "C" fn(
    cookie: *mut c_void,
    mr: u32,
    vaddr: u64,
    n: *mut u32,
    offset: *mut u64,
) -> *const SgeC;
/// Reads `len` bytes at `vaddr` into `out` (a response's or a WRITE's data).
pub type ReadFn =
    unsafe extern "C" fn(cookie: *mut c_void, vaddr: u64, out: *mut u8, len: u32) -> bool;
/// Writes `len` bytes at `addr` (`rvt_copy_sge()` of an eager response).
pub type WriteFn =
    unsafe extern "C" fn(cookie: *mut c_void, addr: u64, data: *const u8, len: u32) -> bool;
/// Hands over one built packet (`hfi1_verbs_send()`); may be called with
/// `s_lock` held, so it queues rather than waits.
pub type SendPktFn = unsafe extern "C" fn(cookie: *mut c_void, pkt: *const u8, len: u32);

/// The verbs side of a QP (`struct hfi1_tid_verbs_ops`): every member
/// must be set.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VerbsOps {
    /// `rvt_rkey_ok()`.
    pub mr_get: Option<MrGetFn>,
    /// `rvt_put_mr()`.
    pub mr_put: Option<MrPutFn>,
    /// The pages behind a region.
    pub mr_pages: Option<MrPagesFn>,
    /// Reads source data.
    pub read: Option<ReadFn>,
    /// Writes local memory.
    pub write: Option<WriteFn>,
    /// Sends a packet.
    pub send: Option<SendPktFn>,
}

/// One call's verbs side (`struct hfi1_tid_io`): the table, its cookie,
/// and a buffer of `cap` (at least `HFI1_TID_MAX_PACKET`) bytes the build
/// entries write packets into.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoC {
    /// The callbacks.
    pub ops: *const VerbsOps,
    /// Passed back to every callback.
    pub cookie: *mut c_void,
    /// The packet buffer.
    pub buf: *mut u8,
    /// Its size.
    pub cap: u32,
}

/// The checked callbacks.
#[derive(Clone, Copy)]
struct Verbs {
    mr_get: MrGetFn,
    mr_put: MrPutFn,
    mr_pages: MrPagesFn,
    read: ReadFn,
    write: WriteFn,
    send: SendPktFn,
    cookie: *mut c_void,
}

/// The caller's regions and memory ([`MrTable`], [`WriteRegions`],
/// [`SourceData`], [`LocalMemory`]).
struct Regions(Verbs);

/// The caller's packet buffer and `send` ([`PacketSink`]), counting.
struct Sink<'a> {
    v: Verbs,
    buf: &'a mut [u8],
    sent: u32,
}

/// Checks `io` and splits it; `None` on a null pointer, a missing
/// callback or a buffer under [`MAX_PACKET`].
///
/// # Safety
///
/// `io` is null or valid, and its `buf` valid for `cap` bytes and used by
/// nothing else during `'a`.
unsafe fn split_io<'a>(io: *const IoC) -> Option<(Regions, Sink<'a>)> {
    // SAFETY: the caller promises `io` is null or valid.
    let io = unsafe { io.as_ref() }?;
    // SAFETY: as above, for its table.
    let o = unsafe { io.ops.as_ref() }?;
    let v = Verbs {
        mr_get: o.mr_get?,
        mr_put: o.mr_put?,
        mr_pages: o.mr_pages?,
        read: o.read?,
        write: o.write?,
        send: o.send?,
        cookie: io.cookie,
    };
    if io.buf.is_null() || (io.cap as usize) < MAX_PACKET {
        return None;
    }
    // SAFETY: the caller promises `buf` is valid and unaliased for `cap`
    // bytes for `'a`.
    let buf = unsafe { core::slice::from_raw_parts_mut(io.buf, io.cap as usize) };
    Some((Regions(v), Sink { v, buf, sent: 0 }))
}

impl MrTable for Regions {
    fn get(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        let mut mr = 0;
        // SAFETY: a checked callback with the caller's cookie; `mr` is a
        // valid out-pointer.
        unsafe { (self.0.mr_get)(self.0.cookie, vaddr, len, rkey, false, &mut mr) }.then_some(mr)
    }

    fn put(&self, mr: u32) {
        // SAFETY: as above.
        unsafe { (self.0.mr_put)(self.0.cookie, mr) }
    }
}

impl WriteRegions for Regions {
    fn get_write(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        let mut mr = 0;
        // SAFETY: as for `get`.
        unsafe { (self.0.mr_get)(self.0.cookie, vaddr, len, rkey, true, &mut mr) }.then_some(mr)
    }

    fn write_pages(&self, mr: u32, vaddr: u64) -> Option<(&[Sge], u64)> {
        let (mut n, mut off) = (0u32, 0u64);
        // SAFETY: a checked callback; both out-pointers are valid.
        let p = unsafe { (self.0.mr_pages)(self.0.cookie, mr, vaddr, &mut n, &mut off) };
        if p.is_null() {
            return None;
        }
        // SAFETY: the callback's contract: `n` elements at `p`, valid
        // while the region's reference is held, which outlives every use
        // the engine makes of them (one segment setup, under the same
        // lock hold); `Sge` is `repr(C)` with `SgeC`'s fields.
        Some((
            unsafe { core::slice::from_raw_parts(p.cast::<Sge>(), n as usize) },
            off,
        ))
    }
}

impl SourceData for Regions {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        let Ok(len) = u32::try_from(out.len()) else {
            return false;
        };
        // SAFETY: `out` is writable for `len` bytes.
        unsafe { (self.0.read)(self.0.cookie, vaddr, out.as_mut_ptr(), len) }
    }
}

impl LocalMemory for Regions {
    fn write(&mut self, addr: u64, data: &[u8]) -> bool {
        let Ok(len) = u32::try_from(data.len()) else {
            return false;
        };
        // SAFETY: `data` is readable for `len` bytes.
        unsafe { (self.0.write)(self.0.cookie, addr, data.as_ptr(), len) }
    }
}

impl PacketSink for Sink<'_> {
    fn buffer(&mut self) -> &mut [u8] {
        self.buf
    }

    fn send(&mut self, len: usize) {
        let len = len.min(self.buf.len());
        self.sent += 1;
        // SAFETY: the first `len` bytes of the buffer are the packet.
        unsafe { (self.v.send)(self.v.cookie, self.buf.as_ptr(), len as u32) }
    }
}

// `Sge` is read in place of `SgeC`.
const _: () = {
    assert!(core::mem::size_of::<Sge>() == core::mem::size_of::<SgeC>());
    assert!(core::mem::align_of::<Sge>() == core::mem::align_of::<SgeC>());
    assert!(core::mem::offset_of!(Sge, vaddr) == core::mem::offset_of!(SgeC, vaddr));
    assert!(core::mem::offset_of!(Sge, length) == core::mem::offset_of!(SgeC, length));
};

/// What a receive entry did with a packet (`HFI1_TID_RCV_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Rcv {
    /// Processed. `HFI1_TID_RCV_DONE`.
    Done = 0,
    /// Dropped or ignored (stale, duplicate, out of state).
    /// `HFI1_TID_RCV_DROPPED`.
    Dropped = 1,
    /// A NAK, an RNR NAK, a resend or a restart follows.
    /// `HFI1_TID_RCV_RESTART`.
    Restart = 2,
    /// The QP went to the error state. `HFI1_TID_RCV_QP_ERROR`.
    QpError = 3,
}

impl From<EngineError> for Errno {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::QueueFull => Errno::NOSPC,
            EngineError::BadSgl => Errno::INVAL,
            EngineError::NoMemory => Errno::NOMEM,
            EngineError::Flow(f) => f.into(),
            EngineError::Packet(_) => Errno::MSGSIZE,
        }
    }
}
