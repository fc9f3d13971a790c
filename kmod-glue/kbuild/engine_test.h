/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/* The stateful-engine part of the self-test (engine_test.c). */
#ifndef HFI1_TID_ENGINE_TEST_H
#define HFI1_TID_ENGINE_TEST_H

#include <linux/printk.h>

struct hfi1_tid_test_result {
	unsigned int passed, failed;
	/* What teardown found still held (all must be 0). */
	unsigned long flows_left, groups_left, waiters_left;
	unsigned long qps_still_referenced, ctx_busy;
	unsigned long objects_left, qp_refs_left, dma_left;
	unsigned long proto_left;	/* what the READ/WRITE/mixed phases found held */
};

#define HFI1_TID_CHECK(res, cond)                                            \
	do {                                                                 \
		if (cond) {                                                  \
			(res)->passed++;                                     \
		} else {                                                     \
			(res)->failed++;                                     \
			pr_err("%s: check failed at %s:%d: %s\n",           \
			       HFI1_TID_MOD, __func__, __LINE__, #cond);     \
		}                                                            \
	} while (0)

void hfi1_tid_engine_test(struct hfi1_tid_test_result *res);

#endif /* HFI1_TID_ENGINE_TEST_H */
