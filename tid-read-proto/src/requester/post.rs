// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Posting a READ (kernel `rvt_post_send()` → `hfi1_setup_wqe()`): the
//! checks every post makes, the copy of its element list, and whether it
//! becomes a TID READ (its flow records allocated now) or stays a plain
//! RDMA READ.

use alloc::vec::Vec;
use hfi1_hal::Psn;
use hfi1_hal::consts::{MAX_READ_SEGS_PER_REQ, PAGE_SIZE};
use hfi1_hal::services::AllocContext;
use tid_flow::{FlowPlatform, Sge, TidRequest};

use super::wqe::{ReqState, SegState, TidRead, Wqe};
use super::{Env, Requester};
use crate::qualify::{self, NotQualified};
use crate::rc::{Connection, EngineError, WcStatus};

/// One RDMA READ work request as posted.
#[derive(Debug, Clone, Copy)]
pub struct ReadWr<'a> {
    /// The caller's id, returned in the completion.
    pub wr_id: u64,
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// The local buffer (in the sim the addresses are physical). A TID
    /// READ needs page-aligned, page-multiple elements; any other list
    /// makes a plain READ.
    pub sges: &'a [Sge],
}

impl<P: FlowPlatform> Requester<P> {
    /// Posts an RDMA READ and schedules the send engine. A READ of at
    /// least `conn.tid_read_min` bytes (256 KiB on a real QP) over
    /// page-aligned, page-multiple elements on a connection with TID
    /// RDMA becomes a TID READ (`seg_len = min(remote max_len, length)`,
    /// `n_flows = remote max_read`, flow records allocated now); any
    /// other, or one whose flow records cannot be allocated, stays a plain
    /// RDMA READ. Zero-length elements are dropped first, as rdmavt drops
    /// them. On a QP in the error state the post is accepted and the READ
    /// completes [`WcStatus::Flushed`] at once, nothing started (rdmavt's
    /// rule).
    /// Kernel: `rvt_post_send()` → `rvt_post_one_wr()` → `hfi1_setup_wqe()`
    /// → `hfi1_setup_tid_rdma_wqe()` / `setup_tid_rdma_wqe()`.
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    ///
    /// # Errors
    ///
    /// [`EngineError::QueueFull`] (completions not yet polled count),
    /// [`EngineError::BadSgl`] (longer than 2 GiB),
    /// [`EngineError::NoMemory`] (the element list could not be copied).
    pub fn post_read(
        &mut self,
        env: &mut Env<'_, '_, P>,
        wr: &ReadWr<'_>,
    ) -> Result<(), EngineError> {
        let w = self.new_wqe(wr.wr_id, wr.remote_addr, wr.rkey, wr.sges)?;
        self.queue_posted(env, w, |r, env, w| {
            w.tid = r.plan_tid(env, w);
            if w.tid.is_some() {
                r.tid_r_reqs += 1;
            } else {
                r.stats.not_qualified += 1;
            }
        });
        Ok(())
    }

    /// The checks every post makes, READ or WRITE, and its WQE: room in
    /// the send queue, at most 2 GiB, the element list copied with its
    /// zero-length elements dropped (as rdmavt drops them).
    ///
    /// # Errors
    ///
    /// [`EngineError::QueueFull`], [`EngineError::BadSgl`],
    /// [`EngineError::NoMemory`] (the list could not be copied).
    pub(crate) fn new_wqe(
        &self,
        wr_id: u64,
        remote_addr: u64,
        rkey: u32,
        sges: &[Sge],
    ) -> Result<Wqe<P>, EngineError> {
        if !self.sq.can_post() {
            return Err(EngineError::QueueFull);
        }
        let total = sges.iter().map(|s| u64::from(s.length)).sum::<u64>();
        if total > 1 << 31 {
            return Err(EngineError::BadSgl);
        }
        let length = u32::try_from(total).map_err(|_| EngineError::BadSgl)?;
        let mut out = Vec::new();
        out.try_reserve_exact(sges.len())
            .map_err(|_| EngineError::NoMemory)?;
        out.extend(sges.iter().copied().filter(|s| s.length != 0));
        Ok(Wqe::new(wr_id, remote_addr, rkey, length, out))
    }

    /// Puts a posted WQE on the send queue and schedules the send engine.
    /// On a QP that receives, `plan` first decides whether it becomes a
    /// TID request; on one in the error state the WQE completes
    /// [`WcStatus::Flushed`] at once, nothing started (rdmavt's rule).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    pub(crate) fn queue_posted(
        &mut self,
        env: &mut Env<'_, '_, P>,
        mut w: Wqe<P>,
        plan: impl FnOnce(&mut Self, &Env<'_, '_, P>, &mut Wqe<P>),
    ) {
        let status = if env.state.receives() {
            plan(self, env, &mut w);
            None
        } else {
            Some(WcStatus::Flushed)
        };
        self.sq.push(w, status);
        env.schedule();
    }

    /// The path as [`qualify`] reads it, from the connection.
    pub(crate) fn qualify_path(conn: &Connection) -> qualify::Path<'_> {
        qualify::Path {
            dlid: u32::from(conn.path.dlid),
            port_lid: u32::from(conn.path.slid),
            lmc: 0,
            is_9b: true,
            pmtu: conn.pmtu,
            remote: conn.remote_tid(),
        }
    }

    /// The TID part of a READ that qualifies, with its flow records
    /// allocated; `None` for a plain READ.
    /// Kernel: `setup_tid_rdma_wqe()`.
    fn plan_tid(&mut self, env: &Env<'_, '_, P>, w: &Wqe<P>) -> Option<TidRead<P>> {
        let conn = env.conn;
        let wr = qualify::WorkRequest {
            opcode: qualify::WrOpcode::RdmaRead,
            length: w.length,
            sges: &[],
            psn: self.next_psn,
        };
        let path = Self::qualify_path(conn);
        let aligned = qualify::sge_list_aligned(w.sges.iter().map(|s| (s.vaddr, s.length)));
        let plan = match qualify::qualify_min(&wr, &path, conn.tid_read_min) {
            Ok(_) if !aligned => Err(NotQualified::Unaligned),
            r => r,
        };
        let plan = plan.ok()?;
        let n_flows = u16::from(plan.n_flows).clamp(1, MAX_READ_SEGS_PER_REQ as u16);
        let seg_len = plan.seg_len.max(PAGE_SIZE);
        let mut req = TidRequest::new(seg_len, n_flows, conn.pmtu);
        if req.alloc_flows(&env.rcd.mem, AllocContext::Atomic).is_err() {
            self.stats.no_memory += 1;
            return None;
        }
        Some(TidRead {
            req,
            total_segs: w.length.div_ceil(seg_len),
            cur_seg: 0,
            comp_seg: 0,
            ack_pending: 0,
            state: ReqState::Active,
            s_next_psn: Psn::new(0),
            segs: [SegState::default(); hfi1_hal::consts::MAX_FLOWS],
        })
    }
}
