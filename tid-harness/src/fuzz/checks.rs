// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the fuzz world checks: the promises that hold between any two
//! steps, the state of a stuck input, and the teardown.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use hfi1_hal::consts::TID_GROUP_SIZE;
use hfi1_hal::lock_order::LockToken;
use tid_read_proto::rc::SQ_SIZE;

use tid_flow::ExpState;

use super::{Mode, Summary, World};
use crate::platform::SoftPlatform;
use crate::world::Leaks;

/// What must hold of a node's receive context (`node` names it): the
/// RcvArray entries in use fit its `groups`, no more flows are reserved
/// than `qps`, and its chip never wrote through a TID to a page no live
/// request owns.
pub(super) fn ctxt_fits(e: &ExpState<SoftPlatform>, groups: usize, qps: usize, node: &str) {
    let total = (groups * TID_GROUP_SIZE) as u32;
    assert!(
        e.groups.entries_in_use() <= total,
        "{node} context: {} TID entries in use of {total}",
        e.groups.entries_in_use()
    );
    assert!(
        e.flows.mask().count_ones() as usize <= qps,
        "{node} context: more flows in use than QPs: {:#x}",
        e.flows.mask()
    );
    assert_eq!(
        e.chip.faults(),
        0,
        "{node} context: the chip wrote through a TID to a page no live request owns"
    );
}

impl World {
    /// Checks what must hold between any two steps.
    pub(super) fn check(&mut self) {
        let mut root = LockToken::root();
        let mut held = 0u64;
        let nodes = &self.nodes;
        for (i, (rq, sq)) in nodes.requesters.iter().zip(&nodes.responders).enumerate() {
            let mut g = rq.s_lock.lock(&mut root);
            let r = &g.ext.requester;
            assert!(
                r.outstanding() as usize <= SQ_SIZE,
                "QP {i}: {} requests outstanding",
                r.outstanding()
            );
            assert!(
                r.reads_outstanding() <= self.cfg.max_rd_atomic
                    && r.pending_segments() <= r.reads_outstanding(),
                "QP {i}: {} reads ({} segments) outstanding, max_rd_atomic {}: {r:?}",
                r.reads_outstanding(),
                r.pending_segments(),
                self.cfg.max_rd_atomic
            );
            assert!(
                r.stats.segments_done <= r.stats.segments,
                "QP {i}: {} segments completed of {} requested",
                r.stats.segments_done,
                r.stats.segments
            );
            let first = self.cfg.first_psn;
            assert!(
                r.next_psn().delta(r.last_psn()) >= 1 && r.last_psn().delta(first.sub(1)) >= 0,
                "QP {i}: s_last_psn {:#x} outside [{:#x}, s_next_psn {:#x})",
                r.last_psn().get(),
                first.sub(1).get(),
                r.next_psn().get()
            );
            let next = r.next_psn();
            if r.last_psn().delta(self.completed_to[i]) > 0 {
                self.completed_to[i] = r.last_psn();
            }
            {
                let (_, tok) = g.parts();
                let e = nodes.rcd.exp_lock.lock(tok);
                ctxt_fits(&e, self.cfg.groups, self.cfg.qps, "requester");
            }
            drop(g);
            let g = sq.s_lock.lock(&mut root);
            if self.mode != Mode::ResponderRx {
                assert!(
                    next.delta(g.ext.responder.expected_psn()) >= 0,
                    "QP {i}: the responder expects PSN {:#x}, the requester handed out up to {:#x}",
                    g.ext.responder.expected_psn().get(),
                    next.get()
                );
            }
            assert!(g.ext.responder.msn() <= 0x00FF_FFFF, "r_msn over 24 bits");
            held += g.ext.responder.mr_refs() as u64;
        }
        assert_eq!(
            nodes.regions.refs(),
            held,
            "MR references taken and not held by an ack-queue entry (or held twice)"
        );
        assert_eq!(
            nodes.regions.misuses(),
            0,
            "an MR reference was put twice, or a handle never handed out was put"
        );
        self.check_write_responders();
    }

    /// Every QP's state, for a stuck input's report.
    pub(super) fn state(&self) -> String {
        let mut root = LockToken::root();
        let mut s = format!("{:?}\n", self.cfg);
        for (i, qp) in self.nodes.requesters.iter().enumerate() {
            let mut g = qp.s_lock.lock(&mut root);
            s += &format!(
                "req QP {i}: waiting {} flow {:?}\n  {:?}\n  stats {:?}\n",
                g.waiting(),
                g.ext.flow,
                g.ext.requester,
                g.ext.requester.stats
            );
            let (_, tok) = g.parts();
            let e = self.nodes.rcd.exp_lock.lock(tok);
            s += &ctxt_line(&e);
        }
        for (i, qp) in self.nodes.responders.iter().enumerate() {
            let mut g = qp.s_lock.lock(&mut root);
            let w = &g.ext.write_responder;
            s += &format!(
                "resp QP {i}: {:?}\n  write: allocated {} pending {} held entries {} in {} \
                 segments, RNR {:?}, flow {:?}, waiting {}\n  stats {:?}\n",
                g.ext.responder,
                w.alloc_w_segs(),
                w.pending_tid_w_segs(),
                w.held_entries(),
                w.segments_held(),
                w.rnr_nak_state(),
                g.ext.flow,
                g.waiting(),
                w.stats
            );
            let (_, tok) = g.parts();
            let e = self.nodes.resp_rcd.exp_lock.lock(tok);
            s += &ctxt_line(&e);
        }
        s
    }

    /// Destroys every QP and checks that everything came back.
    pub(super) fn teardown(mut self) -> Summary {
        let mut root = LockToken::root();
        self.sum.restarts += self.nodes.requester_stats(&mut root).restarts;
        let t = self.nodes.teardown(&mut root);
        for d in t.flushed {
            self.complete(d);
        }
        for (i, qp) in self.nodes.responders.iter().enumerate() {
            let g = qp.s_lock.lock(&mut root);
            assert!(
                !g.ext.responder.has_work(tid_read_proto::rc::QpState::Error),
                "responder {i} has work after release"
            );
            assert_eq!(
                g.ext.responder.mr_refs(),
                0,
                "responder {i} holds MR references"
            );
        }
        for i in 0..self.cfg.qps {
            let left: Vec<u64> = self.nodes.posted(i).map(|p| p.wr_id).collect();
            assert!(
                left.is_empty(),
                "QP {i}: requests {left:?} never completed, not even by the flush"
            );
        }
        assert_eq!(t.leaks, Leaks::default(), "resources left after destroy");
        self.sum
    }
}

/// A receive context's TID and flow use, one line of a stuck report.
fn ctxt_line(e: &ExpState<SoftPlatform>) -> String {
    format!(
        "  ctxt: entries in use {} flows {:#x} free groups {} waiters empty {}\n",
        e.groups.entries_in_use(),
        e.flows.mask(),
        e.groups.free_groups(),
        e.waiters.is_empty()
    )
}
