// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Reference-vector tests: OPFN encode/decode (`opfn.jsonl.gz`) and the
//! READ_RESP KDETH/BTH stream (`read_resp_kdeth.jsonl.gz`), bit for bit
//! against the outputs of the C functions.

use hfi1_vectors as vectors;

use hfi1_hal::{Generation, Psn, TidEntry};
use serde_json::Value;
use tid_read_proto::opfn::TidParams;
use tid_read_proto::response_stream::{RespBuilder, RespFlow};
use vectors::{Tally, check, load, u64_of};

fn word(v: &Value, field: &str) -> Result<u64, String> {
    v.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string field {field}"))?
        .parse::<u64>()
        .map_err(|e| format!("{field}: {e}"))
}

fn num<T: TryFrom<u64>>(v: &Value, field: &str) -> Result<T, String> {
    T::try_from(u64_of(v, field)?).map_err(|_| format!("{field} out of range"))
}

fn params(v: &Value) -> Result<TidParams, String> {
    Ok(TidParams {
        qp: num(v, "qp")?,
        max_len: num(v, "max_len")?,
        jkey: num(v, "jkey")?,
        max_read: num(v, "max_read")?,
        max_write: num(v, "max_write")?,
        timeout: num(v, "timeout")?,
        urg: num(v, "urg")?,
    })
}

fn sub<'a>(v: &'a Value, field: &str) -> Result<&'a Value, String> {
    v.get(field)
        .ok_or_else(|| format!("missing object {field}"))
}

fn opfn_line(v: &Value) -> Result<(), String> {
    if let Some(p) = v.get("params") {
        let p = params(p)?;
        let encoded = p.encode();
        check("encoded", encoded, word(v, "encoded")?)?;
        check(
            "decoded_back",
            TidParams::decode(encoded),
            params(sub(v, "decoded_back")?)?,
        )
    } else {
        let data = word(v, "data")?;
        check(
            "decoded",
            TidParams::decode(data),
            params(sub(v, "decoded")?)?,
        )
    }
}

/// Checks every line of vector file `name` with `line`.
fn check_file(name: &'static str, line: impl Fn(&Value) -> Result<(), String>) {
    let mut t = Tally::new(name);
    for (n, v) in load(name).iter().enumerate() {
        t.record(n, line(v));
    }
    t.finish();
}

#[test]
fn opfn_vectors() {
    check_file("opfn.jsonl.gz", opfn_line);
}

fn read_resp_line(v: &Value) -> Result<(), String> {
    let entries: Vec<TidEntry> = v
        .get("tid_entries")
        .and_then(Value::as_array)
        .ok_or("missing tid_entries")?
        .iter()
        .map(|e| {
            e.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .map(TidEntry::from_raw)
                .ok_or_else(|| "bad tid entry".to_string())
        })
        .collect::<Result<_, _>>()?;
    let generation =
        Generation::new(num(v, "generation")?).ok_or("generation wider than 20 bits")?;
    let jkey: u16 = num(v, "jkey")?;
    let urg: u8 = num(v, "urg")?;
    let flow = RespFlow {
        entries: &entries,
        length: num(v, "length")?,
        pmtu: num(v, "pmtu")?,
        spsn: num(v, "spsn")?,
        generation,
        ib_spsn: Psn::new(0),
        jkey,
        urg: urg != 0,
    };
    let want = v
        .get("packets")
        .and_then(Value::as_array)
        .ok_or("missing packets")?;
    if want.is_empty() {
        return Err("no packets in line".into());
    }
    let mut b = RespBuilder::new(&flow);
    for (i, w) in want.iter().enumerate() {
        let got = b.next_packet().map_err(|e| format!("packet {i}: {e}"))?;
        check(&format!("packet {i} len"), got.len, num(w, "len")?)?;
        check(
            &format!("packet {i} kdeth0"),
            got.kdeth0.raw(),
            num(w, "kdeth0")?,
        )?;
        check(
            &format!("packet {i} kdeth1"),
            got.kdeth1.raw(),
            num(w, "kdeth1")?,
        )?;
        check(
            &format!("packet {i} bth2"),
            got.bth_psn.raw(),
            num(w, "bth2")?,
        )?;
        let last = w
            .get("last")
            .and_then(Value::as_bool)
            .ok_or("missing last")?;
        check(&format!("packet {i} last"), got.last, last)?;
    }
    if !b.is_done() {
        return Err("builder not done after the last packet".into());
    }
    through_validation(&flow, want.len())
}

/// A flow a real READ_REQ can carry (length a page multiple of at most
/// 256 KiB, at most 64 entries, none empty) must come out of the
/// responder's validation with the same entries and the same packets.
fn through_validation(flow: &RespFlow<'_>, n: usize) -> Result<(), String> {
    use tid_read_proto::admission::{QpView, Request, validate};
    use tid_read_proto::wire::read_req;
    if flow.length == 0
        || flow.length % 4096 != 0
        || flow.length > 256 * 1024
        || flow.entries.len() > 64
    {
        return Ok(());
    }
    let payload: Vec<u8> = flow
        .entries
        .iter()
        .flat_map(|e| e.raw().to_le_bytes())
        .collect();
    let header = read_req::Repr {
        reth: tid_read_proto::wire::reth::Repr {
            length: flow.length,
            ..Default::default()
        },
        flow_psn: hfi1_hal::FlowPsn::new(flow.generation, flow.spsn),
        ..Default::default()
    };
    let qp = QpView {
        remote_read: true,
        max_len: 256 * 1024,
        pmtu: flow.pmtu,
        expected_psn: Psn::new(0),
        ack_queue_full: false,
    };
    let req = Request {
        psn: Psn::new(0),
        header,
        payload: &payload,
    };
    let acc = validate(&qp, &req, |_, _, _| true).map_err(|e| format!("validate: {e}"))?;
    check("validated entries", acc.entries(), flow.entries)?;
    let direct: Vec<_> = RespBuilder::new(flow).collect();
    let validated: Vec<_> =
        RespBuilder::new(&acc.resp_flow(flow.jkey, flow.urg, flow.pmtu)).collect();
    check("packets via validation", validated.len(), n)?;
    check("packets via validation", validated, direct)
}

#[test]
fn read_resp_kdeth_vectors() {
    check_file("read_resp_kdeth.jsonl.gz", read_resp_line);
}
