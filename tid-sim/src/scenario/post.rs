// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Posting: each QP's READ (or WRITE) sizes, the fragmented destination
//! buffers they go into, and the posts while a send queue has room.

use std::collections::VecDeque;

use hfi1_hal::consts::PAGE_SIZE;
use tid_flow::Sge;
use tid_harness::doubles::PageAllocator;

use super::{Observer, Scenario};
use crate::cli::Options;
use crate::rng::Rng;

/// A fragmented destination buffer of `bytes`: a seeded mix of contiguous
/// runs (2..=64 pages) and single scattered pages, never adjacent to the
/// previous run, sometimes handed out in descending address order.
fn fragmented(pages: &mut PageAllocator, rng: &mut Rng, bytes: u32) -> Vec<Sge> {
    let mut left = u64::from(bytes.div_ceil(PAGE_SIZE));
    let mut runs = Vec::new();
    while left > 0 {
        let len = if rng.chance(0.4) {
            1
        } else {
            (2 + rng.below(63)).min(left)
        }
        .min(left);
        runs.push(pages.run(1 + rng.below(7), len));
        left -= len;
    }
    if rng.chance(0.3) {
        runs.reverse();
    }
    runs
}

/// The READ sizes one QP posts for its `per_qp` bytes: `--read-sizes`
/// in turn, or `--request` each; the last one takes what is left.
pub(super) fn read_sizes(opts: &Options, per_qp: u64) -> VecDeque<u32> {
    let cycle = opts.read_cycle();
    let mut sizes = VecDeque::new();
    let mut left = per_qp;
    for &r in cycle.iter().cycle() {
        if left == 0 {
            break;
        }
        let n = left.min(r);
        sizes.push_back(n as u32);
        left -= n;
    }
    sizes
}

impl<O: Observer> Scenario<'_, O> {
    /// Posts what every requester's send queue takes.
    pub fn start(&mut self) {
        for i in 0..self.to_post.len() {
            self.post_more(i);
        }
    }

    /// Posts requests while requester `i`'s send queue has room.
    pub(super) fn post_more(&mut self, i: usize) {
        while self.nodes.can_post(i, &mut self.root) {
            let Some(&(len, write)) = self.to_post[i].front() else {
                break;
            };
            if write && !self.nodes.can_post_write(i, len, &mut self.root) {
                break;
            }
            let sges = fragmented(&mut self.nodes.pages, &mut self.rng, len);
            let posted = if write {
                self.nodes.post_write(i, sges, &mut self.root)
            } else {
                self.nodes.post(i, sges, &mut self.root)
            };
            if posted.is_err() {
                self.rep.engine_errors += 1;
                break;
            }
            self.to_post[i].pop_front();
        }
    }
}
