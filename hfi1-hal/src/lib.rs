// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Hardware abstraction for the hfi1 TID RDMA engine.
//!
//! This crate is the floor every other crate of the workspace stands on:
//!
//! - [`consts`]: the numbers of the driver (page size, group size, flows per
//!   context, KDETH sequence width, opcodes, QP flags), with compile-time
//!   checks where the C driver uses `BUILD_BUG_ON`;
//! - [`fields`]: typed register and header words ([`TidEntry`],
//!   [`FlowTableReg`], [`Kdeth0`], [`Kdeth1`]) with checked constructors;
//! - [`psn`]: 31-bit IB PSN arithmetic ([`Psn`]) and the flow PSN
//!   ([`FlowPsn`], [`Generation`]);
//! - [`layout`]: the driver's structures and shared values as one table,
//!   with `#[repr(C)]` mirrors, checked against the kernel's headers at
//!   build time through `kmod-glue`;
//! - [`platform`]: the traits the engine drives the chip through (the
//!   RcvArray and the flow table); [`services`]: QP references,
//!   scheduling, DMA mapping, memory, random numbers;
//! - [`rnr`]: the TID WRITE responder's RNR wait at the port's link rate;
//! - [`timers`]: the four timers of a QP (RC retry, RNR, TID retry,
//!   reap) as a service the engines arm and cancel;
//! - [`lock_order`]: the driver's lock order as types (levels, tokens,
//!   [`lock_order::Lock`] and its guards, the guard over a lock the caller
//!   holds); [`sync`]: atomics and the host/loom spin-lock backend;
//! - `sim` (feature `sim`): a software chip that implements the platform
//!   traits, keeps the register state and records every call in order;
//!   with `std`, the runtime lock-order checker (`sim::lockdep`), the sim
//!   platform's lock backend.
//!
//! The crate is `no_std`; the `sim` feature needs `alloc` only.
//!
//! # Example
//!
//! The words the engine writes, typed (SPEC §3), and the lock order as
//! the compiler sees it (SPEC §4): `exp_lock` opens only with the token
//! of a held `s_lock`.
//!
//! ```
//! use hfi1_hal::lock_order::{ExpLock, Lock, LockToken, SLock};
//! use hfi1_hal::sync::SpinLock;
//! use hfi1_hal::{FlowPsn, FlowTableReg, Generation, TidCtrl, TidEntry};
//!
//! // A TID entry for an entry pair at pair index 3, 2 pages: IDX, CTRL, LEN.
//! let e = TidEntry::new(3, TidCtrl::Pair, 2).unwrap();
//! assert_eq!(e.raw(), 3 << 22 | 3 << 20 | 2);
//! // A flow register set up for generation 5 expects flow PSN 5 << 11.
//! let g = Generation::new(5).unwrap();
//! let reg = FlowTableReg::for_generation(g);
//! assert_eq!(reg.next_psn(), FlowPsn::new(g, 0));
//! assert!(reg.has(FlowTableReg::FLOW_VALID) && reg.has(FlowTableReg::HDR_SUPP_EN));
//!
//! let s_lock: Lock<SLock, SpinLock, u32> = Lock::new(1);
//! let exp_lock: Lock<ExpLock, SpinLock, u32> = Lock::new(2);
//! let mut root = LockToken::root();
//! let mut s = s_lock.lock(&mut root);
//! let exp = exp_lock.lock(s.token());
//! assert_eq!(*exp, 2);
//! // `s_lock.lock(exp.token())` would not compile: no edge back.
//! ```
//!
//! # Locking
//!
//! Nothing here takes a lock of the order on its own. The contracts the
//! other crates rely on:
//!
//! | item | called with |
//! |---|---|
//! | [`RcvArray`], [`FlowTable`] methods | the receive context's `exp_lock` held (the chip is part of its guarded state) |
//! | [`services::Scheduler::schedule_send`] | the QP's `s_lock` held |
//! | [`services::TidScheduler::schedule_tid_send`] | the QP's `s_lock` held |
//! | [`timers::QpTimers::arm`], [`timers::QpTimers::cancel`] | the QP's `s_lock` held |
//! | [`timers::QpTimers::cancel_sync`] | no lock of the order (the root token) |
//! | [`services::Scheduler::queue_trigger`], [`services::DmaMap`], [`services::Memory`] | any lock (they never take one of the order) |
//! | [`lock_order::Lock::lock`] | a token of a level the lock may follow (checked at compile time) |
//! | [`lock_order::Lock::assume_held`] | the lock already held by the caller (`unsafe`; asserted by the backend) |
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

// `services::try_fill_vec` (fallible tables) and the `sim` feature.
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod consts;
pub mod fields;
pub mod flags;
pub mod layout;
pub mod lock_order;
pub mod platform;
pub mod psn;
pub mod rnr;
pub mod services;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sync;
pub mod timers;

pub use fields::{FieldError, FlowIndex, FlowTableReg, Kdeth0, Kdeth1, TidCtrl, TidEntry};
pub use platform::{FlowTable, RcvArray, RcvType};
pub use psn::{FlowPsn, Generation, Psn};
