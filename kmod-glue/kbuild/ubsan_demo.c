// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * UBSAN_DEMO=1 variant only: the module parameter ubsan_demo=N shifts a
 * 32-bit value by N in C, which is undefined for N >= 32, so that UBSAN has
 * something of ours to report. The count comes from the parameter, so the
 * compiler cannot see it (a constant count would be a build warning
 * instead). scripts/lockdep-test.sh loads this variant with ubsan_demo=40
 * and requires UBSAN's shift-out-of-bounds report in this file, with a
 * backtrace through this module.
 */
#include <linux/moduleparam.h>
#include <linux/printk.h>

#include "glue.h"

static unsigned int ubsan_demo;

/* noinline: the report's backtrace must hold a frame of this file. */
static noinline u32 hfi1_tid_ubsan_demo_shift(unsigned int count)
{
	return 1u << count;
}

static int ubsan_demo_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_uint(val, kp);

	if (ret || !ubsan_demo)
		return ret;
	pr_info("%s: UBSAN demo: 1u << %u, on purpose\n", HFI1_TID_MOD, ubsan_demo);
	pr_info("%s: UBSAN demo: done (%u)\n", HFI1_TID_MOD,
		hfi1_tid_ubsan_demo_shift(ubsan_demo));
	return 0;
}

static const struct kernel_param_ops ubsan_demo_ops = {
	.set = ubsan_demo_set,
	.get = param_get_uint,
};

module_param_cb(ubsan_demo, &ubsan_demo_ops, &ubsan_demo, 0444);
MODULE_PARM_DESC(ubsan_demo, "shift a 32-bit value by this many bits on purpose (0: off), for UBSAN to report");
