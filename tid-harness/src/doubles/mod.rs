// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The test doubles every harness shares: the responder's memory regions
//! (a counted [`MrTable`] and the [`SourceData`] behind it, and the
//! remote-writable regions over scattered pages a TID WRITE lands in,
//! [`WriteRegions`]), the data pattern they serve, a [`PacketSink`] that
//! keeps what an engine sent, and a page allocator for both nodes' pages.
//!
//! One file each: [`Regions`] and its region types (`regions.rs`), the
//! pattern ([`pattern`], [`fill_pattern`], [`mismatched_bytes`]), the
//! [`Outbox`], and the pages ([`PageAllocator`], [`map`], [`fill_data`],
//! [`check_data`]).

#[cfg(doc)]
use tid_read_proto::rc::{MrTable, PacketSink, SourceData};
#[cfg(doc)]
use tid_read_proto::write::WriteRegions;

mod outbox;
mod pages;
mod pattern;
mod regions;

pub use outbox::Outbox;
pub use pages::{
    DataCheck, MemSource, PageAllocator, check_data, fill_data, map, pfns, unmap, wipe,
};
pub use pattern::{fill_pattern, mismatched_bytes, pattern, pattern_word};
pub use regions::{Region, Regions, WritableRegion};
