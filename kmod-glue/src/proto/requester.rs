// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's entry points: posting, building requests, receiving
//! responses and ACKs, the KDETH error path, the timers and the second
//! leg (the module doc's table says which lock each needs).

#[allow(clippy::wildcard_imports)]
use super::*;

/// Posts an RDMA READ (a TID READ when it qualifies). 0 or `-errno`
/// (`-ENOSPC`: send queue full).
///
/// Kernel: `hfi1_setup_tid_rdma_wqe()` (READ) on the post.
///
/// # Safety
///
/// `rcd`, `qp` live or null; `wr` null or valid with `nsges` elements at
/// `sges`.
///
/// # Locking
///
/// `qp->s_lock` held (asserted); takes `exp_lock` if the post errors the QP.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_post_read(rcd: *const Rcd, qp: *mut KQp, wr: *const WrC) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { post(rcd, qp, wr, false) }
}

/// Posts an RDMA WRITE (a TID WRITE when it qualifies). As
/// [`hfi1_tid_post_read`].
///
/// Kernel: `hfi1_setup_tid_rdma_wqe()` (WRITE) on the post.
///
/// # Safety
///
/// As [`hfi1_tid_post_read`].
///
/// # Locking
///
/// `qp->s_lock` held (asserted); takes `exp_lock` if the post errors the QP.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_post_write(rcd: *const Rcd, qp: *mut KQp, wr: *const WrC) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { post(rcd, qp, wr, true) }
}

/// Both posts.
///
/// # Safety
///
/// As [`hfi1_tid_post_read`].
unsafe fn post(rcd: *const Rcd, qp: *mut KQp, wr: *const WrC, write: bool) -> i32 {
    // SAFETY: the caller promises `wr` is null or valid.
    let Some(wr) = (unsafe { wr.as_ref() }) else {
        return Errno::INVAL.to_neg();
    };
    let n = wr.nsges as usize;
    if wr.sges.is_null() || n == 0 {
        return Errno::INVAL.to_neg();
    }
    // SAFETY: the caller promises `nsges` elements at `sges`, read for
    // the call only (the post copies what it keeps); `Sge` is `repr(C)`
    // with `SgeC`'s layout (checked above).
    let sges = unsafe { core::slice::from_raw_parts(wr.sges.cast::<Sge>(), n) };
    let e = Entry { rcd, qp, io: None };
    // SAFETY: forwarded from the caller.
    unsafe {
        e.s_locked(|c, q, g| {
            if write {
                let w = WriteWr {
                    wr_id: wr.wr_id,
                    remote_addr: wr.remote_addr,
                    rkey: wr.rkey,
                    sges,
                };
                qp::post_write(c.rcd, q, g, &w)?;
            } else {
                let w = ReadWr {
                    wr_id: wr.wr_id,
                    remote_addr: wr.remote_addr,
                    rkey: wr.rkey,
                    sges,
                };
                qp::post_read(c.rcd, q, g, &w)?;
            }
            Ok(0)
        })
    }
}

/// Builds every request packet the QP can send now (TID READ_REQ, TID
/// WRITE_REQ, plain READ and WRITE requests), each handed to `io`'s
/// `send`. Returns the packets sent or `-errno`.
///
/// Kernel: `hfi1_make_rc_req()` (`hfi1_build_tid_rdma_read_req()`,
/// `hfi1_build_tid_rdma_write_req()`).
///
/// # Safety
///
/// `rcd`, `qp` live or null; `io` as `struct hfi1_tid_io` says.
///
/// # Locking
///
/// `qp->s_lock` held (asserted); takes `exp_lock`. `send` is called with
/// `s_lock` held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_make_req(rcd: *const Rcd, qp: *mut KQp, io: *const IoC) -> i32 {
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
            qp::requests_locked(rcd, q, g, sink, src)?;
            Ok(sink.sent as i32)
        })
    }
}

/// The requester receives a TID READ_RESP the chip handed to software
/// without an error (a segment's last packet under header suppression).
/// An `HFI1_TID_RCV_*` outcome or `-errno`.
///
/// Kernel: `hfi1_rc_rcv_tid_rdma_read_resp()`.
///
/// # Safety
///
/// `rcd`, `qp` live or null; `r_lock` the QP's; `pkt` valid for `len`.
///
/// # Locking
///
/// `qp->r_lock` held (asserted); takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rcv_read_resp(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    pkt: *const u8,
    len: u32,
) -> i32 {
    let e = Entry { rcd, qp, io: None };
    // SAFETY: forwarded from the caller.
    unsafe { read_resp(e, r_lock, (pkt, len), RLockIs::Held, None) }
}

/// The KDETH error path for a packet the chip flagged: a TID READ_RESP
/// at the requester, or a WRITE_DATA / WRITE_DATA_LAST at the responder
/// (whose regions `io` gives). `rte` is the receive-type error (1: TID,
/// 2: flow sequence, 3: flow generation). An `HFI1_TID_RCV_*` outcome or
/// `-errno` (`-EPROTO` for any other packet).
///
/// Kernel: `hfi1_handle_kdeth_eflags()`.
///
/// # Safety
///
/// `rcd`, `qp` live or null; `r_lock` the QP's, initialised; `io` as for
/// [`hfi1_tid_make_req`]; `pkt` valid for `len` bytes.
///
/// # Locking
///
/// None held; takes `qp->r_lock`, `qp->s_lock`, then `exp_lock`, as the
/// kernel's does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_kdeth_eflags(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    io: *const IoC,
    pkt: *const u8,
    len: u32,
    rte: u32,
) -> i32 {
    let e_kdeth = match rte {
        1 => KdethError::Tid,
        2 => KdethError::FlowSeq,
        3 => KdethError::FlowGen,
        _ => return Errno::INVAL.to_neg(),
    };
    // SAFETY: forwarded from the caller.
    let Some(b) = (unsafe { bytes(pkt, len) }) else {
        return Errno::INVAL.to_neg();
    };
    let write = frame::parse(b).is_ok_and(|f| {
        matches!(
            f.bth.opcode,
            hfi1_hal::consts::OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST
        )
    });
    // The READ half needs no verbs side.
    let e = Entry {
        rcd,
        qp,
        io: write.then_some(io),
    };
    let (r, p) = ((r_lock, RLockIs::Taken), (pkt, len));
    if write {
        // SAFETY: forwarded from the caller.
        unsafe { write_data(e, r, p, Some(e_kdeth)) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { read_resp(e, r_lock, p, RLockIs::Taken, Some(e_kdeth)) }
    }
}

/// Both READ_RESP entries, `r_lock` held.
///
/// # Safety
///
/// As [`hfi1_tid_rcv_read_resp`]; `r_lock` held if `how` says so.
unsafe fn read_resp(
    e: Entry,
    r_lock: *mut c_void,
    pkt: (*const u8, u32),
    how: RLockIs,
    error: Option<KdethError>,
) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        e.packet((r_lock, how), pkt, Takes::Any, |c, q, r, rx| {
            let Parsed::ReadResp { bth, hdr, .. } =
                packet::parse(rx.bytes).map_err(|_| Errno::BADMSG)?.1
            else {
                return Err(Errno::PROTO);
            };
            let mut g = q.s_lock.lock(r);
            let kpsn = FlowPsn::from_raw(bth.psn.get());
            let v = qp::receive_read_resp(c.rcd, q, &mut g, kpsn, &hdr, error)?;
            Ok(match v {
                RespVerdict::Completed | RespVerdict::Counted => Rcv::Done,
                RespVerdict::Dropped => Rcv::Dropped,
                RespVerdict::LostTrack => Rcv::QpError,
            })
        })
    }
}

/// The requester receives an RC ACK or NAK, or a plain RDMA READ response
/// (copied into local memory through `io`'s `write`).
///
/// Kernel: `rc_rcv_resp()` (`do_rc_ack()`, `rvt_copy_sge()`).
///
/// # Safety
///
/// As [`hfi1_tid_rcv_read_req`].
///
/// # Locking
///
/// `qp->r_lock` held (asserted); takes `qp->s_lock`, and `exp_lock` when
/// the QP errors or a TID WRITE's ACK releases its flow.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rcv_rc_resp(
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
                let rcd = c.rcd;
                let mem = c.regions()?;
                let mut g = q.s_lock.lock(r);
                match packet::parse(rx.bytes).map_err(|_| Errno::BADMSG)?.1 {
                    Parsed::Ack { bth, aeth } => {
                        Ok(match qp::receive_ack(rcd, q, &mut g, bth.psn, &aeth) {
                            AckVerdict::Acked => Rcv::Done,
                            AckVerdict::Ignored | AckVerdict::NotActed => Rcv::Dropped,
                            AckVerdict::Restart => Rcv::Restart,
                            AckVerdict::Fatal(_) => Rcv::QpError,
                        })
                    }
                    Parsed::ReadResponse {
                        bth,
                        kind,
                        aeth,
                        payload,
                    } => {
                        let taken = qp::receive_read_response(
                            rcd, q, &mut g, bth.psn, kind, aeth, payload, mem,
                        );
                        Ok(if taken { Rcv::Done } else { Rcv::Dropped })
                    }
                    _ => Err(Errno::PROTO),
                }
            },
        )
    }
}

/// The requester receives a WRITE_RESP: the segment's TIDs, then the
/// second leg is scheduled (`queue_tid_send`).
///
/// Kernel: `hfi1_rc_rcv_tid_rdma_write_resp()`.
///
/// # Safety
///
/// As [`hfi1_tid_rcv_read_resp`].
///
/// # Locking
///
/// `qp->r_lock` held (asserted); takes `qp->s_lock`, and `exp_lock` when
/// the QP errors.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rcv_write_resp(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    pkt: *const u8,
    len: u32,
) -> i32 {
    let e = Entry { rcd, qp, io: None };
    let takes = Takes::Only(&[hfi1_hal::consts::OP_TID_RDMA_WRITE_RESP]);
    // SAFETY: forwarded from the caller.
    unsafe {
        e.packet((r_lock, RLockIs::Held), (pkt, len), takes, |c, q, r, rx| {
            let f = &rx.frame;
            let p = write_resp::Packet::new_checked(f.body).map_err(|_| Errno::BADMSG)?;
            let h = write_resp::Repr::parse(&p).map_err(|_| Errno::BADMSG)?;
            let mut g = q.s_lock.lock(r);
            Ok(
                match qp::receive_write_resp(c.rcd, q, &mut g, f.bth.psn, &h, p.payload()) {
                    WriteRespVerdict::Taken => Rcv::Done,
                    WriteRespVerdict::Dropped => Rcv::Dropped,
                    WriteRespVerdict::Fatal(_) => Rcv::QpError,
                },
            )
        })
    }
}

/// The requester receives a TID ACK (or TID NAK).
///
/// Kernel: `hfi1_rc_rcv_tid_rdma_ack()`.
///
/// # Safety
///
/// As [`hfi1_tid_rcv_read_resp`].
///
/// # Locking
///
/// `qp->r_lock` held (asserted); takes `qp->s_lock`, then `exp_lock`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rcv_tid_ack(
    rcd: *const Rcd,
    qp: *mut KQp,
    r_lock: *mut c_void,
    pkt: *const u8,
    len: u32,
) -> i32 {
    let e = Entry { rcd, qp, io: None };
    // SAFETY: forwarded from the caller.
    unsafe {
        e.packet(
            (r_lock, RLockIs::Held),
            (pkt, len),
            Takes::Only(&[OP_TID_RDMA_ACK]),
            |c, q, r, rx| {
                let f = &rx.frame;
                let p = tid_ack::Packet::new_checked(f.body).map_err(|_| Errno::BADMSG)?;
                let h = tid_ack::Repr::parse(&p).map_err(|_| Errno::BADMSG)?;
                let mut g = q.s_lock.lock(r);
                let psn = FlowPsn::from_raw(f.bth.psn.get());
                Ok(match qp::receive_tid_ack(c.rcd, q, &mut g, psn, &h) {
                    TidAckVerdict::Acked { .. } => Rcv::Done,
                    TidAckVerdict::Dropped | TidAckVerdict::NotActed => Rcv::Dropped,
                    TidAckVerdict::Restart => Rcv::Restart,
                })
            },
        )
    }
}

/// Which timer fired.
#[derive(Clone, Copy)]
enum Timer {
    Retry,
    Rnr,
    TidRetry,
}

/// The timers' entries: 1 if the timer was running and acted, 0 if not.
///
/// # Safety
///
/// `rcd`, `qp` live or null, `qp`'s `s_lock` held.
unsafe fn fire(rcd: *const Rcd, qp: *mut KQp, t: Timer) -> i32 {
    let e = Entry { rcd, qp, io: None };
    // SAFETY: forwarded from the caller.
    unsafe {
        e.s_locked(|c, q, g| {
            Ok(i32::from(match t {
                Timer::Retry => qp::timeout(c.rcd, q, g),
                Timer::Rnr => qp::rnr_timeout(c.rcd, q, g),
                Timer::TidRetry => qp::tid_retry_timeout(c.rcd, q, g),
            }))
        })
    }
}

/// The retry timer expired: the requester restarts from the oldest
/// unacknowledged PSN (a TID READ from its restart point, a TID WRITE
/// with a WRITE_REQ for the rest), or completes with `RETRY_EXC_ERR`
/// when the budget is spent. 1 if the timer was running, 0 if not.
///
/// Kernel: `rvt_rc_timeout()` → `hfi1_restart_rc()` →
/// `hfi1_tid_rdma_restart_req()`.
///
/// # Safety
///
/// `rcd`, `qp` live or null.
///
/// # Locking
///
/// `qp->s_lock` held (asserted); takes `exp_lock` when the budget is
/// spent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rc_timeout(rcd: *const Rcd, qp: *mut KQp) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { fire(rcd, qp, Timer::Retry) }
}

/// The RNR timer expired: the NAKed request goes again. 1 if the timer
/// was running, 0 if not.
///
/// Kernel: `rvt_rc_rnr_retry()`.
///
/// # Safety
///
/// As [`hfi1_tid_rc_timeout`].
///
/// # Locking
///
/// `qp->s_lock` held (asserted).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_rnr_timeout(rcd: *const Rcd, qp: *mut KQp) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { fire(rcd, qp, Timer::Rnr) }
}

/// The TID retry timer expired: the first leg halts and the second leg
/// sends a RESYNC. 1 if the timer was running, 0 if not.
///
/// Kernel: `hfi1_tid_retry_timeout()`.
///
/// # Safety
///
/// As [`hfi1_tid_rc_timeout`].
///
/// # Locking
///
/// `qp->s_lock` held (asserted); takes `exp_lock` when the budget is
/// spent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_tid_retry_timeout(rcd: *const Rcd, qp: *mut KQp) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { fire(rcd, qp, Timer::TidRetry) }
}

/// The second leg's work item (what `queue_tid_send` queued): while a
/// WRITE_DATA, WRITE_DATA_LAST or RESYNC can be built, builds it under
/// `s_lock` and sends it with the lock dropped. Returns the packets sent
/// or `-errno`.
///
/// Kernel: `hfi1_do_tid_send()` (`hfi1_make_tid_rdma_pkt()`).
///
/// # Safety
///
/// `rcd` live or null; `qp` live or null with a reference held by the
/// caller; `io` as for [`hfi1_tid_make_req`].
///
/// # Locking
///
/// None held (workqueue); takes `qp->s_lock` for each packet, and
/// `exp_lock` inside it. `send` is called with no lock held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_do_tid_send(
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
        e.unlocked(|c, q, root| {
            let rcd = c.rcd;
            let (src, sink) = c.io()?;
            let n = tid_read_proto::write::second_leg::do_tid_send(rcd, q, root, sink, src)?;
            Ok(n as i32)
        })
    }
}

/// Takes the oldest finished work request into `wc`: 1, or 0 if none.
///
/// Kernel: the send completion (`hfi1_send_complete()` → `rvt_send_cq()`).
///
/// # Safety
///
/// `qp` live or null; `wc` null or writable.
///
/// # Locking
///
/// `qp->s_lock` held (asserted).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hfi1_tid_poll(qp: *mut KQp, wc: *mut WcC) -> i32 {
    // SAFETY: the caller promises `wc` is null or writable.
    let Some(wc) = (unsafe { wc.as_mut() }) else {
        return Errno::INVAL.to_neg();
    };
    // SAFETY: forwarded from the caller.
    unsafe {
        Entry::qp_only(qp, |_, g| {
            Ok(match g.ext.requester.poll() {
                Some(c) => {
                    *wc = WcC {
                        wr_id: c.wr_id,
                        length: c.length,
                        status: ib_wc_status(c.status),
                    };
                    1
                }
                None => 0,
            })
        })
    }
}
