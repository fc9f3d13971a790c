// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's send queue of posted READs, and the window of segments
//! the responder's ack queue must still hold.

use arrayvec::ArrayVec;
use hfi1_hal::Psn;
use tid_flow::FlowPlatform;

use super::WorkRequest;
use crate::rc::{MAX_RD_ATOMIC, SQ_SIZE};

/// The send queue: posted READs from `head` (oldest) to `tail`; `cur` is
/// the first with a segment left to send. Kernel: `qp->s_wq` with
/// `s_last`, `s_cur`, `s_head`.
pub(super) struct SendQueue<P: FlowPlatform> {
    slots: [Option<WorkRequest<P>>; SQ_SIZE],
    pub(super) head: u32,
    pub(super) cur: u32,
    pub(super) tail: u32,
}

impl<P: FlowPlatform> SendQueue<P> {
    /// An empty queue.
    pub(super) fn new() -> Self {
        Self {
            slots: core::array::from_fn(|_| None),
            head: 0,
            cur: 0,
            tail: 0,
        }
    }

    fn slot(i: u32) -> usize {
        i as usize % SQ_SIZE
    }

    pub(super) fn len(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    pub(super) fn get(&self, i: u32) -> Option<&WorkRequest<P>> {
        self.slots.get(Self::slot(i)).and_then(Option::as_ref)
    }

    pub(super) fn get_mut(&mut self, i: u32) -> Option<&mut WorkRequest<P>> {
        self.slots.get_mut(Self::slot(i)).and_then(Option::as_mut)
    }

    /// The posted READs, oldest first, with their queue positions.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &WorkRequest<P>)> {
        let head = self.head;
        (0..self.len())
            .map(move |n| head.wrapping_add(n))
            .filter_map(|i| self.get(i).map(|w| (i, w)))
    }

    /// The posted READs, oldest first, mutably, with their positions.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut WorkRequest<P>)> {
        let (head, len) = (self.head, self.len() as usize);
        let (before, from) = self
            .slots
            .split_at_mut_checked(Self::slot(head))
            .unwrap_or((&mut [], &mut []));
        from.iter_mut()
            .chain(before.iter_mut())
            .take(len)
            .zip(0u32..)
            .filter_map(move |(s, n)| s.as_mut().map(|w| (head.wrapping_add(n), w)))
    }

    pub(super) fn push(&mut self, w: WorkRequest<P>) {
        if let Some(s) = self.slots.get_mut(Self::slot(self.tail)) {
            *s = Some(w);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// The oldest READ if it is done; it leaves the queue.
    pub(super) fn pop_done(&mut self) -> Option<WorkRequest<P>> {
        if self.head == self.cur || !self.get(self.head).is_some_and(WorkRequest::done) {
            return None;
        }
        let w = self
            .slots
            .get_mut(Self::slot(self.head))
            .and_then(Option::take);
        self.head = self.head.wrapping_add(1);
        w
    }

    /// Empties the queue, oldest first; `f` gets each READ and whether it
    /// was the oldest.
    pub(super) fn drain(&mut self, mut f: impl FnMut(bool, WorkRequest<P>)) {
        let (head, len) = (self.head, self.len());
        self.head = self.tail;
        self.cur = self.tail;
        for i in (0..len).map(|n| head.wrapping_add(n)) {
            if let Some(w) = self.slots.get_mut(Self::slot(i)).and_then(Option::take) {
                f(i == head, w);
            }
        }
    }

    /// Sending resumes at `i` if that is earlier than where it stands.
    pub(super) fn rewind_to(&mut self, i: u32) {
        if i.wrapping_sub(self.head) < self.cur.wrapping_sub(self.head) {
            self.cur = i;
        }
    }
}

/// The segments the responder's ack queue must still hold, oldest first,
/// as (last IB PSN, completed). Segments complete out of order across
/// requests, but the responder's ring of `MAX_RD_ATOMIC + 1` entries holds
/// everything from the oldest unfinished one to the newest: a new segment
/// waits while this window is full, so the ring never wraps over an entry
/// a restart still needs.
#[derive(Debug, Default)]
pub(super) struct AckWindow(ArrayVec<(Psn, bool), { MAX_RD_ATOMIC as usize }>);

impl AckWindow {
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// A segment ending at `lpsn` was sent (room was checked).
    pub(super) fn push(&mut self, lpsn: Psn) {
        let _ = self.0.try_push((lpsn, false));
    }

    /// The segment ending at `lpsn` completed. Returns the new last
    /// acknowledged PSN if the oldest segments are now all complete.
    pub(super) fn complete(&mut self, lpsn: Psn) -> Option<Psn> {
        if let Some(e) = self.0.iter_mut().find(|e| e.0 == lpsn) {
            e.1 = true;
        }
        let mut last = None;
        while let Some(e) = self.0.first().copied().filter(|e| e.1) {
            self.0.pop_at(0);
            last = Some(e.0);
        }
        last
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}
