// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Checks `include/hfi1_tid.h` against the Rust definitions.
//!
//! The header is written by hand; this test parses it and the crate's
//! sources and requires that every `hfi1_tid_*` function (both the ones
//! Rust exports and the C callbacks Rust imports) and every member of
//! `struct hfi1_tid_chip_ops` agree in name, parameter names, parameter
//! types and return type, in both directions, and that the ABI version
//! numbers match.

use std::collections::BTreeMap;
use std::path::Path;

/// A function signature: return type and `(name, type)` parameters, all
/// in C spelling.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Sig {
    ret: String,
    params: Vec<(String, String)>,
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Removes `//` and `/* */` comments.
fn strip_comments(src: &str, c_style: bool) -> String {
    let mut out = String::new();
    let mut rest = src;
    loop {
        let line = rest.find("//");
        let block = if c_style { rest.find("/*") } else { None };
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b..].find("*/").map_or("", |e| &rest[b + e + 2..]);
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// The `#[repr(C)]` structs of the ABI: Rust name, C name.
const STRUCTS: &[(&str, &str)] = &[
    ("ChipOps", "hfi1_tid_chip_ops"),
    ("PageSetC", "hfi1_tid_pageset"),
    ("OpfnParams", "hfi1_tid_opfn_params"),
    ("PlatformOps", "hfi1_tid_platform_ops"),
    ("CtxParams", "hfi1_tid_ctx_params"),
    ("CtxStats", "hfi1_tid_ctx_stats"),
    ("SgeC", "hfi1_tid_sge"),
    ("ProtoTestResult", "hfi1_tid_proto_result"),
    ("DrvOps", "hfi1_tid_drv_ops"),
    ("DrvQpView", "hfi1_tid_drv_qp"),
    ("DrvRcdView", "hfi1_tid_drv_rcd"),
    ("ConnC", "hfi1_tid_conn"),
    ("WrC", "hfi1_tid_wr"),
    ("WcC", "hfi1_tid_wc"),
    ("VerbsOps", "hfi1_tid_verbs_ops"),
    ("IoC", "hfi1_tid_io"),
];

/// The driver's structures the ABI points to: the layout mirror's Rust
/// name, the kernel's struct name (declared, never defined, in the header).
const KERNEL: &[(&str, &str)] = &[
    ("CListHead", "list_head"),
    ("CTidFlowState", "tid_flow_state"),
    ("CTidGroup", "tid_group"),
    ("CExpTidSet", "exp_tid_set"),
    ("CTidQueue", "tid_queue"),
    ("CTidRdmaRequest", "tid_rdma_request"),
    ("CRvtSgeState", "rvt_sge_state"),
];

/// Opaque handles: Rust type, C struct name (declared, never defined, in C).
const OPAQUE: &[(&str, &str)] = &[
    ("Rcd", "hfi1_tid_rcd"),
    ("KQp", "hfi1_tid_qp"),
    ("Req", "hfi1_tid_req"),
    ("WaitTest", "hfi1_tid_wt"),
];

/// Rust type (as written in this crate's ABI) to C type.
fn rust_to_c(t: &str) -> String {
    let t = squash(t);
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{} *", rust_to_c(inner));
    }
    if let Some(inner) = t.strip_prefix("*const ") {
        return format!("const {} *", rust_to_c(inner));
    }
    if let Some((_, c)) = STRUCTS
        .iter()
        .chain(OPAQUE)
        .chain(KERNEL)
        .find(|(r, _)| *r == t)
    {
        return format!("struct {c}");
    }
    match t.as_str() {
        "" | "()" | "!" => "void".into(),
        "c_void" => "void".into(),
        "c_char" => "char".into(),
        "bool" => "bool".into(),
        "u8" | "u16" | "u32" | "u64" => t.clone(),
        "i32" => "int".into(),
        "usize" => "size_t".into(),
        other => panic!("no C spelling for Rust type `{other}`: extend rust_to_c"),
    }
}

/// Normalises a C type: single spaces, `*` attached as ` *`.
fn norm_c(t: &str) -> String {
    squash(&t.replace('*', " * ")).replace("* *", "**")
}

fn split_params(p: &str) -> Vec<&str> {
    let p = p.trim();
    if p.is_empty() || p == "void" {
        Vec::new()
    } else {
        p.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .collect()
    }
}

/// `u32 flow` / `const struct x *ops` -> (name, type).
fn c_param(p: &str) -> (String, String) {
    let p = p.trim();
    let cut = p
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .expect("C parameter without a type");
    (p[cut + 1..].to_string(), norm_c(&p[..=cut]))
}

/// `chip: *mut c_void` -> (name, C type).
fn rust_param(p: &str) -> (String, String) {
    let (n, t) = p.split_once(':').expect("Rust parameter without a type");
    (n.trim().to_string(), norm_c(&rust_to_c(t)))
}

/// Parses C prototypes `ret name(params);` whose name starts with
/// `prefix`, and function-pointer members `ret (*name)(params);`.
fn parse_c(src: &str, prefix: &str) -> (BTreeMap<String, Sig>, BTreeMap<String, Sig>) {
    // Preprocessor lines end at their newline, which `squash` loses.
    let code: String = strip_comments(src, true)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let flat = squash(&code);
    let mut funcs = BTreeMap::new();
    let mut members = BTreeMap::new();
    for stmt in flat.split(';') {
        let stmt = stmt.rsplit(['{', '}']).next().unwrap_or("").trim();
        if stmt.starts_with('#') || stmt.contains("#define") {
            continue;
        }
        let Some(open) = stmt.find('(') else { continue };
        if let Some(inner) = stmt[open..].strip_prefix("(*") {
            // Function-pointer member.
            let close = inner.find(')').unwrap();
            let name = inner[..close].trim().to_string();
            let params = inner[close + 1..].trim();
            let params = &params[1..params.len() - 1];
            let sig = Sig {
                ret: norm_c(&stmt[..open]),
                params: split_params(params).into_iter().map(c_param).collect(),
            };
            members.insert(name, sig);
            continue;
        }
        let head = &stmt[..open];
        // The name is the last identifier before the parenthesis.
        let name_at = head
            .trim_end()
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let name = head[name_at..].trim().to_string();
        if !name.starts_with(prefix) {
            continue;
        }
        let close = stmt.rfind(')').unwrap();
        let sig = Sig {
            ret: norm_c(&head[..name_at]),
            params: split_params(&stmt[open + 1..close])
                .into_iter()
                .map(c_param)
                .collect(),
        };
        funcs.insert(name, sig);
    }
    (funcs, members)
}

/// Parses `extern "C" fn hfi1_tid_x(params) -> ret` (definitions and
/// declarations inside `extern "C" {}` blocks) and `pub type XFn = unsafe
/// extern "C" fn(params) -> ret;`.
fn parse_rust(src: &str) -> (BTreeMap<String, Sig>, BTreeMap<String, Sig>) {
    let flat = squash(&strip_comments(src, false));
    let mut funcs = BTreeMap::new();
    let mut types = BTreeMap::new();
    let mut rest = flat.as_str();
    while let Some(at) = rest.find("fn hfi1_tid_") {
        let s = &rest[at + 3..];
        let open = s.find('(').unwrap();
        let name = s[..open].to_string();
        let close = s.find(')').unwrap();
        let params = &s[open + 1..close];
        let after = &s[close + 1..];
        let end = after.find(['{', ';']).unwrap();
        let ret = after[..end].trim().strip_prefix("->").unwrap_or("").trim();
        funcs.insert(
            name,
            Sig {
                ret: norm_c(&rust_to_c(ret)),
                params: split_params(params).into_iter().map(rust_param).collect(),
            },
        );
        rest = &s[close..];
    }
    let mut rest = flat.as_str();
    while let Some(at) = rest.find("pub type ") {
        let s = &rest[at + 9..];
        let eq = s.find('=').unwrap();
        let name = s[..eq].trim().to_string();
        let body = &s[eq + 1..s.find(';').unwrap()];
        if let Some(f) = body.find("fn(") {
            let params_end = body[f..].find(')').unwrap() + f;
            let params = &body[f + 3..params_end];
            let ret = body[params_end + 1..]
                .trim()
                .strip_prefix("->")
                .unwrap_or("");
            types.insert(
                name,
                Sig {
                    ret: norm_c(&rust_to_c(ret)),
                    params: split_params(params).into_iter().map(rust_param).collect(),
                },
            );
        }
        rest = &s[eq..];
    }
    (funcs, types)
}

fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every `.rs` file under `dir`, its subdirectories included.
fn rs_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn rust_sources() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = String::new();
    let mut files = Vec::new();
    rs_files(&dir, &mut files);
    files.sort();
    for f in files {
        all.push_str(&std::fs::read_to_string(f).unwrap());
        all.push('\n');
    }
    all
}

#[test]
fn header_functions_match_rust() {
    let (c_funcs, _) = parse_c(&read("include/hfi1_tid.h"), "hfi1_tid_");
    let (r_funcs, _) = parse_rust(&rust_sources());
    assert!(c_funcs.len() >= 5, "header parse found {c_funcs:?}");
    assert!(r_funcs.len() >= 5, "rust parse found {r_funcs:?}");
    let c_names: Vec<_> = c_funcs.keys().collect();
    let r_names: Vec<_> = r_funcs.keys().collect();
    assert_eq!(c_names, r_names, "function sets differ (header vs Rust)");
    for (name, c) in &c_funcs {
        assert_eq!(Some(c), r_funcs.get(name), "signature of {name} differs");
    }
    println!("header.rs: {} functions match", c_funcs.len());
}

/// The fields of `pub struct <name> { .. }` in declaration order, as
/// `(name, Rust type)`.
fn rust_fields(flat: &str, name: &str) -> Vec<(String, String)> {
    let key = format!("pub struct {name} {{");
    let at = flat
        .find(&key)
        .unwrap_or_else(|| panic!("{name} not found"));
    let body = &flat[at + key.len()..];
    let body = &body[..body.find('}').unwrap()];
    body.split(',')
        .filter(|f| f.contains(':'))
        .map(|f| {
            let (n, t) = f.split_once(':').unwrap();
            let n = n.trim().trim_start_matches("pub ").to_string();
            (n, t.trim().to_string())
        })
        .collect()
}

/// The members of `struct <name> { .. };` in declaration order, as
/// `(name, C type or function-pointer signature)`.
fn c_members(header: &str, name: &str) -> Vec<(String, Result<String, Sig>)> {
    let flat = squash(&strip_comments(header, true));
    let key = format!("struct {name} {{");
    let at = flat
        .find(&key)
        .unwrap_or_else(|| panic!("struct {name} not in header"));
    let body = &flat[at + key.len()..];
    let body = &body[..body.find("};").unwrap()];
    let (_, ptrs) = parse_c(&format!("{{{body}"), "hfi1_tid_");
    body.split(';')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| {
            if let Some(open) = m.find("(*") {
                let n = m[open + 2..m[open..].find(')').unwrap() + open]
                    .trim()
                    .to_string();
                let sig = ptrs.get(&n).cloned().unwrap();
                (n, Err(sig))
            } else {
                let (n, t) = c_param(m);
                (n, Ok(t))
            }
        })
        .collect()
}

#[test]
fn structs_match_rust() {
    let header = read("include/hfi1_tid.h");
    let src = rust_sources();
    let (_, types) = parse_rust(&src);
    let flat = squash(&strip_comments(&src, false));
    for (rust, c) in STRUCTS {
        let fields = rust_fields(&flat, rust);
        let members = c_members(&header, c);
        assert!(!fields.is_empty(), "{rust} has no fields");
        let f_names: Vec<_> = fields.iter().map(|f| f.0.clone()).collect();
        let m_names: Vec<_> = members.iter().map(|m| m.0.clone()).collect();
        assert_eq!(
            f_names, m_names,
            "{rust} vs struct {c}: names or order differ"
        );
        for ((name, rty), (_, cty)) in fields.iter().zip(&members) {
            match cty {
                Ok(cty) => assert_eq!(&norm_c(&rust_to_c(rty)), cty, "{c}.{name}"),
                Err(sig) => {
                    let alias = rty
                        .strip_prefix("Option<")
                        .and_then(|t| t.strip_suffix('>'))
                        .unwrap_or_else(|| panic!("{rust}.{name} is not Option<fn>"));
                    assert_eq!(types.get(alias), Some(sig), "{c}.{name}");
                }
            }
        }
    }
}

#[test]
fn abi_version_matches() {
    let h = read("include/hfi1_tid.h");
    let line = h
        .lines()
        .find(|l| l.starts_with("#define HFI1_TID_ABI_VERSION"))
        .expect("no HFI1_TID_ABI_VERSION");
    let v: u32 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert_eq!(v, kmod_glue::abi::ABI_VERSION);
}

#[test]
fn parser_catches_a_mismatch() {
    // The comparison must be able to fail: a changed type is seen.
    let (a, _) = parse_c("u32 hfi1_tid_x(u32 a, void *b);", "hfi1_tid_");
    let (b, _) = parse_rust("extern \"C\" fn hfi1_tid_x(a: u32, b: *const c_void) -> u32 {}");
    assert_ne!(a.get("hfi1_tid_x"), b.get("hfi1_tid_x"));
    let (c, _) = parse_rust("extern \"C\" fn hfi1_tid_x(a: u32, b: *mut c_void) -> u32 {}");
    assert_eq!(a.get("hfi1_tid_x"), c.get("hfi1_tid_x"));
}
