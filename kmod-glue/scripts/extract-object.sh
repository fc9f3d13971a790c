#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# extract-object.sh <libkmod_glue.a> <out.o>
# Takes the single LTO object of the crate out of the staticlib (the rest of
# the archive is compiler_builtins, whose memcpy must not shadow the
# kernel's), keeps only the hfi1_tid_* definitions global and strips debug
# information.
set -euo pipefail
lib=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mapfile -t members < <(ar t "$lib" | grep -E '^kmod_glue-.*\.o$')
if [ "${#members[@]}" -ne 1 ]; then
    echo "extract-object: expected one kmod_glue object in $lib, found ${#members[@]}" >&2
    exit 1
fi
(cd "$tmp" && ar x "$lib" "${members[0]}")
obj="$tmp/${members[0]}"
keep=()
while read -r _ _ sym; do
    keep+=("--keep-global-symbol=$sym")
done < <(nm --defined-only -g "$obj" | grep -E ' hfi1_tid_[A-Za-z0-9_]+$')
if [ "${#keep[@]}" -eq 0 ]; then
    echo "extract-object: no hfi1_tid_* symbol defined" >&2
    exit 1
fi
objcopy --strip-debug "${keep[@]}" "$obj" "$out.tmp"
mv "$out.tmp" "$out"
