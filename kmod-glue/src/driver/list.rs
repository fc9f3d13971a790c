// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The kernel's circular doubly linked list (`include/linux/list.h`) on
//! the `struct list_head` mirror: the few operations the driver's queue
//! and group helpers use, with the kernel's semantics.
//!
//! # Locking
//!
//! None of its own: every function works on a list the caller has locked
//! (the `# Safety` sections say so).

use core::ptr;

use hfi1_hal::layout::CListHead;

/// True if the list at `head` has no entry (or `head` is an entry linked
/// to nothing). Kernel: `list_empty()`.
///
/// # Safety
///
/// `head` points to an initialised `list_head` the caller may read.
pub unsafe fn is_empty(head: *const CListHead) -> bool {
    // SAFETY: readable, by the caller.
    ptr::eq(unsafe { (*head).next }, head)
}

/// Links `new` before `head`, at the list's tail. Kernel:
/// `list_add_tail()`.
///
/// # Safety
///
/// `new` and `head` point to initialised `list_head`s the caller may
/// write; `new` is on no list; the list at `head` is well formed.
pub unsafe fn add_tail(new: *mut CListHead, head: *mut CListHead) {
    // SAFETY: all four links are initialised and writable (the caller).
    unsafe {
        let prev = (*head).prev;
        (*new).next = head;
        (*new).prev = prev;
        (*prev).next = new;
        (*head).prev = new;
    }
}

/// Unlinks `entry` and makes it an empty list of its own. Kernel:
/// `list_del_init()`.
///
/// # Safety
///
/// `entry` points to an initialised `list_head` on a well-formed list the
/// caller may write (or to an empty one of its own).
pub unsafe fn del_init(entry: *mut CListHead) {
    // SAFETY: `entry` and its neighbours are initialised and writable.
    unsafe {
        let (prev, next) = ((*entry).prev, (*entry).next);
        (*next).prev = prev;
        (*prev).next = next;
        (*entry).next = entry;
        (*entry).prev = entry;
    }
}

/// The first entry of the list at `head`, or `None` if it is empty.
/// Kernel: `list_first_entry_or_null()` (before `container_of`).
///
/// # Safety
///
/// As [`is_empty`].
pub unsafe fn first(head: *const CListHead) -> Option<*mut CListHead> {
    // SAFETY: readable, by the caller.
    let next = unsafe { (*head).next };
    (!ptr::eq(next, head)).then_some(next)
}

/// Which of `heads` the list holding `entry` belongs to: follows `next`
/// from `entry` until it reaches one of them (at most `limit` steps; a
/// list is never that long, so `None` means `entry` is on none of them).
///
/// # Safety
///
/// `entry` points to an initialised `list_head` on a well-formed list the
/// caller may read.
pub unsafe fn which_head(
    entry: *const CListHead,
    heads: &[*const CListHead],
    limit: usize,
) -> Option<usize> {
    let mut at = entry;
    for _ in 0..limit {
        // SAFETY: every node of a well-formed list is readable.
        at = unsafe { (*at).next };
        if ptr::eq(at, entry) {
            return None;
        }
        if let Some(i) = heads.iter().position(|h| ptr::eq(*h, at)) {
            return Some(i);
        }
    }
    None
}

/// An empty list head pointing at itself. Kernel: `INIT_LIST_HEAD()`.
///
/// # Safety
///
/// `head` is valid for writes.
pub unsafe fn init(head: *mut CListHead) {
    // SAFETY: writable, by the caller.
    unsafe {
        (*head).next = head;
        (*head).prev = head;
    }
}
