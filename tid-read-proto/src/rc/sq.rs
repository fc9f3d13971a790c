// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The send queue of an RC requester with rdmavt's indices, generic over
//! what a work request carries (a READ here, a WRITE later).
//!
//! ```text
//!   first ... acked ... cur ... tail ... head
//!   |completed,|acknowledged    |never    |next post
//!   |not polled|not yet         |started
//! ```
//!
//! - `first`: the oldest slot still held; its work request has completed
//!   and waits to be polled, or is the oldest not yet completed;
//! - `acked`: the oldest work request not yet completed. Kernel:
//!   `s_acked` (and `s_last`: completions are generated the moment a work
//!   request is acknowledged, so the two coincide);
//! - `cur`: the work request being sent or re-sent. Kernel: `s_cur`;
//! - `tail`: the first work request never started. Kernel: `s_tail`;
//! - `head`: where the next post goes. Kernel: `s_head`.
//!
//! A slot is held from the post until its completion is polled: the send
//! queue is also the completion queue, exactly as deep, so a completion can
//! never be dropped for want of room (the kernel frees the slot when the
//! completion is generated and relies on a CQ the application sized; a
//! full CQ there loses the completion and raises `IB_EVENT_CQ_ERR`).
//! Kernel: `rvt_qp_complete_swqe()`.
//!
//! Indices are free-running `u32`s; positions compare by their distance
//! from `first`.

use super::{SQ_SIZE, WcStatus};

/// The send-queue indices from `from` up to, not including, `to`, in post
/// order: empty if the two are equal, and across the `u32` wrap as the
/// free-running indices run. It is the walk `i = from; while i != to {
/// ...; i += 1 }`, so a pointer that trails `from` gives the long way
/// round, as that loop would.
pub fn indices(from: u32, to: u32) -> impl DoubleEndedIterator<Item = u32> + Clone {
    (0..to.wrapping_sub(from)).map(move |n| from.wrapping_add(n))
}

/// One slot: the work request and, once it completed, its status.
struct Slot<W> {
    wqe: W,
    status: Option<WcStatus>,
}

/// The send queue.
///
/// # Locking
///
/// Part of the QP's state under its `s_lock`.
pub struct SendQueue<W> {
    slots: [Option<Slot<W>>; SQ_SIZE],
    first: u32,
    /// The oldest work request not completed. Kernel: `s_acked`.
    pub acked: u32,
    /// The work request being sent. Kernel: `s_cur`.
    pub cur: u32,
    /// The first never started. Kernel: `s_tail`.
    pub tail: u32,
    head: u32,
}

impl<W> Default for SendQueue<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W> SendQueue<W> {
    /// An empty queue.
    pub fn new() -> Self {
        Self {
            slots: core::array::from_fn(|_| None),
            first: 0,
            acked: 0,
            cur: 0,
            tail: 0,
            head: 0,
        }
    }

    fn slot(i: u32) -> usize {
        i as usize % SQ_SIZE
    }

    /// Slots held: posted and not yet polled.
    pub fn len(&self) -> u32 {
        self.head.wrapping_sub(self.first)
    }

    /// True if nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if another work request fits.
    pub fn can_post(&self) -> bool {
        (self.len() as usize) < SQ_SIZE
    }

    /// Where the next post goes. Kernel: `s_head`.
    pub const fn head(&self) -> u32 {
        self.head
    }

    /// Work requests posted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.acked)
    }

    /// `i`'s distance from the oldest slot.
    fn pos(&self, i: u32) -> u32 {
        i.wrapping_sub(self.first)
    }

    /// The work request at `i`, if the slot is held.
    pub fn get(&self, i: u32) -> Option<&W> {
        if self.pos(i) >= self.len() {
            return None;
        }
        self.slots
            .get(Self::slot(i))
            .and_then(Option::as_ref)
            .map(|s| &s.wqe)
    }

    /// The work request at `i`, mutably.
    pub fn get_mut(&mut self, i: u32) -> Option<&mut W> {
        if self.pos(i) >= self.len() {
            return None;
        }
        self.slots
            .get_mut(Self::slot(i))
            .and_then(Option::as_mut)
            .map(|s| &mut s.wqe)
    }

    /// The status of `i`, once it completed.
    pub fn status(&self, i: u32) -> Option<WcStatus> {
        if self.pos(i) >= self.len() {
            return None;
        }
        self.slots
            .get(Self::slot(i))
            .and_then(Option::as_ref)
            .and_then(|s| s.status)
    }

    /// Posts `w` (room was checked with [`Self::can_post`]); `status` is
    /// `Some` for a work request that completes at once (a post to a QP in
    /// the error state). Returns its index.
    pub fn push(&mut self, w: W, status: Option<WcStatus>) -> u32 {
        let i = self.head;
        if let Some(s) = self.slots.get_mut(Self::slot(i)) {
            *s = Some(Slot { wqe: w, status });
        }
        self.head = i.wrapping_add(1);
        i
    }

    /// Sets the status of `i` (a completion); the first status given
    /// stays.
    pub fn complete(&mut self, i: u32, status: WcStatus) {
        if self.pos(i) >= self.len() {
            return;
        }
        if let Some(s) = self.slots.get_mut(Self::slot(i)).and_then(Option::as_mut) {
            s.status.get_or_insert(status);
        }
    }

    /// Takes the oldest completion and frees its slot. Kernel:
    /// `ib_poll_cq()`.
    pub fn poll(&mut self) -> Option<(W, WcStatus)> {
        if self.is_empty() || self.status(self.first).is_none() {
            return None;
        }
        let s = self.slots.get_mut(Self::slot(self.first))?.take()?;
        self.first = self.first.wrapping_add(1);
        for idx in [&mut self.acked, &mut self.cur, &mut self.tail] {
            // An index never trails the oldest slot.
            if idx.wrapping_sub(self.first) > self.head.wrapping_sub(self.first) {
                *idx = self.first;
            }
        }
        s.status.map(|st| (s.wqe, st))
    }

    /// `from`, then the indices after it through `to`, stopping at the
    /// first slot not held: the walk "do `n`; stop at `to`; step; stop if
    /// the next slot is empty". The slots held are read once, so the
    /// walk's body may change work requests (not post or poll).
    pub fn through(&self, from: u32, to: u32) -> impl Iterator<Item = u32> + use<W> {
        let (first, len) = (self.first, self.len());
        // A slot in `first..head` is always filled (`push` fills the head,
        // `poll` empties the first), so being held is the distance test
        // `get` makes.
        let held = move |n: &u32| n.wrapping_sub(first) < len;
        core::iter::once(from)
            .chain(indices(from.wrapping_add(1), to.wrapping_add(1)).take_while(held))
    }

    /// Every work request from `acked` on that has not completed, with
    /// its index, oldest first.
    pub fn unfinished_mut(&mut self) -> impl Iterator<Item = (u32, &mut W)> {
        let (first, len) = (self.first, self.len());
        let from = self.acked.wrapping_sub(first);
        let (before, after) = self
            .slots
            .split_at_mut_checked(Self::slot(first))
            .unwrap_or((&mut [], &mut []));
        after
            .iter_mut()
            .chain(before.iter_mut())
            .take(len as usize)
            .zip(0u32..)
            .skip(from as usize)
            .filter_map(move |(s, n)| {
                s.as_mut()
                    .filter(|s| s.status.is_none())
                    .map(|s| (first.wrapping_add(n), &mut s.wqe))
            })
    }

    /// Every held work request, oldest first, with its index and status.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &W, Option<WcStatus>)> {
        indices(self.first, self.head).filter_map(|i| {
            self.slots
                .get(Self::slot(i))
                .and_then(Option::as_ref)
                .map(|s| (i, &s.wqe, s.status))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full queue of completed-but-unpolled requests takes no post: the
    /// completions are kept in the slots, so none can be lost (the
    /// requester's old separate completion array dropped the one that did
    /// not fit).
    #[test]
    fn a_slot_is_held_until_its_completion_is_polled() {
        let mut q: SendQueue<u32> = SendQueue::new();
        for n in 0..SQ_SIZE as u32 {
            assert!(q.can_post());
            let i = q.push(n, None);
            q.complete(i, WcStatus::Success);
        }
        q.acked = q.head();
        assert!(!q.can_post());
        assert_eq!(q.outstanding(), 0);
        assert_eq!(q.poll(), Some((0, WcStatus::Success)));
        assert!(q.can_post());
        let i = q.push(100, None);
        assert!(q.unfinished_mut().any(|(j, _)| j == i));
        q.complete(i, WcStatus::RemoteAccess);
        q.complete(i, WcStatus::Flushed);
        let all: Vec<_> = core::iter::from_fn(|| q.poll()).collect();
        assert_eq!(all.len(), SQ_SIZE);
        assert_eq!(all.last(), Some(&(100, WcStatus::RemoteAccess)));
    }

    #[test]
    fn indices_from_a_pointer_to_itself_are_empty() {
        assert_eq!(indices(7, 7).count(), 0);
        assert_eq!(indices(u32::MAX, u32::MAX).count(), 0);
    }

    #[test]
    fn indices_run_across_the_u32_wrap() {
        let got: Vec<u32> = indices(u32::MAX - 1, 2).collect();
        assert_eq!(got, [u32::MAX - 1, u32::MAX, 0, 1]);
    }

    /// An empty queue whose next post takes index `n`: `n` requests were
    /// posted, completed and polled.
    fn emptied(n: u32) -> SendQueue<u32> {
        let mut q = SendQueue::new();
        for k in 0..n {
            let i = q.push(k, None);
            q.complete(i, WcStatus::Success);
            q.acked = q.head();
            q.cur = q.head();
            q.tail = q.head();
            assert!(q.poll().is_some());
        }
        q
    }

    /// A full queue (`head - first == SQ_SIZE`) walks every held slot once:
    /// the indices are free-running, so "full" and "empty" differ.
    #[test]
    fn indices_of_a_full_queue_cover_every_slot() {
        // Start off slot 0 so the walk crosses the end of the slot array.
        let mut q = emptied(5);
        let first = q.head();
        // Bounded, so a `can_post` that never says no fails the test
        // instead of hanging it.
        for _ in 0..2 * SQ_SIZE {
            if !q.can_post() {
                break;
            }
            q.push(0, None);
        }
        assert_eq!(q.len() as usize, SQ_SIZE);
        let walked: Vec<u32> = indices(first, q.head()).collect();
        assert_eq!(walked.len(), SQ_SIZE);
        assert!(walked.iter().all(|&i| q.get(i).is_some()));
        let mut slots: Vec<usize> = walked.iter().map(|&i| SendQueue::<u32>::slot(i)).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), SQ_SIZE);
    }

    /// The same indices the hand-written `while i != to` walk visits, for
    /// every pair of pointers around a wrap.
    #[test]
    fn indices_match_the_stepping_walk() {
        let base = u32::MAX - 5;
        for a in 0..12u32 {
            for b in 0..12u32 {
                let (from, to) = (base.wrapping_add(a), base.wrapping_add(b));
                if b < a {
                    // The long way round: only its ends are checked.
                    let mut it = indices(from, to);
                    assert_eq!(it.next(), Some(from));
                    assert_eq!(it.next_back(), Some(to.wrapping_sub(1)));
                    continue;
                }
                let mut stepped = Vec::new();
                let mut i = from;
                while i != to {
                    stepped.push(i);
                    i = i.wrapping_add(1);
                }
                assert_eq!(indices(from, to).collect::<Vec<_>>(), stepped);
            }
        }
    }

    /// The stepping walk `through` replaces, on `get`.
    fn stepped_through(q: &SendQueue<u32>, from: u32, to: u32) -> Vec<u32> {
        let mut v = Vec::new();
        let mut n = from;
        loop {
            v.push(n);
            if n == to || q.get(n.wrapping_add(1)).is_none() {
                break;
            }
            n = n.wrapping_add(1);
        }
        v
    }

    /// `through` stops at `to` (kept) or before the first slot not held,
    /// whichever comes first; `from` itself is always given.
    #[test]
    fn through_stops_at_its_end_or_the_first_empty_slot() {
        let mut q = emptied(3);
        for n in 0..5u32 {
            q.push(n, None);
        }
        // Held: 3..8.
        assert_eq!(q.through(4, 6).collect::<Vec<_>>(), [4, 5, 6]);
        assert_eq!(q.through(4, 4).collect::<Vec<_>>(), [4]);
        assert_eq!(q.through(4, 20).collect::<Vec<_>>(), [4, 5, 6, 7]);
        assert_eq!(q.through(9, 12).collect::<Vec<_>>(), [9]);
        // Just before the oldest slot: it is given, then the held ones.
        assert_eq!(q.through(2, 4).collect::<Vec<_>>(), [2, 3, 4]);
        // `to` trailing `from`: round to the head.
        assert_eq!(q.through(5, 4).collect::<Vec<_>>(), [5, 6, 7]);
        for from in 0..10u32 {
            for to in 0..10u32 {
                let got: Vec<u32> = q.through(from, to).collect();
                assert_eq!(got, stepped_through(&q, from, to), "{from}..={to}");
            }
        }
    }

    #[test]
    fn indices_wrap() {
        let mut q: SendQueue<u32> = SendQueue::new();
        for n in 0..100u32 {
            let i = q.push(n, None);
            assert_eq!(q.get(i), Some(&n));
            q.complete(i, WcStatus::Success);
            q.acked = q.head();
            q.cur = q.head();
            q.tail = q.head();
            assert_eq!(q.poll(), Some((n, WcStatus::Success)));
        }
        assert!(q.is_empty());
        assert_eq!(q.head(), 100);
        assert_eq!(q.get(q.head()), None);
    }
}
