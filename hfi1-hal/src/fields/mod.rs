// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Typed register and header words (SPEC §3).
//!
//! Every type is a transparent wrapper over the raw word. Constructors that
//! take field values check them and return [`FieldError`] instead of
//! silently truncating; `from_raw` accepts any word (every bit pattern is a
//! value the hardware or the wire can produce) and the accessors mask.
//!
//! - RcvArray TID entries ([`TidCtrl`], [`TidEntry`]): what a requester
//!   names the responder's buffers by.
//! - Hardware flows ([`FlowIndex`], [`FlowTableReg`]): a receive
//!   context's flow-table registers.
//! - KDETH header words ([`Kdeth0`], [`Kdeth0Fields`], [`Kdeth1`]).

mod flow;
mod kdeth;
mod tid;

pub use flow::{FlowIndex, FlowTableReg};
pub use kdeth::{Kdeth0, Kdeth0Fields, Kdeth1};
pub use tid::{TidCtrl, TidEntry};

/// A field value did not fit its bit width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{field} = {value:#x} does not fit in {bits} bits")]
pub struct FieldError {
    /// Name of the field.
    pub field: &'static str,
    /// The rejected value.
    pub value: u64,
    /// Width of the field in bits.
    pub bits: u32,
}

/// Checks that `value` fits in `bits` bits.
const fn fit(field: &'static str, value: u64, bits: u32) -> Result<u64, FieldError> {
    if value >> bits == 0 {
        Ok(value)
    } else {
        Err(FieldError { field, value, bits })
    }
}

/// Extracts `bits` bits at `shift` from a 32-bit word.
const fn get32(w: u32, shift: u32, bits: u32) -> u32 {
    (w >> shift) & ((1u32 << bits) - 1)
}
