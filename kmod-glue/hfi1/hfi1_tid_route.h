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
struct tid_rdma_request;
struct hfi1_ctxtdata;
struct hfi1_tid_drv_ops;
struct hfi1_tid_drv_qp;
struct hfi1_tid_drv_rcd;
struct page;
struct rvt_qp;
struct rvt_sge_state;
struct rvt_swqe;
struct work_struct;

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

/* The stateful originals, renamed (and made global) by route.cocci. */
int hfi1_orig_hfi1_kern_exp_rcv_init(struct hfi1_ctxtdata *rcd, int reinit);
void hfi1_orig_hfi1_kern_init_ctxt_generations(struct hfi1_ctxtdata *rcd);
int hfi1_orig_hfi1_kern_setup_hw_flow(struct hfi1_ctxtdata *rcd,
				      struct rvt_qp *qp);
void hfi1_orig_hfi1_kern_clear_hw_flow(struct hfi1_ctxtdata *rcd,
				       struct rvt_qp *qp);
int hfi1_orig_hfi1_kern_exp_rcv_setup(struct tid_rdma_request *req,
				      struct rvt_sge_state *ss, bool *last);
int hfi1_orig_hfi1_kern_exp_rcv_clear(struct tid_rdma_request *req);
void hfi1_orig_hfi1_kern_exp_rcv_clear_all(struct tid_rdma_request *req);
int hfi1_orig_hfi1_kern_exp_rcv_alloc_flows(struct tid_rdma_request *req,
					    gfp_t gfp);
void hfi1_orig_hfi1_kern_exp_rcv_free_flows(struct tid_rdma_request *req);
void hfi1_orig___trdma_clean_swqe(struct rvt_qp *qp, struct rvt_swqe *wqe);
void hfi1_orig_hfi1_tid_rdma_flush_wait(struct rvt_qp *qp);
void hfi1_orig_tid_rdma_trigger_resume(struct work_struct *work);

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

int hfi1_tid_route_hfi1_kern_exp_rcv_init(struct hfi1_ctxtdata *rcd,
					  int reinit);
void hfi1_tid_route_hfi1_kern_init_ctxt_generations(struct hfi1_ctxtdata *rcd);
int hfi1_tid_route_hfi1_kern_setup_hw_flow(struct hfi1_ctxtdata *rcd,
					   struct rvt_qp *qp);
void hfi1_tid_route_hfi1_kern_clear_hw_flow(struct hfi1_ctxtdata *rcd,
					    struct rvt_qp *qp);
int hfi1_tid_route_hfi1_kern_exp_rcv_setup(struct tid_rdma_request *req,
					   struct rvt_sge_state *ss,
					   bool *last);
int hfi1_tid_route_hfi1_kern_exp_rcv_clear(struct tid_rdma_request *req);
void hfi1_tid_route_hfi1_kern_exp_rcv_clear_all(struct tid_rdma_request *req);
int hfi1_tid_route_hfi1_kern_exp_rcv_alloc_flows(struct tid_rdma_request *req,
						 gfp_t gfp);
void hfi1_tid_route_hfi1_kern_exp_rcv_free_flows(struct tid_rdma_request *req);
void hfi1_tid_route___trdma_clean_swqe(struct rvt_qp *qp,
				       struct rvt_swqe *wqe);
void hfi1_tid_route_hfi1_tid_rdma_flush_wait(struct rvt_qp *qp);
void hfi1_tid_route_tid_rdma_trigger_resume(struct work_struct *work);

/* The driver's services table and the views the adapters fill. */
extern const struct hfi1_tid_drv_ops hfi1_tid_drv_kernel_ops;
void hfi1_tid_svc_set(const struct hfi1_tid_drv_ops *ops);
void hfi1_tid_drv_qp_view(void *qp, struct hfi1_tid_drv_qp *view);
void hfi1_tid_drv_rcd_view(struct hfi1_ctxtdata *rcd,
			   struct hfi1_tid_drv_rcd *view);

#endif /* HFI1_TID_ROUTE_H */
