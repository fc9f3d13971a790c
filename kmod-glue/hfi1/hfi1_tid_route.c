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
 * Built with HFI1_TID_ROUTE_BROKEN defined, two adapters are deliberately
 * wrong, to show that the differential test catches a broken engine.
 */
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/bug.h>

#include "hfi.h"
#include "tid_rdma.h"
#include "hfi1_tid.h"
#include "hfi1_tid_route.h"

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
