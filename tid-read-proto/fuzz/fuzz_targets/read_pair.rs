// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A live requester and responder exchanging only real packets, on a
//! schedule the input picks: drops, duplicates, reordering, stale replays,
//! retry-timer expiries.
//! No panic, no leak, and the invariants of `tid_harness::fuzz` hold
//! after every step; at the end every request completed and destroying the QPs gives
//! every resource back.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tid_harness::fuzz::run(tid_harness::fuzz::Mode::Pair, data);
});
