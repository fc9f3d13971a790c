// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The responder's READ_RESP stream for one segment: what each packet
//! carries ([`RespBuilder`]) and the whole packet ([`write_packet`]). The
//! header's bytes are [`crate::wire::read_resp`]'s; the request the
//! stream answers is checked by [`crate::admission`].
//!
//! [`RespBuilder`] yields a segment's READ_RESP packets one at a time
//! (SPEC §5 "Responder"): each carries `min(pmtu, rest of the current TID
//! entry)` bytes; KDETH TID/TIDCTRL come from the entry, OM is always the
//! 64-byte mode, OFFSET is the offset inside the entry in 64-byte units;
//! SH is set on all but the last packet, INTR on all but the last when the
//! peer is urgent-capable; the BTH PSN is the flow PSN `generation << 11 |
//! (spsn + pkt) & 0x7FF`; `verbs_psn` is the segment's first IB PSN plus
//! the packet index. Kernel: `hfi1_build_tid_rdma_read_resp()`.
//!
//! Kept from the driver, bit for bit (the vectors check them):
//!
//! - a packet never spans two TID entries, and its length is **not**
//!   clipped to the rest of the flow's length: a flow whose length ends
//!   inside a packet still sends the whole `min(pmtu, rest of entry)`;
//! - "last" means bytes sent so far >= the flow's length;
//! - the packet counter is 8 bits and wraps at 256, and the 11-bit sequence
//!   wraps inside the generation without touching it;
//! - OFFSET keeps only 15 bits (it wraps for entries above 2 MiB).
//!
//! Where the driver would read past its entry array or loop on an entry of
//! LEN 0 (inputs a validated request cannot carry), the builder returns an
//! error instead. The driver's other odd path, the peer's OPFN record gone
//! mid-flow (it then counts the bytes as sent but builds no header), is the
//! responder state machine's to handle: this builder takes the J_KEY and
//! urgency as inputs.

use hfi1_hal::fields::Kdeth0Fields;
use hfi1_hal::flags::Kdeth0Flags;
use hfi1_hal::{FlowPsn, Generation, Kdeth0, Kdeth1, Psn, TidEntry};

use hfi1_hal::consts::OP_TID_RDMA_READ_RESP;

use crate::packet::{BthOut, PacketError, Path, frame};
use crate::qualify::div_round_up_mtu;
use crate::wire::{self, read_resp};

/// KDETH OFFSET width.
const OFFSET_MASK: u32 = 0x7FFF;
/// OM large: OFFSET counts 64-byte units. Kernel: `KDETH_OM_LARGE`.
const OM_LARGE: u32 = 64;
/// Bytes per page (TID entry LEN unit).
const PAGE: u32 = hfi1_hal::consts::PAGE_SIZE;
/// Why a packet could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Every packet of the flow was already built.
    #[error("flow already complete")]
    Complete,
    /// The cursor ran past the last TID entry before the flow's length was
    /// sent (the entries do not cover the length).
    #[error("TID entries exhausted")]
    OutOfEntries,
    /// The current TID entry has LEN 0.
    #[error("TID entry of length 0")]
    EmptyEntry,
    /// The path MTU is zero.
    #[error("zero MTU")]
    ZeroMtu,
    /// A rewind asked for more packets than the entries hold.
    #[error("rewind beyond the flow")]
    RewindBeyondFlow,
    /// A KDETH field did not fit (cannot happen: every field is masked).
    #[error("field: {0}")]
    Field(#[from] hfi1_hal::FieldError),
    /// A header could not be written.
    #[error("wire: {0}")]
    Wire(#[from] wire::Error),
}

/// Kernel: `flow->tid_idx`, `tid_offset`, `pkt`, `sent`.
///
/// Where a flow's packet stream stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cursor {
    /// Index of the current TID entry.
    pub tid_idx: usize,
    /// Byte offset inside the current entry.
    pub tid_offset: u32,
    /// Packets built (8 bits, wraps like the driver's counter).
    pub pkt: u8,
    /// Bytes sent.
    pub sent: u32,
}

impl Cursor {
    /// Kernel: the flow rewind in `hfi1_tid_rdma_restart_req()`.
    ///
    /// The cursor after `packets` packets of a flow over `entries`, as a
    /// restart rewinds it: the same cursor [`RespBuilder`] has after
    /// building that many packets.
    ///
    /// Deviation, on purpose: the driver advances the entry offset by
    /// `packets × pmtu` even when the entry's last packet was shorter than
    /// the MTU (an 8 KiB MTU over a 4 KiB or 12 KiB entry), so a rewind
    /// that ends exactly after such an entry leaves its cursor on that
    /// entry with an offset past its end, and the re-sent READ_REQ names
    /// the finished entry again. Here the offset grows by the bytes really
    /// sent, so the cursor moves on to the next entry.
    pub fn rewound(entries: &[TidEntry], pmtu: u32, packets: u32) -> Result<Self, BuildError> {
        if pmtu == 0 {
            return Err(BuildError::ZeroMtu);
        }
        let mut c = Self::default();
        let mut left = packets;
        let mut idx = 0usize;
        if left != 0 {
            for e in entries {
                c.tid_offset = 0;
                let tidlen = e.len().wrapping_mul(PAGE);
                let tidnpkts = div_round_up_mtu(tidlen, pmtu);
                let n = left.min(tidnpkts);
                // The driver's counter is a u8.
                #[allow(clippy::cast_possible_truncation)]
                let n8 = n as u8;
                c.pkt = c.pkt.wrapping_add(n8);
                let bytes = if n == tidnpkts {
                    tidlen
                } else {
                    n.wrapping_mul(pmtu)
                };
                c.sent = c.sent.wrapping_add(bytes);
                // The driver adds n * pmtu here even when the entry's last
                // packet was short; see the deviation in the doc above.
                c.tid_offset = c.tid_offset.wrapping_add(bytes);
                left -= n;
                if left == 0 {
                    break;
                }
                idx += 1;
            }
            if left != 0 {
                return Err(BuildError::RewindBeyondFlow);
            }
        }
        let cur_len = entries.get(idx).map_or(0, |e| e.len().wrapping_mul(PAGE));
        if c.tid_offset == cur_len {
            idx += 1;
            c.tid_offset = 0;
        }
        c.tid_idx = idx;
        Ok(c)
    }
}

/// One READ_RESP packet's variable fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RespPacket {
    /// Payload bytes.
    pub len: u32,
    /// KDETH word 0.
    pub kdeth0: Kdeth0,
    /// KDETH word 1 (J_KEY only).
    pub kdeth1: Kdeth1,
    /// BTH PSN: the flow PSN.
    pub bth_psn: FlowPsn,
    /// `verbs_psn`: the IB PSN this packet consumes.
    pub verbs_psn: Psn,
    /// Byte offset of the payload in the segment's data (where to copy
    /// from).
    pub data_offset: u32,
    /// True for the segment's last packet.
    pub last: bool,
}

/// The responder's per-segment READ_RESP stream.
#[derive(Debug, Clone)]
pub struct RespBuilder<'a> {
    entries: &'a [TidEntry],
    length: u32,
    pmtu: u32,
    spsn: u32,
    generation: Generation,
    ib_spsn: Psn,
    jkey: u16,
    urg: bool,
    cursor: Cursor,
    done: bool,
    /// The entry the cached fields below were worked out for
    /// (`usize::MAX`: none yet).
    cached_idx: usize,
    /// That entry's bytes.
    cached_len: u32,
    /// That entry's KDETH word 0 with OFFSET 0 and SH and INTR clear.
    cached_kdeth0: Kdeth0,
}

/// What a segment's READ_RESP stream is built from.
#[derive(Debug, Clone, Copy)]
pub struct RespFlow<'a> {
    /// The requester's TID entries for this segment.
    pub entries: &'a [TidEntry],
    /// Bytes the requester asked for.
    pub length: u32,
    /// Path MTU in bytes.
    pub pmtu: u32,
    /// First flow sequence (11 bits used).
    pub spsn: u32,
    /// The flow's generation.
    pub generation: Generation,
    /// IB PSN of the READ_REQ (the segment's first IB PSN).
    pub ib_spsn: Psn,
    /// The requester's J_KEY (from OPFN; the low 8 bits travel).
    pub jkey: u16,
    /// The requester is urgent-capable (OPFN `urg` non-zero).
    pub urg: bool,
}

impl<'a> RespBuilder<'a> {
    /// A builder at the start of the flow.
    pub fn new(flow: &RespFlow<'a>) -> Self {
        Self {
            entries: flow.entries,
            length: flow.length,
            pmtu: flow.pmtu,
            spsn: flow.spsn,
            generation: flow.generation,
            ib_spsn: flow.ib_spsn,
            jkey: flow.jkey,
            urg: flow.urg,
            cursor: Cursor::default(),
            done: false,
            cached_idx: usize::MAX,
            cached_len: 0,
            cached_kdeth0: Kdeth0::VERSION_ONLY,
        }
    }

    /// The cursor.
    pub const fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// True once the last packet was built.
    pub const fn is_done(&self) -> bool {
        self.done
    }

    /// Moves the cursor (a restart). The flow is live again unless the
    /// cursor already stands past the flow's length.
    pub fn set_cursor(&mut self, c: Cursor) {
        self.cursor = c;
        self.done = c.sent > 0 && c.sent >= self.length;
    }

    /// Rewinds to the start of the flow (a duplicate READ_REQ rebuilds the
    /// whole segment).
    pub fn reset(&mut self) {
        self.set_cursor(Cursor::default());
    }

    /// Kernel: `hfi1_build_tid_rdma_read_resp()`.
    ///
    /// Builds the next packet and advances the cursor.
    ///
    /// The entry's length and the KDETH fields it gives (TID, TIDCTRL, OM)
    /// are checked and worked out once per entry, when the cursor first
    /// stands on it; a packet adds its OFFSET and the SH / INTR bits.
    #[inline]
    pub fn next_packet(&mut self) -> Result<RespPacket, BuildError> {
        if self.done {
            return Err(BuildError::Complete);
        }
        let c = self.cursor;
        if c.tid_idx != self.cached_idx {
            self.enter_entry(c.tid_idx)?;
        }
        let tidlen = self.cached_len;
        let len = self.pmtu.min(tidlen.wrapping_sub(c.tid_offset));
        let sent = c.sent.wrapping_add(len);
        let last = sent >= self.length;
        let offset =
            Kdeth0::from_raw(self.cached_kdeth0.raw() | ((c.tid_offset / OM_LARGE) & OFFSET_MASK));
        let flags = if self.urg {
            Kdeth0Flags::SH.union(Kdeth0Flags::INTR)
        } else {
            Kdeth0Flags::SH
        };
        let pkt = RespPacket {
            len,
            kdeth0: offset.with_flags(flags, !last),
            kdeth1: Kdeth1::with_jkey(self.jkey),
            bth_psn: FlowPsn::new(self.generation, self.spsn.wrapping_add(u32::from(c.pkt))),
            verbs_psn: self.ib_spsn.add(u32::from(c.pkt)),
            data_offset: c.sent,
            last,
        };
        let next_offset = c.tid_offset.wrapping_add(len);
        let next_entry = next_offset >= tidlen;
        self.cursor = Cursor {
            tid_idx: c.tid_idx.wrapping_add(usize::from(next_entry)),
            tid_offset: if next_entry { 0 } else { next_offset },
            pkt: c.pkt.wrapping_add(1),
            sent,
        };
        self.done = last;
        Ok(pkt)
    }

    /// Checks entry `idx` and caches its length and KDETH fields (the
    /// per-entry half of [`Self::next_packet`]).
    #[inline]
    fn enter_entry(&mut self, idx: usize) -> Result<(), BuildError> {
        if self.pmtu == 0 {
            return Err(BuildError::ZeroMtu);
        }
        let entry = *self.entries.get(idx).ok_or(BuildError::OutOfEntries)?;
        if entry.is_empty() {
            return Err(BuildError::EmptyEntry);
        }
        self.cached_kdeth0 = Kdeth0::new(Kdeth0Fields {
            offset: 0,
            om: true,
            tid: entry.idx(),
            tidctrl: entry.ctrl_bits(),
            intr: false,
            sh: false,
        })?;
        self.cached_len = entry.len().wrapping_mul(PAGE);
        self.cached_idx = idx;
        Ok(())
    }
}

impl Iterator for RespBuilder<'_> {
    type Item = Result<RespPacket, BuildError>;

    /// Yields packets until the last one; an error ends the stream after
    /// it is yielded.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        // `next_packet` reports `Complete` exactly when `done` is set.
        if self.done {
            return None;
        }
        let r = self.next_packet();
        self.done |= r.is_err();
        Some(r)
    }
}

/// Kernel: the frame `make_rc_ack()` puts around
/// `hfi1_build_tid_rdma_read_resp()`.
///
/// Writes a whole READ_RESP (LRH, BTH, the header `hdr`, `payload_len`
/// bytes written by `payload`, ICRC) into `buf` and returns its length: BTH
/// destination `dest_qp` (the requester's `tid_flow_qp`), BTH PSN `psn`
/// (the flow PSN).
///
/// # Errors
///
/// [`PacketError::NoRoom`] if `buf` is too short, [`PacketError::Source`]
/// if `payload` fails.
pub fn write_packet(
    buf: &mut [u8],
    path: Path,
    dest_qp: u32,
    psn: Psn,
    hdr: &read_resp::Repr,
    payload_len: usize,
    payload: impl FnOnce(&mut [u8]) -> bool,
) -> Result<usize, PacketError> {
    let b = BthOut {
        opcode: OP_TID_RDMA_READ_RESP,
        dest_qp,
        ack_req: false,
        psn,
    };
    frame(buf, path, b, read_resp::HEADER_LEN + payload_len, |body| {
        let mut p = read_resp::Packet::new_unchecked(body);
        hdr.emit(&mut p)?;
        let out = p
            .payload_mut()
            .get_mut(..payload_len)
            .ok_or(PacketError::NoRoom)?;
        if payload(out) {
            Ok(())
        } else {
            Err(PacketError::Source)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfi1_hal::TidCtrl;

    fn flow(entries: &[TidEntry], length: u32, pmtu: u32) -> RespFlow<'_> {
        RespFlow {
            entries,
            length,
            pmtu,
            spsn: 10,
            generation: Generation::masked(7),
            ib_spsn: Psn::new(100),
            jkey: 32,
            urg: true,
        }
    }

    #[test]
    fn pair_entry_at_4k() {
        let e = [TidEntry::new(2, TidCtrl::Pair, 64).unwrap()];
        let pkts: Vec<_> = RespBuilder::new(&flow(&e, 256 * 1024, 4096))
            .map(Result::unwrap)
            .collect();
        assert_eq!(pkts.len(), 64);
        for (i, p) in pkts.iter().enumerate() {
            let i32_ = u32::try_from(i).unwrap();
            assert_eq!(p.len, 4096);
            assert_eq!(p.kdeth0.offset(), i32_ * 64);
            assert_eq!((p.kdeth0.tid(), p.kdeth0.tidctrl()), (2, 3));
            assert_eq!(p.kdeth0.sh(), i != 63);
            assert_eq!(p.kdeth0.intr(), i != 63);
            assert_eq!(p.bth_psn.seq(), 10 + i32_);
            assert_eq!(p.verbs_psn, Psn::new(100 + i32_));
            assert_eq!(p.last, i == 63);
        }
    }

    #[test]
    fn errors() {
        let e = [TidEntry::new(0, TidCtrl::Even, 1).unwrap()];
        let mut b = RespBuilder::new(&flow(&e, 8192, 4096));
        assert!(b.next_packet().is_ok());
        assert_eq!(b.next_packet(), Err(BuildError::OutOfEntries));
        let z = [TidEntry::from_raw(1 << 20)];
        let mut b = RespBuilder::new(&flow(&z, 4096, 4096));
        assert_eq!(b.next_packet(), Err(BuildError::EmptyEntry));
        let mut b = RespBuilder::new(&flow(&e, 4096, 4096));
        assert!(b.next_packet().unwrap().last);
        assert_eq!(b.next_packet(), Err(BuildError::Complete));
        assert!(b.next().is_none());
        b.reset();
        assert!(b.next_packet().unwrap().last);
        let mut b = RespBuilder::new(&flow(&e, 4096, 0));
        assert_eq!(b.next_packet(), Err(BuildError::ZeroMtu));
    }

    #[test]
    fn rewind_examples() {
        let e = [
            TidEntry::new(0, TidCtrl::Pair, 3).unwrap(),
            TidEntry::new(1, TidCtrl::Even, 2).unwrap(),
        ];
        // 8 KiB MTU: entry 0 gives 8K + 4K, entry 1 gives 8K.
        let c = Cursor::rewound(&e, 8192, 1).unwrap();
        assert_eq!((c.tid_idx, c.tid_offset, c.pkt, c.sent), (0, 8192, 1, 8192));
        let c = Cursor::rewound(&e, 8192, 2).unwrap();
        assert_eq!((c.tid_idx, c.tid_offset, c.pkt, c.sent), (1, 0, 2, 12288));
        let c = Cursor::rewound(&e, 8192, 0).unwrap();
        assert_eq!(c, Cursor::default());
        assert_eq!(
            Cursor::rewound(&e, 8192, 4),
            Err(BuildError::RewindBeyondFlow)
        );
    }
}
