// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * The self-test's QPs and the two backends they run on. Each QP is a small
 * state machine on the workqueue (take a flow, take a segment, hold them,
 * give them back, next round); as in the driver, every QP entry point is
 * called with the QP's s_lock held, and the engine takes the context's
 * exp_lock inside.
 */
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/cpumask.h>

#include "engine_test_priv.h"

/* ---- backend: the real context or the wait-queue harness ---- */

/* The QP entry points, each called with the QP's s_lock held. */
int etest_acquire_flow(struct etest *t, struct tqp *q)
{
	unsigned long flags;
	int r;

	spin_lock_irqsave(&q->s_lock, flags);
	if (t->engine)
		r = hfi1_tid_setup_hw_flow(t->rcd, q->h);
	else
		r = hfi1_tid_wt_acquire(t->wt, q->h, 0);
	spin_unlock_irqrestore(&q->s_lock, flags);
	return r;
}

void etest_release_flow(struct etest *t, struct tqp *q)
{
	unsigned long flags;

	spin_lock_irqsave(&q->s_lock, flags);
	if (t->engine)
		hfi1_tid_clear_hw_flow(t->rcd, q->h);
	else
		hfi1_tid_wt_release(t->wt, q->h, 0);
	spin_unlock_irqrestore(&q->s_lock, flags);
}

int etest_acquire_seg(struct etest *t, struct tqp *q)
{
	unsigned long flags;
	int r;

	spin_lock_irqsave(&q->s_lock, flags);
	if (t->engine)
		r = hfi1_tid_exp_rcv_setup(t->rcd, q->h, q->req, t->sges, SEG_PAGES);
	else
		r = hfi1_tid_wt_acquire(t->wt, q->h, 1);
	spin_unlock_irqrestore(&q->s_lock, flags);
	return r;
}

int etest_release_seg(struct etest *t, struct tqp *q)
{
	unsigned long flags;
	int r;

	spin_lock_irqsave(&q->s_lock, flags);
	if (t->engine)
		r = hfi1_tid_exp_rcv_clear(t->rcd, q->h, q->req);
	else
		r = hfi1_tid_wt_release(t->wt, q->h, 1);
	spin_unlock_irqrestore(&q->s_lock, flags);
	return r;
}

int etest_flush(struct etest *t, struct tqp *q)
{
	unsigned long flags;
	int r;

	spin_lock_irqsave(&q->s_lock, flags);
	if (t->engine)
		r = hfi1_tid_flush_wait(t->rcd, q->h);
	else
		r = hfi1_tid_wt_flush(t->wt, q->h);
	spin_unlock_irqrestore(&q->s_lock, flags);
	return r;
}

bool etest_stats(struct etest *t, struct etest_occupancy *out)
{
	u64 f, r;

	memset(out, 0, sizeof(*out));
	if (t->engine) {
		struct hfi1_tid_ctx_stats s;

		if (hfi1_tid_ctx_stats(t->rcd, &s))
			return false;
		out->flows_used = s.flows_used;
		out->flow_waiters = s.flow_waiters;
		out->rarr_waiters = s.rarr_waiters;
		out->groups_free = s.groups_free;
		out->tid_waits = s.tid_waits;
		out->tid_waits_known = true;
		return true;
	}
	f = hfi1_tid_wt_stats(t->wt, 0);
	r = hfi1_tid_wt_stats(t->wt, 1);
	if (f == U64_MAX || r == U64_MAX)
		return false;
	out->flows_used = NFLOWS - (u32)(f >> 32);
	out->flow_waiters = (u32)f;
	out->rarr_waiters = (u32)r;
	/* Two segments' worth of RcvArray tokens stand for NGROUPS groups. */
	out->groups_free = (u32)(r >> 32) == 2 ? NGROUPS : 0;
	return true;
}

/* ---- the QPs' send engine: a state machine on the workqueue ---- */

/* A request as the driver makes one per work request: one 16-page segment. */
static struct hfi1_tid_req *tqp_new_req(void)
{
	struct hfi1_tid_req *req = hfi1_tid_req_create(SEG_PAGES * PAGE_SIZE, 1, 4096);

	if (req && hfi1_tid_req_alloc_flows(req)) {
		hfi1_tid_req_destroy(req);
		req = NULL;
	}
	return req;
}

/*
 * The next round is a new work request: a fresh request whose walk starts
 * at the first SGE again (the engine's walk has reached the end of the
 * list).
 */
static int tqp_next_request(struct tqp *q)
{
	if (q->t->engine) {
		int r = hfi1_tid_req_destroy(q->req);

		q->req = NULL;
		if (r)
			return r;
		q->req = tqp_new_req();
		if (!q->req)
			return -ENOMEM;
	}
	return 0;
}

static void tqp_finish(struct tqp *q, int error)
{
	if (error)
		pr_err("%s: QP %u: error %d in state %d\n", HFI1_TID_MOD, q->id,
		       error, q->state);
	q->error = error;
	q->state = 3;
	if (atomic_inc_return(&q->t->done) == q->t->nqps)
		complete(&q->t->all_done);
}

static void tqp_send(struct work_struct *w)
{
	struct tqp *q = container_of(to_delayed_work(w), struct tqp, send_work);
	struct etest *t = q->t;
	int r;

	if (q->flushed || q->state == 3)
		return;
	if (q->state == 0) {
		r = etest_acquire_flow(t, q);
		if (r == -EAGAIN)
			return;		/* queued: a wake-up brings us back */
		if (r)
			return tqp_finish(q, r);
		q->got_flow = true;
		q->state = 1;
		if (q->mode == MODE_FLOW_ONLY)
			return;
	}
	if (q->state == 1) {
		r = etest_acquire_seg(t, q);
		if (r == -EAGAIN)
			return;
		if (r)
			return tqp_finish(q, r);
		q->state = 2;
		/* Hold the flow and the TIDs while others queue behind. */
		queue_delayed_work(t->wq, &q->send_work, 1 + q->id % 3);
		return;
	}
	if (q->state == 2) {
		r = etest_release_seg(t, q);
		etest_release_flow(t, q);
		q->got_flow = false;
		if (r)
			return tqp_finish(q, r);
		if (--q->rounds > 0) {
			r = tqp_next_request(q);
			if (r)
				return tqp_finish(q, r);
			q->state = 0;
			queue_delayed_work(t->wq, &q->send_work, 0);
			return;
		}
		tqp_finish(q, 0);
	}
}

static void tqp_trigger(struct work_struct *w)
{
	struct tqp *q = container_of(w, struct tqp, trigger_work);

	hfi1_tid_trigger_resume(q->h);
}

static struct tqp *tqp_new(struct etest *t, unsigned int id, enum tqp_mode mode)
{
	struct tqp *q = kzalloc(sizeof(*q), GFP_KERNEL);

	if (!q)
		return NULL;
	spin_lock_init(&q->s_lock);
	if (hfi1_tid_s_lock_init(&q->s_lock)) {
		kfree(q);
		return NULL;
	}
	atomic_set(&q->refs, 1);
	INIT_WORK(&q->trigger_work, tqp_trigger);
	INIT_DELAYED_WORK(&q->send_work, tqp_send);
	q->t = t;
	q->id = id;
	q->mode = mode;
	q->rounds = 2;
	q->h = hfi1_tid_qp_create(q, 0x100 + id, id, id % num_online_cpus(),
				  &q->s_lock, NULL);
	if (!q->h) {
		kfree(q);
		return NULL;
	}
	if (t->engine) {
		q->req = tqp_new_req();
		if (!q->req) {
			hfi1_tid_qp_destroy(q->h);
			kfree(q);
			return NULL;
		}
	}
	return q;
}

/* Drops the creator's reference; true if that was the last one. */
static bool tqp_free(struct tqp *q)
{
	bool last;

	if (!q)
		return true;
	cancel_delayed_work_sync(&q->send_work);
	cancel_work_sync(&q->trigger_work);
	if (q->req) {
		unsigned long flags;

		spin_lock_irqsave(&q->s_lock, flags);
		hfi1_tid_exp_rcv_clear_all(q->t->rcd, q->h, q->req);
		spin_unlock_irqrestore(&q->s_lock, flags);
		hfi1_tid_req_destroy(q->req);
	}
	last = atomic_read(&q->refs) == 1;
	if (!last)
		return false;	/* still referenced: leak it rather than free it */
	if (atomic_dec_and_test(&q->refs))
		tqp_release(q);
	kfree(q);
	return true;
}

int etest_setup(struct etest *t, int nqps, enum tqp_mode mode, bool engine)
{
	int i;

	t->engine = engine;
	t->wq = alloc_workqueue("hfi1_tid_test", WQ_MEM_RECLAIM, 0);
	init_completion(&t->all_done);
	if (engine) {
		struct hfi1_tid_ctx_params p = {
			.ctxt = 1, .expected_base = EXP_BASE, .ngroups = NGROUPS,
			.qp_slots = NQPS,
		};

		t->rcd = hfi1_tid_ctx_create(&p, &etest_chip_ops, t, NULL);
		if (!t->rcd)
			return -ENOMEM;
	}
	if (!engine) {
		t->wt = hfi1_tid_wt_create(NQPS, NFLOWS, 2);
		if (!t->wt)
			return -ENOMEM;
	}
	if (!t->wq)
		return -ENOMEM;
	for (i = 0; i < SEG_PAGES; i++) {
		/* Every other page of a fresh block: no two contiguous. */
		t->pages[i] = alloc_pages(GFP_KERNEL, 1);
		if (!t->pages[i])
			return -ENOMEM;
		t->sges[i].vaddr = (u64)(uintptr_t)page_address(t->pages[i]);
		t->sges[i].length = PAGE_SIZE;
	}
	t->nqps = nqps;
	for (i = 0; i < nqps; i++) {
		t->qps[i] = tqp_new(t, i, mode);
		if (!t->qps[i])
			return -ENOMEM;
	}
	return 0;
}

/* Tears everything down; adds what was left over to *leaks. */
void etest_teardown(struct etest *t, struct hfi1_tid_test_result *res)
{
	struct etest_occupancy s;
	int i;

	if (t->wq)
		flush_workqueue(t->wq);
	if ((t->rcd || t->wt) && etest_stats(t, &s)) {
		res->flows_left += s.flows_used;
		res->groups_left += NGROUPS - s.groups_free;
		res->waiters_left += s.flow_waiters + s.rarr_waiters;
	}
	for (i = 0; i < NQPS; i++) {
		if (t->qps[i] && !tqp_free(t->qps[i]))
			res->qps_still_referenced++;
		t->qps[i] = NULL;
	}
	if (t->rcd && hfi1_tid_ctx_destroy(t->rcd))
		res->ctx_busy++;
	if (t->wt && hfi1_tid_wt_destroy(t->wt))
		res->ctx_busy++;
	for (i = 0; i < SEG_PAGES; i++)
		if (t->pages[i])
			__free_pages(t->pages[i], 1);
	if (t->wq)
		destroy_workqueue(t->wq);
}
