// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's READ_REQ handling and READ_RESP engine on live QP state,
//! fed real READ_REQs in any order plus byte-mutated and raw ones.
//! No panic, no leak, and the invariants of `tid_harness::fuzz` hold
//! after every step; destroying the QPs gives every resource back (a
//! forged READ_REQ may take a PSN the requester then waits on, so
//! completion of every request is not required here).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tid_harness::fuzz::run(tid_harness::fuzz::Mode::ResponderRx, data);
});
