// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The RC requester's retry state: the retry budget (`s_retry`), the RNR
//! budget (`s_rnr_retry`), the retry timer (`s_timer`) and the RNR timer
//! (`s_rnr_timer`).
//!
//! A timer here holds no deadline: it is armed with a duration, and the
//! platform that runs the QP turns it into one (the kernel's `s_timer` and
//! hrtimer; the simulator's clock; a fuzz input's step). Every arm, re-arm
//! and stop bumps [`Timer::epoch`], so the platform sees each change even
//! when the duration is the same; an expiry that finds the timer stopped
//! does nothing (the kernel's `RVT_S_TIMER` test in `rvt_rc_timeout()`).

/// Kernel: `4096UL * (1UL << qp->timeout)) / 1000` in `rvt_modify_qp()`.
///
/// Nanoseconds of the kernel's timeout unit, 4.096 us.
pub const TIMEOUT_UNIT_NS: u64 = 4096;

/// Kernel: `ib_rvt_rnr_table[]`.
///
/// The RNR NAK timer values in microseconds, by the AETH's five-bit timer
/// field (the table lives in `hfi1_hal::rnr`, where the responder picks its
/// index).
pub use hfi1_hal::rnr::RNR_TABLE_US;

/// Kernel: `rvt_add_retry_timer_ext()`, `qp->timeout_jiffies`.
///
/// The retry timer's duration for a QP `timeout` and a `shift` (0, or the
/// OPFN `timeout_shift` for a TID READ_REQ): 4.096 us << `timeout` <<
/// `shift`, without the kernel's `busy_jiffies` (a per-device allowance for
/// many busy RC QPs) and its rounding to jiffies.
pub const fn retry_ns(timeout: u8, shift: u8) -> u64 {
    let exp = timeout as u32 + shift as u32;
    if exp >= 40 {
        // Far beyond any run; the kernel's 31-bit QP timeout caps it too.
        TIMEOUT_UNIT_NS << 40
    } else {
        TIMEOUT_UNIT_NS << exp
    }
}

/// Kernel: `rvt_aeth_to_usec()`.
///
/// The RNR timer's duration for the AETH timer field `timer`.
pub fn rnr_ns(timer: u8) -> u64 {
    let us = RNR_TABLE_US
        .get(usize::from(timer & 0x1F))
        .copied()
        .unwrap_or(0);
    u64::from(us) * 1000
}

/// A one-shot timer the platform keeps the deadline of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timer {
    armed: Option<u64>,
    epoch: u32,
}

impl Timer {
    /// Kernel: `add_timer()` / `mod_timer()` / `hrtimer_start()`.
    ///
    /// Starts it (or starts it again) to expire `ns` from now.
    pub fn arm(&mut self, ns: u64) {
        self.armed = Some(ns);
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// Stops it (no-op if stopped). Kernel: `del_timer()`.
    pub fn stop(&mut self) {
        if self.armed.take().is_some() {
            self.epoch = self.epoch.wrapping_add(1);
        }
    }

    /// The duration it was last armed with, if it runs.
    pub const fn armed(&self) -> Option<u64> {
        self.armed
    }

    /// True while it runs. Kernel: `RVT_S_TIMER` / `RVT_S_WAIT_RNR`.
    pub const fn is_armed(&self) -> bool {
        self.armed.is_some()
    }

    /// Changes with every arm and stop: the platform's cue to set or drop
    /// its deadline.
    pub const fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The timer expired: true (and it is stopped) if it was running.
    pub fn expire(&mut self) -> bool {
        let was = self.armed.is_some();
        self.stop();
        was
    }
}

/// The two budgets of an RC requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    retry_cnt: u8,
    retry: u8,
    rnr_retry_cnt: u8,
    rnr_retry: u8,
}

impl Budgets {
    /// Kernel: `rvt_modify_qp()` setting `s_retry` and `s_rnr_retry`.
    ///
    /// Full budgets from the QP attributes `retry_cnt` and `rnr_retry`.
    pub const fn new(retry_cnt: u8, rnr_retry: u8) -> Self {
        let retry_cnt = if retry_cnt > 7 { 7 } else { retry_cnt };
        let rnr_retry_cnt = if rnr_retry > 7 { 7 } else { rnr_retry };
        Self {
            retry_cnt,
            retry: retry_cnt,
            rnr_retry_cnt,
            rnr_retry: rnr_retry_cnt,
        }
    }

    /// Restarts left before the next one exhausts the budget.
    pub const fn retries_left(&self) -> u8 {
        self.retry
    }

    /// Kernel: the `s_retry` test and decrement of `hfi1_restart_rc()`.
    ///
    /// Spends one retry; false (nothing spent) if none was left.
    pub fn spend_retry(&mut self) -> bool {
        if self.retry == 0 {
            return false;
        }
        self.retry -= 1;
        true
    }

    /// Kernel: `qp->s_retry = qp->s_retry_cnt`.
    ///
    /// Progress: the retry budget is full again.
    pub fn refill_retry(&mut self) {
        self.retry = self.retry_cnt;
    }

    /// Kernel: the RNR branch of `do_rc_ack()`.
    ///
    /// Spends one RNR retry; false if none was left. A count of 7 is
    /// unlimited: nothing is spent.
    pub fn spend_rnr(&mut self) -> bool {
        if self.rnr_retry == 0 {
            return false;
        }
        if self.rnr_retry_cnt < 7 {
            self.rnr_retry -= 1;
        }
        true
    }

    /// Kernel: `qp->s_rnr_retry = qp->s_rnr_retry_cnt; qp->s_retry =
    /// qp->s_retry_cnt`.
    ///
    /// Progress: both budgets are full again (every ACK, every handled
    /// NAK).
    pub fn refill(&mut self) {
        self.retry = self.retry_cnt;
        self.rnr_retry = self.rnr_retry_cnt;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        // QP timeout 14, 256 KiB segments at a 4 KiB MTU (shift 6): 4.3 s.
        assert_eq!(retry_ns(14, 6), 4096 << 20);
        assert_eq!(retry_ns(0, 0), 4096);
        assert_eq!(rnr_ns(14), 1_280_000);
        assert_eq!(rnr_ns(0), 655_360_000);
    }

    #[test]
    fn timer_epochs_change_with_every_arm_and_stop() {
        let mut t = Timer::default();
        assert!(!t.expire());
        t.arm(5);
        let e = t.epoch();
        t.arm(5);
        assert_ne!(t.epoch(), e, "a re-arm is a change");
        assert_eq!(t.armed(), Some(5));
        assert!(t.expire());
        assert!(!t.is_armed());
        let e = t.epoch();
        t.stop();
        assert_eq!(t.epoch(), e, "stopping a stopped timer changes nothing");
    }

    #[test]
    fn budgets() {
        let mut b = Budgets::new(2, 1);
        assert!(b.spend_retry() && b.spend_retry() && !b.spend_retry());
        b.refill_retry();
        assert_eq!(b.retries_left(), 2);
        assert!(b.spend_rnr() && !b.spend_rnr());
        b.refill();
        assert!(b.spend_rnr());
        let mut unlimited = Budgets::new(7, 7);
        for _ in 0..100 {
            assert!(unlimited.spend_rnr());
        }
    }
}
