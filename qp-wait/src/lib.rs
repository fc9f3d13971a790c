// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The two wait queues of a receive context (flow queue and RcvArray queue),
//! their wake-ups and the QP references they hold.
//!
//! Not built yet: this crate arrives with the lock-order issue (SPEC §4 and
//! §5 "qp-wait"). It exports nothing until then.
#![cfg_attr(not(test), no_std)]
