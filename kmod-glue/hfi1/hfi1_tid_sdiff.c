// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * The stateful differential test's two worlds, built from the driver's own
 * structures, the recording services both see (the driver's services
 * table, hfi1_tid_svc, pointed here while the test runs), and the calls of
 * each routed function in the two worlds: A through the driver's
 * originals, B through the routed Rust. The test itself is in
 * hfi1_tid_sdiff_run.c.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/pci.h>
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
#include "hfi1_tid_svc.h"
#include "hfi1_tid_sdiff.h"

/* The world whose services record now (NULL: none). */
static struct sd_world *cur;

/* ---- The recording services -------------------------------------------- */

int sd_qp_index(struct sd_world *w, void *qp)
{
	int i;

	for (i = 0; i < SD_QPS; i++)
		if (w->q[i].qp == qp)
			return i;
	return -1;
}

static void record(u32 kind, u64 a, u64 b, u64 c, u64 d)
{
	struct sd_world *w = cur;

	if (!w)
		return;
	if (w->nlog >= SD_LOG) {
		w->overflow = true;
		return;
	}
	w->log[w->nlog++] = (struct sd_event){ kind, a, b, c, d };
}

static void sd_write_csr(void *dd, int ctxt, u32 offset, u64 value)
{
	u32 f = (offset - RCV_TID_FLOW_TABLE) / 8;

	record(EV_CSR, ctxt, offset, value, 0);
	if (cur && f < RXE_NUM_TID_FLOWS)
		cur->csr[f] = value;
}

static u64 sd_read_csr(void *dd, int ctxt, u32 offset)
{
	u32 f = (offset - RCV_TID_FLOW_TABLE) / 8;

	return cur && f < RXE_NUM_TID_FLOWS ? cur->csr[f] : 0;
}

static void sd_put_tid(void *dd, u32 index, u32 ty, u64 pa, u16 order)
{
	record(EV_PUT_TID, index, ty, pa, order);
}

static void sd_wc_fill(void *dd, u32 index)
{
	record(EV_WC_FILL, index, 0, 0, 0);
}

static u64 sd_dma_map(void *dev, void *page, size_t offset, size_t size,
		      int dir)
{
	struct sd_world *w = cur;
	u64 bus;

	if (!w)
		return DMA_MAPPING_ERROR;
	bus = page_to_phys((struct page *)page) + offset;
	if (w->nmap < SD_MAPS) {
		w->map[w->nmap].bus = bus;
		w->map[w->nmap].len = size;
		w->nmap++;
	} else {
		w->overflow = true;
	}
	record(EV_MAP, bus, size, dir, 0);
	return bus;
}

static int sd_dma_error(void *dev, u64 addr)
{
	return addr == DMA_MAPPING_ERROR;
}

static void sd_dma_unmap(void *dev, u64 addr, size_t size, int dir)
{
	struct sd_world *w = cur;
	u32 i;

	if (!w)
		return;
	for (i = 0; i < w->nmap; i++) {
		if (w->map[i].bus == addr && w->map[i].len == size) {
			w->map[i] = w->map[--w->nmap];
			record(EV_UNMAP, addr, size, dir, 0);
			return;
		}
	}
	w->bad_unmaps++;
	record(EV_BAD_UNMAP, addr, size, dir, 0);
}

static bool sd_queue_work_on(int cpu, void *wq, void *w_)
{
	struct work_struct *work = w_;
	struct sd_world *w = cur;
	int i, q = -1;

	if (!w)
		return false;
	for (i = 0; i < SD_QPS; i++)
		if (&w->q[i].priv->tid_rdma.trigger_work == work)
			q = i;
	if (test_and_set_bit(WORK_STRUCT_PENDING_BIT, work_data_bits(work))) {
		record(EV_QUEUE, q, cpu, 0, 0);
		return false;
	}
	record(EV_QUEUE, q, cpu, 1, 0);
	if (w->nwork < ARRAY_SIZE(w->work))
		w->work[w->nwork++] = work;
	else
		w->overflow = true;
	return true;
}

static void sd_schedule_send(void *qp)
{
	record(EV_SEND, cur ? sd_qp_index(cur, qp) : -1, 0, 0, 0);
}

static void sd_do_send(void *qp, bool in_thread)
{
	record(EV_DO_SEND, cur ? sd_qp_index(cur, qp) : -1, in_thread, 0, 0);
}

/* hfi1_wait_kmem() on a device whose only iowait list is memwait. */
static void sd_wait_kmem(void *q, u32 *s_flags)
{
	struct rvt_qp *qp = q;
	struct sd_world *w = cur;

	if (!w)
		return;
	record(EV_KMEM, sd_qp_index(w, qp), s_flags == &qp->s_flags, 0, 0);
	if (*s_flags & RVT_S_WAIT_KMEM)
		return;
	*s_flags |= RVT_S_WAIT_KMEM;
	rvt_get_qp(qp);
	if (w->nkmem < SD_QPS)
		w->kmem[w->nkmem++] = qp;
	else
		w->overflow = true;
}

/*
 * kmalloc_node() leaves its memory uninitialised: the recording one fills
 * it with one of these bytes in turn (the same in both worlds, which
 * allocate in the same order), so that a read of a field the driver never
 * initialises shows as a difference, whatever its bits are taken to mean.
 */
static const u8 sd_fill[] = { 0x5a, 0xa5, 0xff, 0x00 };

static void *sd_kmalloc(size_t size, u32 gfp, int node)
{
	void *p;

	record(EV_KMALLOC, size, gfp, node, 0);
	if (cur && cur->fail_alloc)
		return NULL;
	p = kmalloc_node(size, (__force gfp_t)gfp, node);
	if (p && cur)
		memset(p, sd_fill[cur->nalloc++ % ARRAY_SIZE(sd_fill)], size);
	return p;
}

static void *sd_kcalloc(size_t n, size_t size, u32 gfp, int node)
{
	return kcalloc_node(n, size, (__force gfp_t)gfp, node);
}

static void sd_kfree(void *p)
{
	record(EV_KFREE, !!p, 0, 0, 0);
	kfree(p);
}

static u32 sd_random_u32(void)
{
	u32 r = 0;

	if (cur) {
		cur->rand = cur->rand * 1103515245u + 12345u;
		r = cur->rand;
	}
	record(EV_RANDOM, r, 0, 0, 0);
	return r;
}

static void sd_set_ctxt_jkey(void *dd, void *rcd, u16 jkey)
{
	record(EV_JKEY, jkey, 0, 0, 0);
}

struct hfi1_tid_drv_ops sd_ops;

void sd_ops_init(void)
{
	sd_ops = hfi1_tid_drv_kernel_ops;
	sd_ops.queue_work_on = sd_queue_work_on;
	sd_ops.schedule_send = sd_schedule_send;
	sd_ops.do_send = sd_do_send;
	sd_ops.wait_kmem = sd_wait_kmem;
	sd_ops.put_tid = sd_put_tid;
	sd_ops.wc_fill = sd_wc_fill;
	sd_ops.write_csr = sd_write_csr;
	sd_ops.read_csr = sd_read_csr;
	sd_ops.dma_map = sd_dma_map;
	sd_ops.dma_error = sd_dma_error;
	sd_ops.dma_unmap = sd_dma_unmap;
	sd_ops.kmalloc = sd_kmalloc;
	sd_ops.kcalloc = sd_kcalloc;
	sd_ops.kfree = sd_kfree;
	sd_ops.random_u32 = sd_random_u32;
	sd_ops.set_ctxt_jkey = sd_set_ctxt_jkey;
}

/* ---- The worlds --------------------------------------------------------- */

static void sd_never(struct work_struct *work)
{
	WARN_ONCE(1, "%s: a trigger work item reached a workqueue\n", SD);
}

int sd_world_create(struct sd_world *w, bool rust, u32 ngroups, u32 pmtu)
{
	struct hfi1_devdata *dd;
	struct hfi1_ctxtdata *rcd;
	int i, r;

	w->is_rust = rust;
	w->rand = 0x1234567;
	dd = kvzalloc(sizeof(*dd), GFP_KERNEL);
	w->dd = dd;
	w->ppd = kzalloc(sizeof(*w->ppd), GFP_KERNEL);
	w->pdev = kzalloc(sizeof(*w->pdev), GFP_KERNEL);
	rcd = kzalloc(sizeof(*rcd), GFP_KERNEL);
	w->rcd = rcd;
	if (!dd || !w->ppd || !w->pdev || !rcd)
		return -ENOMEM;
	dd->pport = w->ppd;
	dd->num_pports = 1;
	dd->node = 0;
	dd->pcidev = w->pdev;
	dd->rcv_entries.group_size = 8;
	w->ppd->dd = dd;
	w->ppd->hfi1_wq = NULL;

	rcd->dd = dd;
	rcd->ctxt = 3;
	rcd->numa_id = 0;
	rcd->expected_base = 64;
	rcd->expected_count = ngroups * 8;
	/*
	 * The driver's own init expressions, so lockdep names these classes
	 * as the driver's (&qp->s_lock, &rcd->exp_lock) and records the
	 * order both worlds take them in.
	 */
	spin_lock_init(&rcd->exp_lock);
	hfi1_exp_tid_group_init(rcd);
	INIT_LIST_HEAD(&rcd->flow_queue.queue_head);
	INIT_LIST_HEAD(&rcd->rarr_queue.queue_head);

	for (i = 0; i < SD_QPS; i++) {
		struct sd_qp *s = &w->q[i];
		struct rvt_qp *qp = kzalloc(sizeof(*qp), GFP_KERNEL);
		struct hfi1_qp_priv *priv = kzalloc(sizeof(*priv), GFP_KERNEL);
		int j;

		s->qp = qp;
		s->priv = priv;
		if (!qp || !priv)
			return -ENOMEM;
		qp->priv = priv;
		priv->owner = qp;
		priv->rcd = rcd;
		atomic_set(&qp->refcount, 1);
		init_waitqueue_head(&qp->wait);
		spin_lock_init(&qp->s_lock);
		qp->ibqp.qp_num = 0x100 + i;
		qp->ibqp.device = &dd->verbs_dev.rdi.ibdev;
		qp->port_num = 1;
		qp->pmtu = pmtu;
		priv->flow_state.psn = 0;
		priv->flow_state.index = RXE_NUM_TID_FLOWS;
		priv->flow_state.last_index = RXE_NUM_TID_FLOWS;
		/* tid_rdma.c's KERN_GENERATION_RESERVED (GENERATION_MASK). */
		priv->flow_state.generation = 0xfffff;
		INIT_LIST_HEAD(&priv->tid_wait);
		INIT_WORK(&priv->tid_rdma.trigger_work, sd_never);
		priv->pages = kcalloc(TID_RDMA_MAX_PAGES, sizeof(*priv->pages),
				      GFP_KERNEL);
		if (!priv->pages)
			return -ENOMEM;
		for (j = 0; j < SD_REQS; j++) {
			struct sd_req *q = &s->req[j];

			q->wqe = kzalloc(sizeof(*q->wqe), GFP_KERNEL);
			q->sp = kzalloc(sizeof(*q->sp), GFP_KERNEL);
			if (!q->wqe || !q->sp)
				return -ENOMEM;
			q->wqe->priv = q->sp;
			q->sp->tid_req.qp = qp;
			q->sp->tid_req.rcd = rcd;
			q->sp->tid_req.e.swqe = q->wqe;
		}
	}
	cur = w;
	r = rust ? hfi1_tid_route_hfi1_kern_exp_rcv_init(rcd, 0) :
		   hfi1_orig_hfi1_kern_exp_rcv_init(rcd, 0);
	if (rust)
		hfi1_tid_route_hfi1_kern_init_ctxt_generations(rcd);
	else
		hfi1_orig_hfi1_kern_init_ctxt_generations(rcd);
	cur = NULL;
	return r;
}

void sd_world_destroy(struct sd_world *w)
{
	int i, j;

	for (i = 0; i < SD_QPS; i++) {
		struct sd_qp *s = &w->q[i];

		for (j = 0; j < SD_REQS; j++) {
			if (s->req[j].sp)
				kfree(s->req[j].sp->tid_req.flows);
			kfree(s->req[j].sp);
			kfree(s->req[j].wqe);
		}
		if (s->priv)
			kfree(s->priv->pages);
		kfree(s->priv);
		kfree(s->qp);
	}
	if (w->rcd)
		kfree(w->rcd->groups);
	kfree(w->rcd);
	kfree(w->pdev);
	kfree(w->ppd);
	kvfree(w->dd);
}

/* ---- The operations ------------------------------------------------------ */

int sd_call(struct sd_world *w, enum sd_op op, int qi, int ri, bool *last)
{
	struct sd_qp *s = &w->q[qi];
	struct rvt_qp *qp = s->qp;
	struct tid_rdma_request *req = &s->req[ri].sp->tid_req;
	struct hfi1_ctxtdata *rcd = w->rcd;
	bool b = w->is_rust;
	unsigned long flags;
	int ret = 0;

	cur = w;
	spin_lock_irqsave(&qp->s_lock, flags);
	switch (op) {
	case OP_SETUP_HW_FLOW:
		ret = b ? hfi1_tid_route_hfi1_kern_setup_hw_flow(rcd, qp) :
			  hfi1_orig_hfi1_kern_setup_hw_flow(rcd, qp);
		break;
	case OP_CLEAR_HW_FLOW:
		if (b)
			hfi1_tid_route_hfi1_kern_clear_hw_flow(rcd, qp);
		else
			hfi1_orig_hfi1_kern_clear_hw_flow(rcd, qp);
		break;
	case OP_EXP_RCV_SETUP:
		ret = b ? hfi1_tid_route_hfi1_kern_exp_rcv_setup(req, &req->ss, last) :
			  hfi1_orig_hfi1_kern_exp_rcv_setup(req, &req->ss, last);
		break;
	case OP_EXP_RCV_CLEAR:
		ret = b ? hfi1_tid_route_hfi1_kern_exp_rcv_clear(req) :
			  hfi1_orig_hfi1_kern_exp_rcv_clear(req);
		break;
	case OP_EXP_RCV_CLEAR_ALL:
		if (b)
			hfi1_tid_route_hfi1_kern_exp_rcv_clear_all(req);
		else
			hfi1_orig_hfi1_kern_exp_rcv_clear_all(req);
		break;
	case OP_ALLOC_FLOWS:
		ret = b ? hfi1_tid_route_hfi1_kern_exp_rcv_alloc_flows(req, GFP_ATOMIC) :
			  hfi1_orig_hfi1_kern_exp_rcv_alloc_flows(req, GFP_ATOMIC);
		break;
	case OP_FREE_FLOWS:
		if (b)
			hfi1_tid_route_hfi1_kern_exp_rcv_free_flows(req);
		else
			hfi1_orig_hfi1_kern_exp_rcv_free_flows(req);
		break;
	case OP_CLEAN_SWQE:
		if (b)
			hfi1_tid_route___trdma_clean_swqe(qp, s->req[ri].wqe);
		else
			hfi1_orig___trdma_clean_swqe(qp, s->req[ri].wqe);
		break;
	case OP_FLUSH_WAIT:
		if (b)
			hfi1_tid_route_hfi1_tid_rdma_flush_wait(qp);
		else
			hfi1_orig_hfi1_tid_rdma_flush_wait(qp);
		break;
	default:
		break;
	}
	spin_unlock_irqrestore(&qp->s_lock, flags);
	cur = NULL;
	return ret;
}

/* The QP of queued trigger work item `k`. */
int sd_work_qp(struct sd_world *w, u32 k)
{
	int i;

	for (i = 0; k < w->nwork && i < SD_QPS; i++)
		if (&w->q[i].priv->tid_rdma.trigger_work == w->work[k])
			return i;
	return -1;
}

/* Runs queued trigger work item `k`, as the workqueue would. */
static int run_work_at(struct sd_world *w, u32 k)
{
	struct work_struct *work;
	int q;

	if (k >= w->nwork)
		return -1;
	q = sd_work_qp(w, k);
	work = w->work[k];
	memmove(&w->work[k], &w->work[k + 1], (w->nwork - k - 1) * sizeof(w->work[0]));
	w->nwork--;
	clear_bit(WORK_STRUCT_PENDING_BIT, work_data_bits(work));
	cur = w;
	if (w->is_rust)
		hfi1_tid_route_tid_rdma_trigger_resume(work);
	else
		hfi1_orig_tid_rdma_trigger_resume(work);
	cur = NULL;
	return q;
}

/* Runs the oldest queued trigger work item. */
int sd_run_work(struct sd_world *w)
{
	return run_work_at(w, 0);
}

/* Runs the newest queued trigger work item. */
int sd_run_work_last(struct sd_world *w)
{
	return w->nwork ? run_work_at(w, w->nwork - 1) : -1;
}

/* Removes one mapping equal to `m` from `maps[0..n)`; the new count. */
u32 sd_map_remove(struct sd_map *maps, u32 n, const struct sd_map *m)
{
	u32 i;

	for (i = 0; i < n; i++) {
		if (maps[i].bus == m->bus && maps[i].len == m->len) {
			maps[i] = maps[n - 1];
			return n - 1;
		}
	}
	return n;
}

/* One tick of the memory-wait timer: mem_timer() -> hfi1_qp_wakeup(). */
int sd_kmem_tick(struct sd_world *w)
{
	struct rvt_qp *qp;
	unsigned long flags;

	if (!w->nkmem)
		return -1;
	qp = w->kmem[0];
	memmove(&w->kmem[0], &w->kmem[1], --w->nkmem * sizeof(w->kmem[0]));
	cur = w;
	spin_lock_irqsave(&qp->s_lock, flags);
	if (qp->s_flags & RVT_S_WAIT_KMEM) {
		qp->s_flags &= ~RVT_S_WAIT_KMEM;
		hfi1_tid_svc->schedule_send(qp);
	}
	spin_unlock_irqrestore(&qp->s_lock, flags);
	cur = NULL;
	rvt_put_qp(qp);
	return sd_qp_index(w, qp);
}

