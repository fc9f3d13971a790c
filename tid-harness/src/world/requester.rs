// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The requester node's actions of [`TwoNodes`] (the READ half; the
//! WRITE half's are in `write`): action 1, its trigger work, memory timer
//! and send engines; action 4, a packet's arrival and the completions it
//! brings, each matched with its READ and checked; action 5, its retry
//! and RNR timers.
//!
//! # Locking
//!
//! Every action runs with no lock held (the `root` token) and takes one
//! requester QP's `s_lock` at a time (and, inside the engines, the
//! context's `exp_lock`).

use alloc::vec::Vec;

use hfi1_hal::FlowPsn;
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::services::TidScheduler;
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::qp;
use tid_read_proto::rc::retry::Timer;
use tid_read_proto::rc::{Completion, WcStatus};

use super::{Arrival, AtRequester, Done, Node, REQUESTER, Ran, TwoNodes, outcome, write};
use crate::chip::{self, Arriving, DestMemory};
use crate::doubles::{self, MemSource};

impl<P: Node> TwoNodes<P>
where
    P::Sched: TidScheduler<P::Ref>,
{
    /// Action 1a: runs the oldest trigger work item (a wake-up: the QP's
    /// send engine if it still waits); with none queued, the memory timer
    /// ticks instead ([`Self::tick_memory_timer`]). `None` if neither had
    /// anything to do.
    pub fn run_trigger_work(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        match self.run_work_item(root) {
            Some(r) => Some(r),
            None => self.tick_memory_timer(root),
        }
    }

    /// The oldest trigger work item, if one is queued.
    fn run_work_item(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let (_, qp) = self.rcd.sched.pop_work()?;
        let i = Self::requester_index(&qp);
        let (rcd, out, src) = (&self.rcd, &mut self.to_responders, MemSource(&self.mem));
        let mut result = Ok(());
        qp_wait::trigger_resume::<P>(qp, root, |qp, root| {
            result = qp::send_engine_with(rcd, qp, root, out, &src);
        });
        Some(Ran { qp: i, result })
    }

    /// One tick of the memory timer: the QP longest on the memory-wait
    /// list leaves it and has its send engine scheduled, as the kernel's
    /// `mem_timer()` wakes one waiter per tick with `hfi1_qp_wakeup(qp,
    /// RVT_S_WAIT_KMEM)`. A QP is there when a DMA mapping of its segment
    /// failed: the sim's map fails only when told to (`rcd.dma.fail_in`)
    /// or for a page set starting at a page another segment still has
    /// mapped (a READ posted into the pages of one in flight). Returns
    /// that QP (with `Ok`: the engine runs with the scheduled sends), or
    /// `None` if none waits.
    pub fn tick_memory_timer(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let qp = self.rcd.sched.kmem_tick()?;
        kmem_wakeup::<P>(&qp, &mut qp.s_lock.lock(root).flags, &self.rcd.sched);
        Some(Ran {
            qp: Self::requester_index(&qp),
            result: Ok(()),
        })
    }

    /// Action 1b: runs the oldest scheduled requester send engine. `None`
    /// if none is scheduled.
    pub fn run_requester_send(&mut self, root: &mut LockToken<'_, Unlocked>) -> Option<Ran> {
        let qp = self.rcd.sched.pop_send()?;
        let src = MemSource(&self.mem);
        let result = qp::send_engine_with(&self.rcd, &qp, root, &mut self.to_responders, &src);
        Some(Ran {
            qp: Self::requester_index(&qp),
            result,
        })
    }

    /// Action 1: every trigger work item and one memory-timer tick, then
    /// every scheduled send engine, then every second leg.
    pub fn run_requesters(&mut self, root: &mut LockToken<'_, Unlocked>) -> Vec<Ran> {
        let mut ran = Vec::new();
        while let Some(r) = self.run_work_item(root) {
            ran.push(r);
        }
        ran.extend(self.tick_memory_timer(root));
        while let Some(r) = self.run_requester_send(root) {
            ran.push(r);
        }
        while let Some(r) = self.run_requester_second_leg(root) {
            ran.push(r);
        }
        ran
    }

    /// Action 4: the requester node receives `bytes`: a TID READ_RESP
    /// through its chip, an ACK or NAK, a plain READ response, a
    /// WRITE_RESP or a TID ACK straight to the QP (eager receive); then
    /// that QP's completions are taken, matched and checked.
    pub fn deliver_to_requester(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> AtRequester {
        let (arrival, taken) = self.arrive(bytes, root);
        let done = match arrival.qp() {
            Some(i) => taken.into_iter().map(|c| self.finish(i, c)).collect(),
            None => Vec::new(),
        };
        AtRequester { arrival, done }
    }

    /// The packet reaches its QP, whose completions are taken under the
    /// same `s_lock`.
    fn arrive(
        &mut self,
        bytes: &[u8],
        root: &mut LockToken<'_, Unlocked>,
    ) -> (Arrival, Vec<Completion>) {
        if write::opcode(bytes).is_some_and(write::to_requester_write) {
            return self.arrive_write(bytes, root);
        }
        let p = match packet::parse(bytes) {
            Ok((_, p)) => p,
            Err(e) => return (Arrival::Unparsable(e), Vec::new()),
        };
        let i = match p {
            Parsed::ReadResp { hdr, .. } => hdr.verbs_qp.wrapping_sub(REQUESTER.qpn),
            Parsed::Ack { bth, .. } | Parsed::ReadResponse { bth, .. } => {
                bth.dest_qp.wrapping_sub(REQUESTER.qpn)
            }
            Parsed::ReadReq { .. } | Parsed::ReadRequest { .. } => {
                return (Arrival::Unexpected, Vec::new());
            }
        } as usize;
        let Some(qp) = self.requesters.get(i) else {
            return (Arrival::NoSuchQp, Vec::new());
        };
        let mut g = qp.s_lock.lock(root);
        let arrival = match p {
            Parsed::ReadResp { bth, hdr, payload } => {
                let pkt = Arriving {
                    dest_qp: bth.dest_qp,
                    psn: FlowPsn::from_raw(bth.psn.get()),
                    hdr: &hdr,
                    payload,
                };
                let (outcome, verdict) =
                    chip::receive_read_resp(&self.rcd, qp, &mut g, &mut self.mem, pkt);
                Arrival::ReadResp {
                    qp: i,
                    outcome,
                    verdict,
                }
            }
            Parsed::Ack { bth, aeth } => {
                let verdict = qp::receive_ack(&self.rcd, qp, &mut g, bth.psn, &aeth);
                Arrival::Ack {
                    qp: i,
                    aeth,
                    verdict,
                }
            }
            Parsed::ReadResponse {
                bth,
                kind,
                aeth,
                payload,
            } => {
                let mut mem = DestMemory(&mut self.mem);
                let taken = qp::receive_read_response(
                    &self.rcd, qp, &mut g, bth.psn, kind, aeth, payload, &mut mem,
                );
                Arrival::ReadResponse { qp: i, taken }
            }
            Parsed::ReadReq { .. } | Parsed::ReadRequest { .. } => Arrival::Unexpected,
        };
        let mut taken = Vec::new();
        while let Some(c) = g.ext.requester.poll() {
            taken.push(c);
        }
        (arrival, taken)
    }

    /// Takes requester `i`'s completions: each is matched with its READ,
    /// a successful one's destination is compared with the source, and
    /// the READ's pages leave the destination memory.
    pub fn poll(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> Vec<Done> {
        let mut taken = Vec::new();
        if let Some(qp) = self.requesters.get(i) {
            let mut g = qp.s_lock.lock(root);
            while let Some(c) = g.ext.requester.poll() {
                taken.push(c);
            }
        }
        taken.into_iter().map(|c| self.finish(i, c)).collect()
    }

    fn finish(&mut self, i: usize, c: Completion) -> Done {
        let posted = self.posted.get_mut(i).and_then(|p| p.remove(&c.wr_id));
        if let Some(p) = posted.as_ref().filter(|p| p.write) {
            let data = self.finish_write(i, p, &c);
            return Done {
                qp: i,
                completion: c,
                posted,
                data,
            };
        }
        let data = posted.as_ref().and_then(|p| {
            let ok = c.status == WcStatus::Success;
            let whole_pages = p
                .sges
                .iter()
                .all(|s| s.vaddr % 4096 == 0 && s.length % 4096 == 0);
            let check = ok.then(|| {
                if whole_pages {
                    doubles::check_data(&self.mem, &p.sges, p.remote)
                } else {
                    outcome::check_bytes(&self.mem, &p.sges, p.remote)
                }
            });
            doubles::unmap(&mut self.mem, &p.sges);
            check
        });
        Done {
            qp: i,
            completion: c,
            posted,
            data,
        }
    }

    /// Action 5, for one QP: requester `i`'s retry timer expires. Returns
    /// true if it was running (and so restarted, or spent the budget).
    /// The completions it may cause are taken by [`Self::poll`].
    pub fn fire_timer(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        let Some(qp) = self.requesters.get(i) else {
            return false;
        };
        let mut g = qp.s_lock.lock(root);
        qp::timeout(&self.rcd, qp, &mut g)
    }

    /// Action 5b, for one QP: requester `i`'s RNR timer expires. Returns
    /// true if it was running.
    pub fn fire_rnr_timer(&mut self, i: usize, root: &mut LockToken<'_, Unlocked>) -> bool {
        let Some(qp) = self.requesters.get(i) else {
            return false;
        };
        let mut g = qp.s_lock.lock(root);
        qp::rnr_timeout(&self.rcd, qp, &mut g)
    }

    /// Action 5: every requester timer that runs (retry, RNR and TID
    /// retry) expires. Returns how many did.
    pub fn fire_timers(&mut self, root: &mut LockToken<'_, Unlocked>) -> usize {
        (0..self.requesters.len())
            .map(|i| {
                usize::from(self.fire_rnr_timer(i, root))
                    + usize::from(self.fire_timer(i, root))
                    + usize::from(self.fire_tid_retry_timer(i, root))
            })
            .sum()
    }

    /// Requester `i`'s retry and RNR timers (each armed with a duration,
    /// and an epoch that changes with every arm and stop: the caller keeps
    /// the deadlines).
    pub fn timers(&self, i: usize, root: &mut LockToken<'_, Unlocked>) -> Option<(Timer, Timer)> {
        let qp = self.requesters.get(i)?;
        let g = qp.s_lock.lock(root);
        let r = &g.ext.requester;
        Some((r.retry_timer(), r.rnr_timer()))
    }
}

/// [`qp_wait::kmem_wakeup`] through the platform's scheduler bound (the
/// sim scheduler's own impl asks for `Send` QP references, which a
/// generic node's are not known to be).
///
/// # Locking
///
/// `qp`'s `s_lock` held (`flags`).
fn kmem_wakeup<P: qp_wait::WaitPlatform>(
    qp: &P::Ref,
    flags: &mut qp_wait::SFlags,
    sched: &P::Sched,
) {
    qp_wait::kmem_wakeup(qp, flags, sched);
}
