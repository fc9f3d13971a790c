// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The one way into the protocol's C entries ([`Entry`]): the pointer
//! checks, the taking of the QP with the locks the entry is entered with,
//! a packet handler's frame parsing and opcode check, and the mapping of
//! every error to a negative errno.

use core::ffi::c_void;

use hfi1_hal::lock_order::{LockToken, RLock, Unlocked};
use qp_wait::SGuard;
use tid_read_proto::wire::frame;

use super::{IoC, Rcv, Regions, Sink, split_io};
use crate::engine::Rcd;
use crate::errno::Errno;
use crate::kplat::{KQp, KRef, KernelPlatform};
use crate::qp::{with_held_r_lock, with_held_s_lock, with_r_lock_taken};

/// The frame at `pkt`, `len` bytes.
///
/// # Safety
///
/// `pkt` is null or valid for `len` bytes for `'a`.
pub(super) unsafe fn bytes<'a>(pkt: *const u8, len: u32) -> Option<&'a [u8]> {
    // SAFETY: forwarded from the caller.
    (!pkt.is_null()).then(|| unsafe { core::slice::from_raw_parts(pkt, len as usize) })
}

/// How a receive entry comes by the QP's `r_lock`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum RLockIs {
    /// The caller holds it (the packet handlers, the reap timer).
    Held,
    /// The entry takes it (the KDETH error path).
    Taken,
}

/// Which frames a packet handler takes.
#[derive(Clone, Copy)]
pub(super) enum Takes {
    /// Only these opcodes: `-EPROTO` for another.
    Only(&'static [u8]),
    /// Any frame that parses: the body tells them apart.
    Any,
}

/// A C entry's arguments as the caller passed them: the receive context,
/// the QP, and the caller's verbs side (`io`; `None` if the entry takes
/// none). Every entry goes through one of its runners ([`Entry::qp_only`]
/// for the poll, which has no context): [`Entry::checked`] checks the
/// pointers once, the runner takes the QP with the locks the
/// entry is entered with (`s_lock` held, `r_lock` held or taken, none),
/// a packet handler's frame is parsed and its opcode checked, and every
/// error maps to a negative errno on the way out.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub(super) rcd: *const Rcd,
    pub(super) qp: *mut KQp,
    pub(super) io: Option<*const IoC>,
}

/// What an entry's body gets besides the QP: the checked context and the
/// caller's regions and packet buffer (if the entry takes them).
pub(super) struct Call<'a> {
    pub(super) rcd: &'a tid_flow::RcvCtxt<KernelPlatform>,
    io: Option<(Regions, Sink<'a>)>,
}

impl<'a> Call<'a> {
    /// The caller's regions and memory (`-EINVAL` if the entry takes
    /// none).
    pub(super) fn regions(&mut self) -> Result<&mut Regions, Errno> {
        self.io.as_mut().map(|(r, _)| r).ok_or(Errno::INVAL)
    }

    /// The caller's regions and packet buffer (`-EINVAL` if the entry
    /// takes none).
    pub(super) fn io(&mut self) -> Result<(&Regions, &mut Sink<'a>), Errno> {
        match self.io.as_mut() {
            Some((r, s)) => Ok((&*r, s)),
            None => Err(Errno::INVAL),
        }
    }
}

/// A packet handler's packet: the whole frame and its parsed headers.
pub(super) struct Rx<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) frame: frame::Frame<'a>,
}

fn ret(r: Result<i32, Errno>) -> i32 {
    r.unwrap_or_else(Errno::to_neg)
}

impl Entry {
    /// Checks the context and `io`: `-EINVAL` on a null pointer, a
    /// missing callback or a short buffer (the QP is checked where it is
    /// taken).
    ///
    /// # Safety
    ///
    /// `rcd` null or live; `io` as `struct hfi1_tid_io` says, its buffer
    /// used by nothing else during `'a`.
    pub(super) unsafe fn checked<'a>(self) -> Result<Call<'a>, Errno> {
        // SAFETY: forwarded from the caller.
        let rcd = unsafe { self.rcd.as_ref() }.ok_or(Errno::INVAL)?.ctx();
        let io = match self.io {
            // SAFETY: forwarded from the caller.
            Some(io) => Some(unsafe { split_io(io) }.ok_or(Errno::INVAL)?),
            None => None,
        };
        Ok(Call { rcd, io })
    }

    /// An entry called with the QP's `s_lock` held (asserted): runs `f` on
    /// the checked call, the QP and its `s_lock` guard.
    ///
    /// # Safety
    ///
    /// As [`Self::checked`]; `qp` null or live, its `s_lock` held by the
    /// caller as `with_held_s_lock` requires.
    pub(super) unsafe fn s_locked(
        self,
        f: impl FnOnce(&mut Call<'_>, &KRef, &mut SGuard<'_, KernelPlatform>) -> Result<i32, Errno>,
    ) -> i32 {
        // SAFETY: forwarded from the caller.
        let mut call = match unsafe { self.checked() } {
            Ok(c) => c,
            Err(e) => return e.to_neg(),
        };
        // SAFETY: forwarded from the caller.
        unsafe { with_held_s_lock(self.qp, |q, g| ret(f(&mut call, q, g))) }
    }

    /// An entry on the QP alone (no context, no verbs side: the poll),
    /// called with its `s_lock` held (asserted): runs `f` on the QP and
    /// its `s_lock` guard.
    ///
    /// # Safety
    ///
    /// As [`Self::s_locked`].
    pub(super) unsafe fn qp_only(
        qp: *mut KQp,
        f: impl FnOnce(&KRef, &mut SGuard<'_, KernelPlatform>) -> Result<i32, Errno>,
    ) -> i32 {
        // SAFETY: forwarded from the caller.
        unsafe { with_held_s_lock(qp, |q, g| ret(f(q, g))) }
    }

    /// An entry called with no lock held (the second leg's work): runs `f`
    /// on the checked call, the QP and the root token.
    ///
    /// # Safety
    ///
    /// As [`Self::checked`]; `qp` null or live with a reference held by
    /// the caller.
    pub(super) unsafe fn unlocked(
        self,
        f: impl FnOnce(&mut Call<'_>, &KRef, &mut LockToken<'_, Unlocked>) -> Result<i32, Errno>,
    ) -> i32 {
        // SAFETY: forwarded from the caller.
        let mut call = match unsafe { self.checked() } {
            Ok(c) => c,
            Err(e) => return e.to_neg(),
        };
        // SAFETY: forwarded from the caller.
        let Some(q) = (unsafe { crate::qp::borrow_qp(self.qp) }) else {
            return Errno::INVAL.to_neg();
        };
        ret(f(&mut call, &q, &mut LockToken::root()))
    }

    /// An entry on the receive path: with the QP's `r_lock` held or taken
    /// (`how`), runs `f` on the checked call, the QP and the `r_lock`
    /// token.
    ///
    /// # Safety
    ///
    /// As [`Self::checked`]; `qp` null or live; `r_lock` the QP's
    /// initialised `r_lock`, held by the caller if `how` says so.
    pub(super) unsafe fn r_locked(
        self,
        r_lock: *mut c_void,
        how: RLockIs,
        f: impl FnOnce(&mut Call<'_>, &KRef, &mut LockToken<'_, RLock>) -> Result<i32, Errno>,
    ) -> i32 {
        // SAFETY: forwarded from the caller.
        let mut call = match unsafe { self.checked() } {
            Ok(c) => c,
            Err(e) => return e.to_neg(),
        };
        // SAFETY: forwarded from the caller.
        unsafe { in_r_lock(self.qp, r_lock, how, |q, r| ret(f(&mut call, q, r))) }
    }

    /// A packet handler: checks the call and the frame (`-EINVAL` for a
    /// null pointer, `-EBADMSG` for a frame that does not parse), then,
    /// with the `r_lock` held or taken, refuses an opcode it does not take
    /// (`-EPROTO`) and runs `f`, whose outcome is an `HFI1_TID_RCV_*`
    /// value.
    ///
    /// # Safety
    ///
    /// As [`Self::r_locked`]; `pkt` null or valid for `len` bytes.
    pub(super) unsafe fn packet(
        self,
        (r_lock, how): (*mut c_void, RLockIs),
        (pkt, len): (*const u8, u32),
        takes: Takes,
        f: impl FnOnce(&mut Call<'_>, &KRef, &mut LockToken<'_, RLock>, &Rx<'_>) -> Result<Rcv, Errno>,
    ) -> i32 {
        // SAFETY: forwarded from the caller.
        let (mut call, Some(b)) = (unsafe { self.checked() }, unsafe { bytes(pkt, len) }) else {
            return Errno::INVAL.to_neg();
        };
        let Ok(frame) = frame::parse(b) else {
            return Errno::BADMSG.to_neg();
        };
        let rx = Rx { bytes: b, frame };
        let f = |call: &mut Call<'_>, q: &KRef, r: &mut LockToken<'_, RLock>| {
            if let Takes::Only(ops) = takes {
                if !ops.contains(&rx.frame.bth.opcode) {
                    return Err(Errno::PROTO);
                }
            }
            f(call, q, r, &rx).map(|v| v as i32)
        };
        let call = match call.as_mut() {
            Ok(c) => c,
            Err(e) => return e.to_neg(),
        };
        // SAFETY: forwarded from the caller.
        unsafe { in_r_lock(self.qp, r_lock, how, |q, r| ret(f(call, q, r))) }
    }
}

/// Runs `f` on the QP and its `r_lock` token, the lock held by the caller
/// or taken here (`how`): `-EINVAL` for a null QP or lock.
///
/// # Safety
///
/// `qp` null or live; `r_lock` the QP's initialised `r_lock`, held by the
/// caller if `how` says so.
unsafe fn in_r_lock(
    qp: *mut KQp,
    r_lock: *mut c_void,
    how: RLockIs,
    f: impl FnOnce(&KRef, &mut LockToken<'_, RLock>) -> i32,
) -> i32 {
    match how {
        // SAFETY: forwarded from the caller.
        RLockIs::Held => unsafe { with_held_r_lock(qp, r_lock, f) },
        // SAFETY: forwarded from the caller.
        RLockIs::Taken => unsafe { with_r_lock_taken(qp, r_lock, f) },
    }
}
