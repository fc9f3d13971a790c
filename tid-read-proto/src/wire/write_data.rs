// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA WRITE_DATA / WRITE_DATA_LAST header (36 bytes after the
//! BTH) and its data, and the requester's per-segment packet stream.
//!
//! ```text
//! KDETH (2 x LE32) | 6 reserved BE32 | verbs_qp BE32 | data
//! ```
//!
//! The KDETH places the data: TID/TIDCTRL from the responder's TID entry,
//! OFFSET inside that entry in 64-byte units (OM set), SH on every packet
//! but the segment's last, INTR on those too when the responder is
//! urgent-capable. The BTH goes to the `tid_flow_qp` of the segment's
//! WRITE_RESP with the flow PSN `generation << 11 | (spsn + pkt) & 0x7FF`;
//! the segment's last packet asks for an ACK. Kernel:
//! `struct tid_rdma_write_data`, `hfi1_build_tid_rdma_packet()`,
//! `hfi1_make_tid_rdma_pkt()`.
//!
//! Two things the driver does that one might not expect, kept here:
//!
//! - the opcode is WRITE_DATA_LAST only on the last packet of the
//!   *request's* last segment; the last packet of any other segment is a
//!   WRITE_DATA with SH clear and AckReq set;
//! - a segment also ends when its TID entries run out, even if fewer bytes
//!   than its length were sent (the responder's entries are not checked
//!   against the length on this side).
//!
//! The packet stream is the one READ_RESP uses ([`RespBuilder`]: same
//! packet sizes, KDETH and flow PSNs, cursor and errors, checked against
//! the kernel's vectors), with the end-of-entries rule above added.
//!
//! The reserved words are ignored on parse: see [`super::tid_header`].
//! Otherwise the panic contract of [`crate::wire`] holds.

use hfi1_hal::consts::{OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST};
use hfi1_hal::fields::Kdeth0Fields;
use hfi1_hal::{Generation, Kdeth0, Psn, TidEntry};
use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::tid_header::{BthFields, tid_header_common};
use super::{Result, kdeth};
use crate::response_stream::{BuildError, Cursor, RespBuilder, RespFlow};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    kdeth: kdeth::Header,
    reserved: [U32; 6],
    verbs_qp: U32,
}

impl Header {
    const ZERO: Self = Self {
        kdeth: kdeth::Header::ZERO,
        reserved: [U32::new(0); 6],
        verbs_qp: U32::new(0),
    };
}

mod field {
    use super::super::{field_range, kdeth};
    use super::Header;
    use core::ops::Range;
    use zerocopy::byteorder::big_endian::U32;

    pub const KDETH: Range<usize> = field_range!(Header, kdeth, kdeth::Header);
    pub const RESERVED: Range<usize> = field_range!(Header, reserved, [U32; 6]);
    pub const VERBS_QP: Range<usize> = field_range!(Header, verbs_qp, U32);
    pub const PAYLOAD: usize = VERBS_QP.end;
}

/// Length of the WRITE_DATA header in bytes (after the BTH).
pub const HEADER_LEN: usize = field::PAYLOAD;
const _: () = assert!(HEADER_LEN == super::tid_header::HEADER_LEN);
const _: () = assert!(field::KDETH.start == 0 && field::RESERVED.start == 8);
const _: () = assert!(field::VERBS_QP.start == 32);

fixed_header_view! {
    /// A read/write view of a WRITE_DATA (or RESYNC) header and its data.
}

tid_header_common!();

/// The WRITE_DATA header as typed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// KDETH: where the data goes (TID, TIDCTRL, OFFSET), SH, INTR, J_KEY.
    pub kdeth: kdeth::Repr,
    /// The responder's verbs QP number.
    pub verbs_qp: u32,
}

impl Repr {
    /// Reads a checked header; every bit pattern is accepted (the reserved
    /// words are not looked at).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self {
            kdeth: p.kdeth(),
            verbs_qp: p.verbs_qp(),
        })
    }

    /// Writes the header (not the data), reserved words zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        p.check_len()?;
        p.set_kdeth(&self.kdeth);
        p.clear_reserved();
        p.set_verbs_qp(self.verbs_qp);
        Ok(())
    }

    /// Length of the header in bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
}

/// What a segment's WRITE_DATA stream is built from.
#[derive(Debug, Clone, Copy)]
pub struct DataFlow<'a> {
    /// The TID entries of the segment's WRITE_RESP.
    pub entries: &'a [TidEntry],
    /// Bytes of the segment. Kernel: `flow->length`.
    pub length: u32,
    /// Path MTU in bytes.
    pub pmtu: u32,
    /// First flow sequence, from the WRITE_RESP's `tid_flow_psn`.
    pub spsn: u32,
    /// The flow's generation, from the WRITE_RESP's `tid_flow_psn`.
    pub generation: Generation,
    /// The WRITE_RESP's `tid_flow_qp`: the BTH destination.
    pub tid_qpn: u32,
    /// The responder's J_KEY (OPFN).
    pub jkey: u16,
    /// The responder is urgent-capable (OPFN `urg` non-zero).
    pub urg: bool,
    /// The responder's verbs QP number.
    pub verbs_qp: u32,
    /// This is the request's last segment: its last packet is a
    /// WRITE_DATA_LAST.
    pub last_segment: bool,
}

/// One WRITE_DATA packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPacket {
    /// What goes in the BTH.
    pub bth: BthFields,
    /// The header after the BTH.
    pub header: Repr,
    /// Payload bytes.
    pub len: u32,
    /// Byte offset of the payload in the segment's data.
    pub data_offset: u32,
    /// True for the segment's last packet.
    pub last: bool,
}

/// The requester's per-segment WRITE_DATA stream.
#[derive(Debug, Clone)]
pub struct DataBuilder<'a> {
    packets: RespBuilder<'a>,
    entries: usize,
    tid_qpn: u32,
    verbs_qp: u32,
    last_segment: bool,
    done: bool,
}

impl<'a> DataBuilder<'a> {
    /// A builder at the start of the segment.
    pub fn new(flow: &DataFlow<'a>) -> Self {
        Self {
            packets: RespBuilder::new(&RespFlow {
                entries: flow.entries,
                length: flow.length,
                pmtu: flow.pmtu,
                spsn: flow.spsn,
                generation: flow.generation,
                // WRITE_DATA carries no verbs PSN.
                ib_spsn: Psn::new(0),
                jkey: flow.jkey,
                urg: flow.urg,
            }),
            entries: flow.entries.len(),
            tid_qpn: flow.tid_qpn,
            verbs_qp: flow.verbs_qp,
            last_segment: flow.last_segment,
            done: false,
        }
    }

    /// The cursor (the kernel flow's `tid_idx`, `tid_offset`, `pkt`,
    /// `sent`).
    pub const fn cursor(&self) -> Cursor {
        self.packets.cursor()
    }

    /// True once the segment's last packet was built.
    pub const fn is_done(&self) -> bool {
        self.done
    }

    /// Moves the cursor (a restart). The segment is live again unless the
    /// cursor stands past its length or past its last TID entry.
    pub fn set_cursor(&mut self, c: Cursor) {
        self.packets.set_cursor(c);
        self.done = self.packets.is_done() || (self.entries > 0 && c.tid_idx >= self.entries);
    }

    /// Builds the next packet and advances the cursor.
    /// Kernel: `hfi1_build_tid_rdma_packet()`, and the opcode choice of
    /// `hfi1_make_tid_rdma_pkt()`.
    pub fn next_packet(&mut self) -> core::result::Result<DataPacket, BuildError> {
        if self.done {
            return Err(BuildError::Complete);
        }
        let p = self.packets.next_packet()?;
        // The cursor left the last entry: the driver ends the segment here
        // whatever its length says.
        let out_of_entries = self.packets.cursor().tid_idx >= self.entries;
        let last = p.last || out_of_entries;
        let kdeth0 = if last && !p.last {
            Kdeth0::new(Kdeth0Fields {
                offset: p.kdeth0.offset(),
                om: p.kdeth0.om(),
                tid: p.kdeth0.tid(),
                tidctrl: p.kdeth0.tidctrl(),
                intr: false,
                sh: false,
            })?
        } else {
            p.kdeth0
        };
        self.done = last;
        let opcode = if last && self.last_segment {
            OP_TID_RDMA_WRITE_DATA_LAST
        } else {
            OP_TID_RDMA_WRITE_DATA
        };
        Ok(DataPacket {
            bth: BthFields {
                opcode,
                dest_qp: self.tid_qpn,
                psn: p.bth_psn.as_psn(),
                ack_req: last,
            },
            header: Repr {
                kdeth: kdeth::Repr {
                    kdeth0,
                    kdeth1: p.kdeth1,
                },
                verbs_qp: self.verbs_qp,
            },
            len: p.len,
            data_offset: p.data_offset,
            last,
        })
    }
}

impl Iterator for DataBuilder<'_> {
    type Item = core::result::Result<DataPacket, BuildError>;

    /// Yields packets until the segment's last one; an error ends the
    /// stream after it is yielded.
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_packet() {
            Err(BuildError::Complete) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
            ok => Some(ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfi1_hal::{FlowPsn, Kdeth1, TidCtrl};

    // kdeth0 0x6C05_8040 (KVER 1, SH, TIDCTRL 3, TID 5, OM, OFFSET 64),
    // J_KEY 0x20; reserved words holding stale bytes; verbs QP 0x00_0789;
    // four data bytes.
    const BYTES: [u8; 40] = [
        0x40, 0x80, 0x05, 0x6C, 0x20, 0x00, 0x00, 0x00, // KDETH
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
        0x00, 0x00, 0x07, 0x89, // verbs qp
        0xDE, 0xAD, 0xBE, 0xEF, // data
    ];

    #[test]
    fn parse_and_emit_literal() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.kdeth.kdeth0.raw(), 0x6C05_8040);
        assert_eq!(r.kdeth.kdeth0.byte_offset(), 64 * 64);
        assert_eq!(r.kdeth.kdeth1, Kdeth1::with_jkey(0x20));
        assert_eq!(r.verbs_qp, 0x789);
        assert_eq!(p.payload(), &[0xDE, 0xAD, 0xBE, 0xEF]);
        assert!(!p.reserved_is_zero());
        let mut out = [0xFFu8; 40];
        let mut q = Packet::new_unchecked(&mut out[..]);
        r.emit(&mut q).unwrap();
        q.payload_mut().copy_from_slice(&BYTES[36..]);
        let mut want = BYTES;
        want[8..32].fill(0);
        assert_eq!(out, want);
        assert!(Packet::new_checked(&BYTES[..35]).is_err());
    }

    fn flow(entries: &[TidEntry], length: u32, last_segment: bool) -> DataFlow<'_> {
        DataFlow {
            entries,
            length,
            pmtu: 4096,
            spsn: 0x7FE,
            generation: Generation::masked(9),
            tid_qpn: 0x80_1003,
            jkey: 32,
            urg: true,
            verbs_qp: 0x44,
            last_segment,
        }
    }

    #[test]
    fn segment_stream() {
        // 12 KiB over a pair of 2 pages and an odd entry of 1 page.
        let e = [
            TidEntry::new(1, TidCtrl::Pair, 2).unwrap(),
            TidEntry::new(2, TidCtrl::Odd, 1).unwrap(),
        ];
        let pkts: Vec<_> = DataBuilder::new(&flow(&e, 12288, false))
            .map(|p| p.unwrap())
            .collect();
        assert_eq!(pkts.len(), 3);
        let k: Vec<_> = pkts.iter().map(|p| p.header.kdeth.kdeth0.raw()).collect();
        // SH | INTR | TIDCTRL 3 | TID 1 | OM | OFFSET 0, then OFFSET 64,
        // then the last: TIDCTRL 2, TID 2, OM, no SH, no INTR.
        assert_eq!(k, [0x7C01_8000, 0x7C01_8040, 0x4802_8000]);
        // The sequence wraps inside the generation.
        let psns: Vec<_> = pkts.iter().map(|p| p.bth.psn.get()).collect();
        let g = 9 << 11;
        assert_eq!(psns, [g | 0x7FE, g | 0x7FF, g]);
        assert!(pkts.iter().all(|p| p.bth.dest_qp == 0x80_1003));
        assert_eq!(
            pkts.iter().map(|p| p.bth.opcode).collect::<Vec<_>>(),
            [0xE2, 0xE2, 0xE2],
            "a segment that is not the request's last ends on WRITE_DATA"
        );
        assert_eq!(
            pkts.iter().map(|p| p.bth.ack_req).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert_eq!(
            pkts.iter().map(|p| p.data_offset).collect::<Vec<_>>(),
            [0, 4096, 8192]
        );
        let last: Vec<_> = DataBuilder::new(&flow(&e, 12288, true))
            .map(|p| p.unwrap().bth.opcode)
            .collect();
        assert_eq!(last, [0xE2, 0xE2, 0xE3]);
    }

    #[test]
    fn entries_running_out_end_the_segment() {
        // The entries cover 8 KiB of a 12 KiB segment: the second packet
        // is the last, as the driver's `tid_idx == tidcnt - 1` rule says.
        let e = [TidEntry::new(1, TidCtrl::Pair, 2).unwrap()];
        let mut b = DataBuilder::new(&flow(&e, 12288, true));
        let p0 = b.next_packet().unwrap();
        assert!(!p0.last && p0.header.kdeth.kdeth0.sh());
        let p1 = b.next_packet().unwrap();
        assert!(p1.last && p1.bth.ack_req);
        assert_eq!(p1.bth.opcode, 0xE3);
        assert!(!p1.header.kdeth.kdeth0.sh() && !p1.header.kdeth.kdeth0.intr());
        assert_eq!(p1.header.kdeth.kdeth0.offset(), 64);
        assert_eq!(b.next_packet(), Err(BuildError::Complete));
        assert!(b.is_done());
        // A restart to the second packet is live again.
        b.set_cursor(Cursor {
            tid_idx: 0,
            tid_offset: 4096,
            pkt: 1,
            sent: 4096,
        });
        assert!(!b.is_done());
        assert_eq!(b.next_packet().unwrap(), p1);
    }

    #[test]
    fn errors_end_the_stream() {
        let empty = [TidEntry::from_raw(0)];
        let mut it = DataBuilder::new(&flow(&empty, 4096, true));
        assert_eq!(it.next(), Some(Err(BuildError::EmptyEntry)));
        assert_eq!(it.next(), None);
        let mut it = DataBuilder::new(&flow(&[], 4096, true));
        assert_eq!(it.next(), Some(Err(BuildError::OutOfEntries)));
        assert_eq!(it.next(), None);
        let first = DataBuilder::new(&flow(&[TidEntry::from_raw(0x0030_0001)], 4096, true))
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(
            first.bth.psn,
            FlowPsn::new(Generation::masked(9), 0x7FE).as_psn()
        );
    }
}
