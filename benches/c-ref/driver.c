/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * C reference driver: `cref <op> <iterations>` sets up one benchmark's
 * input and runs the driver's own functions (extracted unchanged by
 * extract.sh) on it `iterations` times. The op names and inputs are those
 * of the Rust driver (src/bin/instr.rs); ../instr.sh runs both under
 * cachegrind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "kernel_defs.inc"
#include "ctxt.h"
#include "kernel_funcs.inc"

/* Keeps the compiler from proving anything about *p across iterations. */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

static struct hfi1_devdata dd;
static struct hfi1_ctxtdata rcd;
static struct rvt_qp qp;
static struct tid_rdma_request req;
static struct tid_rdma_flow flow;
static struct tid_group groups[16];
static u64 rcvarray[128];
static struct page *pages[64];
static u32 npages;

static const unsigned mixed_runs[14] = { 8, 1, 4, 2, 16, 1, 3, 8, 5, 2, 1, 4, 6, 3 };

/* The page of pfn `pfn`, such that page_address() gives pfn << PAGE_SHIFT (+ PAGE_OFFSET). */
static struct page *pfn_page(unsigned long pfn)
{
#if SHIM_VMEMMAP
	return (struct page *)vmemmap_base + pfn;
#else
	return (struct page *)(pfn << PAGE_SHIFT);
#endif
}

static int set_pages(const char *name)
{
	unsigned r, i;

	npages = 0;
	if (!strcmp(name, "contiguous")) {
		for (i = 0; i < 64; i++)
			pages[npages++] = pfn_page(0x100000 + i);
	} else if (!strcmp(name, "scattered")) {
		for (i = 0; i < 64; i++)
			pages[npages++] = pfn_page(0x200000 + 2 * i);
	} else if (!strcmp(name, "mixed")) {
		for (r = 0; r < 14; r++)
			for (i = 0; i < mixed_runs[r]; i++)
				pages[npages++] = pfn_page(0x300000 + 0x1000 * r + i);
	} else {
		return -1;
	}
	return 0;
}

/* 16 groups of 8 at expected base 0, all on the free list, as TidGroups::new(0, 16). */
static void setup(u32 pmtu)
{
	unsigned i;

	dd.flags = HFI1_PRESENT;
	dd.rcvarray_wc = rcvarray;
	dd.rcv_entries.group_size = 8;
	rcd.dd = &dd;
	rcd.expected_base = 0;
	INIT_LIST_HEAD(&rcd.tid_group_list.list);
	INIT_LIST_HEAD(&rcd.tid_used_list.list);
	INIT_LIST_HEAD(&rcd.tid_full_list.list);
	for (i = 0; i < 16; i++) {
		groups[i].base = 8 * i;
		groups[i].size = 8;
		INIT_LIST_HEAD(&groups[i].list);
		tid_group_add_tail(&groups[i], &rcd.tid_group_list);
	}
	for (i = 0; i < RXE_NUM_TID_FLOWS; i++)
		rcd.flows[i].generation = 1;
	qp.pmtu = pmtu;
	req.qp = &qp;
	req.rcd = &rcd;
	flow.req = &req;
}

__attribute__((noinline)) static u32 op_find_4k(void)
{
	return tid_rdma_find_phys_blocks_4k(&flow, pages, npages, flow.pagesets);
}

__attribute__((noinline)) static u32 op_find_8k(void)
{
	return tid_rdma_find_phys_blocks_8k(&flow, pages, npages, flow.pagesets);
}

/* One segment's TIDs: allocate, program, and unprogram as hfi1_kern_exp_rcv_clear() does. */
__attribute__((noinline)) static int op_tid_cycle(void)
{
	int i;

	if (kern_alloc_tids(&flow))
		return -1;
	kern_program_rcvarray(&flow);
	for (i = 0; i < flow.tnode_cnt; i++)
		kern_unprogram_rcv_group(&flow, i);
	flow.tnode_cnt = 0;
	return flow.npkts;
}

__attribute__((noinline)) static int op_reserve_release(void)
{
	int nr = kern_reserve_flow(&rcd, -1);

	if (nr >= 0)
		clear_bit(nr, &rcd.flow_mask);
	return nr;
}

__attribute__((noinline)) static int op_reserve_setup_release(void)
{
	int nr = kern_reserve_flow(&rcd, 7);
	u32 gen;

	if (nr >= 0) {
		gen = kern_setup_hw_flow(&rcd, nr);
		KEEP(gen);
		kern_clear_hw_flow(&rcd, nr);
		clear_bit(nr, &rcd.flow_mask);
	}
	return nr;
}

int main(int argc, char **argv)
{
	char op[64], *a, *b, *c;
	unsigned long n, k;
	unsigned i;

	if (argc != 3 || strlen(argv[1]) >= sizeof(op)) {
		fprintf(stderr, "usage: cref <op> <iterations>\n");
		return 2;
	}
	strcpy(op, argv[1]);
	n = strtoul(argv[2], NULL, 10);
	a = strtok(op, "/");
	b = strtok(NULL, "/");
	c = strtok(NULL, "/");
	if (a && b && c && !strcmp(a, "find_phys_blocks")) {
		u32 (*f)(void) = !strcmp(b, "4k") ? op_find_4k : !strcmp(b, "8k") ? op_find_8k : NULL;

		setup(4096);
		if (!f || set_pages(c))
			return 2;
		for (k = 0; k < n; k++) {
			KEEP(pages);
			flow.npagesets = f();
			KEEP(&flow);
		}
		return 0;
	}
	if (a && b && c && !strcmp(a, "tid_cycle")) {
		u32 pmtu = strtoul(c, NULL, 10);

		setup(pmtu);
		if (set_pages(b))
			return 2;
		flow.npagesets = pmtu == 4096 ? op_find_4k() : op_find_8k();
		for (i = 0; i < flow.npagesets; i++) {
			struct tid_rdma_pageset *s = &flow.pagesets[i];

			if (s->count)
				s->addr = ((unsigned long)page_address(pages[s->idx]) &
					   0xffffffffffULL) ^ 0x800000000000ULL;
		}
		for (k = 0; k < n; k++) {
			KEEP(&flow);
			if (op_tid_cycle() < 0)
				return 1;
		}
		return 0;
	}
	if (a && b && !c && !strcmp(a, "flow")) {
		int (*f)(void) = !strcmp(b, "reserve_release") ? op_reserve_release :
				 !strcmp(b, "reserve_setup_release") ? op_reserve_setup_release : NULL;

		setup(4096);
		if (!f)
			return 2;
		for (k = 0; k < n; k++)
			if (f() < 0)
				return 1;
		return rcd.flow_mask != 0;
	}
	return 2;
}
