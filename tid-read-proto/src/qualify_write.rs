// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA WRITE: which RDMA WRITE work requests become TID RDMA WRITEs
//! (the requester's plan), what the responder makes of a WRITE_REQ (its
//! plan), and how both honour the `max_write` OPFN carries.
//!
//! A WRITE qualifies when it is at least 256 KiB long, its *remote*
//! address is page-aligned and its length a whole number of pages, unless
//! the peer sits behind the local port, the QP does not use 9B packets or
//! OPFN left no remote parameters (the same gates as a READ, in the same
//! order; [`crate::qualify`]). The local SGEs are not looked at: the data
//! is sent from them by the ordinary send engine. Otherwise the request
//! stays a plain RDMA WRITE. Kernel: `hfi1_setup_tid_rdma_wqe()` (opcode
//! and length gate) and the WRITE branch of `setup_tid_rdma_wqe()`.
//!
//! # `max_write` on both sides
//!
//! Each side advertises in its OPFN word how many segments of one WRITE it
//! lets the peer have in flight (4 by default, SPEC §2).
//!
//! - The **responder** enforces its own advertised value: a request gets
//!   `n_flows = min(segments, local max_write)` flow records, and the QP
//!   allocates TID resources for at most `local max_write` segments at a
//!   time across all its WRITE requests ([`may_allocate_segment`]).
//!   Kernel: `hfi1_rc_rcv_tid_rdma_write_req()`,
//!   `hfi1_tid_write_alloc_resources()`.
//! - The **requester** records the peer's value as the request's
//!   `n_flows` ([`TidWritePlan::n_flows`]): it expects at most that many
//!   WRITE_RESP grants outstanding per request. The driver stores it and
//!   never reads it back on this side (its only reader is the TID setup,
//!   which for a WRITE runs at the responder); it is kept here as the
//!   bound a requester can check grants against. Kernel:
//!   `hfi1_build_tid_rdma_write_req()`.
//!
//! Difference from the driver, on purpose: the responder's `n_flows` is
//! the minimum computed on full 32-bit numbers, where the driver's
//! `min_t(u16, ...)` first truncates the segment count to 16 bits (65 536
//! segments would give `n_flows` 0 and a request that never gets a flow).
//! With the driver's own parameters (256 KiB segments) a request has at
//! most 16 384 segments, so the results agree on everything the driver
//! can send; the test `n_flows_is_not_truncated` shows the case.
//!
//! Pure functions over plain values: no lock is needed. The driver calls
//! them with the QP's `s_lock` held because the WQE and the ack queue live
//! there.

use hfi1_hal::Psn;
use hfi1_hal::consts::PAGE_SIZE;

use crate::opfn::TidParams;
use crate::qualify::{MIN_LENGTH, NotQualified, Path, WrOpcode, path_gates};

/// What the WRITE qualification looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteWorkRequest {
    /// The opcode; only [`WrOpcode::RdmaWrite`] qualifies.
    pub opcode: WrOpcode,
    /// Total length in bytes.
    pub length: u32,
    /// The remote virtual address.
    pub remote_addr: u64,
    /// The request's first IB PSN.
    pub psn: Psn,
}

/// How a qualified WRITE is cut into segments at the requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TidWritePlan {
    /// Bytes per segment: `min(remote max_len, length)`.
    pub seg_len: u32,
    /// Segments: `ceil(length / seg_len)`.
    pub total_segs: u32,
    /// First IB PSN (the request's).
    pub first_psn: Psn,
    /// Last IB PSN: `first + total_segs - 1` (each segment's WRITE_RESP
    /// consumes one).
    pub last_psn: Psn,
    /// Segments the responder lets this request have in flight: the peer's
    /// `max_write`.
    pub n_flows: u8,
}

/// True if `remote_addr` is page-aligned and `length` a whole number of
/// pages.
pub const fn remote_aligned(remote_addr: u64, length: u32) -> bool {
    let mask = PAGE_SIZE - 1;
    remote_addr & mask as u64 == 0 && length & mask == 0
}

/// Decides whether `wr` becomes a TID RDMA WRITE on `path`, and how.
/// Kernel: `hfi1_setup_tid_rdma_wqe()` / `setup_tid_rdma_wqe()`.
pub fn qualify_write(wr: &WriteWorkRequest, path: &Path<'_>) -> Result<TidWritePlan, NotQualified> {
    if wr.opcode != WrOpcode::RdmaWrite {
        return Err(NotQualified::NotWrite);
    }
    if wr.length < MIN_LENGTH {
        return Err(NotQualified::TooShort);
    }
    let remote = path_gates(path)?;
    if !remote_aligned(wr.remote_addr, wr.length) {
        return Err(NotQualified::RemoteUnaligned);
    }
    if remote.max_len == 0 {
        return Err(NotQualified::NoMtu);
    }
    let seg_len = remote.max_len.min(wr.length);
    let total_segs = wr.length.div_ceil(seg_len);
    Ok(TidWritePlan {
        seg_len,
        total_segs,
        first_psn: wr.psn,
        last_psn: wr.psn.add(total_segs).sub(1),
        n_flows: remote.max_write,
    })
}

/// Why the responder rejects a WRITE_REQ's length (it answers with an
/// Invalid Request NAK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadWriteReq {
    /// The length is zero or not a whole number of pages.
    #[error("WRITE_REQ length zero or not a page multiple")]
    Length,
    /// The local segment size is zero (no TID RDMA parameters).
    #[error("no local segment size")]
    NoSegmentSize,
}

/// How the responder cuts a WRITE_REQ into segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteReqPlan {
    /// Segments: `ceil(length / local max_len)`.
    pub num_segs: u32,
    /// Bytes per segment: the local `max_len`.
    pub seg_len: u32,
    /// Flow records of the request: `min(num_segs, local max_write)`.
    pub n_flows: u16,
    /// Last IB PSN of the request: `psn + num_segs - 1`.
    pub last_psn: Psn,
}

/// The responder's plan for a WRITE_REQ of `length` bytes at IB PSN `psn`
/// under its own parameters `local`.
/// Kernel: `hfi1_rc_rcv_tid_rdma_write_req()` (its length check and its
/// `num_segs`, `n_flows`, `seg_len`, `lpsn`).
pub fn plan_write_req(
    length: u32,
    psn: Psn,
    local: &TidParams,
) -> Result<WriteReqPlan, BadWriteReq> {
    if length == 0 || length & (PAGE_SIZE - 1) != 0 {
        return Err(BadWriteReq::Length);
    }
    if local.max_len == 0 {
        return Err(BadWriteReq::NoSegmentSize);
    }
    let num_segs = length.div_ceil(local.max_len);
    let n_flows = num_segs.min(u32::from(local.max_write));
    Ok(WriteReqPlan {
        num_segs,
        seg_len: local.max_len,
        // At most max_write (six bits): always fits.
        n_flows: u16::try_from(n_flows).unwrap_or(u16::MAX),
        last_psn: psn.add(num_segs).sub(1),
    })
}

/// True if the responder may allocate TID resources for one more segment
/// while `alloc_w_segs` segments of its WRITE requests hold them.
/// Kernel: the `alloc_w_segs >= local->max_write` stop in
/// `hfi1_tid_write_alloc_resources()`.
pub const fn may_allocate_segment(alloc_w_segs: u32, local: &TidParams) -> bool {
    alloc_w_segs < local.max_write as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qualify::tests::path;

    fn wr(length: u32, remote_addr: u64) -> WriteWorkRequest {
        WriteWorkRequest {
            opcode: WrOpcode::RdmaWrite,
            length,
            remote_addr,
            psn: Psn::new(0x7FFF_FFFE),
        }
    }

    #[test]
    fn qualifies_and_plans() {
        let r = TidParams::local(2, 32, 14, false);
        let plan = qualify_write(&wr(5 << 18 | 3 << 12, 0x20_0000), &path(&r)).unwrap();
        assert_eq!(plan.seg_len, 256 * 1024);
        assert_eq!(plan.total_segs, 6);
        // One IB PSN per segment, wrapping past 2^31.
        assert_eq!(plan.first_psn, Psn::new(0x7FFF_FFFE));
        assert_eq!(plan.last_psn, Psn::new(3));
        assert_eq!(plan.n_flows, 4);
        let exact = qualify_write(&wr(256 * 1024, 0), &path(&r)).unwrap();
        assert_eq!((exact.total_segs, exact.last_psn), (1, exact.first_psn));
    }

    #[test]
    fn each_gate() {
        let r = TidParams::local(2, 32, 14, false);
        let p = path(&r);
        for op in [WrOpcode::RdmaRead, WrOpcode::Other] {
            let w = WriteWorkRequest {
                opcode: op,
                ..wr(1 << 20, 0)
            };
            assert_eq!(qualify_write(&w, &p), Err(NotQualified::NotWrite));
        }
        assert_eq!(
            qualify_write(&wr(252 * 1024, 0), &p),
            Err(NotQualified::TooShort)
        );
        let mut lp = p;
        lp.dlid = 4;
        assert_eq!(
            qualify_write(&wr(1 << 20, 0), &lp),
            Err(NotQualified::LocalPeer)
        );
        let mut b16 = p;
        b16.is_9b = false;
        assert_eq!(
            qualify_write(&wr(1 << 20, 0), &b16),
            Err(NotQualified::Not9B)
        );
        let mut none = p;
        none.remote = None;
        assert_eq!(
            qualify_write(&wr(1 << 20, 0), &none),
            Err(NotQualified::NotNegotiated)
        );
        assert_eq!(
            qualify_write(&wr(1 << 20, 0x1000_0200), &p),
            Err(NotQualified::RemoteUnaligned)
        );
        assert_eq!(
            qualify_write(&wr((1 << 20) + 512, 0), &p),
            Err(NotQualified::RemoteUnaligned)
        );
        let zero = TidParams { max_len: 0, ..r };
        assert_eq!(
            qualify_write(&wr(1 << 20, 0), &path(&zero)),
            Err(NotQualified::NoMtu)
        );
        // The gates run in the driver's order: opcode and length before the
        // path, the path before the alignment.
        assert_eq!(
            qualify_write(&wr(4096, 0x10), &none),
            Err(NotQualified::TooShort)
        );
        assert_eq!(
            qualify_write(&wr(1 << 20, 0x10), &none),
            Err(NotQualified::NotNegotiated)
        );
    }

    #[test]
    fn responder_plan() {
        let local = TidParams::local(3, 32, 14, false);
        let plan = plan_write_req(1 << 20, Psn::new(100), &local).unwrap();
        assert_eq!(
            plan,
            WriteReqPlan {
                num_segs: 4,
                seg_len: 256 * 1024,
                n_flows: 4,
                last_psn: Psn::new(103),
            }
        );
        let small = plan_write_req(8192, Psn::new(7), &local).unwrap();
        assert_eq!(
            (small.num_segs, small.n_flows, small.last_psn),
            (1, 1, Psn::new(7))
        );
        let odd = plan_write_req(3 << 18 | 1 << 12, Psn::new(0), &local).unwrap();
        assert_eq!((odd.num_segs, odd.n_flows), (4, 4));
        assert_eq!(
            plan_write_req(0, Psn::new(0), &local),
            Err(BadWriteReq::Length)
        );
        assert_eq!(
            plan_write_req(4097, Psn::new(0), &local),
            Err(BadWriteReq::Length)
        );
        let zero = TidParams::default();
        assert_eq!(
            plan_write_req(4096, Psn::new(0), &zero),
            Err(BadWriteReq::NoSegmentSize)
        );
    }

    #[test]
    fn responder_caps_segments_in_flight() {
        let local = TidParams::local(3, 32, 14, false);
        assert!((0..4).all(|n| may_allocate_segment(n, &local)));
        assert!(!may_allocate_segment(4, &local));
        let two = TidParams {
            max_write: 2,
            ..local
        };
        assert!(may_allocate_segment(1, &two) && !may_allocate_segment(2, &two));
        let plan = plan_write_req(1 << 20, Psn::new(0), &two).unwrap();
        assert_eq!(plan.n_flows, 2);
    }

    /// Pins the deviation in the module doc: with 4 KiB segments a 256 MiB
    /// WRITE has 65 536 segments, which the driver's `min_t(u16, ...)`
    /// truncates to 0 flow records; here the request gets `max_write`.
    #[test]
    fn n_flows_is_not_truncated() {
        let local = TidParams {
            max_len: 4096,
            ..TidParams::local(3, 32, 14, false)
        };
        let plan = plan_write_req(256 << 20, Psn::new(0), &local).unwrap();
        assert_eq!(plan.num_segs, 65_536);
        assert_eq!(plan.num_segs as u16, 0, "what the driver would use");
        assert_eq!(plan.n_flows, 4);
    }
}
