// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! C ABI and kernel platform: links the TID RDMA engine into a kernel module.
//!
//! A C driver (the self-test module under `kbuild/`, or the rebuilt
//! `hfi1.ko` under `hfi1/`) sees only the functions of [`abi`], declared in
//! `include/hfi1_tid.h`; a test in `tests/header.rs` parses that header and
//! compares it with the Rust definitions. Every object crossing the boundary
//! is either a plain integer, a `#[repr(C)]` struct, or an opaque handle
//! that only this crate dereferences. Errors are negative errno values
//! ([`errno`]); this is the only crate of the workspace that knows them.
//!
//! The kernel platform lives in C (`kbuild/glue.c`): spinlocks, the
//! workqueue, QP references, `kmalloc`/`kfree`, DMA mapping and CSR writes
//! reach Rust as callbacks (the registered services table of `kplat`, with
//! feature `engine`, and [`chip::ChipOps`]) or as the few `hfi1_tid_*`
//! symbols the kernel-only module `kernel` imports (allocator, panic).
//! That module only exists for `target_os = "none"`, so the host builds,
//! lints and tests everything else. Without features the crate is what
//! the rebuilt `hfi1.ko` links: no simulator, harness or self-test code.
//!
//! # Example
//!
//! What the rebuilt `hfi1.ko` calls instead of the driver's own code, as C
//! calls it: `hfi1_kern_reserve_flow()`'s bitmap step under `exp_lock`
//! (reuse the QP's last flow if free, else the lowest free one, else
//! `-EAGAIN`), and the flow generation's step over the reserved value.
//!
//! ```
//! use kmod_glue::abi::hfi1_tid_generation_next;
//! use kmod_glue::errno::EAGAIN;
//! use kmod_glue::route::hfi1_tid_flow_reserve;
//!
//! let mut mask: u32 = 0b1; // flow 0 in use
//! // SAFETY: `mask` is a live u32 for the whole call.
//! assert_eq!(unsafe { hfi1_tid_flow_reserve(&mut mask, 5) }, 5); // the QP's last flow
//! assert_eq!(unsafe { hfi1_tid_flow_reserve(&mut mask, -1) }, 1); // the lowest free
//! mask = u32::MAX;
//! assert_eq!(unsafe { hfi1_tid_flow_reserve(&mut mask, 3) }, -EAGAIN);
//! // 0xFFFFF is the reserved generation: the step skips it.
//! assert_eq!(hfi1_tid_generation_next(0xFFFFE), 0);
//! ```
//!
//! # Locking
//!
//! The routed stateless functions (`route.rs`, `abi.rs`) take no lock and
//! say which lock of the driver's their caller holds (`exp_lock` for
//! `hfi1_tid_flow_reserve`). On the engine's own objects (feature
//! `engine`, the self-test module), every entry point that works on a QP's
//! state is called with that QP's `s_lock` held and takes the context's
//! `exp_lock` inside; only the trigger work (`hfi1_tid_trigger_resume`)
//! and `hfi1_tid_qp_waiting` take the `s_lock` themselves. Each function's
//! `# Locking` section, and the README's tables, say which.
//!
//! # Panics
//!
//! None of the exported functions can panic on any input: the crate denies
//! `unwrap`, `expect`, `panic!` and slice indexing outside tests (as every
//! library crate of the workspace does), null and out-of-range arguments
//! come back as `-EINVAL`, and arithmetic on caller values is checked or
//! wrapping. Should a bug panic anyway, the kernel panic handler prints the
//! message and BUGs, as Rust-for-Linux does.
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

extern crate alloc;

pub mod abi;
pub mod chip;
pub mod driver;
#[cfg(feature = "engine")]
pub mod engine;
pub mod errno;
#[cfg(target_os = "none")]
pub mod kernel;
#[cfg(feature = "engine")]
pub mod kplat;
#[cfg(feature = "lockdep-demo")]
pub mod lockdep_demo;
#[cfg(feature = "engine")]
pub mod proto;
#[cfg(feature = "selftest")]
pub mod prototest;
#[cfg(feature = "engine")]
pub mod qp;
pub mod route;
#[cfg(feature = "selftest")]
pub mod waittest;
