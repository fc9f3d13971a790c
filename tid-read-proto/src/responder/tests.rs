// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The ack-queue walks: empty, wrapping and full, and each checked
//! against a plain index loop as the reference.

use super::*;

#[test]
fn a_walk_from_a_slot_to_itself_is_empty() {
    for j in 0..ACK_QUEUE_SIZE {
        assert_eq!(Responder::slots(j, j).count(), 0);
    }
}

#[test]
fn a_walk_wraps_past_the_last_slot() {
    let last = ACK_QUEUE_SIZE - 1;
    let got: Vec<usize> = Responder::slots(last - 1, 2).collect();
    assert_eq!(got, [last - 1, last, 0, 1]);
}

/// From the slot after the head round to the head: every other slot,
/// each once, oldest-to-newest.
#[test]
fn a_walk_round_to_the_head_passes_every_other_slot() {
    for head in 0..ACK_QUEUE_SIZE {
        let got: Vec<usize> = Responder::slots(Responder::next(head), head).collect();
        let want: Vec<usize> = (1..ACK_QUEUE_SIZE)
            .map(|k| (head + k) % ACK_QUEUE_SIZE)
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn a_walk_back_wraps_below_slot_zero() {
    let last = ACK_QUEUE_SIZE - 1;
    let got: Vec<usize> = Responder::slots_back(1, last - 1).collect();
    assert_eq!(got, [1, 0, last]);
    assert_eq!(Responder::slots_back(4, 4).count(), 0);
}

/// From the slot before the head back round to the head: every other
/// slot, newest first.
#[test]
fn a_walk_back_round_to_the_head_passes_every_other_slot() {
    for head in 0..ACK_QUEUE_SIZE {
        let mut got: Vec<usize> = Responder::slots_back(Responder::prev(head), head).collect();
        got.reverse();
        let want: Vec<usize> = Responder::slots(Responder::next(head), head).collect();
        assert_eq!(got, want);
    }
}

/// `find_prev_entry` as the stepping loop wrote it.
fn find_prev_entry_stepped(r: &Responder, psn: Psn) -> (Option<usize>, usize, bool) {
    let mut scheduled = true;
    let mut i = r.head;
    loop {
        if i == r.tail {
            scheduled = false;
        }
        let p = Responder::prev(i);
        if p == r.head {
            return (None, p, scheduled);
        }
        let Some(e) = r.ack.get(p).filter(|e| e.kind.is_some()) else {
            return (None, p, scheduled);
        };
        if psn.delta(e.psn) >= 0 {
            if p == r.tail && psn.delta(e.lpsn) <= 0 {
                scheduled = false;
            }
            return (Some(p), p, scheduled);
        }
        i = p;
    }
}

/// Every head, send pointer and fill of the queue (up to full, every
/// slot but the head's and the whole ring), for PSNs before, inside,
/// between and after the entries: the same answer as the stepping loop.
#[test]
fn find_prev_entry_walks_back_as_the_stepping_loop() {
    for head in 0..ACK_QUEUE_SIZE {
        for filled in 0..=ACK_QUEUE_SIZE {
            let mut r = Responder::new(Psn::new(0));
            // The newest entry sits just before the head, PSNs falling
            // backwards by 10 with 4 packets each.
            for (k, j) in Responder::slots_back(Responder::prev(head), head)
                .chain(core::iter::once(head))
                .take(filled)
                .enumerate()
            {
                let first = 1000 - 10 * k as u32;
                if let Some(e) = r.ack.get_mut(j) {
                    e.kind = Some(EntryKind::Plain);
                    e.psn = Psn::new(first);
                    e.lpsn = Psn::new(first + 3);
                }
            }
            r.head = head;
            for tail in 0..ACK_QUEUE_SIZE {
                r.tail = tail;
                for psn in (800..1010).step_by(3) {
                    let psn = Psn::new(psn);
                    assert_eq!(
                        r.find_prev_entry(psn),
                        find_prev_entry_stepped(&r, psn),
                        "head {head} filled {filled} tail {tail} psn {psn:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_walk_stays_ended() {
    let mut w = Responder::slots(3, 4);
    assert_eq!((w.next(), w.next(), w.next()), (Some(3), None, None));
}
