// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The 32 hardware flows of a receive context: the allocation bitmap, each
//! flow's generation, and the flow-table writes (SPEC §5 "tid-flow").
//!
//! # Locking
//!
//! [`HwFlows`] is part of the context's `exp_lock`-guarded state; every
//! method that changes it takes `&mut self`, which only that guard lends.
//! [`QpFlowState`] is part of a QP's `s_lock`-guarded state.

use hfi1_hal::consts::NUM_TID_FLOWS;
use hfi1_hal::platform::FlowTable;
use hfi1_hal::services::RandomSource;
use hfi1_hal::{FlowIndex, FlowTableReg, Generation};

use crate::FlowError;

/// All 32 hardware flows are taken. Kernel: the `-EAGAIN` of
/// `kern_reserve_flow()`; converts to [`FlowError::Again`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no free hardware flow")]
pub struct NoFreeFlow;

impl From<NoFreeFlow> for FlowError {
    fn from(_: NoFreeFlow) -> Self {
        Self::Again
    }
}

/// The flow bitmap and the generation of every flow of one context.
/// Kernel: `rcd->flow_mask` and `rcd->flows[].generation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwFlows {
    mask: u32,
    generations: [Generation; NUM_TID_FLOWS],
}

impl HwFlows {
    /// Every flow free, with the given generations; writes nothing (the
    /// vectors start from this state).
    pub fn with_generations(generations: [Generation; NUM_TID_FLOWS]) -> Self {
        Self {
            mask: 0,
            generations,
        }
    }

    /// Context init: each flow gets a random 20-bit generation (the
    /// reserved value may come out, as in the kernel) and is written
    /// disabled (reserved generation). Kernel:
    /// `hfi1_kern_init_ctxt_generations()`.
    pub fn init(rng: &mut impl RandomSource, chip: &mut impl FlowTable) -> Self {
        let mut generations = [Generation::RESERVED; NUM_TID_FLOWS];
        for (i, g) in generations.iter_mut().enumerate() {
            *g = Generation::masked(rng.next_u32());
            if let Some(f) = FlowIndex::new(i as u32) {
                chip.write_flow(f, FlowTableReg::for_generation(Generation::RESERVED));
            }
        }
        Self::with_generations(generations)
    }

    /// Takes flow `last` if it is given and free, else the lowest free
    /// flow. Kernel: `kern_reserve_flow()`.
    ///
    /// # Errors
    ///
    /// [`NoFreeFlow`] when all 32 flows are taken.
    #[inline]
    pub fn reserve(&mut self, last: Option<FlowIndex>) -> Result<FlowIndex, NoFreeFlow> {
        if let Some(l) = last {
            let bit = 1u32 << l.get();
            if self.mask & bit == 0 {
                self.mask |= bit;
                return Ok(l);
            }
        }
        let free = (!self.mask).trailing_zeros();
        let f = FlowIndex::new(free).ok_or(NoFreeFlow)?;
        self.mask |= 1 << free;
        Ok(f)
    }

    /// Frees a flow's bit. Kernel: `clear_bit(idx, &rcd->flow_mask)`.
    #[inline]
    pub fn release(&mut self, f: FlowIndex) {
        self.mask &= !(1u32 << f.get());
    }

    /// Arms flow `f` with its current generation; returns it.
    /// Kernel: `kern_setup_hw_flow()`.
    #[inline]
    pub fn setup(&mut self, chip: &mut impl FlowTable, f: FlowIndex) -> Generation {
        let g = self.generation(f);
        chip.write_flow(f, FlowTableReg::for_generation(g));
        g
    }

    /// Moves flow `f` to its next generation and disables it (writes the
    /// reserved generation). Does not free its bit.
    /// Kernel: `kern_clear_hw_flow()`.
    #[inline]
    pub fn clear(&mut self, chip: &mut impl FlowTable, f: FlowIndex) {
        if let Some(g) = self.generations.get_mut(f.as_usize()) {
            *g = g.next();
        }
        chip.write_flow(f, FlowTableReg::for_generation(Generation::RESERVED));
    }

    /// Flow `f`'s generation.
    #[inline]
    pub fn generation(&self, f: FlowIndex) -> Generation {
        self.generations
            .get(f.as_usize())
            .copied()
            .unwrap_or(Generation::RESERVED)
    }

    /// Overrides flow `f`'s generation (one received in a RESYNC).
    #[inline]
    pub fn set_generation(&mut self, f: FlowIndex, g: Generation) {
        if let Some(slot) = self.generations.get_mut(f.as_usize()) {
            *slot = g;
        }
    }

    /// True if flow `f` is reserved.
    #[inline]
    pub fn is_reserved(&self, f: FlowIndex) -> bool {
        self.mask & (1 << f.get()) != 0
    }

    /// The allocation bitmap (bit i = flow i reserved).
    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// Flows free now.
    pub fn free_count(&self) -> u32 {
        NUM_TID_FLOWS as u32 - self.mask.count_ones()
    }
}

/// A QP's hardware-flow state. Kernel: `struct tid_flow_state` in
/// `hfi1_qp_priv`.
///
/// # Locking
///
/// The QP's `s_lock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpFlowState {
    /// The flow the QP holds. Kernel: `fs->index` (32 = none).
    pub index: Option<FlowIndex>,
    /// The flow it held last, preferred at the next reserve.
    /// Kernel: `fs->last_index`.
    pub last_index: Option<FlowIndex>,
    /// The flow's generation while held; between flows, the reserved value
    /// or a generation received in a RESYNC. Kernel: `fs->generation`.
    pub generation: Generation,
    /// The next 11-bit flow sequence to hand out. Kernel: `fs->psn`.
    pub psn: u32,
    /// Protocol flags. Kernel: `fs->flags`.
    pub flags: u32,
}

impl Default for QpFlowState {
    fn default() -> Self {
        Self {
            index: None,
            last_index: None,
            generation: Generation::RESERVED,
            psn: 0,
            flags: 0,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use hfi1_hal::sim::{SimContext, SimRandom};

    fn f(i: u32) -> FlowIndex {
        FlowIndex::new(i).unwrap()
    }

    #[test]
    fn reserve_prefers_last_then_lowest() {
        let mut h = HwFlows::with_generations([Generation::masked(0); 32]);
        assert_eq!(h.reserve(Some(f(7))), Ok(f(7)));
        assert_eq!(h.reserve(Some(f(7))), Ok(f(0)));
        assert_eq!(h.reserve(None), Ok(f(1)));
        for _ in 0..29 {
            h.reserve(None).unwrap();
        }
        assert_eq!(h.free_count(), 0);
        assert_eq!(h.reserve(None), Err(NoFreeFlow));
        h.release(f(17));
        assert_eq!(h.reserve(Some(f(3))), Ok(f(17)));
    }

    #[test]
    fn init_writes_every_flow_disabled() {
        let mut chip = SimContext::new(0, 8);
        let mut rng = SimRandom::new(3);
        let h = HwFlows::init(&mut rng, &mut chip);
        assert_eq!(chip.log().len(), 32);
        for i in 0..32 {
            assert_eq!(chip.read_flow(f(i)).raw(), 0x6D_7FFF_F800);
        }
        let distinct: std::collections::BTreeSet<_> = (0..32).map(|i| h.generation(f(i))).collect();
        assert!(distinct.len() > 16, "generations look random");
    }
}
