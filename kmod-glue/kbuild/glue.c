// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * Kernel platform for the Rust engine: the allocator and panic entry points
 * the Rust object imports, and the spinlock primitives of the platform
 * table (the lock classes, one named static key per level, are the
 * engine's: it passes name and key to hfi1_tid_spin_lock_init).
 */
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/atomic.h>
#include <linux/preempt.h>
#include <linux/irqflags.h>
#include <linux/lockdep.h>
#include <linux/bug.h>
#include <linux/printk.h>

#include "hfi1_tid.h"
#include "glue.h"

static atomic_long_t live_allocs = ATOMIC_LONG_INIT(0);
static atomic_long_t total_allocs = ATOMIC_LONG_INIT(0);
static atomic_long_t atomic_allocs = ATOMIC_LONG_INIT(0);
static atomic_long_t failed_allocs = ATOMIC_LONG_INIT(0);
static atomic_t fail_next = ATOMIC_INIT(0);

/*
 * May the caller sleep? Without a preempt count, a held spinlock is
 * invisible, so assume it may not.
 */
static bool hfi1_tid_may_sleep(void)
{
#ifdef CONFIG_PREEMPT_COUNT
	return preempt_count() == 0 && !irqs_disabled();
#else
	return false;
#endif
}

void *hfi1_tid_kmalloc(size_t size)
{
	bool sleep_ok = hfi1_tid_may_sleep();
	void *p;

	if (atomic_add_unless(&fail_next, -1, 0)) {
		atomic_long_inc(&failed_allocs);
		return NULL;
	}
	p = kmalloc(size, sleep_ok ? GFP_KERNEL : GFP_ATOMIC);
	if (!p) {
		atomic_long_inc(&failed_allocs);
		return NULL;
	}
	atomic_long_inc(&live_allocs);
	atomic_long_inc(&total_allocs);
	if (!sleep_ok)
		atomic_long_inc(&atomic_allocs);
	return p;
}

void hfi1_tid_kfree(void *ptr)
{
	if (!ptr)
		return;
	atomic_long_dec(&live_allocs);
	kfree(ptr);
}

void hfi1_tid_panic(const u8 *msg, size_t len)
{
	pr_emerg("%s: Rust panic: %.*s\n", HFI1_TID_MOD, (int)min_t(size_t, len, 256),
		 msg);
	BUG();
}

void hfi1_tid_alloc_stats(struct hfi1_tid_alloc_stats *s)
{
	s->live = atomic_long_read(&live_allocs);
	s->total = atomic_long_read(&total_allocs);
	s->atomic = atomic_long_read(&atomic_allocs);
	s->failed = atomic_long_read(&failed_allocs);
}

void hfi1_tid_fail_next_allocs(int n)
{
	atomic_set(&fail_next, n);
}

void hfi1_tid_spin_lock_init(void *lock, const char *name, void *key)
{
	BUILD_BUG_ON(sizeof(spinlock_t) > HFI1_TID_SPINLOCK_BYTES);
	BUILD_BUG_ON(sizeof(struct lock_class_key) > HFI1_TID_LOCK_CLASS_KEY_BYTES);
	spin_lock_init((spinlock_t *)lock);
	lockdep_set_class_and_name((spinlock_t *)lock, (struct lock_class_key *)key, name);
}

size_t hfi1_tid_spin_lock_irqsave(void *lock)
{
	unsigned long flags;

	spin_lock_irqsave((spinlock_t *)lock, flags);
	return flags;
}

void hfi1_tid_spin_unlock_irqrestore(void *lock, size_t flags)
{
	spin_unlock_irqrestore((spinlock_t *)lock, flags);
}

void hfi1_tid_lockdep_assert_held(void *lock)
{
	lockdep_assert_held((spinlock_t *)lock);
}
