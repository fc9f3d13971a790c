// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! How long a TID RDMA WRITE responder tells a requester to wait: the
//! RNR NAK timeout of a QP it had to queue, at the port's link rate.
//!
//! A responder that cannot allocate a WRITE segment's resources queues the
//! QP and NAKs the WRITE_REQ with RNR. It expects the QP to wait `to_seg`
//! segments of [`MAX_SEGMENT_SIZE`] bytes at the egress rate
//! ([`tid_rnr_timeout_us`]); on the flow queue, [`flow_wt`] segments per
//! position ahead. The AETH timer field it sends is the smallest entry of
//! rdmavt's RNR table that covers that time (`hfi1_compute_tid_rnr_timeout()`);
//! the table lives with the RC layer that arms the requester's RNR timer
//! from it.
//!
//! The link rate is a parameter ([`EgressRate`]): the kernel reads it from
//! the port (`active_egress_rate(ppd)`), the simulator from its link model.
//!
//! # Locking
//!
//! Pure functions.

use crate::consts::{
    IB_AETH_CREDIT_MASK, IB_RNR_NAK, MAX_SEGMENT_SIZE, MAX_TID_FLOW_PSN, TID_RDMA_SEGMENT_SHIFT,
};

/// A port's egress rate in Mbit/s (10^6 bit/s). Kernel: the value of
/// `active_egress_rate(ppd)` (`hfi.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EgressRate(u32);

/// Kernel: `OPA_LINK_SPEED_25G` (`opa_port_info.h`), the link speed of a
/// 100 Gb/s port's lanes.
pub const OPA_LINK_SPEED_25G: u16 = 0x0002;
/// Kernel: `OPA_LINK_WIDTH_1X` (`opa_port_info.h`).
pub const OPA_LINK_WIDTH_1X: u16 = 0x0001;
/// Kernel: `OPA_LINK_WIDTH_2X`.
pub const OPA_LINK_WIDTH_2X: u16 = 0x0002;
/// Kernel: `OPA_LINK_WIDTH_3X`.
pub const OPA_LINK_WIDTH_3X: u16 = 0x0004;
/// Kernel: `OPA_LINK_WIDTH_4X`.
pub const OPA_LINK_WIDTH_4X: u16 = 0x0008;

impl EgressRate {
    /// 100 Gb/s: four 25G lanes, the Omni-Path port everyone runs.
    pub const OPA_100G: Self = Self(100_000);

    /// A rate of `mbps` Mbit/s; `None` below 8 Mbit/s (less than one byte
    /// per microsecond, where the kernel's computation divides by zero).
    pub const fn from_mbps(mbps: u32) -> Option<Self> {
        if mbps >= 8 { Some(Self(mbps)) } else { None }
    }

    /// The rate of a port running `link_speed` on `link_width` lanes: 25000
    /// Mbit/s per 25G lane, else 12500 (12.5G), times 4, 3, 2 or 1 lanes.
    /// Kernel: `active_egress_rate()` on `ppd->link_speed_active` and
    /// `ppd->link_width_active`.
    pub const fn from_link(link_speed: u16, link_width: u16) -> Self {
        let lane = if link_speed == OPA_LINK_SPEED_25G {
            25_000
        } else {
            12_500
        };
        let lanes = match link_width {
            OPA_LINK_WIDTH_4X => 4,
            OPA_LINK_WIDTH_3X => 3,
            OPA_LINK_WIDTH_2X => 2,
            _ => 1,
        };
        Self(lane * lanes)
    }

    /// Mbit/s.
    pub const fn mbps(self) -> u32 {
        self.0
    }

    /// Bytes per microsecond (`rate / 8`, at least 1).
    pub const fn bytes_per_us(self) -> u32 {
        // The constructors never hold less than 8 Mbit/s; the guard lets the
        // compiler see a non-zero divisor, so the receive path that computes
        // an RNR wait carries no division trap.
        let b = self.0 / 8;
        if b == 0 { 1 } else { b }
    }
}

impl Default for EgressRate {
    fn default() -> Self {
        Self::OPA_100G
    }
}

/// Segments a QP at flow-queue position 1 is expected to wait: one sync
/// interval (a generation's 2048 packets of `pmtu` bytes) in segments of
/// 256 KiB; 32 at a 4 KiB MTU, 64 at 8 KiB. Kernel:
/// `hfi1_compute_tid_rdma_flow_wt()`.
pub const fn flow_wt(pmtu: u32) -> u32 {
    ((MAX_TID_FLOW_PSN as u64 * pmtu as u64) >> TID_RDMA_SEGMENT_SHIFT) as u32
}

/// The time a QP queued with `to_seg` segments ahead of it is expected to
/// wait, in microseconds: `to_seg × 256 KiB / (rate / 8)`, rounded down.
/// The caller picks the RNR timer field from it (the smallest table entry
/// of index 1..=31 at least this long, else 0). Kernel: the `timeout`
/// computed by `hfi1_compute_tid_rnr_timeout()`.
///
/// At 100 Gb/s: 1 segment → 20 µs; 4 (the `acked_tail` case) → 83 µs;
/// 32 (flow queue position 1 at 4 KiB) → 671 µs.
pub const fn tid_rnr_timeout_us(to_seg: u32, rate: EgressRate) -> u64 {
    match (to_seg as u64 * MAX_SEGMENT_SIZE as u64).checked_div(rate.bytes_per_us() as u64) {
        Some(us) => us,
        None => u64::MAX,
    }
}

/// The RNR NAK timer values in microseconds, by the AETH's five-bit timer
/// field. Kernel: `ib_rvt_rnr_table[]` (`rdmavt/qp.c`).
pub const RNR_TABLE_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// The AETH timer field for a wait of `timeout_us`: the smallest index in
/// 1..=31 whose table entry is at least that long, else 0 (the longest
/// wait, 655.36 ms). Kernel: the table walk of
/// `hfi1_compute_tid_rnr_timeout()`.
pub const fn rnr_timer_index(timeout_us: u64) -> u8 {
    let mut i = 1u8;
    let mut rest: &[u32] = match RNR_TABLE_US.split_first() {
        Some((_, rest)) => rest,
        None => return 0,
    };
    while let [us, tail @ ..] = rest {
        if *us as u64 >= timeout_us {
            return i;
        }
        i += 1;
        rest = tail;
    }
    0
}

/// The responder's `r_nak_state` for an RNR NAK with timer field `index`:
/// `IB_RNR_NAK | index`. Kernel: `send_rnr_nak()` (`tid_rdma.c`).
pub const fn rnr_nak_syndrome(index: u8) -> u8 {
    IB_RNR_NAK | (index & IB_AETH_CREDIT_MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_examples_at_100g() {
        let r = EgressRate::OPA_100G;
        assert_eq!(r.bytes_per_us(), 12_500);
        assert_eq!(tid_rnr_timeout_us(1, r), 20);
        assert_eq!(tid_rnr_timeout_us(4, r), 83);
        assert_eq!(flow_wt(4096), 32);
        assert_eq!(flow_wt(8192), 64);
        assert_eq!(tid_rnr_timeout_us(flow_wt(4096), r), 671);
        assert_eq!(tid_rnr_timeout_us(0, r), 0);
        assert_eq!(rnr_nak_syndrome(2), 0x22);
        assert_eq!(rnr_nak_syndrome(0x2D), 0x2D, "five bits only");
        // The notes' worked examples: RcvArray position 1, flow queue
        // position 1 at 4 KiB, the acked_tail case.
        assert_eq!(rnr_timer_index(tid_rnr_timeout_us(1, r)), 2);
        assert_eq!(rnr_timer_index(tid_rnr_timeout_us(flow_wt(4096), r)), 0x0D);
        assert_eq!(rnr_timer_index(tid_rnr_timeout_us(4, r)), 7);
        assert_eq!(rnr_timer_index(0), 1);
        assert_eq!(rnr_timer_index(491_520), 31);
        assert_eq!(rnr_timer_index(491_521), 0, "beyond the table: the longest");
    }

    #[test]
    fn the_rate_matters() {
        let slow = EgressRate::from_link(0x0001, OPA_LINK_WIDTH_1X);
        assert_eq!(slow.mbps(), 12_500);
        assert_eq!(
            EgressRate::from_link(OPA_LINK_SPEED_25G, OPA_LINK_WIDTH_4X),
            EgressRate::OPA_100G
        );
        assert_eq!(
            EgressRate::from_link(OPA_LINK_SPEED_25G, OPA_LINK_WIDTH_3X).mbps(),
            75_000
        );
        assert_eq!(
            EgressRate::from_link(OPA_LINK_SPEED_25G, OPA_LINK_WIDTH_2X).mbps(),
            50_000
        );
        // 1 segment at 12.5 Gb/s: 167 µs, eight times the 100 Gb/s wait.
        assert_eq!(tid_rnr_timeout_us(1, slow), 167);
        assert_eq!(EgressRate::from_mbps(7), None);
        assert_eq!(
            EgressRate::from_mbps(8).map(EgressRate::bytes_per_us),
            Some(1)
        );
    }
}
