// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Reference-vector tests: every field of `find_phys_blocks.jsonl.gz` and
//! `tid_groups.jsonl.gz` (see `testdata/kernel-vectors/README.txt`).
//!
//! Each test prints `<file name>: N passed, M failed` and fails on any
//! mismatch, a missing file, or a file without lines.

#[path = "../../testdata/vectors.rs"]
mod vectors;

use serde_json::Value;
use tid_alloc::{PageSet, find_phys_blocks};
use vectors::{Tally, check, u64_of};

fn u64_array(v: &Value, field: &str) -> Result<Vec<u64>, String> {
    v.get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("missing array {field}"))?
        .iter()
        .map(|x| {
            x.as_u64()
                .ok_or_else(|| format!("{field}: non-integer element"))
        })
        .collect()
}

/// One line of find_phys_blocks.jsonl: the sets' counts, the idx of every
/// non-filler (a filler's idx is null in the file), and the address of
/// every set's first page.
fn check_find_line(line: &Value) -> Result<(), String> {
    let mtu = u64_of(line, "mtu")? as u32;
    let pfns = u64_array(line, "pfns")?;
    let want = line
        .get("sets")
        .and_then(Value::as_array)
        .ok_or("missing sets")?;
    if let Some(odd) = line.get("odd") {
        check(
            "odd",
            odd.as_bool(),
            Some(pfns.len() % 2 == 1 && mtu == 8192),
        )?;
    }
    let pages: Vec<u64> = pfns.iter().map(|p| p * 4096).collect();
    let got = find_phys_blocks(&pages, mtu).map_err(|e| format!("error {e}"))?;
    check("number of sets", got.len(), want.len())?;
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let w = w.as_array().ok_or("set is not an array")?;
        let count = w.get(1).and_then(Value::as_u64).ok_or("set count")?;
        check(&format!("set {k} count"), u64::from(g.count), count)?;
        match w.first().and_then(Value::as_u64) {
            Some(idx) => {
                check(&format!("set {k} is a filler"), g.is_filler(), false)?;
                check(&format!("set {k} idx"), u64::from(g.idx), idx)?;
                check(&format!("set {k} addr"), g.addr, pages[idx as usize])?;
            }
            None => {
                check(&format!("set {k} (null idx) count"), g.count, 0)?;
                check(&format!("set {k} filler"), *g, PageSet::FILLER)?;
            }
        }
        check(
            &format!("set {k} order"),
            g.order(),
            if count == 0 {
                0
            } else {
                count.ilog2() as u8 + 1
            },
        )?;
    }
    Ok(())
}

#[test]
fn find_phys_blocks_vectors() {
    let mut tally = Tally::new("find_phys_blocks.jsonl.gz");
    for (n, line) in vectors::load("find_phys_blocks.jsonl.gz")
        .iter()
        .enumerate()
    {
        tally.record(n, check_find_line(line));
    }
    tally.finish();
}
