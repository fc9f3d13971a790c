// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The 32 hardware flows of a receive context: the allocation bitmap, each
//! flow's generation, and the flow-table writes (SPEC §5 "tid-flow").
//!
//! # Locking
//!
//! [`HwFlows`] is part of the context's `exp_lock`-guarded state; every
//! method that changes it takes `&mut self`, which only that guard lends.
//! [`QpFlowState`] is part of a QP's `s_lock`-guarded state.

use hfi1_hal::consts::{FLOW_INDEX_NONE, NUM_TID_FLOWS};
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

/// A context's flow bitmap and flow generations, wherever they live.
/// Kernel: `rcd->flow_mask` (its low 32 bits) and
/// `rcd->flows[].generation`.
///
/// # Locking
///
/// The context's `exp_lock`.
pub trait FlowStore {
    /// The allocation bitmap (bit i = flow i reserved).
    fn mask(&self) -> u32;

    /// Replaces the allocation bitmap.
    fn set_mask(&mut self, mask: u32);

    /// Flow `f`'s generation. Kernel: `rcd->flows[f].generation`.
    fn generation(&self, f: FlowIndex) -> Generation;

    /// Sets flow `f`'s generation.
    fn set_generation(&mut self, f: FlowIndex, g: Generation);
}

/// Takes flow `last` if it is given and free, else the lowest free flow.
/// Kernel: `kern_reserve_flow()`.
///
/// # Errors
///
/// [`NoFreeFlow`] when all 32 flows are taken.
#[inline]
pub fn reserve_flow<S: FlowStore + ?Sized>(
    s: &mut S,
    last: Option<FlowIndex>,
) -> Result<FlowIndex, NoFreeFlow> {
    let mask = s.mask();
    if let Some(l) = last {
        let bit = 1u32 << l.get();
        if mask & bit == 0 {
            s.set_mask(mask | bit);
            return Ok(l);
        }
    }
    // All taken is tested first, so the bit scan below runs on a non-zero
    // word: its result is then below 32 (no range check left for the
    // compiler to make) and needs no default for an empty word.
    if mask == u32::MAX {
        return Err(NoFreeFlow);
    }
    let free = (!mask).trailing_zeros();
    let f = FlowIndex::new(free).ok_or(NoFreeFlow)?;
    s.set_mask(mask | 1 << free);
    Ok(f)
}

/// Frees a flow's bit. Kernel: `clear_bit(idx, &rcd->flow_mask)`.
#[inline]
pub fn release_flow<S: FlowStore + ?Sized>(s: &mut S, f: FlowIndex) {
    let mask = s.mask();
    s.set_mask(mask & !(1u32 << f.get()));
}

/// Arms flow `f` with its current generation; returns it.
/// Kernel: `kern_setup_hw_flow()`.
#[inline]
pub fn setup_flow<S: FlowStore + ?Sized>(
    s: &S,
    chip: &mut impl FlowTable,
    f: FlowIndex,
) -> Generation {
    let g = s.generation(f);
    chip.write_flow(f, FlowTableReg::for_generation(g));
    g
}

/// Moves flow `f` to its next generation and disables it (writes the
/// reserved generation). Does not free its bit.
/// Kernel: `kern_clear_hw_flow()`.
#[inline]
pub fn clear_flow<S: FlowStore + ?Sized>(s: &mut S, chip: &mut impl FlowTable, f: FlowIndex) {
    let g = s.generation(f).next();
    s.set_generation(f, g);
    chip.write_flow(f, FlowTableReg::for_generation(Generation::RESERVED));
}

/// Context init: each flow gets a random 20-bit generation (the reserved
/// value may come out, as in the kernel) and is written disabled
/// (reserved generation), one flow after the other. Kernel:
/// `hfi1_kern_init_ctxt_generations()`.
pub fn init_generations<S: FlowStore + ?Sized>(
    s: &mut S,
    rng: &mut impl RandomSource,
    chip: &mut impl FlowTable,
) {
    for i in 0..NUM_TID_FLOWS as u32 {
        if let Some(f) = FlowIndex::new(i) {
            s.set_generation(f, Generation::masked(rng.next_u32()));
            chip.write_flow(f, FlowTableReg::for_generation(Generation::RESERVED));
        }
    }
}

/// The flow bitmap and the generation of every flow of one context: the
/// software platform's [`FlowStore`]. Kernel: `rcd->flow_mask` and
/// `rcd->flows[].generation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwFlows {
    mask: u32,
    generations: [Generation; NUM_TID_FLOWS],
}

impl FlowStore for HwFlows {
    fn mask(&self) -> u32 {
        self.mask
    }

    fn set_mask(&mut self, mask: u32) {
        self.mask = mask;
    }

    fn generation(&self, f: FlowIndex) -> Generation {
        self.generations
            .get(f.as_usize())
            .copied()
            .unwrap_or(Generation::RESERVED)
    }

    fn set_generation(&mut self, f: FlowIndex, g: Generation) {
        if let Some(slot) = self.generations.get_mut(f.as_usize()) {
            *slot = g;
        }
    }
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

    /// Context init ([`init_generations`]). Kernel:
    /// `hfi1_kern_init_ctxt_generations()`.
    pub fn init(rng: &mut impl RandomSource, chip: &mut impl FlowTable) -> Self {
        let mut h = Self::with_generations([Generation::RESERVED; NUM_TID_FLOWS]);
        init_generations(&mut h, rng, chip);
        h
    }

    /// [`reserve_flow`]. Kernel: `kern_reserve_flow()`.
    ///
    /// # Errors
    ///
    /// [`NoFreeFlow`] when all 32 flows are taken.
    #[inline]
    pub fn reserve(&mut self, last: Option<FlowIndex>) -> Result<FlowIndex, NoFreeFlow> {
        reserve_flow(self, last)
    }

    /// [`release_flow`]. Kernel: `clear_bit(idx, &rcd->flow_mask)`.
    #[inline]
    pub fn release(&mut self, f: FlowIndex) {
        release_flow(self, f);
    }

    /// [`setup_flow`]. Kernel: `kern_setup_hw_flow()`.
    #[inline]
    pub fn setup(&mut self, chip: &mut impl FlowTable, f: FlowIndex) -> Generation {
        setup_flow(self, chip, f)
    }

    /// [`clear_flow`]. Kernel: `kern_clear_hw_flow()`.
    #[inline]
    pub fn clear(&mut self, chip: &mut impl FlowTable, f: FlowIndex) {
        clear_flow(self, chip, f);
    }

    /// Flow `f`'s generation.
    #[inline]
    pub fn generation(&self, f: FlowIndex) -> Generation {
        FlowStore::generation(self, f)
    }

    /// Overrides flow `f`'s generation (one received in a RESYNC).
    #[inline]
    pub fn set_generation(&mut self, f: FlowIndex, g: Generation) {
        FlowStore::set_generation(self, f, g);
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

/// A QP's hardware-flow state, wherever it lives. Kernel:
/// `struct tid_flow_state` (`qpriv->flow_state`).
///
/// # Locking
///
/// The QP's `s_lock`.
pub trait QpFlow {
    /// The flow the QP holds. Kernel: `fs->index` (32 = none).
    fn index(&self) -> Option<FlowIndex>;

    /// Sets it.
    fn set_index(&mut self, f: Option<FlowIndex>);

    /// True if the QP holds a flow. Kernel: `fs->index !=
    /// RXE_NUM_TID_FLOWS`.
    fn holds_flow(&self) -> bool {
        self.index().is_some()
    }

    /// The flow it held last. Kernel: `fs->last_index`.
    fn last_index(&self) -> Option<FlowIndex>;

    /// Sets it.
    fn set_last_index(&mut self, f: Option<FlowIndex>);

    /// The flow's generation while held; between flows, the reserved value
    /// or a generation received in a RESYNC. Kernel: `fs->generation`.
    fn generation(&self) -> Generation;

    /// Sets it.
    fn set_generation(&mut self, g: Generation);

    /// The next flow sequence to hand out. Kernel: `fs->psn`.
    fn psn(&self) -> u32;

    /// Sets it.
    fn set_psn(&mut self, psn: u32);
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
    /// The protocol's own flags for the flow (no kernel counterpart in
    /// `struct tid_flow_state`; this crate never touches them).
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

impl QpFlow for QpFlowState {
    fn index(&self) -> Option<FlowIndex> {
        self.index
    }

    fn set_index(&mut self, f: Option<FlowIndex>) {
        self.index = f;
    }

    fn last_index(&self) -> Option<FlowIndex> {
        self.last_index
    }

    fn set_last_index(&mut self, f: Option<FlowIndex>) {
        self.last_index = f;
    }

    fn generation(&self) -> Generation {
        self.generation
    }

    fn set_generation(&mut self, g: Generation) {
        self.generation = g;
    }

    fn psn(&self) -> u32 {
        self.psn
    }

    fn set_psn(&mut self, psn: u32) {
        self.psn = psn;
    }
}

/// The driver's `qpriv->flow_state` (the layout mirror) as a [`QpFlow`]:
/// `index` and `last_index` are `RXE_NUM_TID_FLOWS` for none.
impl QpFlow for hfi1_hal::layout::CTidFlowState {
    fn index(&self) -> Option<FlowIndex> {
        FlowIndex::new(u32::from(self.index))
    }

    fn set_index(&mut self, f: Option<FlowIndex>) {
        self.index = f.map_or(FLOW_INDEX_NONE, FlowIndex::get);
    }

    /// Kernel: `fs->index != RXE_NUM_TID_FLOWS`.
    fn holds_flow(&self) -> bool {
        self.index != FLOW_INDEX_NONE
    }

    fn last_index(&self) -> Option<FlowIndex> {
        FlowIndex::new(u32::from(self.last_index))
    }

    fn set_last_index(&mut self, f: Option<FlowIndex>) {
        self.last_index = f.map_or(FLOW_INDEX_NONE, FlowIndex::get);
    }

    fn generation(&self) -> Generation {
        Generation::masked(self.generation)
    }

    fn set_generation(&mut self, g: Generation) {
        self.generation = g.get();
    }

    fn psn(&self) -> u32 {
        self.psn
    }

    fn set_psn(&mut self, psn: u32) {
        self.psn = psn;
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

    /// The bitmap and the per-flow view of it after reserves and a
    /// release, and a generation set from outside (a RESYNC's) that the
    /// next arming writes.
    #[test]
    fn the_bitmap_and_a_set_generation_are_what_the_flows_show() {
        let mut h = HwFlows::with_generations([Generation::masked(0); 32]);
        assert_eq!(h.reserve(Some(f(7))), Ok(f(7)));
        assert_eq!(h.reserve(None), Ok(f(0)));
        assert_eq!(h.mask(), 1 << 7 | 1);
        assert!(h.is_reserved(f(7)) && h.is_reserved(f(0)));
        assert!(!h.is_reserved(f(1)) && !h.is_reserved(f(6)));
        h.release(f(7));
        assert_eq!(h.mask(), 1);
        assert!(!h.is_reserved(f(7)));

        let g = Generation::new(0x1234).unwrap();
        h.set_generation(f(9), g);
        assert_eq!(h.generation(f(9)), g);
        assert_eq!(h.generation(f(8)), Generation::masked(0));
        let mut chip = SimContext::new(0, 8);
        assert_eq!(h.setup(&mut chip, f(9)), g);
        assert_eq!(
            chip.read_flow(f(9)).next_psn(),
            hfi1_hal::FlowPsn::new(g, 0)
        );
    }

    /// The driver's `struct tid_flow_state`, seen through [`QpFlow`],
    /// reads back what was set as the Rust state does, with "no flow"
    /// stored as `RXE_NUM_TID_FLOWS` in both index fields.
    #[test]
    fn the_driver_flow_state_reads_back_as_the_rust_one() {
        use hfi1_hal::layout::CTidFlowState;
        fn view(q: &dyn QpFlow) -> (Option<FlowIndex>, bool, Option<FlowIndex>, Generation, u32) {
            (
                q.index(),
                q.holds_flow(),
                q.last_index(),
                q.generation(),
                q.psn(),
            )
        }
        let mut c = CTidFlowState {
            generation: Generation::RESERVED.get(),
            psn: 0,
            index: FLOW_INDEX_NONE,
            last_index: FLOW_INDEX_NONE,
        };
        let mut r = QpFlowState::default();
        assert_eq!(view(&c), view(&r));
        assert_eq!(view(&c), (None, false, None, Generation::RESERVED, 0));
        let g = Generation::new(0x4_5678).unwrap();
        for q in [&mut c as &mut dyn QpFlow, &mut r] {
            q.set_index(Some(f(12)));
            q.set_last_index(Some(f(3)));
            q.set_generation(g);
            q.set_psn(1500);
        }
        assert_eq!(view(&c), view(&r));
        assert_eq!(view(&c), (Some(f(12)), true, Some(f(3)), g, 1500));
        assert_eq!((c.index, c.last_index, c.generation), (12, 3, 0x4_5678));
        for q in [&mut c as &mut dyn QpFlow, &mut r] {
            q.set_index(None);
            q.set_last_index(None);
        }
        assert_eq!(view(&c), view(&r));
        assert_eq!((c.index, c.last_index), (FLOW_INDEX_NONE, FLOW_INDEX_NONE));
        assert!(!c.holds_flow());
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
