/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The receive context and request, reduced to the fields the extracted
 * functions use; included after the extracted definitions (it needs
 * struct tid_flow_state and RXE_NUM_TID_FLOWS).
 */
#ifndef HFI1_SHIM_CTXT_H
#define HFI1_SHIM_CTXT_H

struct hfi1_ctxtdata {
	struct hfi1_devdata *dd;
	u16 ctxt;
	u32 expected_base;
	struct exp_tid_set tid_group_list;
	struct exp_tid_set tid_used_list;
	struct exp_tid_set tid_full_list;
	unsigned long flow_mask;
	struct tid_flow_state flows[RXE_NUM_TID_FLOWS];
};

struct tid_rdma_request {
	struct rvt_qp *qp;
	struct hfi1_ctxtdata *rcd;
};

void hfi1_put_tid(struct hfi1_devdata *dd, u32 index, u32 type, unsigned long pa, u16 order);

#endif
