#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# Guest test of the rebuilt hfi1.ko: builds it (hfi1/build.sh), boots the
# installed kernel under qemu (TCG) with ib_core, ib_uverbs, rdmavt and
# i2c-algo-bit from the installed kernel and our hfi1.ko, runs the two
# differential tests (tid_diff=N cases per routed stateless function,
# tid_sdiff=N operations on the stateful group's twin worlds), unloads
# everything, and fails on a missing or failing "hfi1_tid_diff: N passed,
# M failed" or "hfi1_tid_sdiff: N passed, M failed" verdict, a failed load
# or unload, any kernel report, or taint other than O/E. With
# HFI1_TID_BROKEN=1 it builds the deliberately broken variant and requires
# both verdicts to report failures instead.
#
# Environment: KDIR, KERNEL_IMAGE, GUEST_POWEROFF, KEEP_LOG as for
# qemu-test.sh; TID_DIFF_CASES (default 100000); TID_SDIFF_OPS (default
# 100000); HFI1_TID_BROKEN=1; MODULE=<hfi1.ko> to skip the build;
# KERNEL_MODULES=<dir> where the dependencies are
# (<dir>/drivers/.../ib_core.ko..., default the installed kernel's;
# debug-kernel.sh prints the debug kernel's); GUEST_WHILE_LOADED (guest
# commands run while hfi1.ko is loaded).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
glue="$(dirname "$here")"
CASES=${TID_DIFF_CASES:-100000}
SOPS=${TID_SDIFF_OPS:-100000}
BROKEN=${HFI1_TID_BROKEN:-0}

# shellcheck source=guest-lib.sh
. "$here/guest-lib.sh"

if [ -z "${MODULE:-}" ]; then
    HFI1_TID_BROKEN=$BROKEN KDIR=$KDIR bash "$glue/hfi1/build.sh"
    suffix=""
    [ "$BROKEN" != 1 ] || suffix=-broken
    MODULE=$glue/build/hfi1$suffix/hfi1.ko
fi
[ -r "$MODULE" ] || { echo "hfi1-test: no module $MODULE" >&2; exit 1; }

kmods=${KERNEL_MODULES:-/lib/modules/$(guest_kver)/kernel}
deps=(drivers/infiniband/core/ib_core drivers/infiniband/core/ib_uverbs
      drivers/infiniband/sw/rdmavt/rdmavt drivers/i2c/algos/i2c-algo-bit)
for d in "${deps[@]}"; do
    f=$(ls "$kmods/$d".ko* 2>/dev/null | head -n1 || true)
    [ -n "$f" ] || { echo "hfi1-test: $d not in $kmods" >&2; exit 1; }
    guest_add_module "$f"
done
guest_add_module "$MODULE"

load=""
for d in "${deps[@]}"; do
    m=$(basename "$d")
    load+="insmod /mod/$m.ko || echo 'GUEST: insmod $m failed'
"
done
[ "$BROKEN" != 1 ] || export EXPECT_FAIL=1
guest_boot "
$load
if insmod /mod/hfi1.ko tid_diff=$CASES tid_sdiff=$SOPS; then echo 'GUEST: insmod ok'; else echo 'GUEST: insmod failed'; fi
echo \"GUEST: taint while loaded \$(cat /proc/sys/kernel/tainted)\"
lsmod
${GUEST_WHILE_LOADED:-}
ok=1
for m in hfi1 rdmavt ib_uverbs ib_core i2c_algo_bit; do rmmod \$m || ok=0; done
if [ \$ok = 1 ]; then echo 'GUEST: rmmod ok'; else echo 'GUEST: rmmod failed'; fi
echo \"GUEST: taint after unload \$(cat /proc/sys/kernel/tainted)\"
"

grep -E "hfi1_tid_s?diff: |GUEST: " "$GUEST_LOG" | grep -v 'GUEST: dmesg' || true
grep -q 'insmod .* failed' "$GUEST_LOG" && guest_err "a module did not load"
grep -q 'GUEST: insmod ok' "$GUEST_LOG" || guest_err "hfi1.ko did not load"
grep -q 'GUEST: rmmod ok' "$GUEST_LOG" || guest_err "unload did not succeed"
guest_check_verdict hfi1_tid_diff
diff_verdict=${GUEST_VERDICT:-}
guest_check_verdict hfi1_tid_sdiff
sdiff_verdict=${GUEST_VERDICT:-}
GUEST_VERDICT="$diff_verdict; $sdiff_verdict"
# Every routed stateful function must have been compared.
for f in hfi1_kern_setup_hw_flow hfi1_kern_clear_hw_flow hfi1_kern_exp_rcv_setup \
         hfi1_kern_exp_rcv_clear hfi1_kern_exp_rcv_clear_all hfi1_kern_exp_rcv_alloc_flows \
         hfi1_kern_exp_rcv_free_flows __trdma_clean_swqe hfi1_tid_rdma_flush_wait \
         tid_rdma_trigger_resume; do
    grep -Eq "hfi1_tid_sdiff: $f: [0-9]+ passed" "$GUEST_LOG" || guest_err "no result for $f"
done
if [ "$BROKEN" != 1 ]; then
    n=$(sed -nE 's/.*hfi1_tid_sdiff: ([0-9]+) passed, 0 failed.*/\1/p' "$GUEST_LOG" | tail -n1)
    [ "${n:-0}" -ge "$SOPS" ] || guest_err "hfi1_tid_sdiff compared ${n:-0} operations, want $SOPS"
fi
# Every routed function must have been compared.
for f in kern_flow_generation_next kern_reserve_flow tid_rdma_opfn_encode tid_rdma_opfn_decode \
         tid_rdma_find_phys_blocks_4k tid_rdma_find_phys_blocks_8k tid_flush_pages; do
    grep -Eq "hfi1_tid_diff: $f: [0-9]+ passed" "$GUEST_LOG" || guest_err "no result for $f"
done
guest_check_common
if [ "$BROKEN" = 1 ]; then
    guest_finish "hfi1-test (broken build, failures required)"
else
    guest_finish hfi1-test
fi
