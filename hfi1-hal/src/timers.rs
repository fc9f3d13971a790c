// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The timer service: the four timers of a QP, armed, re-armed and
//! stopped by the protocol engines, fired by the platform.
//!
//! | [`QpTimer`] | kernel timer | armed by (6.1) | expiry |
//! |---|---|---|---|
//! | [`QpTimer::RcRetry`] | `qp->s_timer` (`timer_list`) | `rvt_add_retry_timer_ext()`, `rvt_mod_retry_timer_ext()` | `rvt_rc_timeout()`: `r_lock` → `s_lock` |
//! | [`QpTimer::Rnr`] | `qp->s_rnr_timer` (`hrtimer`) | `rvt_add_rnr_timer()` | `rvt_rc_rnr_retry()`: `s_lock` |
//! | [`QpTimer::TidRetry`] | `priv->s_tid_retry_timer` | `hfi1_add_tid_retry_timer()`, `hfi1_mod_tid_retry_timer()` | `hfi1_tid_retry_timeout()`: `r_lock` → `s_lock` |
//! | [`QpTimer::Reap`] | `priv->s_tid_timer` | `hfi1_add_tid_reap_timer()`, `hfi1_mod_tid_reap_timer()` | `hfi1_tid_timeout()`: `r_lock` → `s_lock` |
//!
//! The service knows deadlines only. Whether a timer is *logically* armed
//! is the QP's flag, as in 6.1 (`RVT_S_TIMER`, `RVT_S_WAIT_RNR`,
//! `HFI1_S_TID_RETRY_TIMER`, `HFI1_R_TID_RSC_TIMER`): the engine sets the
//! flag and arms, clears it and cancels, and its expiry handler does
//! nothing unless the flag is set. So an expiry may come late, or after a
//! [`QpTimers::cancel`] that lost the race with it (the kernel's
//! `del_timer()` returns 0 once the callback has started), and the handler
//! must ignore it; the sim implementation (`sim::SimTimers`, feature
//! `sim`) produces both on purpose.
//!
//! Durations are nanoseconds; the kernel implementation turns them into
//! jiffies (rounding up, as rdmavt's `usecs_to_jiffies()` does) or hrtimer
//! time. rdmavt's `busy_jiffies` allowance is the caller's to add.
//!
//! The RC layer of the protocol crate keeps its RC retry and RNR timers
//! as values in the QP's state (`rc::retry::Timer`: armed with a duration,
//! an epoch bumped by every change, the platform following it). Such a
//! value sits on this service unchanged in meaning: its arm is the flag
//! set plus [`QpTimers::arm`], its stop the flag cleared plus
//! [`QpTimers::cancel`], its expire the flag test in the expiry handler;
//! following the epoch becomes popping the sim's due expiries
//! (`sim::SimTimers::pop_due`).
//!
//! # Locking
//!
//! | method | called with |
//! |---|---|
//! | [`QpTimers::arm`], [`QpTimers::cancel`] | the QP's `s_lock` held (rdmavt's `lockdep_assert_held(&qp->s_lock)`); they take no lock of the order |
//! | [`QpTimers::cancel_sync`] | no lock of the order (the root token): it waits for a running expiry, which takes `r_lock` and `s_lock` |

use crate::lock_order::{LockToken, Unlocked};

/// One of a QP's four timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QpTimer {
    /// The RC retry timer. Kernel: `qp->s_timer`.
    RcRetry,
    /// The RNR NAK timer. Kernel: `qp->s_rnr_timer`.
    Rnr,
    /// The TID RDMA WRITE requester's retry timer. Kernel:
    /// `priv->s_tid_retry_timer`.
    TidRetry,
    /// The TID RDMA WRITE responder's reap timer. Kernel:
    /// `priv->s_tid_timer`.
    Reap,
}

impl QpTimer {
    /// All four, in a fixed order.
    pub const ALL: [Self; 4] = [Self::RcRetry, Self::Rnr, Self::TidRetry, Self::Reap];

    /// A small index (0..4), in the order of [`QpTimer::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// A QP's timers, wherever they live: the kernel's `timer_list`s and
/// `hrtimer` in the driver's QP, the simulator's clock.
///
/// # Locking
///
/// See the module doc: [`QpTimers::arm`] and [`QpTimers::cancel`] under
/// the QP's `s_lock`, [`QpTimers::cancel_sync`] with no lock held.
pub trait QpTimers<R> {
    /// Starts `timer` of `qp` to expire `delay_ns` from now; if it is
    /// pending, only its expiry moves (it fires once). Kernel:
    /// `mod_timer(&t, jiffies + delay)` / `hrtimer_start(.., REL_PINNED)`
    /// (the driver's `add_timer()` calls are made only on a timer that is
    /// not pending, where `mod_timer()` does the same).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held.
    fn arm(&self, qp: &R, timer: QpTimer, delay_ns: u64);

    /// Stops `timer` of `qp` if it is pending; true if it was. An expiry
    /// that has already started is not stopped (false): the handler's flag
    /// test makes it harmless. Kernel: `del_timer()` /
    /// `hrtimer_try_to_cancel()` (true iff it returned 1).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held.
    fn cancel(&self, qp: &R, timer: QpTimer) -> bool;

    /// Stops `timer` of `qp` and waits until no expiry of it runs; true if
    /// it was pending. For QP quiesce and destroy. Kernel:
    /// `del_timer_sync()` / `hrtimer_cancel()` (`hfi1_del_tid_reap_timer()`,
    /// `hfi1_del_tid_retry_timer()`, `rvt_del_timers_sync()`).
    ///
    /// # Locking
    ///
    /// No lock of the order held (`unlocked`): the expiry it may wait for
    /// takes the QP's `r_lock` and `s_lock`.
    fn cancel_sync(&self, qp: &R, timer: QpTimer, unlocked: &mut LockToken<'_, Unlocked>) -> bool;
}

impl<R, T: QpTimers<R> + ?Sized> QpTimers<R> for &T {
    fn arm(&self, qp: &R, timer: QpTimer, delay_ns: u64) {
        (**self).arm(qp, timer, delay_ns);
    }

    fn cancel(&self, qp: &R, timer: QpTimer) -> bool {
        (**self).cancel(qp, timer)
    }

    fn cancel_sync(&self, qp: &R, timer: QpTimer, unlocked: &mut LockToken<'_, Unlocked>) -> bool {
        (**self).cancel_sync(qp, timer, unlocked)
    }
}
