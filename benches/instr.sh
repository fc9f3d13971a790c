#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# instr.sh [--rust-only] [OP...]
# Instructions per operation, Rust and the C reference side by side: each
# op runs under cachegrind with ITERS iterations (default 10000) and with
# 0, and the difference divided by ITERS is printed (a markdown table).
# Instruction counts do not depend on the machine's load.
#
# Rust: src/bin/instr.rs, release profile. C: the driver's own functions,
# extracted unchanged from the Linux 6.1 source at run time by
# c-ref/extract.sh (LINUX_TARBALL or LINUX_SRC), compiled with $CC
# (default gcc) at CFLAGS (default -O2, x86-64 baseline) with the shim in
# c-ref/shim.h; SHIM_FLAGS picks the shim's variants (see shim.h).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
iters=${ITERS:-10000}
rust_only=0
if [ "${1:-}" = --rust-only ]; then
    rust_only=1
    shift
fi
command -v valgrind >/dev/null || { echo "instr.sh: valgrind not found" >&2; exit 1; }

cargo build -q --release -p benches --bin instr --manifest-path "$root/Cargo.toml"
rust=$root/target/release/instr
if [ $# -gt 0 ]; then ops=("$@"); else mapfile -t ops < <("$rust" --list); fi

cref=""
if [ "$rust_only" = 0 ]; then
    build=${CREF_BUILD:-$root/target/c-ref}
    mkdir -p "$build"
    "$here/c-ref/extract.sh" "$build"
    ${CC:-gcc} ${CFLAGS:--O2 -march=x86-64} ${SHIM_FLAGS:-} -Wall -Werror \
        -I"$here/c-ref" -I"$build" -o "$build/cref" "$here/c-ref/driver.c" "$here/c-ref/hw.c"
    cref=$build/cref
fi

# Instructions of one run (cachegrind's I refs).
ir() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 |
        awk '/I +refs:/ { gsub(",", "", $NF); print $NF }'
}

# Instructions per op: (run with iters - run with 0) / iters, rounded.
per_op() {
    local z n
    z=$(ir "$@" 0)
    n=$(ir "$@" "$iters")
    [ -n "$z" ] && [ -n "$n" ] || { echo "instr.sh: no count for $*" >&2; exit 1; }
    echo $(( (n - z + iters / 2) / iters ))
}

if [ -n "$cref" ]; then
    echo "| op | C instr | Rust instr | Rust / C |"
    echo "|---|---:|---:|---:|"
else
    echo "| op | Rust instr |"
    echo "|---|---:|"
fi
for op in "${ops[@]}"; do
    r=$(per_op "$rust" "$op")
    if [ -n "$cref" ] && ! "$cref" "$op" 0 >/dev/null 2>&1; then
        # No C counterpart (the C driver exits 2 on an op it lacks).
        echo "| \`$op\` | — | $r | — |"
    elif [ -n "$cref" ]; then
        c=$(per_op "$cref" "$op")
        ratio=$(awk -v r="$r" -v c="$c" 'BEGIN { printf "%.2f", r / c }')
        echo "| \`$op\` | $c | $r | $ratio |"
    else
        echo "| \`$op\` | $r |"
    fi
done
