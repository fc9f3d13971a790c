// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The crate's error type.

/// Everything that can go wrong in this crate. `kmod-glue` maps these to
/// errno values; [`AllocError::NoSpace`] is the driver's `-EAGAIN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// More pages than one segment can hold (64).
    #[error("{0} pages exceed the 64-page segment limit")]
    TooManyPages(usize),
    /// A page address of 0: the driver uses NULL as its end-of-list
    /// sentinel, so such a page cannot be described (quirk 1e).
    #[error("page {index} has address 0")]
    NullPage {
        /// Index of the page in the segment.
        index: usize,
    },
    /// A page address with some of its low 12 bits set.
    #[error("page {index} address {addr:#x} is not page aligned")]
    UnalignedPage {
        /// Index of the page in the segment.
        index: usize,
        /// The rejected address.
        addr: u64,
    },
    /// A page range outside the page list or the 64-page segment.
    #[error("page range outside the segment")]
    PageRange,
    /// More than 64 page sets (given, or produced).
    #[error("more than 64 page sets")]
    TooManyPageSets,
    /// An allocation for zero page sets.
    #[error("no page sets to allocate")]
    NoPageSets,
    /// An odd number of page sets: TID entries name RcvArray entries in
    /// pairs, and the driver warns about this (quirk 3); we refuse it.
    #[error("odd number of page sets ({0})")]
    OddPageSets(usize),
    /// A page set whose count is neither 0 nor a power of two of at most
    /// 512 pages.
    #[error("page set {index} has count {count}, which the RcvArray cannot map")]
    BadPageSet {
        /// Index of the set.
        index: usize,
        /// Its count.
        count: u16,
    },
    /// A path MTU below one page (the packet count would divide by zero).
    #[error("path MTU {0} is below 4096")]
    BadPmtu(u32),
    /// An expected base that is not a multiple of the group size, or whose
    /// groups would run past the end of the 32-bit RcvArray index space.
    #[error("expected base {0:#x} is not usable")]
    BadBase(u32),
    /// A group count of 0 or above [`hfi1_hal::consts::MAX_TID_GROUPS`].
    #[error("{0} TID groups (1..=256 allowed)")]
    BadGroupCount(usize),
    /// The group tables could not be allocated. Kernel: the `-ENOMEM` of
    /// `hfi1_alloc_ctxt_rcv_groups()`.
    #[error("out of memory for the TID group tables")]
    NoMemory,
    /// Not enough free RcvArray entries: nothing was changed. Kernel: the
    /// `-EAGAIN` of `kern_alloc_tids()`.
    #[error("not enough free RcvArray entries")]
    NoSpace,
    /// The allocation was made by another `TidGroups` (or is an empty
    /// default value).
    #[error("allocation belongs to another receive context")]
    Foreign,
    /// The allocation no longer matches the groups: programmed after other
    /// changes, or released twice, or released without being programmed.
    #[error("allocation is stale")]
    Stale,
    /// `program` got a different number of page sets than `allocate`.
    #[error("allocation is for {expected} page sets, got {got}")]
    SetCountMismatch {
        /// Sets the allocation was made for.
        expected: usize,
        /// Sets passed to `program`.
        got: usize,
    },
}
