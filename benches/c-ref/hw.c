/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The out-of-line chip accessors: the driver's hfi1_put_tid() (extracted
 * unchanged from chip.c) and a write_csr() that stores into an array, as
 * the Rust side's simulated flow table does.
 */
#include "shim.h"
#include "kernel_defs.inc"
#include "ctxt.h"

unsigned long vmemmap_base = 0xffffea0000000000UL;
unsigned long page_offset_base = 0xffff888000000000UL;

static volatile u64 csr_space[64];

void write_csr(const struct hfi1_devdata *dd, u32 offset, u64 value)
{
	(void)dd;
	csr_space[(offset >> 3) & 63] = value;
}

#include "kernel_hw.inc"
