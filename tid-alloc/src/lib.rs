// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Pagesets and TID groups.
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
#![forbid(unsafe_code)]

mod error;
pub mod groups;
pub mod pageset;

pub use error::AllocError;
pub use groups::{
    GroupList, GroupView, ListIter, Programmed, TidAlloc, TidGroups, TidNode, TidNodeInfo,
};
pub use pageset::{
    PageSet, PageSets, find_phys_blocks, find_phys_blocks_4k, find_phys_blocks_4k_into,
    find_phys_blocks_8k, find_phys_blocks_8k_into, find_phys_blocks_into, flush_pages,
};
