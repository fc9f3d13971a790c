// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Every "SPEC §n" in the workspace resolves in `docs/SPEC.md`: section n
//! exists (and item m of it for "§n.m"), and a quoted name after the
//! reference ("SPEC §5 "Responder"") appears in that section.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "docs" {
                files(&p, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".md") {
            out.push(p);
        }
    }
}

/// The text of a file with comment continuations joined, so a quote that
/// wraps onto the next comment line reads as one.
fn joined(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("//!")
            .or_else(|| t.strip_prefix("///"))
            .or_else(|| t.strip_prefix("//"))
            .unwrap_or(t);
        out.push(' ');
        out.push_str(t.trim());
    }
    out
}

/// Section `n` of the contract: from its `## n.` heading to the next.
fn section(spec: &str, n: u32) -> Option<&str> {
    let start = spec.find(&format!("\n## {n}. "))?;
    let rest = &spec[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    Some(&rest[..end])
}

fn norm(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[test]
fn every_spec_reference_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let spec = std::fs::read_to_string(root.join("docs/SPEC.md")).unwrap();
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut refs = 0;
    for f in &all {
        let text = joined(&std::fs::read_to_string(f).unwrap());
        for (at, _) in text.match_indices("SPEC §") {
            let tail = &text[at + "SPEC §".len()..];
            let num: String = tail
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let num = num.trim_end_matches('.');
            if num.is_empty() {
                // "SPEC §n" as a name, in prose about the references.
                continue;
            }
            let mut parts = num.split('.');
            let n: u32 = parts.next().unwrap().parse().unwrap();
            let sec = section(&spec, n)
                .unwrap_or_else(|| panic!("{}: SPEC §{num} has no section", f.display()));
            if let Some(m) = parts.next() {
                assert!(
                    sec.contains(&format!("\n{m}. ")),
                    "{}: SPEC §{num}: section {n} has no item {m}",
                    f.display()
                );
            }
            let after = tail[num.len()..].trim_start_matches([',', ' ']);
            if let Some(q) = after.strip_prefix('"') {
                let name = &q[..q.find('"').unwrap_or(q.len())];
                assert!(
                    norm(sec).contains(&norm(name)),
                    "{}: SPEC §{num} \"{name}\" is not in section {n}",
                    f.display()
                );
            }
            refs += 1;
        }
    }
    assert!(refs > 40, "only {refs} references found");
}
