// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The reference-vector reader of every crate's `tests/vectors.rs`: the
//! outputs of the C functions, recorded as gzipped JSON Lines, and a tally
//! that prints `<file name>: N passed, M failed`.
//!
//! The directory is `testdata/kernel-vectors/` of this repository, or
//! `$HFI1_VECTORS_DIR` when that is set and not empty. A missing file, an
//! unreadable line or a file with zero lines fails the test, and so does a
//! tally that checked nothing: a vector test that finds nothing to check
//! must not pass.
//!
//! A dev-only leaf (std, no dependency on the engine's crates), so a crate
//! low in the stack can use it without a cycle. [`try_load`] says what
//! went wrong as a [`VectorError`]; [`load`] and [`Tally::finish`] are the
//! test-facing forms and panic, because failing the calling test is what
//! they are for.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why a vector file gave no lines to check.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    /// The file could not be opened.
    #[error("{name}: cannot open {}: {source}", path.display())]
    Open {
        /// The file's name as asked for.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
        /// What the open said.
        source: std::io::Error,
    },
    /// A line could not be read (bad gzip data, an I/O error).
    #[error("{name}: line {line}: read error: {source}")]
    Read {
        /// The file's name.
        name: String,
        /// The line's index, from 0.
        line: usize,
        /// What the read said.
        source: std::io::Error,
    },
    /// A line is not JSON.
    #[error("{name}: line {line}: bad JSON: {source}")]
    Json {
        /// The file's name.
        name: String,
        /// The line's index, from 0.
        line: usize,
        /// What the parser said.
        source: serde_json::Error,
    },
    /// The file holds no lines (blank lines do not count).
    #[error("{name}: no vector lines in {}", path.display())]
    Empty {
        /// The file's name.
        name: String,
        /// Where it was read from.
        path: PathBuf,
    },
}

/// The directory the vector files are read from: `$HFI1_VECTORS_DIR`, or
/// this repository's `testdata/kernel-vectors/`.
pub fn vector_dir() -> PathBuf {
    match std::env::var_os("HFI1_VECTORS_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/kernel-vectors"),
    }
}

/// Every line of `<dir>/<name>` (gzipped JSON Lines), blank lines skipped;
/// an error when the file is missing, a line is bad, or no line is left.
pub fn try_load_from(dir: &Path, name: &str) -> Result<Vec<Value>, VectorError> {
    let path = dir.join(name);
    let file = std::fs::File::open(&path).map_err(|source| VectorError::Open {
        name: name.to_owned(),
        path: path.clone(),
        source,
    })?;
    let reader = BufReader::new(flate2::read::GzDecoder::new(file));
    let mut out = Vec::new();
    for (line, text) in reader.lines().enumerate() {
        let text = text.map_err(|source| VectorError::Read {
            name: name.to_owned(),
            line,
            source,
        })?;
        if text.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(&text).map_err(|source| VectorError::Json {
            name: name.to_owned(),
            line,
            source,
        })?;
        out.push(v);
    }
    if out.is_empty() {
        return Err(VectorError::Empty {
            name: name.to_owned(),
            path,
        });
    }
    Ok(out)
}

/// [`try_load_from`] on [`vector_dir`].
pub fn try_load(name: &str) -> Result<Vec<Value>, VectorError> {
    try_load_from(&vector_dir(), name)
}

/// Every line of the vector file `name` in [`vector_dir`].
///
/// # Panics
///
/// On every [`VectorError`], with its message: the calling test fails.
#[track_caller]
pub fn load(name: &str) -> Vec<Value> {
    try_load(name).unwrap_or_else(|e| panic!("{e}"))
}

/// Counts passes and failures for one vector file and reports them in the
/// form `<file name>: N passed, M failed`.
#[derive(Debug)]
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
    /// mismatch (the first ten are kept to be printed).
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

    /// The summary line, and the mismatches kept.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{}: {} passed, {} failed",
            self.name, self.passed, self.failed
        );
        for m in &self.shown {
            s.push('\n');
            s.push_str(m);
        }
        s
    }

    /// Prints the summary and fails the test on any mismatch or when
    /// nothing was checked.
    ///
    /// # Panics
    ///
    /// When a line mismatched or no line was recorded.
    #[track_caller]
    pub fn finish(self) {
        println!("{}", self.summary());
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
pub fn u64_of(v: &Value, field: &str) -> Result<u64, String> {
    v.get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("missing or non-integer field {field}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hfi1-vectors-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn gz(dir: &Path, name: &str, text: &str) {
        let f = std::fs::File::create(dir.join(name)).unwrap();
        let mut w = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        w.write_all(text.as_bytes()).unwrap();
        w.finish().unwrap();
    }

    #[test]
    fn lines_are_read_and_blank_lines_skipped() {
        let d = scratch("ok");
        gz(&d, "a.jsonl.gz", "{\"x\": 1}\n\n{\"x\": 2}\n");
        let v = try_load_from(&d, "a.jsonl.gz").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(u64_of(&v[1], "x"), Ok(2));
    }

    #[test]
    fn a_missing_file_an_empty_file_and_a_bad_line_are_errors() {
        let d = scratch("bad");
        assert!(matches!(
            try_load_from(&d, "none.jsonl.gz"),
            Err(VectorError::Open { .. })
        ));
        gz(&d, "empty.jsonl.gz", "\n  \n");
        assert!(matches!(
            try_load_from(&d, "empty.jsonl.gz"),
            Err(VectorError::Empty { .. })
        ));
        gz(&d, "bad.jsonl.gz", "{\"x\": 1}\nnot json\n");
        assert!(matches!(
            try_load_from(&d, "bad.jsonl.gz"),
            Err(VectorError::Json { line: 1, .. })
        ));
    }

    #[test]
    #[should_panic(expected = "zero lines checked")]
    fn a_tally_that_checked_nothing_fails() {
        Tally::new("t").finish();
    }

    #[test]
    #[should_panic(expected = "1 lines mismatched")]
    fn a_tally_with_a_mismatch_fails() {
        let mut t = Tally::new("t");
        t.record(0, Ok(()));
        t.record(1, check("f", 1, 2));
        assert!(t.summary().contains("line 1: f: got 1, want 2"));
        t.finish();
    }
}
