/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Declarations for routing tid_rdma.c functions to the Rust engine.
 *
 * route.cocci includes this file in tid_rdma.c after the driver's own
 * headers, renames each routed original to hfi1_orig_<name> and adds a
 * static wrapper <name> that calls hfi1_tid_route_<name> (the C adapters in
 * hfi1_tid_route.c). Only types the driver's headers define are used here.
 */
#ifndef HFI1_TID_ROUTE_H
#define HFI1_TID_ROUTE_H

#include <linux/types.h>

#include "hfi1_tid_layout.h"

struct tid_rdma_flow;
struct tid_rdma_pageset;
struct tid_rdma_params;
struct hfi1_ctxtdata;
struct page;

/* Build-time layout checks against the engine's table (never called). */
void hfi1_tid_layout_check(void);

/* The originals, renamed and made global by route.cocci. */
u32 hfi1_orig_kern_flow_generation_next(u32 gen);
int hfi1_orig_kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last);
u64 hfi1_orig_tid_rdma_opfn_encode(struct tid_rdma_params *p);
void hfi1_orig_tid_rdma_opfn_decode(struct tid_rdma_params *p, u64 data);
u32 hfi1_orig_tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow,
					   struct page **pages, u32 npages,
					   struct tid_rdma_pageset *list);
u32 hfi1_orig_tid_flush_pages(struct tid_rdma_pageset *list, u32 *idx,
			      u32 pages, u32 sets);
u32 hfi1_orig_tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow,
					   struct page **pages, u32 npages,
					   struct tid_rdma_pageset *list);

/* The adapters: same signatures, implemented on the Rust engine. */
u32 hfi1_tid_route_kern_flow_generation_next(u32 gen);
int hfi1_tid_route_kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last);
u64 hfi1_tid_route_tid_rdma_opfn_encode(struct tid_rdma_params *p);
void hfi1_tid_route_tid_rdma_opfn_decode(struct tid_rdma_params *p, u64 data);
u32 hfi1_tid_route_tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow,
						struct page **pages, u32 npages,
						struct tid_rdma_pageset *list);
u32 hfi1_tid_route_tid_flush_pages(struct tid_rdma_pageset *list, u32 *idx,
				   u32 pages, u32 sets);
u32 hfi1_tid_route_tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow,
						struct page **pages, u32 npages,
						struct tid_rdma_pageset *list);

#endif /* HFI1_TID_ROUTE_H */
