// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Reference-vector loading shared by the vector tests of every crate.
//!
//! Include it from an integration test with
//! `#[path = "../../testdata/vectors.rs"] mod vectors;`
//! (dev-dependencies: `flate2`, `serde_json`).
//!
//! The directory is `testdata/kernel-vectors/` of this repository, or
//! `$HFI1_VECTORS_DIR` when that is set. A missing file, an unreadable line
//! or a file with zero lines fails the test: a vector test that finds
//! nothing to check must not pass.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;

/// The directory the vector files are read from.
pub fn vector_dir() -> PathBuf {
    match std::env::var_os("HFI1_VECTORS_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/kernel-vectors"),
    }
}

/// Reads every line of `<dir>/<name>` (gzipped JSON Lines), panicking with
/// a clear message on a missing file, a bad line, or an empty file.
pub fn load(name: &str) -> Vec<serde_json::Value> {
    let path = vector_dir().join(name);
    let file = std::fs::File::open(&path)
        .unwrap_or_else(|e| panic!("{name}: cannot open {}: {e}", path.display()));
    let reader = BufReader::new(flate2::read::GzDecoder::new(file));
    let mut out = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.unwrap_or_else(|e| panic!("{name}: line {n}: read error: {e}"));
        if line.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{name}: line {n}: bad JSON: {e}"));
        out.push(v);
    }
    assert!(
        !out.is_empty(),
        "{name}: no vector lines in {}",
        path.display()
    );
    out
}

/// Counts passes and failures for one vector file and reports them in the
/// form `<file name>: N passed, M failed`.
pub struct Tally {
    name: &'static str,
    passed: usize,
    failed: usize,
    shown: Vec<String>,
}

impl Tally {
    /// A tally for the file `name`.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            passed: 0,
            failed: 0,
            shown: Vec::new(),
        }
    }

    /// Records one line's verdict: `Ok(())` or a description of the first
    /// mismatch.
    pub fn record(&mut self, line: usize, verdict: Result<(), String>) {
        match verdict {
            Ok(()) => self.passed += 1,
            Err(why) => {
                self.failed += 1;
                if self.shown.len() < 10 {
                    self.shown.push(format!("  line {line}: {why}"));
                }
            }
        }
    }

    /// Prints the summary line and fails the test on any mismatch or when
    /// nothing was checked.
    pub fn finish(self) {
        println!(
            "{}: {} passed, {} failed",
            self.name, self.passed, self.failed
        );
        for s in &self.shown {
            println!("{s}");
        }
        assert!(
            self.passed + self.failed > 0,
            "{}: zero lines checked",
            self.name
        );
        assert_eq!(
            self.failed, 0,
            "{}: {} lines mismatched",
            self.name, self.failed
        );
    }
}

/// Compares two values and names the field on mismatch.
pub fn check<T: PartialEq + std::fmt::Debug>(field: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{field}: got {got:?}, want {want:?}"))
    }
}

/// A JSON number as u64, or an error naming the field.
pub fn u64_of(v: &serde_json::Value, field: &str) -> Result<u64, String> {
    v.get(field)
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| format!("missing or non-integer field {field}"))
}
