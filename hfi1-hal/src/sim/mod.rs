// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The software chip (feature `sim`).
//!
//! `no_std` + `alloc`, so the kernel self-test can run it too. Every
//! platform call is applied to a register model and recorded in order, so
//! a test can compare the exact call sequence with the reference driver's.
//!
//! # Model assumptions
//!
//! - An RcvArray entry holds `(type, DMA address, order)`; programming an
//!   entry outside the context's range is not a panic: it is counted in
//!   [`SimContext::faults`] and otherwise ignored (the real chip would write
//!   another context's entry; tests assert the counter stays zero).
//! - Write-combining fills change no state; they are recorded and counted.

mod context;
pub mod expected;
#[cfg(feature = "std")]
pub mod lockdep;
#[cfg(all(loom, feature = "std"))]
pub mod loom_model;
pub mod memory;
pub mod services;
pub mod timers;

pub use context::{OwnerTag, SimCall, SimContext, SimRcvEntry};
pub use expected::{ExpectedOutcome, ExpectedPacket, ExpectedStats, RcvError};
pub use memory::SimMemory;
pub use services::{SimAllocator, SimBox, SimDma, SimRandom, SimRef, SimScheduler};
pub use timers::{SimTimers, TimerStats};
