// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA WRITE: what both roles share, and the roles themselves.
//!
//! - here: the request state of a TID WRITE ([`TidReqState`], kernel
//!   `TID_REQUEST_*`), the memory regions a responder writes into
//!   ([`WriteRegions`]: the R_Key check for remote write and the region's
//!   pages), and the framing of a TID WRITE packet from the wire
//!   builders' headers ([`emit_tid_packet`]);
//! - [`requester`]: the requester, from the post to the TID ACK
//!   (`hfi1_setup_tid_rdma_wqe()`, `hfi1_build_tid_rdma_write_req()`,
//!   `hfi1_rc_rcv_tid_rdma_write_resp()`, `hfi1_rc_rcv_tid_rdma_ack()`,
//!   `hfi1_tid_retry_timeout()`, RESYNC);
//! - [`second_leg`]: the requester half of the TID send engine
//!   (`hfi1_schedule_tid_send()`, `hfi1_send_tid_ok()`,
//!   `hfi1_do_tid_send()`, `hfi1_make_tid_rdma_pkt()`);
//! - [`responder`]: the responder, from the WRITE_REQ to the TID ACK
//!   (`hfi1_rc_rcv_tid_rdma_write_req()`,
//!   `hfi1_tid_write_alloc_resources()`, `hfi1_build_tid_rdma_write_resp()`,
//!   `hfi1_rc_rcv_tid_rdma_write_data()`, `make_tid_rdma_ack()`).
//!
//! # Locking
//!
//! Everything here is pure or runs on state under the QP's `s_lock`;
//! [`responder`] says which entry needs `r_lock` and which takes
//! `exp_lock`.

pub mod requester;
pub mod responder;
pub mod second_leg;

use tid_flow::Sge;

use crate::packet::{self, BthOut, PacketError, Path};
use crate::rc::MrTable;
use crate::wire::tid_header::BthFields;

/// Where a TID WRITE request stands, on either side. Kernel: the
/// `TID_REQUEST_*` values of `tid_rdma.h`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TidReqState {
    /// Not started. Kernel: `TID_REQUEST_INACTIVE`.
    #[default]
    Inactive,
    /// Accepted, no response sent yet. Kernel: `TID_REQUEST_INIT`.
    Init,
    /// Accepted; its responses wait for a duplicate request (a go-back-N
    /// rewind of an earlier one). Kernel: `TID_REQUEST_INIT_RESEND`.
    InitResend,
    /// Responses flowing. Kernel: `TID_REQUEST_ACTIVE`.
    Active,
    /// Responses to be sent again once the duplicate arrives. Kernel:
    /// `TID_REQUEST_RESEND`.
    Resend,
    /// Responses being sent again. Kernel: `TID_REQUEST_RESEND_ACTIVE`.
    ResendActive,
    /// Queued for resources. Kernel: `TID_REQUEST_QUEUED`.
    Queued,
    /// At the end of the flow generation. Kernel: `TID_REQUEST_SYNC`.
    Sync,
    /// Every segment acknowledged. Kernel: `TID_REQUEST_COMPLETE`.
    Complete,
}

/// The responder's memory regions as a TID WRITE uses them: an R_Key
/// check for remote write that takes a reference (dropped with
/// [`MrTable::put`], the same handles as a READ's), and the pages behind
/// a region, walked by segment setup. Kernel: `rvt_rkey_ok(..,
/// IB_ACCESS_REMOTE_WRITE)` and the region's segment map
/// (`mr->map[]`, walked through `e->rdma_sge`).
pub trait WriteRegions: MrTable {
    /// Checks `rkey` for a remote write of `len` bytes at `vaddr`; on
    /// success returns a handle holding a reference on the region.
    fn get_write(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32>;

    /// The pages of region `mr` (page aligned, page multiples) and the
    /// byte offset of `vaddr` from their start; `None` for a handle not
    /// handed out or an address outside the region.
    fn write_pages(&self, mr: u32, vaddr: u64) -> Option<(&[Sge], u64)>;
}

/// Frames a TID RDMA packet: LRH, the BTH of `b`, the header after it
/// (written by `emit` into its first `hdr_len` bytes), `payload`, pad and
/// ICRC. Returns the packet's length.
///
/// # Errors
///
/// [`PacketError::NoRoom`] if `buf` is short; what `emit` returns.
pub fn emit_tid_packet(
    buf: &mut [u8],
    path: Path,
    b: &BthFields,
    hdr_len: usize,
    emit: impl FnOnce(&mut [u8]) -> Result<(), PacketError>,
    payload: &[u8],
) -> Result<usize, PacketError> {
    let out = BthOut {
        opcode: b.opcode,
        dest_qp: b.dest_qp,
        ack_req: b.ack_req,
        psn: b.psn,
    };
    packet::frame(buf, path, out, hdr_len + payload.len(), |body| {
        let (h, p) = body
            .split_at_mut_checked(hdr_len)
            .ok_or(PacketError::NoRoom)?;
        emit(h)?;
        p.get_mut(..payload.len())
            .ok_or(PacketError::NoRoom)?
            .copy_from_slice(payload);
        Ok(())
    })
}
