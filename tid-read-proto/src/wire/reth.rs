// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The RDMA Extended Transport Header: virtual address (u64), R_Key (u32)
//! and DMA length (u32), all big-endian. Kernel: `struct ib_reth`.
//!
//! See the panic contract in [`crate::wire`].

use zerocopy::byteorder::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Error, Result, view_mut};

/// The RETH as it lies in memory (embedded in the READ_REQ header).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Debug, Clone, Copy)]
#[repr(C)]
pub struct Header {
    vaddr: U64,
    rkey: U32,
    length: U32,
}

impl Header {
    /// An all-zero RETH.
    pub const ZERO: Self = Self {
        vaddr: U64::new(0),
        rkey: U32::new(0),
        length: U32::new(0),
    };
}

mod field {
    use super::super::field_range;
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::big_endian::{U32, U64};

    pub const VADDR: Range<usize> = field_range!(Header, vaddr, U64);
    pub const RKEY: Range<usize> = field_range!(Header, rkey, U32);
    pub const LENGTH: Range<usize> = field_range!(Header, length, U32);
}

/// Length of the RETH in bytes.
pub const HEADER_LEN: usize = field::LENGTH.end;
const _: () = assert!(HEADER_LEN == 16 && field::VADDR.start == 0 && field::RKEY.start == 8);

fixed_header_view! {
    /// A read/write view of a RETH and what follows it.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Remote virtual address.
    pub fn vaddr(&self) -> u64 {
        self.header().vaddr.get()
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.header().rkey.get()
    }

    /// DMA length in bytes.
    pub fn length(&self) -> u32 {
        self.header().length.get()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets all three fields.
    pub fn set(&mut self, vaddr: u64, rkey: u32, length: u32) {
        if let Some(h) = view_mut::<Header>(self.buffer.as_mut()) {
            Repr {
                vaddr,
                rkey,
                length,
            }
            .to_header(h);
        }
    }
}

/// The RETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Remote virtual address.
    pub vaddr: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length in bytes.
    pub length: u32,
}

impl Repr {
    /// Reads an embedded RETH.
    pub fn from_header(h: &Header) -> Self {
        Self {
            vaddr: h.vaddr.get(),
            rkey: h.rkey.get(),
            length: h.length.get(),
        }
    }

    /// Writes an embedded RETH.
    pub fn to_header(&self, h: &mut Header) {
        h.vaddr.set(self.vaddr);
        h.rkey.set(self.rkey);
        h.length.set(self.length);
    }

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self::from_header(p.header()))
    }

    /// Writes the RETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        let h = view_mut::<Header>(p.buffer.as_mut()).ok_or(Error::Truncated)?;
        self.to_header(h);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: [u8; 16] = [
        0x00, 0x00, 0x7F, 0x12, 0x34, 0x56, 0x70, 0x00, // vaddr
        0xCA, 0xFE, 0x00, 0x01, // rkey
        0x00, 0x04, 0x00, 0x00, // 256 KiB
    ];

    #[test]
    fn literal_round_trip() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                vaddr: 0x7F12_3456_7000,
                rkey: 0xCAFE_0001,
                length: 256 * 1024
            }
        );
        let mut out = [0u8; 16];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, BYTES);
        assert!(Packet::new_checked(&BYTES[..15]).is_err());
    }
}
