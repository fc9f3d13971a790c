/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The driver's services as the routed stateful functions and the originals
 * kept beside them call them: through one table, hfi1_tid_svc, which
 * points at the driver's own functions (hfi1_tid_route.c) except while the
 * in-kernel differential test runs, when it points at the test's
 * recording copies. route.cocci turns the originals' calls of these
 * services (in hfi1_orig_* and the helpers only they use) into calls of
 * the wrappers below; the Rust side calls the same table members.
 *
 * Included by tid_rdma.c (after the driver's headers, route.cocci) and by
 * the differential test.
 */
#ifndef HFI1_TID_SVC_H
#define HFI1_TID_SVC_H

#include "hfi1_tid.h"

extern const struct hfi1_tid_drv_ops *hfi1_tid_svc;

static inline void hfi1_tid_svc_write_uctxt_csr(struct hfi1_devdata *dd,
						int ctxt, u32 offset0,
						u64 value)
{
	hfi1_tid_svc->write_csr(dd, ctxt, offset0, value);
}

static inline void hfi1_tid_svc_hfi1_put_tid(struct hfi1_devdata *dd,
					     u32 index, u32 type,
					     unsigned long pa, u16 order)
{
	hfi1_tid_svc->put_tid(dd, index, type, pa, order);
}

static inline void hfi1_tid_svc_rcv_array_wc_fill(struct hfi1_devdata *dd,
						  u32 index)
{
	hfi1_tid_svc->wc_fill(dd, index);
}

static inline dma_addr_t
hfi1_tid_svc_dma_map_page(struct device *dev, struct page *page,
			  size_t offset, size_t size,
			  enum dma_data_direction dir)
{
	return hfi1_tid_svc->dma_map(dev, page, offset, size, dir);
}

static inline int hfi1_tid_svc_dma_mapping_error(struct device *dev,
						 dma_addr_t addr)
{
	return hfi1_tid_svc->dma_error(dev, addr);
}

static inline void hfi1_tid_svc_dma_unmap_page(struct device *dev,
					       dma_addr_t addr, size_t size,
					       enum dma_data_direction dir)
{
	hfi1_tid_svc->dma_unmap(dev, addr, size, dir);
}

static inline bool hfi1_tid_svc_queue_work_on(int cpu,
					      struct workqueue_struct *wq,
					      struct work_struct *work)
{
	return hfi1_tid_svc->queue_work_on(cpu, wq, work);
}

static inline bool hfi1_tid_svc_hfi1_schedule_send(struct rvt_qp *qp)
{
	hfi1_tid_svc->schedule_send(qp);
	return true;
}

static inline void hfi1_tid_svc_hfi1_do_send(struct rvt_qp *qp, bool in_thread)
{
	hfi1_tid_svc->do_send(qp, in_thread);
}

static inline void hfi1_tid_svc_hfi1_wait_kmem(struct rvt_qp *qp)
{
	hfi1_tid_svc->wait_kmem(qp, &qp->s_flags);
}

static inline void *hfi1_tid_svc_kmalloc_node(size_t size, gfp_t flags,
					      int node)
{
	return hfi1_tid_svc->kmalloc(size, (__force u32)flags, node);
}

static inline void hfi1_tid_svc_kfree(const void *p)
{
	hfi1_tid_svc->kfree((void *)p);
}

static inline u32 hfi1_tid_svc_get_random_u32(void)
{
	return hfi1_tid_svc->random_u32();
}

static inline int hfi1_tid_svc_hfi1_set_ctxt_jkey(struct hfi1_devdata *dd,
						  struct hfi1_ctxtdata *rcd,
						  u16 jkey)
{
	hfi1_tid_svc->set_ctxt_jkey(dd, rcd, jkey);
	return 0;
}

#endif /* HFI1_TID_SVC_H */
