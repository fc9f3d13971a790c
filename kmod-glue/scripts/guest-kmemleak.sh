# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# kmemleak in the guest tests (sourced by guest-lib.sh, and by
# lockdep-test.sh for its judgements; not run). On a kernel with kmemleak
# (the debug kernel) the guest, once its test is over and its modules are
# unloaded, has kmemleak scan twice and prints what it suspects; the host
# then tells which reports are ours. On a kernel without it (Debian's) the
# guest says so and nothing is judged.
#
# Two scans: kmemleak reports an object only if its contents did not change
# since the previous scan (so the first scan after an allocation never
# reports it) and it is at least 5 s old, so the second scan starts at
# least 6 s after the first did (a scan under TCG with KASAN and lockdep
# takes longer than that by itself, so there is usually no pause).
# KMEMLEAK_SCAN=0 leaves the scans out (a boot that tests something else).
#
# A report's backtrace is recorded at allocation but printed after the
# unload, when the kernel can no longer name frames of an unloaded module
# (they print as bare addresses). So on a kernel with kmemleak the guest's
# rmmod (a shell function in front of busybox's) first prints where each
# text section of the module was loaded, "GUEST-SECTION <module> <section>
# <address>" (kept out of the "GUEST: " lines the tests echo), and
# kmemleak_annotate maps bare addresses back to <function>+<offset>
# [<module>] with the module's .ko.

# Modules whose leaks fail a test; the others' reports are only printed.
KMEMLEAK_OWN_MODULES=${KMEMLEAK_OWN_MODULES:-hfi1_tid_selftest hfi1}

# kmemleak_guest_prologue: guest shell lines for /init before the test.
kmemleak_guest_prologue() {
    cat <<'GUEST'
mount -t debugfs none /sys/kernel/debug 2>/dev/null
rmmod() {
    if [ -e /sys/kernel/debug/kmemleak ]; then
        for m in "$@"; do
            case "$m" in -*) continue ;; esac
            grep -H . /sys/module/$m/sections/.*text* 2>/dev/null |
                busybox sed -n "s|^/sys/module/$m/sections/\([^:]*\):\(0x[0-9a-f]*\)\$|GUEST-SECTION $m \1 \2|p"
        done
    fi
    busybox rmmod "$@"
}
GUEST
}

# kmemleak_guest_epilogue: guest shell lines for /init after the test.
kmemleak_guest_epilogue() {
    if [ "${KMEMLEAK_SCAN:-1}" = 0 ]; then
        echo 'echo "GUEST: kmemleak scan skipped"'
        return
    fi
    cat <<'GUEST'
if [ -w /sys/kernel/debug/kmemleak ]; then
    read t1 _ </proc/uptime
    echo scan >/sys/kernel/debug/kmemleak
    read t2 _ </proc/uptime
    pause=$(( ${t1%.*} + 6 - ${t2%.*} ))
    [ "$pause" -le 0 ] || sleep "$pause"
    echo scan >/sys/kernel/debug/kmemleak
    read t3 _ </proc/uptime
    echo "GUEST: kmemleak: two scans in $(( ${t3%.*} - ${t1%.*} )) s (guest clock)"
    echo "GUEST: kmemleak begin"
    cat /sys/kernel/debug/kmemleak
    echo "GUEST: kmemleak end"
else
    echo "GUEST: kmemleak not available"
fi
GUEST
}

# kmemleak_symbol <ko> <section> <offset>: "<function>+0x<off>/0x<size>"
# of the function of <ko> that holds <offset> (decimal) in <section>, or
# "<section>+0x<offset>" if none does.
kmemleak_symbol() {
    local ko=$1 sec=$2 off=$3
    {
        readelf -SW "$ko" | sed -nE 's/^ *\[ *([0-9]+)\] +([^ ]+) .*/S \1 \2/p'
        readelf -sW "$ko" | awk '$4 == "FUNC" { print "F", $7, $2, $3, $8 }'
    } | awk -v sec="$sec" -v off="$off" '
        function hex(s,  i, v) {
            v = 0; s = tolower(s); sub(/^0x/, "", s)
            for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
            return v
        }
        function num(s) { return (s ~ /^0x/) ? hex(s) : s + 0 }
        $1 == "S" && $3 == sec { idx = $2 }
        $1 == "F" && $2 == idx && !found { v = hex($3); n = num($4)
            if (v <= off && off < v + n) { printf "%s+0x%x/0x%x\n", $5, off - v, n; found = 1 } }
        END { if (!found) printf "%s+0x%x\n", sec, off }'
}

# kmemleak_annotate <log> <ko>...: every report between "GUEST: kmemleak
# begin" and "end", each headed "kmemleak report N: ours (<modules>)" or
# "kmemleak report N: other", with bare frame addresses that fall in a
# recorded section of one of the given modules named.
kmemleak_annotate() {
    local log=$1 ko name mod sec addr size line a n=0 hit=0 i report="" owners=""
    shift
    local -A ko_of=()
    local -a s_mod=() s_sec=() s_lo=() s_hi=()
    for ko; do
        name=$(basename "$ko" .ko)
        ko_of[${name//-/_}]=$ko
    done
    while read -r _ mod sec addr; do
        ko=${ko_of[$mod]:-}
        [ -n "$ko" ] || continue
        size=$(readelf -SW "$ko" | awk -v s="$sec" '{ sub(/^ *\[ *[0-9]+\] +/, "") } $1 == s && !size { size = $5 } END { print size }')
        [ -n "$size" ] || continue
        s_mod+=("$mod") s_sec+=("$sec") s_lo+=($((addr))) s_hi+=($((addr + 16#$size)))
    done < <(grep -E '^GUEST-SECTION [^ ]+ [^ ]+ 0x[0-9a-f]+$' "$log" || true)

    _kmemleak_flush() {
        [ -n "$report" ] || return 0
        if [ -n "$owners" ]; then
            echo "kmemleak report $n: ours ($owners)"
        else
            echo "kmemleak report $n: other"
        fi
        printf '%s' "$report"
        report="" owners=""
    }
    _kmemleak_own() {
        case " $KMEMLEAK_OWN_MODULES " in *" $1 "*) case " $owners " in *" $1 "*) ;; *) owners=${owners:+$owners }$1 ;; esac ;; esac
    }
    while IFS= read -r line; do
        case "$line" in
        "GUEST: kmemleak begin") hit=1; continue ;;
        "GUEST: kmemleak end") break ;;
        esac
        [ "$hit" = 1 ] || continue
        if [[ "$line" == "unreferenced object "* ]]; then
            _kmemleak_flush
            n=$((n + 1))
        fi
        [ "$n" -gt 0 ] || continue
        if [[ "$line" =~ \]\ .*\ \[([A-Za-z0-9_]+)\]$ ]]; then
            _kmemleak_own "${BASH_REMATCH[1]}"
        elif [[ "$line" =~ \]\ (0x[0-9a-f]+)$ ]]; then
            a=$((BASH_REMATCH[1]))
            for i in "${!s_lo[@]}"; do
                if [ "$a" -ge "${s_lo[$i]}" ] && [ "$a" -lt "${s_hi[$i]}" ]; then
                    line+=" = $(kmemleak_symbol "${ko_of[${s_mod[$i]}]}" "${s_sec[$i]}" $((a - s_lo[i]))) [${s_mod[$i]}] (unloaded)"
                    _kmemleak_own "${s_mod[$i]}"
                    break
                fi
            done
        fi
        report+="    $line"$'\n'
    done <"$log"
    _kmemleak_flush
}

# guest_check_kmemleak: after guest_boot, prints every kmemleak report and
# fails (guest_err) on any that names one of KMEMLEAK_OWN_MODULES.
guest_check_kmemleak() {
    grep -q 'GUEST: kmemleak begin' "$GUEST_LOG" || return 0
    local out total ours
    out=$(kmemleak_annotate "$GUEST_LOG" "$GUEST_ROOT"/mod/*.ko)
    total=$(grep -c '^kmemleak report [0-9]*:' <<<"$out" || true)
    ours=$(grep -c '^kmemleak report [0-9]*: ours' <<<"$out" || true)
    echo "guest: kmemleak: $total suspected leaks after the test, $ours of them from $KMEMLEAK_OWN_MODULES"
    [ -z "$out" ] || printf '%s\n' "$out"
    [ "$ours" = 0 ] || guest_err "kmemleak: $ours suspected leaks from our modules (above)"
}
