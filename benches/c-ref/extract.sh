#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# extract.sh OUTDIR
# Pulls the hfi1 functions the benchmarks compare with out of the Linux 6.1
# source, unchanged, into OUTDIR/kernel_{defs,funcs,hw}.inc. The source is
# the Debian tarball (LINUX_TARBALL, default /usr/src/linux-source-6.1.tar.xz)
# or an extracted tree (LINUX_SRC). Nothing extracted is ever committed:
# OUTDIR is a build directory.
set -euo pipefail
out=$1
mkdir -p "$out"
hfi=drivers/infiniband/hw/hfi1
if [ -n "${LINUX_SRC:-}" ]; then
    src=$LINUX_SRC
else
    tarball=${LINUX_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
    src=$out/src
    if [ ! -f "$src/$hfi/tid_rdma.c" ]; then
        mkdir -p "$src"
        # The tarball's top directory (Debian: linux-source-6.1).
        top=${LINUX_TOP:-$(basename "$tarball" .tar.xz)}
        tar -xJf "$tarball" -C "$src" --strip-components=1 \
            "$top/$hfi/tid_rdma.c" "$top/$hfi/tid_rdma.h" "$top/$hfi/exp_rcv.h" \
            "$top/$hfi/chip.c" "$top/$hfi/chip.h" "$top/$hfi/chip_registers.h" \
            "$top/$hfi/hfi.h" "$top/$hfi/common.h"
    fi
fi
d=$src/$hfi

# One function: from its first line (return type and name at column 0)
# through the first closing brace at column 0.
fn() {
    awk -v name="$2" '
        !on && $0 ~ ("^[a-z].*[ *]" name "\\(") { on = 1 }
        on { print }
        on && /^}/ { exit }' "$1"
}

# One struct: "struct NAME {" through "};".
st() {
    awk -v name="$2" '
        !on && $0 == ("struct " name " {") { on = 1 }
        on { print }
        on && /^};/ { exit }' "$1"
}

# #define lines of the given names, with their continuation lines.
defs() {
    local file=$1
    shift
    local re
    re=$(IFS='|'; echo "$*")
    awk -v re="^#define[ \t]+(${re})([ \t(]|$)" '
        cont || $0 ~ re { print; cont = /\\$/ }' "$file"
}

need() {
    if [ ! -s "$1" ] || ! grep -q . "$1"; then
        echo "extract.sh: nothing extracted into $1" >&2
        exit 1
    fi
}

{
    defs "$d/chip_registers.h" CORE RXE RCV_TID_FLOW_TABLE RXE_NUM_TID_FLOWS \
        RCV_ARRAY_RT_ADDR_MASK RCV_ARRAY_RT_ADDR_SHIFT RCV_ARRAY_RT_BUF_SIZE_SHIFT \
        RCV_ARRAY_RT_WRITE_ENABLE_SMASK
    defs "$d/chip.h" MAX_EXPECTED_BUFFER
    defs "$d/common.h" HFI1_KDETH_BTH_SEQ_SHIFT
    defs "$d/hfi.h" PT_EXPECTED PT_EAGER PT_INVALID_FLUSH PT_INVALID HFI1_PRESENT
    defs "$d/exp_rcv.h" EXP_TID_TIDLEN_MASK EXP_TID_TIDLEN_SHIFT EXP_TID_TIDCTRL_MASK \
        EXP_TID_TIDCTRL_SHIFT EXP_TID_TIDIDX_MASK EXP_TID_TIDIDX_SHIFT EXP_TID_SET
    defs "$d/tid_rdma.h" TID_RDMA_MAX_SEGMENT_SIZE TID_RDMA_MAX_PAGES
    defs "$d/tid_rdma.c" 'RCV_TID_FLOW_TABLE_[A-Z_]+' GENERATION_MASK \
        KERN_GENERATION_RESERVED MAX_EXPECTED_PAGES
    st "$d/exp_rcv.h" tid_group
    st "$d/tid_rdma.h" tid_flow_state
    st "$d/tid_rdma.h" flow_state
    st "$d/tid_rdma.h" tid_rdma_pageset
    st "$d/tid_rdma.h" kern_tid_node
    st "$d/tid_rdma.h" tid_rdma_flow
} >"$out/kernel_defs.inc"
need "$out/kernel_defs.inc"

{
    fn "$d/chip.h" write_uctxt_csr
    for f in rcv_array_wc_fill tid_group_add_tail tid_group_remove tid_group_move; do
        fn "$d/exp_rcv.h" "$f"
    done
    for f in mask_generation kern_reserve_flow kern_set_hw_flow kern_setup_hw_flow \
        kern_flow_generation_next kern_clear_hw_flow trdma_pset_order \
        tid_rdma_find_phys_blocks_4k tid_flush_pages tid_rdma_find_phys_blocks_8k \
        kern_add_tid_node kern_alloc_tids kern_program_rcv_group \
        kern_unprogram_rcv_group kern_program_rcvarray; do
        fn "$d/tid_rdma.c" "$f"
    done
} >"$out/kernel_funcs.inc"
need "$out/kernel_funcs.inc"

fn "$d/chip.c" hfi1_put_tid >"$out/kernel_hw.inc"
need "$out/kernel_hw.inc"

# Every function asked for must be there exactly once.
for f in tid_rdma_find_phys_blocks_4k tid_flush_pages tid_rdma_find_phys_blocks_8k \
    kern_alloc_tids kern_program_rcv_group kern_unprogram_rcv_group kern_reserve_flow \
    kern_clear_hw_flow; do
    n=$(grep -c "^[a-z].*[ *]$f(" "$out/kernel_funcs.inc" || true)
    if [ "$n" != 1 ]; then
        echo "extract.sh: $f found $n times" >&2
        exit 1
    fi
done
