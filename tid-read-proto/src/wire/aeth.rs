// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The ACK Extended Transport Header: one big-endian word, syndrome in bits
//! 31..24 and MSN in 23..0. Kernel: `rvt_compute_aeth()`,
//! `IB_AETH_CREDIT_SHIFT`, `IB_MSN_MASK`.
//!
//! The syndrome's top bits say ACK (0b00), RNR NAK (0b01) or NAK (0b11);
//! for a NAK the low five bits are the code ([`NakCode`]).
//!
//! See the panic contract in [`crate::wire`].

use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Error, Result, fits, view_mut};

/// NAK codes a responder can send (the syndrome byte of the AETH).
/// Kernel: `IB_NAK_PSN_ERROR` and its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NakCode {
    /// PSN sequence error (0x60).
    PsnError = 0x60,
    /// Invalid request (0x61).
    InvalidRequest = 0x61,
    /// Remote access error (0x62).
    RemoteAccessError = 0x62,
    /// Remote operational error (0x63).
    RemoteOperationalError = 0x63,
    /// Invalid RD request (0x64).
    InvalidRdRequest = 0x64,
}

impl NakCode {
    /// The AETH syndrome byte.
    pub const fn syndrome(self) -> u8 {
        self as u8
    }
}

/// The AETH as it lies in memory (embedded in the READ_RESP header).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Debug, Clone, Copy)]
#[repr(C)]
pub struct Header {
    word: U32,
}

impl Header {
    /// An all-zero AETH.
    pub const ZERO: Self = Self { word: U32::new(0) };
}

mod field {
    use super::super::field_range;
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::big_endian::U32;

    pub const WORD: Range<usize> = field_range!(Header, word, U32);
}

/// Length of the AETH in bytes.
pub const HEADER_LEN: usize = field::WORD.end;
const _: () = assert!(HEADER_LEN == 4);

const MSN_MASK: u32 = 0x00FF_FFFF;

fixed_header_view! {
    /// A read/write view of an AETH and what follows it.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The syndrome byte.
    pub fn syndrome(&self) -> u8 {
        Repr::from_header(self.header()).syndrome
    }

    /// The message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        Repr::from_header(self.header()).msn
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the syndrome and the MSN (masked to 24 bits).
    pub fn set(&mut self, syndrome: u8, msn: u32) {
        if let Some(h) = view_mut::<Header>(self.buffer.as_mut()) {
            h.word.set(u32::from(syndrome) << 24 | (msn & MSN_MASK));
        }
    }
}

/// The AETH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Syndrome: ACK with credits, RNR NAK with a timer, or a NAK code.
    pub syndrome: u8,
    /// Message sequence number: 24 bits.
    pub msn: u32,
}

impl Repr {
    /// Reads an embedded AETH.
    pub fn from_header(h: &Header) -> Self {
        let w = h.word.get();
        Self {
            syndrome: w.to_be_bytes()[0],
            msn: w & MSN_MASK,
        }
    }

    /// Writes an embedded AETH; fails if the MSN is wider than 24 bits.
    pub fn to_header(&self, h: &mut Header) -> Result<()> {
        fits(u64::from(self.msn), 24, "aeth.msn")?;
        h.word.set(u32::from(self.syndrome) << 24 | self.msn);
        Ok(())
    }

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self::from_header(p.header()))
    }

    /// Writes the AETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        let h = view_mut::<Header>(p.buffer.as_mut()).ok_or(Error::Truncated)?;
        self.to_header(h)
    }

    /// True if the syndrome is a NAK (top bits 0b11).
    pub const fn is_nak(&self) -> bool {
        self.syndrome >> 5 == 0b11
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal() {
        // NAK "remote access error", MSN 0x000102.
        let b = [0x62, 0x00, 0x01, 0x02];
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.syndrome, NakCode::RemoteAccessError.syndrome());
        assert_eq!(r.msn, 0x102);
        assert!(r.is_nak());
        let mut out = [0u8; 4];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        let bad = Repr {
            syndrome: 0,
            msn: 1 << 24,
        };
        assert!(bad.emit(&mut Packet::new_unchecked(&mut out[..])).is_err());
        assert!(Packet::new_checked(&b[..3]).is_err());
    }
}
