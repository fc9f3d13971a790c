/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The driver's structures and values as the Rust engine uses them
 * (hfi1_hal::layout). Written by kmod-glue/tests/layout.rs from that
 * table; HFI1_TID_BLESS=1 cargo test -p kmod-glue --test layout
 * rewrites it. Each macro fails the build (BUILD_BUG_ON) if the kernel
 * source being built disagrees with the table.
 */
#ifndef HFI1_TID_LAYOUT_H
#define HFI1_TID_LAYOUT_H

#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <linux/types.h>

/* Values the driver's headers define (hfi1_tid_layout.c). */
#define HFI1_TID_LAYOUT_CHECK_HEADER_VALUES() do {	\
	BUILD_BUG_ON((u64)(HFI1_S_WAIT_TID_SPACE) != 0x10000000ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_KMEM) != 0x2000ull);	\
	BUILD_BUG_ON((u64)(RXE_NUM_TID_FLOWS) != 0x20ull);	\
	BUILD_BUG_ON((u64)(TID_RDMA_MAX_SEGMENT_SIZE) != 0x40000ull);	\
	BUILD_BUG_ON((u64)(TID_RDMA_MAX_PAGES) != 0x40ull);	\
	BUILD_BUG_ON((u64)(HFI1_KDETH_BTH_SEQ_SHIFT) != 0xbull);	\
	BUILD_BUG_ON((u64)(HFI1_KDETH_BTH_SEQ_MASK) != 0x7ffull);	\
	BUILD_BUG_ON((u64)(PT_EXPECTED) != 0x0ull);	\
	BUILD_BUG_ON((u64)(PT_INVALID) != 0x3ull);	\
	BUILD_BUG_ON((u64)(RCV_TID_FLOW_TABLE) != 0x1300800ull);	\
	BUILD_BUG_ON((u64)(DMA_FROM_DEVICE) != 0x2ull);	\
	BUILD_BUG_ON((u64)(RVT_SEGSZ) != 0x100ull);	\
	BUILD_BUG_ON((u64)(RVT_S_SIGNAL_REQ_WR) != 0x1ull);	\
	BUILD_BUG_ON((u64)(RVT_S_BUSY) != 0x2ull);	\
	BUILD_BUG_ON((u64)(RVT_S_TIMER) != 0x4ull);	\
	BUILD_BUG_ON((u64)(RVT_S_RESP_PENDING) != 0x8ull);	\
	BUILD_BUG_ON((u64)(RVT_S_ACK_PENDING) != 0x10ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_FENCE) != 0x20ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_RDMAR) != 0x40ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_RNR) != 0x80ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_SSN_CREDIT) != 0x100ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_DMA) != 0x200ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_PIO) != 0x400ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_TX) != 0x800ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_DMA_DESC) != 0x1000ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_PSN) != 0x4000ull);	\
	BUILD_BUG_ON((u64)(RVT_S_WAIT_ACK) != 0x8000ull);	\
	BUILD_BUG_ON((u64)(RVT_S_SEND_ONE) != 0x10000ull);	\
	BUILD_BUG_ON((u64)(RVT_S_UNLIMITED_CREDIT) != 0x20000ull);	\
	BUILD_BUG_ON((u64)(RVT_S_ECN) != 0x40000ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_WAIT_HALT) != 0x4000000ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_WAIT_TID_RESP) != 0x8000000ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_WAIT_PIO_DRAIN) != 0x20000000ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_AHG_CLEAR) != 0x40000000ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_AHG_VALID) != 0x80000000ull);	\
	BUILD_BUG_ON((u64)(RVT_S_ANY_WAIT_IO) != 0x3c00ull);	\
	BUILD_BUG_ON((u64)(RVT_S_ANY_WAIT_SEND) != 0xc3e0ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_ANY_WAIT_IO) != 0x20003c00ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_ANY_TID_WAIT_SEND) != 0x300ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_TID_BUSY_SET) != 0x1ull);	\
	BUILD_BUG_ON((u64)(HFI1_R_TID_RSC_TIMER) != 0x4ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_TID_WAIT_INTERLCK) != 0x20ull);	\
	BUILD_BUG_ON((u64)(HFI1_R_TID_WAIT_INTERLCK) != 0x40ull);	\
	BUILD_BUG_ON((u64)(HFI1_S_TID_RETRY_TIMER) != 0x20000ull);	\
	BUILD_BUG_ON((u64)(HFI1_R_TID_SW_PSN) != 0x80000ull);	\
	BUILD_BUG_ON((u64)(KDETH_OM_MASK << KDETH_OM_SHIFT) != 0x8000ull);	\
	BUILD_BUG_ON((u64)(KDETH_INTR_MASK << KDETH_INTR_SHIFT) != 0x10000000ull);	\
	BUILD_BUG_ON((u64)(KDETH_SH_MASK << KDETH_SH_SHIFT) != 0x20000000ull);	\
	BUILD_BUG_ON((u64)(HFI1_TID_RDMA_WRITE_CNT) != 0x8ull);	\
	BUILD_BUG_ON((u64)(HFI1_MAX_RDMA_ATOMIC) != 0x10ull);	\
	BUILD_BUG_ON((u64)(TID_RDMA_SEGMENT_SHIFT) != 0x12ull);	\
	BUILD_BUG_ON((u64)(IB_RNR_NAK) != 0x20ull);	\
	BUILD_BUG_ON((u64)(IB_NAK_PSN_ERROR) != 0x60ull);	\
	BUILD_BUG_ON((u64)(IB_AETH_CREDIT_MASK) != 0x1full);	\
	BUILD_BUG_ON((u64)(OPA_LINK_SPEED_25G) != 0x2ull);	\
	BUILD_BUG_ON((u64)(OPA_LINK_WIDTH_1X) != 0x1ull);	\
	BUILD_BUG_ON((u64)(OPA_LINK_WIDTH_2X) != 0x2ull);	\
	BUILD_BUG_ON((u64)(OPA_LINK_WIDTH_3X) != 0x4ull);	\
	BUILD_BUG_ON((u64)(OPA_LINK_WIDTH_4X) != 0x8ull);	\
} while (0)

/* Values tid_rdma.c defines itself (expanded inside tid_rdma.c). */
#define HFI1_TID_LAYOUT_CHECK_TID_RDMA_C_VALUES() do {	\
	BUILD_BUG_ON((u64)(GENERATION_MASK) != 0xfffffull);	\
	BUILD_BUG_ON((u64)(KERN_GENERATION_RESERVED) != 0xfffffull);	\
	BUILD_BUG_ON((u64)(MAX_TID_FLOW_PSN) != 0x800ull);	\
	BUILD_BUG_ON((u64)(TID_RDMA_JKEY) != 0x20ull);	\
	BUILD_BUG_ON((u64)(TID_RDMA_MAX_READ_SEGS_PER_REQ) != 0x6ull);	\
	BUILD_BUG_ON((u64)(TID_RDMA_MAX_WRITE_SEGS_PER_REQ) != 0x4ull);	\
	BUILD_BUG_ON((u64)(RCV_TID_FLOW_TABLE_CTRL_FLOW_VALID_SMASK) != 0x100000000ull);	\
	BUILD_BUG_ON((u64)(RCV_TID_FLOW_TABLE_CTRL_HDR_SUPP_EN_SMASK) != 0x200000000ull);	\
	BUILD_BUG_ON((u64)(RCV_TID_FLOW_TABLE_CTRL_KEEP_AFTER_SEQ_ERR_SMASK) != 0x400000000ull);	\
	BUILD_BUG_ON((u64)(RCV_TID_FLOW_TABLE_CTRL_KEEP_ON_GEN_ERR_SMASK) != 0x800000000ull);	\
	BUILD_BUG_ON((u64)(RCV_TID_FLOW_TABLE_STATUS_SEQ_MISMATCH_SMASK) != 0x2000000000ull);	\
	BUILD_BUG_ON((u64)(RCV_TID_FLOW_TABLE_STATUS_GEN_MISMATCH_SMASK) != 0x4000000000ull);	\
} while (0)

/* Offsets and sizes of the fields the engine reaches (hfi1_tid_layout.c). */
#define HFI1_TID_LAYOUT_CHECK_STRUCTS() do {	\
	BUILD_BUG_ON(sizeof(struct list_head) != 16);	\
	BUILD_BUG_ON(sizeof(struct tid_flow_state) != 12);	\
	BUILD_BUG_ON(sizeof(struct flow_state) != 32);	\
	BUILD_BUG_ON(sizeof(struct tid_group) != 24);	\
	BUILD_BUG_ON(sizeof(struct exp_tid_set) != 24);	\
	BUILD_BUG_ON(sizeof(struct tid_queue) != 24);	\
	BUILD_BUG_ON(sizeof(struct kern_tid_node) != 16);	\
	BUILD_BUG_ON(sizeof(struct tid_rdma_flow) != 1856);	\
	BUILD_BUG_ON(sizeof(struct rvt_sge) != 32);	\
	BUILD_BUG_ON(sizeof(struct rvt_sge_state) != 48);	\
	BUILD_BUG_ON(sizeof(struct tid_rdma_request) != 152);	\
	BUILD_BUG_ON(sizeof(struct tid_rdma_pageset) != 8);	\
	BUILD_BUG_ON(offsetof(struct list_head, next) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct list_head, next) != 8);	\
	BUILD_BUG_ON(offsetof(struct list_head, prev) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct list_head, prev) != 8);	\
	BUILD_BUG_ON(offsetof(struct tid_flow_state, generation) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct tid_flow_state, generation) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_flow_state, psn) != 4);	\
	BUILD_BUG_ON(sizeof_field(struct tid_flow_state, psn) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_flow_state, index) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct tid_flow_state, index) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_flow_state, last_index) != 9);	\
	BUILD_BUG_ON(sizeof_field(struct tid_flow_state, last_index) != 1);	\
	BUILD_BUG_ON(offsetof(struct flow_state, flags) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct flow_state, flags) != 4);	\
	BUILD_BUG_ON(offsetof(struct flow_state, resp_ib_psn) != 4);	\
	BUILD_BUG_ON(sizeof_field(struct flow_state, resp_ib_psn) != 4);	\
	BUILD_BUG_ON(offsetof(struct flow_state, generation) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct flow_state, generation) != 4);	\
	BUILD_BUG_ON(offsetof(struct flow_state, spsn) != 12);	\
	BUILD_BUG_ON(sizeof_field(struct flow_state, spsn) != 4);	\
	BUILD_BUG_ON(offsetof(struct flow_state, lpsn) != 16);	\
	BUILD_BUG_ON(sizeof_field(struct flow_state, lpsn) != 4);	\
	BUILD_BUG_ON(offsetof(struct flow_state, r_next_psn) != 20);	\
	BUILD_BUG_ON(sizeof_field(struct flow_state, r_next_psn) != 4);	\
	BUILD_BUG_ON(offsetof(struct flow_state, ib_spsn) != 24);	\
	BUILD_BUG_ON(sizeof_field(struct flow_state, ib_spsn) != 4);	\
	BUILD_BUG_ON(offsetof(struct flow_state, ib_lpsn) != 28);	\
	BUILD_BUG_ON(sizeof_field(struct flow_state, ib_lpsn) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_group, list) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct tid_group, list) != 16);	\
	BUILD_BUG_ON(offsetof(struct tid_group, base) != 16);	\
	BUILD_BUG_ON(sizeof_field(struct tid_group, base) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_group, size) != 20);	\
	BUILD_BUG_ON(sizeof_field(struct tid_group, size) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_group, used) != 21);	\
	BUILD_BUG_ON(sizeof_field(struct tid_group, used) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_group, map) != 22);	\
	BUILD_BUG_ON(sizeof_field(struct tid_group, map) != 1);	\
	BUILD_BUG_ON(offsetof(struct exp_tid_set, list) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct exp_tid_set, list) != 16);	\
	BUILD_BUG_ON(offsetof(struct exp_tid_set, count) != 16);	\
	BUILD_BUG_ON(sizeof_field(struct exp_tid_set, count) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_queue, queue_head) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct tid_queue, queue_head) != 16);	\
	BUILD_BUG_ON(offsetof(struct tid_queue, enqueue) != 16);	\
	BUILD_BUG_ON(sizeof_field(struct tid_queue, enqueue) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_queue, dequeue) != 20);	\
	BUILD_BUG_ON(sizeof_field(struct tid_queue, dequeue) != 4);	\
	BUILD_BUG_ON(offsetof(struct kern_tid_node, grp) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct kern_tid_node, grp) != 8);	\
	BUILD_BUG_ON(offsetof(struct kern_tid_node, map) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct kern_tid_node, map) != 1);	\
	BUILD_BUG_ON(offsetof(struct kern_tid_node, cnt) != 9);	\
	BUILD_BUG_ON(sizeof_field(struct kern_tid_node, cnt) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, flow_state) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, flow_state) != 32);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, req) != 32);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, req) != 8);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, tid_qpn) != 40);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, tid_qpn) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, tid_offset) != 44);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, tid_offset) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, length) != 48);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, length) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, sent) != 52);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, sent) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, tnode_cnt) != 56);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, tnode_cnt) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, tidcnt) != 57);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, tidcnt) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, tid_idx) != 58);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, tid_idx) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, idx) != 59);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, idx) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, npagesets) != 60);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, npagesets) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, npkts) != 61);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, npkts) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, pkt) != 62);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, pkt) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, resync_npkts) != 63);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, resync_npkts) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, tnode) != 64);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, tnode) != 1024);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, pagesets) != 1088);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, pagesets) != 512);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_flow, tid_entry) != 1600);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_flow, tid_entry) != 256);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge, mr) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge, mr) != 8);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge, vaddr) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge, vaddr) != 8);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge, sge_length) != 16);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge, sge_length) != 4);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge, length) != 20);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge, length) != 4);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge, m) != 24);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge, m) != 2);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge, n) != 26);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge, n) != 2);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge_state, sg_list) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge_state, sg_list) != 8);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge_state, sge) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge_state, sge) != 32);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge_state, total_len) != 40);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge_state, total_len) != 4);	\
	BUILD_BUG_ON(offsetof(struct rvt_sge_state, num_sge) != 44);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_sge_state, num_sge) != 1);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, qp) != 0);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, qp) != 8);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, rcd) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, rcd) != 8);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, e) != 16);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, e) != 8);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, flows) != 24);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, flows) != 8);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, ss) != 32);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, ss) != 48);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, n_flows) != 80);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, n_flows) != 2);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, setup_head) != 82);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, setup_head) != 2);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, clear_tail) != 84);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, clear_tail) != 2);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, flow_idx) != 86);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, flow_idx) != 2);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, acked_tail) != 88);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, acked_tail) != 2);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, seg_len) != 92);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, seg_len) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, total_len) != 96);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, total_len) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, r_ack_psn) != 100);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, r_ack_psn) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, r_flow_psn) != 104);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, r_flow_psn) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, r_last_acked) != 108);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, r_last_acked) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, s_next_psn) != 112);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, s_next_psn) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, total_segs) != 116);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, total_segs) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, cur_seg) != 120);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, cur_seg) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, comp_seg) != 124);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, comp_seg) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, ack_seg) != 128);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, ack_seg) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, alloc_seg) != 132);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, alloc_seg) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, isge) != 136);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, isge) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, ack_pending) != 140);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, ack_pending) != 4);	\
	BUILD_BUG_ON(offsetof(struct tid_rdma_request, state) != 144);	\
	BUILD_BUG_ON(sizeof_field(struct tid_rdma_request, state) != 4);	\
	BUILD_BUG_ON(sizeof_field(struct rvt_qp, s_flags) != 4);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_qp_priv, flow_state) != 12);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_qp_priv, tid_wait) != 16);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_qp_priv, tid_enqueue) != 4);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, flow_mask) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, flows) != 384);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, tid_group_list) != 24);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, tid_used_list) != 24);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, tid_full_list) != 24);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, flow_queue) != 24);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, rarr_queue) != 24);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, groups) != 8);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ctxtdata, jkey) != 2);	\
	BUILD_BUG_ON(sizeof_field(struct hfi1_ibdev, n_tidwait) != 8);	\
} while (0)

/*
 * The bit positions of struct tid_rdma_pageset: each field set alone
 * in a constant, read back as the 64-bit word (the compiler folds it).
 */
#define HFI1_TID_LAYOUT_CHECK_PAGESET() do {	\
	BUILD_BUG_ON(((union { struct tid_rdma_pageset p; u64 v; })	\
		      { .p = { .addr = 0x800000000001 } }).v != 0x800000000001ull);	\
	BUILD_BUG_ON(((union { struct tid_rdma_pageset p; u64 v; })	\
		      { .p = { .idx = 0x81 } }).v != 0x81000000000000ull);	\
	BUILD_BUG_ON(((union { struct tid_rdma_pageset p; u64 v; })	\
		      { .p = { .count = 0x41 } }).v != 0x4100000000000000ull);	\
	BUILD_BUG_ON(((union { struct tid_rdma_pageset p; u64 v; })	\
		      { .p = { .mapped = 0x1 } }).v != 0x8000000000000000ull);	\
} while (0)

#endif /* HFI1_TID_LAYOUT_H */
