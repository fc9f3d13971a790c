// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * KMEMLEAK_DEMO=1 variant only: the module parameter kmemleak_demo=1 loses
 * one allocation on purpose, so that kmemleak has something of ours to find.
 *
 * The block is kmalloc'ed while the parameter is parsed (before the
 * self-test runs), filled with a marker that kmemleak's hex dump shows, and
 * its only pointer dropped. It does not go through the engine's allocator,
 * so the module's own unload accounting still says nothing is left over:
 * only kmemleak can see it. scripts/lockdep-test.sh loads this variant with
 * kmemleak_demo=1 in a boot of its own and requires kmemleak's report, made
 * after the unload, to hold the marker and this file's function in this
 * module (scripts/guest-kmemleak.sh names frames of unloaded modules).
 */
#include <linux/errno.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "glue.h"

#define KMEMLEAK_DEMO_SIZE 200

static bool kmemleak_demo;

/* noinline: the allocation's backtrace must hold a frame of this file. */
static noinline int hfi1_tid_kmemleak_demo_leak(void)
{
	char *block = kmalloc(KMEMLEAK_DEMO_SIZE, GFP_KERNEL);

	if (!block)
		return -ENOMEM;
	memset(block, 0, KMEMLEAK_DEMO_SIZE);
	strscpy(block, "hfi1_tid kmemleak demo", KMEMLEAK_DEMO_SIZE);
	pr_info("%s: kmemleak demo: %d bytes lost on purpose\n", HFI1_TID_MOD,
		KMEMLEAK_DEMO_SIZE);
	/* The only pointer to the block dies with this frame. */
	return 0;
}

static int kmemleak_demo_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (ret || !kmemleak_demo)
		return ret;
	return hfi1_tid_kmemleak_demo_leak();
}

static const struct kernel_param_ops kmemleak_demo_ops = {
	.set = kmemleak_demo_set,
	.get = param_get_bool,
};

module_param_cb(kmemleak_demo, &kmemleak_demo_ops, &kmemleak_demo, 0444);
MODULE_PARM_DESC(kmemleak_demo, "lose one allocation on purpose, for kmemleak to find");
