// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! `include/hfi1_tid_layout.h` is the C side of `hfi1_hal::layout`: this
//! test writes the header the table describes and fails if the committed
//! file differs (`HFI1_TID_BLESS=1` rewrites it). The header's macros
//! check, with `BUILD_BUG_ON`, the real structures and values of the
//! kernel source being built (`hfi1/hfi1_tid_layout.c` and the routed
//! wrappers inside `tid_rdma.c` expand them).

use std::fmt::Write as _;
use std::path::Path;

use hfi1_hal::layout::{CTidRdmaPageset, Defined, FIELDS, SIZES, VALUES};

/// One `BUILD_BUG_ON` line of a multi-line macro.
fn check(out: &mut String, cond: &str) {
    writeln!(out, "\tBUILD_BUG_ON({cond});\t\\").unwrap();
}

fn values(out: &mut String, name: &str, defined: Defined, what: &str) {
    writeln!(out, "/* {what} */").unwrap();
    writeln!(out, "#define {name}() do {{\t\\").unwrap();
    for v in VALUES.iter().filter(|v| v.defined == defined) {
        check(out, &format!("(u64)({}) != {:#x}ull", v.c_name, v.value));
    }
    writeln!(out, "}} while (0)\n").unwrap();
}

fn header() -> String {
    let mut h = String::new();
    h.push_str(
        "/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */\n\
         /*\n \
         * The driver's structures and values as the Rust engine uses them\n \
         * (hfi1_hal::layout). Written by kmod-glue/tests/layout.rs from that\n \
         * table; HFI1_TID_BLESS=1 cargo test -p kmod-glue --test layout\n \
         * rewrites it. Each macro fails the build (BUILD_BUG_ON) if the kernel\n \
         * source being built disagrees with the table.\n \
         */\n\
         #ifndef HFI1_TID_LAYOUT_H\n\
         #define HFI1_TID_LAYOUT_H\n\n\
         #include <linux/build_bug.h>\n\
         #include <linux/stddef.h>\n\
         #include <linux/types.h>\n\n",
    );
    values(
        &mut h,
        "HFI1_TID_LAYOUT_CHECK_HEADER_VALUES",
        Defined::Header,
        "Values the driver's headers define (hfi1_tid_layout.c).",
    );
    values(
        &mut h,
        "HFI1_TID_LAYOUT_CHECK_TID_RDMA_C_VALUES",
        Defined::TidRdmaC,
        "Values tid_rdma.c defines itself (expanded inside tid_rdma.c).",
    );
    h.push_str("/* Offsets and sizes of the fields the engine reaches (hfi1_tid_layout.c). */\n");
    h.push_str("#define HFI1_TID_LAYOUT_CHECK_STRUCTS() do {\t\\\n");
    for s in SIZES.iter().filter(|s| s.c_struct != "tid_rdma_pageset") {
        check(
            &mut h,
            &format!("sizeof(struct {}) != {}", s.c_struct, s.size),
        );
    }
    check(&mut h, "sizeof(struct tid_rdma_pageset) != 8");
    for f in FIELDS.iter().flat_map(|f| f.iter()) {
        if let Some(off) = f.offset {
            check(
                &mut h,
                &format!("offsetof(struct {}, {}) != {off}", f.c_struct, f.c_field),
            );
        }
        check(
            &mut h,
            &format!(
                "sizeof_field(struct {}, {}) != {}",
                f.c_struct, f.c_field, f.size
            ),
        );
    }
    h.push_str("} while (0)\n\n");
    h.push_str(
        "/*\n \
         * The bit positions of struct tid_rdma_pageset: each field set alone\n \
         * in a constant, read back as the 64-bit word (the compiler folds it).\n \
         */\n",
    );
    h.push_str("#define HFI1_TID_LAYOUT_CHECK_PAGESET() do {\t\\\n");
    let probes: [(&str, u64, (u32, u32)); 4] = [
        ("addr", 0x8000_0000_0001, CTidRdmaPageset::ADDR),
        ("idx", 0x81, CTidRdmaPageset::IDX),
        ("count", 0x41, CTidRdmaPageset::COUNT),
        ("mapped", 1, CTidRdmaPageset::MAPPED),
    ];
    for (field, v, (at, _)) in probes {
        writeln!(
            h,
            "\tBUILD_BUG_ON(((union {{ struct tid_rdma_pageset p; u64 v; }})\t\\\n\
             \t\t      {{ .p = {{ .{field} = {v:#x} }} }}).v != {:#x}ull);\t\\",
            v << at
        )
        .unwrap();
    }
    h.push_str("} while (0)\n\n");
    h.push_str("#endif /* HFI1_TID_LAYOUT_H */\n");
    h
}

#[test]
fn layout_header_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/hfi1_tid_layout.h");
    let want = header();
    if std::env::var_os("HFI1_TID_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: rerun with HFI1_TID_BLESS=1 (expected:\n{want})",
        path.display()
    );
}

#[test]
fn the_header_checks_what_the_engine_relies_on() {
    let h = header();
    for needle in [
        "(u64)(HFI1_S_WAIT_TID_SPACE) != 0x10000000ull",
        "(u64)(RXE_NUM_TID_FLOWS) != 0x20ull",
        "(u64)(KERN_GENERATION_RESERVED) != 0xfffffull",
        "offsetof(struct tid_rdma_flow, tid_entry) != 1600",
        "sizeof_field(struct rvt_qp, s_flags) != 4",
        "sizeof(struct tid_group) != 24",
        ".idx = 0x81",
    ] {
        assert!(h.contains(needle), "the header does not check {needle}");
    }
}
