// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The RC layer the TID engines run on: what the driver's RC engine
//! (`rc.c` with rdmavt) does for the operations this crate carries, and
//! what a TID RDMA WRITE requester and responder share with them.
//!
//! - here: the connection ([`Connection`], with the RC attributes
//!   `retry_cnt`, `rnr_retry`, `timeout`), the doubles' traits (packet
//!   sink, memory regions, source data, local memory), completions with
//!   the kernel's statuses ([`WcStatus`]), the QP state ([`QpState`]) and
//!   the engines' errors;
//! - [`sq`]: the send queue with the kernel's indices (`s_last`,
//!   `s_acked`, `s_cur`, `s_tail`, `s_head`) whose slots also hold the
//!   completions until they are polled (so no completion is ever lost);
//! - [`retry`]: the retry budget (`s_retry`) and the RNR budget
//!   (`s_rnr_retry`), the retry and RNR timers and their durations;
//! - [`nak`]: what an AETH says (ACK, RNR NAK, NAK code, reserved) and the
//!   completion status of each fatal NAK.
//!
//! Time is never read here: a timer is armed with a duration and the
//! platform that runs the QP keeps the deadline ([`retry::Timer`]).
//!
//! A QP's whole protocol state, with both engines, is
//! [`crate::qp::TidQp`].

pub mod nak;
pub mod retry;
pub mod sq;

use tid_flow::FlowError;

use crate::opfn::TidParams;
use crate::packet::{PacketError, Path};

/// Send-queue slots of a QP. Kernel: `qp->s_size` (here fixed). A slot is
/// held from the post until its completion is polled.
pub const SQ_SIZE: usize = 16;

/// Kernel: `HFI1_MAX_RDMA_ATOMIC`.
///
/// Most reads a QP may have outstanding at its peer (the RC attribute
/// `max_rd_atomic` / `max_dest_rd_atomic`).
pub const MAX_RD_ATOMIC: u32 = 16;

/// Kernel: `rvt_max_atomic(rdi)` entries of `qp->s_ack_queue`
/// ([`hfi1_hal::consts::ACK_QUEUE_ENTRIES`]).
///
/// Ack-queue slots of a responder QP (25): room for [`MAX_RD_ATOMIC`] reads
/// and atomics, the TID RDMA WRITEs a requester may have started
/// (`HFI1_TID_RDMA_WRITE_CNT`), and one that stays free.
///
/// The READ-only limit of 6.1 is the requester's: it keeps at most
/// `s_max_rd_atomic` ([`Connection::max_rd_atomic`], at most 16) reads
/// outstanding. The responder checks no count of its own, only that the
/// slot after its head is free (`max_dest_rd_atomic` is not enforced by
/// `hfi1_rc_rcv()` either), so a READ-only peer that keeps the limit
/// never finds the queue full; only duplicates that re-arm entries can
/// fill it.
pub const ACK_QUEUE_SIZE: usize = hfi1_hal::consts::ACK_QUEUE_ENTRIES;

/// Kernel: the `retry_cnt` QP attribute, `qp->s_retry_cnt`.
///
/// The RC retry count a QP gets when nothing else is said (the verbs
/// maximum).
pub const DEFAULT_RETRY_CNT: u8 = 7;

/// Kernel: the `rnr_retry` QP attribute.
///
/// The RNR retry count a QP gets when nothing else is said: 7 means
/// unlimited.
pub const DEFAULT_RNR_RETRY: u8 = 7;

/// Kernel: the `timeout` QP attribute.
///
/// The local ACK timeout exponent a QP gets when nothing else is said:
/// 4.096 us << 14 = 67 ms.
pub const DEFAULT_TIMEOUT: u8 = 14;

/// What both sides agreed on when the connection was set up (the RC
/// attributes and the OPFN exchange).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// This QP's verbs QP number.
    pub verbs_qpn: u32,
    /// The peer's verbs QP number. Kernel: `qp->remote_qpn`.
    pub remote_verbs_qpn: u32,
    /// Our TID parameters (`qp` is our KDETH QPN).
    pub local: TidParams,
    /// The peer's TID parameters (meaningful only if `tid`).
    pub remote: TidParams,
    /// Kernel: `qpriv->tid_rdma.remote` not NULL.
    ///
    /// OPFN negotiated TID RDMA: `remote` holds the peer's parameters.
    pub tid: bool,
    /// Path MTU in bytes (4096 or 8192).
    pub pmtu: u32,
    /// LIDs.
    pub path: Path,
    /// Kernel: `qp->s_max_rd_atomic`.
    ///
    /// Reads (segments) the requester keeps outstanding at most; at most
    /// [`MAX_RD_ATOMIC`], the peer's ack queue.
    pub max_rd_atomic: u32,
    /// The responder allows remote reads (`IB_ACCESS_REMOTE_READ`).
    pub remote_read: bool,
    /// Kernel: `qp->s_retry_cnt`.
    ///
    /// Restarts allowed without progress before a request completes with
    /// [`WcStatus::RetryExceeded`] (0..=7).
    pub retry_cnt: u8,
    /// Kernel: `qp->s_rnr_retry_cnt`.
    ///
    /// RNR NAKs allowed without progress (7: unlimited).
    pub rnr_retry: u8,
    /// Kernel: `qp->timeout`, `qp->timeout_jiffies`.
    ///
    /// The local ACK timeout exponent: the retry timer runs 4.096 us <<
    /// `timeout` (<< `timeout_shift` for a TID READ_REQ).
    pub timeout: u8,
    /// The smallest READ that becomes a TID READ: the kernel's
    /// `TID_RDMA_MIN_SEGMENT_SIZE` ([`crate::qualify::MIN_LENGTH`]) on
    /// every real QP. The fuzz world lowers it so that a few pages take
    /// both paths.
    pub tid_read_min: u32,
    /// The responder allows remote writes (`IB_ACCESS_REMOTE_WRITE`).
    pub remote_write: bool,
    /// Kernel: `active_egress_rate(ppd)`.
    ///
    /// The port's egress rate, which scales the RNR wait a TID WRITE
    /// responder asks for.
    pub egress: hfi1_hal::rnr::EgressRate,
}

impl Default for Connection {
    /// A connection with the kernel's defaults: TID RDMA negotiated with
    /// default parameters on both sides, a 4 KiB MTU, 16 reads
    /// outstanding, retry and RNR counts 7, timeout 14, the 256 KiB TID
    /// READ threshold, no remote reads or writes, a 100 Gb/s port, QP
    /// numbers and LIDs 0.
    fn default() -> Self {
        Self {
            verbs_qpn: 0,
            remote_verbs_qpn: 0,
            local: TidParams::default(),
            remote: TidParams::default(),
            tid: true,
            pmtu: 4096,
            path: Path::default(),
            max_rd_atomic: MAX_RD_ATOMIC,
            remote_read: false,
            retry_cnt: DEFAULT_RETRY_CNT,
            rnr_retry: DEFAULT_RNR_RETRY,
            timeout: DEFAULT_TIMEOUT,
            tid_read_min: crate::qualify::MIN_LENGTH,
            remote_write: false,
            egress: hfi1_hal::rnr::EgressRate::OPA_100G,
        }
    }
}

impl Connection {
    /// The peer's TID parameters, if OPFN negotiated TID RDMA.
    pub const fn remote_tid(&self) -> Option<&TidParams> {
        if self.tid { Some(&self.remote) } else { None }
    }
}

/// Where the engines put the packets they build: they write into
/// [`PacketSink::buffer`] and hand the first `len` bytes over with
/// [`PacketSink::send`].
pub trait PacketSink {
    /// A buffer of at least [`crate::packet::MAX_PACKET`] bytes.
    fn buffer(&mut self) -> &mut [u8];
    /// Sends the first `len` bytes of the buffer.
    fn send(&mut self, len: usize);
}

/// Kernel: `rvt_rkey_ok()` / `rvt_put_mr()`.
///
/// The responder's memory regions: an R_Key check that takes a reference on
/// the region, and its release.
pub trait MrTable {
    /// Checks `rkey` for a remote read of `len` bytes at `vaddr`; on
    /// success returns a handle holding a reference on the region.
    fn get(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32>;
    /// Drops the reference a [`MrTable::get`] took.
    fn put(&self, mr: u32);
}

/// Where the responder reads the data it sends (the memory behind a
/// region, by the requester's virtual address).
pub trait SourceData {
    /// Fills `out` with the bytes at `vaddr`; false if they are not there.
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool;
}

/// Kernel: `rvt_copy_sge()`.
///
/// The requester's own memory, where software copies what arrives in an
/// eager buffer (a plain RDMA READ response) into the work request's
/// scatter list.
pub trait LocalMemory {
    /// Writes `data` at `addr`; false if the memory is not there.
    fn write(&mut self, addr: u64, data: &[u8]) -> bool;
}

/// A finished work request. Kernel: `struct ib_wc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The caller's id of the request.
    pub wr_id: u64,
    /// Bytes read.
    pub length: u32,
    /// Success, or why not.
    pub status: WcStatus,
}

/// A completion's status. Kernel: `enum ib_wc_status` (those RC READ and
/// WRITE requests end with).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WcStatus {
    /// Done. Kernel: `IB_WC_SUCCESS`.
    Success,
    /// A response's length did not fit the request. Kernel:
    /// `IB_WC_LOC_LEN_ERR`.
    LocalLength,
    /// Kernel: `IB_WC_LOC_QP_OP_ERR`.
    ///
    /// The requester could not carry the request on (a response for no
    /// request, a restart that found no segment).
    LocalQpOperation,
    /// Kernel: `IB_WC_WR_FLUSH_ERR`.
    ///
    /// The QP went to the error state before the request finished.
    Flushed,
    /// The responder NAKed it: invalid request (code 1). Kernel:
    /// `IB_WC_REM_INV_REQ_ERR`.
    RemoteInvalidRequest,
    /// The responder NAKed it: remote access error (code 2). Kernel:
    /// `IB_WC_REM_ACCESS_ERR`.
    RemoteAccess,
    /// The responder NAKed it: remote operational error (code 3). Kernel:
    /// `IB_WC_REM_OP_ERR`.
    RemoteOperational,
    /// The retry budget ran out. Kernel: `IB_WC_RETRY_EXC_ERR`.
    RetryExceeded,
    /// The RNR retry budget ran out. Kernel: `IB_WC_RNR_RETRY_EXC_ERR`.
    RnrRetryExceeded,
}

impl WcStatus {
    /// Every status, in declaration order (for reports).
    pub const ALL: [WcStatus; 9] = [
        Self::Success,
        Self::LocalLength,
        Self::LocalQpOperation,
        Self::Flushed,
        Self::RemoteInvalidRequest,
        Self::RemoteAccess,
        Self::RemoteOperational,
        Self::RetryExceeded,
        Self::RnrRetryExceeded,
    ];

    /// The kernel's name without the `IB_WC_` prefix (`RETRY_EXC_ERR`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Success => "SUCCESS",
            Self::LocalLength => "LOC_LEN_ERR",
            Self::LocalQpOperation => "LOC_QP_OP_ERR",
            Self::Flushed => "WR_FLUSH_ERR",
            Self::RemoteInvalidRequest => "REM_INV_REQ_ERR",
            Self::RemoteAccess => "REM_ACCESS_ERR",
            Self::RemoteOperational => "REM_OP_ERR",
            Self::RetryExceeded => "RETRY_EXC_ERR",
            Self::RnrRetryExceeded => "RNR_RETRY_EXC_ERR",
        }
    }
}

/// A QP's state, as far as these engines go. Kernel: `qp->state`
/// (`IB_QPS_RTS`, `IB_QPS_ERR`) with `ib_rvt_state_ops[]`.
///
/// In the error state posts are still accepted and complete
/// [`WcStatus::Flushed`] (rdmavt's rule: `RVT_POST_SEND_OK` and
/// `RVT_FLUSH_SEND` are set for `IB_QPS_ERR`), nothing more is sent, every
/// packet received is dropped, and the send engine only flushes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Ready to send: requests and responses flow.
    #[default]
    Rts,
    /// The error state.
    Error,
}

impl QpState {
    /// The kernel's name (`RTS`, `ERR`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Rts => "RTS",
            Self::Error => "ERR",
        }
    }

    /// Kernel: `RVT_PROCESS_RECV_OK`.
    ///
    /// Packets may be received and requests processed.
    pub const fn receives(self) -> bool {
        matches!(self, Self::Rts)
    }
}

/// Errors of the engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The send queue is full (its completions not yet polled count).
    #[error("send queue full")]
    QueueFull,
    /// The work request's scatter list is longer than a verbs message
    /// (2 GiB).
    #[error("bad scatter list")]
    BadSgl,
    /// Memory for the request could not be allocated.
    #[error("out of memory")]
    NoMemory,
    /// A flow-engine error other than "wait".
    #[error("flow: {0}")]
    Flow(#[from] FlowError),
    /// A packet could not be built.
    #[error("packet: {0}")]
    Packet(#[from] PacketError),
}

/// Declares a struct of `u64` counters that adds up (`AddAssign`: a node's
/// totals are the sum of its QPs'), each field with its doc.
macro_rules! counters {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$fmeta:meta])* pub $field:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: u64,)*
        }

        impl core::ops::AddAssign for $name {
            fn add_assign(&mut self, o: Self) {
                $(self.$field += o.$field;)*
            }
        }
    };
}
pub(crate) use counters;
