// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The driver platform: the engine's HAL traits implemented over the
//! driver's own structures, through the `#[repr(C)]` mirrors of
//! `hfi1_hal::layout` (checked against the kernel's headers at build
//! time).
//!
//! - [`queues`]: a context's two wait queues as the driver keeps them
//!   (`rcd->flow_queue`, `rcd->rarr_queue`, each QP's `qpriv->tid_wait`),
//!   a `qp_wait::WaitStore`.
//!
//! # Locking
//!
//! Every view here is made by an `unsafe` constructor whose contract is
//! the driver's lock: a context's queues with its `exp_lock` held, for as
//! long as the view lives.

pub mod list;
pub mod queues;
