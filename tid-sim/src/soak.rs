// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The seeded scenarios of `--soak`.

use crate::cli::{MIXED_READ_SIZES, Options, ReadSizes};
use crate::rng::Rng;

/// The scenario a soak run with `seed` uses: sizes and a fault mix drawn
/// from the seed (1..=6 QPs with 1..=3 requests each, or one run in five
/// 8..=47 QPs with one request each, so flows run out too; requests of
/// 256 KiB, 260 KiB, 512 KiB or 1 MiB; 9..=40 TID groups; either MTU;
/// drop up to 5 %, duplicates up to 2 %, reorder window 0 or 2..=8, stale
/// replays up to 1 %, each fault present half the time; one run in three
/// cycles through the mixed READ sizes, so plain READs run too).
pub fn soak_options(seed: u64) -> Options {
    let mut r = Rng::new(seed ^ 0x50AC_50AC);
    let many = r.chance(0.2);
    let qps = if many {
        8 + r.below(40) as u32
    } else {
        1 + r.below(6) as u32
    };
    let request = [256u64 << 10, 260 << 10, 512 << 10, 1 << 20][r.below(4) as usize];
    let per_qp = if many {
        request
    } else {
        (1 + r.below(3)) * request
    };
    let mut pick = |max: f64| {
        if r.chance(0.5) {
            (r.below(1001) as f64 / 1000.0) * max
        } else {
            0.0
        }
    };
    let drop = pick(0.05);
    let dup = pick(0.02);
    let stale = pick(0.01);
    let read_sizes = (r.below(3) == 0).then(|| ReadSizes(MIXED_READ_SIZES.to_vec()));
    Options {
        qps,
        bytes: per_qp * u64::from(qps),
        request,
        groups: 9 + r.below(32) as u32,
        mtu: if r.chance(0.5) { 4096 } else { 8192 },
        seed,
        drop,
        dup,
        reorder: if r.chance(0.5) {
            0
        } else {
            2 + r.below(7) as usize
        },
        stale,
        read_sizes,
        ..Options::default()
    }
}
