#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# check-object.sh [--no-test-code] <rust object> <kernel build tree>
# check-object.sh --symbols-only <module.ko>
# Refuses a Rust object the module loader or the kernel would not accept:
#  - relocations other than R_X86_64_{64,32S,PC32,PLT32} (a GOT relocation
#    passes kbuild and modpost and only fails at insmod),
#  - undefined symbols other than the kernel's mem* functions, the
#    retpoline/return thunks and our own hfi1_tid_* C callbacks,
#  - any SSE register use (the kernel does not save FPU state for us),
#  - a stack frame above FRAME_LIMIT bytes (default 4096) or a stack probe
#    loop (kernel stacks are 16 KiB; the kernel's C gets a warning at 2048),
#  - any objtool complaint with the flags kbuild uses for module objects.
# With --no-test-code (the rebuilt hfi1.ko's object) it also refuses any
# symbol of the simulator, the test harnesses or the self-test ABI;
# --symbols-only runs that check alone, on a finished module's symbol list.
set -euo pipefail

# Symbols that must never be in hfi1.ko: the software chip (hfi1_hal::sim,
# tid-read-proto's sim_chip), the harnesses (prototest, waittest, tid-harness), the
# lockdep demo, and the C entry points
# of the engine's own objects the self-test drives (engine.rs, qp.rs,
# kplat/). Exported names, then the legacy-mangled paths of local ones.
TEST_EXPORTS='^hfi1_tid_(sim_|wt_|read_test|write_test|mix_test|lockdep_demo|ctx_|qp_|req_|platform_|live_objects|s_lock_init|setup_hw_flow|clear_hw_flow|exp_rcv_|flush_wait|free_flows|trigger_resume)'
TEST_PATHS='8hfi1_hal3sim|9kmod_glue(9prototest|8waittest|6engine|2qp|5kplat|12lockdep_demo)|11tid_harness|8sim_chip'

# no_test_code <file>: 1 if its symbol table names test code.
no_test_code() {
    local bad
    bad=$( { nm "$1" 2>/dev/null || true; } | awk '{print $NF}' |
        grep -E "$TEST_EXPORTS|$TEST_PATHS" | sort -u | head -20 || true)
    if [ -n "$bad" ]; then
        echo "check-object: $(basename "$1") holds simulator or test code:" >&2
        echo "$bad" >&2
        return 1
    fi
    echo "check-object: $(basename "$1"): no simulator, harness or self-test symbol"
}

no_test=0
case "${1:-}" in
--symbols-only)
    no_test_code "$2"
    exit $?
    ;;
--no-test-code)
    no_test=1
    shift
    ;;
esac
obj=$1 kdir=$2
fail=0

if [ "$no_test" = 1 ]; then
    no_test_code "$obj" || fail=1
fi

bad_rel=$(readelf -rW "$obj" | awk '/^ *[0-9a-f]+ +[0-9a-f]+ R_X86_64_/ {print $3}' |
    sort -u | grep -Ev '^R_X86_64_(64|32S|PC32|PLT32)$' || true)
if [ -n "$bad_rel" ]; then
    echo "check-object: forbidden relocations: $bad_rel" >&2
    fail=1
fi

bad_undef=$(nm -u "$obj" | awk '{print $2}' |
    grep -Ev '^(memcpy|memset|memmove|memcmp|__x86_return_thunk|__x86_indirect_thunk_[a-z0-9]+|hfi1_tid_[A-Za-z0-9_]+)$' || true)
if [ -n "$bad_undef" ]; then
    echo "check-object: unexpected undefined symbols:" $bad_undef >&2
    fail=1
fi

if objdump -d "$obj" | grep -Eq '%[xyz]mm[0-9]'; then
    echo "check-object: SSE/AVX registers used:" >&2
    objdump -d "$obj" | grep -E '%[xyz]mm[0-9]' | head -5 >&2
    fail=1
fi

# Stack frames: the sum of each function's `sub $N,%rsp` (a frame above a
# page is allocated a page at a time, unrolled or in a probe loop whose
# bound is set with `mov %rsp,%r11; sub $N,%r11`: only that pair counts,
# not arithmetic the compiler happens to do in %r11). Summing over all
# paths overestimates a function with several exits; that errs on the
# safe side.
FRAME_LIMIT=${FRAME_LIMIT:-4096}
frames=""
declare -A fmax=()
while read -r fn hex reg; do
    v=$((16#$hex))
    [ "$reg" = r11 ] && fmax[$fn]="probe"
    if [ "${fmax[$fn]:-0}" != probe ] && [ "$reg" = rsp ]; then fmax[$fn]=$(( ${fmax[$fn]:-0} + v )); fi
done < <(objdump -d --no-show-raw-insn "$obj" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn) }
    /sub +\$0x[0-9a-f]+,%r(sp|11)$/ {
        n = $0; sub(/.*\$0x/, "", n); r = n; sub(/,.*/, "", n); sub(/.*%/, "", r)
        if (r == "rsp" || prev ~ /mov +%rsp,%r11$/) print fn, n, r
    }
    { prev = $0 }')
for fn in "${!fmax[@]}"; do
    v=${fmax[$fn]}
    if [ "$v" = probe ] || [ "$v" -gt "$FRAME_LIMIT" ]; then
        frames+="$fn: ${v/probe/over a page, with a stack probe loop}"$'\n'
    fi
done
if [ -n "$frames" ]; then
    echo "check-object: stack frames above $FRAME_LIMIT bytes:" >&2
    echo "$frames" >&2
    fail=1
fi

# Panic audit (reported, not refused): exported or engine functions that
# call straight into a panic or allocation-failure entry point. Each is a
# path the source claims unreachable (or a test-only allocation); a new
# line here deserves a look.
panics=$(objdump -dr --no-show-raw-insn "$obj" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn) }
    /R_X86_64_(PLT32|PC32)/ && /(panic_for_nonpositive|panic_bounds_check|unwrap_failed|expect_failed|slice_[a-z_]*fail|grow_one|handle_alloc_error|capacity_overflow|panic_fmt|panicking)/ \
        && fn !~ /(panic|alloc_error|capacity_overflow|handle_error|grow_one|rust_begin_unwind)/ {
        t = $3; sub(/-0x4$/, "", t); sub(/^\.text\.unlikely\./, "", t); print fn " -> " t
    }' | sort -u | c++filt | sed -E 's/\[[0-9a-f]{16}\]//g')
if [ -n "$panics" ]; then
    echo "check-object: panic audit: call sites that reach the panic handler:"
    sed 's/^/  /' <<<"$panics"
fi

objtool=$kdir/tools/objtool/objtool
if [ ! -x "$objtool" ]; then
    echo "check-object: no objtool at $objtool" >&2
    fail=1
else
    tmp=$(mktemp)
    cp "$obj" "$tmp"
    out=$("$objtool" --hacks=jump_label --hacks=noinstr --orc --retpoline --rethunk \
        --sls --static-call --uaccess --module "$tmp" 2>&1 || echo "objtool exit status $?")
    rm -f "$tmp"
    if [ -n "$out" ]; then
        echo "check-object: objtool: $out" >&2
        fail=1
    fi
fi

[ "$fail" = 0 ] && echo "check-object: $(basename "$obj") ok ($(nm --defined-only -g "$obj" | wc -l) exported symbols)"
exit "$fail"
