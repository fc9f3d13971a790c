// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The part of a QP the wait queues see ([`Qp`]) and the state under its
//! `s_lock` ([`SendState`]).

use core::fmt;

use hfi1_hal::lock_order::{Guard, Lock, SLock};

use crate::{Cpu, SFlags, Slotted, WaitPlatform};

/// A QP's `s_lock`-guarded state: its flags and the platform's extension
/// (split it with a `let SendState { flags, ext } = ..` pattern to lend
/// both at once).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SendState<X> {
    /// Kernel: `qp->s_flags`.
    pub flags: SFlags,
    /// The platform's extension state.
    pub ext: X,
}

impl<X> SendState<X> {
    /// True if the QP waits for TID space.
    pub fn waiting(&self) -> bool {
        self.flags.waiting()
    }
}

/// The guard of a QP's `s_lock`.
pub type SGuard<'a, P> =
    Guard<'a, SLock, <P as WaitPlatform>::Lock, SendState<<P as WaitPlatform>::Ext>>;

/// The part of a QP these crates see. Kernel: `struct rvt_qp` with its
/// `hfi1_qp_priv`.
pub struct Qp<P: WaitPlatform> {
    qpn: u32,
    slot: u32,
    cpu: u32,
    /// Kernel: `qp->s_lock`, with the state it guards.
    pub s_lock: Lock<SLock, P::Lock, SendState<P::Ext>>,
}

impl<P: WaitPlatform> fmt::Debug for Qp<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Qp")
            .field("qpn", &self.qpn)
            .field("slot", &self.slot)
            .finish()
    }
}

impl<P: WaitPlatform> Qp<P> {
    /// A QP numbered `qpn`, using waiter-table slot `slot` of its context
    /// (unique among the context's QPs), whose trigger work runs on `cpu`
    /// (kernel: the CPU of its SDMA engine, or the first CPU of the
    /// device's node), with a fresh `s_lock` around `ext`.
    pub fn new(
        qpn: u32,
        slot: u32,
        cpu: u32,
        s_lock: Lock<SLock, P::Lock, SendState<P::Ext>>,
    ) -> Self {
        Self {
            qpn,
            slot,
            cpu,
            s_lock,
        }
    }

    /// [`Qp::new`] in place, for a state too large to build on a kernel
    /// stack: writes the QP at `p` with `raw` as its `s_lock` and returns
    /// where the state the lock guards goes, for the caller to write.
    ///
    /// # Safety
    ///
    /// `p` is valid for writes of one QP and aligned, and the caller writes
    /// a valid state at the returned pointer before the QP is used, moved
    /// or dropped.
    #[cfg(not(loom))]
    pub unsafe fn init_at(
        p: *mut Self,
        qpn: u32,
        slot: u32,
        cpu: u32,
        raw: P::Lock,
    ) -> *mut SendState<P::Ext> {
        // SAFETY: `p` is valid for writes (the caller's promise), each
        // field written once through its own place; the lock's data is
        // the caller's to write.
        unsafe {
            (&raw mut (*p).qpn).write(qpn);
            (&raw mut (*p).slot).write(slot);
            (&raw mut (*p).cpu).write(cpu);
            Lock::init_at(&raw mut (*p).s_lock, raw)
        }
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The QP's slot in its context's waiter table.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The CPU its trigger work is queued on.
    pub fn cpu(&self) -> u32 {
        self.cpu
    }
}

impl<X> AsRef<SFlags> for SendState<X> {
    fn as_ref(&self) -> &SFlags {
        &self.flags
    }
}

impl<P: WaitPlatform> Slotted for Qp<P> {
    fn slot(&self) -> u32 {
        self.slot
    }
}

impl<P: WaitPlatform> Cpu for Qp<P> {
    fn cpu(&self) -> u32 {
        self.cpu
    }
}
