#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# A recorded fuzz campaign: every cargo-fuzz target (or the ones named), one
# at a time on one core, for a set number of executions or a set time, with
# a kept, minimised corpus.
#
#   tid-read-proto/fuzz/campaign.sh                  # every target
#   tid-read-proto/fuzz/campaign.sh bth lrh          # these two
#   tid-read-proto/fuzz/campaign.sh --rate bth       # 60 s each: execs/s and the time 10M takes
#   tid-read-proto/fuzz/campaign.sh --replay         # run the regression inputs only
#   tid-read-proto/fuzz/campaign.sh --summary        # the README table only
#
# Budget per target: parser targets stop at --runs executions (default
# 10,000,000) or --max-time seconds (default 3600), whichever comes first;
# the stateful targets (requester_rx, responder_rx, read_pair,
# write_pair) run for --stateful-time seconds (default 3600). libFuzzer
# stops at the first crash; the input is kept under artifacts/<target>/
# and counted.
#
# Corpus: each run starts from corpus/<target>/ (the kept corpus) and
# regressions/<target>/, writes new inputs into a scratch directory, and
# then minimises the union with -merge=1. The minimised corpus replaces
# corpus/<target>/ when it is small (at most $CORPUS_MAX_BYTES bytes,
# default 1 MiB, and $CORPUS_MAX_FILES files, default 2000): that is the
# corpus to commit. A larger one is kept under the results directory only
# and corpus/<target>/ is left alone (such a target regenerates its corpus
# from the kept one and its regression inputs on every campaign).
#
# Build: parser targets without a sanitizer (`-s none`: their code path,
# tid-read-proto's wire and OPFN modules and hfi1-hal's field types, has no
# `unsafe`, so AddressSanitizer could only slow them down) and with debug
# assertions (`-a`: an arithmetic overflow is a finding, not a silent wrap);
# the stateful targets with AddressSanitizer too, since their path crosses
# the lock-order types' `unsafe`.
#
# Everything runs under `nice -n 19` (the machine is shared), so the rates
# depend on what else runs: each stats file keeps the load average at the
# start and the end.
#
# Results: $FUZZ_RESULTS/<target>/ (default campaign-results/ beside this
# script, git-ignored): fuzz.log, merge.log and stats (one key=value a line:
# runs, execs_per_sec, cov, ft, corpus_files, corpus_bytes, crashes,
# seconds, committed). The table covers every target with stats; --readme
# also writes it into the README between the fuzz-table markers.
set -euo pipefail
cd "$(dirname "$0")"
FUZZ_DIR=$(pwd)

RESULTS=${FUZZ_RESULTS:-$FUZZ_DIR/campaign-results}
RUNS=10000000
MAX_TIME=3600
STATEFUL_TIME=3600
CORPUS_MAX_BYTES=${CORPUS_MAX_BYTES:-1048576}
CORPUS_MAX_FILES=${CORPUS_MAX_FILES:-2000}
SEED=
MODE=run
README=0
TARGETS=()
STATEFUL=" requester_rx responder_rx read_pair write_pair "

while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --max-time) MAX_TIME=$2; shift 2 ;;
    --stateful-time) STATEFUL_TIME=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --rate) MODE=rate; shift ;;
    --replay) MODE=replay; shift ;;
    --summary) MODE=summary; shift ;;
    --readme) README=1; shift ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "campaign.sh: unknown option $1" >&2; exit 1 ;;
    *) TARGETS+=("$1"); shift ;;
    esac
done

export RUSTC_BOOTSTRAP=1
if [ ${#TARGETS[@]} -eq 0 ] && [ "$MODE" != summary ]; then
    mapfile -t TARGETS < <(cargo fuzz list)
fi

is_stateful() { [[ $STATEFUL == *" $1 "* ]]; }

# build_flags TARGET: the cargo fuzz build options of a target.
build_flags() {
    if is_stateful "$1"; then
        echo "-a"
    else
        echo "-a -s none"
    fi
}

# stat KEY FILE: one value of a key=value file.
stat_of() { sed -n "s/^$1=//p" "$2" | tail -n 1; }

# Parses libFuzzer's output (final stats and the last status line) into
# key=value lines.
parse_log() {
    local log=$1
    local runs rate line cov ft
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    line=$(grep -E '^#[0-9]+' "$log" | grep ' cov: ' | tail -n 1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
    echo "seed=$(sed -n 's/^INFO: Seed: *//p' "$log" | head -n 1)"
    echo "runs=${runs:-0}"
    echo "execs_per_sec=${rate:-0}"
    echo "cov=${cov:-0}"
    echo "ft=${ft:-0}"
}

# Findings libFuzzer kept for target $1. A slow unit is no finding: the
# time it reports includes the machine's load (the nice -n 19 below), so
# those are counted apart (count_artifacts T slow) and rerun by hand.
count_artifacts() {
    local d="$FUZZ_DIR/artifacts/$1"
    [ -d "$d" ] || { echo 0; return; }
    if [ "${2:-}" = slow ]; then
        find "$d" -maxdepth 1 -type f -name 'slow-unit-*' | wc -l
    else
        find "$d" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
            -o -name 'oom-*' \) | wc -l
    fi
}

run_target() {
    local t=$1 out flags budget scratch before after slow_before slow_after rc start seconds
    out="$RESULTS/$t"
    mkdir -p "$out" "corpus/$t"
    read -r -a flags <<<"$(build_flags "$t")"
    cargo fuzz build "${flags[@]}" "$t" >"$out/build.log" 2>&1 ||
        { cat "$out/build.log" >&2; exit 1; }
    if is_stateful "$t"; then
        budget=(-max_total_time="$STATEFUL_TIME")
    else
        budget=(-runs="$RUNS" -max_total_time="$MAX_TIME")
    fi
    [ -z "$SEED" ] || budget+=(-seed="$SEED")
    scratch="$out/new"
    rm -rf "$scratch"
    mkdir -p "$scratch"
    # The fixed regression inputs seed the run (open-* ones still fail).
    if [ -d "regressions/$t" ]; then
        find "regressions/$t" -maxdepth 1 -type f ! -name 'open-*' -exec cp {} "$scratch/" \;
    fi
    local inputs=("$scratch" "corpus/$t")
    before=$(count_artifacts "$t")
    slow_before=$(count_artifacts "$t" slow)
    echo "campaign.sh: $t: ${budget[*]} (build ${flags[*]})"
    start=$(date +%s)
    rc=0
    local load0
    load0=$(cut -d' ' -f1 /proc/loadavg)
    nice -n 19 cargo fuzz run "${flags[@]}" "$t" "${inputs[@]}" -- "${budget[@]}" \
        -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 >"$out/fuzz.log" 2>&1 || rc=$?
    seconds=$(($(date +%s) - start))
    after=$(count_artifacts "$t")
    slow_after=$(count_artifacts "$t" slow)
    # Minimise the kept corpus and what this run added.
    local merged="$out/merged"
    rm -rf "$merged"
    mkdir -p "$merged"
    nice -n 19 cargo fuzz run "${flags[@]}" "$t" "$merged" "$scratch" "corpus/$t" -- -merge=1 \
        >"$out/merge.log" 2>&1
    local files bytes committed=no
    files=$(find "$merged" -type f | wc -l)
    bytes=$(find "$merged" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    if [ "$bytes" -le "$CORPUS_MAX_BYTES" ] && [ "$files" -le "$CORPUS_MAX_FILES" ]; then
        rm -rf "corpus/$t"
        mv "$merged" "corpus/$t"
        committed=yes
    fi
    rm -rf "$scratch"
    {
        parse_log "$out/fuzz.log"
        echo "corpus_files=$files"
        echo "corpus_bytes=$bytes"
        echo "crashes=$((after - before))"
        echo "slow_units=$((slow_after - slow_before))"
        echo "exit=$rc"
        echo "seconds=$seconds"
        echo "load=$load0 -> $(cut -d' ' -f1 /proc/loadavg)"
        echo "committed=$committed"
        echo "build=${flags[*]}"
        echo "commit=$(git rev-parse --short HEAD)"
    } >"$out/stats"
    echo "campaign.sh: $t: $(tr '\n' ' ' <"$out/stats")"
    if [ "$rc" != 0 ]; then
        echo "campaign.sh: $t stopped with exit $rc; the input is under artifacts/$t/" >&2
        grep -E 'panicked|ERROR|SUMMARY' "$out/fuzz.log" | head -n 5 >&2 || true
    fi
}

# 60 seconds from the kept corpus; prints the rate and what the full
# budget will take.
rate_target() {
    local t=$1 log flags rate
    mkdir -p "$RESULTS/$t"
    log="$RESULTS/$t/rate.log"
    read -r -a flags <<<"$(build_flags "$t")"
    cargo fuzz build "${flags[@]}" "$t" >"$RESULTS/$t/build.log" 2>&1 ||
        { cat "$RESULTS/$t/build.log" >&2; exit 1; }
    local inputs=()
    [ ! -d "corpus/$t" ] || inputs+=("corpus/$t")
    # A scratch corpus directory first, so the kept one is not written.
    local scratch
    scratch=$(mktemp -d)
    nice -n 19 cargo fuzz run "${flags[@]}" "$t" "$scratch" "${inputs[@]}" -- -max_total_time=60 \
        -print_final_stats=1 -timeout=10 >"$log" 2>&1 || true
    rm -rf "$scratch"
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    rate=${rate:-0}
    if is_stateful "$t"; then
        echo "$t: $rate execs/s; $STATEFUL_TIME s run = $((rate * STATEFUL_TIME)) executions"
    elif [ "$rate" -gt 0 ]; then
        local need=$((RUNS / rate))
        [ "$need" -le "$MAX_TIME" ] || need="$MAX_TIME (capped; $((rate * MAX_TIME)) executions)"
        echo "$t: $rate execs/s; $RUNS executions take ${need} s"
    else
        echo "$t: no rate (see $log)"
    fi
}

# Runs every fixed regression input (regressions/<target>/*, but open-*)
# through its target once; fails on the first that crashes.
replay_target() {
    local t=$1 flags files
    [ -d "regressions/$t" ] || return 0
    mapfile -t files < <(find "regressions/$t" -maxdepth 1 -type f ! -name 'open-*' | sort)
    [ ${#files[@]} -gt 0 ] || return 0
    read -r -a flags <<<"$(build_flags "$t")"
    echo "campaign.sh: replaying ${#files[@]} inputs of regressions/$t/"
    cargo fuzz run "${flags[@]}" "$t" "${files[@]}"
}

summary() {
    local t s
    echo "| target | executions | execs/s | coverage (cov) | features (ft) | corpus | crashes | wall time | budget |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
    for s in "$RESULTS"/*/stats; do
        [ -f "$s" ] || continue
        t=$(basename "$(dirname "$s")")
        local budget="≥ 10M runs"
        is_stateful "$t" && budget="time"
        printf '| %s | %s | %s | %s | %s | %s files, %s B%s | %s | %s s | %s |\n' \
            "$t" "$(stat_of runs "$s")" "$(stat_of execs_per_sec "$s")" "$(stat_of cov "$s")" \
            "$(stat_of ft "$s")" "$(stat_of corpus_files "$s")" "$(stat_of corpus_bytes "$s")" \
            "$([ "$(stat_of committed "$s")" = yes ] || echo ', not committed')" \
            "$(stat_of crashes "$s")" "$(stat_of seconds "$s")" "$budget"
    done
}

write_readme() {
    local readme="$FUZZ_DIR/../../README.md" table
    table=$(summary)
    grep -q '<!-- fuzz-table:begin -->' "$readme" ||
        { echo "campaign.sh: no fuzz-table markers in README.md" >&2; exit 1; }
    TABLE="$table" python3 - "$readme" <<'EOF'
import os, re, sys
path = sys.argv[1]
text = open(path).read()
block = "<!-- fuzz-table:begin -->\n" + os.environ["TABLE"] + "\n<!-- fuzz-table:end -->"
text = re.sub(r"<!-- fuzz-table:begin -->.*?<!-- fuzz-table:end -->", lambda _: block, text, flags=re.S)
open(path, "w").write(text)
EOF
}

case $MODE in
run)
    for t in "${TARGETS[@]}"; do run_target "$t"; done
    summary
    ;;
rate) for t in "${TARGETS[@]}"; do rate_target "$t"; done ;;
replay) for t in "${TARGETS[@]}"; do replay_target "$t"; done ;;
summary) summary ;;
esac
[ "$README" = 0 ] || write_readme
