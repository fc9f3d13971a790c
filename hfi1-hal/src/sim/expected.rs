// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Expected receive: what the chip does with a KDETH packet that arrives
//! for one of its receive contexts (SPEC §6).
//!
//! # What the model does
//!
//! 1. The hardware flow is named by bits 11..=15 of the packet's
//!    destination QP; its register is read.
//! 2. Generation check: the packet's flow PSN generation must equal the
//!    register's. A stale generation is delivered to software with
//!    [`RcvError::FlowGen`] and nothing is placed.
//! 3. TID check: KDETH TID names an RcvArray *pair* (`expected_base +
//!    2 * TID`); TIDCTRL 1 selects the even entry, 2 the odd one, 3 both
//!    (the odd entry's buffer follows the even one's, and a packet may
//!    cross from one into the other: the 8 KiB MTU layout pairs two
//!    scattered 4 KiB pages for one 8 KiB packet). The span must be
//!    programmed EXPECTED and `OFFSET × (OM ? 64 : 4) + payload` must fit in
//!    it; otherwise the packet is delivered with [`RcvError::Tid`] and
//!    nothing is placed.
//! 4. Sequence check: the packet's 11-bit sequence must equal the
//!    register's next sequence. Ahead or behind: the payload *is* placed
//!    (the TID is valid), the register does not advance, its
//!    SEQ_MISMATCH status bit is set, and the packet is delivered with
//!    [`RcvError::FlowSeq`].
//! 5. In sequence: the payload is placed, the next sequence advances by one
//!    (wrapping inside the generation, as the chip does), and the packet
//!    reaches software only if KDETH SH is clear or the flow's HDR_SUPP_EN
//!    is off.
//!
//! # Assumptions beyond SPEC §6
//!
//! - A flow register without FLOW_VALID never occurs in our driver (software
//!   always writes it); the model treats it as a generation mismatch.
//! - Both KEEP_* bits are always set by software, so an error never
//!   invalidates the flow; the model keeps checking after errors.
//! - Status bits are only set, never cleared by the model (software
//!   rewrites the whole register when it arms a flow).
//! - The placement address is the entry's DMA address, which the sim's
//!   identity DMA mapping makes equal to the physical page address in
//!   [`SimMemory`]. A write to an absent page is reported as
//!   [`RcvError::Tid`] and counted as a fault.
//! - ICRC, VCRC, length and header checks belong to the fabric model, not
//!   here.
//!
//! # The ownership shadow (tests only)
//!
//! A test may tag RcvArray entries with who programmed them
//! ([`SimContext::tag_owner`]) and deliver packets with
//! [`SimContext::receive_expected_as`], naming the segment the packet
//! belongs to. A placement through an entry tagged for someone else is
//! counted in [`ExpectedStats::misplaced`]: data written into another
//! segment's buffer (a late copy of a finished segment whose TIDs were
//! handed on), which the chip does without complaint. Untagged entries are
//! not checked.

use crate::fields::{FlowIndex, FlowTableReg, Kdeth0};
use crate::platform::{FlowTable, RcvType};
use crate::psn::FlowPsn;
use crate::sim::SimContext;
use crate::sim::context::OwnerTag;
use crate::sim::memory::SimMemory;

/// The error flags the chip reports with a delivered packet (the RHF's
/// TID error and receive-type error for expected packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RcvError {
    /// Kernel: `RHF_TID_ERR`: the TID, its control bits or the offset do
    /// not name a programmed buffer large enough.
    Tid,
    /// Kernel: `RHF_RTE_EXPECTED_FLOW_SEQ_ERR`: sequence ahead or behind.
    FlowSeq,
    /// Kernel: `RHF_RTE_EXPECTED_FLOW_GEN_ERR`: stale generation.
    FlowGen,
}

/// A KDETH packet as the chip sees it on arrival.
#[derive(Debug, Clone, Copy)]
pub struct ExpectedPacket<'a> {
    /// BTH destination QP (bits 11..=15 name the hardware flow).
    pub dest_qp: u32,
    /// BTH PSN: the flow PSN (generation and sequence).
    pub psn: FlowPsn,
    /// KDETH word 0.
    pub kdeth0: Kdeth0,
    /// The payload bytes.
    pub payload: &'a [u8],
}

/// What the chip did with one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpectedOutcome {
    /// The hardware flow the packet was checked against.
    pub flow: FlowIndex,
    /// True if the packet reaches software (header queue).
    pub delivered: bool,
    /// True if its payload was written to memory.
    pub placed: bool,
    /// The error reported with it, if any.
    pub error: Option<RcvError>,
}

/// Counters of the expected-receive model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpectedStats {
    /// Packets whose payload was placed.
    pub placed_packets: u64,
    /// Payload bytes placed.
    pub placed_bytes: u64,
    /// In-sequence packets that never reached software.
    pub suppressed: u64,
    /// Packets delivered with a TID error.
    pub tid_errors: u64,
    /// Packets delivered with a flow sequence error.
    pub seq_errors: u64,
    /// Packets delivered with a flow generation error.
    pub gen_errors: u64,
    /// Placements through an entry tagged for another owner (module doc).
    pub misplaced: u64,
}

impl SimContext {
    /// Processes one arriving KDETH packet as the chip would.
    pub fn receive_expected(
        &mut self,
        mem: &mut SimMemory,
        pkt: ExpectedPacket<'_>,
    ) -> ExpectedOutcome {
        self.receive(mem, pkt, None)
    }

    /// [`SimContext::receive_expected`] for a packet of `owner`'s segment:
    /// a placement through an entry tagged for another owner is counted as
    /// misplaced (module doc). The chip's behaviour is the same.
    pub fn receive_expected_as(
        &mut self,
        mem: &mut SimMemory,
        pkt: ExpectedPacket<'_>,
        owner: OwnerTag,
    ) -> ExpectedOutcome {
        self.receive(mem, pkt, Some(owner))
    }

    fn receive(
        &mut self,
        mem: &mut SimMemory,
        pkt: ExpectedPacket<'_>,
        owner: Option<OwnerTag>,
    ) -> ExpectedOutcome {
        let flow = FlowIndex::new((pkt.dest_qp >> 11) & 0x1F).unwrap_or(FlowIndex::MIN);
        let reg = self.read_flow(flow);
        let outcome = |delivered, placed, error| ExpectedOutcome {
            flow,
            delivered,
            placed,
            error,
        };

        let next = reg.next_psn();
        if !reg.has(FlowTableReg::FLOW_VALID) || pkt.psn.generation() != next.generation() {
            self.set_flow_status(flow, reg.with(FlowTableReg::GEN_MISMATCH, true));
            self.expected_stats_mut().gen_errors += 1;
            return outcome(true, false, Some(RcvError::FlowGen));
        }

        let Some((addr, first, rest, used)) = self.placement_address(pkt.kdeth0, pkt.payload.len())
        else {
            self.expected_stats_mut().tid_errors += 1;
            return outcome(true, false, Some(RcvError::Tid));
        };
        let (head, tail) = pkt.payload.split_at(first.min(pkt.payload.len()));
        let written = mem.write(addr, head).and_then(|()| match rest {
            Some(b) if !tail.is_empty() => mem.write(b, tail),
            _ => Ok(()),
        });
        if written.is_err() {
            self.count_fault();
            self.expected_stats_mut().tid_errors += 1;
            return outcome(true, false, Some(RcvError::Tid));
        }
        let foreign = owner.is_some_and(|me| {
            used.into_iter()
                .flatten()
                .any(|e| self.owner(e).is_some_and(|o| o != me))
        });
        let stats = self.expected_stats_mut();
        stats.misplaced += u64::from(foreign);
        stats.placed_packets += 1;
        stats.placed_bytes += pkt.payload.len() as u64;

        if pkt.psn.seq() != next.seq() {
            self.set_flow_status(flow, reg.with(FlowTableReg::SEQ_MISMATCH, true));
            self.expected_stats_mut().seq_errors += 1;
            return outcome(true, true, Some(RcvError::FlowSeq));
        }

        self.set_flow_status(flow, reg.with_next_psn(next.next_seq()));
        let suppressed = pkt.kdeth0.sh() && reg.has(FlowTableReg::HDR_SUPP_EN);
        if suppressed {
            self.expected_stats_mut().suppressed += 1;
        }
        outcome(!suppressed, true, None)
    }

    /// Where a packet's payload goes: the bus address of its first byte,
    /// how many bytes go there, for a packet that crosses from the even
    /// into the odd buffer of a pair the odd buffer's address for the
    /// rest, and the entries written. `None` if the TID, TIDCTRL and offset
    /// do not name a programmed span that holds the packet.
    #[allow(clippy::type_complexity)] // Private; the four parts read better named at the caller.
    fn placement_address(
        &self,
        k: Kdeth0,
        len: usize,
    ) -> Option<(u64, usize, Option<u64>, [Option<u32>; 2])> {
        let even = self.expected_base().checked_add(k.tid().checked_mul(2)?)?;
        let (first, second) = match k.tidctrl() {
            1 => (even, None),
            2 => (even.checked_add(1)?, None),
            3 => (even, Some(even.checked_add(1)?)),
            _ => return None,
        };
        let a = *self.entry(first)?;
        if a.ty != RcvType::Expected || a.bytes() == 0 {
            return None;
        }
        let off = u64::from(k.byte_offset());
        let end = off.checked_add(len as u64)?;
        if end <= a.bytes() {
            return Some((a.pa.checked_add(off)?, len, None, [Some(first), None]));
        }
        // A pair (TIDCTRL 3) is one span: the even buffer, then the odd
        // one. With an 8 KiB MTU two scattered 4 KiB pages form a pair and
        // one packet fills both.
        let b = *self.entry(second?)?;
        if b.ty != RcvType::Expected || end > a.bytes().checked_add(b.bytes())? {
            return None;
        }
        if off >= a.bytes() {
            return Some((
                b.pa.checked_add(off - a.bytes())?,
                len,
                None,
                [second, None],
            ));
        }
        let in_a = usize::try_from(a.bytes() - off).ok()?;
        Some((
            a.pa.checked_add(off)?,
            in_a,
            Some(b.pa),
            [Some(first), second],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::Kdeth0Fields;
    use crate::platform::RcvArray;
    use crate::psn::Generation;

    fn setup() -> (SimContext, SimMemory, FlowIndex, Generation) {
        let mut c = SimContext::new(0, 16);
        let mut m = SimMemory::new();
        // Entry 2 (pair 1, even): 8 KiB at pfn 100..=101; entry 3 (odd): 4 KiB at pfn 300.
        m.add_page(100);
        m.add_page(101);
        m.add_page(300);
        c.put_tid(2, RcvType::Expected, 100 * 4096, 2);
        c.put_tid(3, RcvType::Expected, 300 * 4096, 1);
        let f = FlowIndex::new(5).unwrap();
        let g = Generation::new(77).unwrap();
        c.write_flow(f, FlowTableReg::for_generation(g));
        (c, m, f, g)
    }

    fn pkt(
        payload: &[u8],
        g: Generation,
        seq: u32,
        offset64: u32,
        ctrl: u32,
        sh: bool,
    ) -> ExpectedPacket<'_> {
        ExpectedPacket {
            dest_qp: 0x80 << 16 | 5 << 11 | 3,
            psn: FlowPsn::new(g, seq),
            kdeth0: Kdeth0::new(Kdeth0Fields {
                offset: offset64,
                om: true,
                tid: 1,
                tidctrl: ctrl,
                intr: false,
                sh,
            })
            .unwrap(),
            payload,
        }
    }

    #[test]
    fn in_sequence_places_advances_and_suppresses() {
        let (mut c, mut m, f, g) = setup();
        let data = [0xAB; 4096];
        let o = c.receive_expected(&mut m, pkt(&data, g, 0, 0, 3, true));
        assert_eq!(
            (o.flow, o.delivered, o.placed, o.error),
            (f, false, true, None)
        );
        assert_eq!(c.read_flow(f).next_psn(), FlowPsn::new(g, 1));
        // Second packet of the pair lands in the odd entry (offset 8 KiB = 128 × 64).
        let o = c.receive_expected(&mut m, pkt(&data, g, 1, 128, 3, false));
        assert_eq!((o.delivered, o.placed, o.error), (true, true, None));
        let mut back = [0u8; 4096];
        m.read(300 * 4096, &mut back).unwrap();
        assert_eq!(back, data);
        assert_eq!(c.expected_stats().suppressed, 1);
    }

    #[test]
    fn sequence_error_places_but_does_not_advance() {
        let (mut c, mut m, f, g) = setup();
        let o = c.receive_expected(&mut m, pkt(&[1; 64], g, 3, 0, 1, true));
        assert_eq!(
            (o.delivered, o.placed, o.error),
            (true, true, Some(RcvError::FlowSeq))
        );
        assert_eq!(c.read_flow(f).next_psn().seq(), 0);
        assert!(c.read_flow(f).has(FlowTableReg::SEQ_MISMATCH));
    }

    #[test]
    fn stale_generation_is_not_placed() {
        let (mut c, mut m, _f, g) = setup();
        let o = c.receive_expected(&mut m, pkt(&[1; 64], g.next(), 0, 0, 1, true));
        assert_eq!(
            (o.delivered, o.placed, o.error),
            (true, false, Some(RcvError::FlowGen))
        );
        let mut back = [9u8; 64];
        m.read(100 * 4096, &mut back).unwrap();
        assert_eq!(back, [0; 64]);
    }

    #[test]
    fn tid_errors() {
        let (mut c, mut m, _f, g) = setup();
        // Overruns the even entry when only the even entry is named.
        let o = c.receive_expected(&mut m, pkt(&[1; 4096], g, 0, 65, 1, false));
        assert_eq!(o.error, Some(RcvError::Tid));
        // TIDCTRL 0 is malformed.
        assert_eq!(
            c.receive_expected(&mut m, pkt(&[1; 4], g, 0, 0, 0, false))
                .error,
            Some(RcvError::Tid)
        );
        // Running past the end of the pair.
        assert_eq!(
            c.receive_expected(&mut m, pkt(&[1; 4096], g, 0, 129, 3, false))
                .error,
            Some(RcvError::Tid)
        );
        assert_eq!(c.expected_stats().tid_errors, 3);
        assert_eq!(c.read_flow(FlowIndex::new(5).unwrap()).next_psn().seq(), 0);
    }

    /// The shadow counts a placement through an entry tagged for another
    /// segment (in sequence or not), not one through the packet's own, an
    /// untagged one, or a packet that places nothing; a rewrite of the
    /// entry clears its tag.
    #[test]
    fn placements_into_another_owners_entry_are_counted() {
        let (mut c, mut m, _f, g) = setup();
        let tag = |n| OwnerTag(core::num::NonZeroU64::new(n).unwrap());
        c.tag_owner(2, 1, tag(7)).unwrap();
        c.tag_owner(3, 1, tag(8)).unwrap();
        assert_eq!(
            (c.owner(2), c.owner(3), c.owner(4)),
            (Some(tag(7)), Some(tag(8)), None)
        );
        let data = [5u8; 64];
        c.receive_expected_as(&mut m, pkt(&data, g, 0, 0, 1, true), tag(7));
        assert_eq!(c.expected_stats().misplaced, 0, "its own entry");
        // Sequence error, still placed, into owner 7's entry by owner 9.
        let o = c.receive_expected_as(&mut m, pkt(&data, g, 5, 0, 1, true), tag(9));
        assert!(o.placed && o.error == Some(RcvError::FlowSeq));
        assert_eq!(c.expected_stats().misplaced, 1);
        // Crossing from 7's even entry into 8's odd one, as owner 7.
        let big = [6u8; 4096];
        c.receive_expected_as(&mut m, pkt(&big, g, 1, 127, 3, true), tag(7));
        assert_eq!(c.expected_stats().misplaced, 2);
        // A stale generation places nothing: not counted.
        c.receive_expected_as(&mut m, pkt(&data, g.next(), 0, 0, 1, true), tag(9));
        assert_eq!(c.expected_stats().misplaced, 2);
        c.put_tid(2, RcvType::Expected, 100 * 4096, 2);
        assert_eq!(c.owner(2), None);
        c.receive_expected_as(&mut m, pkt(&data, g, 2, 0, 1, true), tag(9));
        assert_eq!(
            c.expected_stats().misplaced,
            2,
            "untagged after the rewrite"
        );
    }

    #[test]
    fn a_pair_packet_crosses_into_the_odd_buffer() {
        let (mut c, mut m, _f, g) = setup();
        let data: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        let o = c.receive_expected(&mut m, pkt(&data, g, 0, 127, 3, true));
        assert_eq!(o.error, None);
        assert!(o.placed);
        let mut even_tail = [0u8; 64];
        m.read(101 * 4096 + 4032, &mut even_tail).unwrap();
        assert_eq!(&even_tail[..], &data[..64]);
        let mut odd_head = vec![0u8; 4032];
        m.read(300 * 4096, &mut odd_head).unwrap();
        assert_eq!(&odd_head[..], &data[64..]);
    }

    /// TIDCTRL 2 names the odd entry of the pair alone: the payload goes
    /// to the odd buffer, at the packet's offset within it.
    #[test]
    fn tidctrl_two_places_into_the_odd_entry_alone() {
        let (mut c, mut m, _f, g) = setup();
        let o = c.receive_expected(&mut m, pkt(&[7; 64], g, 0, 1, 2, false));
        assert_eq!((o.placed, o.error), (true, None));
        let mut back = [0u8; 64];
        m.read(300 * 4096 + 64, &mut back).unwrap();
        assert_eq!(back, [7; 64]);
        // The odd buffer is 4 KiB: its last 64 bytes fit, 64 more do not.
        let o = c.receive_expected(&mut m, pkt(&[7; 64], g, 1, 63, 2, false));
        assert_eq!(o.error, None);
        let o = c.receive_expected(&mut m, pkt(&[7; 64], g, 2, 64, 2, false));
        assert_eq!(o.error, Some(RcvError::Tid));
    }

    /// A pair whose odd entry is not EXPECTED is no span past the even
    /// buffer; one whose even entry is not EXPECTED places nothing.
    #[test]
    fn a_pair_needs_both_entries_expected() {
        let (mut c, mut m, _f, g) = setup();
        c.put_tid(3, RcvType::Invalid, 300 * 4096, 1);
        let o = c.receive_expected(&mut m, pkt(&[1; 4096], g, 0, 127, 3, false));
        assert_eq!(o.error, Some(RcvError::Tid));
        let o = c.receive_expected(&mut m, pkt(&[1; 64], g, 0, 0, 3, false));
        assert_eq!(
            o.error, None,
            "within the even buffer the odd one is not needed"
        );
        c.put_tid(2, RcvType::Invalid, 100 * 4096, 2);
        let o = c.receive_expected(&mut m, pkt(&[1; 64], g, 1, 0, 3, false));
        assert_eq!(o.error, Some(RcvError::Tid));
    }

    /// Every counter counts each packet once, by its outcome, and bytes by
    /// the payload; a placement into a page the memory model lacks is a
    /// TID error and a chip fault.
    #[test]
    fn counters_count_each_packet_once() {
        let (mut c, mut m, _f, g) = setup();
        for seq in 0..3 {
            let o = c.receive_expected(&mut m, pkt(&[1; 100], g, seq, 0, 1, false));
            assert_eq!(o.error, None);
        }
        c.receive_expected(&mut m, pkt(&[1; 10], g, 9, 0, 1, false));
        c.receive_expected(&mut m, pkt(&[1; 10], g, 9, 0, 1, false));
        c.receive_expected(&mut m, pkt(&[1; 10], g.next(), 3, 0, 1, false));
        c.receive_expected(&mut m, pkt(&[1; 10], g.next(), 3, 0, 1, false));
        let s = c.expected_stats();
        assert_eq!((s.placed_packets, s.placed_bytes), (5, 320));
        assert_eq!((s.seq_errors, s.gen_errors, s.tid_errors), (2, 2, 0));
        assert_eq!(c.faults(), 0);
        m.remove_page(300);
        for seq in 3..5 {
            let o = c.receive_expected(&mut m, pkt(&[1; 64], g, seq, 128, 3, false));
            assert_eq!((o.placed, o.error), (false, Some(RcvError::Tid)));
        }
        assert_eq!((c.faults(), c.expected_stats().tid_errors), (2, 2));
    }
}
