/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The C interface of the Rust TID RDMA engine (crate kmod-glue).
 *
 * Written by hand and checked against the Rust definitions by
 * kmod-glue/tests/header.rs: every hfi1_tid_* prototype and every member of
 * the structs below must match the Rust side in name, order and type.
 * Functions returning int give 0 or a negative errno.
 */
#ifndef HFI1_TID_H
#define HFI1_TID_H

#include <linux/types.h>

#define HFI1_TID_ABI_VERSION 1

/* RcvArray entry types for put_tid(). */
#define HFI1_TID_RCV_EXPECTED 0
#define HFI1_TID_RCV_INVALID 1

/*
 * One receive context's chip access: the rebuilt driver points these at
 * hfi1_put_tid(), rcv_array_wc_fill() and write/read_uctxt_csr() of the
 * flow table; the self-test at a register file or at the software chip.
 * Called from any context the engine runs in, with spinlocks held.
 */
struct hfi1_tid_chip_ops {
	void (*put_tid)(void *chip, u32 rcventry, u32 ty, u64 pa, u32 order);
	void (*wc_fill)(void *chip, u32 rcventry);
	void (*write_flow)(void *chip, u32 flow, u64 value);
	u64 (*read_flow)(void *chip, u32 flow);
};

/* One page set: first page index and page count (0 = filler). */
struct hfi1_tid_pageset {
	u32 idx;
	u32 count;
};

/* struct tid_rdma_params without the RCU head and the version. */
struct hfi1_tid_opfn_params {
	u32 qp;
	u32 max_len;
	u16 jkey;
	u8 max_read;
	u8 max_write;
	u8 timeout;
	u8 urg;
};

/* --- Implemented in Rust ------------------------------------------------ */

u32 hfi1_tid_abi_version(void);
u32 hfi1_tid_generation_next(u32 generation);
int hfi1_tid_flows_disable(const struct hfi1_tid_chip_ops *ops, void *chip);

/* Stateless functions the rebuilt hfi1.ko routes to (route.rs). */
int hfi1_tid_find_phys_blocks_4k(const u64 *pages, u32 npages,
				 struct hfi1_tid_pageset *out, u32 cap);
int hfi1_tid_find_phys_blocks_8k(const u64 *pages, u32 npages,
				 struct hfi1_tid_pageset *out, u32 cap);
int hfi1_tid_flush_pages(struct hfi1_tid_pageset *list, u32 cap, u32 sets,
			 u32 *idx, u32 pages);
int hfi1_tid_flow_reserve(u32 *mask, int last);
u64 hfi1_tid_opfn_encode(const struct hfi1_tid_opfn_params *p);
int hfi1_tid_opfn_decode(u64 data, struct hfi1_tid_opfn_params *p);

/* Software chip (Rust feature "sim"). */
void *hfi1_tid_sim_create(u32 expected_base, u32 entries);
void hfi1_tid_sim_destroy(void *chip);
const struct hfi1_tid_chip_ops *hfi1_tid_sim_ops(void);
u64 hfi1_tid_sim_read_flow(const void *chip, u32 flow);
u64 hfi1_tid_sim_stats(const void *chip);

/* LOCKDEP_DEMO=1 module only (Rust feature "lockdep-demo"). */
int hfi1_tid_lockdep_demo_invert(void *exp, void *s);

/* --- Implemented in C, called by Rust ------------------------------------ */

void *hfi1_tid_kmalloc(size_t size);
void hfi1_tid_kfree(void *ptr);
void hfi1_tid_panic(const u8 *msg, size_t len);
/* LOCKDEP_DEMO=1 module only: kbuild/lockdep_demo.c. */
u64 hfi1_tid_demo_lock_irqsave(void *lock);
void hfi1_tid_demo_unlock_irqrestore(void *lock, u64 flags);

#endif /* HFI1_TID_H */
