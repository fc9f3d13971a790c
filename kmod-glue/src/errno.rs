// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Errors as the kernel spells them: negative errno values.
//!
//! The engine crates return typed errors; this is the one place that maps
//! them to the numbers a C caller compares with (`-EAGAIN` means "queued,
//! you will be woken", as in the C driver).

/// Kernel: `EINVAL`.
pub const EINVAL: i32 = 22;
/// Kernel: `EAGAIN`.
pub const EAGAIN: i32 = 11;
/// Kernel: `ENOMEM`.
pub const ENOMEM: i32 = 12;
/// Kernel: `EBUSY`.
pub const EBUSY: i32 = 16;
/// Kernel: `ENOSPC`.
pub const ENOSPC: i32 = 28;
/// Kernel: `EPROTO`.
pub const EPROTO: i32 = 71;
/// Kernel: `EBADMSG`.
pub const EBADMSG: i32 = 74;
/// Kernel: `EMSGSIZE`.
pub const EMSGSIZE: i32 = 90;

/// An error on its way to C: holds the positive errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(i32);

impl Errno {
    /// Invalid argument (null handle, out-of-range value).
    pub const INVAL: Self = Self(EINVAL);
    /// Resource busy or exhausted: the caller was queued.
    pub const AGAIN: Self = Self(EAGAIN);
    /// An allocation failed.
    pub const NOMEM: Self = Self(ENOMEM);
    /// The object is still in use.
    pub const BUSY: Self = Self(EBUSY);
    /// No room: the send queue is full.
    pub const NOSPC: Self = Self(ENOSPC);
    /// A packet of another kind than the entry handles.
    pub const PROTO: Self = Self(EPROTO);
    /// A packet that does not parse.
    pub const BADMSG: Self = Self(EBADMSG);
    /// A packet that could not be built into the buffer.
    pub const MSGSIZE: Self = Self(EMSGSIZE);

    /// The value a C function returns: `-errno`.
    pub const fn to_neg(self) -> i32 {
        -self.0
    }
}

impl From<hfi1_hal::FieldError> for Errno {
    fn from(_: hfi1_hal::FieldError) -> Self {
        Self::INVAL
    }
}

/// Turns a `Result` into the C convention: `0` or `-errno`.
pub fn ret(r: Result<(), Errno>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_neg(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_errno() {
        assert_eq!(ret(Err(Errno::AGAIN)), -11);
        assert_eq!(ret(Err(Errno::INVAL)), -22);
        assert_eq!(ret(Err(Errno::NOMEM)), -12);
        assert_eq!(ret(Ok(())), 0);
    }
}
