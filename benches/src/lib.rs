// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Criterion benchmarks of the engine; the inputs are described in
//! `benches/README.md` and in each benchmark file's doc.
