// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA READ: wire formats, OPFN, qualification, the requester and
//! responder paths, and error/restart handling.
//!
//! Not built yet: this crate arrives with the READ issue (SPEC §5
//! "tid-read-proto"). It exports nothing until then.
#![cfg_attr(not(test), no_std)]
