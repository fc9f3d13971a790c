#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# The kernel module's self-test under real lockdep, KASAN and debug-objects,
# and proof that lockdep sees our locks. Boots (qemu TCG, never the host's
# kernel):
#
#   debian  the full self-test on Debian's kernel (qemu-test.sh as is);
#           skipped with --debug-only
#   debug   the full self-test on the debug kernel from debug-kernel.sh
#           (built once, then reused from /var/cache/hfi1-tid): the log must
#           show lockdep and KASAN active, no lockdep, KASAN, debug-objects
#           or sleep-in-atomic report, and debug_locks still 1 at the end
#   demo    the LOCKDEP_DEMO=1 variant on the debug kernel: the module also
#           takes an exp_lock and then an s_lock of the kernel platform
#           (KernelSpinLock), going around the lock-order types through an
#           unsafe hook (src/lockdep_demo.rs); the log
#           must hold lockdep's circular-dependency report naming both lock
#           classes, and nothing else
#
# While the module is loaded the boots list our classes from /proc/lockdep
# ("GUEST: lockdep class/dep ..."): the self-test (wait queues and the
# stateful engine on the kernel platform's spinlocks and a real workqueue)
# must have made lockdep record s_lock -> exp_lock, and never the reverse.
#
# Usage: lockdep-test.sh [--debug-only]
# Logs stay in kmod-glue/build/lockdep-test/<boot>.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
glue="$(dirname "$here")"
name=hfi1_tid_selftest
s_class=hfi1_tid_qp_s_lock
exp_class=hfi1_tid_rcd_exp_lock

debian=1
case "${1:-}" in
"") ;;
--debug-only) debian=0 ;;
*)
	echo "usage: $0 [--debug-only]" >&2
	exit 2
	;;
esac

logs="$glue/build/lockdep-test"
mkdir -p "$logs"
say() { printf 'lockdep-test: %s\n' "$*"; }
fail=0
err() {
	printf 'lockdep-test: FAIL: %s\n' "$*" >&2
	fail=1
}

# Kernel reports none of the boots may show (the demo allows exactly its
# own circular-dependency report).
reports='WARNING:|BUG:|Oops|Call Trace|possible circular|inconsistent lock state|Invalid wait context|possible recursive locking|DEBUG_LOCKS_WARN_ON|turning off the locking correctness validator|ODEBUG:|KASAN|sleeping function called from invalid context|scheduling while atomic|Kernel panic|Rust panic'

# Guest commands run while the module is loaded: our lock classes and their
# direct dependencies as lockdep recorded them.
probe=$(
	cat <<'PROBE'
if [ -r /proc/lockdep ]; then
busybox awk '/ FD: *[0-9]+ BD: *[0-9]+ / { c = ($NF ~ /^hfi1_tid_/) ? $NF : ""; if (c != "") print "GUEST: lockdep class " c; next }
/^ -> / && c != "" { print "GUEST: lockdep dep " c " -> " $NF }' /proc/lockdep
else echo "GUEST: no /proc/lockdep"; fi
PROBE
)

# judge_clean <log>: the debug kernel's checkers ran and found nothing.
judge_clean() {
	local log=$1 ok=0 bad
	grep -q 'Lock dependency validator' "$log" || { echo "lockdep is not active (no 'Lock dependency validator' at boot)"; ok=1; }
	grep -q 'KernelAddressSanitizer initialized' "$log" || { echo "KASAN is not active"; ok=1; }
	grep -Eq "$name: [1-9][0-9]* passed, 0 failed" "$log" || { echo "no clean verdict line"; ok=1; }
	grep -Eq 'GUEST: lockdep +debug_locks: +1' "$log" || { echo "debug_locks is not 1 at the end"; ok=1; }
	grep -q "GUEST: lockdep dep $s_class -> $exp_class" "$log" ||
		{ echo "lockdep recorded no $s_class -> $exp_class dependency"; ok=1; }
	! grep -q "GUEST: lockdep dep $exp_class -> $s_class" "$log" || { echo "lockdep recorded $exp_class -> $s_class"; ok=1; }
	# Boot-time messages are not reports: only look past the kernel's own
	# KASAN banner for the KASAN pattern.
	bad=$(grep -Ev 'kasan: KernelAddressSanitizer initialized' "$log" | grep -E "$reports" || true)
	[[ -z "$bad" ]] || { echo "kernel reports in the log:"; echo "$bad" | head -n 20; ok=1; }
	return $ok
}

# judge_demo <log>: exactly lockdep's circular-dependency report, naming
# our two lock classes and our module, and the self-test still passed.
judge_demo() {
	local log=$1 ok=0 report others
	grep -q 'Lock dependency validator' "$log" || { echo "lockdep is not active"; ok=1; }
	grep -Eq "$name: [1-9][0-9]* passed, 0 failed" "$log" || { echo "no clean verdict line"; ok=1; }
	grep -q "$name: lockdep demo: exp_lock then s_lock" "$log" || { echo "the demo did not run"; ok=1; }
	# The report: from lockdep's banner to its backtrace.
	report=$(sed -n '/WARNING: possible circular locking dependency detected/,/stack backtrace:/p' "$log")
	if [[ -z "$report" ]]; then
		echo "no 'possible circular locking dependency' report"
		ok=1
	else
		for want in "$s_class" "$exp_class" "\[$name\]"; do
			grep -q -- "$want" <<<"$report" || { echo "the report does not name $want"; ok=1; }
		done
		# The inversion as lockdep saw it: exp_lock held, s_lock wanted, and
		# both classes in the dependency chain it already knew.
		grep -A1 'is trying to acquire lock:' <<<"$report" | grep -q "($s_class)" ||
			{ echo "the report does not show $s_class being acquired"; ok=1; }
		grep -A1 'already holding lock:' <<<"$report" | grep -q "($exp_class)" ||
			{ echo "the report does not show $exp_class held"; ok=1; }
		for want in "$s_class" "$exp_class"; do
			grep -Eq -- "-> #[0-9]+ \($want\)" <<<"$report" ||
				{ echo "the report's dependency chain does not list $want"; ok=1; }
		done
	fi
	for want in 'GUEST: insmod ok' 'GUEST: rmmod ok' "$name: unload: nothing left over"; do
		grep -q -- "$want" "$log" || { echo "missing '$want'"; ok=1; }
	done
	# Lockdep switches itself off after its first report.
	grep -Eq 'GUEST: lockdep +debug_locks: +0' "$log" || { echo "debug_locks did not drop to 0 after the report"; ok=1; }
	# Anything else, outside the report and its backtrace, is a failure.
	others=$(sed '/WARNING: possible circular locking dependency detected/,/<\/TASK>/d' "$log" |
		grep -Ev 'kasan: KernelAddressSanitizer initialized' | grep -E "$reports" || true)
	[[ -z "$others" ]] || { echo "other kernel reports in the log:"; echo "$others" | head -n 20; ok=1; }
	return $ok
}

# 1. The debug kernel (build or reuse).
eval "$(bash "$here/debug-kernel.sh")"
for opt in CONFIG_PROVE_LOCKING=y CONFIG_DEBUG_LOCK_ALLOC=y CONFIG_DEBUG_SPINLOCK=y \
	CONFIG_DEBUG_ATOMIC_SLEEP=y CONFIG_DEBUG_OBJECTS_WORK=y CONFIG_KASAN=y; do
	grep -qxF "$opt" "$KDIR/.config" || { err "debug kernel lacks $opt"; exit 1; }
done

# 2. Debian's kernel, as the kmod-glue test does it.
if [[ $debian == 1 ]]; then
	say "boot debian: self-test on Debian's kernel"
	if KEEP_LOG="$logs/debian.log" bash "$here/qemu-test.sh"; then
		say "boot debian: PASS"
	else
		err "boot debian: qemu-test.sh failed"
	fi
fi

# 3. The debug kernel, normal module. A separate kbuild directory per kernel
#    and variant, so no module built for one is reused for another; one
#    Rust target directory for all (the Rust object does not depend on the
#    kernel, and cargo keeps each feature set's build, so nothing is
#    rebuilt twice).
rust_target="$glue/build/rust"
say "boot debug: self-test on the debug kernel"
make -s -C "$glue" KDIR="$KDIR" BUILD="$glue/build/debug-kernel" RUST_TARGET_DIR="$rust_target" module
if KDIR="$KDIR" KERNEL_IMAGE="$KERNEL_IMAGE" GUEST_POWEROFF=reboot \
	MODULE="$glue/build/debug-kernel/kbuild/$name.ko" KEEP_LOG="$logs/debug.log" \
	GUEST_WHILE_LOADED="$probe" bash "$here/qemu-test.sh"; then
	if why=$(judge_clean "$logs/debug.log"); then
		say "boot debug: PASS (lockdep and KASAN active, no report, debug_locks 1 at the end)"
	else
		err "boot debug: $why"
	fi
else
	err "boot debug: qemu-test.sh failed"
fi

# 4. The deliberate inversion, in its own boot. qemu-test.sh must fail on
#    this log (it holds a report and lockdep ends switched off), so its exit
#    status is only shown; the judgement is judge_demo's.
say "boot demo: deliberate exp_lock -> s_lock inversion on the debug kernel"
# LOCKDEP_DEMO=1 adds kbuild/lockdep_demo.c and the Rust feature lockdep-demo.
make -s -C "$glue" KDIR="$KDIR" BUILD="$glue/build/lockdep-demo" RUST_TARGET_DIR="$rust_target" \
	LOCKDEP_DEMO=1 module
demo_rc=0
KDIR="$KDIR" KERNEL_IMAGE="$KERNEL_IMAGE" GUEST_POWEROFF=reboot ALLOW_REPORTS=1 \
	MODULE="$glue/build/lockdep-demo/kbuild-lockdep-demo/$name.ko" KEEP_LOG="$logs/demo.log" \
	bash "$here/qemu-test.sh" >"$logs/demo.qemu-test.out" 2>&1 || demo_rc=$?
say "boot demo: qemu-test.sh exit status $demo_rc (expected non-zero: lockdep is off at the end)"
# Its other checks (verdict, taint, unload, end of script) must still pass:
# the only complaint allowed is that lockdep switched itself off.
unexpected=$(grep -E ': FAIL: ' "$logs/demo.qemu-test.out" | grep -v 'lockdep switched itself off' || true)
[[ -z "$unexpected" ]] || err "boot demo: qemu-test.sh also failed on: $unexpected"
if [[ ! -s "$logs/demo.log" ]]; then
	err "boot demo: no serial log"
elif why=$(judge_demo "$logs/demo.log"); then
	say "boot demo: PASS (lockdep reported the inversion, naming $s_class and $exp_class)"
	# The first copy of the report (the console and dmesg both carry it).
	awk '/WARNING: possible circular locking dependency/ { on = 1 } on { print } /other info that might help/ { if (on) exit }' \
		"$logs/demo.log" | grep -E 'circular|trying to acquire|already holding|at: |-> #'
	# The clean judgement must reject this log, or it could never fail.
	if judge_clean "$logs/demo.log" >/dev/null; then
		err "the clean-log judgement accepted the demo log"
	else
		say "self-check: the clean-log judgement rejects the demo log"
	fi
else
	err "boot demo: $why"
fi

if [[ $fail != 0 ]]; then
	say "FAILED (logs in $logs)"
	exit 1
fi
say "PASS"
