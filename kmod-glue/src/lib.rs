// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! C ABI and kernel platform: links the engine into a kernel module.
//!
//! Not built yet: this crate arrives with the kmod-glue issue. It exports
//! nothing until then.
#![cfg_attr(not(test), no_std)]
