// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * Self-test of the wait queues and the stateful engine on
 * real kernel primitives: named
 * spinlocks, a real workqueue for the deferred wake-ups (queue_work_on with
 * its "already pending" answer), reference-counted QPs, DMA mappings that
 * are counted, and get_random_u32() for the flow generations.
 *
 * Phase 1 ("exhaustion"): many QPs, each a small state machine on the
 * workqueue, set up a hardware flow and one segment, hold them a few
 * jiffies, and give them back. There are fewer flows than QPs and room in
 * the RcvArray for only two segments at a time, so most QPs are queued and
 * only progress when a deferred wake-up runs their send engine again.
 *
 * Phase 2 ("flush"): all 32 flows are taken, more QPs queue for one, half
 * of those are flushed (QP reset) while queued; releasing the flows must
 * wake only the others, and every reference must come back.
 *
 * Both phases run on two backends: the wait-queue harness (hfi1_tid_wt_*:
 * counted flow and RcvArray tokens taken and given back the way tid-flow
 * takes flows and TIDs, on the real qp-wait code), then the real receive
 * context (hfi1_tid_ctx_*, hfi1_tid_setup_hw_flow, hfi1_tid_exp_rcv_*,
 * ...). Each round of a QP is a new request, as each work request is in
 * the driver.
 *
 * As in the driver, the send engine calls every QP entry point with the
 * QP's s_lock held (the be_* wrappers take it); the engine asserts that
 * with lockdep_assert_held and takes the context's exp_lock inside, so
 * lockdep records s_lock -> exp_lock from these calls.
 */
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/io.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/completion.h>
#include <linux/random.h>
#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/jiffies.h>
#include <linux/delay.h>

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

static atomic_long_t extra_refs = ATOMIC_LONG_INIT(0);
static atomic_long_t dma_live = ATOMIC_LONG_INIT(0);
static atomic_long_t wakeups_queued = ATOMIC_LONG_INIT(0);
static atomic_long_t wakeups_pending = ATOMIC_LONG_INIT(0);

/* ---- platform callbacks ---- */

static void p_qp_get(void *cookie)
{
	struct tqp *q = cookie;

	atomic_inc(&q->refs);
	atomic_long_inc(&extra_refs);
}

static void tqp_release(struct tqp *q)
{
	hfi1_tid_qp_destroy(q->h);
	q->h = NULL;
}

static void p_qp_put(void *cookie)
{
	struct tqp *q = cookie;

	atomic_long_dec(&extra_refs);
	if (atomic_dec_and_test(&q->refs))
		tqp_release(q);
}

static bool p_queue_trigger(void *cookie, u32 cpu)
{
	struct tqp *q = cookie;
	bool queued;

	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		cpu = WORK_CPU_UNBOUND;
	queued = queue_work_on(cpu, q->t->wq, &q->trigger_work);
	atomic_long_inc(queued ? &wakeups_queued : &wakeups_pending);
	return queued;
}

static void p_schedule_send(void *cookie)
{
	struct tqp *q = cookie;

	atomic_inc(&q->sends);
	queue_delayed_work(q->t->wq, &q->send_work, 0);
}

static void p_do_send(void *cookie)
{
	p_schedule_send(cookie);
}

static int p_dma_map(void *dev, u64 addr, u32 len, u64 *bus)
{
	if (!virt_addr_valid((void *)(uintptr_t)addr))
		return -EFAULT;
	*bus = virt_to_phys((void *)(uintptr_t)addr);
	atomic_long_inc(&dma_live);
	return 0;
}

static void p_dma_unmap(void *dev, u64 bus, u32 len)
{
	atomic_long_dec(&dma_live);
}

/*
 * The memory-wait list of hfi1_wait_kmem(): this test's DMA map never
 * fails, so nobody may ever join it.
 */
static atomic_long_t kmem_waits = ATOMIC_LONG_INIT(0);

static void p_wait_kmem(void *cookie, u32 *s_flags)
{
	*s_flags |= 0x2000; /* RVT_S_WAIT_KMEM */
	atomic_long_inc(&kmem_waits);
}

static u32 p_random_u32(void)
{
	return get_random_u32();
}

/*
 * The second leg's work: these phases post no WRITE, so the engine must
 * never ask for it (the READ and WRITE test's QPs run on the Rust side's
 * own scheduler).
 */
static bool p_queue_tid_send(void *cookie, u32 cpu)
{
	WARN_ONCE(1, "hfi1_tid_selftest: second leg queued without a WRITE\n");
	return false;
}

static const struct hfi1_tid_platform_ops platform_ops = {
	.spin_lock_init = hfi1_tid_spin_lock_init,
	.spin_lock_irqsave = hfi1_tid_spin_lock_irqsave,
	.spin_unlock_irqrestore = hfi1_tid_spin_unlock_irqrestore,
	.lockdep_assert_held = hfi1_tid_lockdep_assert_held,
	.qp_get = p_qp_get,
	.qp_put = p_qp_put,
	.queue_trigger = p_queue_trigger,
	.schedule_send = p_schedule_send,
	.do_send = p_do_send,
	.dma_map = p_dma_map,
	.dma_unmap = p_dma_unmap,
	.wait_kmem = p_wait_kmem,
	.random_u32 = p_random_u32,
	.queue_tid_send = p_queue_tid_send,
};

/* The chip: a register file, written under exp_lock. */
static void chip_bad(struct etest *t, const char *what, u32 at, u64 v)
{
	if (t->chip.bad++ < 4)
		pr_err("%s: chip: %s (entry/flow %u, value %#llx)\n", HFI1_TID_MOD,
		       what, at, v);
}

static bool is_test_page_bus(struct etest *t, u64 pa)
{
	int i;

	for (i = 0; i < SEG_PAGES; i++)
		if (t->pages[i] && pa == virt_to_phys(page_address(t->pages[i])))
			return true;
	return false;
}

static void c_put_tid(void *chip, u32 rcventry, u32 ty, u64 pa, u32 order)
{
	struct etest *t = chip;
	u32 e = rcventry - EXP_BASE;

	t->chip.tids++;
	if (rcventry < EXP_BASE || e >= NENTRIES) {
		chip_bad(t, "RcvArray entry outside the context", rcventry, pa);
		return;
	}
	if (ty == HFI1_TID_RCV_EXPECTED) {
		if (t->chip.expected[e]) {
			chip_bad(t, "EXPECTED over a programmed entry", rcventry, pa);
			return;
		}
		if (order != 1 || !is_test_page_bus(t, pa)) {
			chip_bad(t, "EXPECTED with a wrong address or order", rcventry, pa);
			return;
		}
		t->chip.expected[e] = true;
	} else if (ty == HFI1_TID_RCV_INVALID) {
		if (pa || order) {
			chip_bad(t, "INVALID with an address or order", rcventry, pa);
			return;
		}
		if (!t->chip.expected[e]) {
			chip_bad(t, "INVALID over a free entry", rcventry, pa);
			return;
		}
		t->chip.expected[e] = false;
	} else {
		chip_bad(t, "unknown RcvArray type", rcventry, ty);
	}
}

static void c_wc_fill(void *chip, u32 rcventry)
{
	struct etest *t = chip;

	t->chip.fills++;
	if (rcventry < EXP_BASE || rcventry - EXP_BASE >= NENTRIES)
		chip_bad(t, "write-combining fill outside the context", rcventry, 0);
}

static void c_write_flow(void *chip, u32 flow, u64 value)
{
	struct etest *t = chip;
	u64 gen = (value >> 11) & GEN_RESERVED;
	u64 want = (gen << 11) | FLOW_FIXED_BITS |
		   (gen == GEN_RESERVED ? 0 : FLOW_HDR_SUPP);

	t->chip.writes++;
	if (flow >= NFLOWS) {
		chip_bad(t, "flow index out of range", flow, value);
		return;
	}
	if (value != want) {
		chip_bad(t, "flow register value the driver never writes", flow, value);
		return;
	}
	if (gen != GEN_RESERVED && t->chip.armed[flow]) {
		chip_bad(t, "arming an armed flow", flow, value);
		return;
	}
	t->chip.armed[flow] = gen != GEN_RESERVED;
	t->chip.flow[flow] = value;
}

/* Every write was one the driver makes, and nothing is left programmed. */
static bool chip_clean(struct etest *t)
{
	int i;

	if (!t->engine)
		return true;
	for (i = 0; i < NENTRIES; i++)
		if (t->chip.expected[i])
			return false;
	for (i = 0; i < NFLOWS; i++)
		if (t->chip.armed[i])
			return false;
	return t->chip.bad == 0;
}

static u64 c_read_flow(void *chip, u32 flow)
{
	struct etest *t = chip;

	return flow < NFLOWS ? t->chip.flow[flow] : 0;
}

static const struct hfi1_tid_chip_ops chip_ops = {
	.put_tid = c_put_tid,
	.wc_fill = c_wc_fill,
	.write_flow = c_write_flow,
	.read_flow = c_read_flow,
};


/* ---- backend: the real context or the wait-queue harness ---- */

struct be_stats {
	u32 flows_used, flow_waiters, rarr_waiters, groups_free;
	u64 tid_waits;
	bool tid_waits_known;
};

/* The QP entry points, each called with the QP's s_lock held. */
static int be_acquire_flow(struct etest *t, struct tqp *q)
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

static void be_release_flow(struct etest *t, struct tqp *q)
{
	unsigned long flags;

	spin_lock_irqsave(&q->s_lock, flags);
	if (t->engine)
		hfi1_tid_clear_hw_flow(t->rcd, q->h);
	else
		hfi1_tid_wt_release(t->wt, q->h, 0);
	spin_unlock_irqrestore(&q->s_lock, flags);
}

static int be_acquire_seg(struct etest *t, struct tqp *q)
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

static int be_release_seg(struct etest *t, struct tqp *q)
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

static int be_flush(struct etest *t, struct tqp *q)
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

static bool be_stats(struct etest *t, struct be_stats *out)
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
		r = be_acquire_flow(t, q);
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
		r = be_acquire_seg(t, q);
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
		r = be_release_seg(t, q);
		be_release_flow(t, q);
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

static int etest_setup(struct etest *t, int nqps, enum tqp_mode mode, bool engine)
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

		t->rcd = hfi1_tid_ctx_create(&p, &chip_ops, t, NULL);
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
static void etest_teardown(struct etest *t, struct hfi1_tid_test_result *res)
{
	struct be_stats s;
	int i;

	if (t->wq)
		flush_workqueue(t->wq);
	if ((t->rcd || t->wt) && be_stats(t, &s)) {
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

static void phase_exhaustion(struct hfi1_tid_test_result *res, bool engine)
{
	struct etest *t = kzalloc(sizeof(*t), GFP_KERNEL);
	struct be_stats s;
	int i, errors = 0, sends = 0;
	long waited;

	atomic_long_set(&wakeups_queued, 0);
	atomic_long_set(&wakeups_pending, 0);
	if (!t || etest_setup(t, NQPS, MODE_SEGMENT, engine)) {
		res->failed++;
		pr_err("%s: exhaustion: setup failed\n", HFI1_TID_MOD);
		goto out;
	}
	for (i = 0; i < NQPS; i++)
		queue_delayed_work(t->wq, &t->qps[i]->send_work, 0);
	waited = wait_for_completion_timeout(&t->all_done, 60 * HZ);
	flush_workqueue(t->wq);
	for (i = 0; i < NQPS; i++) {
		errors += t->qps[i]->error != 0;
		sends += atomic_read(&t->qps[i]->sends);
	}
	HFI1_TID_CHECK(res, waited > 0);
	HFI1_TID_CHECK(res, atomic_read(&t->done) == NQPS);
	HFI1_TID_CHECK(res, errors == 0);
	/* Most QPs had to wait: wake-ups ran their send engines again. */
	HFI1_TID_CHECK(res, sends > NQPS);
	HFI1_TID_CHECK(res, be_stats(t, &s));
	HFI1_TID_CHECK(res, !s.tid_waits_known || s.tid_waits >= NQPS);
	HFI1_TID_CHECK(res, s.flows_used == 0 && s.groups_free == NGROUPS);
	HFI1_TID_CHECK(res, s.flow_waiters == 0 && s.rarr_waiters == 0);
	HFI1_TID_CHECK(res, !engine || (t->chip.tids > 0 && t->chip.writes > NFLOWS));
	HFI1_TID_CHECK(res, chip_clean(t));
	HFI1_TID_CHECK(res, atomic_long_read(&dma_live) == 0);
	pr_info("%s: exhaustion (%s): %d QPs x 2 rounds, %d send-engine runs, %ld wake-ups queued, %ld already pending\n",
		HFI1_TID_MOD, engine ? "engine" : "wait queues", NQPS, sends,
		atomic_long_read(&wakeups_queued), atomic_long_read(&wakeups_pending));
out:
	if (t)
		etest_teardown(t, res);
	kfree(t);
}

static void phase_flush(struct hfi1_tid_test_result *res, bool engine)
{
	struct etest *t = kzalloc(sizeof(*t), GFP_KERNEL);
	struct be_stats s;
	int i, tries, queued = 0, woken = 0, wrongly_woken = 0;

	if (!t || etest_setup(t, NFLOWS + NWAITERS, MODE_FLOW_ONLY, engine)) {
		res->failed++;
		pr_err("%s: flush: setup failed\n", HFI1_TID_MOD);
		goto out;
	}
	for (i = 0; i < NFLOWS; i++)
		HFI1_TID_CHECK(res, be_acquire_flow(t, t->qps[i]) == 0);
	for (i = NFLOWS; i < NFLOWS + NWAITERS; i++) {
		queued += be_acquire_flow(t, t->qps[i]) == -EAGAIN;
		HFI1_TID_CHECK(res, hfi1_tid_qp_waiting(t->qps[i]->h) == 1);
		/* The queue holds a reference. */
		HFI1_TID_CHECK(res, atomic_read(&t->qps[i]->refs) == 2);
	}
	HFI1_TID_CHECK(res, queued == NWAITERS);
	/* QP reset of every other waiter while it is queued. */
	for (i = NFLOWS; i < NFLOWS + NWAITERS; i += 2) {
		t->qps[i]->flushed = true;
		HFI1_TID_CHECK(res, be_flush(t, t->qps[i]) == 0);
		HFI1_TID_CHECK(res, hfi1_tid_qp_waiting(t->qps[i]->h) == 0);
		HFI1_TID_CHECK(res, atomic_read(&t->qps[i]->refs) == 1);
	}
	flush_workqueue(t->wq);
	HFI1_TID_CHECK(res, be_stats(t, &s) && s.flows_used == NFLOWS &&
			    s.flow_waiters == NWAITERS / 2);
	/* Release the flows: the remaining waiters must get them. */
	for (i = 0; i < NFLOWS; i++) {
		be_release_flow(t, t->qps[i]);
		t->qps[i]->got_flow = false;
	}
	/*
	 * Each waiter that gets a flow wakes the next through its trigger
	 * work, so the chain of work items grows while we flush: wait until
	 * it has settled (or give up after five seconds).
	 */
	for (tries = 0; tries < 500; tries++) {
		flush_workqueue(t->wq);
		woken = 0;
		for (i = NFLOWS; i < NFLOWS + NWAITERS; i++)
			woken += !t->qps[i]->flushed && t->qps[i]->got_flow;
		if (woken == NWAITERS / 2)
			break;
		msleep(10);
	}
	flush_workqueue(t->wq);
	woken = 0;
	for (i = NFLOWS; i < NFLOWS + NWAITERS; i++) {
		if (t->qps[i]->flushed)
			wrongly_woken += atomic_read(&t->qps[i]->sends);
		else
			woken += t->qps[i]->got_flow;
	}
	HFI1_TID_CHECK(res, woken == NWAITERS / 2);
	HFI1_TID_CHECK(res, wrongly_woken == 0);
	HFI1_TID_CHECK(res, be_stats(t, &s) && s.flows_used == NWAITERS / 2 &&
			    s.flow_waiters == 0);
	for (i = NFLOWS; i < NFLOWS + NWAITERS; i++) {
		if (t->qps[i]->got_flow)
			be_release_flow(t, t->qps[i]);
		HFI1_TID_CHECK(res, atomic_read(&t->qps[i]->refs) == 1);
	}
	flush_workqueue(t->wq);
	HFI1_TID_CHECK(res, be_stats(t, &s) && s.flows_used == 0);
	HFI1_TID_CHECK(res, chip_clean(t));
	pr_info("%s: flush (%s): %d queued, %d flushed, %d woken after release\n",
		HFI1_TID_MOD, engine ? "engine" : "wait queues", queued,
		NWAITERS / 2, woken);
out:
	if (t)
		etest_teardown(t, res);
	kfree(t);
}

/*
 * Phases 3 to 5 ("read", "write", "mixed"): TID RDMA READs, TID RDMA
 * WRITEs, and both mixed on each QP, between requester and responder
 * engines (prototest.rs): kernel spinlocks of the r_lock, s_lock and
 * exp_lock classes and kmalloc, each side's data placed by its software
 * chip and compared byte by byte, nothing held at the end.
 */
enum proto_phase { PHASE_READ, PHASE_WRITE, PHASE_MIXED };

static void phase_proto(struct hfi1_tid_test_result *res, enum proto_phase p)
{
	static const char *const names[] = { "READ", "WRITE", "mixed" };
	unsigned int failed_before = res->failed;
	struct hfi1_tid_proto_result r = {};
	int ret;

	switch (p) {
	case PHASE_READ:
		ret = hfi1_tid_read_test(&r);
		break;
	case PHASE_WRITE:
		ret = hfi1_tid_write_test(&r);
		break;
	default:
		ret = hfi1_tid_mix_test(&r);
		break;
	}
	HFI1_TID_CHECK(res, ret == 0);
	HFI1_TID_CHECK(res, r.posted > 0 && r.completed == r.posted);
	HFI1_TID_CHECK(res, r.failed == 0 && r.errors == 0 && r.timeouts == 0);
	HFI1_TID_CHECK(res, r.verified_bytes > 0 && r.mismatched_bytes == 0);
	HFI1_TID_CHECK(res, r.left_over == 0);
	switch (p) {
	case PHASE_READ:
		/* The requesters had to wait for RcvArray space. */
		HFI1_TID_CHECK(res, r.writes == 0 && r.tid_waits > 0);
		break;
	case PHASE_WRITE:
		/*
		 * Every request a TID WRITE, its data received by the
		 * responder and TID-ACKed; the responders ran out of
		 * RcvArray space and RNR-NAKed, and the RNR timer
		 * brought the WRITE_REQs back.
		 */
		HFI1_TID_CHECK(res, r.writes == r.posted && r.write_segments > 0);
		HFI1_TID_CHECK(res, r.tid_acks > 0 && r.second_leg_runs > 0);
		HFI1_TID_CHECK(res, r.rnr_naks > 0 && r.rnr_timeouts > 0);
		break;
	default:
		HFI1_TID_CHECK(res, r.writes > 0 && r.writes < r.posted);
		HFI1_TID_CHECK(res, r.segments > 0 && r.write_segments > 0);
		break;
	}
	res->proto_left += r.left_over;
	pr_info("%s: %s (engines): %llu of %llu requests (%llu WRITEs) %s, %llu bytes checked, %llu mismatched, %llu READ segments, %llu RcvArray waits, %llu WRITE segments, %llu RNR NAKs, %llu RNR timeouts, %llu TID ACKs, %llu second legs, %llu+%llu packets, %llu retry timeouts, %llu errors, %llu steps, %llu left over\n",
		HFI1_TID_MOD, names[p], r.completed, r.posted, r.writes,
		res->failed == failed_before ? "passed" : "FAILED",
		r.verified_bytes, r.mismatched_bytes, r.segments, r.tid_waits,
		r.write_segments, r.rnr_naks, r.rnr_timeouts, r.tid_acks,
		r.second_leg_runs, r.to_responder, r.to_requester, r.timeouts,
		r.errors, r.steps, r.left_over);
}

void hfi1_tid_engine_test(struct hfi1_tid_test_result *res)
{
	int r = hfi1_tid_platform_register(&platform_ops);

	HFI1_TID_CHECK(res, r == 0);
	if (r)
		return;
	/* A second table is refused; a table with a hole would be too. */
	HFI1_TID_CHECK(res, hfi1_tid_platform_register(&platform_ops) == -EBUSY);
	phase_exhaustion(res, false);
	phase_flush(res, false);
	phase_exhaustion(res, true);
	phase_flush(res, true);
	phase_proto(res, PHASE_READ);
	phase_proto(res, PHASE_WRITE);
	phase_proto(res, PHASE_MIXED);
	HFI1_TID_CHECK(res, atomic_long_read(&extra_refs) == 0);
	HFI1_TID_CHECK(res, atomic_long_read(&dma_live) == 0);
	HFI1_TID_CHECK(res, atomic_long_read(&kmem_waits) == 0);
	res->objects_left = hfi1_tid_live_objects();
	res->qp_refs_left = atomic_long_read(&extra_refs);
	res->dma_left = atomic_long_read(&dma_live);
	HFI1_TID_CHECK(res, res->objects_left == 0);
	HFI1_TID_CHECK(res, hfi1_tid_platform_unregister() == 0);
}
