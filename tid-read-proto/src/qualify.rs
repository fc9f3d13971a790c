// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Which RDMA READ work requests become TID RDMA READs (SPEC §5
//! "Qualification"), and the segment and PSN arithmetic of those that do.
//!
//! A READ qualifies when it is at least 256 KiB long and every local SGE
//! starts on a page boundary and is a whole number of pages, unless the
//! peer sits behind the local port (same LID under the LMC mask), the QP
//! does not use 9B packets, or OPFN left no remote parameters.
//! Kernel: `hfi1_setup_tid_rdma_wqe()` (the length gate) and
//! `setup_tid_rdma_wqe()`, `hfi1_check_sge_align()`.
//!
//! The WRITE side of the same decision is [`crate::qualify_write`]; the
//! path gates ([`Path`]) and the reasons ([`NotQualified`]) are shared.
//!
//! Also the send-queue interlock that holds a request back behind an
//! unfinished TID RDMA WRITE or plain READ ([`interlock`]).
//!
//! Pure functions over small input structs: no lock is needed. The driver
//! calls them with the QP's `s_lock` held because the WQE lives there; the
//! only side effect it adds, allocating the request's flow records, is the
//! caller's (a failed allocation leaves the request a plain RDMA READ).

use hfi1_hal::Psn;
use hfi1_hal::consts::{MAX_SEGMENT_SIZE, PAGE_SIZE};

use crate::opfn::TidParams;

/// The smallest READ that becomes a TID RDMA READ (256 KiB).
/// Kernel: `TID_RDMA_MIN_SEGMENT_SIZE`.
pub const MIN_LENGTH: u32 = MAX_SEGMENT_SIZE;

/// `len / pmtu` the way the driver computes it: a shift by `ilog2(pmtu)`
/// (so a 10 KiB MTU divides by 8 KiB). 0 for a zero MTU.
/// Kernel: `rvt_div_mtu()`.
pub const fn div_mtu(len: u32, pmtu: u32) -> u32 {
    if pmtu == 0 {
        return 0;
    }
    len >> pmtu.ilog2()
}

/// `ceil(len / pmtu)` as the driver computes it: `(len + pmtu - 1) >>
/// ilog2(pmtu)`, here without the 32-bit overflow. 0 for a zero MTU.
/// Kernel: `rvt_div_round_up_mtu()`.
pub const fn div_round_up_mtu(len: u32, pmtu: u32) -> u32 {
    if pmtu == 0 {
        return 0;
    }
    let n = (len as u64 + pmtu as u64 - 1) >> pmtu.ilog2();
    // len < 2^32 and pmtu >= 1, so n < 2^32.
    n as u32
}

/// One local scatter/gather entry of the work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address of the buffer.
    pub vaddr: u64,
    /// Length in bytes.
    pub length: u32,
}

/// The work-request opcode, as far as qualification cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrOpcode {
    /// IB_WR_RDMA_READ.
    RdmaRead,
    /// IB_WR_RDMA_WRITE (without immediate data).
    RdmaWrite,
    /// Anything else (sends, writes with immediate, atomics): never
    /// converted.
    Other,
}

/// What the qualification looks at.
#[derive(Debug, Clone, Copy)]
pub struct WorkRequest<'a> {
    /// The opcode.
    pub opcode: WrOpcode,
    /// Total length in bytes.
    pub length: u32,
    /// The local SGEs.
    pub sges: &'a [Sge],
    /// The request's first IB PSN.
    pub psn: Psn,
}

/// The QP's path, as far as qualification cares.
#[derive(Debug, Clone, Copy)]
pub struct Path<'a> {
    /// Destination LID of the peer.
    pub dlid: u32,
    /// The local port's LID.
    pub port_lid: u32,
    /// The local port's LMC (low LID bits that address the same port).
    pub lmc: u8,
    /// True if the QP sends 9B packets (not 16B).
    pub is_9b: bool,
    /// Path MTU in bytes.
    pub pmtu: u32,
    /// The peer's OPFN parameters, `None` if TID RDMA was not negotiated.
    pub remote: Option<&'a TidParams>,
}

/// Why a request stays a plain RDMA READ or RDMA WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotQualified {
    /// Not an RDMA READ (asked of [`qualify`]).
    #[error("not an RDMA READ")]
    NotRead,
    /// Not an RDMA WRITE without immediate data (asked of
    /// [`crate::qualify_write::qualify_write`]).
    #[error("not an RDMA WRITE")]
    NotWrite,
    /// Shorter than 256 KiB.
    #[error("shorter than 256 KiB")]
    TooShort,
    /// The peer is on the local port (loopback goes through the SDMA
    /// loopback path, not the expected-receive hardware).
    #[error("peer on the local port")]
    LocalPeer,
    /// The QP uses 16B packets.
    #[error("not 9B packets")]
    Not9B,
    /// OPFN did not negotiate TID RDMA.
    #[error("TID RDMA not negotiated")]
    NotNegotiated,
    /// An SGE is not page-aligned or not a whole number of pages.
    #[error("SGE not page-aligned")]
    Unaligned,
    /// A WRITE's remote address is not page-aligned or its length not a
    /// whole number of pages.
    #[error("remote buffer not page-aligned")]
    RemoteUnaligned,
    /// The path MTU is zero (no path) or the peer's `max_len` is zero.
    #[error("no usable MTU or segment size")]
    NoMtu,
}

/// How a qualified READ is cut into segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TidReadPlan {
    /// Bytes per segment: `min(remote max_len, length)`.
    pub seg_len: u32,
    /// Segments: `ceil(length / seg_len)`.
    pub total_segs: u32,
    /// First IB PSN (the request's).
    pub first_psn: Psn,
    /// Last IB PSN: `first + ceil(length / pmtu) - 1` (each response packet
    /// consumes one).
    pub last_psn: Psn,
    /// Segments in flight: the peer's `max_read`.
    pub n_flows: u8,
}

/// True if every SGE starts on a page boundary and is a whole number of
/// pages. Kernel: `hfi1_check_sge_align()`.
pub fn sges_aligned(sges: &[Sge]) -> bool {
    sge_list_aligned(sges.iter().map(|s| (s.vaddr, s.length)))
}

/// The gates READ and WRITE share, in the driver's order: the peer is not
/// on the local port, the QP sends 9B packets, OPFN left remote
/// parameters (returned). Kernel: the start of `setup_tid_rdma_wqe()`.
pub(crate) fn path_gates<'a>(path: &Path<'a>) -> Result<&'a TidParams, NotQualified> {
    let lmc_mask = 1u32
        .checked_shl(u32::from(path.lmc))
        .unwrap_or(0)
        .wrapping_sub(1);
    if path.dlid & !lmc_mask == path.port_lid {
        return Err(NotQualified::LocalPeer);
    }
    if !path.is_9b {
        return Err(NotQualified::Not9B);
    }
    path.remote.ok_or(NotQualified::NotNegotiated)
}

/// True if every `(address, length)` starts on a page boundary and is a
/// whole number of pages. Kernel: `hfi1_check_sge_align()`.
pub fn sge_list_aligned(sges: impl IntoIterator<Item = (u64, u32)>) -> bool {
    let mask = u64::from(PAGE_SIZE - 1);
    sges.into_iter()
        .all(|(a, l)| a & mask == 0 && u64::from(l) & mask == 0)
}

/// Decides whether `wr` becomes a TID RDMA READ on `path`, and how.
/// Kernel: `hfi1_setup_tid_rdma_wqe()` / `setup_tid_rdma_wqe()`.
pub fn qualify(wr: &WorkRequest<'_>, path: &Path<'_>) -> Result<TidReadPlan, NotQualified> {
    qualify_min(wr, path, MIN_LENGTH)
}

/// [`qualify`] with the length gate at `min_len` instead of the kernel's
/// [`MIN_LENGTH`] (the fuzz world's small READs; see
/// [`crate::rc::Connection::tid_read_min`]).
pub fn qualify_min(
    wr: &WorkRequest<'_>,
    path: &Path<'_>,
    min_len: u32,
) -> Result<TidReadPlan, NotQualified> {
    if wr.opcode != WrOpcode::RdmaRead {
        return Err(NotQualified::NotRead);
    }
    if wr.length < min_len || wr.length == 0 {
        return Err(NotQualified::TooShort);
    }
    let remote = path_gates(path)?;
    if !sges_aligned(wr.sges) {
        return Err(NotQualified::Unaligned);
    }
    if path.pmtu == 0 || remote.max_len == 0 {
        return Err(NotQualified::NoMtu);
    }
    let seg_len = remote.max_len.min(wr.length);
    let total_segs = wr.length.div_ceil(seg_len);
    let npkts = div_round_up_mtu(wr.length, path.pmtu);
    Ok(TidReadPlan {
        seg_len,
        total_segs,
        first_psn: wr.psn,
        last_psn: wr.psn.add(npkts).sub(1),
        n_flows: remote.max_read,
    })
}

/// A send-queue entry's operation, as the interlock sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqeOp {
    /// SEND, SEND with immediate, SEND with invalidate.
    Send,
    /// Compare-and-swap or fetch-and-add.
    Atomic,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// Plain RDMA READ.
    RdmaRead,
    /// TID RDMA READ.
    TidRdmaRead,
    /// TID RDMA WRITE.
    TidRdmaWrite,
    /// Anything else (never interlocked).
    Other,
}

/// The send queue's state the interlock reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterlockState {
    /// The operation of the entry before the current one.
    pub prev: WqeOp,
    /// Some sent entry is not acknowledged yet (`s_acked != s_cur`).
    pub unacked: bool,
    /// When `prev` is a TID RDMA WRITE: not all of its segments are
    /// acknowledged yet (`ack_seg != total_segs`).
    pub prev_write_pending: bool,
}

/// True if the entry `op` must wait before it is sent (the driver then sets
/// `HFI1_S_TID_WAIT_INTERLCK`): anything after a TID RDMA WRITE whose
/// segments are not all acknowledged, and a TID RDMA READ after a plain
/// RDMA READ while responses are outstanding.
/// Kernel: `hfi1_tid_rdma_wqe_interlock()`.
pub const fn interlock(op: WqeOp, st: &InterlockState) -> bool {
    let after_unfinished_write = matches!(st.prev, WqeOp::TidRdmaWrite) && st.prev_write_pending;
    match op {
        WqeOp::Send | WqeOp::Atomic | WqeOp::RdmaWrite => after_unfinished_write,
        WqeOp::RdmaRead => after_unfinished_write,
        WqeOp::TidRdmaRead => match st.prev {
            WqeOp::RdmaRead => st.unacked,
            WqeOp::TidRdmaWrite => st.prev_write_pending,
            _ => false,
        },
        WqeOp::TidRdmaWrite | WqeOp::Other => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn remote() -> TidParams {
        TidParams::local(2, 32, 14, false)
    }

    /// A path to a remote peer with 9B packets and a 4 KiB MTU.
    pub(crate) fn path(r: &TidParams) -> Path<'_> {
        Path {
            dlid: 5,
            port_lid: 4,
            lmc: 0,
            is_9b: true,
            pmtu: 4096,
            remote: Some(r),
        }
    }

    const SGES: [Sge; 2] = [
        Sge {
            vaddr: 0x10_0000,
            length: 512 * 1024,
        },
        Sge {
            vaddr: 0x40_0000,
            length: 12 * 1024,
        },
    ];

    fn wr(sges: &[Sge]) -> WorkRequest<'_> {
        WorkRequest {
            opcode: WrOpcode::RdmaRead,
            length: sges.iter().map(|s| s.length).sum(),
            sges,
            psn: Psn::new(0x7FFF_FFF0),
        }
    }

    #[test]
    fn qualifies_and_plans() {
        let r = remote();
        let plan = qualify(&wr(&SGES), &path(&r)).unwrap();
        assert_eq!(plan.seg_len, 256 * 1024);
        assert_eq!(plan.total_segs, 3); // 524 KiB = 2 full + 12 KiB
        // 131 packets of 4 KiB: the last PSN wraps past 2^31.
        assert_eq!(plan.last_psn, Psn::new(0x7FFF_FFF0u32.wrapping_add(130)));
        assert_eq!(plan.n_flows, 6);
        let mut p8 = path(&r);
        p8.pmtu = 8192;
        let plan = qualify(&wr(&SGES), &p8).unwrap();
        assert_eq!(plan.last_psn, Psn::new(0x7FFF_FFF0).add(65)); // 66 packets
    }

    #[test]
    fn each_gate() {
        let r = remote();
        let p = path(&r);
        let mut w = wr(&SGES);
        w.opcode = WrOpcode::Other;
        assert_eq!(qualify(&w, &p), Err(NotQualified::NotRead));
        w.opcode = WrOpcode::RdmaWrite;
        assert_eq!(qualify(&w, &p), Err(NotQualified::NotRead));
        let small = [Sge {
            vaddr: 0,
            length: 252 * 1024,
        }];
        assert_eq!(qualify(&wr(&small), &p), Err(NotQualified::TooShort));
        let exact = [Sge {
            vaddr: 0,
            length: 256 * 1024,
        }];
        assert_eq!(qualify(&wr(&exact), &p).unwrap().total_segs, 1);
        let mut lp = p;
        lp.dlid = 4;
        assert_eq!(qualify(&wr(&SGES), &lp), Err(NotQualified::LocalPeer));
        lp.dlid = 5;
        lp.lmc = 1; // 5 & !1 == 4: same port
        assert_eq!(qualify(&wr(&SGES), &lp), Err(NotQualified::LocalPeer));
        let mut b16 = p;
        b16.is_9b = false;
        assert_eq!(qualify(&wr(&SGES), &b16), Err(NotQualified::Not9B));
        let mut none = p;
        none.remote = None;
        assert_eq!(qualify(&wr(&SGES), &none), Err(NotQualified::NotNegotiated));
        let mut off = SGES;
        off[1].vaddr += 512;
        assert_eq!(qualify(&wr(&off), &p), Err(NotQualified::Unaligned));
        let mut odd = SGES;
        odd[1].length += 1;
        assert_eq!(qualify(&wr(&odd), &p), Err(NotQualified::Unaligned));
        // Either size unknown is refused on its own, before any division
        // by it (a path with no MTU yet, a peer advertising no segment).
        let mut no_mtu = p;
        no_mtu.pmtu = 0;
        assert_eq!(qualify(&wr(&SGES), &no_mtu), Err(NotQualified::NoMtu));
        let zero = TidParams { max_len: 0, ..r };
        assert_eq!(qualify(&wr(&SGES), &path(&zero)), Err(NotQualified::NoMtu));
    }

    #[test]
    fn interlock_cases() {
        let st = |prev, unacked, pending| InterlockState {
            prev,
            unacked,
            prev_write_pending: pending,
        };
        // SPEC §7: a READ after an unfinished TID WRITE waits for it.
        for op in [
            WqeOp::RdmaRead,
            WqeOp::TidRdmaRead,
            WqeOp::Send,
            WqeOp::Atomic,
            WqeOp::RdmaWrite,
        ] {
            assert!(
                interlock(op, &st(WqeOp::TidRdmaWrite, false, true)),
                "{op:?}"
            );
            assert!(
                !interlock(op, &st(WqeOp::TidRdmaWrite, true, false)),
                "{op:?}"
            );
        }
        // A TID READ after a plain READ waits while anything is unacked.
        assert!(interlock(
            WqeOp::TidRdmaRead,
            &st(WqeOp::RdmaRead, true, false)
        ));
        assert!(!interlock(
            WqeOp::TidRdmaRead,
            &st(WqeOp::RdmaRead, false, false)
        ));
        // A plain READ after a plain READ never waits here.
        assert!(!interlock(
            WqeOp::RdmaRead,
            &st(WqeOp::RdmaRead, true, false)
        ));
        assert!(!interlock(
            WqeOp::TidRdmaWrite,
            &st(WqeOp::TidRdmaWrite, true, true)
        ));
        assert!(!interlock(WqeOp::TidRdmaRead, &st(WqeOp::Send, true, true)));
    }

    #[test]
    fn mtu_division_matches_the_driver() {
        assert_eq!(div_round_up_mtu(256 * 1024, 4096), 64);
        assert_eq!(div_round_up_mtu(256 * 1024 + 1, 4096), 65);
        assert_eq!(div_round_up_mtu(u32::MAX, 4096), 1 << 20);
        // 10 KiB MTU: the shift is by 13.
        assert_eq!(div_mtu(256 * 1024, 10240), 32);
        assert_eq!(div_mtu(1, 0), 0);
    }
}
