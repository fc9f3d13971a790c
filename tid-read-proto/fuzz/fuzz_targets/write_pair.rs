// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA WRITEs (and READs) between a live requester node and a live
//! responder node exchanging only real packets, on a schedule the input
//! picks: both nodes' first and second legs and trigger work, drops,
//! duplicates, reordering, stale replays, the RC retry, RNR, TID retry
//! and reap timers, and a responder context with room for one segment at
//! a time.
//! No panic, no leak, and the invariants of `tid_harness::fuzz` hold
//! after every step; at the end every WRITE completed (with the source's
//! bytes in the responder's pages, or a failure the schedule explains) and
//! destroying the QPs gives every resource back.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tid_harness::fuzz::run(tid_harness::fuzz::Mode::WritePair, data);
});
