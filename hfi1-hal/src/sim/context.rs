// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! One receive context of the software chip: its RcvArray share and its
//! flow table, with a log of every call.

use alloc::vec::Vec;

use crate::consts::NUM_TID_FLOWS;
use crate::fields::{FlowIndex, FlowTableReg};
use crate::platform::{FlowTable, RcvArray, RcvType};
use crate::services::{NoMemory, try_fill_vec};
use crate::sim::expected::ExpectedStats;

/// One platform call, as recorded by [`SimContext`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimCall {
    /// `put_tid(rcventry, ty, pa, order)`.
    PutTid {
        /// Absolute RcvArray index.
        rcventry: u32,
        /// Entry type.
        ty: RcvType,
        /// DMA address.
        pa: u64,
        /// Order (`log2(pages) + 1`, 0 for INVALID).
        order: u8,
    },
    /// `wc_fill(rcventry)`.
    WcFill {
        /// Absolute RcvArray index.
        rcventry: u32,
    },
    /// `write_flow(flow, value)`.
    WriteFlow {
        /// Flow index.
        flow: FlowIndex,
        /// Register value written.
        value: FlowTableReg,
    },
}

/// Who a test says owns an RcvArray entry ([`SimContext::tag_owner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerTag(pub core::num::NonZeroU64);

/// The state of one RcvArray entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimRcvEntry {
    /// Entry type.
    pub ty: RcvType,
    /// DMA address of the buffer.
    pub pa: u64,
    /// Order: the buffer is `4 KiB << (order - 1)` bytes.
    pub order: u8,
}

impl SimRcvEntry {
    /// An unprogrammed entry.
    pub const INVALID: Self = Self {
        ty: RcvType::Invalid,
        pa: 0,
        order: 0,
    };

    /// Bytes the entry maps (0 unless EXPECTED with a non-zero order).
    pub const fn bytes(&self) -> u64 {
        match self.ty {
            RcvType::Expected if self.order > 0 && self.order < 40 => 4096u64 << (self.order - 1),
            _ => 0,
        }
    }
}

/// One receive context of the software chip.
#[derive(Debug, Clone)]
pub struct SimContext {
    expected_base: u32,
    entries: Vec<SimRcvEntry>,
    flows: [FlowTableReg; NUM_TID_FLOWS],
    log: Vec<SimCall>,
    logging: bool,
    wc_fills: u64,
    faults: u64,
    expected: ExpectedStats,
    /// Ownership shadow for tests, by entry (0 = untagged); empty until
    /// the first tag.
    owners: Vec<u64>,
}

impl SimContext {
    /// A context owning RcvArray entries `expected_base ..
    /// expected_base + entries`, all INVALID, every flow register zero.
    /// Aborts if the entry table cannot be allocated (tests); the kernel
    /// self-test uses [`SimContext::try_new`].
    pub fn new(expected_base: u32, entries: u32) -> Self {
        Self {
            expected_base,
            entries: alloc::vec![SimRcvEntry::INVALID; entries as usize],
            flows: [FlowTableReg::default(); NUM_TID_FLOWS],
            log: Vec::new(),
            logging: true,
            wc_fills: 0,
            faults: 0,
            expected: ExpectedStats::default(),
            owners: Vec::new(),
        }
    }

    /// As [`SimContext::new`], with the entry table allocated fallibly and
    /// the call log off (it would grow without bound in a long run).
    ///
    /// # Errors
    ///
    /// [`NoMemory`] if the entry table cannot be allocated.
    pub fn try_new(expected_base: u32, entries: u32) -> Result<Self, NoMemory> {
        let mut table = Vec::new();
        try_fill_vec(&mut table, entries as usize, SimRcvEntry::INVALID)?;
        Ok(Self {
            expected_base,
            entries: table,
            flows: [FlowTableReg::default(); NUM_TID_FLOWS],
            log: Vec::new(),
            logging: false,
            wc_fills: 0,
            faults: 0,
            expected: ExpectedStats::default(),
            owners: Vec::new(),
        })
    }

    /// Turns the call log on or off (benchmarks and long runs turn it off;
    /// the register state is kept either way).
    pub fn set_logging(&mut self, on: bool) {
        self.logging = on;
    }

    /// The first absolute RcvArray index of this context.
    pub fn expected_base(&self) -> u32 {
        self.expected_base
    }

    /// Number of RcvArray entries this context owns.
    pub fn entry_count(&self) -> u32 {
        self.entries.len() as u32
    }

    /// The state of an entry by absolute index (`None` outside the context).
    pub fn entry(&self, rcventry: u32) -> Option<&SimRcvEntry> {
        let i = rcventry.checked_sub(self.expected_base)?;
        self.entries.get(i as usize)
    }

    /// Entries currently programmed EXPECTED.
    pub fn expected_entries(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.ty == RcvType::Expected)
            .count()
    }

    /// The recorded calls, oldest first.
    pub fn log(&self) -> &[SimCall] {
        &self.log
    }

    /// Takes the recorded calls, leaving the log empty.
    pub fn take_log(&mut self) -> Vec<SimCall> {
        core::mem::take(&mut self.log)
    }

    /// Write-combining fills seen so far.
    pub fn wc_fills(&self) -> u64 {
        self.wc_fills
    }

    /// Calls that named an entry outside this context (should stay 0).
    pub fn faults(&self) -> u64 {
        self.faults
    }

    /// Counters of the expected-receive model.
    pub fn expected_stats(&self) -> ExpectedStats {
        self.expected
    }

    pub(crate) fn expected_stats_mut(&mut self) -> &mut ExpectedStats {
        &mut self.expected
    }

    /// Tags `count` entries from absolute index `first` as owned by
    /// `owner` (a test's name for who programmed them: node, QP, request,
    /// segment), for [`SimContext::receive_expected_as`]. Writing an entry
    /// ([`RcvArray::put_tid`]) clears its tag. Entries outside the context
    /// are ignored. A real chip has no such thing: this is the test's
    /// shadow of who may be written through an entry.
    ///
    /// # Errors
    ///
    /// [`NoMemory`] if the shadow table (made on the first tag) cannot be
    /// allocated; nothing is tagged then.
    pub fn tag_owner(&mut self, first: u32, count: u32, owner: OwnerTag) -> Result<(), NoMemory> {
        if self.owners.is_empty() {
            try_fill_vec(&mut self.owners, self.entries.len(), 0)?;
        }
        for e in (0..count).filter_map(|i| first.checked_add(i)) {
            let slot = e
                .checked_sub(self.expected_base)
                .and_then(|i| self.owners.get_mut(i as usize));
            if let Some(o) = slot {
                *o = owner.0.get();
            }
        }
        Ok(())
    }

    /// The tag of an entry by absolute index, if tagged.
    pub fn owner(&self, rcventry: u32) -> Option<OwnerTag> {
        let i = rcventry.checked_sub(self.expected_base)?;
        let v = *self.owners.get(i as usize)?;
        core::num::NonZeroU64::new(v).map(OwnerTag)
    }

    pub(crate) fn count_fault(&mut self) {
        self.faults += 1;
    }

    /// Updates a flow register as the chip does (status bits, next
    /// sequence), without recording a software write.
    pub(crate) fn set_flow_status(&mut self, flow: FlowIndex, value: FlowTableReg) {
        if let Some(r) = self.flows.get_mut(flow.as_usize()) {
            *r = value;
        }
    }

    /// Logs a call if logging is on. The log grows fallibly: a call that
    /// finds no memory for its record is not logged (the register state
    /// is still updated by the caller).
    #[inline(always)]
    fn record(&mut self, call: SimCall) {
        if self.logging {
            self.push_log(call);
        }
    }

    /// The logging half of [`Self::record`], kept out of line so a
    /// register write with the log off (benchmarks, long simulator runs)
    /// is a flag test and a store.
    #[cold]
    #[inline(never)]
    fn push_log(&mut self, call: SimCall) {
        if self.log.try_reserve(1).is_ok() {
            self.log.push(call);
        }
    }
}

impl RcvArray for SimContext {
    #[inline]
    fn put_tid(&mut self, rcventry: u32, ty: RcvType, pa: u64, order: u8) {
        self.record(SimCall::PutTid {
            rcventry,
            ty,
            pa,
            order,
        });
        let slot = rcventry
            .checked_sub(self.expected_base)
            .and_then(|i| self.entries.get_mut(i as usize));
        match slot {
            Some(e) => *e = SimRcvEntry { ty, pa, order },
            None => self.faults += 1,
        }
        // A rewritten entry has a new owner (or none) until tagged again.
        if let Some(o) = rcventry
            .checked_sub(self.expected_base)
            .and_then(|i| self.owners.get_mut(i as usize))
        {
            *o = 0;
        }
    }

    #[inline]
    fn wc_fill(&mut self, rcventry: u32) {
        self.record(SimCall::WcFill { rcventry });
        self.wc_fills += 1;
        if self.entry(rcventry).is_none() {
            self.faults += 1;
        }
    }
}

impl FlowTable for SimContext {
    #[inline]
    fn write_flow(&mut self, flow: FlowIndex, value: FlowTableReg) {
        self.record(SimCall::WriteFlow { flow, value });
        if let Some(r) = self.flows.get_mut(flow.as_usize()) {
            *r = value;
        }
    }

    #[inline]
    fn read_flow(&self, flow: FlowIndex) -> FlowTableReg {
        self.flows.get(flow.as_usize()).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_applies_calls() {
        let mut c = SimContext::new(8, 16);
        c.put_tid(9, RcvType::Expected, 0x1000, 2);
        c.wc_fill(10);
        c.put_tid(100, RcvType::Expected, 0, 1);
        let f = FlowIndex::new(3).unwrap();
        c.write_flow(f, FlowTableReg::from_raw(7));
        assert_eq!(c.read_flow(f).raw(), 7);
        assert_eq!(c.entry(9).unwrap().bytes(), 8192);
        assert_eq!(c.faults(), 1);
        assert_eq!(c.log().len(), 4);
        assert_eq!(c.wc_fills(), 1);
        assert_eq!(c.expected_entries(), 1);
    }

    #[test]
    fn try_new_matches_new_without_log() {
        let mut a = SimContext::try_new(8, 16).unwrap();
        let b = SimContext::new(8, 16);
        assert_eq!(a.entry_count(), b.entry_count());
        assert_eq!(a.entry(23), Some(&SimRcvEntry::INVALID));
        assert_eq!(a.entry(24), None);
        a.wc_fill(9);
        assert!(a.log().is_empty());
        a.set_logging(true);
        a.wc_fill(9);
        assert_eq!(a.log().len(), 1);
        assert_eq!(a.wc_fills(), 2);
    }

    /// Written through `&mut` (as the engine's generic code writes a
    /// borrowed chip), every call lands on the chip, and the counters
    /// count each call once.
    #[test]
    fn calls_through_a_borrow_land_and_count() {
        fn program<C: RcvArray + FlowTable>(mut c: C) {
            c.put_tid(9, RcvType::Expected, 0x1000, 1);
            c.put_tid(10, RcvType::Expected, 0x2000, 3);
            c.put_tid(99, RcvType::Expected, 0x3000, 1);
            c.wc_fill(9);
            c.wc_fill(10);
            c.wc_fill(98);
            let f = FlowIndex::new(2).unwrap();
            c.write_flow(f, FlowTableReg::from_raw(0x55));
            assert_eq!(c.read_flow(f).raw(), 0x55);
        }
        let mut c = SimContext::new(8, 16);
        program(&mut c);
        assert_eq!((c.expected_base(), c.entry_count()), (8, 16));
        assert_eq!(c.expected_entries(), 2);
        assert_eq!(c.wc_fills(), 3);
        assert_eq!(c.faults(), 2, "entry 99 and the fill of 98 are outside");
        assert_eq!(c.entry(10).unwrap().bytes(), 16384);
        assert_eq!(c.log().len(), 7);
    }

    /// An entry maps bytes only when it is EXPECTED with an order in 1..=39
    /// (order 0 is "no buffer", and a larger order is no buffer size).
    #[test]
    fn entry_bytes_need_an_expected_entry_of_a_real_order() {
        let e = |ty, order| SimRcvEntry { ty, pa: 0, order }.bytes();
        assert_eq!(e(RcvType::Expected, 1), 4096);
        assert_eq!(e(RcvType::Expected, 10), 4096 << 9);
        assert_eq!(e(RcvType::Expected, 39), 4096 << 38);
        assert_eq!(e(RcvType::Expected, 0), 0);
        assert_eq!(e(RcvType::Expected, 40), 0);
        assert_eq!(e(RcvType::Invalid, 1), 0);
    }
}
