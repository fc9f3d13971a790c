// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A request's flow ring and its flow records as the software platform
//! keeps them ([`TidRequest`], [`FlowRecord`]), and the sim-facing entry
//! points of segment setup and teardown (`setup_segment` /
//! `clear_segment`), which run the engine of [`crate::setup`] on them.
//!
//! The records and their ring are here; the request that owns them is in
//! `request`, the walk of a scatter list into a segment's pages in `walk`.

use arrayvec::ArrayVec;
use core::ops::{Deref, DerefMut};
use hfi1_hal::consts::{MAX_FLOWS, MAX_PAGESETS};

use hfi1_hal::services::InitInPlace;
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Psn, TidEntry};
use tid_alloc::groups::ProgramSink;
use tid_alloc::{AllocError, PageSet, PageSets, TidNode, find_phys_blocks_into};

use crate::setup::{FlowSetup, SegmentRecord};

mod request;
mod walk;

pub use request::{TidRequest, clear_all_segments, clear_segment, setup_segment};
pub use walk::{Sge, SgeCursor, SgeWalk};

/// The ring size as the `u16` cursors use it.
const RING: u16 = MAX_FLOWS as u16;
const RING_MASK: u16 = RING - 1;

/// Entries between `tail` and `head` of a ring of [`MAX_FLOWS`].
/// Kernel: `CIRC_CNT(head, tail, MAX_FLOWS)`.
pub const fn ring_count(head: u16, tail: u16) -> u16 {
    head.wrapping_sub(tail) & RING_MASK
}

/// Free slots of the ring (one is always kept empty).
/// Kernel: `CIRC_SPACE(head, tail, MAX_FLOWS)`.
pub const fn ring_space(head: u16, tail: u16) -> u16 {
    tail.wrapping_sub(head).wrapping_sub(1) & RING_MASK
}

/// The next ring position. Kernel: `CIRC_NEXT()`.
pub const fn ring_next(i: u16) -> u16 {
    i.wrapping_add(1) & RING_MASK
}

/// The ring positions from `tail` up to, not including, `head`, oldest
/// first: the [`ring_count`] entries between them, wrapping past the last
/// slot. `tail == head` is empty (one slot is always kept empty, so a
/// ring's cursors never meet when it is full). Both are ring positions
/// (below [`MAX_FLOWS`]), as [`ring_next`] keeps them.
pub fn ring_indices(tail: u16, head: u16) -> impl DoubleEndedIterator<Item = u16> + Clone {
    (0..ring_count(head, tail)).map(move |n| tail.wrapping_add(n) & RING_MASK)
}

/// One segment's flow state (sequence numbers).
/// Kernel: `struct flow_state` inside `tid_rdma_flow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentPsns {
    /// The flow's generation.
    pub generation: Generation,
    /// First 11-bit flow sequence of the segment. Kernel: `spsn`.
    pub spsn: u32,
    /// Last 11-bit flow sequence (`spsn + npkts - 1`). Kernel: `lpsn`.
    pub lpsn: u32,
    /// The next full flow PSN expected. Kernel: `r_next_psn`.
    pub r_next_psn: FlowPsn,
    /// First IB PSN of the segment (set by the protocol).
    /// Kernel: `ib_spsn`.
    pub ib_spsn: Psn,
    /// Last IB PSN of the segment (set by the protocol).
    /// Kernel: `ib_lpsn`.
    pub ib_lpsn: Psn,
    /// The IB PSN of the WRITE_RESP that gave the segment (set by the
    /// protocol, both WRITE roles). Kernel: `resp_ib_psn`.
    pub resp_ib_psn: Psn,
}

impl SegmentPsns {
    /// The full flow PSN of sequence `seq` in this segment's generation.
    /// Kernel: `full_flow_psn()`.
    pub fn full_psn(&self, seq: u32) -> FlowPsn {
        FlowPsn::new(self.generation, seq)
    }
}

/// One segment of a request. Kernel: `struct tid_rdma_flow`.
///
/// # Locking
///
/// Part of the request, guarded by the QP's `s_lock`.
#[derive(Debug, Clone, Default)]
pub struct FlowRecord {
    /// The segment's page sets, with their bus addresses once mapped.
    /// Kernel: `pagesets[0..npagesets)`.
    pub pagesets: PageSets,
    /// Bit i: page set i is DMA-mapped. Kernel: `pagesets[i].mapped`.
    pub mapped: u64,
    /// The TID groups the segment's RcvArray entries are in (empty when
    /// none). Kernel: `tnode[0..tnode_cnt)`.
    pub tnodes: ArrayVec<TidNode, MAX_PAGESETS>,
    /// The TID entries to send to the peer. Kernel: `tid_entry[0..tidcnt)`.
    pub tid_entries: ArrayVec<TidEntry, MAX_PAGESETS>,
    /// Packets the segment takes. Kernel: `npkts`.
    pub npkts: u32,
    /// The hardware flow the segment uses (the QP's at setup).
    /// Kernel: `idx`.
    pub idx: Option<FlowIndex>,
    /// Bytes of the segment. Kernel: `length`.
    pub length: u32,
    /// Sequence numbers. Kernel: `flow_state`.
    pub psns: SegmentPsns,
    /// Packets sent or received so far (protocol cursor). Kernel: `pkt`.
    pub pkt: u32,
    /// Current TID entry (protocol cursor). Kernel: `tid_idx`.
    pub tid_idx: u32,
    /// Byte offset in the current TID entry (protocol cursor).
    /// Kernel: `tid_offset`.
    pub tid_offset: u32,
    /// Bytes sent (protocol cursor). Kernel: `sent`.
    pub sent: u32,
    /// Packets counted for a RESYNC. Kernel: `resync_npkts`.
    pub resync_npkts: u32,
    /// The KDETH QP number the segment's data packets go to: the
    /// responder's KDETH QP with the flow index in bits 11..16 and the
    /// receive context in the low byte (set by the protocol; a WRITE
    /// requester takes it from the WRITE_RESP). Kernel: `tid_qpn`.
    pub tid_qpn: u32,
}

impl FlowRecord {
    /// True when the segment's RcvArray entries are programmed.
    pub fn is_programmed(&self) -> bool {
        !self.tnodes.is_empty()
    }

    /// True when the record counts as mapped. Kernel: `dma_mapped()`
    /// (`pagesets[0].mapped`).
    pub fn is_mapped(&self) -> bool {
        self.mapped & 1 != 0
    }

    /// Page sets mapped now.
    pub fn mapped_sets(&self) -> u32 {
        self.mapped.count_ones()
    }
}

/// Where programming writes a sim record's TID entries and packets.
#[derive(Debug)]
pub struct RecordSink<'a> {
    entries: &'a mut ArrayVec<TidEntry, MAX_PAGESETS>,
    npkts: &'a mut u32,
}

impl ProgramSink for RecordSink<'_> {
    fn reset(&mut self) {
        self.entries.clear();
        *self.npkts = 0;
    }

    fn push_entry(&mut self, entry: TidEntry) {
        // Cannot fail: at most one TID entry per page set.
        let _ = self.entries.try_push(entry);
    }

    fn add_packets(&mut self, n: u32) {
        *self.npkts = self.npkts.wrapping_add(n);
    }
}

impl SegmentRecord for FlowRecord {
    type Nodes<'a> = &'a mut ArrayVec<TidNode, MAX_PAGESETS>;
    type Sets<'a> = &'a [PageSet];
    type Sink<'a> = RecordSink<'a>;

    fn has_pagesets(&self) -> bool {
        !self.pagesets.is_empty()
    }

    fn find_pagesets(&mut self, pages: &[u64], pmtu: u32, length: u32) -> Result<(), AllocError> {
        find_phys_blocks_into(pages, pmtu, &mut self.pagesets)?;
        self.length = length;
        Ok(())
    }

    fn forget_pagesets(&mut self) {
        self.pagesets.clear();
    }

    fn pageset_count(&self) -> usize {
        self.pagesets.len()
    }

    fn pageset(&self, i: usize) -> Option<PageSet> {
        self.pagesets.get(i).copied()
    }

    fn is_mapped(&self) -> bool {
        FlowRecord::is_mapped(self)
    }

    fn is_set_mapped(&self, i: usize) -> bool {
        i < 64 && self.mapped & (1 << i) != 0
    }

    fn set_mapped(&mut self, i: usize, bus: u64) {
        if let Some(ps) = self.pagesets.get_mut(i) {
            ps.dma = bus;
            self.mapped |= 1 << i;
        }
    }

    fn set_unmapped(&mut self, i: usize) {
        if i < 64 {
            self.mapped &= !(1 << i);
        }
    }

    fn nodes_mut(&mut self) -> &mut ArrayVec<TidNode, MAX_PAGESETS> {
        &mut self.tnodes
    }

    fn program_parts(
        &mut self,
    ) -> (
        &mut ArrayVec<TidNode, MAX_PAGESETS>,
        &[PageSet],
        RecordSink<'_>,
    ) {
        (
            &mut self.tnodes,
            &self.pagesets,
            RecordSink {
                entries: &mut self.tid_entries,
                npkts: &mut self.npkts,
            },
        )
    }

    fn npkts(&self) -> u32 {
        self.npkts
    }

    fn set_flow(&mut self, setup: &FlowSetup) {
        self.idx = setup.idx;
        self.psns = SegmentPsns {
            generation: setup.generation,
            spsn: setup.spsn,
            lpsn: setup.lpsn,
            r_next_psn: setup.r_next_psn,
            ib_spsn: Psn::new(0),
            ib_lpsn: Psn::new(0),
            resp_ib_psn: Psn::new(0),
        };
    }
}

/// A request's eight flow records. Kernel: `req->flows` (`MAX_FLOWS`
/// records, one allocation of about 18 KiB, so it is initialised in place,
/// one record at a time: [`InitInPlace`]).
#[repr(transparent)]
pub struct FlowRing([FlowRecord; MAX_FLOWS]);

impl core::fmt::Debug for FlowRing {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl Deref for FlowRing {
    type Target = [FlowRecord; MAX_FLOWS];

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for FlowRing {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

// SAFETY: `init_in_place` writes a valid `FlowRecord` into each of the
// `MAX_FLOWS` elements, which is all a `FlowRing` holds
// (`repr(transparent)` over the array).
unsafe impl InitInPlace for FlowRing {
    unsafe fn init_in_place(ptr: *mut Self) {
        let first = ptr.cast::<FlowRecord>();
        for i in 0..MAX_FLOWS {
            // SAFETY: the caller gives room for one `FlowRing`, which is
            // `MAX_FLOWS` consecutive records; `i` stays inside it.
            unsafe { first.add(i).write(FlowRecord::default()) };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn full_psn_is_the_sequence_in_the_segments_generation() {
        let g = Generation::new(0x2_0001).unwrap();
        let psns = SegmentPsns {
            generation: g,
            ..SegmentPsns::default()
        };
        assert_eq!(psns.full_psn(0x7FE), FlowPsn::new(g, 0x7FE));
        assert_ne!(psns.full_psn(3), FlowPsn::default());
    }

    #[test]
    fn ring_arithmetic() {
        assert_eq!((ring_count(3, 1), ring_space(3, 1)), (2, 5));
        assert_eq!((ring_count(1, 3), ring_space(1, 3)), (6, 1));
        assert_eq!((ring_count(5, 5), ring_space(5, 5)), (0, 7));
        assert_eq!(ring_next(7), 0);
    }

    /// The positions a `while i != head { i = ring_next(i) }` walk visits.
    fn stepped(tail: u16, head: u16) -> Vec<u16> {
        let mut v = Vec::new();
        let mut i = tail;
        while i != head {
            v.push(i);
            i = ring_next(i);
        }
        v
    }

    #[test]
    fn ring_indices_of_meeting_cursors_are_empty() {
        for i in 0..RING {
            assert_eq!(ring_indices(i, i).count(), 0);
        }
    }

    #[test]
    fn ring_indices_wrap_past_the_last_slot() {
        let got: Vec<u16> = ring_indices(RING - 2, 2).collect();
        assert_eq!(got, [RING - 2, RING - 1, 0, 1]);
    }

    /// A full ring (`ring_space == 0`) walks its `RING - 1` entries.
    #[test]
    fn ring_indices_of_a_full_ring_walk_every_entry() {
        for tail in 0..RING {
            let head = (tail + RING - 1) & RING_MASK;
            assert_eq!(ring_space(head, tail), 0);
            let got: Vec<u16> = ring_indices(tail, head).collect();
            assert_eq!(got.len(), usize::from(RING - 1));
            assert_eq!(got, stepped(tail, head));
        }
    }

    #[test]
    fn ring_indices_match_the_stepping_walk() {
        for tail in 0..RING {
            for head in 0..RING {
                let got: Vec<u16> = ring_indices(tail, head).collect();
                assert_eq!(got, stepped(tail, head), "{tail}..{head}");
            }
        }
    }
}
