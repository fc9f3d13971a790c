// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * Differential test of the routed stateful group inside the rebuilt
 * hfi1.ko. Off by default; `modprobe hfi1 tid_sdiff=N` runs N random
 * operations on two worlds built from the driver's own structures (a
 * struct hfi1_devdata, a receive context with TID groups, QPs with their
 * struct hfi1_qp_priv, send WQEs whose requests have flow rings; see
 * hfi1_tid_sdiff.c), world A driven by the driver's originals
 * (hfi1_orig_*), world B by the routed Rust (hfi1_tid_route_*), and prints
 *
 *	hfi1_tid_sdiff: <function>: N passed, M failed
 *	hfi1_tid_sdiff: N passed, M failed
 *
 * Both worlds get the same services (hfi1_tid_svc, which route.cocci
 * makes the originals call too): the RcvArray and flow-table writes, the
 * DMA map (identity: the bus address is the page's physical address),
 * the trigger work's queue_work_on(), hfi1_schedule_send(),
 * hfi1_do_send(), hfi1_wait_kmem(), the flow records' kmalloc_node() and
 * kfree(), get_random_u32() and hfi1_set_ctxt_jkey() are recorded, in
 * order, per world. After every operation the two worlds are compared:
 * return values; the recorded calls; the context's flow bitmap and
 * generations, groups (base, size, used, map) and the order and counts of
 * its three group lists, both wait queues in order with their counters,
 * J_KEY and the device's TID-wait count; every QP's s_flags, flow state,
 * tid_enqueue, reference count and trigger-work state; the queued trigger
 * work and the memory-wait list in order; the flow registers; the live DMA
 * mappings; and the flow ring and every field of every flow record of the
 * request operated on (of every request every 256 operations and at the
 * end). Untouched bytes of a flow record hold the same pattern in both
 * worlds: the recording kmalloc_node() fills what it returns with 0x5a,
 * 0xa5, 0xff and 0x00 in turn.
 *
 * The Rust engine departs from the driver in three documented places
 * (tid_flow::setup and qp_wait::store, each with its failing scenario);
 * two show here, and the comparison models exactly those, nothing else:
 *
 *  - a flush of the head of a wait queue wakes the QP behind it: in B the
 *    flush ends with one more queue_work_on() for that QP, whose work (if
 *    it was queued) the test runs at once, so both worlds agree again;
 *  - clear_all also clears a segment whose setup had to wait: in B the op
 *    ends with those unmaps, the record's page sets forgotten and
 *    unmapped (A keeps both); the request is then given up, as every
 *    caller of clear_all in the driver gives it up: it is only freed,
 *    and A's mappings are lost for good (the driver's leak, counted and
 *    taken out of the books).
 *
 * The third, a failed DMA mapping, cannot be compared: the driver never
 * sees one. dma_map_flow() stores dma_map_page()'s result in the 48-bit
 * bitfield pset->addr and passes the field to dma_mapping_error(), which
 * then never equals DMA_MAPPING_ERROR, so the driver programs the
 * RcvArray with the truncated error value where the Rust engine unmaps
 * what it mapped and waits for memory (hfi1_wait_kmem). Failures are
 * injected into the flow records' allocation only; the mapping failure is
 * tested on the software platform (tid-flow's regressions) and on the
 * driver platform's host test (kmod-glue).
 *
 * Locks are the driver's: each QP's s_lock and the context's exp_lock are
 * initialised with the driver's own expressions, so lockdep names their
 * classes as the driver's (&qp->s_lock, &rcd->exp_lock), and every
 * operation is called as the driver calls it, with the QP's s_lock held,
 * so lockdep records the dependency both worlds make.
 *
 * The test runs while the parameter is parsed, before the driver's init,
 * so it needs no device; it points hfi1_tid_svc at its recording services
 * and back.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "hfi.h"
#include "qp.h"
#include "verbs.h"
#include "exp_rcv.h"
#include "tid_rdma.h"
#include "trace.h"
#include "hfi1_tid.h"
#include "hfi1_tid_route.h"
#include "hfi1_tid_testparam.h"
#include "hfi1_tid_sdiff.h"


static ulong tid_sdiff_seed;
module_param(tid_sdiff_seed, ulong, 0644);
MODULE_PARM_DESC(tid_sdiff_seed,
		 "seed of the stateful differential test (0: random); give it before tid_sdiff");

static u64 rng;

static u64 rnd(void)
{
	return hfi1_tid_xorshift(&rng);
}

static u32 rnd_below(u32 n)
{
	return n ? (u32)(rnd() % n) : 0;
}

u32 sd_rnd_below(u32 n)
{
	return rnd_below(n);
}

void sd_mismatch(struct sd_test *t, const char *fmt, ...)
{
	va_list ap;

	if (t->bad)
		return;
	t->bad = true;
	va_start(ap, fmt);
	vsnprintf(t->why, sizeof(t->why), fmt, ap);
	va_end(ap);
}

static const char *const op_name[OP_COUNT] = {
	[OP_SETUP_HW_FLOW] = "hfi1_kern_setup_hw_flow",
	[OP_CLEAR_HW_FLOW] = "hfi1_kern_clear_hw_flow",
	[OP_EXP_RCV_SETUP] = "hfi1_kern_exp_rcv_setup",
	[OP_EXP_RCV_CLEAR] = "hfi1_kern_exp_rcv_clear",
	[OP_EXP_RCV_CLEAR_ALL] = "hfi1_kern_exp_rcv_clear_all",
	[OP_ALLOC_FLOWS] = "hfi1_kern_exp_rcv_alloc_flows",
	[OP_FREE_FLOWS] = "hfi1_kern_exp_rcv_free_flows",
	[OP_CLEAN_SWQE] = "__trdma_clean_swqe",
	[OP_FLUSH_WAIT] = "hfi1_tid_rdma_flush_wait",
	[OP_TRIGGER_RESUME] = "tid_rdma_trigger_resume",
	[OP_KMEM_TICK] = "mem_timer (hfi1_wait_kmem wake-up)",
	[OP_RENEW] = "new request",
};

static struct page *pool_page(struct sd_shared *sh, u32 n)
{
	return nth_page(sh->block[n >> POOL_ORDER], n & ((1 << POOL_ORDER) - 1));
}


/* ---- Requests: their scatter lists -------------------------------------- */

static void free_mrs(struct sd_shared *sh, int qi, int ri)
{
	int k;

	for (k = 0; k < SD_SGES; k++) {
		struct rvt_mregion *mr = sh->mr[qi][ri][k];

		if (mr) {
			kfree(mr->map[0]);
			kfree(mr);
		}
		sh->mr[qi][ri][k] = NULL;
	}
}

/*
 * A new request on (qi, ri) in both worlds, as setup_tid_rdma_wqe() and
 * the verbs layer leave it: seg_len, n_flows, an empty ring, and a scatter
 * list of random page runs (some in memory regions with maps, walked
 * segment by segment).
 */
static bool renew(struct sd_test *t, int qi, int ri)
{
	struct sd_shared *sh = &t->sh;
	u32 seg_pages = 1 + rnd_below(16);
	u32 pages = seg_pages * (1 + rnd_below(5));
	u32 n_flows = 1 + rnd_below(6);
	u32 nsge = 0, k;
	struct rvt_sge *sgl = sh->sgl[qi][ri];
	struct sd_world *w[2] = { &t->a, &t->b };
	int i;

	free_mrs(sh, qi, ri);
	memset(sgl, 0, sizeof(sh->sgl[qi][ri]));
	while (pages && nsge < SD_SGES) {
		/* A run inside one block of the pool. */
		u32 run = min_t(u32, pages, 1 + rnd_below(8));
		u32 at = (rnd_below(POOL_BLOCKS) << POOL_ORDER) +
			 rnd_below((1 << POOL_ORDER) - run + 1);
		struct rvt_sge *sge = &sgl[nsge];
		struct rvt_mregion *mr;

		sge->vaddr = page_address(pool_page(sh, at));
		sge->sge_length = run * PAGE_SIZE;
		sge->length = run * PAGE_SIZE;
		mr = kzalloc(struct_size(mr, map, 1), GFP_KERNEL);
		if (!mr)
			return false;
		sh->mr[qi][ri][nsge] = mr;
		sge->mr = mr;
		if (run > 1 && rnd_below(3) == 0) {
			/* A region with a map: one page per segment, scattered. */
			mr->map[0] = kzalloc(sizeof(*mr->map[0]), GFP_KERNEL);
			if (!mr->map[0])
				return false;
			mr->lkey = 1;
			for (k = 0; k < run; k++) {
				u32 p = k ? rnd_below(POOL_PAGES) : at;

				mr->map[0]->segs[k].vaddr = page_address(pool_page(sh, p));
				mr->map[0]->segs[k].length = PAGE_SIZE;
			}
			sge->vaddr = mr->map[0]->segs[0].vaddr;
			sge->length = PAGE_SIZE;
		}
		pages -= run;
		nsge++;
	}
	sh->ndev4[qi][ri] = 0;
	sh->given_up[qi][ri] = false;
	for (i = 0; i < 2; i++) {
		struct tid_rdma_request *req = &w[i]->q[qi].req[ri].sp->tid_req;

		req->seg_len = seg_pages * PAGE_SIZE;
		req->n_flows = n_flows;
		req->setup_head = 0;
		req->clear_tail = 0;
		req->flow_idx = 0;
		req->isge = 0;
		req->ss.sge = sgl[0];
		req->ss.sg_list = &sgl[1];
		req->ss.num_sge = nsge;
		req->ss.total_len = 0;
	}
	return true;
}

/* ---- One operation in both worlds ---------------------------------------- */

static void clear_logs(struct sd_test *t)
{
	t->a.nlog = 0;
	t->b.nlog = 0;
	t->a.fail_alloc = false;
	t->b.fail_alloc = false;
}

static void one_op(struct sd_test *t, enum sd_op op, int qi, int ri)
{
	struct sd_model m = {};
	bool la = false, lb = false;
	int ret_a = 0, ret_b = 0;

	clear_logs(t);
	sd_model_before(t, &m, op, qi, ri);
	switch (op) {
	case OP_TRIGGER_RESUME:
		ret_a = sd_run_work(&t->a);
		ret_b = sd_run_work(&t->b);
		break;
	case OP_KMEM_TICK:
		ret_a = sd_kmem_tick(&t->a);
		ret_b = sd_kmem_tick(&t->b);
		break;
	case OP_RENEW:
		if (!renew(t, qi, ri))
			sd_mismatch(t, "no memory for a request");
		break;
	default:
		if (op == OP_ALLOC_FLOWS && rnd_below(8) == 0) {
			t->a.fail_alloc = true;
			t->b.fail_alloc = true;
		}
		ret_a = sd_call(&t->a, op, qi, ri, &la);
		ret_b = sd_call(&t->b, op, qi, ri, &lb);
		break;
	}
	t->bad = false;
	CHECK(t, ret_a == ret_b, "returned %d / %d", ret_a, ret_b);
	CHECK(t, la == lb, "*last %d / %d", la, lb);
	sd_model_after(t, &m, op, qi, ri);
	sd_compare_logs(t);
	sd_compare_state(t);
	sd_compare_request(t, qi, ri);
}

/* Picks an operation the driver could make now (from world A's state). */
static enum sd_op pick(struct sd_test *t, int *qi, int *ri)
{
	struct tid_rdma_request *req;
	struct tid_rdma_flow *f;
	u32 r = rnd_below(100);

	*qi = rnd_below(SD_QPS);
	*ri = rnd_below(SD_REQS);
	req = &t->a.q[*qi].req[*ri].sp->tid_req;
	/* Given up after clear_all cleared a waiting setup: freed next. */
	if (t->sh.given_up[*qi][*ri] && r >= 13)
		return r & 1 ? OP_FREE_FLOWS : OP_CLEAN_SWQE;
	if (r < 8)
		return OP_SETUP_HW_FLOW;
	if (r < 13)
		return OP_CLEAR_HW_FLOW;
	if (r < 45) {
		if (!req->flows)
			return OP_ALLOC_FLOWS;
		f = &req->flows[req->setup_head];
		/*
		 * The driver never asks for a segment past the list's end: a
		 * request walked to its end completes (its segments are
		 * cleared, its records freed, the WQE used again).
		 */
		if (!f->npagesets && req->isge >= req->ss.num_sge) {
			if (req->setup_head != req->clear_tail)
				return OP_EXP_RCV_CLEAR;
			return r & 1 ? OP_FREE_FLOWS : OP_CLEAN_SWQE;
		}
		return OP_EXP_RCV_SETUP;
	}
	if (r < 62)
		return OP_EXP_RCV_CLEAR;
	if (r < 65)
		return OP_EXP_RCV_CLEAR_ALL;
	if (r < 70)
		return OP_ALLOC_FLOWS;
	if (r < 76) {
		/*
		 * Freed once nothing is set up, as the driver does (a setup
		 * that waits is cleared first, as its error paths do).
		 */
		if (req->setup_head != req->clear_tail)
			return OP_EXP_RCV_CLEAR;
		if (req->flows && req->flows[req->setup_head].npagesets &&
		    !t->sh.given_up[*qi][*ri])
			return OP_EXP_RCV_CLEAR_ALL;
		if (!req->flows)
			return OP_RENEW;
		return r < 73 ? OP_FREE_FLOWS : OP_CLEAN_SWQE;
	}
	if (r < 80)
		return OP_FLUSH_WAIT;
	if (r < 94)
		return OP_TRIGGER_RESUME;
	return OP_KMEM_TICK;
}

/* Everything given back, in both worlds; then the final comparison. */
static void teardown(struct sd_test *t)
{
	int qi, ri, n;

	for (qi = 0; qi < SD_QPS; qi++) {
		for (ri = 0; ri < SD_REQS; ri++) {
			one_op(t, OP_EXP_RCV_CLEAR_ALL, qi, ri);
			one_op(t, OP_FREE_FLOWS, qi, ri);
			t->total_failed += t->bad;
		}
		one_op(t, OP_CLEAR_HW_FLOW, qi, 0);
		one_op(t, OP_FLUSH_WAIT, qi, 0);
		t->total_failed += t->bad;
	}
	for (n = 0; n < 4 * SD_QPS; n++) {
		one_op(t, OP_TRIGGER_RESUME, 0, 0);
		one_op(t, OP_KMEM_TICK, 0, 0);
		t->total_failed += t->bad;
	}
	t->bad = false;
	for (qi = 0; qi < SD_QPS; qi++) {
		CHECK(t, atomic_read(&t->b.q[qi].qp->refcount) == 1,
		      "QP %d keeps %d references", qi,
		      atomic_read(&t->b.q[qi].qp->refcount));
	}
	/*
	 * Mappings freed with their records (a request freed while a setup
	 * waited, without clear_all) are lost in both worlds alike; beyond
	 * those, A keeps what clear_all left it (sd_compare_state checks it).
	 */
	sd_compare_state(t);
	CHECK(t, !t->a.nmap && !t->b.nmap, "%u / %u mappings left", t->a.nmap,
	      t->b.nmap);
	for (qi = 0; qi < SD_QPS; qi++)
		for (ri = 0; ri < SD_REQS; ri++)
			sd_compare_request(t, qi, ri);
	if (t->bad) {
		pr_err("%s: final state: %s\n", SD, t->why);
		t->total_failed++;
	}
}

static void run_sdiff(unsigned long ops)
{
	struct sd_test *t;
	unsigned long i, passed = 0, failed = 0;
	u32 ngroups, pmtu;
	int k, qi, ri;

	t = vzalloc(sizeof(*t));
	if (!t) {
		pr_err("%s: no memory for the test\n", SD);
		pr_info("%s: 0 passed, 1 failed\n", SD);
		return;
	}
	rng = tid_sdiff_seed ? tid_sdiff_seed : (get_random_u64() | 1);
	ngroups = 2 + rnd_below(7);
	pmtu = rnd_below(2) ? 4096 : 8192;
	pr_info("%s: %lu operations, seed %llu, %u TID groups, pmtu %u\n", SD,
		ops, rng, ngroups, pmtu);
	if (trace_hfi1_tid_flow_alloc_enabled() || trace_hfi1_tid_node_add_enabled()) {
		pr_err("%s: tid tracepoints are on; turn them off first\n", SD);
		goto out;
	}
	for (k = 0; k < POOL_BLOCKS; k++) {
		t->sh.block[k] = alloc_pages(GFP_KERNEL, POOL_ORDER);
		if (!t->sh.block[k])
			goto nomem;
	}
	sd_ops_init();
	hfi1_tid_svc_set(&sd_ops);
	if (sd_world_create(&t->a, false, ngroups, pmtu) ||
	    sd_world_create(&t->b, true, ngroups, pmtu))
		goto nomem;
	t->bad = false;
	sd_compare_logs(t);
	sd_compare_state(t);
	t->tally[OP_RENEW].passed += !t->bad;
	t->tally[OP_RENEW].failed += t->bad;
	if (t->bad)
		pr_err("%s: context init: %s\n", SD, t->why);
	for (qi = 0; qi < SD_QPS; qi++)
		for (ri = 0; ri < SD_REQS; ri++)
			one_op(t, OP_RENEW, qi, ri);
	for (i = 0; i < ops; i++) {
		enum sd_op op = pick(t, &qi, &ri);

		one_op(t, op, qi, ri);
		if ((i & 255) == 255)
			for (k = 0; k < SD_QPS * SD_REQS; k++)
				sd_compare_request(t, k / SD_REQS, k % SD_REQS);
		if (t->bad) {
			if (t->tally[op].failed++ < 3)
				pr_err("%s: %s (op %lu, qp %d, req %d): mismatch: %s\n",
				       SD, op_name[op], i, qi, ri, t->why);
		} else {
			t->tally[op].passed++;
		}
		if ((i & 1023) == 0)
			cond_resched();
	}
	teardown(t);
	for (k = 0; k < OP_COUNT; k++) {
		if (!t->tally[k].passed && !t->tally[k].failed)
			continue;
		pr_info("%s: %s: %lu passed, %lu failed\n", SD, op_name[k],
			t->tally[k].passed, t->tally[k].failed);
		passed += t->tally[k].passed;
		failed += t->tally[k].failed;
	}
	failed += t->total_failed;
	pr_info("%s: documented differences met: %lu flush wake-ups, %lu clear_all unmaps, %u mappings the driver leaked\n",
		SD, t->sh.flush_wakes, t->sh.clear_all_unmaps, t->sh.nleaked);
	goto done;
nomem:
	pr_err("%s: no memory for the test\n", SD);
	failed++;
done:
	hfi1_tid_svc_set(NULL);
	sd_world_destroy(&t->a);
	sd_world_destroy(&t->b);
	for (qi = 0; qi < SD_QPS; qi++)
		for (ri = 0; ri < SD_REQS; ri++)
			free_mrs(&t->sh, qi, ri);
	for (k = 0; k < POOL_BLOCKS; k++)
		if (t->sh.block[k])
			__free_pages(t->sh.block[k], POOL_ORDER);
	pr_info("%s: %lu passed, %lu failed\n", SD, passed, failed);
out:
	vfree(t);
}

HFI1_TID_RUN_PARAM(tid_sdiff, run_sdiff,
		   "run the stateful differential test of the routed functions for N operations (0: off)");
