// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA WRITE requester, on the READ requester's send queue and
//! RC layer ([`crate::requester::Requester`]): one send queue holds READs
//! and WRITEs, so the IB PSN space, the RC retry/RNR machinery and the
//! READ/WRITE interlock are the ones `rc.c` runs.
//!
//! The rooms:
//!
//! - here: what a posted WRITE keeps ([`WriteWr`], the per-WQE
//!   `tid_rdma_request` of a TID WRITE), the QP's WRITE state
//!   ([`WriteState`]: `s_tid_head/cur/tail`, the second leg's `s_state`,
//!   `n_requests`, `n_tid_requests`, `pending_tid_w_resp`, the TID retry
//!   timer) and posting with the qualification of `setup_tid_rdma_wqe()`;
//! - `req`: the first leg's WRITE packets: the WRITE_REQ with `rc.c`'s
//!   index bookkeeping, its resend states, and the plain RDMA WRITE;
//! - `resp`: `hfi1_rc_rcv_tid_rdma_write_resp()`;
//! - `ack`: `hfi1_rc_rcv_tid_rdma_ack()` and the TID retry timer.
//!
//! Deviations from Linux 6.1:
//!
//! - **Posting runs under `s_lock`**, not `s_hlock` (rdmavt's post lock):
//!   the engines here have one lock for the QP's send state. No
//!   behaviour differs beyond serialisation; `n_requests` is a plain
//!   counter for that reason.
//! - **IB PSNs are given when a WRITE starts**, as for READs (see the
//!   READ requester's module doc); a TID WRITE takes one PSN per segment
//!   exactly as 6.1's `wqe->lpsn = psn + total_segs - 1`.
//! - A WRITE_RESP whose TID list does not cover its segment completes the
//!   oldest request `LOC_LEN_ERR` and errors the QP (6.1 errors the QP
//!   with that status and flushes every request).
//! - A RESYNC ACK's renumbering keeps the packet count of a segment
//!   already in a later generation (its WRITE_RESP came while the RESYNC
//!   was out, or after an earlier RESYNC whose ACK was lost); 6.1 counts
//!   it from the old generation's PSN, about 2048 packets, and its last
//!   PSN wraps (`ack`).
//! - A WRITE_RESP from before a RESYNC whose ACK was taken (a copy the
//!   fabric held back) is numbered into the new generation after the
//!   segments already there, as the responder renumbered it
//!   (`WriteState::after_resync`); 6.1 keeps its old generation.
//! - A TID WRITE that completes while a restart's send state names its
//!   resend (`TID_OP(WRITE_RESP)`), with no request started after it,
//!   leaves the send state at "start the next request"; 6.1 keeps the
//!   resend state for the next WQE, whatever it is
//!   (`Requester::rc_completion`).
//!
//! # Locking
//!
//! Every function runs under the QP's `s_lock` (the [`Env`] carries its
//! token). The kernel holds `r_lock` as well on the receive and timer
//! paths.

mod ack;
mod req;
mod resp;

use hfi1_hal::FlowPsn;
use hfi1_hal::consts::MAX_FLOWS;
use hfi1_hal::flags::TidFlags;
use hfi1_hal::services::AllocContext;
use tid_flow::{FlowPlatform, Sge, TidRequest};

pub use ack::TidAckVerdict;
pub(crate) use req::read_sges;
pub use req::{
    NoSource, OP_RDMA_WRITE_FIRST, OP_RDMA_WRITE_LAST, OP_RDMA_WRITE_MIDDLE, OP_RDMA_WRITE_ONLY,
};
pub use resp::WriteRespVerdict;

use crate::qualify::WrOpcode;
use crate::qualify_write::{WriteWorkRequest, qualify_write};
use crate::rc::retry::Timer;
use crate::rc::{EngineError, counters};
use crate::requester::{Env, Requester};
use crate::write::TidReqState;

/// TID RDMA WRITEs a QP may have started and not completed.
/// Kernel: `HFI1_TID_RDMA_WRITE_CNT`.
pub const TID_WRITE_CNT: u32 = 8;

/// One RDMA WRITE work request as posted.
#[derive(Debug, Clone, Copy)]
pub struct WriteWr<'a> {
    /// The caller's id, returned in the completion.
    pub wr_id: u64,
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// The local source buffer (in the sim the addresses are physical).
    pub sges: &'a [Sge],
}

/// The TID part of a WRITE. Kernel: `struct tid_rdma_request`
/// (requester side of a TID WRITE).
pub(crate) struct TidWrite<P: FlowPlatform> {
    /// The ring of the responder's segments (no local TIDs).
    pub(crate) req: TidRequest<P>,
    /// Kernel: `req->total_segs`.
    pub(crate) total_segs: u32,
    /// WRITE_RESPs received. Kernel: `req->comp_seg`.
    pub(crate) comp_seg: u32,
    /// Segments whose data was sent. Kernel: `req->cur_seg`.
    pub(crate) cur_seg: u32,
    /// Segments acknowledged. Kernel: `req->ack_seg`.
    pub(crate) ack_seg: u32,
    /// Kernel: `req->state`.
    pub(crate) state: TidReqState,
    /// The flow PSN a TID NAK restarts from. Kernel: `req->r_ack_psn`.
    pub(crate) r_ack_psn: FlowPsn,
}

/// The WRITE part of a WQE.
pub(crate) struct WriteWqe<P: FlowPlatform> {
    /// The TID part; `None` for a plain RDMA WRITE.
    pub(crate) tid: Option<TidWrite<P>>,
}

/// Which packet the second leg builds next. Kernel: `priv->s_state`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // the kernel's `TID_OP(WRITE_*)` names
pub(crate) enum TidSendState {
    /// Load the source walk of the WQE at `s_tid_tail`, then send data.
    /// Kernel: `TID_OP(WRITE_RESP)`.
    #[default]
    WriteResp,
    /// Rewind first (a TID NAK or an expiry), then send data. Kernel:
    /// `TID_OP(WRITE_REQ)`.
    WriteReq,
    /// Sending data. Kernel: `TID_OP(WRITE_DATA)`.
    WriteData,
    /// Nothing newer to send. Kernel: `TID_OP(WRITE_DATA_LAST)`.
    WriteDataLast,
    /// Send a RESYNC (the TID retry timer expired). Kernel:
    /// `TID_OP(RESYNC)`.
    Resync,
}

counters! {
    /// What the WRITE requester and its second leg counted.
    pub struct WriteStats {
        /// WRITEs posted as TID WRITEs.
        pub tid_writes,
        /// WRITEs posted as plain RDMA WRITEs.
        pub plain_writes,
        /// WRITE_REQs sent (first sends).
        pub write_reqs,
        /// WRITE_REQs sent again after a restart.
        pub write_req_resends,
        /// WRITE_REQ resends for no bytes: a restart past the WRITE's
        /// last PSN (every WRITE_RESP in, data not yet acknowledged) at a
        /// WRITE the send engine then resumes, as 6.1's `reset_psn()` and
        /// `hfi1_make_rc_req()` do; the responder NAKs it invalid.
        pub empty_write_req_resends,
        /// Plain RDMA WRITE packets sent.
        pub plain_packets,
        /// WRITE_RESPs taken.
        pub write_resps,
        /// WRITE_RESPs dropped (stale, ahead, no room, wrong WQE).
        pub write_resps_dropped,
        /// WRITE_DATA / WRITE_DATA_LAST packets sent.
        pub data_packets,
        /// Segments whose data was sent (first time or again).
        pub segments_sent,
        /// TID ACKs taken (ACK class).
        pub tid_acks,
        /// TID NAKs taken.
        pub tid_naks,
        /// TID ACKs dropped (stale, not a TID WRITE at `s_acked`).
        pub tid_acks_dropped,
        /// Segments acknowledged.
        pub segments_acked,
        /// TID WRITEs completed.
        pub completed,
        /// TID retry timer expiries that found it running.
        pub tid_retry_expiries,
        /// RESYNCs sent.
        pub resyncs,
        /// RESYNC ACKs taken.
        pub resync_acks,
        /// WRITE_RESPs from before a RESYNC the requester had taken the
        /// ACK of, renumbered after the segments already numbered.
        pub stale_write_resps,
        /// Second-leg work items that ran (passed `hfi1_send_tid_ok()`).
        pub second_leg_runs,
        /// Second-leg schedules that queued the work item.
        pub second_leg_queued,
    }
}

/// The QP's TID WRITE requester state. Kernel: the WRITE parts of
/// `hfi1_qp_priv`.
///
/// # Locking
///
/// Part of the QP's state under its `s_lock`.
#[derive(Debug, Default)]
pub struct WriteState {
    /// Newest TID WRITE whose WRITE_REQ went out. Kernel: `s_tid_head`
    /// (`None`: `HFI1_QP_WQE_INVALID`).
    pub(crate) s_tid_head: Option<u32>,
    /// TID WRITE collecting WRITE_RESPs. Kernel: `s_tid_cur`.
    pub(crate) s_tid_cur: Option<u32>,
    /// TID WRITE whose data the second leg sends. Kernel: `s_tid_tail`.
    pub(crate) s_tid_tail: Option<u32>,
    /// Kernel: `priv->s_state`.
    pub(crate) s_state: TidSendState,
    /// TID WRITEs posted, not started. Kernel: `priv->n_requests`.
    pub(crate) n_requests: u32,
    /// TID WRITEs started, not completed. Kernel: `priv->n_tid_requests`.
    pub(crate) n_tid_requests: u32,
    /// WRITE_RESPs outstanding. Kernel: `priv->pending_tid_w_resp`.
    pub(crate) pending_tid_w_resp: u32,
    /// The second leg's flags. Kernel: `priv->s_flags`.
    pub(crate) tid_flags: TidFlags,
    /// The TID retry timer. Kernel: `priv->s_tid_retry_timer` with
    /// `HFI1_S_TID_RETRY_TIMER`.
    pub(crate) tid_retry: Timer,
    /// TID retries left. Kernel: `priv->s_retry`.
    pub(crate) s_retry: u8,
    /// The PSN of the RESYNC in flight. Kernel: `priv->s_resync_psn`.
    pub(crate) s_resync_psn: hfi1_hal::Psn,
    /// The generation the last RESYNC ACK renumbered into, and its next
    /// sequence not yet given to a segment; cleared once a WRITE_RESP
    /// names a later generation. Not in 6.1 (see
    /// [`WriteState::after_resync`]).
    pub(crate) resync_numbering: Option<(hfi1_hal::Generation, u32)>,
    /// What happened so far.
    pub stats: WriteStats,
}

impl WriteState {
    /// A segment from a WRITE_RESP, numbered after the last RESYNC the
    /// requester took the ACK of: one the responder built before that
    /// RESYNC (a copy the fabric held back) names the old generation,
    /// whose PSNs the responder renumbered with every segment it held;
    /// it takes the next sequences of the new generation, as the
    /// responder's renumbering gave it.
    ///
    /// Deviation from 6.1: `hfi1_rc_rcv_tid_rdma_write_resp()` keeps the
    /// old generation; its data then fails the chip's generation check,
    /// and a NAK in the new generation acknowledges the segment (its
    /// last PSN lies before the NAK's), which the responder never
    /// received: the WRITE stalls with the responder's TIDs held
    /// (`tests/write_requester.rs`:
    /// `a_write_resp_from_before_a_resync_is_renumbered`).
    pub(crate) fn after_resync(
        &mut self,
        mut seg: tid_flow::RemoteSegment,
    ) -> tid_flow::RemoteSegment {
        let Some((generation, next)) = self.resync_numbering else {
            return seg;
        };
        if generation_before(seg.generation, generation) {
            seg.generation = generation;
            seg.spsn = next;
            self.stats.stale_write_resps += 1;
        } else if seg.generation != generation {
            self.resync_numbering = None;
            return seg;
        }
        self.resync_numbering = Some((generation, seg.spsn.saturating_add(seg.npkts)));
        seg
    }

    /// TID WRITEs started and not completed.
    pub fn started(&self) -> u32 {
        self.n_tid_requests
    }

    /// The TID retry timer. Kernel: `priv->s_tid_retry_timer`.
    pub fn tid_retry_timer(&self) -> Timer {
        self.tid_retry
    }

    /// WRITE_RESPs outstanding. Kernel: `priv->pending_tid_w_resp`.
    pub fn pending_responses(&self) -> u32 {
        self.pending_tid_w_resp
    }

    /// The second leg's flags. Kernel: `priv->s_flags`.
    pub fn tid_flags(&self) -> TidFlags {
        self.tid_flags
    }
}

impl<P: FlowPlatform> Requester<P> {
    /// Posts an RDMA WRITE and schedules the first leg. One of at least
    /// 256 KiB to a page-aligned remote address with a page-multiple
    /// length on a connection with TID RDMA becomes a TID WRITE
    /// (`seg_len = min(remote max_len, length)`, flow records allocated
    /// now, `acked_tail = setup_head`); any other, or one whose flow
    /// records cannot be allocated, stays a plain RDMA WRITE. The local
    /// buffer's alignment is not looked at. On a QP in the error state the
    /// WRITE completes
    /// [`WcStatus::Flushed`](crate::rc::WcStatus::Flushed) at once.
    /// Kernel: `rvt_post_one_wr()` → `hfi1_setup_tid_rdma_wqe()` →
    /// `setup_tid_rdma_wqe()` (WRITE half).
    ///
    /// # Locking
    ///
    /// The QP's `s_lock` held (`env`).
    ///
    /// # Errors
    ///
    /// [`EngineError::QueueFull`], [`EngineError::BadSgl`] (longer than
    /// 2 GiB), [`EngineError::NoMemory`].
    pub fn post_write(
        &mut self,
        env: &mut Env<'_, '_, P>,
        wr: &WriteWr<'_>,
    ) -> Result<(), EngineError> {
        let mut w = self.new_wqe(wr.wr_id, wr.remote_addr, wr.rkey, wr.sges)?;
        w.write = Some(WriteWqe { tid: None });
        self.queue_posted(env, w, |r, env, w| {
            let tid = r.plan_tid_write(env, w.remote_addr, w.length);
            if tid.is_some() {
                r.write.n_requests += 1;
                r.write.stats.tid_writes += 1;
            } else {
                r.write.stats.plain_writes += 1;
            }
            w.write = Some(WriteWqe { tid });
        });
        Ok(())
    }

    /// The TID part of a WRITE that qualifies. Kernel:
    /// `setup_tid_rdma_wqe()`, WRITE half.
    fn plan_tid_write(
        &mut self,
        env: &Env<'_, '_, P>,
        remote_addr: u64,
        length: u32,
    ) -> Option<TidWrite<P>> {
        let conn = env.conn;
        let path = Self::qualify_path(conn);
        let wr = WriteWorkRequest {
            opcode: WrOpcode::RdmaWrite,
            length,
            remote_addr,
            psn: self.next_psn,
        };
        let plan = qualify_write(&wr, &path).ok()?;
        let n_flows = u16::from(plan.n_flows).clamp(1, MAX_FLOWS as u16);
        let mut req = TidRequest::new(plan.seg_len, n_flows, conn.pmtu);
        if req.alloc_flows(&env.rcd.mem, AllocContext::Atomic).is_err() {
            return None;
        }
        req.acked_tail = req.setup_head;
        Some(TidWrite {
            req,
            total_segs: plan.total_segs,
            comp_seg: 0,
            cur_seg: 0,
            ack_seg: 0,
            state: TidReqState::Inactive,
            r_ack_psn: FlowPsn::from_raw(0),
        })
    }

    /// The QP went to the error state: the WRITE state goes back to idle
    /// and every TID WRITE's flow records are freed (their completions
    /// are the error path's). Kernel: the WRITE part of `rvt_error_qp()` /
    /// `hfi1_qp_priv` reset.
    pub(crate) fn write_error(&mut self) {
        let stats = self.write.stats;
        let retry = self.write.s_retry;
        for (_, w) in self.sq.unfinished_mut() {
            if let Some(t) = w.write.as_mut().and_then(|x| x.tid.as_mut()) {
                if t.req.free_flow_records().is_err() {
                    self.stats.clean_refused += 1;
                }
            }
        }
        self.write = WriteState {
            stats,
            s_retry: retry,
            ..WriteState::default()
        };
    }

    /// The WRITE requester's state.
    pub fn write_state(&self) -> &WriteState {
        &self.write
    }
}

/// True if generation `a` comes before `b` in the generations' serial
/// order (half the space ahead).
fn generation_before(a: hfi1_hal::Generation, b: hfi1_hal::Generation) -> bool {
    use hfi1_hal::consts::GENERATION_MASK;
    let d = b.get().wrapping_sub(a.get()) & GENERATION_MASK;
    d != 0 && d <= GENERATION_MASK / 2
}
