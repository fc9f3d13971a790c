/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/* Kernel platform of the self-test module: shared between its C files. */
#ifndef HFI1_TID_GLUE_H
#define HFI1_TID_GLUE_H

#include <linux/types.h>
#include <linux/spinlock.h>

#define HFI1_TID_MOD KBUILD_MODNAME

/* Allocation bookkeeping of the Rust global allocator. */
struct hfi1_tid_alloc_stats {
	long live;	/* blocks handed out and not yet freed */
	long total;	/* kmalloc calls that succeeded */
	long atomic;	/* of those, made with GFP_ATOMIC */
	long failed;	/* kmalloc calls that returned NULL */
};

void hfi1_tid_alloc_stats(struct hfi1_tid_alloc_stats *s);

/* Fail the next n allocations (fault injection for ENOMEM paths). */
void hfi1_tid_fail_next_allocs(int n);

/*
 * The spinlock members of struct hfi1_tid_platform_ops: spin_lock_init
 * with the class (name and static key) the engine passes for the lock's
 * level, spin_lock_irqsave, spin_unlock_irqrestore, lockdep_assert_held.
 * A C-owned lock of the engine's order (a QP's s_lock) is initialised with
 * hfi1_tid_s_lock_init() once the table is registered.
 */
void hfi1_tid_spin_lock_init(void *lock, const char *name, void *key);
size_t hfi1_tid_spin_lock_irqsave(void *lock);
void hfi1_tid_spin_unlock_irqrestore(void *lock, size_t flags);
void hfi1_tid_lockdep_assert_held(void *lock);

#ifdef HFI1_TID_LOCKDEP_DEMO
/* Provided by lockdep_demo.c in the LOCKDEP_DEMO=1 variant. */
int hfi1_tid_lockdep_demo(void);
#endif

#endif /* HFI1_TID_GLUE_H */
