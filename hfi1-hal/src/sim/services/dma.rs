// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The identity DMA map ([`SimDma`]) with live-mapping tracking and
//! failure injection.

use alloc::collections::BTreeMap;

use super::{FailPlan, Inner};
use crate::services::{DmaError, DmaMap};

struct DmaState {
    live: BTreeMap<u64, u32>,
    plan: FailPlan,
    bad_unmaps: u64,
    maps: u64,
}

/// Identity DMA mapping with live-mapping tracking and failure injection.
pub struct SimDma {
    state: Inner<DmaState>,
}

impl Default for SimDma {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for SimDma {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimDma")
            .field("live", &self.live_mappings())
            .finish()
    }
}

impl SimDma {
    /// No mappings, no failures planned.
    pub fn new() -> Self {
        Self {
            state: Inner::new(DmaState {
                live: BTreeMap::new(),
                plan: FailPlan::default(),
                bad_unmaps: 0,
                maps: 0,
            }),
        }
    }

    /// Makes the map call `n` calls from now fail (0 = the next), once.
    pub fn fail_in(&self, n: u64) {
        self.state.with(|s| s.plan.at = Some(n));
    }

    /// Makes every map call fail while `on`.
    pub fn fail_always(&self, on: bool) {
        self.state.with(|s| s.plan.always = on);
    }

    /// Mappings alive now.
    pub fn live_mappings(&self) -> usize {
        self.state.with(|s| s.live.len())
    }

    /// Successful map calls so far.
    pub fn maps(&self) -> u64 {
        self.state.with(|s| s.maps)
    }

    /// Unmaps of an address not mapped (or with another length): should
    /// stay 0.
    pub fn bad_unmaps(&self) -> u64 {
        self.state.with(|s| s.bad_unmaps)
    }
}

impl DmaMap for SimDma {
    fn map(&self, page: u64, len: u32) -> Result<u64, DmaError> {
        self.state.with(|s| {
            if s.plan.should_fail() || s.live.contains_key(&page) {
                return Err(DmaError);
            }
            s.live.insert(page, len);
            s.maps += 1;
            Ok(page)
        })
    }

    fn unmap(&self, bus: u64, len: u32) {
        self.state.with(|s| match s.live.remove(&bus) {
            Some(l) if l == len => {}
            _ => s.bad_unmaps += 1,
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn dma_is_identity_and_fails_on_request() {
        let d = SimDma::new();
        assert_eq!(d.map(0x5000, 4096), Ok(0x5000));
        d.fail_in(1);
        assert_eq!(d.map(0x6000, 4096), Ok(0x6000));
        assert_eq!(d.map(0x7000, 4096), Err(DmaError));
        assert_eq!(d.map(0x7000, 4096), Ok(0x7000));
        assert_eq!(d.live_mappings(), 3);
        d.unmap(0x5000, 4096);
        d.unmap(0x5000, 4096);
        assert_eq!((d.live_mappings(), d.bad_unmaps()), (2, 1));
    }
}
