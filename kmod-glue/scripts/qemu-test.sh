#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# Guest test of the self-test module: builds hfi1_tid_selftest.ko, packs it
# with a static busybox into an initramfs, boots a kernel under qemu (TCG),
# loads the module, unloads it, powers off, and judges the serial log:
#   - "hfi1_tid_selftest: N passed, 0 failed" with N > 0,
#   - "hfi1_tid_selftest: unload: nothing left over",
#   - taint only O (out-of-tree) and E (unsigned) while loaded, and the
#     same after unload,
#   - no WARNING, BUG, Oops, lockdep or ODEBUG report anywhere,
#   - lockdep still on at the end (if the kernel has it).
# Nothing is loaded into the host's kernel.
#
# Environment (all optional):
#   KDIR=<build tree>         kernel build tree for the module (default:
#                             the installed Debian headers)
#   KERNEL_IMAGE=<bzImage>    kernel to boot (default: /boot/vmlinuz-<ver of KDIR>)
#   GUEST_POWEROFF=poweroff|reboot   how the guest ends (reboot for a kernel
#                             without ACPI, with qemu's -no-reboot)
#   LOCKDEP_DEMO=1            build and load the lockdep-demo variant
#   MODULE=<path.ko>          use this module instead of building one
#   MODULE_ARGS="seed=..."    module parameters
#   EXPECT_FAIL=1             the verdict must report failures (used to show
#                             that a broken build is caught)
#   KEEP_LOG=<file>           copy the serial log there
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
glue="$(dirname "$here")"

KVER_DEFAULT=$(ls -1 /lib/modules 2>/dev/null | sort -V | tail -n1)
KDIR=${KDIR:-/lib/modules/$KVER_DEFAULT/build}
GUEST_POWEROFF=${GUEST_POWEROFF:-poweroff}
LOCKDEP_DEMO=${LOCKDEP_DEMO:-}
MODULE_ARGS=${MODULE_ARGS:-}
EXPECT_FAIL=${EXPECT_FAIL:-0}
NAME=hfi1_tid_selftest

if [ -z "${KERNEL_IMAGE:-}" ]; then
    kver=$(sed -nE 's/^#define UTS_RELEASE "(.*)"/\1/p' "$KDIR/include/generated/utsrelease.h" 2>/dev/null || true)
    [ -n "$kver" ] || kver=$KVER_DEFAULT
    KERNEL_IMAGE=/boot/vmlinuz-$kver
fi
[ -r "$KERNEL_IMAGE" ] || { echo "qemu-test: no kernel image $KERNEL_IMAGE" >&2; exit 1; }
case "$GUEST_POWEROFF" in poweroff|reboot) ;; *) echo "GUEST_POWEROFF: poweroff or reboot" >&2; exit 1;; esac

if [ -z "${MODULE:-}" ]; then
    make -C "$glue" KDIR="$KDIR" LOCKDEP_DEMO="$LOCKDEP_DEMO"
    if [ "$LOCKDEP_DEMO" = 1 ]; then
        MODULE=$glue/build/kbuild-lockdep-demo/$NAME.ko
    else
        MODULE=$glue/build/kbuild/$NAME.ko
    fi
fi
[ -r "$MODULE" ] || { echo "qemu-test: no module $MODULE" >&2; exit 1; }

work=$(mktemp -d /var/tmp/hfi1-tid-qemu.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,dev,proc,sys,tmp}
busybox=$(command -v busybox)
file -L "$busybox" | grep -q 'statically linked' || { echo "qemu-test: busybox is not static (install busybox-static)" >&2; exit 1; }
cp "$busybox" "$root/bin/busybox"
for app in sh mount insmod rmmod dmesg cat grep echo poweroff reboot sleep; do
    ln -s busybox "$root/bin/$app"
done
cp "$MODULE" "$root/$NAME.ko"
cat >"$root/init" <<INIT
#!/bin/sh
mount -t proc none /proc
mount -t sysfs none /sys
mount -t devtmpfs none /dev 2>/dev/null
dmesg -n 1
echo "GUEST: taint before load \$(cat /proc/sys/kernel/tainted)"
if insmod /$NAME.ko $MODULE_ARGS; then echo "GUEST: insmod ok"; else echo "GUEST: insmod failed"; fi
echo "GUEST: taint while loaded \$(cat /proc/sys/kernel/tainted)"
if rmmod $NAME; then echo "GUEST: rmmod ok"; else echo "GUEST: rmmod failed"; fi
echo "GUEST: taint after unload \$(cat /proc/sys/kernel/tainted)"
if [ -r /proc/lockdep_stats ]; then
    echo "GUEST: lockdep \$(grep 'debug_locks:' /proc/lockdep_stats)"
fi
echo "GUEST: dmesg begin"
dmesg
echo "GUEST: dmesg end"
$GUEST_POWEROFF -f
INIT
chmod +x "$root/init"
mknod "$root/dev/console" c 5 1 2>/dev/null || true
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.cpio.gz"

log=$work/serial.log
echo "qemu-test: booting $KERNEL_IMAGE with $(basename "$MODULE")"
start=$(date +%s)
timeout -k 10 300 qemu-system-x86_64 -accel tcg -m 512 -smp 1 -nographic -no-reboot \
    -kernel "$KERNEL_IMAGE" -initrd "$work/initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1 quiet oops=panic" </dev/null >"$log" 2>&1 || true
echo "qemu-test: guest ran $(( $(date +%s) - start )) s"
tr -d '\r' <"$log" >"$log.txt"
[ -z "${KEEP_LOG:-}" ] || cp "$log.txt" "$KEEP_LOG"

fail=0
err() { echo "qemu-test: FAIL: $*" >&2; fail=1; }

grep -E "^\[ *[0-9.]+\] $NAME: |GUEST: " "$log.txt" | grep -v 'dmesg' || true

grep -q 'GUEST: insmod ok' "$log.txt" || err "insmod did not succeed"
grep -q 'GUEST: rmmod ok' "$log.txt" || err "rmmod did not succeed"
verdict=$(grep -Eo "$NAME: [0-9]+ passed, [0-9]+ failed" "$log.txt" | tail -n1 || true)
if [ -z "$verdict" ]; then
    err "no verdict line"
else
    npass=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/' <<<"$verdict")
    nfail=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/' <<<"$verdict")
    if [ "$EXPECT_FAIL" = 1 ]; then
        [ "$nfail" -gt 0 ] || err "expected failures, verdict: $verdict"
    else
        [ "$nfail" -eq 0 ] && [ "$npass" -gt 0 ] || err "verdict: $verdict"
    fi
fi
grep -q "$NAME: unload: nothing left over" "$log.txt" || err "unload report missing or shows leftovers"

# Taint: O (4096) and E (8192) are expected for our module, nothing else.
t0=$(sed -nE 's/.*GUEST: taint before load ([0-9]+).*/\1/p' "$log.txt")
t1=$(sed -nE 's/.*GUEST: taint while loaded ([0-9]+).*/\1/p' "$log.txt")
t2=$(sed -nE 's/.*GUEST: taint after unload ([0-9]+).*/\1/p' "$log.txt")
[ "$t0" = 0 ] || err "kernel tainted before load: '$t0'"
for t in "$t1" "$t2"; do
    if [ -z "$t" ] || [ $(( t & ~(4096 | 8192) )) -ne 0 ] || [ $(( t & 4096 )) -eq 0 ]; then
        err "unexpected taint '$t' (want only O and E)"
    fi
done
if grep -q 'GUEST: lockdep' "$log.txt"; then
    grep -Eq 'GUEST: lockdep +debug_locks: +1' "$log.txt" || err "lockdep switched itself off"
fi
if [ "${ALLOW_REPORTS:-0}" != 1 ]; then
    bad=$(grep -E 'WARNING:|BUG:|Oops|Call Trace|possible circular|inconsistent lock state|Invalid wait context|ODEBUG:|Kernel panic|Rust panic|\bLEAK\b|check failed' "$log.txt" || true)
    [ -z "$bad" ] || err "kernel reports in the log:
$bad"
fi
grep -q "GUEST: dmesg end" "$log.txt" || err "guest did not reach the end of its script"

if [ "$fail" != 0 ]; then
    echo "---- serial log (tail) ----" >&2
    tail -n 60 "$log.txt" >&2
    exit 1
fi
echo "qemu-test: PASS ($verdict)"
