// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! [`Mode::WritePair`](super::Mode::WritePair): TID RDMA WRITEs (and READs
//! mixed in) between the two nodes, only real packets on the wire, on a
//! schedule the input picks: both nodes' first legs, second legs and
//! trigger work, deliveries in order or not, drops, duplicates, stale
//! replays (a WRITE_DATA of a generation the responder has left, an old
//! WRITE_RESP), the requester's RC retry, RNR and TID retry timers, the
//! responder's reap timer, and RNR pressure from a responder context with
//! room for one segment at a time.
//!
//! Every WRITE posted qualifies as a TID WRITE (256 or 512 KiB, page
//! aligned): the world's responder has no receive path for a plain RDMA
//! WRITE, so one could never complete.

use hfi1_hal::Psn;
use hfi1_hal::consts::{PAGE_SIZE, TID_GROUP_SIZE};
use hfi1_hal::lock_order::LockToken;
use tid_read_proto::rc::EngineError;
use tid_read_proto::write::requester::{TidAckVerdict, WriteRespVerdict};

use super::input::{FUZZ_TID_READ_MIN, Input, pick};
use super::{MAX_POSTS, World};
use crate::world::Setup;

/// Bytes of the smallest TID WRITE (the qualification's minimum).
const WRITE_UNIT: u32 = 256 * 1024;

/// Bytes of each responder QP's writable region: room for two of the
/// largest WRITEs in flight.
const WRITE_REGION: u64 = 4 * WRITE_UNIT as u64;

/// The two nodes a write-pair input picks with its first two bytes: 1 or
/// 2 QP pairs, the responder's segment size (its OPFN `max_len`: 4, 16,
/// 64 or 256 KiB, so a 256 KiB WRITE has 64, 16, 4 or 1 segments), its
/// context's TID groups (exactly enough for one scattered segment, or
/// twice that: with two QPs or several segments in flight the smaller
/// one makes the responder queue and RNR-NAK), either MTU, the
/// requester's groups and `max_rd_atomic` for the READs mixed in, a first
/// PSN sometimes just before the wrap, and the flow generations' seed.
pub fn write_setup(inp: &mut Input<'_>) -> Setup {
    let a = inp.u8();
    let b = inp.u8();
    let seg_len = [4096u32, 16384, 65536, 256 * 1024][usize::from((a >> 1) & 3)];
    let seg_pages = (seg_len / PAGE_SIZE) as usize;
    let one_segment = seg_pages.div_ceil(TID_GROUP_SIZE);
    Setup {
        qps: 1 + usize::from(a & 1),
        groups: 1 + usize::from(b & 3),
        resp_groups: one_segment << ((a >> 3) & 1),
        pmtu: if a & 0x10 != 0 { 8192 } else { 4096 },
        seg_len,
        max_rd_atomic: 1 + u32::from(b >> 2) % 16,
        first_psn: Psn::new(if a & 0x20 != 0 { 0x7FFF_FFF8 } else { 0x10 }),
        seed: u64::from(a >> 6) | u64::from(b) << 2,
        tid_read_min: FUZZ_TID_READ_MIN,
        retry_cnt: 7,
        write_region_len: WRITE_REGION,
        region_len: super::FUZZ_REGION_LEN,
        ..Setup::default()
    }
}

impl World {
    /// Posts on QP `i` a TID WRITE of 256 or 512 KiB from scattered
    /// source pages (three times in four), or a READ as the READ modes
    /// post one.
    pub(super) fn post_any(&mut self, i: usize, inp: &mut Input<'_>) {
        let b = inp.u8();
        if b & 3 == 3 {
            self.post(i, inp);
            return;
        }
        if self.posts[i] >= MAX_POSTS {
            return;
        }
        let len = WRITE_UNIT << (b >> 7);
        let mut root = LockToken::root();
        if !self.nodes.can_post_write(i, len, &mut root) {
            return;
        }
        let sges = self.nodes.pages.scattered(u64::from(len / PAGE_SIZE));
        match self.nodes.post_write(i, sges, &mut root) {
            Ok(_) => self.posts[i] += 1,
            Err(EngineError::QueueFull) => {}
            Err(e) => panic!("post_write refused a valid TID WRITE: {e}"),
        }
    }

    /// Runs one queued requester second leg (WRITE_DATA, RESYNC). False
    /// if none was queued.
    pub(super) fn req_second_leg(&mut self) -> bool {
        let ran = self.nodes.run_requester_second_leg(&mut LockToken::root());
        self.after_requester(ran, "requester second leg")
    }

    /// Runs one responder-node work item (a QP woken from the wait
    /// queues, whose first leg allocates and sends up to `budget`
    /// packets, or a scheduled send). False if none waited.
    pub(super) fn resp_work(&mut self, budget: u32) -> bool {
        let mut root = LockToken::root();
        match self.nodes.run_responder_work(budget, &mut root) {
            None => return false,
            Some((_, Err(e))) => panic!("responder work failed: {e}"),
            Some((_, Ok(_))) => {}
        }
        self.ship(false);
        true
    }

    /// Runs one queued responder second leg (the TID ACK or NAK owed).
    /// False if none was queued.
    pub(super) fn resp_second_leg(&mut self) -> bool {
        let mut root = LockToken::root();
        match self.nodes.run_responder_second_leg(&mut root) {
            None => return false,
            Some((_, Err(e))) => panic!("responder second leg failed: {e}"),
            Some((_, Ok(_))) => {}
        }
        self.ship(false);
        true
    }

    /// Responder `i`'s reap timer expires now (as if the data had been
    /// withheld past it): if it acts, the responder QP errors, and every
    /// failure of requester `i` from then on is explained.
    pub(super) fn reap(&mut self, i: usize) {
        if self.nodes.fire_reap_timer(i, &mut LockToken::root()) {
            if self.trace {
                std::eprintln!("reap timer of responder {i} acted");
            }
            self.faults += 1;
            self.reaped[i] = true;
        }
    }

    /// A WRITE_RESP or TID ACK verdict that moved the requester on counts
    /// as progress for the drain's idle count (a WRITE of many segments
    /// under RNR pressure needs many timer expiries between completions).
    pub(super) fn write_progress(
        &mut self,
        resp: Option<WriteRespVerdict>,
        ack: Option<TidAckVerdict>,
    ) {
        if resp == Some(WriteRespVerdict::Taken)
            || matches!(ack, Some(TidAckVerdict::Acked { segments, .. }) if segments > 0)
        {
            self.progress = true;
        }
    }

    /// Checks the responder node between any two steps: each WRITE
    /// responder allocates at most its advertised `max_write` segments at
    /// a time and holds no more segments than it allocated; the responder
    /// context's RcvArray entries and flows in use fit it; its chip never
    /// wrote to a page no live segment owns.
    pub(super) fn check_write_responders(&self) {
        let mut root = LockToken::root();
        let nodes = &self.nodes;
        for (i, qp) in nodes.responders.iter().enumerate() {
            let mut g = qp.s_lock.lock(&mut root);
            let w = &g.ext.write_responder;
            let max_write = u32::from(self.cfg.connections(i).1.local.max_write);
            assert!(
                w.alloc_w_segs() <= max_write,
                "responder {i}: {} segments allocated, max_write {max_write}",
                w.alloc_w_segs()
            );
            let (_, tok) = g.parts();
            let e = nodes.resp_rcd.exp_lock.lock(tok);
            super::checks::ctxt_fits(&e, self.cfg.resp_groups, self.cfg.qps, "responder");
        }
    }

    /// Runs one write-pair schedule step.
    pub(super) fn step_write(&mut self, inp: &mut Input<'_>) {
        self.sum.steps += 1;
        let op = inp.u8();
        let n = self.cfg.qps;
        match op % 20 {
            0 | 1 => {
                self.req_send();
            }
            2 => {
                self.req_work();
            }
            3 => {
                self.req_second_leg();
            }
            4 | 5 => {
                let i = inp.below(n);
                let budget = 1 + inp.below(16) as u32;
                self.resp_send(i, budget);
            }
            6 => {
                let budget = 1 + inp.below(16) as u32;
                self.resp_work(budget);
            }
            7 => {
                self.resp_second_leg();
            }
            8 | 9 => {
                let k = pick(inp, self.to_resp.len());
                self.faults += u64::from(k.is_some_and(|k| k > 0));
                if let Some(p) = k.and_then(|k| self.to_resp.remove(k)) {
                    self.deliver_to_resp(&p, true);
                }
            }
            10 | 11 => {
                let k = pick(inp, self.to_req.len());
                self.faults += u64::from(k.is_some_and(|k| k > 0));
                if let Some(p) = k.and_then(|k| self.to_req.remove(k)) {
                    self.deliver_to_req(&p, true);
                }
            }
            12 => self.fault_drop(inp),
            13 => self.fault_duplicate(inp),
            14 => self.fault_replay(inp),
            15 => {
                let i = inp.below(n);
                self.timeout(i);
            }
            16 => {
                let i = inp.below(n);
                self.post_any(i, inp);
            }
            17 => {
                let (i, b) = (inp.below(n), inp.u8());
                if b & 7 == 0 {
                    self.reap(i);
                }
            }
            18 => {
                if let Some(p) = self.to_req.pop_front() {
                    self.deliver_to_req(&p, true);
                }
            }
            _ => {
                if let Some(p) = self.to_resp.pop_front() {
                    self.deliver_to_resp(&p, true);
                }
            }
        }
        for i in 0..n {
            self.poll(i);
        }
    }
}
