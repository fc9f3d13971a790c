// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * LOCKDEP_DEMO=1 variant only: hands lockdep a real lock-order inversion.
 *
 * Registers a kernel platform whose spinlock callbacks are glue.c's (the
 * same as the engine's platform: spin_lock_init with the class name and
 * key the engine passes for each level, spin_lock_irqsave,
 * spin_unlock_irqrestore, lockdep_assert_held); the other services are
 * never used here and refuse or do nothing. The Rust side (feature "lockdep-demo", src/lockdep_demo.rs)
 * makes an exp_lock and an s_lock of that platform, takes them in the
 * driver's order through its lock types, then exp_lock before s_lock
 * through an unsafe hook below those types. A lockdep kernel must print a
 * circular locking dependency report naming both classes.
 * scripts/lockdep-test.sh runs this in a boot of its own: lockdep switches
 * itself off after one report.
 */
#include <linux/errno.h>
#include <linux/spinlock.h>
#include <linux/printk.h>

#include "hfi1_tid.h"
#include "glue.h"

static void demo_qp_nop(void *qp)
{
}

static bool demo_queue_trigger(void *qp, u32 cpu)
{
	return false;
}

static int demo_dma_map(void *dev, u64 addr, u32 len, u64 *bus)
{
	return -EINVAL;
}

static void demo_dma_unmap(void *dev, u64 bus, u32 len)
{
}

static void demo_wait_kmem(void *qp, u32 *s_flags)
{
}

static u32 demo_random_u32(void)
{
	return 0;
}

static const struct hfi1_tid_platform_ops demo_platform = {
	.spin_lock_init = hfi1_tid_spin_lock_init,
	.spin_lock_irqsave = hfi1_tid_spin_lock_irqsave,
	.spin_unlock_irqrestore = hfi1_tid_spin_unlock_irqrestore,
	.lockdep_assert_held = hfi1_tid_lockdep_assert_held,
	.qp_get = demo_qp_nop,
	.qp_put = demo_qp_nop,
	.queue_trigger = demo_queue_trigger,
	.schedule_send = demo_qp_nop,
	.do_send = demo_qp_nop,
	.dma_map = demo_dma_map,
	.dma_unmap = demo_dma_unmap,
	.wait_kmem = demo_wait_kmem,
	.random_u32 = demo_random_u32,
	.queue_tid_send = demo_queue_trigger,
};

int hfi1_tid_lockdep_demo(void)
{
	int ret, unreg;

	ret = hfi1_tid_platform_register(&demo_platform);
	if (ret)
		return ret;
	pr_info("%s: lockdep demo: exp_lock then s_lock, on purpose\n", HFI1_TID_MOD);
	ret = hfi1_tid_lockdep_demo_invert();
	pr_info("%s: lockdep demo: done (%d)\n", HFI1_TID_MOD, ret);
	unreg = hfi1_tid_platform_unregister();
	return ret ? ret : unreg;
}
