// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Capture files: pcapng with one interface per link, link type ERF (197).
//!
//! Each packet is one Enhanced Packet Block holding one ERF record (built
//! by `tid_read_proto::wire::erf`) that wraps one OPA 9B packet, so
//! Wireshark's `erf` and `opa` dissectors decode it. The blocks are
//! written by hand (about a hundred lines, against a dependency): a
//! Section Header Block, two Interface Description Blocks (nanosecond
//! timestamps, `if_name` saying which way the link goes) and one Enhanced
//! Packet Block per packet, whose `opt_comment` says what the fault
//! injector did to it (dropped, duplicate, stale copy, reordered) when it
//! did anything. [`read_all`] reads such a file back (the tests use it).
//!
//! Timestamps are the link model's wire times, never the host's, so a
//! capture is a pure function of the seed.

use std::io::{self, Read, Write};

pub use tid_read_proto::wire::erf::LINKTYPE_ERF;

/// Block types.
const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const EPB: u32 = 6;
/// The byte-order magic of a section.
const BYTE_ORDER: u32 = 0x1A2B_3C4D;
/// Options.
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;
/// Most bytes of one packet (ERF header and an 8 KiB MTU packet fit).
pub const SNAPLEN: u32 = 65_535;

/// The two interfaces, by index: which way each link carries packets.
pub const INTERFACES: [&str; 2] = ["requester to responder", "responder to requester"];

/// Appends one option (code, length, value, padding to 4 bytes).
fn option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
}

/// Frames `body` as one block of `btype` (type, lengths, padding).
fn block(btype: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len().next_multiple_of(4)) as u32;
    let mut b = Vec::with_capacity(len as usize);
    b.extend_from_slice(&btype.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(body);
    b.resize(len as usize - 4, 0);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// Writes a pcapng capture to any writer.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    records: u64,
    erf: Vec<u8>,
    body: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the section header and the two interfaces.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut shb = Vec::new();
        shb.extend_from_slice(&BYTE_ORDER.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        let appl = format!("tid-sim {}", env!("CARGO_PKG_VERSION"));
        option(&mut shb, SHB_USERAPPL, appl.as_bytes());
        option(&mut shb, OPT_END, &[]);
        out.write_all(&block(SHB, &shb))?;
        for name in INTERFACES {
            let mut idb = Vec::new();
            idb.extend_from_slice(&(LINKTYPE_ERF as u16).to_le_bytes());
            idb.extend_from_slice(&0u16.to_le_bytes());
            idb.extend_from_slice(&SNAPLEN.to_le_bytes());
            option(&mut idb, IF_NAME, name.as_bytes());
            option(&mut idb, IF_TSRESOL, &[9]);
            option(&mut idb, OPT_END, &[]);
            out.write_all(&block(IDB, &idb))?;
        }
        Ok(Self {
            out,
            records: 0,
            erf: vec![0; SNAPLEN as usize],
            body: Vec::with_capacity(SNAPLEN as usize + 64),
        })
    }

    /// Appends one packet (LRH through ICRC) seen on link `interface` at
    /// wire time `time_ns`, with `comment` if the fault injector did
    /// something to it.
    pub fn packet(
        &mut self,
        time_ns: u64,
        interface: u8,
        packet: &[u8],
        comment: Option<&str>,
    ) -> io::Result<()> {
        let ts = tid_read_proto::wire::erf::timestamp_from_nanos(time_ns);
        let n = tid_read_proto::wire::erf::encode(ts, interface, packet, &mut self.erf)
            .map_err(|e| io::Error::other(format!("ERF: {e}")))?;
        let data = self.erf.get(..n).unwrap_or(&[]);
        let b = &mut self.body;
        b.clear();
        b.extend_from_slice(&u32::from(interface).to_le_bytes());
        b.extend_from_slice(&((time_ns >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(time_ns as u32).to_le_bytes());
        b.extend_from_slice(&(n as u32).to_le_bytes());
        b.extend_from_slice(&(n as u32).to_le_bytes());
        b.extend_from_slice(data);
        b.resize(b.len().next_multiple_of(4), 0);
        if let Some(c) = comment {
            option(b, OPT_COMMENT, c.as_bytes());
            option(b, OPT_END, &[]);
        }
        self.out.write_all(&block(EPB, b))?;
        self.records += 1;
        Ok(())
    }

    /// Packets written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// One packet read back from a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapRecord {
    /// The interface (link) index.
    pub interface: u32,
    /// Wire time in nanoseconds.
    pub time_ns: u64,
    /// The ERF record.
    pub data: Vec<u8>,
    /// The packet's comment, if any.
    pub comment: Option<String>,
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|w| w.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|w| w.try_into().ok())
        .map_or(0, u16::from_le_bytes)
}

/// The comment among a block's options.
fn comment_of(mut opts: &[u8]) -> Option<String> {
    while opts.len() >= 4 {
        let (code, len) = (le16(opts, 0), usize::from(le16(opts, 2)));
        let value = opts.get(4..4 + len)?;
        if code == OPT_COMMENT {
            return Some(String::from_utf8_lossy(value).into_owned());
        }
        if code == OPT_END {
            return None;
        }
        opts = opts.get(4 + len.next_multiple_of(4)..)?;
    }
    None
}

/// Reads a whole capture written by [`PcapWriter`]: checks the section
/// header and that every interface is ERF with nanosecond timestamps, and
/// returns the packets.
///
/// # Errors
///
/// An I/O error, or `InvalidData` for anything else.
pub fn read_all<R: Read>(mut r: R) -> io::Result<Vec<PcapRecord>> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
    let mut all = Vec::new();
    r.read_to_end(&mut all)?;
    let mut rest = &all[..];
    let mut out = Vec::new();
    let mut first = true;
    while !rest.is_empty() {
        let (btype, len) = (le32(rest, 0), le32(rest, 4) as usize);
        if len < 12 || len % 4 != 0 || len > rest.len() || le32(rest, len - 4) as usize != len {
            return Err(bad("bad block length"));
        }
        let body = &rest[8..len - 4];
        match btype {
            SHB if le32(body, 0) == BYTE_ORDER => {}
            SHB => return Err(bad("not a little-endian pcapng section")),
            _ if first => return Err(bad("not a pcapng file")),
            IDB if u32::from(le16(body, 0)) != LINKTYPE_ERF => {
                return Err(bad("link type is not ERF"));
            }
            EPB => {
                let n = le32(body, 12) as usize;
                let data = body.get(20..20 + n).ok_or_else(|| bad("short packet"))?;
                out.push(PcapRecord {
                    interface: le32(body, 0),
                    time_ns: u64::from(le32(body, 4)) << 32 | u64::from(le32(body, 8)),
                    data: data.to_vec(),
                    comment: comment_of(body.get(20 + n.next_multiple_of(4)..).unwrap_or(&[])),
                });
            }
            _ => {}
        }
        first = false;
        rest = &rest[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let pkt = [0u8; 28];
        w.packet(1_500_002_123, 0, &pkt, None).unwrap();
        w.packet(7_000, 1, &pkt[..20], Some("dropped by the fault injector"))
            .unwrap();
        assert_eq!(w.records(), 2);
        let bytes = w.finish().unwrap();
        assert_eq!(&bytes[0..4], &SHB.to_le_bytes());
        let recs = read_all(&bytes[..]).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!((recs[0].interface, recs[0].time_ns), (0, 1_500_002_123));
        assert_eq!(recs[0].comment, None);
        assert_eq!(
            recs[1].comment.as_deref(),
            Some("dropped by the fault injector")
        );
        let rec = tid_read_proto::wire::erf::Record::new_checked(&recs[1].data[..]).unwrap();
        assert_eq!(rec.packet(), &pkt[..20]);
        let mut broken = bytes.clone();
        broken[8] ^= 0xFF;
        assert!(read_all(&broken[..]).is_err());
    }
}
