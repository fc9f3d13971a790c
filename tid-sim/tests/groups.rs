// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The `--groups` minimum the CLI names ([`cli::min_groups`]) is the real
//! one for the simulator's page layout, whose segments may be pages no
//! two of which are contiguous: at the minimum such a segment is set up
//! and read, one group fewer it waits for TID space that never comes; and
//! seeded runs at the minimum finish.

use hfi1_hal::Psn;
use hfi1_hal::lock_order::LockToken;
use tid_harness::platform::SoftPlatform;
use tid_harness::world::{Setup, TwoNodes};
use tid_sim::cli::{self, Options};
use tid_sim::pcap::PcapWriter;
use tid_sim::scenario::{self, RunFaults};

/// One QP reads `pages` scattered pages through a context of `groups`
/// groups, everything delivered in order until nothing moves. Returns
/// whether the READ completed.
fn scattered_read_completes(groups: usize, pages: u64, pmtu: u32) -> bool {
    let mut nodes = TwoNodes::<SoftPlatform>::new(Setup {
        qps: 1,
        groups,
        pmtu,
        first_psn: Psn::new(0x10),
        region_len: pages * 4096,
        ..Setup::default()
    })
    .unwrap();
    let mut root = LockToken::root();
    let sges = nodes.pages.scattered(pages);
    nodes.post(0, sges, &mut root).unwrap();
    let mut done = 0;
    for _ in 0..10_000 {
        let mut moved = !nodes.run_requesters(&mut root).is_empty();
        while let Some(p) = nodes.to_responders.pop() {
            nodes.deliver_to_responder(&p, &mut root);
            moved = true;
        }
        moved |= !nodes.run_responders(64, &mut root).is_empty();
        while let Some(p) = nodes.to_requesters.pop() {
            done += nodes.deliver_to_requester(&p, &mut root).done.len();
            moved = true;
        }
        if !moved {
            break;
        }
    }
    let _ = nodes.teardown(&mut root);
    done == 1
}

#[test]
fn a_scattered_segment_needs_exactly_the_named_minimum() {
    for pmtu in [4096, 8192] {
        let min = cli::min_groups(1 << 20) as usize;
        assert!(scattered_read_completes(min, 64, pmtu), "{pmtu} at {min}");
        assert!(
            !scattered_read_completes(min - 1, 64, pmtu),
            "{pmtu} at {}",
            min - 1
        );
    }
    // A READ below 256 KiB is a plain RDMA READ: it needs no RcvArray
    // entry, so one group (the CLI's least) serves it however scattered.
    for pages in [9, 15, 16, 17, 63] {
        assert_eq!(cli::min_groups(pages * 4096), 1, "{pages}");
        assert!(scattered_read_completes(1, pages, 4096), "{pages} at 1");
    }
}

#[test]
fn seeded_runs_at_the_minimum_finish() {
    for (qps, request, mtu) in [
        (4, 1u64 << 20, 4096),
        (4, 1 << 20, 8192),
        (4, 60 << 10, 8192),
    ] {
        let o = Options {
            qps,
            bytes: u64::from(qps) * request * 2,
            request,
            groups: cli::min_groups(request),
            mtu,
            seed: 7,
            ..Options::default()
        };
        assert!(o.check().is_ok());
        let r = scenario::run(
            &o,
            RunFaults::default(),
            None::<&mut PcapWriter<std::io::Sink>>,
        );
        assert!(r.ok(), "{}", r.summary());
        let below = Options {
            groups: o.groups - 1,
            ..o
        };
        if below.groups > 0 {
            assert!(below.check().is_err());
        }
    }
}
