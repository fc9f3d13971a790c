// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! One 256 KiB TID RDMA READ segment end to end, the software's part
//! (`benches::read_segment`): requester flow and setup, READ_REQ,
//! responder validation and 64 READ_RESP headers, completion, clear and
//! flow release. Ids `read_segment/scattered` (64 pages, no two
//! contiguous) and `read_segment/contiguous` (one 256 KiB run).
#![allow(missing_docs)]

use benches::read_segment::Segment;
use criterion::{Criterion, criterion_group, criterion_main};
use hfi1_hal::lock_order::LockToken;

fn read_segment(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_segment");
    let mut root = LockToken::root();
    for (name, scattered) in [("scattered", true), ("contiguous", false)] {
        let mut s = Segment::new(scattered);
        g.bench_function(name, |b| b.iter(|| s.cycle(&mut root)));
        assert_eq!(s.live_mappings(), 0);
    }
    g.finish();
}

criterion_group!(benches, read_segment);
criterion_main!(benches);
