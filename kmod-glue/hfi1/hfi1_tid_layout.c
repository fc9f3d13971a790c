// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * Build-time check of the driver's structures and values against the table
 * the Rust engine uses (hfi1_hal::layout, written out as
 * hfi1_tid_layout.h): compiling this file against the kernel source being
 * built fails if any offset, size, flag value or pageset bit position
 * differs. The values tid_rdma.c defines for itself are checked inside
 * tid_rdma.c, by the routed kern_flow_generation_next() wrapper
 * (route.cocci).
 */
#include <linux/kernel.h>

#include "hfi.h"
#include "qp.h"
#include "verbs.h"
#include "exp_rcv.h"
#include "tid_rdma.h"
#include "hfi1_tid_layout.h"
#include "hfi1_tid_route.h"

void hfi1_tid_layout_check(void)
{
	HFI1_TID_LAYOUT_CHECK_HEADER_VALUES();
	HFI1_TID_LAYOUT_CHECK_STRUCTS();
	HFI1_TID_LAYOUT_CHECK_PAGESET();
}
