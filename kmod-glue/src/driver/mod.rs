// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The driver platform: the engine's HAL traits implemented over the
//! driver's own structures, through the `#[repr(C)]` mirrors of
//! `hfi1_hal::layout` (checked against the kernel's headers at build
//! time).
//!
//! - [`ops`]: the driver's services (`struct hfi1_tid_drv_ops`) and the
//!   views of a QP and a context the C adapters fill;
//! - [`queues`]: a context's two wait queues as the driver keeps them
//!   (`rcd->flow_queue`, `rcd->rarr_queue`, each QP's `qpriv->tid_wait`),
//!   a `qp_wait::WaitStore`;
//! - [`ctxt`]: the flow bitmap and generations, the TID groups and their
//!   lists, the chip, and the context behind its own `exp_lock`
//!   (`tid_flow::Context`);
//! - [`qp`]: QP references, the QP's `s_lock`-guarded flags and flow
//!   state, the scheduler, DMA mapping;
//! - [`request`]: a request's flow ring and records, and its scatter-list
//!   walk;
//! - [`entry`]: the routed functions.
//!
//! # Locking
//!
//! Every view here is made by an `unsafe` constructor whose contract is
//! the driver's lock: a context's stores with its `exp_lock` held, a QP's
//! state and requests with its `s_lock` held, for as long as the view
//! lives. The entry points' table in [`entry`] says which lock each
//! routed function's caller holds.

pub mod ctxt;
pub mod entry;
pub mod list;
pub mod ops;
pub mod qp;
pub mod queues;
pub mod request;
