// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * LOCKDEP_DEMO=1 variant only: hands lockdep a real lock-order inversion.
 *
 * Two spinlocks get the module's named lock classes (the receive context's
 * exp_lock and a QP's s_lock, from glue.c); the Rust side (feature
 * "lockdep-demo", src/lockdep_demo.rs) takes them in the driver's order
 * through its lock types, then exp_lock before s_lock through an unsafe
 * hook below those types. A lockdep kernel must print a circular locking
 * dependency report naming both classes. scripts/lockdep-test.sh runs this
 * in a boot of its own: lockdep switches itself off after one report.
 */
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/printk.h>

#include "hfi1_tid.h"
#include "glue.h"

/* The raw lock operations of the demo's Rust lock backend. */
u64 hfi1_tid_demo_lock_irqsave(void *lock)
{
	unsigned long flags;

	spin_lock_irqsave((spinlock_t *)lock, flags);
	return flags;
}

void hfi1_tid_demo_unlock_irqrestore(void *lock, u64 flags)
{
	spin_unlock_irqrestore((spinlock_t *)lock, (unsigned long)flags);
}

int hfi1_tid_lockdep_demo(void)
{
	struct {
		spinlock_t exp_lock;
		spinlock_t s_lock;
	} *locks;
	int ret;

	locks = kzalloc(sizeof(*locks), GFP_KERNEL);
	if (!locks)
		return -ENOMEM;
	hfi1_tid_init_exp_lock(&locks->exp_lock);
	hfi1_tid_init_s_lock(&locks->s_lock);
	pr_info("%s: lockdep demo: exp_lock then s_lock, on purpose\n", HFI1_TID_MOD);
	ret = hfi1_tid_lockdep_demo_invert(&locks->exp_lock, &locks->s_lock);
	pr_info("%s: lockdep demo: done (%d)\n", HFI1_TID_MOD, ret);
	kfree(locks);
	return ret;
}
