#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# Mutation testing with cargo-mutants, one unit at a time, resumable.
#
# A unit is a crate, or a crate with file globs (relative to the crate's
# directory):
#
#   scripts/mutants.sh                                  # every crate below
#   scripts/mutants.sh 'tid-alloc:src/pageset.rs,src/pageset/**'
#   scripts/mutants.sh 'hfi1-hal:src/fields/**,src/psn.rs'   # about 3 min
#   scripts/mutants.sh --summary                        # the README table only
#
# Each unit keeps cargo-mutants' mutants.out under
# $MUTANTS_RESULTS/<unit>/ (default mutants-results/, git-ignored), where
# <unit> is the crate name, plus "@" and the globs (with "/" as "_", ","
# as "+", "*" dropped) when globs are given. A unit whose directory holds a `done` file is skipped
# unless --force is given; an interrupted unit (no `done`) starts again.
# After the runs the script prints one Markdown table over every unit
# found under the results directory (caught / missed / timeout / unviable,
# caught / viable), then every survivor with the reason it survives from
# scripts/mutants-equivalent.txt, or UNEXPLAINED when it is not listed.
#
# Options:
#   -j N            cargo-mutants jobs (default 1; 2 at most on this machine)
#   --force         rerun units that are done
#   --shard K/N     run one shard of each unit (cargo-mutants --shard); the
#                   unit directory gets a "#K-N" suffix
#   --iterate       run again only what the unit's previous runs did not
#                   catch or find unviable (cargo-mutants --iterate), after
#                   adding tests; the table adds the earlier runs' caught and
#                   unviable mutants (kept in caught-before.txt and
#                   unviable-before.txt) to this run's
#   --max-load L    before each unit, wait while the 1-minute load average
#                   is above L (default 3: the machine is shared)
#   --summary       print the table and exit
#   --list          list each unit's mutants and exit
#   --readme        also write the table into README.md between the
#                   mutants-table markers
#   --require-explained
#                   exit 1 if a survivor of the units named is not listed in
#                   scripts/mutants-equivalent.txt (the CI slice uses it)
#
# Which tests each crate runs (the fastest command that kills as many
# mutants as the crate's full `cargo test -p CRATE --all-features`) and its
# timeout are in `unit_args` below. Everything runs under `nice -n 19`.
set -euo pipefail
cd "$(dirname "$0")/.."

RESULTS=${MUTANTS_RESULTS:-mutants-results}
JOBS=1
FORCE=0
SHARD=
ITERATE=0
MAX_LOAD=3
SUMMARY_ONLY=0
LIST=0
REQUIRE_EXPLAINED=0
README=0
UNITS=()
ALL_CRATES=(hfi1-hal tid-alloc qp-wait tid-flow tid-read-proto)
# Mutants of test code (functions inside a `tests` module): not run, and
# not counted from results made before they were excluded.
TEST_CODE_RE='\btests::'

while [ $# -gt 0 ]; do
    case "$1" in
    -j) JOBS=$2; shift 2 ;;
    -j*) JOBS=${1#-j}; shift ;;
    --force) FORCE=1; shift ;;
    --shard) SHARD=$2; shift 2 ;;
    --iterate) ITERATE=1; shift ;;
    --max-load) MAX_LOAD=$2; shift 2 ;;
    --summary) SUMMARY_ONLY=1; shift ;;
    --list) LIST=1; shift ;;
    --require-explained) REQUIRE_EXPLAINED=1; shift ;;
    --readme) README=1; shift ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutants.sh: unknown option $1" >&2; exit 1 ;;
    *) UNITS+=("$1"); shift ;;
    esac
done
[ ${#UNITS[@]} -gt 0 ] || UNITS=("${ALL_CRATES[@]}")

# unit_args CRATE: sets TEST_ARGS (cargo test arguments after the
# cargo-mutants options) and TIMEOUT (seconds per test run of one mutant).
#
# The timeout is about five times the slowest unmutated test run, so a
# mutant that loops is cut off but a slow machine does not turn caught
# mutants into timeouts. Build time does not count (cargo-mutants times the
# build on its own, with --build-timeout).
unit_args() {
    case "$1" in
    hfi1-hal)
        # The unit tests only: the crate's doc tests are compile_fail checks
        # of the lock-order types, which no mutation of a function body can
        # make compile; skipping them saves a rustdoc build per mutant.
        TEST_ARGS=(--lib)
        TIMEOUT=30
        ;;
    tid-alloc)
        # Every test binary: the recorded vectors (tests/vectors.rs) catch
        # chunk-order mutations that the property tests miss. No doc tests
        # exist, so --tests only skips an empty rustdoc run.
        TEST_ARGS=(--tests)
        TIMEOUT=60
        ;;
    qp-wait)
        TEST_ARGS=()
        TIMEOUT=60
        ;;
    tid-flow)
        # Every test, the doc example included. The slowest unmutated run
        # takes about 3 s idle and 10 s on the loaded machine; a mutant
        # that loops (an &= turned |= in a walk over a group's mask) must
        # not cost 5 minutes.
        TEST_ARGS=()
        TIMEOUT=30
        ;;
    tid-read-proto)
        TEST_ARGS=()
        TIMEOUT=300
        ;;
    *)
        echo "mutants.sh: no test command known for crate $1" >&2
        exit 1
        ;;
    esac
}

# unit_dir UNIT: the results directory name of a unit.
unit_dir() {
    local name=${1//\//_}
    name=${name//\*/}
    name=${name//,/+}
    name=${name/:/@}
    name=${name%_}
    if [ -n "$SHARD" ]; then
        name="$name#${SHARD/\//-}"
    fi
    printf '%s/%s' "$RESULTS" "$name"
}

wait_for_load() {
    local load
    while :; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        if awk -v l="$load" -v m="$MAX_LOAD" 'BEGIN { exit !(l <= m) }'; then
            return
        fi
        echo "mutants.sh: load average $load is above $MAX_LOAD, waiting a minute"
        sleep 60
    done
}

run_unit() {
    local unit=$1 crate globs dir rc
    crate=${unit%%:*}
    globs=
    [ "$crate" = "$unit" ] || globs=${unit#*:}
    [ -d "$crate" ] || { echo "mutants.sh: no crate directory $crate" >&2; exit 1; }
    unit_args "$crate"
    # MUTANTS_TEST_ARGS (even empty) replaces the crate's test arguments, to
    # compare what another test command kills (use another MUTANTS_RESULTS).
    if [ -n "${MUTANTS_TEST_ARGS+set}" ]; then
        read -r -a TEST_ARGS <<<"$MUTANTS_TEST_ARGS"
    fi
    # --gitignore: the copy leaves out git-ignored scratch (a running fuzz
    # campaign's files come and go while the tree is copied).
    # --exclude-re: cargo-mutants leaves out `#[cfg(test)]` modules but not
    # `#[cfg(all(test, not(loom)))]` ones (tid-flow's); mutating a test's
    # own helpers measures nothing of the crate.
    local args=(--package "$crate" --all-features --timeout "$TIMEOUT"
        --build-timeout 900 --jobs "$JOBS" --no-shuffle --gitignore true
        --exclude-re "$TEST_CODE_RE")
    if [ -n "$globs" ]; then
        local g
        IFS=, read -r -a gl <<<"$globs"
        for g in "${gl[@]}"; do
            args+=(--file "$crate/$g")
        done
    fi
    [ -z "$SHARD" ] || args+=(--shard "$SHARD")
    if [ "$LIST" = 1 ]; then
        cargo mutants "${args[@]}" --list
        return
    fi
    dir=$(unit_dir "$unit")
    if [ -f "$dir/done" ] && [ "$FORCE" = 0 ] && [ "$ITERATE" = 0 ]; then
        echo "mutants.sh: $unit is done ($dir/done); --force runs it again"
        return
    fi
    if [ "$ITERATE" = 1 ]; then
        args+=(--iterate)
        # Keep what earlier runs caught or found unviable: cargo-mutants
        # skips those names and this run's outcomes omit them.
        local f
        for f in caught unviable; do
            [ -f "$dir/mutants.out/$f.txt" ] && cat "$dir/mutants.out/$f.txt" >>"$dir/$f-before.txt"
        done
    else
        rm -rf "$dir/mutants.out" "$dir/mutants.out.old" "$dir/caught-before.txt" \
            "$dir/unviable-before.txt"
    fi
    rm -f "$dir/done"
    mkdir -p "$dir"
    wait_for_load
    echo "mutants.sh: $unit -> $dir"
    local start tree
    start=$(date +%s)
    # cargo-mutants copies the tree now: record what it tests.
    tree="$(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (dirty)')"
    rc=0
    # Niced: the machine is shared, and the other work should not wait.
    nice -n 19 cargo mutants "${args[@]}" --output "$dir" -- "${TEST_ARGS[@]}" || rc=$?
    # 0: all caught, 2: some missed, 3: some timed out. Anything else
    # (usage, a failing baseline, an internal error) leaves the unit undone.
    case $rc in
    0 | 2 | 3)
        {
            echo "exit $rc"
            echo "seconds $(($(date +%s) - start))"
            echo "commit $tree"
            echo "cargo mutants ${args[*]} -- ${TEST_ARGS[*]}"
        } >"$dir/done"
        ;;
    *)
        echo "mutants.sh: cargo mutants exited $rc on $unit; not marked done" >&2
        exit "$rc"
        ;;
    esac
}

summary() {
    [ -d "$RESULTS" ] || { echo "mutants.sh: no results under $RESULTS" >&2; return; }
    local u names=()
    for u in "${UNITS[@]}"; do names+=("$(basename "$(unit_dir "$u")")"); done
    python3 - "$RESULTS" scripts/mutants-equivalent.txt "$REQUIRE_EXPLAINED" "$TEST_CODE_RE" "${names[@]}" <<'EOF'
import json, os, re, sys

root, listed_path, require = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
test_code = re.compile(sys.argv[4])
# With require: the results directories of the units named.
required = set(sys.argv[5:])
# "file: description<TAB>why": survivors that no test can kill, each with
# the reason; a mutant is matched without its line and column.
listed = {}
if os.path.isfile(listed_path):
    for line in open(listed_path):
        if line.strip() and not line.startswith("#"):
            key, _, why = line.rstrip("\n").partition("\t")
            listed[key.strip()] = why.strip()


def key_of(name):
    m = re.match(r"^(.*?):\d+:\d+: (.*)$", name)
    return f"{m.group(1)}: {m.group(2)}" if m else name


def why_of(name):
    """The listed reason of a survivor. A file split into a directory
    module since the run (`a/b.rs` now `a/b/*.rs`) still matches the
    same mutant listed under its new file."""
    key = key_of(name)
    if key in listed:
        return listed[key]
    file, _, desc = key.partition(": ")
    if file.endswith(".rs"):
        prefix = file[:-3] + "/"
        for k, why in listed.items():
            f, _, d = k.partition(": ")
            if d == desc and f.startswith(prefix):
                return why
    return None


def pct(a, b):
    return f"{a}/{b} = {100.0 * a / b:.1f}%" if b else "-"


rows, survivors, unexplained = [], [], 0
for unit in sorted(os.listdir(root)):
    out = os.path.join(root, unit, "mutants.out", "outcomes.json")
    if not os.path.isfile(out):
        continue
    done = os.path.isfile(os.path.join(root, unit, "done"))
    with open(out) as f:
        o = json.load(f)
    n = {"CaughtMutant": 0, "MissedMutant": 0, "Timeout": 0, "Unviable": 0}
    # Earlier runs of an iterated unit: what they caught or found unviable
    # (not run again this time).
    this_run = {oc["scenario"]["Mutant"]["name"] for oc in o["outcomes"] if isinstance(oc["scenario"], dict)}
    for kind, key in (("caught", "CaughtMutant"), ("unviable", "Unviable")):
        p = os.path.join(root, unit, kind + "-before.txt")
        if os.path.isfile(p):
            before = {l.strip() for l in open(p) if l.strip() and not test_code.search(l)}
            n[key] += len(before - this_run)
    equivalent = 0
    for oc in o["outcomes"]:
        if isinstance(oc["scenario"], dict) and test_code.search(oc["scenario"]["Mutant"]["name"]):
            continue
        s = oc["summary"]
        if s in n:
            n[s] += 1
        if s in ("MissedMutant", "Timeout"):
            name = oc["scenario"]["Mutant"]["name"]
            why = why_of(name)
            equivalent += why is not None
            unexplained += why is None and unit in required
            kind = "missed" if s == "MissedMutant" else "timeout"
            survivors.append((unit, kind, name, why or "UNEXPLAINED: kill it with a test or list it"))
    viable = n["CaughtMutant"] + n["MissedMutant"] + n["Timeout"]
    rows.append((unit + ("" if done else " (unfinished)"), sum(n.values()), n["CaughtMutant"],
                 n["MissedMutant"], n["Timeout"], n["Unviable"], pct(n["CaughtMutant"], viable),
                 equivalent, pct(n["CaughtMutant"], viable - equivalent)))
print("| unit | mutants | caught | missed | timeout | unviable | caught / viable "
      "| listed equivalent | caught / (viable - equivalent) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
if survivors:
    print()
    print("| unit | outcome | mutant | why it survives |")
    print("|---|---|---|---|")
    for unit, kind, name, why in survivors:
        name, why = name.replace("|", "\\|"), why.replace("|", "\\|")
        print(f"| {unit} | {kind} | `{name}` | {why} |")
if require and unexplained:
    print(f"\n{unexplained} survivors are not explained in {listed_path}", file=sys.stderr)
    sys.exit(1)
EOF
}

if [ "$SUMMARY_ONLY" = 0 ]; then
    command -v cargo-mutants >/dev/null || cargo install cargo-mutants --locked
    for u in "${UNITS[@]}"; do
        run_unit "$u"
    done
fi
[ "$LIST" = 1 ] && exit 0
if [ "$README" = 1 ]; then
    table=$(summary)
    grep -q '<!-- mutants-table:begin -->' README.md ||
        { echo "mutants.sh: no mutants-table markers in README.md" >&2; exit 1; }
    TABLE="$table" python3 - README.md <<'EOF'
import os, re, sys
path = sys.argv[1]
text = open(path).read()
block = "<!-- mutants-table:begin -->\n" + os.environ["TABLE"] + "\n<!-- mutants-table:end -->"
pattern = r"<!-- mutants-table:begin -->.*?<!-- mutants-table:end -->"
text = re.sub(pattern, lambda _: block, text, flags=re.S)
open(path, "w").write(text)
EOF
    echo "$table"
else
    summary
fi
