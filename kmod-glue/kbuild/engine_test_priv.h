/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Shared between the files of the stateful-engine self-test:
 * engine_platform.c (the platform and chip callbacks the engine calls),
 * engine_qp.c (the test's QPs, their send engine and the two backends)
 * and engine_test.c (the phases).
 */
#ifndef HFI1_TID_ENGINE_TEST_PRIV_H
#define HFI1_TID_ENGINE_TEST_PRIV_H

#include <linux/types.h>
#include <linux/atomic.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/completion.h>

#include "hfi1_tid.h"
#include "glue.h"
#include "engine_test.h"

#define NQPS 64
#define NFLOWS 32
#define SEG_PAGES 16
#define NGROUPS 4		/* 32 RcvArray entries: two 16-page segments */
#define EXP_BASE 64		/* the context's first RcvArray entry */
#define NENTRIES (NGROUPS * 8)
#define GEN_RESERVED 0xFFFFFull
/* RcvTidFlowTable bits every flow write carries (SPEC: kern_set_hw_flow) */
#define FLOW_FIXED_BITS (BIT_ULL(32) | BIT_ULL(34) | BIT_ULL(35) | BIT_ULL(37) | BIT_ULL(38))
#define FLOW_HDR_SUPP BIT_ULL(33)
#define NWAITERS 8		/* phase 2: QPs queued behind the 32 holders */

enum tqp_mode { MODE_SEGMENT, MODE_FLOW_ONLY };

struct etest;

struct tqp {
	spinlock_t s_lock;
	atomic_t refs;
	struct hfi1_tid_qp *h;
	struct hfi1_tid_req *req;
	struct work_struct trigger_work;
	struct delayed_work send_work;
	struct etest *t;
	enum tqp_mode mode;
	int state;
	int rounds;
	int error;
	bool flushed;
	bool got_flow;
	unsigned int id;
	atomic_t sends;
};

struct etest {
	struct workqueue_struct *wq;
	bool engine;		/* real context, else the wait-queue harness */
	struct hfi1_tid_rcd *rcd;
	struct hfi1_tid_wt *wt;
	struct tqp *qps[NQPS];
	struct hfi1_tid_sge sges[SEG_PAGES];
	struct page *pages[SEG_PAGES];
	struct completion all_done;
	atomic_t done;
	int nqps;
	/*
	 * The chip the engine programs, checked write by write (under the
	 * engine's exp_lock): every RcvArray entry in the context's range,
	 * EXPECTED only for a free entry, with one of the test's pages'
	 * bus addresses and order 1 (every page set is one page), INVALID
	 * only for a programmed entry, with no address and order 0; every
	 * flow register value one the driver writes (kern_set_hw_flow()),
	 * arming only a disabled flow.
	 */
	struct {
		u64 flow[NFLOWS];
		bool armed[NFLOWS];
		bool expected[NENTRIES];
		unsigned int writes, tids, fills, bad;
	} chip;
};

/* What the platform callbacks counted, checked by the phases. */
struct etest_counters {
	atomic_long_t extra_refs;	/* QP references taken by the engine */
	atomic_long_t dma_live;		/* DMA mappings not yet unmapped */
	atomic_long_t wakeups_queued;	/* trigger work queued */
	atomic_long_t wakeups_pending;	/* trigger work already pending */
	/*
	 * Joins of the memory-wait list (hfi1_wait_kmem()): this test's DMA
	 * map never fails, so this must stay 0.
	 */
	atomic_long_t kmem_waits;
};

extern struct etest_counters etest_counters;
extern const struct hfi1_tid_platform_ops etest_platform_ops;
extern const struct hfi1_tid_chip_ops etest_chip_ops;

/* The backend's occupancy, in the same terms for both backends. */
struct etest_occupancy {
	u32 flows_used, flow_waiters, rarr_waiters, groups_free;
	u64 tid_waits;
	bool tid_waits_known;
};

/* Destroys the QP's engine object once its last reference is gone. */
static inline void tqp_release(struct tqp *q)
{
	hfi1_tid_qp_destroy(q->h);
	q->h = NULL;
}

/* engine_platform.c */
bool etest_chip_clean(struct etest *t);

/* engine_qp.c: the QP entry points, each taking the QP's s_lock. */
int etest_acquire_flow(struct etest *t, struct tqp *q);
void etest_release_flow(struct etest *t, struct tqp *q);
int etest_acquire_seg(struct etest *t, struct tqp *q);
int etest_release_seg(struct etest *t, struct tqp *q);
int etest_flush(struct etest *t, struct tqp *q);
bool etest_stats(struct etest *t, struct etest_occupancy *out);
int etest_setup(struct etest *t, int nqps, enum tqp_mode mode, bool engine);
void etest_teardown(struct etest *t, struct hfi1_tid_test_result *res);

#endif /* HFI1_TID_ENGINE_TEST_PRIV_H */
