// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The RC layer TID RDMA READ needs, and no more.
//!
//! The driver's RC engine (`rc.c` with rdmavt) runs every verb: sends,
//! writes, atomics, retries with RNR and timers, credits, the full ACK
//! coalescing state machine. A TID READ uses a small slice of it: a send
//! queue of work requests that are sent in order, one IB PSN space
//! (`s_next_psn`, `s_last_psn`) that the segments consume, the limit of
//! reads outstanding (`s_num_rd_atomic` against `s_max_rd_atomic`), and on
//! the responder an ack queue of accepted requests with `r_psn`, `r_msn`
//! and the NAK state, plus ACK/NAK processing on the requester. That slice
//! is what lives here, so the TID engines can be driven end to end and
//! tested in user space; the rest of RC is not rebuilt (every work request
//! here is an RDMA READ, and every RDMA READ here is a TID READ).
//!
//! These are the types both engines share, below them: the connection,
//! the doubles' traits (packet sink, memory regions, source data),
//! completions and errors. A QP's whole protocol state, with both engines,
//! is [`crate::qp::TidQp`].

use tid_flow::FlowError;

use crate::opfn::TidParams;
use crate::packet::{PacketError, Path};

/// Send-queue slots of a QP. Kernel: `qp->s_size` (here fixed).
pub const SQ_SIZE: usize = 16;

/// Most reads a QP may have outstanding at its peer (the RC attribute
/// `max_rd_atomic` / `max_dest_rd_atomic`). Kernel: `HFI1_MAX_RDMA_ATOMIC`.
pub const MAX_RD_ATOMIC: u32 = 16;

/// Ack-queue slots of a responder QP: one per outstanding read plus one
/// that stays free. Kernel: `rvt_max_atomic(rdi) + 1` entries of
/// `qp->s_ack_queue`.
pub const ACK_QUEUE_SIZE: usize = MAX_RD_ATOMIC as usize + 1;

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
    /// The peer's TID parameters.
    pub remote: TidParams,
    /// Path MTU in bytes (4096 or 8192).
    pub pmtu: u32,
    /// LIDs.
    pub path: Path,
    /// Reads (segments) the requester keeps outstanding at most; at most
    /// [`MAX_RD_ATOMIC`], the peer's ack queue. Kernel: `qp->s_max_rd_atomic`.
    pub max_rd_atomic: u32,
    /// The responder allows remote reads (`IB_ACCESS_REMOTE_READ`).
    pub remote_read: bool,
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

/// The responder's memory regions: an R_Key check that takes a reference
/// on the region, and its release. Kernel: `rvt_rkey_ok()` /
/// `rvt_put_mr()`.
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

/// A completion's status. Kernel: `enum ib_wc_status` (the few used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    /// Done.
    Success,
    /// The responder refused (NAK) or the request could not be carried on.
    RemoteError,
    /// The QP was flushed.
    Flushed,
    /// The requester lost track of the request (a flow sequence error
    /// named no segment it has in flight) and put the QP in the error
    /// state. Kernel: `IB_WC_LOC_QP_OP_ERR` from `rvt_rc_error()`.
    LocalQpOpError,
}

/// Errors of the engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The send queue is full.
    #[error("send queue full")]
    QueueFull,
    /// The work request's scatter list is empty, not page aligned or too
    /// long for a verbs message.
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
