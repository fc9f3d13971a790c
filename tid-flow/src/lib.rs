// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Hardware flows and generations, the per-request flow ring, segment setup
//! and teardown (`exp_rcv_setup`/`exp_rcv_clear`), and the receive context
//! that owns `exp_lock`.
//!
//! Not built yet: this crate arrives with the lock-order issue (SPEC §5
//! "tid-flow"). It exports nothing until then.
#![cfg_attr(not(test), no_std)]
