// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * C adapters between the hfi1 driver's structures and the Rust engine.
 *
 * Each adapter has the signature of the driver function it replaces. It
 * turns the driver's representation into the plain arguments of the Rust
 * ABI (page_address() of each struct page, the bitfield pageset list) and
 * writes the results back exactly as the driver does: a filler set gets
 * only its count written, its idx keeps whatever the array held.
 *
 * Should Rust refuse an input (it cannot for what the driver passes: at
 * most 64 page-aligned, non-NULL pages), the adapter warns once and falls
 * back to the original, so the driver keeps working.
 *
 * The stateful functions (second half of the file) reach the driver's
 * structures through views (struct hfi1_tid_drv_qp / _rcd: pointers to the
 * fields, computed here by the kernel's own compiler) and its services
 * through the table hfi1_tid_svc, which the originals kept beside them
 * call too (route.cocci, hfi1_tid_svc.h).
 *
 * Built with HFI1_TID_ROUTE_BROKEN defined, three adapters are
 * deliberately wrong, to show that the differential tests catch a broken
 * engine (hfi1_tid_diff: two stateless ones; hfi1_tid_sdiff: the flush
 * keeps the queue's QP reference).
 */
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/bug.h>
#include <linux/dma-mapping.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "hfi.h"
#include "qp.h"
#include "verbs.h"
#include "exp_rcv.h"
#include "tid_rdma.h"
#include "hfi1_tid.h"
#include "hfi1_tid_route.h"
#include "hfi1_tid_svc.h"

u32 hfi1_tid_route_kern_flow_generation_next(u32 gen)
{
	u32 next = hfi1_tid_generation_next(gen);

#ifdef HFI1_TID_ROUTE_BROKEN
	if ((gen & 0xff) == 0x7f)
		next++;
#endif
	return next;
}

/*
 * The flow bitmap stays where the driver keeps it (rcd->flow_mask, an
 * unsigned long of which only the low 32 bits are flows); the engine
 * reserves on a copy of those bits, which goes back on success.
 */
int hfi1_tid_route_kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last)
{
	u32 mask = (u32)rcd->flow_mask;
	int ret;

	lockdep_assert_held(&rcd->exp_lock);
	ret = hfi1_tid_flow_reserve(&mask, last);
	if (ret >= 0)
		rcd->flow_mask = (rcd->flow_mask & ~(unsigned long)U32_MAX) | mask;
	return ret;
}

u64 hfi1_tid_route_tid_rdma_opfn_encode(struct tid_rdma_params *p)
{
	struct hfi1_tid_opfn_params q = {
		.qp = p->qp,
		.max_len = p->max_len,
		.jkey = p->jkey,
		.max_read = p->max_read,
		.max_write = p->max_write,
		.timeout = p->timeout,
		.urg = p->urg,
	};

	return hfi1_tid_opfn_encode(&q);
}

/* Writes exactly the fields the driver's decode writes. */
void hfi1_tid_route_tid_rdma_opfn_decode(struct tid_rdma_params *p, u64 data)
{
	struct hfi1_tid_opfn_params q;

	if (WARN_ON_ONCE(hfi1_tid_opfn_decode(data, &q))) {
		hfi1_orig_tid_rdma_opfn_decode(p, data);
		return;
	}
	p->max_len = q.max_len;
	p->jkey = q.jkey;
	p->max_write = q.max_write;
	p->max_read = q.max_read;
	p->qp = q.qp;
	p->urg = q.urg;
	p->timeout = q.timeout;
}

/* Writes Rust's sets back into the driver's bitfield list. */
static void put_sets(struct tid_rdma_pageset *list,
		     const struct hfi1_tid_pageset *sets, u32 from, u32 n)
{
	u32 i;

	for (i = from; i < n; i++) {
		list[i].count = sets[i].count;
		if (sets[i].count)
			list[i].idx = sets[i].idx;
	}
#ifdef HFI1_TID_ROUTE_BROKEN
	if (n >= 4 && list[1].count == 1)
		list[1].count = 2;
#endif
}

static int page_addresses(u64 *addrs, struct page **pages, u32 npages)
{
	u32 i;

	if (npages > TID_RDMA_MAX_PAGES)
		return -EINVAL;
	for (i = 0; i < npages; i++)
		addrs[i] = (u64)(uintptr_t)page_address(pages[i]);
	return 0;
}

u32 hfi1_tid_route_tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow,
						struct page **pages, u32 npages,
						struct tid_rdma_pageset *list)
{
	u64 addrs[TID_RDMA_MAX_PAGES];
	struct hfi1_tid_pageset sets[TID_RDMA_MAX_PAGES];
	int n = page_addresses(addrs, pages, npages);

	if (!n)
		n = hfi1_tid_find_phys_blocks_4k(addrs, npages, sets,
						 TID_RDMA_MAX_PAGES);
	if (WARN_ONCE(n < 0, "hfi1_tid: find_phys_blocks_4k: %d\n", n))
		return hfi1_orig_tid_rdma_find_phys_blocks_4k(flow, pages,
							      npages, list);
	put_sets(list, sets, 0, n);
	return n;
}

u32 hfi1_tid_route_tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow,
						struct page **pages, u32 npages,
						struct tid_rdma_pageset *list)
{
	u64 addrs[TID_RDMA_MAX_PAGES];
	struct hfi1_tid_pageset sets[TID_RDMA_MAX_PAGES];
	int n = page_addresses(addrs, pages, npages);

	if (!n)
		n = hfi1_tid_find_phys_blocks_8k(addrs, npages, sets,
						 TID_RDMA_MAX_PAGES);
	if (WARN_ONCE(n < 0, "hfi1_tid: find_phys_blocks_8k: %d\n", n))
		return hfi1_orig_tid_rdma_find_phys_blocks_8k(flow, pages,
							      npages, list);
	put_sets(list, sets, 0, n);
	return n;
}

u32 hfi1_tid_route_tid_flush_pages(struct tid_rdma_pageset *list, u32 *idx,
				   u32 pages, u32 sets)
{
	struct hfi1_tid_pageset out[TID_RDMA_MAX_PAGES];
	u32 next = *idx;
	int n = hfi1_tid_flush_pages(out, TID_RDMA_MAX_PAGES, sets, &next,
				     pages);

	if (WARN_ONCE(n < 0, "hfi1_tid: flush_pages: %d\n", n))
		return hfi1_orig_tid_flush_pages(list, idx, pages, sets);
	put_sets(list, out, sets, n);
	*idx = next;
	return n;
}

/* ---- The stateful group ------------------------------------------------ */

static size_t drv_spin_lock_irqsave(void *lock)
{
	unsigned long flags;

	spin_lock_irqsave((spinlock_t *)lock, flags);
	return flags;
}

static void drv_spin_unlock_irqrestore(void *lock, size_t flags)
{
	spin_unlock_irqrestore((spinlock_t *)lock, flags);
}

static void drv_lockdep_assert_held(void *lock)
{
	lockdep_assert_held((spinlock_t *)lock);
}

static void drv_qp_get(void *qp)
{
	rvt_get_qp(qp);
}

static void drv_qp_put(void *qp)
{
	rvt_put_qp(qp);
}

static void *drv_qp_of_wait(struct list_head *tid_wait)
{
	return container_of(tid_wait, struct hfi1_qp_priv, tid_wait)->owner;
}

/* What tid_rdma_schedule_tid_wakeup() computes, for any QP of the driver. */
void hfi1_tid_drv_qp_view(void *q, struct hfi1_tid_drv_qp *v)
{
	struct rvt_qp *qp = q;
	struct hfi1_qp_priv *priv = qp->priv;
	struct hfi1_ibport *ibp = to_iport(qp->ibqp.device, qp->port_num);
	struct hfi1_pportdata *ppd = ppd_from_ibp(ibp);
	struct hfi1_devdata *dd = dd_from_ibdev(qp->ibqp.device);

	v->qp = qp;
	v->s_lock = &qp->s_lock;
	v->s_flags = &qp->s_flags;
	v->flow_state = &priv->flow_state;
	v->tid_wait = &priv->tid_wait;
	v->tid_enqueue = &priv->tid_enqueue;
	v->pages = (void **)priv->pages;
	v->wq = ppd->hfi1_wq;
	v->trigger_work = &priv->tid_rdma.trigger_work;
	v->pmtu = qp->pmtu;
	v->cpu = priv->s_sde ? priv->s_sde->cpu :
			       cpumask_first(cpumask_of_node(dd->node));
}

void hfi1_tid_drv_rcd_view(struct hfi1_ctxtdata *rcd,
			   struct hfi1_tid_drv_rcd *v)
{
	struct hfi1_devdata *dd = rcd->dd;

	BUILD_BUG_ON(sizeof(rcd->flow_mask) != sizeof(u64));
	v->rcd = rcd;
	v->dd = dd;
	v->dev = &dd->pcidev->dev;
	v->exp_lock = &rcd->exp_lock;
	v->flow_mask = (u64 *)&rcd->flow_mask;
	v->flows = rcd->flows;
	v->groups = &rcd->groups;
	v->tid_group_list = &rcd->tid_group_list;
	v->tid_used_list = &rcd->tid_used_list;
	v->tid_full_list = &rcd->tid_full_list;
	v->flow_queue = &rcd->flow_queue;
	v->rarr_queue = &rcd->rarr_queue;
	v->jkey = &rcd->jkey;
	v->n_tidwait = &dd->verbs_dev.n_tidwait;
	v->ctxt = rcd->ctxt;
	v->expected_base = rcd->expected_base;
	v->expected_count = rcd->expected_count;
	v->group_size = dd->rcv_entries.group_size;
	v->numa_id = rcd->numa_id;
}

static bool drv_queue_work_on(int cpu, void *wq, void *work)
{
	return queue_work_on(cpu, wq, work);
}

static void drv_schedule_send(void *qp)
{
	hfi1_schedule_send(qp);
}

static void drv_do_send(void *qp, bool in_thread)
{
	hfi1_do_send(qp, in_thread);
}

static void drv_wait_kmem(void *q, u32 *s_flags)
{
	struct rvt_qp *qp = q;

	WARN_ON_ONCE(s_flags != &qp->s_flags);
	hfi1_wait_kmem(qp);
}

static void drv_put_tid(void *dd, u32 index, u32 ty, u64 pa, u16 order)
{
	hfi1_put_tid(dd, index, ty, pa, order);
}

static void drv_wc_fill(void *dd, u32 index)
{
	rcv_array_wc_fill(dd, index);
}

static void drv_write_csr(void *dd, int ctxt, u32 offset, u64 value)
{
	write_uctxt_csr(dd, ctxt, offset, value);
}

static u64 drv_read_csr(void *dd, int ctxt, u32 offset)
{
	return read_uctxt_csr(dd, ctxt, offset);
}

static u64 drv_dma_map_page(void *dev, void *page, size_t offset, size_t size,
			    int dir)
{
	return dma_map_page(dev, page, offset, size, dir);
}

static int drv_dma_mapping_error(void *dev, u64 addr)
{
	return dma_mapping_error(dev, addr);
}

static void drv_dma_unmap_page(void *dev, u64 addr, size_t size, int dir)
{
	dma_unmap_page(dev, addr, size, dir);
}

static void *drv_virt_to_page(u64 vaddr)
{
	return virt_to_page((void *)(uintptr_t)vaddr);
}

static u64 drv_page_address(void *page)
{
	return (u64)(uintptr_t)page_address(page);
}

static u32 drv_mr_lkey(void *mr)
{
	return ((struct rvt_mregion *)mr)->lkey;
}

static void drv_mr_seg(void *m, u32 i, u32 n, u64 *vaddr, u64 *length)
{
	struct rvt_mregion *mr = m;

	*vaddr = (u64)(uintptr_t)mr->map[i]->segs[n].vaddr;
	*length = mr->map[i]->segs[n].length;
}

static void *drv_kmalloc(size_t size, u32 gfp, int node)
{
	return kmalloc_node(size, (__force gfp_t)gfp, node);
}

static void *drv_kcalloc(size_t n, size_t size, u32 gfp, int node)
{
	return kcalloc_node(n, size, (__force gfp_t)gfp, node);
}

static void drv_kfree(void *p)
{
	kfree(p);
}

static u32 drv_random_u32(void)
{
	return get_random_u32();
}

static void drv_set_ctxt_jkey(void *dd, void *rcd, u16 jkey)
{
	hfi1_set_ctxt_jkey(dd, rcd, jkey);
}

/* The driver's own services: the table in use outside the test. */
const struct hfi1_tid_drv_ops hfi1_tid_drv_kernel_ops = {
	.lock = drv_spin_lock_irqsave,
	.unlock = drv_spin_unlock_irqrestore,
	.assert_held = drv_lockdep_assert_held,
	.qp_get = drv_qp_get,
	.qp_put = drv_qp_put,
	.qp_of_wait = drv_qp_of_wait,
	.qp_view = hfi1_tid_drv_qp_view,
	.queue_work_on = drv_queue_work_on,
	.schedule_send = drv_schedule_send,
	.do_send = drv_do_send,
	.wait_kmem = drv_wait_kmem,
	.put_tid = drv_put_tid,
	.wc_fill = drv_wc_fill,
	.write_csr = drv_write_csr,
	.read_csr = drv_read_csr,
	.dma_map = drv_dma_map_page,
	.dma_error = drv_dma_mapping_error,
	.dma_unmap = drv_dma_unmap_page,
	.page_of = drv_virt_to_page,
	.address_of = drv_page_address,
	.mr_lkey = drv_mr_lkey,
	.mr_seg = drv_mr_seg,
	.kmalloc = drv_kmalloc,
	.kcalloc = drv_kcalloc,
	.kfree = drv_kfree,
	.random_u32 = drv_random_u32,
	.set_ctxt_jkey = drv_set_ctxt_jkey,
};

const struct hfi1_tid_drv_ops *hfi1_tid_svc = &hfi1_tid_drv_kernel_ops;

/*
 * Switches the services (the differential test, while the parameter is
 * parsed and no device exists); NULL goes back to the driver's own.
 */
void hfi1_tid_svc_set(const struct hfi1_tid_drv_ops *ops)
{
	WRITE_ONCE(hfi1_tid_svc, ops ? ops : &hfi1_tid_drv_kernel_ops);
}

int hfi1_tid_route_hfi1_kern_exp_rcv_init(struct hfi1_ctxtdata *rcd, int reinit)
{
	struct hfi1_tid_drv_rcd v;

	hfi1_tid_drv_rcd_view(rcd, &v);
	return hfi1_tid_drv_exp_rcv_init(hfi1_tid_svc, &v, reinit,
					 (__force u32)GFP_KERNEL);
}

void hfi1_tid_route_hfi1_kern_init_ctxt_generations(struct hfi1_ctxtdata *rcd)
{
	struct hfi1_tid_drv_rcd v;

	hfi1_tid_drv_rcd_view(rcd, &v);
	hfi1_tid_drv_init_ctxt_generations(hfi1_tid_svc, &v);
}

int hfi1_tid_route_hfi1_kern_setup_hw_flow(struct hfi1_ctxtdata *rcd,
					   struct rvt_qp *qp)
{
	struct hfi1_tid_drv_rcd r;
	struct hfi1_tid_drv_qp q;

	hfi1_tid_drv_rcd_view(rcd, &r);
	hfi1_tid_drv_qp_view(qp, &q);
	return hfi1_tid_drv_setup_hw_flow(hfi1_tid_svc, &r, &q);
}

void hfi1_tid_route_hfi1_kern_clear_hw_flow(struct hfi1_ctxtdata *rcd,
					    struct rvt_qp *qp)
{
	struct hfi1_tid_drv_rcd r;
	struct hfi1_tid_drv_qp q;

	hfi1_tid_drv_rcd_view(rcd, &r);
	hfi1_tid_drv_qp_view(qp, &q);
	hfi1_tid_drv_clear_hw_flow(hfi1_tid_svc, &r, &q);
}

int hfi1_tid_route_hfi1_kern_exp_rcv_setup(struct tid_rdma_request *req,
					   struct rvt_sge_state *ss,
					   bool *last)
{
	struct hfi1_tid_drv_rcd r;
	struct hfi1_tid_drv_qp q;

	hfi1_tid_drv_rcd_view(req->rcd, &r);
	hfi1_tid_drv_qp_view(req->qp, &q);
	return hfi1_tid_drv_exp_rcv_setup(hfi1_tid_svc, &r, &q, req, ss, last);
}

int hfi1_tid_route_hfi1_kern_exp_rcv_clear(struct tid_rdma_request *req)
{
	struct hfi1_tid_drv_rcd r;
	struct hfi1_tid_drv_qp q;

	hfi1_tid_drv_rcd_view(req->rcd, &r);
	hfi1_tid_drv_qp_view(req->qp, &q);
	return hfi1_tid_drv_exp_rcv_clear(hfi1_tid_svc, &r, &q, req);
}

void hfi1_tid_route_hfi1_kern_exp_rcv_clear_all(struct tid_rdma_request *req)
{
	struct hfi1_tid_drv_rcd r;
	struct hfi1_tid_drv_qp q;

	hfi1_tid_drv_rcd_view(req->rcd, &r);
	hfi1_tid_drv_qp_view(req->qp, &q);
	hfi1_tid_drv_exp_rcv_clear_all(hfi1_tid_svc, &r, &q, req);
}

int hfi1_tid_route_hfi1_kern_exp_rcv_alloc_flows(struct tid_rdma_request *req,
						 gfp_t gfp)
{
	return hfi1_tid_drv_alloc_flows(hfi1_tid_svc, req, (__force u32)gfp,
					req->rcd->numa_id);
}

void hfi1_tid_route_hfi1_kern_exp_rcv_free_flows(struct tid_rdma_request *req)
{
	hfi1_tid_drv_free_flows(hfi1_tid_svc, req);
}

void hfi1_tid_route___trdma_clean_swqe(struct rvt_qp *qp, struct rvt_swqe *wqe)
{
	struct hfi1_swqe_priv *p = wqe->priv;

	hfi1_tid_drv_free_flows(hfi1_tid_svc, &p->tid_req);
}

#ifdef HFI1_TID_ROUTE_BROKEN
static void broken_qp_put(void *qp)
{
}
#endif

void hfi1_tid_route_hfi1_tid_rdma_flush_wait(struct rvt_qp *qp)
{
	struct hfi1_qp_priv *priv = qp->priv;
	const struct hfi1_tid_drv_ops *ops = hfi1_tid_svc;
	struct hfi1_tid_drv_rcd r;
	struct hfi1_tid_drv_qp q;
#ifdef HFI1_TID_ROUTE_BROKEN
	struct hfi1_tid_drv_ops broken = *ops;

	/* A flush that keeps the queue's reference to the QP. */
	broken.qp_put = broken_qp_put;
	ops = &broken;
#endif

	hfi1_tid_drv_rcd_view(priv->rcd, &r);
	hfi1_tid_drv_qp_view(qp, &q);
	hfi1_tid_drv_flush_wait(ops, &r, &q);
}

void hfi1_tid_route_tid_rdma_trigger_resume(struct work_struct *work)
{
	struct tid_rdma_qp_params *tr =
		container_of(work, struct tid_rdma_qp_params, trigger_work);
	struct hfi1_qp_priv *priv =
		container_of(tr, struct hfi1_qp_priv, tid_rdma);
	struct hfi1_tid_drv_qp q;

	hfi1_tid_drv_qp_view(priv->owner, &q);
	hfi1_tid_drv_trigger_resume(hfi1_tid_svc, &q);
}
