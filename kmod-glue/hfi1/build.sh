#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# Builds hfi1.ko with TID RDMA functions routed to the Rust engine:
#   1. builds and checks the Rust object without any simulator, harness or
#      self-test code (make -C kmod-glue driver-object),
#   2. extracts drivers/infiniband/hw/hfi1/ from Debian's linux-source-6.1
#      tarball into the build directory (nothing of the kernel's source is
#      kept in the repository),
#   3. applies route.cocci to tid_rdma.c and verifies that every rename and
#      wrapper is there (spatch exits 0 even when a rule matched nothing),
#   4. adds our Kbuild overlay, adapters, differential test and the Rust
#      object, and builds the module against the kernel build tree, failing
#      on any warning,
#   5. checks the finished module's symbol list: no simulator, harness or
#      self-test symbol (check-object.sh --symbols-only).
#
# Environment: KDIR (default: the installed headers), HFI1_TID_BROKEN=1 (the
# deliberately broken variant, in build/hfi1-broken), LINUX_SOURCE (the
# tarball), OUT (output directory).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
glue="$(dirname "$here")"
KDIR=${KDIR:-/lib/modules/$(ls -1 /lib/modules | sort -V | tail -n1)/build}
BROKEN=${HFI1_TID_BROKEN:-0}
suffix=""
[ "$BROKEN" = 1 ] && suffix=-broken
OUT=${OUT:-$glue/build/hfi1$suffix}
LINUX_SOURCE=${LINUX_SOURCE:-/usr/src/linux-source-6.1.tar.xz}

ROUTED=(kern_flow_generation_next kern_reserve_flow tid_rdma_opfn_encode
        tid_rdma_opfn_decode tid_rdma_find_phys_blocks_4k tid_flush_pages
        tid_rdma_find_phys_blocks_8k)
# The stateful group: the queueing routines, flows, segments, flow records,
# the flush and the trigger work (the queue helpers are reached through
# them). Their wrappers keep the original linkage (static or global).
STATEFUL=(hfi1_kern_exp_rcv_init hfi1_kern_init_ctxt_generations
          hfi1_kern_setup_hw_flow hfi1_kern_clear_hw_flow hfi1_kern_exp_rcv_setup
          hfi1_kern_exp_rcv_clear hfi1_kern_exp_rcv_clear_all
          hfi1_kern_exp_rcv_alloc_flows hfi1_kern_exp_rcv_free_flows __trdma_clean_swqe
          hfi1_tid_rdma_flush_wait tid_rdma_trigger_resume)
# The services the stateful originals call through hfi1_tid_svc, and how
# many calls route.cocci must have turned (each one, in the originals and
# the helpers only they use).
SERVICES=(write_uctxt_csr:1 hfi1_put_tid:3 rcv_array_wc_fill:2 dma_map_page:1
          dma_mapping_error:1 dma_unmap_page:1 queue_work_on:1 hfi1_schedule_send:1
          hfi1_do_send:1 hfi1_wait_kmem:1 kmalloc_node:1 kfree:1 get_random_u32:1
          hfi1_set_ctxt_jkey:1)

[ -r "$LINUX_SOURCE" ] || { echo "hfi1/build.sh: no $LINUX_SOURCE (apt-get install linux-source-6.1)" >&2; exit 1; }
command -v spatch >/dev/null || { echo "hfi1/build.sh: no spatch (apt-get install coccinelle)" >&2; exit 1; }

make -C "$glue" KDIR="$KDIR" driver-object

# Extract and patch into a fresh directory, then copy into $OUT only what
# changed, so a rebuild compiles only what it must.
src=$(mktemp -d "${TMPDIR:-/tmp}/hfi1-src.XXXXXX")
trap 'rm -rf "$src"' EXIT
top=${LINUX_SOURCE_TOP:-linux-source-6.1}
tar -xf "$LINUX_SOURCE" -C "$src" --strip-components=5 "$top/drivers/infiniband/hw/hfi1/"
[ -f "$src/tid_rdma.c" ] || { echo "hfi1/build.sh: extraction failed" >&2; exit 1; }

cp "$src/tid_rdma.c" "$src/tid_rdma.c.pristine"
spatch --very-quiet --sp-file "$here/route.cocci" --in-place "$src/tid_rdma.c" >"$src/spatch.log" 2>&1 ||
    { cat "$src/spatch.log" >&2; exit 1; }
fail=0
grep -q '^#include "hfi1_tid_route.h"' "$src/tid_rdma.c" || { echo "route.cocci: include not added" >&2; fail=1; }
for f in "${ROUTED[@]}"; do
    grep -Eq "^(u32|u64|int|void) hfi1_orig_$f\(" "$src/tid_rdma.c" || { echo "route.cocci: $f not renamed" >&2; fail=1; }
    grep -Eq "^static (__maybe_unused )?(u32|u64|int|void) $f\(" "$src/tid_rdma.c" || { echo "route.cocci: no wrapper for $f" >&2; fail=1; }
    grep -Eq "^[[:space:]]+(return )?hfi1_tid_route_$f\(" "$src/tid_rdma.c" || { echo "route.cocci: wrapper of $f does not route" >&2; fail=1; }
    [ "$(grep -Ec "^static (__maybe_unused )?(u32|u64|int|void) $f\(" "$src/tid_rdma.c")" = 1 ] ||
        { echo "route.cocci: $f defined more than once" >&2; fail=1; }
done
for f in "${STATEFUL[@]}"; do
    grep -Eq "^(int|void) hfi1_orig_$f\(" "$src/tid_rdma.c" || { echo "route.cocci: $f not renamed" >&2; fail=1; }
    grep -Eq "^(static )?(int|void) $f\(" "$src/tid_rdma.c" || { echo "route.cocci: no wrapper for $f" >&2; fail=1; }
    grep -Eq "^[[:space:]]+(return )?hfi1_tid_route_$f\(" "$src/tid_rdma.c" || { echo "route.cocci: wrapper of $f does not route" >&2; fail=1; }
    # As many lines declare or define it as before: the wrapper replaced
    # the original under the same name (forward declarations stay).
    [ "$(grep -Ec "^(static )?(int|void) $f\(" "$src/tid_rdma.c")" = \
      "$(grep -Ec "^(static )?(int|void) $f\(" "$src/tid_rdma.c.pristine")" ] ||
        { echo "route.cocci: $f defined more than once" >&2; fail=1; }
done
for s in "${SERVICES[@]}"; do
    name=${s%%:*}
    want=${s##*:}
    got=$(grep -c "hfi1_tid_svc_$name(" "$src/tid_rdma.c" || true)
    [ "$got" = "$want" ] || { echo "route.cocci: $got calls of $name go through hfi1_tid_svc, want $want" >&2; fail=1; }
done
# The originals' copies of the helpers the RESYNC code shares, and the
# calls between originals.
for c in "static void hfi1_orig_kern_set_hw_flow(" "static u32 hfi1_orig_kern_setup_hw_flow(" \
         "= hfi1_orig_kern_setup_hw_flow(rcd, fs->index)" "hfi1_orig_kern_reserve_flow(rcd, fs->last_index)" \
         "hfi1_orig_kern_flow_generation_next(rcd->flows" "if (hfi1_orig_hfi1_kern_exp_rcv_clear(req))" \
         "hfi1_orig_hfi1_kern_exp_rcv_free_flows(&p->tid_req)" "hfi1_orig_tid_rdma_find_phys_blocks_4k(flow," \
         "hfi1_orig_tid_rdma_find_phys_blocks_8k(flow,"; do
    grep -qF "$c" "$src/tid_rdma.c" || { echo "route.cocci: missing: $c" >&2; fail=1; }
done
[ "$(grep -c 'hfi1_orig_kern_set_hw_flow(rcd' "$src/tid_rdma.c")" = 3 ] ||
    { echo "route.cocci: the originals do not all use the copied flow register write" >&2; fail=1; }
# The values tid_rdma.c defines are checked against the engine's table there.
grep -q 'HFI1_TID_LAYOUT_CHECK_TID_RDMA_C_VALUES();' "$src/tid_rdma.c" ||
    { echo "route.cocci: the tid_rdma.c layout check is not in place" >&2; fail=1; }
# The original 8K walk must keep using the original flush helper.
[ "$(grep -c 'hfi1_orig_tid_flush_pages(list, &idx' "$src/tid_rdma.c")" = 3 ] ||
    { echo "route.cocci: 8K original does not call the original flush" >&2; fail=1; }
[ "$fail" = 0 ] || exit 1
rm -f "$src/tid_rdma.c.pristine"
echo "hfi1/build.sh: routed ${ROUTED[*]} ${STATEFUL[*]}"

cp "$here/Kbuild" "$here/hfi1_tid_route.c" "$here/hfi1_tid_route.h" "$here/hfi1_tid_svc.h" \
   "$here/hfi1_tid_diff.c" "$here/hfi1_tid_sdiff.c" "$here/hfi1_tid_sdiff_run.c" \
   "$here/hfi1_tid_sdiff_cmp.c" "$here/hfi1_tid_sdiff.h" "$here/hfi1_tid_testparam.h" \
   "$here/hfi1_tid_layout.c" "$glue/include/hfi1_tid.h" "$glue/include/hfi1_tid_layout.h" "$src/"
cp "$glue/kbuild/glue.c" "$src/hfi1_tid_glue.c"
cp "$glue/kbuild/glue.h" "$src/glue.h"
cp "$glue/build/hfi1_tid_rust_driver.o" "$src/hfi1_tid_rust.bin"
mkdir -p "$OUT"
for f in "$src"/*; do
    b=$(basename "$f")
    cmp -s "$f" "$OUT/$b" || cp "$f" "$OUT/$b"
done

set -o pipefail
make -C "$KDIR" M="$OUT" CONFIG_DEBUG_INFO_BTF_MODULES= HFI1_TID_BROKEN="$BROKEN" -j2 modules 2>&1 |
    tee "$OUT/build.log"
if grep -Ei 'warning|error' "$OUT/build.log"; then
    echo "hfi1/build.sh: kbuild printed warnings" >&2
    exit 1
fi
bash "$glue/scripts/check-object.sh" --symbols-only "$OUT/hfi1.ko"
echo "hfi1/build.sh: $OUT/hfi1.ko"
