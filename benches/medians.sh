#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# medians.sh [RUNS]
# Runs the criterion benchmarks (tid_alloc, flow, icrc) RUNS times
# (default 3) with short settings and prints, per id, the lowest and
# highest of criterion's medians (ns), as a markdown table. Wall-clock
# numbers depend on the machine's load; benches/instr.sh gives the
# load-independent instruction counts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$runs"); do
    for b in tid_alloc flow icrc; do
        cargo bench -q --manifest-path "$root/Cargo.toml" -p benches --bench "$b" -- \
            --warm-up-time 1 --measurement-time 3 >/dev/null 2>&1
    done
    find "$root/target/criterion" -path '*/new/estimates.json' | while read -r f; do
        id=${f#"$root/target/criterion/"}
        id=${id%/new/estimates.json}
        python3 -c 'import json,sys; print(sys.argv[2], json.load(open(sys.argv[1]))["median"]["point_estimate"])' "$f" "$id"
    done >>"$out"
done
echo "| id | best median (ns) | worst median (ns) |"
echo "|---|---:|---:|"
sort "$out" | awk '
    { if (!($1 in lo) || $2 < lo[$1]) lo[$1] = $2; if ($2 > hi[$1]) hi[$1] = $2; ids[$1] = 1 }
    END { for (i in ids) printf "| `%s` | %.1f | %.1f |\n", i, lo[i], hi[i] }' | sort
