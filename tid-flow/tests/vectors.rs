// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! flows.jsonl.gz: the reference's flow reserve/setup/clear, bit-exact
//! (reserve results, flow-table register values, generations).
#![cfg(not(loom))]

use hfi1_vectors as vectors;

use hfi1_hal::platform::FlowTable;
use hfi1_hal::sim::{SimCall, SimContext};
use hfi1_hal::{FlowIndex, Generation};
use serde_json::Value;
use tid_flow::{HwFlows, NoFreeFlow};
use vectors::{Tally, check, load, u64_of};

fn csr_of(log: Vec<SimCall>) -> Vec<(u64, u64)> {
    log.into_iter()
        .filter_map(|c| match c {
            SimCall::WriteFlow { flow, value } => Some((u64::from(flow.get()), value.raw())),
            _ => None,
        })
        .collect()
}

fn want_csr(op: &Value) -> Result<Vec<(u64, u64)>, String> {
    let arr = op
        .get("csr")
        .and_then(Value::as_array)
        .ok_or("missing csr")?;
    arr.iter()
        .map(|w| {
            let a = w.as_array().ok_or("csr entry not an array")?;
            match (
                a.first().and_then(Value::as_u64),
                a.get(1).and_then(Value::as_u64),
            ) {
                (Some(i), Some(v)) => Ok((i, v)),
                _ => Err("bad csr entry".to_string()),
            }
        })
        .collect()
}

fn flow_of(op: &Value) -> Result<FlowIndex, String> {
    let i = u64_of(op, "idx")?;
    FlowIndex::new(i as u32).ok_or_else(|| format!("idx {i} out of range"))
}

fn run_line(line: &Value) -> Result<(), String> {
    let gens = line
        .get("init_generations")
        .and_then(Value::as_array)
        .ok_or("missing init_generations")?;
    let mut init = [Generation::RESERVED; 32];
    if gens.len() != 32 {
        return Err(format!("{} init generations", gens.len()));
    }
    for (slot, g) in init.iter_mut().zip(gens) {
        let g = g.as_u64().ok_or("bad generation")?;
        *slot = Generation::new(g as u32).ok_or("generation too wide")?;
    }
    let mut flows = HwFlows::with_generations(init);
    let mut chip = SimContext::new(0, 8);
    let ops = line
        .get("ops")
        .and_then(Value::as_array)
        .ok_or("missing ops")?;
    for (n, op) in ops.iter().enumerate() {
        let kind = op.get("op").and_then(Value::as_str).ok_or("missing op")?;
        let at = |e: String| format!("op {n} ({kind}): {e}");
        match kind {
            "reserve" => {
                let last = op
                    .get("last")
                    .and_then(Value::as_i64)
                    .ok_or("missing last")?;
                let pref = u32::try_from(last).ok().and_then(FlowIndex::new);
                let got = match flows.reserve(pref) {
                    Ok(f) => Value::from(f.get()),
                    Err(NoFreeFlow) => Value::from("EAGAIN"),
                };
                check("ret", &got, op.get("ret").ok_or("missing ret")?).map_err(at)?;
            }
            "setup" => {
                let f = flow_of(op).map_err(at)?;
                let g = flows.setup(&mut chip, f);
                check("generation", u64::from(g.get()), u64_of(op, "generation")?).map_err(at)?;
            }
            "clear" => {
                let f = flow_of(op).map_err(at)?;
                flows.clear(&mut chip, f);
                flows.release(f);
                check("reserved after clear", flows.is_reserved(f), false).map_err(at)?;
                check(
                    "generation",
                    u64::from(flows.generation(f).get()),
                    u64_of(op, "generation")?,
                )
                .map_err(at)?;
                check("register readback", chip.read_flow(f).raw(), 0x6D_7FFF_F800).map_err(at)?;
            }
            other => return Err(at(format!("unknown op {other}"))),
        }
        check("csr", csr_of(chip.take_log()), want_csr(op)?).map_err(at)?;
    }
    Ok(())
}

#[test]
fn flows_vectors() {
    let lines = load("flows.jsonl.gz");
    let mut tally = Tally::new("flows.jsonl.gz");
    for (n, line) in lines.iter().enumerate() {
        tally.record(n, run_line(line));
    }
    tally.finish();
}
