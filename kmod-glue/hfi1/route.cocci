// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//
// Routes stateless functions of drivers/infiniband/hw/hfi1/tid_rdma.c to the
// Rust engine, in the rename-and-wrap shape: each original keeps its body
// under the global name hfi1_orig_<name> (declared in hfi1_tid_route.h, so
// the differential test can call it), and a static wrapper with the original
// name and signature calls the C adapter hfi1_tid_route_<name>, which
// converts the driver's structures and calls Rust. Callers are untouched.
//
// Applied by hfi1/build.sh, which checks afterwards that every rename and
// every wrapper is present (spatch exits 0 even when nothing matched).

@ add_include @
@@
 #include "exp_rcv.h"
+#include "hfi1_tid_route.h"

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

@ r_reserve_flow @
identifier rcd, last;
@@
- static int kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last)
+ int hfi1_orig_kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last)
  { ... }
+ static int kern_reserve_flow(struct hfi1_ctxtdata *rcd, int last)
+ {
+ 	return hfi1_tid_route_kern_reserve_flow(rcd, last);
+ }

@ r_find_4k @
identifier flow, pages, npages, list;
@@
- static u32 tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
+ u32 hfi1_orig_tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
  { ... }
+ static u32 tid_rdma_find_phys_blocks_4k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
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
@@
- static u32 tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
+ u32 hfi1_orig_tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
  { ... }
+ static u32 tid_rdma_find_phys_blocks_8k(struct tid_rdma_flow *flow, struct page **pages, u32 npages, struct tid_rdma_pageset *list)
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
