#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# The rooms of the workspace: every Rust function over FN_MAX lines
# (default 80) and every Rust source file over FILE_MAX lines (default 600)
# under the crates' src/ directories, longest first, with their line
# counts, then a one-line summary, so the sizes can be watched from one
# change to the next. Information only: it exits 0 whatever it finds.
#
#   bash scripts/sizes.sh                # the whole workspace
#   bash scripts/sizes.sh tid-read-proto # one crate (any directories)
#   FN_MAX=60 bash scripts/sizes.sh      # other limits
#
# A function runs from its `fn` line to the line of the brace that closes
# its body; braces inside string and character literals and comments are
# not counted. Declarations without a body (trait items, extern blocks)
# are skipped. A function nested in another is counted inside its parent
# only.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
FN_MAX=${FN_MAX:-80}
FILE_MAX=${FILE_MAX:-600}
cd "$here"

if [ "$#" -eq 0 ]; then
    set -- */src
fi
mapfile -t files < <(find "$@" -name '*.rs' -not -path '*/target/*' | sort)

fns=$(awk -v max="$FN_MAX" '
function strip(s,    out, i, c, n) {
    # Drop string and char literals and // comments; keep /* */ state.
    out = ""; n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (inblock) {
            if (c == "*" && substr(s, i + 1, 1) == "/") { inblock = 0; i++ }
            continue
        }
        if (instr) {
            if (c == "\\") { i++; continue }
            if (c == "\"") instr = 0
            continue
        }
        if (c == "/" && substr(s, i + 1, 1) == "/") break
        if (c == "/" && substr(s, i + 1, 1) == "*") { inblock = 1; i++; continue }
        if (c == "\"") { instr = 1; continue }
        if (c == "\x27") {
            # a char literal (x, \n, \u{..}) or a lifetime: skip only literals
            if (substr(s, i + 1, 1) == "\\") {
                j = index(substr(s, i + 2), "\x27")
                if (j > 0) { i = i + 1 + j; continue }
            } else if (substr(s, i + 2, 1) == "\x27") { i += 2; continue }
        }
        out = out c
    }
    return out
}
FNR == 1 { tracking = 0; inblock = 0; instr = 0 }
{
    line = strip($0)
    if (!tracking && match(line, /(^|[^A-Za-z0-9_])fn +[A-Za-z_][A-Za-z0-9_]*/)) {
        name = substr(line, RSTART, RLENGTH)
        sub(/^[^f]*fn +/, "", name)
        tracking = 1; started = 0; depth = 0; start = FNR
        rest = substr(line, RSTART + RLENGTH)
    } else if (tracking) {
        rest = line
    } else {
        next
    }
    n = length(rest)
    for (i = 1; i <= n && tracking; i++) {
        c = substr(rest, i, 1)
        if (c == "{") { depth++; started = 1 }
        else if (c == "}") {
            depth--
            if (started && depth == 0) {
                len = FNR - start + 1
                if (len > max) printf "%6d  %s:%d  %s\n", len, FILENAME, start, name
                tracking = 0
            }
        } else if (c == ";" && !started && depth == 0) {
            tracking = 0  # a declaration without a body
        }
    }
}
' "${files[@]}" | sort -rn)

big=$(wc -l "${files[@]}" | awk -v max="$FILE_MAX" '$2 != "total" && $1 > max { printf "%6d  %s\n", $1, $2 }' | sort -rn)

echo "== functions over $FN_MAX lines (lines, where, name)"
[ -n "$fns" ] && echo "$fns"
echo "== files over $FILE_MAX lines (lines, file)"
[ -n "$big" ] && echo "$big"
nfn=$(printf '%s' "$fns" | grep -c . || true)
nbig=$(printf '%s' "$big" | grep -c . || true)
echo "sizes: ${#files[@]} files; $nfn functions over $FN_MAX lines; $nbig files over $FILE_MAX lines"
