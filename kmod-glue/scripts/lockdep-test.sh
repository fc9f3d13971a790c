#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# The kernel modules under real lockdep, KASAN, debug-objects, kmemleak and
# UBSAN, and proof that lockdep sees our locks and that kmemleak and UBSAN
# see our C. Boots (qemu TCG, never the host's kernel):
#
#   debian  the full self-test on Debian's kernel (qemu-test.sh as is);
#           skipped with --debug-only
#   debug   the full self-test on the debug kernel from debug-kernel.sh
#           (built once, then reused from /var/cache/hfi1-tid): the log must
#           show lockdep, KASAN and kmemleak active, no lockdep, KASAN,
#           debug-objects, sleep-in-atomic or UBSAN report, debug_locks
#           still 1 at the end, and kmemleak's scan after the unload must
#           name nothing of ours (judge_checkers); the READ, WRITE and
#           mixed runs must each pass (qemu-test.sh)
#   hfi1    the rebuilt hfi1.ko, built against the debug kernel, with the
#           debug kernel's own ib_core, ib_uverbs, rdmavt and i2c-algo-bit
#           (hfi1-test.sh, TID_DIFF_CASES cases, default 20000, and
#           TID_SDIFF_OPS stateful operations, default 100000): the same
#           checks, and lockdep must have recorded the driver's own
#           &qp->s_lock -> &rcd->exp_lock (the classes of the twin worlds'
#           locks, initialised as the driver initialises them), taken by
#           the driver's C and the routed Rust alike, and never the reverse
#   demo    the LOCKDEP_DEMO=1 variant on the debug kernel: the module also
#           takes an exp_lock and then an s_lock of the kernel platform
#           (KernelSpinLock), going around the lock-order types through an
#           unsafe hook (src/lockdep_demo.rs); the log
#           must hold lockdep's circular-dependency report naming both lock
#           classes, and nothing else
#   leak    the KMEMLEAK_DEMO=1 UBSAN_DEMO=1 variant loaded with
#           kmemleak_demo=1 ubsan_demo=40: it loses one kmalloc'ed block and
#           shifts a 32-bit value by 40 in C (kbuild/kmemleak_demo.c,
#           kbuild/ubsan_demo.c); kmemleak's scan after the unload must
#           report that block with a frame of the demo in our module, the
#           log must hold UBSAN's shift-out-of-bounds report in
#           ubsan_demo.c, and nothing else
#
# UBSAN, like KASAN, instruments C only: the kernel, the C glue and the
# driver's C. The Rust object is built outside kbuild without sanitizers;
# its memcpy/memset calls still go through the kernel's checked versions.
#
# While the module is loaded the boots list our classes from /proc/lockdep
# ("GUEST: lockdep class/dep ..."): the self-test (wait queues and the
# stateful engine on the kernel platform's spinlocks and a real workqueue)
# must have made lockdep record s_lock -> exp_lock, and never the reverse;
# the WRITE runs' responders, entered under their r_lock, r_lock -> s_lock
# and the chain r_lock -> s_lock -> exp_lock (from /proc/lockdep_chains,
# "GUEST: lockdep chain ..."), and nothing back to r_lock.
#
# Usage: lockdep-test.sh [--debug-only]
# Environment: TID_DIFF_CASES (default 20000) and TID_SDIFF_OPS (default
# 100000) for the hfi1 boot.
# Logs stay in kmod-glue/build/lockdep-test/<boot>.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
glue="$(dirname "$here")"
name=hfi1_tid_selftest
r_class=hfi1_tid_qp_r_lock
s_class=hfi1_tid_qp_s_lock
exp_class=hfi1_tid_rcd_exp_lock
# The driver's classes, as lockdep names them (with a #N when another
# class has the same name).
sd_s_class='&qp->s_lock(#[0-9]+)?'
sd_exp_class='&rcd->exp_lock(#[0-9]+)?'

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
# kmemleak_annotate: names the frames of unloaded modules in kmemleak's reports.
# shellcheck source=guest-kmemleak.sh
. "$here/guest-kmemleak.sh"
fail=0
err() {
	printf 'lockdep-test: FAIL: %s\n' "$*" >&2
	fail=1
}

# Kernel reports none of the boots may show (the demo allows exactly its
# own circular-dependency report).
reports='WARNING:|BUG:|Oops|Call Trace|possible circular|inconsistent lock state|Invalid wait context|possible recursive locking|DEBUG_LOCKS_WARN_ON|turning off the locking correctness validator|ODEBUG:|KASAN|UBSAN:|sleeping function called from invalid context|scheduling while atomic|Kernel panic|Rust panic'

# Guest commands run while the module is loaded: our lock classes and their
# direct dependencies as lockdep recorded them.
probe=$(
	cat <<'PROBE'
if [ -r /proc/lockdep ]; then
busybox awk '/ FD: *[0-9]+ BD: *[0-9]+ / { c = ($NF ~ /^(hfi1_tid_|&qp->s_lock|&rcd->exp_lock)/) ? $NF : ""; if (c != "") print "GUEST: lockdep class " c; next }
/^ -> / && c != "" { print "GUEST: lockdep dep " c " -> " $NF }' /proc/lockdep
else echo "GUEST: no /proc/lockdep"; fi
PROBE
)
# ...and, for the self-test boot, every lock chain that holds our
# r_lock ("GUEST: lockdep chain A -> B -> ..."), from /proc/lockdep_chains.
chain_probe=$(
	cat <<'PROBE'
if [ -r /proc/lockdep_chains ]; then
busybox awk 'function out() { if (c ~ /hfi1_tid_qp_r_lock/) print "GUEST: lockdep chain " c; c = "" }
/^irq_context:/ { out(); next }
/^\[/ { c = c (c == "" ? "" : " -> ") $NF }
END { out() }' /proc/lockdep_chains | busybox sort -u
fi
PROBE
)

# kmemleak_active <log>: kmemleak came up at boot and the guest's scan ran.
kmemleak_active() {
	local log=$1 ok=0
	grep -Eq 'kmemleak: Kernel memory leak detector initialized \(mem pool available: [1-9][0-9]*\)' "$log" ||
		{ echo "kmemleak is not active (no 'Kernel memory leak detector initialized' at boot)"; ok=1; }
	! grep -q 'Kernel memory leak detector disabled' "$log" || { echo "kmemleak switched itself off"; ok=1; }
	grep -q 'GUEST: kmemleak end' "$log" || { echo "the guest's kmemleak scan did not run"; ok=1; }
	return $ok
}

# ubsan_hooks <module.ko>: how many distinct UBSAN handlers the module's C
# calls (0: not instrumented).
ubsan_hooks() {
	nm -u "$1" | grep -c ' __ubsan_handle_' || true
}

# judge_checkers <log> <module.ko> [<loaded.ko>...]: lockdep, KASAN and
# kmemleak were active, the module's C was built with UBSAN, and no checker
# reported anything: no kernel report (UBSAN's included), debug_locks still
# 1, and no kmemleak report naming our modules (the other modules the guest
# loaded are given so that their frames are named too).
judge_checkers() {
	local log=$1 ok=0 bad leaks
	shift
	grep -q 'Lock dependency validator' "$log" || { echo "lockdep is not active (no 'Lock dependency validator' at boot)"; ok=1; }
	grep -q 'KernelAddressSanitizer initialized' "$log" || { echo "KASAN is not active"; ok=1; }
	kmemleak_active "$log" || ok=1
	[[ $(ubsan_hooks "$1") -gt 0 ]] || { echo "$(basename "$1") calls no UBSAN handler (not instrumented)"; ok=1; }
	grep -Eq 'GUEST: lockdep +debug_locks: +1' "$log" || { echo "debug_locks is not 1 at the end"; ok=1; }
	# Boot-time messages are not reports: only look past the kernel's own
	# KASAN banner for the KASAN pattern.
	bad=$(grep -Ev 'kasan: KernelAddressSanitizer initialized' "$log" | grep -E "$reports" || true)
	[[ -z "$bad" ]] || { echo "kernel reports in the log:"; echo "$bad" | head -n 20; ok=1; }
	leaks=$(kmemleak_annotate "$log" "$@" | grep '^kmemleak report [0-9]*: ours' || true)
	[[ -z "$leaks" ]] || { echo "kmemleak reports naming our modules:"; echo "$leaks"; ok=1; }
	return $ok
}

# judge_clean <log> <module.ko>: the self-test on the debug kernel; its
# checkers ran and found nothing.
judge_clean() {
	local log=$1 ko=$2 ok=0
	judge_checkers "$log" "$ko" || ok=1
	grep -Eq "$name: [1-9][0-9]* passed, 0 failed" "$log" || { echo "no clean verdict line"; ok=1; }
	grep -q "GUEST: lockdep dep $s_class -> $exp_class" "$log" ||
		{ echo "lockdep recorded no $s_class -> $exp_class dependency"; ok=1; }
	! grep -q "GUEST: lockdep dep $exp_class -> $s_class" "$log" || { echo "lockdep recorded $exp_class -> $s_class"; ok=1; }
	# The WRITE responder's allocation on the receive path: r_lock, then
	# s_lock, then exp_lock, in one chain; never back to r_lock.
	grep -q "GUEST: lockdep dep $r_class -> $s_class" "$log" ||
		{ echo "lockdep recorded no $r_class -> $s_class dependency"; ok=1; }
	grep -q "GUEST: lockdep chain $r_class -> $s_class -> $exp_class" "$log" ||
		{ echo "lockdep recorded no chain $r_class -> $s_class -> $exp_class"; ok=1; }
	! grep -Eq "GUEST: lockdep dep ($s_class|$exp_class) -> $r_class" "$log" ||
		{ echo "lockdep recorded a dependency back to $r_class"; ok=1; }
	return $ok
}

# judge_hfi1 <log> <hfi1.ko> <loaded.ko>...: the rebuilt hfi1.ko on the
# debug kernel; its checkers ran and found nothing, and lockdep saw the
# stateful group take s_lock before exp_lock, never the reverse.
judge_hfi1() {
	local log=$1 ok=0
	judge_checkers "$@" || ok=1
	grep -Eq "GUEST: lockdep dep $sd_s_class -> $sd_exp_class" "$log" ||
		{ echo "lockdep recorded no &qp->s_lock -> &rcd->exp_lock dependency"; ok=1; }
	! grep -Eq "GUEST: lockdep dep $sd_exp_class -> $sd_s_class" "$log" ||
		{ echo "lockdep recorded &rcd->exp_lock -> &qp->s_lock"; ok=1; }
	return $ok
}

# checkers_summary <log> <module.ko> [<loaded.ko>...]: one line of what the
# checkers said.
checkers_summary() {
	local pool out total ours
	pool=$(sed -nE 's/.*kmemleak: Kernel memory leak detector initialized \(mem pool available: ([0-9]+)\).*/\1/p' "$1" | head -n1)
	out=$(kmemleak_annotate "$@")
	total=$(grep -c '^kmemleak report' <<<"$out" || true)
	ours=$(grep -c '^kmemleak report [0-9]*: ours' <<<"$out" || true)
	echo "lockdep, KASAN, kmemleak (pool $pool left at boot) active; $(basename "$2") has $(ubsan_hooks "$2") UBSAN handlers; no report; kmemleak after unload: $ours of ours, $total in all"
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

# judge_leak <log> <module.ko>: kmemleak reported the demo's lost block
# (its marker, a frame of the demo in our module) and nothing else of ours,
# UBSAN reported the demo's shift in ubsan_demo.c, the self-test still
# passed, and there is no other kernel report.
judge_leak() {
	local log=$1 ko=$2 ok=0 reports_ours ubsan others
	kmemleak_active "$log" || ok=1
	grep -Eq "$name: [1-9][0-9]* passed, 0 failed" "$log" || { echo "no clean verdict line"; ok=1; }
	grep -q "$name: kmemleak demo: [0-9]* bytes lost on purpose" "$log" || { echo "the kmemleak demo did not run"; ok=1; }
	grep -q "$name: UBSAN demo: 1u << 40, on purpose" "$log" || { echo "the UBSAN demo did not run"; ok=1; }
	for want in 'GUEST: insmod ok' 'GUEST: rmmod ok' "$name: unload: nothing left over"; do
		grep -q -- "$want" "$log" || { echo "missing '$want'"; ok=1; }
	done
	# kmemleak: exactly one report of ours, the demo's block.
	reports_ours=$(kmemleak_annotate "$log" "$ko" | awk '/^kmemleak report/ { on = ($4 == "ours") } on')
	if [[ $(grep -c '^kmemleak report' <<<"$reports_ours" || true) != 1 ]]; then
		echo "want exactly one kmemleak report naming $name, got:"
		echo "${reports_ours:-none}"
		ok=1
	else
		grep -q 'hfi1_tid kmemlea' <<<"$reports_ours" || { echo "the kmemleak report is not the demo's block (no marker)"; ok=1; }
		grep -Eq "hfi1_tid_kmemleak_demo_leak[.a-z0-9]*\+0x[0-9a-f]+/0x[0-9a-f]+ \[$name\]" <<<"$reports_ours" ||
			{ echo "the kmemleak report has no frame of hfi1_tid_kmemleak_demo_leak in $name"; ok=1; }
	fi
	# UBSAN: the report from its banner to the closing rule.
	ubsan=$(sed -n '/UBSAN: shift-out-of-bounds in/,/=====/p' "$log")
	if [[ -z "$ubsan" ]]; then
		echo "no UBSAN shift-out-of-bounds report"
		ok=1
	else
		grep -q 'UBSAN: shift-out-of-bounds in .*ubsan_demo\.c:' <<<"$ubsan" || { echo "the UBSAN report is not in ubsan_demo.c"; ok=1; }
		grep -q "shift exponent 40 is too large for 32-bit type 'unsigned int'" <<<"$ubsan" ||
			{ echo "the UBSAN report does not show the shift by 40"; ok=1; }
		grep -Eq "hfi1_tid_ubsan_demo_shift[.a-z0-9]*\+0x[0-9a-f]+/0x[0-9a-f]+ \[$name\]" <<<"$ubsan" ||
			{ echo "the UBSAN backtrace has no frame of hfi1_tid_ubsan_demo_shift in $name"; ok=1; }
	fi
	others=$(sed '/UBSAN: shift-out-of-bounds in/,/=====/d' "$log" |
		grep -Ev 'kasan: KernelAddressSanitizer initialized' | grep -E "$reports" || true)
	[[ -z "$others" ]] || { echo "other kernel reports in the log:"; echo "$others" | head -n 20; ok=1; }
	return $ok
}

# 1. The debug kernel (build or reuse).
eval "$(bash "$here/debug-kernel.sh")"
for opt in CONFIG_PROVE_LOCKING=y CONFIG_DEBUG_LOCK_ALLOC=y CONFIG_DEBUG_SPINLOCK=y \
	CONFIG_DEBUG_ATOMIC_SLEEP=y CONFIG_DEBUG_OBJECTS_WORK=y CONFIG_KASAN=y \
	CONFIG_DEBUG_KMEMLEAK=y CONFIG_UBSAN=y CONFIG_UBSAN_BOUNDS=y CONFIG_UBSAN_SHIFT=y; do
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
debug_ko="$glue/build/debug-kernel/kbuild/$name.ko"
if KDIR="$KDIR" KERNEL_IMAGE="$KERNEL_IMAGE" GUEST_POWEROFF=reboot \
	MODULE="$debug_ko" KEEP_LOG="$logs/debug.log" \
	GUEST_WHILE_LOADED="$probe
$chain_probe" bash "$here/qemu-test.sh"; then
	if why=$(judge_clean "$logs/debug.log" "$debug_ko"); then
		say "boot debug: PASS ($(checkers_summary "$logs/debug.log" "$debug_ko"), debug_locks 1 at the end)"
		grep -m1 'kmemleak: Kernel memory leak detector initialized' "$logs/debug.log"
		grep -E "$name: (READ|WRITE|mixed) \(engines\)|GUEST: lockdep (dep|chain) $r_class" "$logs/debug.log" | sort -u
	else
		err "boot debug: $why"
	fi
else
	err "boot debug: qemu-test.sh failed"
fi

# 4. The rebuilt hfi1.ko against the debug kernel, with the debug kernel's
#    own RDMA modules.
hfi1_out="$glue/build/debug-kernel/hfi1"
say "boot hfi1: rebuilt hfi1.ko on the debug kernel"
if KDIR="$KDIR" OUT="$hfi1_out" bash "$glue/hfi1/build.sh" >"$logs/hfi1-build.out" 2>&1; then
	if KDIR="$KDIR" KERNEL_IMAGE="$KERNEL_IMAGE" KERNEL_MODULES="$KERNEL_MODULES" GUEST_POWEROFF=reboot \
		MODULE="$hfi1_out/hfi1.ko" KEEP_LOG="$logs/hfi1.log" TID_DIFF_CASES="${TID_DIFF_CASES:-20000}" \
		TID_SDIFF_OPS="${TID_SDIFF_OPS:-100000}" GUEST_WHILE_LOADED="$probe" \
		bash "$here/hfi1-test.sh"; then
		hfi1_kos=("$hfi1_out/hfi1.ko")
		for d in infiniband/core/ib_core infiniband/core/ib_uverbs infiniband/sw/rdmavt/rdmavt i2c/algos/i2c-algo-bit; do
			hfi1_kos+=("$KERNEL_MODULES/drivers/$d.ko")
		done
		if why=$(judge_hfi1 "$logs/hfi1.log" "${hfi1_kos[@]}"); then
			say "boot hfi1: PASS ($(checkers_summary "$logs/hfi1.log" "${hfi1_kos[@]}"), debug_locks 1 at the end)"
			grep -E "hfi1_tid_s?diff: [0-9]+ passed|GUEST: lockdep dep $sd_s_class -> $sd_exp_class" "$logs/hfi1.log" | sort -u
		else
			err "boot hfi1: $why"
		fi
	else
		err "boot hfi1: hfi1-test.sh failed"
	fi
else
	tail -n 30 "$logs/hfi1-build.out" >&2
	err "boot hfi1: building hfi1.ko against the debug kernel failed (see $logs/hfi1-build.out)"
fi

# 5. The deliberate inversion, in its own boot. qemu-test.sh must fail on
#    this log (it holds a report and lockdep ends switched off), so its exit
#    status is only shown; the judgement is judge_demo's.
say "boot demo: deliberate exp_lock -> s_lock inversion on the debug kernel"
# LOCKDEP_DEMO=1 adds kbuild/lockdep_demo.c and the Rust feature lockdep-demo.
make -s -C "$glue" KDIR="$KDIR" BUILD="$glue/build/lockdep-demo" RUST_TARGET_DIR="$rust_target" \
	LOCKDEP_DEMO=1 module
demo_rc=0
# kmemleak's scans are the clean and leak boots' business, not this one's.
KDIR="$KDIR" KERNEL_IMAGE="$KERNEL_IMAGE" GUEST_POWEROFF=reboot ALLOW_REPORTS=1 KMEMLEAK_SCAN=0 \
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
	if judge_clean "$logs/demo.log" "$glue/build/lockdep-demo/kbuild-lockdep-demo/$name.ko" >/dev/null; then
		err "the clean-log judgement accepted the demo log"
	else
		say "self-check: the clean-log judgement rejects the demo log"
	fi
else
	err "boot demo: $why"
fi

# 6. The deliberate leak and shift, in their own boot. qemu-test.sh must
#    fail on this log (kmemleak names our module), so its exit status is only
#    shown; the judgement is judge_leak's.
say "boot leak: a block lost on purpose and a shift by 40 in C, on the debug kernel"
make -s -C "$glue" KDIR="$KDIR" BUILD="$glue/build/checker-demo" RUST_TARGET_DIR="$rust_target" \
	KMEMLEAK_DEMO=1 UBSAN_DEMO=1 module
leak_ko="$glue/build/checker-demo/kbuild-kmemleak-demo-ubsan-demo/$name.ko"
leak_rc=0
KDIR="$KDIR" KERNEL_IMAGE="$KERNEL_IMAGE" GUEST_POWEROFF=reboot ALLOW_REPORTS=1 \
	MODULE="$leak_ko" MODULE_ARGS="kmemleak_demo=1 ubsan_demo=40" KEEP_LOG="$logs/leak.log" \
	bash "$here/qemu-test.sh" >"$logs/leak.qemu-test.out" 2>&1 || leak_rc=$?
say "boot leak: qemu-test.sh exit status $leak_rc (expected non-zero: kmemleak names our module)"
# Its only complaint must be kmemleak's.
unexpected=$(grep -E ': FAIL: ' "$logs/leak.qemu-test.out" | grep -v 'kmemleak: 1 suspected leaks from our modules' || true)
[[ -z "$unexpected" ]] || err "boot leak: qemu-test.sh also failed on: $unexpected"
grep -q 'kmemleak: 1 suspected leaks from our modules' "$logs/leak.qemu-test.out" ||
	err "boot leak: qemu-test.sh did not fail on kmemleak's report"
if [[ ! -s "$logs/leak.log" ]]; then
	err "boot leak: no serial log"
elif why=$(judge_leak "$logs/leak.log" "$leak_ko"); then
	say "boot leak: PASS (kmemleak reported the lost block in hfi1_tid_kmemleak_demo_leak, UBSAN the shift in ubsan_demo.c)"
	kmemleak_annotate "$logs/leak.log" "$leak_ko" | awk '/^kmemleak report/ { on = ($4 == "ours") } on'
	sed -n '/UBSAN: shift-out-of-bounds in/,/shift exponent/p' "$logs/leak.log" | head -n 2
	# The clean judgement must reject this log, or it could never fail.
	if judge_clean "$logs/leak.log" "$leak_ko" >/dev/null; then
		err "the clean-log judgement accepted the leak log"
	else
		say "self-check: the clean-log judgement rejects the leak log"
	fi
else
	err "boot leak: $why"
fi

if [[ $fail != 0 ]]; then
	say "FAILED (logs in $logs)"
	exit 1
fi
say "PASS"
