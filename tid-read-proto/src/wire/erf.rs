// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! ERF (Extensible Record Format) records of type 29, "OPA 9B": one 9B
//! packet per record, for capture files Wireshark's `erf` and `opa`
//! dissectors decode (pcap link type [`LINKTYPE_ERF`] = 197, each pcap
//! record's data being one ERF record).
//!
//! The 16-byte record header, as Wireshark's `wiretap/erf.c` and
//! `epan/dissectors/packet-erf.c` read it:
//!
//! ```text
//! bytes 0..8   timestamp, little-endian u64: seconds << 32 | binary fraction
//! byte  8      type: bit 7 = an extension header follows, bits 6..0 = 29
//! byte  9      flags: bits 1..0 capture interface, bit 2 varying-length
//!              record, bit 3 truncated, bit 4 receive error, bit 5 DS error
//! bytes 10..12 rlen, big-endian: the whole record, header included
//! bytes 12..14 lctr, big-endian: loss counter
//! bytes 14..16 wlen, big-endian: the packet's length on the wire
//! ```
//!
//! Type 29 has no type-specific header: the 9B packet (LRH through ICRC)
//! starts right after these 16 bytes, and the `opa` dissector reads its last
//! four bytes as the ICRC. Records written here have the varying-length
//! flag set and no padding (`rlen = 16 + packet length`); extension headers
//! are not written, and [`Repr::parse`] rejects records that have them.
//! The timestamp is an argument, never read from a clock.
//!
//! See the panic contract in [`crate::wire`].

use zerocopy::byteorder::big_endian::U16;
use zerocopy::byteorder::little_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Error, Result, view, view_mut};

/// pcap link type of a file of ERF records.
pub const LINKTYPE_ERF: u32 = 197;
/// ERF record type: Omni-Path 9B packet.
pub const TYPE_OPA_9B: u8 = 29;
/// Type bit: an extension header follows the record header.
pub const TYPE_EXT_HEADER: u8 = 0x80;
/// Flags: varying-length record.
pub const FLAG_VLEN: u8 = 0x04;
/// Flags: the record was truncated.
pub const FLAG_TRUNC: u8 = 0x08;
/// Flags: receive error.
pub const FLAG_RXE: u8 = 0x10;
/// Flags: data-stream error.
pub const FLAG_DSE: u8 = 0x20;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    ts: U64,
    rtype: u8,
    flags: u8,
    rlen: U16,
    lctr: U16,
    wlen: U16,
}

impl Header {
    const ZERO: Self = Self {
        ts: U64::new(0),
        rtype: 0,
        flags: 0,
        rlen: U16::new(0),
        lctr: U16::new(0),
        wlen: U16::new(0),
    };
}

mod field {
    use super::super::field_range;
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::big_endian::U16;
    use zerocopy::byteorder::little_endian::U64;

    pub const TS: Range<usize> = field_range!(Header, ts, U64);
    pub const TYPE: usize = core::mem::offset_of!(Header, rtype);
    pub const FLAGS: usize = core::mem::offset_of!(Header, flags);
    pub const RLEN: Range<usize> = field_range!(Header, rlen, U16);
    pub const LCTR: Range<usize> = field_range!(Header, lctr, U16);
    pub const WLEN: Range<usize> = field_range!(Header, wlen, U16);
    pub const PAYLOAD: usize = WLEN.end;
}

/// Length of the ERF record header in bytes.
pub const HEADER_LEN: usize = field::PAYLOAD;
const _: () = assert!(HEADER_LEN == 16 && field::TS.start == 0 && field::TYPE == 8);
const _: () = assert!(field::FLAGS == 9 && field::RLEN.start == 10 && field::LCTR.start == 12);

/// An ERF timestamp from nanoseconds since the epoch: seconds in the high
/// 32 bits, the fraction of a second in the low 32 (binary fixed point).
pub const fn timestamp_from_nanos(ns: u64) -> u64 {
    let secs = ns / 1_000_000_000;
    let frac = ((ns % 1_000_000_000) << 32) / 1_000_000_000;
    (secs << 32) | frac
}

/// A read/write view of an ERF record.
#[derive(Debug, Clone)]
pub struct Record<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Record<T> {
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

    /// Checks that the buffer holds the header and `rlen` bytes, and that
    /// `rlen` covers the header.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let rlen = usize::from(self.rlen());
        if rlen < HEADER_LEN {
            return Err(Error::Malformed("erf.rlen"));
        }
        if rlen > len {
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

    /// Timestamp (seconds << 32 | fraction).
    pub fn timestamp(&self) -> u64 {
        self.header().ts.get()
    }

    /// The type byte (extension bit included).
    pub fn rtype(&self) -> u8 {
        self.header().rtype
    }

    /// Flags.
    pub fn flags(&self) -> u8 {
        self.header().flags
    }

    /// Record length, header included.
    pub fn rlen(&self) -> u16 {
        self.header().rlen.get()
    }

    /// Loss counter.
    pub fn lctr(&self) -> u16 {
        self.header().lctr.get()
    }

    /// Wire length of the packet.
    pub fn wlen(&self) -> u16 {
        self.header().wlen.get()
    }

    /// The captured packet: after the header, up to `rlen`, at most `wlen`
    /// bytes (what Wireshark shows).
    pub fn packet(&self) -> &[u8] {
        let rlen = usize::from(self.rlen());
        let cap = rlen
            .saturating_sub(HEADER_LEN)
            .min(usize::from(self.wlen()));
        self.buffer
            .as_ref()
            .get(HEADER_LEN..HEADER_LEN.saturating_add(cap))
            .unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Record<T> {
    /// The bytes after the header, writable (up to the end of the buffer).
    pub fn packet_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..)
            .unwrap_or(&mut [])
    }
}

/// An ERF record header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Timestamp (seconds << 32 | fraction); see [`timestamp_from_nanos`].
    pub timestamp: u64,
    /// Flags ([`FLAG_VLEN`], interface number in bits 1..0, ...).
    pub flags: u8,
    /// Record length, header included.
    pub rlen: u16,
    /// Loss counter.
    pub lctr: u16,
    /// Wire length of the packet.
    pub wlen: u16,
}

impl Repr {
    /// The header of a record that carries a whole `packet_len`-byte packet
    /// seen on `interface` (0..=3) at `timestamp`.
    pub fn for_packet(timestamp: u64, interface: u8, packet_len: usize) -> Result<Self> {
        if interface > 3 {
            return Err(Error::Malformed("erf.interface"));
        }
        let rlen = packet_len
            .checked_add(HEADER_LEN)
            .and_then(|r| u16::try_from(r).ok())
            .ok_or(Error::Malformed("erf.rlen"))?;
        let wlen = u16::try_from(packet_len).map_err(|_| Error::Malformed("erf.wlen"))?;
        Ok(Self {
            timestamp,
            flags: FLAG_VLEN | interface,
            rlen,
            lctr: 0,
            wlen,
        })
    }

    /// Reads a checked record of type 29 without extension headers.
    pub fn parse<T: AsRef<[u8]>>(r: &Record<T>) -> Result<Self> {
        r.check_len()?;
        if r.rtype() != TYPE_OPA_9B {
            return Err(Error::Malformed("erf.type"));
        }
        Ok(Self {
            timestamp: r.timestamp(),
            flags: r.flags(),
            rlen: r.rlen(),
            lctr: r.lctr(),
            wlen: r.wlen(),
        })
    }

    /// Writes the record header (type 29). The caller copies the packet into
    /// [`Record::packet_mut`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, r: &mut Record<T>) -> Result<()> {
        if usize::from(self.rlen) < HEADER_LEN {
            return Err(Error::Malformed("erf.rlen"));
        }
        let h = view_mut::<Header>(r.buffer.as_mut()).ok_or(Error::Truncated)?;
        h.ts.set(self.timestamp);
        h.rtype = TYPE_OPA_9B;
        h.flags = self.flags;
        h.rlen.set(self.rlen);
        h.lctr.set(self.lctr);
        h.wlen.set(self.wlen);
        Ok(())
    }
}

/// Writes one whole record (header and packet) into `out`; returns its
/// length.
pub fn encode(timestamp: u64, interface: u8, packet: &[u8], out: &mut [u8]) -> Result<usize> {
    let repr = Repr::for_packet(timestamp, interface, packet.len())?;
    let total = usize::from(repr.rlen);
    let out = out.get_mut(..total).ok_or(Error::Truncated)?;
    let mut rec = Record::new_unchecked(out);
    repr.emit(&mut rec)?;
    rec.packet_mut().copy_from_slice(packet);
    Ok(total)
}

/// Length of a pcap file header.
pub const PCAP_FILE_HEADER_LEN: usize = 24;
/// Length of a pcap record header.
pub const PCAP_RECORD_HEADER_LEN: usize = 16;

/// The 24-byte header of a classic pcap file (little-endian, microsecond
/// timestamps, version 2.4) whose records are ERF records.
pub fn pcap_file_header(snaplen: u32) -> [u8; PCAP_FILE_HEADER_LEN] {
    // magic, version 2.4 (major then minor, 16 bits each), zone, sigfigs,
    // snaplen, link type.
    let fields: [u32; 6] = [0xA1B2_C3D4, 2 | 4 << 16, 0, 0, snaplen, LINKTYPE_ERF];
    let mut h = [0u8; PCAP_FILE_HEADER_LEN];
    for (slot, v) in h.chunks_exact_mut(4).zip(fields) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
    h
}

/// The 16-byte pcap record header in front of one ERF record of
/// `record_len` bytes captured at `timestamp` (an ERF timestamp).
pub fn pcap_record_header(timestamp: u64, record_len: u32) -> [u8; PCAP_RECORD_HEADER_LEN] {
    let secs = (timestamp >> 32) as u32;
    let usecs = (((timestamp & 0xFFFF_FFFF) * 1_000_000) >> 32) as u32;
    let mut h = [0u8; PCAP_RECORD_HEADER_LEN];
    for (slot, v) in h
        .chunks_exact_mut(4)
        .zip([secs, usecs, record_len, record_len])
    {
        slot.copy_from_slice(&v.to_le_bytes());
    }
    h
}

/// Bytes [`encode_pcap_record`] writes for a `packet_len`-byte packet.
pub const fn pcap_record_len(packet_len: usize) -> usize {
    PCAP_RECORD_HEADER_LEN
        .saturating_add(HEADER_LEN)
        .saturating_add(packet_len)
}

/// Writes one pcap record (its 16-byte header, then the ERF record of
/// `packet` seen on `interface` at `timestamp`) into `out`; returns its
/// length, [`pcap_record_len`]. Appending such records to
/// [`pcap_file_header`] gives a capture file `tshark` reads, every TID
/// RDMA opcode decoded by the `opa` dissector.
pub fn encode_pcap_record(
    timestamp: u64,
    interface: u8,
    packet: &[u8],
    out: &mut [u8],
) -> Result<usize> {
    let (head, rest) = out
        .split_at_mut_checked(PCAP_RECORD_HEADER_LEN)
        .ok_or(Error::Truncated)?;
    let n = encode(timestamp, interface, packet, rest)?;
    // `encode` bounds n by u16 (the ERF rlen), so it fits.
    let record_len = u32::try_from(n).map_err(|_| Error::Malformed("erf.rlen"))?;
    head.copy_from_slice(&pcap_record_header(timestamp, record_len));
    Ok(PCAP_RECORD_HEADER_LEN + n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_record() {
        // 1.5 s after the epoch, interface 1, a 4-byte "packet".
        let ts = timestamp_from_nanos(1_500_000_000);
        assert_eq!(ts, 1 << 32 | 0x8000_0000);
        let mut out = [0u8; 32];
        let n = encode(ts, 1, &[9, 8, 7, 6], &mut out).unwrap();
        assert_eq!(n, 20);
        assert_eq!(
            out[..20],
            [
                0x00, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, // ts LE
                29, 0x05, // type, flags (vlen | iface 1)
                0x00, 0x14, 0x00, 0x00, 0x00, 0x04, // rlen 20, lctr, wlen 4
                9, 8, 7, 6,
            ]
        );
        let rec = Record::new_checked(&out[..n]).unwrap();
        let r = Repr::parse(&rec).unwrap();
        assert_eq!(r, Repr::for_packet(ts, 1, 4).unwrap());
        assert_eq!(rec.packet(), &[9, 8, 7, 6]);
    }

    #[test]
    fn pcap_headers() {
        assert_eq!(
            pcap_file_header(65535),
            [
                0xD4, 0xC3, 0xB2, 0xA1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 197,
                0, 0, 0
            ]
        );
        let ts = timestamp_from_nanos(3_250_000_000);
        assert_eq!(
            pcap_record_header(ts, 20),
            [3, 0, 0, 0, 0x90, 0xD0, 0x03, 0, 20, 0, 0, 0, 20, 0, 0, 0]
        );
    }

    #[test]
    fn pcap_record_in_one_call() {
        let ts = timestamp_from_nanos(3_250_000_000);
        let mut out = [0xAAu8; 40];
        let n = encode_pcap_record(ts, 2, &[9, 8, 7, 6], &mut out).unwrap();
        assert_eq!(n, pcap_record_len(4));
        assert_eq!(n, 36);
        assert_eq!(out[..16], pcap_record_header(ts, 20));
        let mut rec = [0u8; 20];
        encode(ts, 2, &[9, 8, 7, 6], &mut rec).unwrap();
        assert_eq!(out[16..36], rec);
        assert_eq!(
            encode_pcap_record(ts, 0, &[0; 4], &mut out[..35]),
            Err(Error::Truncated)
        );
        assert_eq!(
            encode_pcap_record(ts, 0, &[], &mut out[..15]),
            Err(Error::Truncated)
        );
        assert!(encode_pcap_record(ts, 4, &[], &mut out).is_err());
    }

    #[test]
    fn rejects() {
        let mut out = [0u8; 20];
        encode(0, 0, &[1, 2, 3, 4], &mut out).unwrap();
        assert_eq!(
            Record::new_checked(&out[..19]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = out;
        bad[8] = 29 | TYPE_EXT_HEADER;
        assert!(Repr::parse(&Record::new_checked(&bad[..]).unwrap()).is_err());
        let mut bad = out;
        bad[11] = 15;
        assert!(Record::new_checked(&bad[..]).is_err());
        assert!(encode(0, 4, &[], &mut out).is_err());
        assert!(encode(0, 0, &[0; 8], &mut out).is_err());
        // wlen shorter than the captured bytes: the packet is cut at wlen.
        let mut short = out;
        short[15] = 2;
        assert_eq!(Record::new_checked(&short[..]).unwrap().packet(), &[1, 2]);
    }
}
