// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Wire formats of TID RDMA READ packets (SPEC §3), smoltcp style.
//!
//! A 9B packet on the wire is
//!
//! ```text
//! | LRH 8 | BTH 12 | KDETH 8 | RETH 16 or AETH 4 + 16 | 3 or 2 words | payload | ICRC 4 |
//!         \------------- READ_REQ / READ_RESP header (36 bytes) ----/
//! ```
//!
//! Each layer has a zero-copy view `Packet<T: AsRef<[u8]>>` over the bytes
//! that start with its header (the LRH view covers the whole packet, ICRC
//! included; the BTH view covers what follows the LRH; the READ_REQ and
//! READ_RESP views cover what follows the BTH) and a separate `Repr` that
//! `parse`s a checked view into plain typed values and `emit`s them back.
//! The fixed headers are `zerocopy` structs with big- or little-endian field
//! types, so no offset is computed by hand; each file's private `mod field`
//! derives its byte ranges from those structs.
//!
//! # Panic contract
//!
//! `new_checked` (or `check_len` after `new_unchecked`) verifies that the
//! buffer holds the whole header. **After `check_len` succeeds no accessor
//! panics.** In fact no accessor panics at all: a view built with
//! `new_unchecked` over a too-short buffer reads zeros and its setters do
//! nothing, so fuzzed input can never bring the kernel down.
//!
//! `Repr::parse` is strict where the driver is lenient, with one exception:
//! a reserved bit that is set, or a value wider than the typed field that
//! holds it, is [`Error::Malformed`], so that `parse` followed by `emit`
//! reproduces the header bytes exactly (the fuzz targets check this). The
//! exception is the reserved *words* of the TID RDMA headers the Linux
//! driver never writes (READ_RESP, WRITE_REQ, WRITE_DATA, RESYNC, ACK):
//! a Linux peer sends whatever its header buffer held there, and the
//! kernel's receiver ignores them, so `parse` ignores them too and `emit`
//! writes them zero (the fuzz targets of those headers check every other
//! byte).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Declares a layer's view `Packet<T>` over a buffer that starts with a
/// fixed-length header: the struct (documented by the attributes given) and
/// `new_unchecked`, `new_checked`, `check_len` (the buffer holds at least
/// the module's `HEADER_LEN` bytes), `into_inner`, and the private
/// `header()` that reads the module's `Header` (zeros when too short, per
/// the panic contract). Each layer adds its own accessors in a second
/// `impl` block.
macro_rules! fixed_header_view {
    ($(#[$meta:meta])*) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wraps a buffer without checking it.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps a buffer and checks it with [`Self::check_len`].
            pub fn new_checked(buffer: T) -> $crate::wire::Result<Self> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// Checks that the buffer holds the whole fixed header.
            pub fn check_len(&self) -> $crate::wire::Result<()> {
                if self.buffer.as_ref().len() < HEADER_LEN {
                    Err($crate::wire::Error::Truncated)
                } else {
                    Ok(())
                }
            }

            /// Gives the buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            fn header(&self) -> &Header {
                $crate::wire::view(self.buffer.as_ref()).unwrap_or(&Header::ZERO)
            }
        }
    };
}

pub mod aeth;
pub mod bth;
pub mod class;
pub mod erf;
pub mod frame;
pub mod icrc;
pub mod kdeth;
pub mod lrh;
pub mod read_req;
pub mod read_resp;
pub mod resync;
pub mod reth;
pub mod tid_ack;
pub mod tid_entries;
pub mod tid_header;
pub mod write_data;
pub mod write_req;
pub mod write_resp;

/// Why a buffer could not be read or written as a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header (or than the length the
    /// header claims).
    #[error("buffer too short")]
    Truncated,
    /// A field holds a value the format does not allow (reserved bits set,
    /// a length that is not a whole number of words, a value too wide for
    /// its field).
    #[error("malformed {0}")]
    Malformed(&'static str),
}

/// Result of a wire operation.
pub type Result<T> = core::result::Result<T, Error>;

/// Reads a fixed header from the start of `buf`, or `None` if too short.
pub(crate) fn view<H>(buf: &[u8]) -> Option<&H>
where
    H: FromBytes + KnownLayout + Immutable + Unaligned,
{
    H::ref_from_prefix(buf).ok().map(|(h, _)| h)
}

/// Mutable counterpart of [`view`].
pub(crate) fn view_mut<H>(buf: &mut [u8]) -> Option<&mut H>
where
    H: FromBytes + IntoBytes + KnownLayout + Unaligned,
{
    H::mut_from_prefix(buf).ok().map(|(h, _)| h)
}

/// The byte range of a field of a `#[repr(C)]` header struct.
macro_rules! field_range {
    ($ty:ty, $field:ident, $fty:ty) => {
        core::mem::offset_of!($ty, $field)
            ..core::mem::offset_of!($ty, $field) + core::mem::size_of::<$fty>()
    };
}
pub(crate) use field_range;

/// Checks that `v` fits in `bits` bits, naming the field otherwise.
pub(crate) const fn fits(v: u64, bits: u32, what: &'static str) -> Result<()> {
    if v >> bits == 0 {
        Ok(())
    } else {
        Err(Error::Malformed(what))
    }
}
