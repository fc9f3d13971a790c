// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//
// Routes functions of drivers/infiniband/hw/hfi1/tid_rdma.c to the Rust
// engine, in the rename-and-wrap shape: each original keeps its body under
// the global name hfi1_orig_<name> (declared in hfi1_tid_route.h, so the
// differential tests can call it), and a wrapper with the original name and
// signature (static if the original was) calls the C adapter
// hfi1_tid_route_<name>, which converts the driver's structures and calls
// Rust. Callers are untouched.
//
// The stateful originals (second half) must stay entirely the driver's
// code and see the same services as the routed Rust: their calls of the
// driver's services (hfi1_put_tid, write_uctxt_csr, dma_map_page, ...) go
// through hfi1_tid_svc (hfi1_tid_svc.h), in their own bodies and in the
// helpers only they use; they call each other's originals, the originals
// of the stateless routed functions, and originals' copies of the two
// helpers the live RESYNC code shares (kern_set_hw_flow,
// kern_setup_hw_flow).
//
// Applied by hfi1/build.sh, which checks afterwards that every rename and
// every wrapper is present (spatch exits 0 even when nothing matched).

@ add_include @
@@
 #include "exp_rcv.h"
+#include "hfi1_tid_route.h"
+#include "hfi1_tid_svc.h"

// This wrapper also holds the build-time check of the values tid_rdma.c
// defines for itself against the engine's table (hfi1_tid_layout.h): it
// sits after their definitions.
@ r_generation_next @
typedef u32;
identifier gen;
@@
- static u32 kern_flow_generation_next(u32 gen)
+ u32 hfi1_orig_kern_flow_generation_next(u32 gen)
  { ... }
+ static u32 kern_flow_generation_next(u32 gen)
+ {
+ 	HFI1_TID_LAYOUT_CHECK_TID_RDMA_C_VALUES();
+ 	return hfi1_tid_route_kern_flow_generation_next(gen);
+ }

@ r_opfn_encode @
typedef u64;
identifier p;
@@
- static u64 tid_rdma_opfn_encode(struct tid_rdma_params *p)
+ u64 hfi1_orig_tid_rdma_opfn_encode(struct tid_rdma_params *p)
  { ... }
+ static u64 tid_rdma_opfn_encode(struct tid_rdma_params *p)
+ {
+ 	return hfi1_tid_route_tid_rdma_opfn_encode(p);
+ }

@ r_opfn_decode @
identifier p, data;
@@
- static void tid_rdma_opfn_decode(struct tid_rdma_params *p, u64 data)
+ void hfi1_orig_tid_rdma_opfn_decode(struct tid_rdma_params *p, u64 data)
  { ... }
+ static void tid_rdma_opfn_decode(struct tid_rdma_params *p, u64 data)
+ {
+ 	hfi1_tid_route_tid_rdma_opfn_decode(p, data);
+ }

// kern_reserve_flow() and the two page walks are called only by the
// stateful group, whose originals use their originals (below) and whose
// routed Rust has its own: the routed wrappers are reached from the
// differential test only, hence __maybe_unused.
@ r_reserve_flow @
identifier rcd, last;
attribute name __maybe_unused;
@@
- static int kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last)
+ int hfi1_orig_kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last)
  { ... }
+ static __maybe_unused int kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last)
+ {
+ 	return hfi1_tid_route_kern_reserve_flow(rcd, last);
+ }

@ r_find_4k @
identifier flow, pages, npages, list;
attribute name __maybe_unused;
@@
- static u32 tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
+ u32 hfi1_orig_tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
  { ... }
+ static __maybe_unused u32 tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
+ {
+ 	return hfi1_tid_route_tid_rdma_find_phys_blocks_4k(flow, pages, npages, list);
+ }

// The only caller of the flush helper is the 8K walk, whose original keeps
// the original helper (below): the routed helper is reached from the
// differential test only, hence __maybe_unused.
@ r_flush @
identifier list, idx, pages, sets;
attribute name __maybe_unused;
@@
- static u32 tid_flush_pages(struct tid_rdma_pageset *list, u32 *idx, u32 pages, u32 sets)
+ u32 hfi1_orig_tid_flush_pages(struct tid_rdma_pageset *list, u32 *idx, u32 pages, u32 sets)
  { ... }
+ static __maybe_unused u32 tid_flush_pages(struct tid_rdma_pageset *list, u32 *idx, u32 pages, u32 sets)
+ {
+ 	return hfi1_tid_route_tid_flush_pages(list, idx, pages, sets);
+ }

@ r_find_8k @
identifier flow, pages, npages, list;
attribute name __maybe_unused;
@@
- static u32 tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
+ u32 hfi1_orig_tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
  { ... }
+ static __maybe_unused u32 tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
+ {
+ 	return hfi1_tid_route_tid_rdma_find_phys_blocks_8k(flow, pages, npages, list);
+ }

// The original 8K walk keeps calling the original flush helper, so that
// hfi1_orig_tid_rdma_find_phys_blocks_8k stays entirely the driver's code.
@ r_find_8k_orig_flush depends on r_find_8k && r_flush @
@@
 u32 hfi1_orig_tid_rdma_find_phys_blocks_8k(...)
 {
 <...
- tid_flush_pages
+ hfi1_orig_tid_flush_pages
  (...)
 ...>
 }

// ---- The stateful group ----------------------------------------------------

@ r_exp_rcv_init @
identifier rcd, reinit;
@@
- int hfi1_kern_exp_rcv_init(struct hfi1_ctxtdata *rcd, int reinit)
+ int hfi1_orig_hfi1_kern_exp_rcv_init(struct hfi1_ctxtdata *rcd, int reinit)
  { ... }
+ int hfi1_kern_exp_rcv_init(struct hfi1_ctxtdata *rcd, int reinit)
+ {
+ 	return hfi1_tid_route_hfi1_kern_exp_rcv_init(rcd, reinit);
+ }

@ r_init_generations @
identifier rcd;
@@
- void hfi1_kern_init_ctxt_generations(struct hfi1_ctxtdata *rcd)
+ void hfi1_orig_hfi1_kern_init_ctxt_generations(struct hfi1_ctxtdata *rcd)
  { ... }
+ void hfi1_kern_init_ctxt_generations(struct hfi1_ctxtdata *rcd)
+ {
+ 	hfi1_tid_route_hfi1_kern_init_ctxt_generations(rcd);
+ }

@ r_setup_hw_flow @
identifier rcd, qp;
@@
- int hfi1_kern_setup_hw_flow(struct hfi1_ctxtdata *rcd, struct rvt_qp *qp)
+ int hfi1_orig_hfi1_kern_setup_hw_flow(struct hfi1_ctxtdata *rcd, struct rvt_qp *qp)
  { ... }
+ int hfi1_kern_setup_hw_flow(struct hfi1_ctxtdata *rcd, struct rvt_qp *qp)
+ {
+ 	return hfi1_tid_route_hfi1_kern_setup_hw_flow(rcd, qp);
+ }

@ r_clear_hw_flow @
identifier rcd, qp;
@@
- void hfi1_kern_clear_hw_flow(struct hfi1_ctxtdata *rcd, struct rvt_qp *qp)
+ void hfi1_orig_hfi1_kern_clear_hw_flow(struct hfi1_ctxtdata *rcd, struct rvt_qp *qp)
  { ... }
+ void hfi1_kern_clear_hw_flow(struct hfi1_ctxtdata *rcd, struct rvt_qp *qp)
+ {
+ 	hfi1_tid_route_hfi1_kern_clear_hw_flow(rcd, qp);
+ }

@ r_exp_rcv_setup @
identifier req, ss, last;
@@
- int hfi1_kern_exp_rcv_setup(struct tid_rdma_request *req, struct rvt_sge_state *ss, bool *last)
+ int hfi1_orig_hfi1_kern_exp_rcv_setup(struct tid_rdma_request *req, struct rvt_sge_state *ss, bool *last)
  { ... }
+ int hfi1_kern_exp_rcv_setup(struct tid_rdma_request *req, struct rvt_sge_state *ss, bool *last)
+ {
+ 	return hfi1_tid_route_hfi1_kern_exp_rcv_setup(req, ss, last);
+ }

@ r_exp_rcv_clear @
identifier req;
@@
- int hfi1_kern_exp_rcv_clear(struct tid_rdma_request *req)
+ int hfi1_orig_hfi1_kern_exp_rcv_clear(struct tid_rdma_request *req)
  { ... }
+ int hfi1_kern_exp_rcv_clear(struct tid_rdma_request *req)
+ {
+ 	return hfi1_tid_route_hfi1_kern_exp_rcv_clear(req);
+ }

@ r_exp_rcv_clear_all @
identifier req;
@@
- void hfi1_kern_exp_rcv_clear_all(struct tid_rdma_request *req)
+ void hfi1_orig_hfi1_kern_exp_rcv_clear_all(struct tid_rdma_request *req)
  { ... }
+ void hfi1_kern_exp_rcv_clear_all(struct tid_rdma_request *req)
+ {
+ 	hfi1_tid_route_hfi1_kern_exp_rcv_clear_all(req);
+ }

@ r_free_flows @
identifier req;
@@
- static void hfi1_kern_exp_rcv_free_flows(struct tid_rdma_request *req)
+ void hfi1_orig_hfi1_kern_exp_rcv_free_flows(struct tid_rdma_request *req)
  { ... }
+ static void hfi1_kern_exp_rcv_free_flows(struct tid_rdma_request *req)
+ {
+ 	hfi1_tid_route_hfi1_kern_exp_rcv_free_flows(req);
+ }

@ r_clean_swqe @
identifier qp, wqe;
@@
- void __trdma_clean_swqe(struct rvt_qp *qp, struct rvt_swqe *wqe)
+ void hfi1_orig___trdma_clean_swqe(struct rvt_qp *qp, struct rvt_swqe *wqe)
  { ... }
+ void __trdma_clean_swqe(struct rvt_qp *qp, struct rvt_swqe *wqe)
+ {
+ 	hfi1_tid_route___trdma_clean_swqe(qp, wqe);
+ }

@ r_alloc_flows @
identifier req, gfp;
typedef gfp_t;
@@
- static int hfi1_kern_exp_rcv_alloc_flows(struct tid_rdma_request *req, gfp_t gfp)
+ int hfi1_orig_hfi1_kern_exp_rcv_alloc_flows(struct tid_rdma_request *req, gfp_t gfp)
  { ... }
+ static int hfi1_kern_exp_rcv_alloc_flows(struct tid_rdma_request *req, gfp_t gfp)
+ {
+ 	return hfi1_tid_route_hfi1_kern_exp_rcv_alloc_flows(req, gfp);
+ }

@ r_flush_wait @
identifier qp;
@@
- void hfi1_tid_rdma_flush_wait(struct rvt_qp *qp)
+ void hfi1_orig_hfi1_tid_rdma_flush_wait(struct rvt_qp *qp)
  { ... }
+ void hfi1_tid_rdma_flush_wait(struct rvt_qp *qp)
+ {
+ 	hfi1_tid_route_hfi1_tid_rdma_flush_wait(qp);
+ }

@ r_trigger_resume @
identifier work;
@@
- static void tid_rdma_trigger_resume(struct work_struct *work)
+ void hfi1_orig_tid_rdma_trigger_resume(struct work_struct *work)
  { ... }
+ static void tid_rdma_trigger_resume(struct work_struct *work)
+ {
+ 	hfi1_tid_route_tid_rdma_trigger_resume(work);
+ }

// The originals' copies of the two flow-register helpers the driver's
// RESYNC code shares: the originals use the copies, whose register write
// goes through hfi1_tid_svc, and the RESYNC code keeps the driver's own.
@ c_set_hw_flow @
identifier rcd, generation, flow_idx;
statement list body;
@@
 static void kern_set_hw_flow(struct hfi1_ctxtdata *rcd, u32 generation, u32 flow_idx)
 {
 body
 }
+
+ static void hfi1_orig_kern_set_hw_flow(struct hfi1_ctxtdata *rcd, u32 generation, u32 flow_idx)
+ {
+ body
+ }

@ c_setup_hw_flow @
identifier rcd, flow_idx;
statement list body;
@@
 static u32 kern_setup_hw_flow(struct hfi1_ctxtdata *rcd, u32 flow_idx)
 {
 body
 }
+
+ static u32 hfi1_orig_kern_setup_hw_flow(struct hfi1_ctxtdata *rcd, u32 flow_idx)
+ {
+ body
+ }

// In the copies and the helpers only the originals use: the originals.
@ o_set_hw_flow @
identifier fn = { hfi1_orig_kern_setup_hw_flow, kern_clear_hw_flow,
                  hfi1_orig_hfi1_kern_init_ctxt_generations };
expression list es;
@@
 fn(...) { <...
- kern_set_hw_flow(es)
+ hfi1_orig_kern_set_hw_flow(es)
 ...> }

@ o_setup_hw_flow @
expression list es;
@@
 hfi1_orig_hfi1_kern_setup_hw_flow(...) { <...
(
- kern_setup_hw_flow(es)
+ hfi1_orig_kern_setup_hw_flow(es)
|
- kern_reserve_flow(es)
+ hfi1_orig_kern_reserve_flow(es)
)
 ...> }

@ o_generation_next @
expression list es;
@@
 kern_clear_hw_flow(...) { <...
- kern_flow_generation_next(es)
+ hfi1_orig_kern_flow_generation_next(es)
 ...> }

@ o_find_phys_blocks @
expression list es;
@@
 kern_get_phys_blocks(...) { <...
(
- tid_rdma_find_phys_blocks_4k(es)
+ hfi1_orig_tid_rdma_find_phys_blocks_4k(es)
|
- tid_rdma_find_phys_blocks_8k(es)
+ hfi1_orig_tid_rdma_find_phys_blocks_8k(es)
)
 ...> }

@ o_exp_rcv_clear @
expression list es;
@@
 hfi1_orig_hfi1_kern_exp_rcv_clear_all(...) { <...
- hfi1_kern_exp_rcv_clear(es)
+ hfi1_orig_hfi1_kern_exp_rcv_clear(es)
 ...> }

@ o_free_flows @
expression list es;
@@
 hfi1_orig___trdma_clean_swqe(...) { <...
- hfi1_kern_exp_rcv_free_flows(es)
+ hfi1_orig_hfi1_kern_exp_rcv_free_flows(es)
 ...> }

// Their services: through hfi1_tid_svc.
@ s_csr @
expression list es;
@@
 hfi1_orig_kern_set_hw_flow(...) { <...
- write_uctxt_csr(es)
+ hfi1_tid_svc_write_uctxt_csr(es)
 ...> }

@ s_rcvarray @
identifier fn = { kern_program_rcv_group, kern_unprogram_rcv_group };
expression list es;
@@
 fn(...) { <...
(
- hfi1_put_tid(es)
+ hfi1_tid_svc_hfi1_put_tid(es)
|
- rcv_array_wc_fill(es)
+ hfi1_tid_svc_rcv_array_wc_fill(es)
)
 ...> }

@ s_dma @
identifier fn = { dma_map_flow, dma_unmap_flow };
expression list es;
@@
 fn(...) { <...
(
- dma_map_page(es)
+ hfi1_tid_svc_dma_map_page(es)
|
- dma_mapping_error(es)
+ hfi1_tid_svc_dma_mapping_error(es)
|
- dma_unmap_page(es)
+ hfi1_tid_svc_dma_unmap_page(es)
)
 ...> }

@ s_queue_work @
expression list es;
@@
 tid_rdma_schedule_tid_wakeup(...) { <...
- queue_work_on(es)
+ hfi1_tid_svc_queue_work_on(es)
 ...> }

@ s_schedule_send @
expression list es;
@@
 __trigger_tid_waiter(...) { <...
- hfi1_schedule_send(es)
+ hfi1_tid_svc_hfi1_schedule_send(es)
 ...> }

@ s_do_send @
expression list es;
@@
 hfi1_orig_tid_rdma_trigger_resume(...) { <...
- hfi1_do_send(es)
+ hfi1_tid_svc_hfi1_do_send(es)
 ...> }

@ s_wait_kmem @
expression list es;
@@
 hfi1_orig_hfi1_kern_exp_rcv_setup(...) { <...
- hfi1_wait_kmem(es)
+ hfi1_tid_svc_hfi1_wait_kmem(es)
 ...> }

@ s_kmalloc @
expression list es;
@@
 hfi1_orig_hfi1_kern_exp_rcv_alloc_flows(...) { <...
- kmalloc_node(es)
+ hfi1_tid_svc_kmalloc_node(es)
 ...> }

@ s_kfree @
expression list es;
@@
 hfi1_orig_hfi1_kern_exp_rcv_free_flows(...) { <...
- kfree(es)
+ hfi1_tid_svc_kfree(es)
 ...> }

@ s_random @
@@
 hfi1_orig_hfi1_kern_init_ctxt_generations(...) { <...
- get_random_u32()
+ hfi1_tid_svc_get_random_u32()
 ...> }

@ s_jkey @
expression list es;
@@
 hfi1_orig_hfi1_kern_exp_rcv_init(...) { <...
- hfi1_set_ctxt_jkey(es)
+ hfi1_tid_svc_hfi1_set_ctxt_jkey(es)
 ...> }
