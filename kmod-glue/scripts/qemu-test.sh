#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# Guest test of the self-test module: builds hfi1_tid_selftest.ko, packs it
# with a static busybox into an initramfs, boots a kernel under qemu (TCG),
# loads the module, unloads it, powers off, and judges the serial log:
#   - "hfi1_tid_selftest: N passed, 0 failed" with N > 0,
#   - a "passed" line for each of the engines' READ, WRITE and mixed runs,
#   - "hfi1_tid_selftest: unload: nothing left over",
#   - taint only O (out-of-tree) and E (unsigned) while loaded and after,
#   - no WARNING, BUG, Oops, lockdep or ODEBUG report anywhere,
#   - lockdep still on at the end (if the kernel has it).
# Nothing is loaded into the host's kernel.
#
# Environment (all optional):
#   KDIR=<build tree>         kernel build tree for the module (default:
#                             the installed Debian headers)
#   KERNEL_IMAGE=<bzImage>    kernel to boot (default: /boot/vmlinuz-<release of KDIR>)
#   GUEST_POWEROFF=poweroff|reboot   how the guest ends (reboot for a kernel
#                             without ACPI, with qemu's -no-reboot)
#   LOCKDEP_DEMO=1            build and load the lockdep-demo variant
#   MODULE=<path.ko>          use this module instead of building one
#   MODULE_ARGS="seed=..."    module parameters
#   EXPECT_FAIL=1             the verdict must report failures
#   ALLOW_REPORTS=1           do not fail on kernel reports (demonstrations)
#   KEEP_LOG=<file>           copy the serial log there
#   GUEST_WHILE_LOADED=<sh>   extra guest commands run while the module is
#                             loaded (lockdep-test.sh reads /proc/lockdep)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
glue="$(dirname "$here")"
NAME=hfi1_tid_selftest
LOCKDEP_DEMO=${LOCKDEP_DEMO:-}
MODULE_ARGS=${MODULE_ARGS:-}

# shellcheck source=guest-lib.sh
. "$here/guest-lib.sh"

if [ -z "${MODULE:-}" ]; then
    make -C "$glue" KDIR="$KDIR" LOCKDEP_DEMO="$LOCKDEP_DEMO"
    if [ "$LOCKDEP_DEMO" = 1 ]; then
        MODULE=$glue/build/kbuild-lockdep-demo/$NAME.ko
    else
        MODULE=$glue/build/kbuild/$NAME.ko
    fi
fi
[ -r "$MODULE" ] || { echo "qemu-test: no module $MODULE" >&2; exit 1; }
guest_add_module "$MODULE"

guest_boot "
if insmod /mod/$NAME.ko $MODULE_ARGS; then echo 'GUEST: insmod ok'; else echo 'GUEST: insmod failed'; fi
echo \"GUEST: taint while loaded \$(cat /proc/sys/kernel/tainted)\"
${GUEST_WHILE_LOADED:-}
if rmmod $NAME; then echo 'GUEST: rmmod ok'; else echo 'GUEST: rmmod failed'; fi
echo \"GUEST: taint after unload \$(cat /proc/sys/kernel/tainted)\"
"

grep -E "^\[ *[0-9.]+\] $NAME: |GUEST: " "$GUEST_LOG" | grep -v 'GUEST: dmesg' || true
grep -q 'GUEST: insmod ok' "$GUEST_LOG" || guest_err "insmod did not succeed"
grep -q 'GUEST: rmmod ok' "$GUEST_LOG" || guest_err "rmmod did not succeed"
guest_check_verdict "$NAME"
# The engines' READ, WRITE and mixed runs each report on a line of their own.
for phase in READ WRITE mixed; do
    grep -Eq "$NAME: $phase \(engines\): ([0-9]+) of \1 requests .* passed, " "$GUEST_LOG" ||
        guest_err "no passed line of the $phase run"
done
grep -q "$NAME: unload: nothing left over" "$GUEST_LOG" || guest_err "unload report missing or shows leftovers"
guest_check_common
guest_finish qemu-test
