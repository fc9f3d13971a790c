// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester's receive paths (READ_RESP through the software chip,
//! ACK/NAK) on live QP state, fed real packets in any order plus byte-
//! mutated and raw packets.
//! No panic, no leak, and the invariants of `tid_harness::fuzz` hold
//! after every step; at the end every request completed and destroying the QPs gives
//! every resource back.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tid_harness::fuzz::run(tid_harness::fuzz::Mode::RequesterRx, data);
});
