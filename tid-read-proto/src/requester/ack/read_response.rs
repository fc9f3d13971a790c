// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A plain READ's responses at the requester (the READ cases of kernel
//! `rc_rcv_resp()`): software copies each from the eager buffer into the
//! READ's scatter list, and the last one completes the READ through
//! `do_rc_ack()`.

use hfi1_hal::Psn;
use tid_flow::FlowPlatform;

use super::RespOp;
use crate::plain_read::RespKind;
use crate::rc::retry::retry_ns;
use crate::rc::{LocalMemory, WcStatus};
use crate::requester::{Env, ReadCopy, Requester};
use crate::wire::aeth;

impl<P: FlowPlatform> Requester<P> {
    /// Receives a plain RDMA READ response (PSN `psn`, of `kind`, with its
    /// AETH unless a MIDDLE), copying its data into the READ's scatter
    /// list in `mem`. Returns whether it was taken.
    /// Kernel: the READ cases of `rc_rcv_resp()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`); an error takes `exp_lock` through
    /// `tid-flow`.
    pub fn receive_read_response(
        &mut self,
        env: &mut Env<'_, '_, P>,
        psn: Psn,
        kind: RespKind,
        a: Option<aeth::Repr>,
        payload: &[u8],
        mem: &mut impl LocalMemory,
    ) -> bool {
        if !self.takes(env, psn) {
            return false;
        }
        let a = a.unwrap_or_default();
        let pmtu = env.conn.pmtu;
        match kind {
            RespKind::First | RespKind::Only => {
                let op = RespOp::Read(kind);
                if !self.do_rc_ack(env, &a, psn, op) {
                    return true;
                }
                let i = self.sq.acked;
                let Some(w) = self.sq.get(i).filter(|w| w.tid.is_none()) else {
                    self.fail_oldest(env, WcStatus::LocalQpOperation);
                    return true;
                };
                let offset = u32::try_from(psn.delta(w.psn))
                    .unwrap_or(0)
                    .saturating_mul(pmtu);
                let left = w.length.saturating_sub(offset);
                self.read_copy = Some(ReadCopy { offset, left });
                if kind == RespKind::First {
                    self.read_middle(env, psn, kind, payload, mem);
                } else {
                    self.read_last(env, psn, &a, payload, mem);
                }
            }
            RespKind::Middle | RespKind::Last => {
                if psn != self.last_psn.add(1) {
                    self.rdma_seq_err(env);
                    return true;
                }
                if self.sq.get(self.sq.acked).is_none_or(|w| w.tid.is_some()) {
                    self.fail_oldest(env, WcStatus::LocalQpOperation);
                    return true;
                }
                if kind == RespKind::Middle {
                    self.read_middle(env, psn, kind, payload, mem);
                } else if payload.is_empty() {
                    self.fail_oldest(env, WcStatus::LocalLength);
                } else {
                    self.read_last(env, psn, &a, payload, mem);
                }
            }
        }
        true
    }

    /// A FIRST or MIDDLE response: exactly one MTU, not the last bytes.
    /// Kernel: `read_middle` of `rc_rcv_resp()`.
    fn read_middle(
        &mut self,
        env: &mut Env<'_, '_, P>,
        psn: Psn,
        kind: RespKind,
        payload: &[u8],
        mem: &mut impl LocalMemory,
    ) {
        let pmtu = env.conn.pmtu;
        let Some(c) = self.read_copy else {
            self.fail_oldest(env, WcStatus::LocalLength);
            return;
        };
        if payload.len() != pmtu as usize || pmtu >= c.left {
            self.fail_oldest(env, WcStatus::LocalLength);
            return;
        }
        self.retry_timer.arm(retry_ns(env.conn.timeout, 0));
        if self.flags.wait_ack {
            self.flags.wait_ack = false;
            env.schedule();
        }
        if kind == RespKind::Middle {
            self.budgets.refill_retry();
        }
        self.read_copy = Some(ReadCopy {
            offset: c.offset + pmtu,
            left: c.left - pmtu,
        });
        self.last_psn = psn;
        self.copy(env, c.offset, payload, mem);
    }

    /// A LAST or ONLY response: exactly the bytes left; the READ completes.
    /// Kernel: `read_last` of `rc_rcv_resp()`.
    fn read_last(
        &mut self,
        env: &mut Env<'_, '_, P>,
        psn: Psn,
        a: &aeth::Repr,
        payload: &[u8],
        mem: &mut impl LocalMemory,
    ) {
        let Some(c) = self.read_copy.take() else {
            self.fail_oldest(env, WcStatus::LocalLength);
            return;
        };
        if payload.len() != c.left as usize {
            self.fail_oldest(env, WcStatus::LocalLength);
            return;
        }
        if !self.copy(env, c.offset, payload, mem) {
            return;
        }
        let _ = self.do_rc_ack(env, a, psn, RespOp::Read(RespKind::Last));
    }

    /// Copies `data` into the oldest READ's scatter list from byte
    /// `offset` on. Kernel: `rvt_copy_sge()`. A buffer that is not there
    /// fails the READ (`LOC_QP_OP_ERR`).
    fn copy(
        &mut self,
        env: &mut Env<'_, '_, P>,
        offset: u32,
        data: &[u8],
        mem: &mut impl LocalMemory,
    ) -> bool {
        let ok = self
            .sq
            .get(self.sq.acked)
            .is_some_and(|w| copy_to_sges(&w.sges, offset, data, mem));
        if !ok {
            self.fail_oldest(env, WcStatus::LocalQpOperation);
        }
        ok
    }

    /// An out-of-sequence MIDDLE or LAST: restart from `s_last_psn + 1`,
    /// taking only that PSN until it comes. Kernel: `rdma_seq_err()`.
    fn rdma_seq_err(&mut self, env: &mut Env<'_, '_, P>) {
        self.stop_timers();
        self.flags.rdmar_seq = true;
        self.restart_rc(env, self.last_psn.add(1), false);
        env.schedule();
    }
}

/// Writes `data` into the scatter list `sges` from byte `offset` on;
/// false if it does not fit or the memory is missing.
fn copy_to_sges(
    sges: &[tid_flow::Sge],
    offset: u32,
    data: &[u8],
    mem: &mut impl LocalMemory,
) -> bool {
    let mut skip = u64::from(offset);
    let mut rest = data;
    for s in sges {
        if rest.is_empty() {
            break;
        }
        let len = u64::from(s.length);
        if skip >= len {
            skip -= len;
            continue;
        }
        let room = usize::try_from(len - skip).unwrap_or(usize::MAX);
        let (now, later) = rest.split_at(room.min(rest.len()));
        if !mem.write(s.vaddr.wrapping_add(skip), now) {
            return false;
        }
        rest = later;
        skip = 0;
    }
    rest.is_empty()
}
