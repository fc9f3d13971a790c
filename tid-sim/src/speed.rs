// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The figures a run's speed is judged by, measured in the same process:
//! `memcpy` bandwidth on a buffer the size of the run's data, and the
//! peak resident memory.

use std::time::Instant;

/// The largest buffer `memcpy` is measured on (two of them are held).
pub const MAX_MEMCPY_BUFFER: u64 = 64 << 20;

/// `memcpy` bandwidth in bytes per second over a buffer of
/// `min(bytes, MAX_MEMCPY_BUFFER)` bytes: both buffers written first (so
/// no page fault is timed), then whole-buffer copies for at least 8
/// passes and 0.2 s; the best pass counts. Returns the bandwidth and the
/// buffer size.
pub fn memcpy_bandwidth(bytes: u64) -> (f64, u64) {
    let len = bytes.clamp(4096, MAX_MEMCPY_BUFFER);
    let n = usize::try_from(len).unwrap_or(4096);
    let src: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let mut dst = vec![1u8; n];
    let mut best = f64::INFINITY;
    let start = Instant::now();
    let mut passes = 0;
    while passes < 8 || start.elapsed().as_secs_f64() < 0.2 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        best = best.min(t.elapsed().as_secs_f64());
        passes += 1;
    }
    (len as f64 / best.max(1e-9), len)
}

/// CPU time this thread has run, in nanoseconds (the first field of
/// `/proc/thread-self/schedstat`), `None` where that cannot be read. On a
/// shared machine it leaves out the time other processes held the CPU,
/// which wall-clock time does not.
pub fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The process's peak resident set size in bytes (`VmHWM` of
/// `/proc/self/status`), 0 where that cannot be read.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_measured() {
        let (bw, len) = memcpy_bandwidth(1 << 20);
        assert_eq!(len, 1 << 20);
        assert!(bw > 1e6, "{bw}");
        assert_eq!(memcpy_bandwidth(1 << 40).1, MAX_MEMCPY_BUFFER);
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes() > 1 << 20);
            let a = thread_cpu_ns().unwrap();
            let _ = memcpy_bandwidth(4 << 20);
            assert!(thread_cpu_ns().unwrap() > a);
        }
    }
}
