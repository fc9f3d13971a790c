// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Reference-vector tests: every field of `find_phys_blocks.jsonl.gz` and
//! `tid_groups.jsonl.gz` (see `testdata/kernel-vectors/README.txt`).
//!
//! Each test prints `<file name>: N passed, M failed` and fails on any
//! mismatch, a missing file, or a file without lines.

use hfi1_vectors as vectors;

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

// ---- tid_groups.jsonl ----------------------------------------------------

use hfi1_hal::RcvType;
use hfi1_hal::sim::{SimCall, SimContext};
use tid_alloc::{AllocError, GroupList, TidAlloc, TidGroups};

/// The DMA address the test gives set `k` of op `op` (never 0), so every
/// EXPECTED `put_tid` can be traced back to its set.
fn dma_of(op: usize, k: usize) -> u64 {
    ((op as u64 + 1) << 32) | ((k as u64 + 1) << 12)
}

fn triples(v: &Value, what: &str) -> Result<Vec<[u64; 3]>, String> {
    v.as_array()
        .ok_or_else(|| format!("{what}: not an array"))?
        .iter()
        .map(|t| {
            let a = t
                .as_array()
                .ok_or_else(|| format!("{what}: element not an array"))?;
            let n = |i: usize| {
                a.get(i)
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("{what}: bad element"))
            };
            Ok([n(0)?, n(1)?, n(2)?])
        })
        .collect()
}

fn check_lists(groups: &TidGroups, want: &Value) -> Result<(), String> {
    for (key, which) in [
        ("group", GroupList::Free),
        ("used", GroupList::Used),
        ("full", GroupList::Full),
    ] {
        let w = triples(
            want.get(key)
                .ok_or_else(|| format!("lists.{key} missing"))?,
            key,
        )?;
        let got: Vec<[u64; 3]> = groups
            .list(which)
            .map(|g| [u64::from(g.base), u64::from(g.used), u64::from(g.map)])
            .collect();
        check(&format!("lists.{key}"), got, w)?;
        check(
            &format!("list_len({key})"),
            groups.list_len(which),
            groups.list(which).count(),
        )?;
    }
    let in_use: u64 = [GroupList::Used, GroupList::Full]
        .iter()
        .flat_map(|&l| groups.list(l))
        .map(|g| u64::from(g.used))
        .sum();
    check("entries_in_use", u64::from(groups.entries_in_use()), in_use)
}

/// The recorded `put_tid` calls of an op as `(rcventry, type, order)`.
fn put_tids(op: &Value) -> Result<Vec<(u32, RcvType, u8)>, String> {
    op.get("put_tid")
        .and_then(Value::as_array)
        .ok_or("put_tid missing")?
        .iter()
        .map(|p| {
            let a = p.as_array().ok_or("put_tid element")?;
            let e = a
                .first()
                .and_then(Value::as_u64)
                .ok_or("put_tid rcventry")? as u32;
            let ty = match a.get(1).and_then(Value::as_str) {
                Some("EXPECTED") => RcvType::Expected,
                Some("INVALID") => RcvType::Invalid,
                other => return Err(format!("put_tid type {other:?}")),
            };
            let order = a.get(2).and_then(Value::as_u64).ok_or("put_tid order")? as u8;
            Ok((e, ty, order))
        })
        .collect()
}

/// The interleaved call sequence, rebuilt from the recorded tnodes as the
/// README explains: for each node, entries base+0..=7 in order, each one
/// either the next `put_tid` (an entry the op programs) or a `wc_fill`.
/// `pa_of(k)` gives the address of the k-th `put_tid`. Also checks that the
/// recorded `wc_fill` list is exactly the fills of that sequence.
fn rebuild(
    tnodes: &[[u64; 3]],
    puts: &[(u32, RcvType, u8)],
    fills: &[u64],
    pa_of: impl Fn(usize) -> u64,
) -> Result<Vec<SimCall>, String> {
    let mut seq = Vec::new();
    let mut p = 0usize;
    let mut f = 0usize;
    for &[base, map, cnt] in tnodes {
        let mut c = 0;
        for i in 0..8u64 {
            let rcventry = (base + i) as u32;
            if map & (1 << i) != 0 || c >= cnt {
                check(
                    "recorded wc_fill",
                    fills.get(f).copied(),
                    Some(u64::from(rcventry)),
                )?;
                f += 1;
                seq.push(SimCall::WcFill { rcventry });
            } else {
                let &(e, ty, order) = puts.get(p).ok_or("recorded put_tid too short")?;
                check("recorded put_tid rcventry", e, rcventry)?;
                let pa = if ty == RcvType::Expected { pa_of(p) } else { 0 };
                seq.push(SimCall::PutTid {
                    rcventry,
                    ty,
                    pa,
                    order,
                });
                p += 1;
                c += 1;
            }
        }
    }
    check("recorded put_tid count", p, puts.len())?;
    check("recorded wc_fill count", f, fills.len())?;
    Ok(seq)
}

fn check_scenario(line: &Value) -> Result<(), String> {
    let ngroups = u64_of(line, "ngroups")? as usize;
    let base = u64_of(line, "expected_base")? as u32;
    let pmtu = u64_of(line, "pmtu")? as u32;
    let ops = line
        .get("ops")
        .and_then(Value::as_array)
        .ok_or("ops missing")?;
    let mut groups = TidGroups::new(base, ngroups).map_err(|e| format!("new: {e}"))?;
    let mut sim = SimContext::new(base, (ngroups * 8) as u32);
    // Live allocations by op index, with their recorded tnodes.
    let mut live: Vec<Option<(TidAlloc, Vec<[u64; 3]>)>> = vec![None; ops.len()];
    for (o, op) in ops.iter().enumerate() {
        let ctx = |e: String| format!("op {o}: {e}");
        let kind = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| ctx("no op".into()))?;
        match kind {
            "alloc" => {
                let counts = u64_array(op, "counts").map_err(ctx)?;
                let sets: Vec<PageSet> = counts
                    .iter()
                    .enumerate()
                    .map(|(k, &c)| PageSet {
                        idx: k as u8,
                        count: c as u16,
                        addr: 0,
                        dma: if c == 0 { 0 } else { dma_of(o, k) },
                    })
                    .collect();
                let ok = op
                    .get("ok")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| ctx("no ok".into()))?;
                match groups.allocate(&sets) {
                    Err(AllocError::NoSpace) => {
                        check("ok", false, ok).map_err(ctx)?;
                        check("calls on EAGAIN", sim.log().len(), 0).map_err(ctx)?;
                    }
                    Err(e) => return Err(ctx(format!("allocate: {e}"))),
                    Ok(alloc) => {
                        check("ok", true, ok).map_err(ctx)?;
                        let want_nodes =
                            triples(op.get("tnodes").ok_or("tnodes")?, "tnodes").map_err(ctx)?;
                        let got_nodes: Vec<[u64; 3]> = alloc
                            .tnodes()
                            .map(|n| [u64::from(n.base), u64::from(n.map), u64::from(n.cnt)])
                            .collect();
                        check("tnodes", &got_nodes, &want_nodes).map_err(ctx)?;
                        let prog = groups
                            .program(&mut sim, &alloc, &sets, pmtu)
                            .map_err(|e| ctx(format!("program: {e}")))?;
                        let got_tids: Vec<u64> = prog
                            .tid_entries
                            .iter()
                            .map(|t| u64::from(t.raw()))
                            .collect();
                        check(
                            "tid_entries",
                            got_tids,
                            u64_array(op, "tid_entries").map_err(ctx)?,
                        )
                        .map_err(ctx)?;
                        check(
                            "npkts",
                            u64::from(prog.npkts),
                            u64_of(op, "npkts").map_err(ctx)?,
                        )
                        .map_err(ctx)?;
                        // Sets are consumed in order: the k-th put_tid of an
                        // alloc programs set k.
                        let puts = put_tids(op).map_err(ctx)?;
                        let fills = u64_array(op, "wc_fill").map_err(ctx)?;
                        for (k, &(_, ty, order)) in puts.iter().enumerate() {
                            let s = sets
                                .get(k)
                                .ok_or_else(|| ctx("more put_tid than sets".into()))?;
                            let want_ty = if s.is_filler() {
                                RcvType::Invalid
                            } else {
                                RcvType::Expected
                            };
                            check(&format!("put_tid {k} type"), ty, want_ty).map_err(ctx)?;
                            check(&format!("put_tid {k} order"), order, s.order()).map_err(ctx)?;
                        }
                        let want =
                            rebuild(&want_nodes, &puts, &fills, |k| dma_of(o, k)).map_err(ctx)?;
                        check("call sequence", sim.take_log(), want).map_err(ctx)?;
                        if let Some(slot) = live.get_mut(o) {
                            *slot = Some((alloc, want_nodes));
                        }
                    }
                }
            }
            "free" => {
                let k = u64_of(op, "alloc").map_err(ctx)? as usize;
                let (alloc, tnodes) = live
                    .get_mut(k)
                    .and_then(Option::take)
                    .ok_or_else(|| ctx(format!("alloc {k} is not live")))?;
                groups
                    .unprogram(&mut sim, &alloc)
                    .map_err(|e| ctx(format!("unprogram: {e}")))?;
                let puts = put_tids(op).map_err(ctx)?;
                let fills = u64_array(op, "wc_fill").map_err(ctx)?;
                let want = rebuild(&tnodes, &puts, &fills, |_| 0).map_err(ctx)?;
                check("call sequence", sim.take_log(), want).map_err(ctx)?;
                // A second release of the same allocation is refused and
                // changes nothing.
                check(
                    "double free",
                    groups.unprogram(&mut sim, &alloc),
                    Err(AllocError::Stale),
                )
                .map_err(ctx)?;
                check("calls on double free", sim.log().len(), 0).map_err(ctx)?;
            }
            other => return Err(ctx(format!("unknown op {other}"))),
        }
        check_lists(
            &groups,
            op.get("lists").ok_or_else(|| ctx("lists missing".into()))?,
        )
        .map_err(ctx)?;
    }
    check("sim faults", sim.faults(), 0)
}

#[test]
fn tid_groups_vectors() {
    let mut tally = Tally::new("tid_groups.jsonl.gz");
    for (n, line) in vectors::load("tid_groups.jsonl.gz").iter().enumerate() {
        tally.record(n, check_scenario(line));
    }
    tally.finish();
}
