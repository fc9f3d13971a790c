// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's entry points: receiving READ and WRITE requests and
//! WRITE data, building responses and TID ACKs, and the reset of both
//! roles (the module doc's table says which lock each needs).

#[allow(clippy::wildcard_imports)]
use super::*;

/// Receives a TID READ_REQ (or a plain RDMA READ request): an
/// `HFI1_TID_RCV_*` outcome or `-errno`. The responses are built by
/// [`hfi1_tid_make_resp`].
///
/// Kernel: `hfi1_rc_rcv_tid_rdma_read_req()`.
///
/// # Safety
///
/// `qp` live or null; `r_lock` its `r_lock`; `io` as for
/// [`hfi1_tid_make_req`] (its regions are used); `pkt` valid for `len`
/// bytes.
///
/// # Locking
///
/// `qp->r_lock` held (asserted); takes `qp->s_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rcv_read_req(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    io: *const IoC,
    pkt: *const u8,
    len: u32,
) -> i32 {
    let e = Entry {
        rcd,
        qp,
        io: Some(io),
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        e.packet(
            (r_lock, RLockIs::Held),
            (pkt, len),
            Takes::Any,
            |c, q, r, rx| {
                let mrs = c.regions()?;
                let mut g = q.s_lock.lock(r);
                let v = match packet::parse(rx.bytes).map_err(|_| Errno::BADMSG)?.1 {
                    Parsed::ReadReq { bth, hdr, payload } => {
                        qp::receive_read_req::<KernelPlatform>(&mut g, bth.psn, &hdr, payload, mrs)
                    }
                    Parsed::ReadRequest { bth, reth } => {
                        qp::receive_plain_read::<KernelPlatform>(&mut g, bth.psn, &reth, mrs)
                    }
                    _ => return Err(Errno::PROTO),
                };
                Ok(match v {
                    ReqVerdict::Accepted => Rcv::Done,
                    ReqVerdict::Restarted | ReqVerdict::Refused(Some(_)) => Rcv::Restart,
                    ReqVerdict::Refused(None) => Rcv::Dropped,
                })
            },
        )
    }
}

/// Receives a TID WRITE_REQ: accepts it (or revives an RNR-NAKed one) and
/// allocates its first segments, which may queue the QP and schedule an
/// RNR NAK. The WRITE_RESPs are built by [`hfi1_tid_make_resp`].
///
/// Kernel: `hfi1_rc_rcv_tid_rdma_write_req()`.
///
/// # Safety
///
/// As [`hfi1_tid_rcv_read_req`].
///
/// # Locking
///
/// `qp->r_lock` held (asserted); takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rcv_write_req(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    io: *const IoC,
    pkt: *const u8,
    len: u32,
) -> i32 {
    let e = Entry {
        rcd,
        qp,
        io: Some(io),
    };
    let takes = Takes::Only(&[hfi1_hal::consts::OP_TID_RDMA_WRITE_REQ]);
    // SAFETY: forwarded from the caller.
    unsafe {
        e.packet((r_lock, RLockIs::Held), (pkt, len), takes, |c, q, r, rx| {
            let f = &rx.frame;
            let p = write_req::Packet::new_checked(f.body).map_err(|_| Errno::BADMSG)?;
            let h = write_req::Repr::parse(&p).map_err(|_| Errno::BADMSG)?;
            let rcd = c.rcd;
            let wmrs = c.regions()?;
            Ok(
                match qp::receive_write_req(rcd, q, r, f.bth.psn, &h, wmrs) {
                    WriteReqVerdict::Accepted | WriteReqVerdict::Revived => Rcv::Done,
                    WriteReqVerdict::Duplicate => Rcv::Restart,
                    WriteReqVerdict::Refused(Some(_)) => Rcv::Restart,
                    WriteReqVerdict::Dropped | WriteReqVerdict::Refused(None) => Rcv::Dropped,
                },
            )
        })
    }
}

/// Builds up to `budget` response packets in ack-queue order (READ
/// responses, TID READ_RESPs, WRITE_RESPs after allocating, a scheduled
/// RNR NAK). Returns 1 if more can go now, 0 if not, or `-errno`.
///
/// Kernel: `make_rc_ack()` (`hfi1_build_tid_rdma_read_resp()`,
/// `hfi1_build_tid_rdma_write_resp()`).
///
/// # Safety
///
/// As [`hfi1_tid_make_req`].
///
/// # Locking
///
/// `qp->s_lock` held (asserted); takes `exp_lock`. `send` is called with
/// `s_lock` held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_make_resp(
    rcd: *const Rcd,
    qp: *mut KQp,
    io: *const IoC,
    budget: u32,
) -> i32 {
    let e = Entry {
        rcd,
        qp,
        io: Some(io),
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        e.s_locked(|c, q, g| {
            let rcd = c.rcd;
            let (src, sink) = c.io()?;
            let more = qp::write_responses_locked(rcd, q, g, src, src, sink, budget)?;
            Ok(i32::from(more))
        })
    }
}

/// The responder receives a WRITE_DATA or WRITE_DATA_LAST the chip handed
/// to software without an error (a segment's last packet under header
/// suppression): the segment's TIDs go back, more are allocated, a TID
/// ACK becomes owed ([`hfi1_tid_make_tid_ack`]).
///
/// Kernel: `hfi1_rc_rcv_tid_rdma_write_data()`.
///
/// # Safety
///
/// As [`hfi1_tid_rcv_read_req`].
///
/// # Locking
///
/// `qp->r_lock` held (asserted); takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rcv_write_data(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    io: *const IoC,
    pkt: *const u8,
    len: u32,
) -> i32 {
    let e = Entry {
        rcd,
        qp,
        io: Some(io),
    };
    // SAFETY: forwarded from the caller.
    unsafe { write_data(e, (r_lock, RLockIs::Held), (pkt, len), None) }
}

/// Both WRITE_DATA entries: the ordinary receive, or with the chip's
/// `error` the KDETH error path.
///
/// # Safety
///
/// As [`hfi1_tid_rcv_write_data`]; `r_lock` held if `how` says so.
pub(super) unsafe fn write_data(
    e: Entry,
    r: (*mut c_void, RLockIs),
    pkt: (*const u8, u32),
    error: Option<KdethError>,
) -> i32 {
    let takes = Takes::Only(&[
        hfi1_hal::consts::OP_TID_RDMA_WRITE_DATA,
        OP_TID_RDMA_WRITE_DATA_LAST,
    ]);
    // SAFETY: forwarded from the caller.
    unsafe {
        e.packet(r, pkt, takes, |c, q, r, rx| {
            let f = &rx.frame;
            let last = f.bth.opcode == OP_TID_RDMA_WRITE_DATA_LAST;
            let p = write_data::Packet::new_checked(f.body).map_err(|_| Errno::BADMSG)?;
            write_data::Repr::parse(&p).map_err(|_| Errno::BADMSG)?;
            let psn = FlowPsn::from_raw(f.bth.psn.get());
            let rcd = c.rcd;
            let wmrs = c.regions()?;
            let v = match error {
                None => qp::receive_write_data(rcd, q, r, psn, last, wmrs),
                Some(e) => qp::receive_write_data_error(rcd, q, r, (psn, last), e, wmrs),
            };
            Ok(match v {
                DataVerdict::SegmentDone | DataVerdict::RequestDone | DataVerdict::InSequence => {
                    Rcv::Done
                }
                DataVerdict::Nak => Rcv::Restart,
                DataVerdict::Dropped => Rcv::Dropped,
            })
        })
    }
}

/// The responder receives a RESYNC: its flow moves to the generation the
/// RESYNC names and a RESYNC ACK becomes owed ([`hfi1_tid_make_tid_ack`]).
///
/// Kernel: `hfi1_rc_rcv_tid_rdma_resync()`.
///
/// # Safety
///
/// `rcd`, `qp` live or null; `r_lock` the QP's; `pkt` valid for `len`.
///
/// # Locking
///
/// `qp->r_lock` held (asserted); takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rcv_resync(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    pkt: *const u8,
    len: u32,
) -> i32 {
    let e = Entry { rcd, qp, io: None };
    let takes = Takes::Only(&[hfi1_hal::consts::OP_TID_RDMA_RESYNC]);
    // SAFETY: forwarded from the caller.
    unsafe {
        e.packet((r_lock, RLockIs::Held), (pkt, len), takes, |c, q, r, rx| {
            let psn = FlowPsn::from_raw(rx.frame.bth.psn.get());
            Ok(match qp::receive_resync(c.rcd, q, r, psn) {
                ResyncVerdict::Resynced => Rcv::Done,
                ResyncVerdict::Ignored | ResyncVerdict::Dropped => Rcv::Dropped,
            })
        })
    }
}

/// The reap timer expired: a TID WRITE whose data never came gives its
/// flow, TIDs and region references back and the QP goes to the error
/// state. 1 if it acted, 0 if not.
///
/// Kernel: `hfi1_tid_timeout()`.
///
/// # Safety
///
/// `rcd`, `qp` live or null; `r_lock` the QP's; `io` as for
/// [`hfi1_tid_make_req`].
///
/// # Locking
///
/// `qp->r_lock` held (asserted), as the kernel's handler takes it; takes
/// `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_reap_timeout(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    io: *const IoC,
) -> i32 {
    let e = Entry {
        rcd,
        qp,
        io: Some(io),
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        e.r_locked(r_lock, RLockIs::Held, |c, q, r| {
            let rcd = c.rcd;
            Ok(i32::from(qp::reap_timeout(rcd, q, r, c.regions()?)))
        })
    }
}

/// Builds the TID ACK (or TID NAK) the responder owes into `io`: 1 if
/// one was sent, 0 if none was owed, or `-errno`.
///
/// Kernel: `make_tid_rdma_ack()` (the responder half of
/// `hfi1_make_tid_rdma_pkt()`).
///
/// # Safety
///
/// As [`hfi1_tid_make_req`].
///
/// # Locking
///
/// `qp->s_lock` held (asserted); takes `exp_lock` if it errors the QP.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_make_tid_ack(
    rcd: *const Rcd,
    qp: *mut KQp,
    io: *const IoC,
) -> i32 {
    let e = Entry {
        rcd,
        qp,
        io: Some(io),
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        e.s_locked(|c, q, g| {
            let rcd = c.rcd;
            let (_, sink) = c.io()?;
            Ok(i32::from(qp::tid_ack_locked(rcd, q, g, sink)?))
        })
    }
}

/// Resets both roles of the QP: every request not finished completes
/// flushed, every TID, flow, flow record, DMA mapping and region
/// reference goes back, the QP leaves any TID wait.
///
/// Kernel: `rvt_reset_qp()` → `hfi1_qp_kern_exp_rcv_clear_all()`,
/// `hfi1_kern_clear_hw_flow()`, `hfi1_tid_rdma_flush_wait()`.
///
/// # Safety
///
/// As [`hfi1_tid_make_req`].
///
/// # Locking
///
/// `qp->s_lock` held (asserted); takes `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_qp_reset(rcd: *const Rcd, qp: *mut KQp, io: *const IoC) -> i32 {
    let e = Entry {
        rcd,
        qp,
        io: Some(io),
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        e.s_locked(|c, q, g| {
            let rcd = c.rcd;
            let wmrs = c.regions()?;
            qp::flush(rcd, q, g);
            qp::flush_write_responder(rcd, q, g, wmrs);
            Ok(0)
        })
    }
}
