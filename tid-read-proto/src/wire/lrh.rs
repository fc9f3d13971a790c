// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The 9B Local Route Header and the packet it frames.
//!
//! ```text
//! byte 0: SC/VL 7..4 | LVer 3..0        byte 1: SL 7..4 | rsvd 3..2 | LNH 1..0
//! bytes 2..4: DLID (BE)                 bytes 4..6: rsvd 15..12 | PktLen 11..0 (BE)
//! bytes 6..8: SLID (BE)
//! ```
//!
//! PktLen counts 4-byte words from the first byte of the LRH through the
//! ICRC. The [`Packet`] view covers a whole 9B packet: `payload()` is what
//! lies between the LRH and the ICRC, and the ICRC is the last word inside
//! PktLen. Bytes of the buffer past PktLen are ignored (link padding).
//! Kernel: `struct ib_header` (`lrh[4]`), `hfi1_make_ib_hdr()`.
//!
//! See the panic contract in [`crate::wire`].

use zerocopy::byteorder::big_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Error, Result, fits, icrc, view, view_mut};

/// LNH value: the LRH is followed by a BTH (IBA local).
pub const LNH_BTH: u8 = 2;
/// LNH value: the LRH is followed by a GRH (IBA global).
pub const LNH_GRH: u8 = 3;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    sc_lver: u8,
    sl_lnh: u8,
    dlid: U16,
    len: U16,
    slid: U16,
}

impl Header {
    const ZERO: Self = Self {
        sc_lver: 0,
        sl_lnh: 0,
        dlid: U16::new(0),
        len: U16::new(0),
        slid: U16::new(0),
    };
}

mod field {
    use super::super::field_range;
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::big_endian::U16;

    pub const SC_LVER: usize = core::mem::offset_of!(Header, sc_lver);
    pub const SL_LNH: usize = core::mem::offset_of!(Header, sl_lnh);
    pub const DLID: Range<usize> = field_range!(Header, dlid, U16);
    pub const LEN: Range<usize> = field_range!(Header, len, U16);
    pub const SLID: Range<usize> = field_range!(Header, slid, U16);
    pub const PAYLOAD: usize = SLID.end;
}

/// Length of the LRH in bytes.
pub const HEADER_LEN: usize = field::PAYLOAD;
/// Length of the ICRC trailer in bytes.
pub const ICRC_LEN: usize = 4;

const PKT_LEN_MASK: u16 = 0x0FFF;
const LEN_RSVD_MASK: u16 = 0xF000;
const SL_LNH_RSVD_MASK: u8 = 0x0C;

const _: () = assert!(HEADER_LEN == 8 && field::SC_LVER == 0 && field::SL_LNH == 1);
const _: () = assert!(field::DLID.start == 2 && field::LEN.start == 4);

/// A read/write view of a 9B packet (LRH through ICRC).
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
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds the LRH, that PktLen covers at least the
    /// LRH and the ICRC, and that the buffer holds PktLen words.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let plen = self.packet_len();
        if plen < HEADER_LEN + ICRC_LEN {
            return Err(Error::Malformed("lrh.pkt_len"));
        }
        if plen > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn header(&self) -> &Header {
        view(self.buffer.as_ref()).unwrap_or(&Header::ZERO)
    }

    /// SC (the VL field of an IB LRH): 4 bits.
    pub fn sc(&self) -> u8 {
        self.header().sc_lver >> 4
    }

    /// Link version: 4 bits.
    pub fn lver(&self) -> u8 {
        self.header().sc_lver & 0x0F
    }

    /// Service level: 4 bits.
    pub fn sl(&self) -> u8 {
        self.header().sl_lnh >> 4
    }

    /// The two reserved bits of byte 1.
    pub fn rsvd1(&self) -> u8 {
        (self.header().sl_lnh & SL_LNH_RSVD_MASK) >> 2
    }

    /// Link next header ([`LNH_BTH`] for every TID RDMA packet).
    pub fn lnh(&self) -> u8 {
        self.header().sl_lnh & 0x03
    }

    /// Destination LID.
    pub fn dlid(&self) -> u16 {
        self.header().dlid.get()
    }

    /// The four reserved bits above PktLen.
    pub fn rsvd2(&self) -> u16 {
        (self.header().len.get() & LEN_RSVD_MASK) >> 12
    }

    /// PktLen in 4-byte words (LRH through ICRC).
    pub fn pkt_len_words(&self) -> u16 {
        self.header().len.get() & PKT_LEN_MASK
    }

    /// PktLen in bytes.
    pub fn packet_len(&self) -> usize {
        usize::from(self.pkt_len_words()) * 4
    }

    /// Source LID.
    pub fn slid(&self) -> u16 {
        self.header().slid.get()
    }

    /// The bytes between the LRH and the ICRC (empty if the length is bad).
    pub fn payload(&self) -> &[u8] {
        let end = self.packet_len().saturating_sub(ICRC_LEN);
        self.buffer.as_ref().get(HEADER_LEN..end).unwrap_or(&[])
    }

    /// The ICRC as stored (the CRC-32 value; the wire holds it
    /// least-significant byte first). 0 if the length is bad.
    pub fn icrc(&self) -> u32 {
        let end = self.packet_len();
        match self.buffer.as_ref().get(end.saturating_sub(ICRC_LEN)..end) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
            _ => 0,
        }
    }

    /// The bytes the ICRC covers: the LRH through the end of the payload.
    pub fn covered(&self) -> &[u8] {
        let end = self.packet_len().saturating_sub(ICRC_LEN);
        self.buffer.as_ref().get(..end).unwrap_or(&[])
    }

    /// True if the stored ICRC matches the one computed over the packet
    /// (see [`icrc`] for what is masked).
    pub fn verify_icrc(&self) -> bool {
        self.check_len().is_ok() && icrc::compute(self.covered()) == self.icrc()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn header_mut(&mut self) -> Option<&mut Header> {
        view_mut(self.buffer.as_mut())
    }

    /// Sets SC and LVer (each masked to 4 bits).
    pub fn set_sc_lver(&mut self, sc: u8, lver: u8) {
        if let Some(h) = self.header_mut() {
            h.sc_lver = (sc & 0x0F) << 4 | (lver & 0x0F);
        }
    }

    /// Sets SL and LNH (masked to 4 and 2 bits; reserved bits cleared).
    pub fn set_sl_lnh(&mut self, sl: u8, lnh: u8) {
        if let Some(h) = self.header_mut() {
            h.sl_lnh = (sl & 0x0F) << 4 | (lnh & 0x03);
        }
    }

    /// Sets the destination LID.
    pub fn set_dlid(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.dlid.set(v);
        }
    }

    /// Sets PktLen in words (masked to 12 bits; reserved bits cleared).
    pub fn set_pkt_len_words(&mut self, words: u16) {
        if let Some(h) = self.header_mut() {
            h.len.set(words & PKT_LEN_MASK);
        }
    }

    /// Sets the source LID.
    pub fn set_slid(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.slid.set(v);
        }
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.packet_len().saturating_sub(ICRC_LEN);
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..end)
            .unwrap_or(&mut [])
    }

    /// Computes the ICRC over the packet and stores it. Call it last, after
    /// every header and the payload are in place.
    pub fn fill_icrc(&mut self) {
        let crc = icrc::compute(self.covered());
        let end = self.packet_len();
        if let Some(slot) = self
            .buffer
            .as_mut()
            .get_mut(end.saturating_sub(ICRC_LEN)..end)
        {
            if end >= HEADER_LEN + ICRC_LEN {
                slot.copy_from_slice(&crc.to_le_bytes());
            }
        }
    }
}

/// The LRH as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// SC (VL): 4 bits.
    pub sc: u8,
    /// Link version: 4 bits.
    pub lver: u8,
    /// Service level: 4 bits.
    pub sl: u8,
    /// Link next header: 2 bits ([`LNH_BTH`]).
    pub lnh: u8,
    /// Destination LID.
    pub dlid: u16,
    /// Source LID.
    pub slid: u16,
    /// The whole packet's length in bytes (LRH through ICRC), a multiple of
    /// 4 below 16 KiB.
    pub packet_len: usize,
}

impl Repr {
    /// Reads a checked packet; reserved bits must be zero.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        if p.rsvd1() != 0 || p.rsvd2() != 0 {
            return Err(Error::Malformed("lrh.reserved"));
        }
        Ok(Self {
            sc: p.sc(),
            lver: p.lver(),
            sl: p.sl(),
            lnh: p.lnh(),
            dlid: p.dlid(),
            slid: p.slid(),
            packet_len: p.packet_len(),
        })
    }

    /// Writes the LRH (not the payload, not the ICRC). Fails if a field is
    /// too wide or the buffer is shorter than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        fits(u64::from(self.sc), 4, "lrh.sc")?;
        fits(u64::from(self.lver), 4, "lrh.lver")?;
        fits(u64::from(self.sl), 4, "lrh.sl")?;
        fits(u64::from(self.lnh), 2, "lrh.lnh")?;
        if self.packet_len % 4 != 0 || self.packet_len / 4 > usize::from(PKT_LEN_MASK) {
            return Err(Error::Malformed("lrh.pkt_len"));
        }
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        p.set_sc_lver(self.sc, self.lver);
        p.set_sl_lnh(self.sl, self.lnh);
        p.set_dlid(self.dlid);
        #[allow(clippy::cast_possible_truncation)] // checked above: < 4096 words
        p.set_pkt_len_words((self.packet_len / 4) as u16);
        p.set_slid(self.slid);
        Ok(())
    }

    /// Length of the header in bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SC 0, LVer 0, SL 0, LNH BTH, DLID 1, PktLen 5 words, SLID 2, then
    // 8 payload bytes and a 4-byte ICRC slot.
    const BYTES: [u8; 20] = [
        0x00, 0x02, 0x00, 0x01, 0x00, 0x05, 0x00, 0x02, // LRH
        1, 2, 3, 4, 5, 6, 7, 8, // payload
        0xAA, 0xBB, 0xCC, 0xDD, // ICRC
    ];

    #[test]
    fn parse_literal() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                sc: 0,
                lver: 0,
                sl: 0,
                lnh: LNH_BTH,
                dlid: 1,
                slid: 2,
                packet_len: 20
            }
        );
        assert_eq!(p.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(p.icrc(), 0xDDCC_BBAA);
    }

    #[test]
    fn emit_literal() {
        let r = Repr {
            sc: 0xA,
            lver: 0x0,
            sl: 0x5,
            lnh: LNH_BTH,
            dlid: 0x1234,
            slid: 0xBEEF,
            packet_len: 0xFFC * 4,
        };
        let mut buf = [0u8; 8];
        r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, [0xA0, 0x52, 0x12, 0x34, 0x0F, 0xFC, 0xBE, 0xEF]);
    }

    #[test]
    fn rejects_bad_lengths_and_reserved_bits() {
        assert_eq!(
            Packet::new_checked(&BYTES[..7]).unwrap_err(),
            Error::Truncated
        );
        // PktLen 6 words but only 20 bytes.
        let mut b = BYTES;
        b[5] = 6;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
        // PktLen 2 words: shorter than LRH + ICRC.
        b[5] = 2;
        assert!(matches!(
            Packet::new_checked(&b[..]),
            Err(Error::Malformed(_))
        ));
        let mut b = BYTES;
        b[1] |= 0x04;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(Repr::parse(&p), Err(Error::Malformed(_))));
        let mut b = BYTES;
        b[4] = 0x10;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(Repr::parse(&p), Err(Error::Malformed(_))));
    }

    #[test]
    fn unchecked_short_buffer_reads_zero() {
        let p = Packet::new_unchecked(&[0xFFu8; 3][..]);
        assert_eq!((p.dlid(), p.packet_len(), p.payload().len()), (0, 0, 0));
        let mut b = [0u8; 3];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_dlid(7);
        p.fill_icrc();
        assert_eq!(b, [0; 3]);
    }
}
