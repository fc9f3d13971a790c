# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# Shared by qemu-test.sh and hfi1-test.sh (sourced, not run): builds a
# busybox initramfs around a guest script, boots it under qemu (TCG) and
# checks the serial log for what every guest test requires. Nothing here
# touches the host's kernel.
#
# Inputs (environment): KDIR, KERNEL_IMAGE, GUEST_POWEROFF (see qemu-test.sh).

# kmemleak's scan after the test and the judgement of its reports.
# shellcheck source=guest-kmemleak.sh
. "$(dirname "${BASH_SOURCE[0]}")/guest-kmemleak.sh"

KVER_DEFAULT=$(ls -1 /lib/modules 2>/dev/null | sort -V | tail -n1)
KDIR=${KDIR:-/lib/modules/$KVER_DEFAULT/build}
GUEST_POWEROFF=${GUEST_POWEROFF:-poweroff}
case "$GUEST_POWEROFF" in poweroff|reboot) ;; *) echo "GUEST_POWEROFF: poweroff or reboot" >&2; exit 1;; esac

# The release of the kernel KDIR builds for (Debian's headers' Makefile
# reports the upstream version, so read utsrelease.h).
guest_kver() {
    local v
    v=$(sed -nE 's/^#define UTS_RELEASE "(.*)"/\1/p' "$KDIR/include/generated/utsrelease.h" 2>/dev/null || true)
    echo "${v:-$KVER_DEFAULT}"
}

if [ -z "${KERNEL_IMAGE:-}" ]; then
    KERNEL_IMAGE=/boot/vmlinuz-$(guest_kver)
fi
[ -r "$KERNEL_IMAGE" ] || { echo "guest: no kernel image $KERNEL_IMAGE" >&2; exit 1; }

GUEST_WORK=$(mktemp -d /var/tmp/hfi1-tid-guest.XXXXXX)
trap 'rm -rf "$GUEST_WORK"' EXIT
GUEST_ROOT=$GUEST_WORK/root
mkdir -p "$GUEST_ROOT"/{bin,dev,proc,sys,tmp,mod}

# guest_add_module <file.ko>: copies a module (decompressing .ko.xz/.ko.zst).
guest_add_module() {
    local f=$1 b
    b=$(basename "$f")
    case "$f" in
        *.ko.xz) xz -dc "$f" >"$GUEST_ROOT/mod/${b%.xz}" ;;
        *.ko.zst) zstd -qdc "$f" >"$GUEST_ROOT/mod/${b%.zst}" ;;
        *) cp "$f" "$GUEST_ROOT/mod/$b" ;;
    esac
}

# guest_boot <body of /init after the mounts>: packs the initramfs, boots,
# leaves the CR-free serial log in $GUEST_LOG.
guest_boot() {
    local busybox
    busybox=$(command -v busybox)
    file -L "$busybox" | grep -q 'statically linked' ||
        { echo "guest: busybox is not static (install busybox-static)" >&2; exit 1; }
    cp "$busybox" "$GUEST_ROOT/bin/busybox"
    for app in sh mount insmod rmmod lsmod dmesg cat grep echo poweroff reboot sleep; do
        ln -sf busybox "$GUEST_ROOT/bin/$app"
    done
    {
        echo '#!/bin/sh'
        echo 'mount -t proc none /proc'
        echo 'mount -t sysfs none /sys'
        echo 'mount -t devtmpfs none /dev 2>/dev/null'
        echo 'dmesg -n 1'
        kmemleak_guest_prologue
        echo 'echo "GUEST: taint before load $(cat /proc/sys/kernel/tainted)"'
        echo "$1"
        kmemleak_guest_epilogue
        echo 'if [ -r /proc/lockdep_stats ]; then echo "GUEST: lockdep $(grep debug_locks: /proc/lockdep_stats)"; fi'
        echo 'echo "GUEST: dmesg begin"'
        echo 'dmesg'
        echo 'echo "GUEST: dmesg end"'
        echo "$GUEST_POWEROFF -f"
    } >"$GUEST_ROOT/init"
    chmod +x "$GUEST_ROOT/init"
    mknod "$GUEST_ROOT/dev/console" c 5 1 2>/dev/null || true
    (cd "$GUEST_ROOT" && find . | cpio -o -H newc --quiet | gzip -1) >"$GUEST_WORK/initramfs.cpio.gz"
    local start
    start=$(date +%s)
    echo "guest: booting $KERNEL_IMAGE"
    timeout -k 10 "${GUEST_TIMEOUT:-300}" qemu-system-x86_64 -accel tcg -m 512 -smp "${GUEST_SMP:-2}" -nographic -no-reboot \
        -kernel "$KERNEL_IMAGE" -initrd "$GUEST_WORK/initramfs.cpio.gz" \
        -append "console=ttyS0 panic=-1 quiet" </dev/null >"$GUEST_WORK/serial.raw" 2>&1 || true
    echo "guest: ran $(( $(date +%s) - start )) s"
    GUEST_LOG=$GUEST_WORK/serial.log
    tr -d '\r' <"$GUEST_WORK/serial.raw" >"$GUEST_LOG"
    [ -z "${KEEP_LOG:-}" ] || cp "$GUEST_LOG" "$KEEP_LOG"
}

GUEST_FAIL=0
guest_err() { echo "guest: FAIL: $*" >&2; GUEST_FAIL=1; }

# guest_check_verdict <name>: "<name>: N passed, M failed" with N > 0 and
# M = 0 (or M > 0 with EXPECT_FAIL=1).
guest_check_verdict() {
    local name=$1 verdict npass nfail
    verdict=$(grep -Eo "$name: [0-9]+ passed, [0-9]+ failed" "$GUEST_LOG" | tail -n1 || true)
    if [ -z "$verdict" ]; then
        guest_err "no verdict line from $name"
        return
    fi
    npass=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/' <<<"$verdict")
    nfail=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/' <<<"$verdict")
    if [ "${EXPECT_FAIL:-0}" = 1 ]; then
        [ "$nfail" -gt 0 ] || guest_err "expected failures, verdict: $verdict"
    else
        { [ "$nfail" -eq 0 ] && [ "$npass" -gt 0 ]; } || guest_err "verdict: $verdict"
    fi
    GUEST_VERDICT=$verdict
}

# guest_check_common: taint lines (only O and E, O present while loaded),
# lockdep still on, no kernel report (UBSAN's included), no kmemleak report
# naming our modules, and the guest reached its end.
guest_check_common() {
    local t0 t
    t0=$(sed -nE 's/.*GUEST: taint before load ([0-9]+).*/\1/p' "$GUEST_LOG")
    [ "$t0" = 0 ] || guest_err "kernel tainted before load: '$t0'"
    while read -r t; do
        if [ -z "$t" ] || [ $(( t & ~(4096 | 8192) )) -ne 0 ] || [ $(( t & 4096 )) -eq 0 ]; then
            guest_err "unexpected taint '$t' (want only O and E)"
        fi
    done < <(sed -nE 's/.*GUEST: taint (while loaded|after unload) ([0-9]+).*/\2/p' "$GUEST_LOG")
    if grep -q 'GUEST: lockdep' "$GUEST_LOG"; then
        grep -Eq 'GUEST: lockdep +debug_locks: +1' "$GUEST_LOG" || guest_err "lockdep switched itself off"
    fi
    if [ "${ALLOW_REPORTS:-0}" != 1 ]; then
        local bad
        bad=$(grep -E 'WARNING:|BUG:|Oops|Call Trace|possible circular|inconsistent lock state|Invalid wait context|ODEBUG:|Kernel panic|Rust panic|UBSAN:|\bLEAK\b|check failed' "$GUEST_LOG" || true)
        [ -z "$bad" ] || guest_err "kernel reports in the log:
$bad"
    fi
    guest_check_kmemleak
    grep -q "GUEST: dmesg end" "$GUEST_LOG" || guest_err "guest did not reach the end of its script"
}

# guest_finish <what>: prints the log tail on failure and exits non-zero.
guest_finish() {
    if [ "$GUEST_FAIL" != 0 ]; then
        echo "---- serial log (tail) ----" >&2
        tail -n 60 "$GUEST_LOG" >&2
        exit 1
    fi
    echo "$1: PASS (${GUEST_VERDICT:-})"
}
