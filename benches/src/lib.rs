// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Criterion benchmarks of the engine, and the inputs they share with the
//! instruction-count driver (`src/bin/instr.rs`, run by `instr.sh` under
//! cachegrind beside the C reference in `c-ref/`). The inputs are
//! described in `benches/README.md` and in each benchmark file's doc.
//!
//! # Example
//!
//! The three 64-page inputs and what the page-set walk makes of them:
//!
//! ```
//! use benches::{contiguous, mixed, scattered};
//! use tid_alloc::find_phys_blocks;
//!
//! let sets = |pages: &[u64], pmtu| find_phys_blocks(pages, pmtu).unwrap().len();
//! assert_eq!(sets(&contiguous(), 4096), 2); // one 256 KiB set and a filler
//! assert_eq!(sets(&scattered(), 4096), 64); // one set per page
//! assert_eq!((sets(&mixed(), 4096), sets(&mixed(), 8192)), (18, 40));
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use hfi1_hal::lock_order::NewRawSpinLock;
use hfi1_hal::platform::FlowTable;
use hfi1_hal::services::{DmaError, DmaMap};
use hfi1_hal::sim::{SimAllocator, SimContext, SimRandom, SimScheduler};
use hfi1_hal::{FlowIndex, FlowTableReg, RcvArray, RcvType};
use qp_wait::{DevCounters, WaitPlatform};
use tid_flow::{CtxtParts, FlowPlatform, RcvCtxt};

pub mod read_segment;

/// Identity DMA mapping that only counts live mappings (the sim's
/// `SimDma` keeps a map of every mapping for its checks, which would
/// dominate a scattered segment's figures).
#[derive(Debug, Default)]
pub struct IdDma(AtomicI64);

impl IdDma {
    /// Mappings live now.
    pub fn live(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl DmaMap for IdDma {
    fn map(&self, page: u64, _len: u32) -> Result<u64, DmaError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(page)
    }

    fn unmap(&self, _bus: u64, _len: u32) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The benchmarks' receive context: 16 TID groups at expected base 0 on
/// the software chip (call log off), room for 4 QPs, [`IdDma`], counted
/// memory, flow generations from seed 1.
pub fn bench_ctxt<P>() -> Box<RcvCtxt<P>>
where
    P: FlowPlatform<
            Chip = SimContext,
            Dma = IdDma,
            Mem = SimAllocator,
            Dev = Arc<DevCounters>,
            Sched = SimScheduler<<P as WaitPlatform>::Ref>,
        >,
    P::Lock: NewRawSpinLock,
{
    let mut chip = SimContext::new(0, 16 * 8);
    chip.set_logging(false);
    let parts = CtxtParts {
        ctxt: 1,
        chip,
        expected_base: 0,
        ngroups: 16,
        qp_slots: 4,
        sched: SimScheduler::new(),
        dma: IdDma::default(),
        mem: SimAllocator::new(),
        dev: Arc::new(DevCounters::new()),
    };
    Box::new(RcvCtxt::new(parts, &mut SimRandom::new(1)).expect("context"))
}

/// Bytes of one page.
pub const PAGE: u64 = 4096;

/// 64 contiguous pages: pfn 0x100000 + i.
pub fn contiguous() -> Vec<u64> {
    (0..64).map(|i| (0x100000 + i) * PAGE).collect()
}

/// 64 pages, no two contiguous: pfn 0x200000 + 2i.
pub fn scattered() -> Vec<u64> {
    (0..64).map(|i| (0x200000 + 2 * i) * PAGE).collect()
}

/// The run lengths of [`mixed`].
pub const MIXED_RUNS: [u64; 14] = [8, 1, 4, 2, 16, 1, 3, 8, 5, 2, 1, 4, 6, 3];

/// 64 pages in 14 runs of [`MIXED_RUNS`] pages, run r starting at pfn
/// 0x300000 + 0x1000·r.
pub fn mixed() -> Vec<u64> {
    let mut pages = Vec::with_capacity(64);
    for (r, &len) in MIXED_RUNS.iter().enumerate() {
        let start = 0x300000 + 0x1000 * r as u64;
        pages.extend((0..len).map(|i| (start + i) * PAGE));
    }
    pages
}

/// The three inputs by name.
pub fn inputs() -> [(&'static str, Vec<u64>); 3] {
    [
        ("contiguous", contiguous()),
        ("scattered", scattered()),
        ("mixed", mixed()),
    ]
}

/// Entries of [`ArrayRcv`]: 16 groups of 8.
pub const ARRAY_RCV_ENTRIES: usize = 128;

/// RcvArray register bits, as the driver's `hfi1_put_tid()` builds them
/// (`chip_registers.h`): write enable, buffer size (the order), and the
/// buffer's page number.
const RT_WRITE_ENABLE: u64 = 1 << 63;
const RT_BUF_SIZE_SHIFT: u32 = 36;
const RT_ADDR_MASK: u64 = 0xF_FFFF_FFFF;

/// A 16-group RcvArray that does what the C reference's does with each
/// call (`c-ref`: the driver's `hfi1_put_tid()` and `rcv_array_wc_fill()`
/// over a plain array): `put_tid` builds the chip's register word and
/// stores it, `wc_fill` stores 0 into the entry. The stores are volatile,
/// as the C's `writeq`s are, so none is dropped as dead (programming
/// writes an entry that unprogramming writes again).
///
/// Left out against the C: its out-of-line call of `hfi1_put_tid`, its
/// device-present and type tests, the tracepoint NOPs and the
/// every-fourth-entry flush test (an empty `flush_wc` in the shim).
pub struct ArrayRcv {
    /// One register per RcvArray entry.
    pub entries: [u64; ARRAY_RCV_ENTRIES],
}

impl Default for ArrayRcv {
    fn default() -> Self {
        Self {
            entries: [0; ARRAY_RCV_ENTRIES],
        }
    }
}

impl ArrayRcv {
    /// Stores `reg` into entry `rcventry`. The index is masked into the
    /// array, as the C's `writeq` to `rcvarray_wc + 8 * index` has no
    /// bound check either.
    #[inline(always)]
    fn write(&mut self, rcventry: u32, reg: u64) {
        if let Some(e) = self.entries.get_mut(rcventry as usize % ARRAY_RCV_ENTRIES) {
            // SAFETY: `e` is a live, aligned, exclusive reference.
            unsafe { core::ptr::write_volatile(e, reg) };
        }
    }
}

impl RcvArray for ArrayRcv {
    fn put_tid(&mut self, rcventry: u32, ty: RcvType, pa: u64, order: u8) {
        let reg = match ty {
            RcvType::Expected => {
                RT_WRITE_ENABLE
                    | u64::from(order) << RT_BUF_SIZE_SHIFT
                    | (pa >> PAGE.trailing_zeros()) & RT_ADDR_MASK
            }
            RcvType::Invalid => RT_WRITE_ENABLE,
        };
        self.write(rcventry, reg);
    }

    fn wc_fill(&mut self, rcventry: u32) {
        self.write(rcventry, 0);
    }
}

/// A flow table that keeps what it is told: one word per flow, every
/// `write_flow` stored, as the C reference's `write_csr` stores into an
/// array (`c-ref/hw.c`). The flow benchmarks use it so both sides do the
/// same work per register write; the software chip (`SimContext`) adds
/// its call-log test and the building of the log record, which the
/// `flow/reserve_setup_release_sim` op measures.
#[derive(Debug, Default)]
pub struct ArrayFlows {
    /// One register per hardware flow.
    pub regs: [u64; 32],
}

impl FlowTable for ArrayFlows {
    #[inline]
    fn write_flow(&mut self, flow: FlowIndex, value: FlowTableReg) {
        if let Some(r) = self.regs.get_mut(flow.as_usize()) {
            // Volatile, as the C's `csr_space` is: the register write of
            // `setup` is followed by the one of `clear` with no read in
            // between, and a plain store would be dropped as dead.
            // SAFETY: `r` is a live, aligned, exclusive reference.
            unsafe { core::ptr::write_volatile(r, value.raw()) };
        }
    }

    #[inline]
    fn read_flow(&self, flow: FlowIndex) -> FlowTableReg {
        FlowTableReg::from_raw(self.regs.get(flow.as_usize()).copied().unwrap_or(0))
    }
}
