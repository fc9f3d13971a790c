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
 * Lock classes with names lockdep prints: the receive context's expected
 * lock (exp_lock) and the QP's send lock (s_lock). The order is always
 * s_lock, then exp_lock.
 */
void hfi1_tid_init_exp_lock(spinlock_t *lock);
void hfi1_tid_init_s_lock(spinlock_t *lock);

#ifdef HFI1_TID_LOCKDEP_DEMO
/* Provided by lockdep_demo.c in the LOCKDEP_DEMO=1 variant. */
int hfi1_tid_lockdep_demo(void);
#endif

#endif /* HFI1_TID_GLUE_H */
