// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! pcap files of link type ERF (197).
//!
//! Each pcap record holds one ERF record (built by
//! `tid_read_proto::wire::erf`) that wraps one OPA 9B packet. Timestamps
//! come from the simulator's clock, never the host's, so a capture is a
//! pure function of the seed.

use std::io::{self, Read, Write};

/// Link type ERF.
pub const LINKTYPE_ERF: u32 = 197;
/// The classic pcap magic, microsecond timestamps.
pub const PCAP_MAGIC: u32 = 0xA1B2_C3D4;
const SNAPLEN: u32 = 262_144;

/// Writes pcap records to any writer.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&PCAP_MAGIC.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ERF.to_le_bytes());
        out.write_all(&h)?;
        Ok(Self { out, records: 0 })
    }

    /// Appends one record at simulated time `time_ns`.
    pub fn record(&mut self, time_ns: u64, data: &[u8]) -> io::Result<()> {
        let len = u32::try_from(data.len()).map_err(|_| io::Error::other("record too large"))?;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((time_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&(((time_ns / 1000) % 1_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&len.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)?;
        self.records += 1;
        Ok(())
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// One record read back from a pcap file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapRecord {
    /// Timestamp in nanoseconds (microsecond resolution).
    pub time_ns: u64,
    /// The record's bytes.
    pub data: Vec<u8>,
}

/// Reads a whole pcap file written by [`PcapWriter`]: checks the magic and
/// the link type and returns the records.
pub fn read_all<R: Read>(mut r: R) -> io::Result<Vec<PcapRecord>> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
    let mut h = [0u8; 24];
    r.read_exact(&mut h)?;
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if word(&h[0..4]) != PCAP_MAGIC {
        return Err(bad("not a little-endian microsecond pcap file"));
    }
    if word(&h[20..24]) != LINKTYPE_ERF {
        return Err(bad("link type is not ERF"));
    }
    let mut out = Vec::new();
    loop {
        let mut rh = [0u8; 16];
        match r.read_exact(&mut rh) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let incl = word(&rh[8..12]) as usize;
        if incl > SNAPLEN as usize {
            return Err(bad("record longer than the snap length"));
        }
        let mut data = vec![0u8; incl];
        r.read_exact(&mut data)?;
        let time_ns =
            u64::from(word(&rh[0..4])) * 1_000_000_000 + u64::from(word(&rh[4..8])) * 1000;
        out.push(PcapRecord { time_ns, data });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.record(1_500_002_000, &[1, 2, 3]).unwrap();
        w.record(7_000, &[]).unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(&bytes[20..24], &197u32.to_le_bytes());
        let recs = read_all(&bytes[..]).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(
            recs[0],
            PcapRecord {
                time_ns: 1_500_002_000,
                data: vec![1, 2, 3]
            }
        );
        assert_eq!(recs[1].time_ns, 7_000);
        let mut broken = bytes.clone();
        broken[20] = 1;
        assert!(read_all(&broken[..]).is_err());
    }
}
