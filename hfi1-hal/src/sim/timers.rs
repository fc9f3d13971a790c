// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The timer service on simulated time ([`SimTimers`]).
//!
//! # Model assumptions
//!
//! - Time is the simulator's: [`SimTimers::advance_to`] moves it (never
//!   back), [`SimTimers::next_deadline`] says when the next timer is due so
//!   an idle world can jump there. Nothing fires by itself: the caller pops
//!   due expiries ([`SimTimers::pop_due`]) and runs each expiry handler on
//!   the thread it chooses, like the scheduler's work items.
//! - An expiry is popped at or after its deadline, never before; how late
//!   is the caller's choice (a late timer in the kernel is a busy CPU).
//! - An armed timer holds a reference to its QP until it is popped or
//!   cancelled (the kernel holds none: QP reset deletes the timers
//!   synchronously). A QP destroyed with a timer armed therefore shows up
//!   as a live reference.
//! - Lost cancel races on request ([`SimTimers::lose_cancel_races`]): while
//!   set, a [`QpTimers::cancel`] of a timer whose deadline has passed
//!   finds its expiry already started (`del_timer()` returning 0 because
//!   the callback runs on another CPU): it returns false and the expiry is
//!   still popped. [`SimTimers::inject`] queues an expiry of a timer that
//!   is not armed at all. Both exercise the expiry handlers' flag tests.
//! - [`QpTimers::cancel_sync`] removes the timer and any expiry of it not
//!   yet popped; a popped expiry is the caller's, running or done, as the
//!   sim runs handlers synchronously.

use alloc::vec::Vec;

use super::services::Inner;
use crate::lock_order::{LockToken, Unlocked};
use crate::services::QpRef;
use crate::timers::{QpTimer, QpTimers};

struct Armed<R> {
    qp: R,
    timer: QpTimer,
    deadline: u64,
    /// Its expiry started (a cancel lost the race, or it was injected): it
    /// is popped, not cancelled.
    started: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    armed: u64,
    rearmed: u64,
    cancelled: u64,
    lost_races: u64,
    injected: u64,
    fired: u64,
}

struct State<R> {
    now: u64,
    lose_races: bool,
    timers: Vec<Armed<R>>,
    counts: Counts,
}

/// A QP's timers on simulated time, with counters and the races of
/// the module doc.
pub struct SimTimers<R> {
    state: Inner<State<R>>,
}

impl<R> Default for SimTimers<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> core::fmt::Debug for SimTimers<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (now, n, c) = self.state.with(|s| (s.now, s.timers.len(), s.counts));
        f.debug_struct("SimTimers")
            .field("now", &now)
            .field("pending", &n)
            .field("counts", &c)
            .finish()
    }
}

/// What [`SimTimers`] counted so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TimerStats {
    /// Arms of a timer that was not pending.
    pub armed: u64,
    /// Arms of a pending timer (its expiry moved).
    pub rearmed: u64,
    /// Cancels that stopped a pending timer (both kinds of cancel).
    pub cancelled: u64,
    /// Cancels that found the expiry started and did not stop it.
    pub lost_races: u64,
    /// Expiries queued by [`SimTimers::inject`].
    pub injected: u64,
    /// Expiries popped.
    pub fired: u64,
}

impl<R> SimTimers<R> {
    /// No timers, time 0.
    pub fn new() -> Self {
        Self {
            state: Inner::new(State {
                now: 0,
                lose_races: false,
                timers: Vec::new(),
                counts: Counts::default(),
            }),
        }
    }

    /// Simulated time now, in nanoseconds.
    pub fn now(&self) -> u64 {
        self.state.with(|s| s.now)
    }

    /// Moves time to `now` (no effect if it is not later).
    pub fn advance_to(&self, now: u64) {
        self.state.with(|s| s.now = s.now.max(now));
    }

    /// The earliest deadline of a pending timer (an injected or started
    /// expiry counts as due now).
    pub fn next_deadline(&self) -> Option<u64> {
        self.state.with(|s| {
            s.timers
                .iter()
                .map(|t| if t.started { s.now } else { t.deadline })
                .min()
        })
    }

    /// Timers pending or expiries not yet popped.
    pub fn pending(&self) -> usize {
        self.state.with(|s| s.timers.len())
    }

    /// While `on`, a cancel of a timer whose deadline has passed loses the
    /// race with its expiry (module doc).
    pub fn lose_cancel_races(&self, on: bool) {
        self.state.with(|s| s.lose_races = on);
    }

    /// The counters.
    pub fn stats(&self) -> TimerStats {
        let c = self.state.with(|s| s.counts);
        TimerStats {
            armed: c.armed,
            rearmed: c.rearmed,
            cancelled: c.cancelled,
            lost_races: c.lost_races,
            injected: c.injected,
            fired: c.fired,
        }
    }

    /// Takes the expiry due first (deadline at or before now; started
    /// ones first, then by deadline, then in arming order): the QP and
    /// which timer. The caller runs the expiry handler.
    pub fn pop_due(&self) -> Option<(R, QpTimer)> {
        self.state.with(|s| {
            let now = s.now;
            let at = s
                .timers
                .iter()
                .enumerate()
                .filter(|(_, t)| t.started || t.deadline <= now)
                .min_by_key(|(i, t)| (!t.started, t.deadline, *i))
                .map(|(i, _)| i)?;
            let t = s.timers.remove(at);
            s.counts.fired = s.counts.fired.wrapping_add(1);
            Some((t.qp, t.timer))
        })
    }
}

impl<R: QpRef> SimTimers<R> {
    /// Queues an expiry of `timer` of `qp` now, armed or not: a stale or
    /// spurious expiry for the handler to ignore. An armed, not started
    /// timer of that kind is turned into the expiry (it fires once).
    pub fn inject(&self, qp: &R, timer: QpTimer) {
        self.state.with(|s| {
            s.counts.injected = s.counts.injected.wrapping_add(1);
            if let Some(t) = s
                .timers
                .iter_mut()
                .find(|t| t.timer == timer && !t.started && QpRef::same(&t.qp, qp))
            {
                t.started = true;
                return;
            }
            let deadline = s.now;
            s.timers.push(Armed {
                qp: QpRef::get(qp),
                timer,
                deadline,
                started: true,
            });
        });
    }

    /// True if `timer` of `qp` is pending (armed and its expiry not
    /// started).
    pub fn is_armed(&self, qp: &R, timer: QpTimer) -> bool {
        self.state.with(|s| {
            s.timers
                .iter()
                .any(|t| t.timer == timer && !t.started && QpRef::same(&t.qp, qp))
        })
    }

    /// The deadline of `timer` of `qp` if it is pending.
    pub fn deadline(&self, qp: &R, timer: QpTimer) -> Option<u64> {
        self.state.with(|s| {
            s.timers
                .iter()
                .find(|t| t.timer == timer && !t.started && QpRef::same(&t.qp, qp))
                .map(|t| t.deadline)
        })
    }
}

impl<R: QpRef> QpTimers<R> for SimTimers<R> {
    fn arm(&self, qp: &R, timer: QpTimer, delay_ns: u64) {
        self.state.with(|s| {
            let deadline = s.now.saturating_add(delay_ns);
            if let Some(t) = s
                .timers
                .iter_mut()
                .find(|t| t.timer == timer && !t.started && QpRef::same(&t.qp, qp))
            {
                t.deadline = deadline;
                s.counts.rearmed = s.counts.rearmed.wrapping_add(1);
                return;
            }
            s.counts.armed = s.counts.armed.wrapping_add(1);
            s.timers.push(Armed {
                qp: QpRef::get(qp),
                timer,
                deadline,
                started: false,
            });
        });
    }

    fn cancel(&self, qp: &R, timer: QpTimer) -> bool {
        let gone = self.state.with(|s| {
            let now = s.now;
            let at = s
                .timers
                .iter()
                .position(|t| t.timer == timer && !t.started && QpRef::same(&t.qp, qp))?;
            let t = s.timers.get_mut(at)?;
            if s.lose_races && t.deadline <= now {
                t.started = true;
                s.counts.lost_races = s.counts.lost_races.wrapping_add(1);
                return None;
            }
            s.counts.cancelled = s.counts.cancelled.wrapping_add(1);
            Some(s.timers.remove(at))
        });
        // The timer's reference is dropped outside the sim's lock.
        gone.is_some()
    }

    fn cancel_sync(&self, qp: &R, timer: QpTimer, _unlocked: &mut LockToken<'_, Unlocked>) -> bool {
        let (was_pending, gone) = self.state.with(|s| {
            let mut was_pending = false;
            let mut gone = Vec::new();
            let mut i = 0;
            while let Some(t) = s.timers.get(i) {
                if t.timer == timer && QpRef::same(&t.qp, qp) {
                    was_pending |= !t.started;
                    gone.push(s.timers.remove(i));
                } else {
                    i += 1;
                }
            }
            if was_pending {
                s.counts.cancelled = s.counts.cancelled.wrapping_add(1);
            }
            (was_pending, gone)
        });
        drop(gone);
        was_pending
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lock_order::LockToken;
    use crate::sim::SimRef;

    /// A timer is armed, with its deadline, only for its own QP and kind
    /// and only until its expiry starts; an injected expiry of an armed
    /// timer turns it into that expiry (one, not two); a cancel that loses
    /// the race only does so once the deadline has come, and only for its
    /// own timer. Every count moves once per event.
    #[test]
    fn each_timer_is_its_own_qps_and_kinds() {
        let a = SimRef::new(1u32);
        let b = SimRef::new(2u32);
        let t = SimTimers::new();
        t.advance_to(7);
        assert_eq!(t.now(), 7);
        t.arm(&a, QpTimer::Rnr, 10);
        assert!(t.is_armed(&a, QpTimer::Rnr));
        assert!(!t.is_armed(&b, QpTimer::Rnr) && !t.is_armed(&a, QpTimer::Reap));
        assert_eq!(t.deadline(&a, QpTimer::Rnr), Some(17));
        assert_eq!(
            (t.deadline(&b, QpTimer::Rnr), t.deadline(&a, QpTimer::Reap)),
            (None, None)
        );
        assert!(!t.cancel(&b, QpTimer::Rnr) && !t.cancel(&a, QpTimer::Reap));
        t.inject(&a, QpTimer::Rnr);
        assert!(!t.is_armed(&a, QpTimer::Rnr) && t.deadline(&a, QpTimer::Rnr).is_none());
        assert_eq!(t.pending(), 1, "the armed timer became the expiry");
        assert!(
            t.pop_due()
                .is_some_and(|(r, k)| QpRef::same(&r, &a) && k == QpTimer::Rnr)
        );
        assert!(t.pop_due().is_none());
        t.inject(&b, QpTimer::Reap);
        assert!(
            t.pop_due()
                .is_some_and(|(r, k)| QpRef::same(&r, &b) && k == QpTimer::Reap)
        );
        // Another QP's armed timer of the same kind is not the one an
        // injection turns into its expiry; an expiry already started goes
        // before a timer that is merely due.
        t.arm(&a, QpTimer::Rnr, 1);
        t.advance_to(8);
        t.inject(&b, QpTimer::Rnr);
        assert!(t.is_armed(&a, QpTimer::Rnr));
        assert!(
            t.pop_due().is_some_and(|(r, _)| QpRef::same(&r, &b)),
            "started first"
        );
        assert!(t.pop_due().is_some_and(|(r, _)| QpRef::same(&r, &a)));
        t.lose_cancel_races(true);
        t.arm(&a, QpTimer::RcRetry, 5);
        t.arm(&b, QpTimer::RcRetry, 50);
        t.advance_to(20);
        assert!(t.cancel(&b, QpTimer::RcRetry), "not yet due: stopped");
        assert!(!t.cancel(&a, QpTimer::RcRetry), "due: the expiry won");
        let mut root = LockToken::root();
        assert!(
            !t.cancel_sync(&a, QpTimer::RcRetry, &mut root),
            "it had started"
        );
        let s = t.stats();
        assert_eq!(
            (s.injected, s.fired, s.cancelled, s.lost_races),
            (3, 4, 1, 1)
        );
        assert!(alloc::format!("{t:?}").starts_with("SimTimers { now: 20, pending: 0"));
        assert_eq!((a.live_refs(), b.live_refs()), (1, 1));
    }

    /// The engine takes the timers by borrow: arming and cancelling through
    /// it act on the owner's timers, and cancel answers whether it stopped
    /// one. Each timer has its own index, in the order of `ALL`.
    #[test]
    fn timers_work_through_a_borrow_and_each_has_its_index() {
        fn run(t: impl QpTimers<SimRef<u32>>, q: &SimRef<u32>) -> [bool; 4] {
            t.arm(q, QpTimer::Rnr, 10);
            t.arm(q, QpTimer::Reap, 10);
            let mut root = LockToken::root();
            [
                t.cancel(q, QpTimer::Rnr),
                t.cancel(q, QpTimer::Rnr),
                t.cancel_sync(q, QpTimer::Reap, &mut root),
                t.cancel_sync(q, QpTimer::Reap, &mut root),
            ]
        }
        let q = SimRef::new(1u32);
        let t = SimTimers::new();
        assert_eq!(run(&t, &q), [true, false, true, false]);
        assert_eq!(t.pending(), 0);
        t.arm(&q, QpTimer::TidRetry, 5);
        assert!(t.is_armed(&q, QpTimer::TidRetry));
        assert!(t.cancel(&q, QpTimer::TidRetry));
        let idx: alloc::vec::Vec<usize> = QpTimer::ALL.iter().map(|t| t.index()).collect();
        assert_eq!(idx, [0, 1, 2, 3]);
        assert_eq!(q.live_refs(), 1);
    }

    #[test]
    fn fires_at_or_after_the_deadline_once_and_rearm_moves_it() {
        let q = SimRef::new(1u32);
        let t = SimTimers::new();
        t.arm(&q, QpTimer::TidRetry, 100);
        t.arm(&q, QpTimer::Reap, 50);
        assert_eq!(q.live_refs(), 3);
        t.arm(&q, QpTimer::TidRetry, 200);
        assert_eq!(t.stats().rearmed, 1);
        assert_eq!(t.next_deadline(), Some(50));
        t.advance_to(49);
        assert!(t.pop_due().is_none(), "not before its deadline");
        t.advance_to(150);
        let (r, which) = t.pop_due().unwrap();
        assert!(QpRef::same(&r, &q) && which == QpTimer::Reap);
        drop(r);
        assert!(t.pop_due().is_none(), "the re-armed one moved to 200");
        t.advance_to(10_000);
        assert_eq!(t.pop_due().map(|(_, w)| w), Some(QpTimer::TidRetry));
        assert!(t.pop_due().is_none(), "each fires once");
        assert_eq!(q.live_refs(), 1);
        assert_eq!(t.stats().fired, 2);
    }

    #[test]
    fn cancel_stops_unless_it_loses_the_race() {
        let q = SimRef::new(1u32);
        let t = SimTimers::new();
        t.arm(&q, QpTimer::RcRetry, 10);
        assert!(t.cancel(&q, QpTimer::RcRetry));
        assert!(!t.cancel(&q, QpTimer::RcRetry), "not pending any more");
        t.lose_cancel_races(true);
        t.arm(&q, QpTimer::RcRetry, 10);
        assert!(t.cancel(&q, QpTimer::RcRetry), "not yet due: stopped");
        t.arm(&q, QpTimer::RcRetry, 10);
        t.advance_to(10);
        assert!(!t.cancel(&q, QpTimer::RcRetry), "due: the expiry started");
        assert!(!t.is_armed(&q, QpTimer::RcRetry));
        assert_eq!(t.pop_due().map(|(_, w)| w), Some(QpTimer::RcRetry));
        assert_eq!(t.stats().lost_races, 1);
        assert_eq!(q.live_refs(), 1);
    }

    #[test]
    fn cancel_sync_takes_started_expiries_and_inject_fires_unarmed() {
        let q = SimRef::new(1u32);
        let other = SimRef::new(2u32);
        let t = SimTimers::new();
        t.inject(&q, QpTimer::Rnr);
        assert_eq!(t.next_deadline(), Some(0));
        t.arm(&other, QpTimer::Rnr, 5);
        t.arm(&q, QpTimer::Reap, 5);
        t.inject(&q, QpTimer::Reap);
        assert_eq!(t.pending(), 3, "the armed Reap became the expiry");
        let mut root = LockToken::root();
        assert!(
            !t.cancel_sync(&q, QpTimer::Reap, &mut root),
            "it had started"
        );
        assert!(!t.cancel_sync(&q, QpTimer::Reap, &mut root));
        let (r, w) = t.pop_due().unwrap();
        assert!(QpRef::same(&r, &q) && w == QpTimer::Rnr);
        drop(r);
        assert!(t.pop_due().is_none(), "other's is not due");
        assert!(t.cancel_sync(&other, QpTimer::Rnr, &mut root));
        assert_eq!((q.live_refs(), other.live_refs(), t.pending()), (1, 1, 0));
    }
}
