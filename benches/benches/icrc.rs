// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Benchmarks of the ICRC (`tid_read_proto::wire::icrc::compute`).
//!
//! Group `icrc`, over the bytes one READ_RESP's ICRC covers with a 4 KiB
//! payload (LRH 8 + BTH 12 + READ_RESP header 36 + 4096 = 4152 bytes,
//! LNH BTH), throughput in bytes:
//! - `compute/4152`: the ICRC as the crate computes it (the masked prefix,
//!   then crc32fast; PCLMULQDQ when the CPU has it, as here);
//! - `slicing16/4152`: crc32fast's table path (16 bytes per step), the
//!   one the kernel object gets (no SSE there), over the same bytes
//!   unmasked (the mask costs the same few bytes in both);
//! - `bytewise/4152`: the same ICRC one table lookup per byte with the
//!   mask looked up per byte, as it was computed before, for the ratio.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tid_read_proto::wire::icrc;

const COVERED: usize = 8 + 12 + 36 + 4096;

/// The bytewise CRC-32 table.
fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    for (i, e) in t.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *e = c;
    }
    t
}

/// One byte per step, mask per byte (LNH BTH: SC and BTH byte 4).
fn bytewise(t: &[u32; 256], covered: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for (i, &b) in covered.iter().enumerate() {
        let m = match i {
            0 => 0xF0,
            12 => 0xFF,
            _ => 0,
        };
        c = t[usize::from((c as u8) ^ (b | m))] ^ (c >> 8);
    }
    !c
}

fn bench(c: &mut Criterion) {
    let mut pkt: Vec<u8> = (0..COVERED).map(|i| (i * 7 + 3) as u8).collect();
    pkt[1] = 0x02; // LNH BTH
    let t = table();
    assert_eq!(bytewise(&t, &pkt), icrc::compute(&pkt));
    let mut g = c.benchmark_group("icrc");
    g.throughput(Throughput::Bytes(COVERED as u64));
    g.bench_function(format!("compute/{COVERED}"), |b| {
        b.iter(|| icrc::compute(black_box(&pkt)))
    });
    g.bench_function(format!("slicing16/{COVERED}"), |b| {
        b.iter(|| {
            let mut h = crc32fast::Hasher::internal_new_baseline(0, 0);
            h.update(black_box(&pkt));
            h.finalize()
        })
    });
    g.bench_function(format!("bytewise/{COVERED}"), |b| {
        b.iter(|| bytewise(&t, black_box(&pkt)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
