// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The KDETH: two 32-bit words, each little-endian on the wire, right after
//! the BTH of every TID RDMA packet.
//!
//! Word 0 ([`Kdeth0`]): OFFSET 0..=14, OM 15, TID 16..=25, TIDCTRL 26..=27,
//! INTR 28, SH 29, KVER 30..=31. Word 1 ([`Kdeth1`]): JKEY 0..=7, HCRC
//! 16..=31 (filled by the chip). Kernel: `struct hfi1_kdeth_header`,
//! `KDETH_GET`/`KDETH_SET`.
//!
//! See the panic contract in [`crate::wire`].

use hfi1_hal::{Kdeth0, Kdeth1};
use zerocopy::byteorder::little_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Error, Result, view_mut};

/// The KDETH as it lies in memory (embedded in the READ_REQ and READ_RESP
/// headers).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Debug, Clone, Copy)]
#[repr(C)]
pub struct Header {
    kdeth0: U32,
    kdeth1: U32,
}

impl Header {
    /// An all-zero KDETH.
    pub const ZERO: Self = Self {
        kdeth0: U32::new(0),
        kdeth1: U32::new(0),
    };
}

mod field {
    use super::super::field_range;
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::little_endian::U32;

    pub const KDETH0: Range<usize> = field_range!(Header, kdeth0, U32);
    pub const KDETH1: Range<usize> = field_range!(Header, kdeth1, U32);
}

/// Length of the KDETH in bytes.
pub const HEADER_LEN: usize = field::KDETH1.end;
const _: () = assert!(HEADER_LEN == 8 && field::KDETH0.start == 0);

fixed_header_view! {
    /// A read/write view of a KDETH and what follows it.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Word 0.
    pub fn kdeth0(&self) -> Kdeth0 {
        Repr::from_header(self.header()).kdeth0
    }

    /// Word 1.
    pub fn kdeth1(&self) -> Kdeth1 {
        Repr::from_header(self.header()).kdeth1
    }

    /// What follows the KDETH.
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets word 0.
    pub fn set_kdeth0(&mut self, w: Kdeth0) {
        if let Some(h) = view_mut::<Header>(self.buffer.as_mut()) {
            h.kdeth0.set(w.raw());
        }
    }

    /// Sets word 1.
    pub fn set_kdeth1(&mut self, w: Kdeth1) {
        if let Some(h) = view_mut::<Header>(self.buffer.as_mut()) {
            h.kdeth1.set(w.raw());
        }
    }
}

/// The KDETH as typed words. Every bit pattern is a value, so parse never
/// fails on a long enough buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Word 0.
    pub kdeth0: Kdeth0,
    /// Word 1.
    pub kdeth1: Kdeth1,
}

impl Repr {
    /// Reads an embedded KDETH.
    pub fn from_header(h: &Header) -> Self {
        Self {
            kdeth0: Kdeth0::from_raw(h.kdeth0.get()),
            kdeth1: Kdeth1::from_raw(h.kdeth1.get()),
        }
    }

    /// Writes an embedded KDETH.
    pub fn to_header(&self, h: &mut Header) {
        h.kdeth0.set(self.kdeth0.raw());
        h.kdeth1.set(self.kdeth1.raw());
    }

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self::from_header(p.header()))
    }

    /// Writes both words.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        let h = view_mut::<Header>(p.buffer.as_mut()).ok_or(Error::Truncated)?;
        self.to_header(h);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfi1_hal::fields::Kdeth0Fields;

    #[test]
    fn words_are_little_endian() {
        // OFFSET 64, OM, TID 5, TIDCTRL 3, SH, KVER 1 = 0x6C05_8040; JKEY 32.
        let bytes = [0x40, 0x80, 0x05, 0x6C, 0x20, 0x00, 0x00, 0x00, 0xEE];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        let want0 = Kdeth0::new(Kdeth0Fields {
            offset: 64,
            om: true,
            tid: 5,
            tidctrl: 3,
            intr: false,
            sh: true,
        })
        .unwrap();
        assert_eq!(r.kdeth0, want0);
        assert_eq!(r.kdeth0.raw(), 0x6C05_8040);
        assert_eq!(r.kdeth1.jkey(), 32);
        assert_eq!(p.payload(), &[0xEE]);
        let mut out = [0u8; 8];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, bytes[..8]);
    }

    #[test]
    fn short() {
        assert_eq!(
            Packet::new_checked(&[0u8; 7][..]).unwrap_err(),
            Error::Truncated
        );
        let r = Repr::default();
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut [0u8; 7][..])),
            Err(Error::Truncated)
        );
    }
}
