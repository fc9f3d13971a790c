// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * Differential test of the routed functions against the driver's originals,
 * inside the rebuilt hfi1.ko. Off by default; `modprobe hfi1 tid_diff=N`
 * (or writing N to /sys/module/hfi1/parameters/tid_diff) runs N cases per
 * function (edge cases first, then random ones from a printed seed) through
 * both hfi1_orig_<name> and the Rust-backed adapter, compares every output
 * (return value, every byte of the output arrays and structs, updated
 * in/out arguments) and prints
 *
 *	hfi1_tid_diff: <function>: N passed, M failed
 *	hfi1_tid_diff: N passed, M failed
 *
 * The test runs while the parameter is parsed, before the driver's init, so
 * it needs no device.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "hfi.h"
#include "tid_rdma.h"
#include "trace.h"
#include "hfi1_tid_route.h"
#include "hfi1_tid_testparam.h"

#define DIFF "hfi1_tid_diff"
#define POOL_BLOCKS 4
#define POOL_ORDER 6 /* 64 pages a block */
#define POOL_PAGES (POOL_BLOCKS << POOL_ORDER)
#define NPAGES TID_RDMA_MAX_PAGES

static ulong tid_diff_seed;
module_param(tid_diff_seed, ulong, 0644);
MODULE_PARM_DESC(tid_diff_seed,
		 "seed of the differential test (0: random); give it before tid_diff");

struct diff_tally {
	const char *name;
	unsigned long passed, failed;
};

static u64 rng;

static u64 rnd(void)
{
	return hfi1_tid_xorshift(&rng);
}

static u32 rnd_below(u32 n)
{
	return n ? (u32)(rnd() % n) : 0;
}

static void tally(struct diff_tally *t, bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		t->passed++;
		return;
	}
	if (t->failed++ < 3) {
		va_start(ap, fmt);
		pr_err("%s: %s: mismatch: %pV\n", DIFF, t->name,
		       &(struct va_format){ .fmt = fmt, .va = &ap });
		va_end(ap);
	}
}

static void report(const struct diff_tally *t)
{
	pr_info("%s: %s: %lu passed, %lu failed\n", DIFF, t->name, t->passed,
		t->failed);
}

/* ---- kern_flow_generation_next ---- */

static void diff_generation_next(struct diff_tally *t, unsigned long cases)
{
	static const u32 edge[] = { 0, 1, 0xFFFFD, 0xFFFFE, 0xFFFFF, 0x100000,
				    0x1FFFFE, 0x1FFFFF, 0x7FFFFFFF, 0xFFFFFFFE,
				    0xFFFFFFFF };
	unsigned long i;

	for (i = 0; i < cases; i++) {
		u32 g = i < ARRAY_SIZE(edge) ? edge[i] : (u32)rnd();
		u32 a = hfi1_orig_kern_flow_generation_next(g);
		u32 b = hfi1_tid_route_kern_flow_generation_next(g);

		tally(t, a == b, "gen %#x: orig %#x, rust %#x", g, a, b);
	}
}

/* ---- kern_reserve_flow ---- */

static void diff_reserve_flow(struct diff_tally *t, unsigned long cases,
			      struct hfi1_ctxtdata *ra, struct hfi1_ctxtdata *rb)
{
	unsigned long c;

	spin_lock_init(&ra->exp_lock);
	spin_lock_init(&rb->exp_lock);
	for (c = 0; c < cases; c++) {
		/*
		 * Bitmaps from empty to full (and with stray high bits), the
		 * preferred flow in and out of range.
		 */
		unsigned long mask;
		int last, a, b;

		switch (c % 4) {
		case 0: mask = 0; break;
		case 1: mask = U32_MAX & ~BIT(rnd_below(32)); break;
		case 2: mask = (u32)rnd() & (u32)rnd(); break;
		default: mask = rnd(); break;
		}
		if (c < 64) {
			mask = c < 32 ? GENMASK(c, 0) : U32_MAX;
			last = (int)c - 16;
		} else {
			last = (int)rnd_below(40) - 4;
		}
		ra->flow_mask = mask;
		rb->flow_mask = mask;
		spin_lock(&ra->exp_lock);
		a = hfi1_orig_kern_reserve_flow(ra, last);
		spin_unlock(&ra->exp_lock);
		spin_lock(&rb->exp_lock);
		b = hfi1_tid_route_kern_reserve_flow(rb, last);
		spin_unlock(&rb->exp_lock);
		tally(t, a == b && ra->flow_mask == rb->flow_mask,
		      "mask %#lx last %d: orig %d/%#lx, rust %d/%#lx", mask, last,
		      a, ra->flow_mask, b, rb->flow_mask);
	}
}

/* ---- tid_rdma_opfn_encode / decode ---- */

static void random_params(struct tid_rdma_params *p, unsigned long c)
{
	static const u32 lens[] = { 0, 1, 4095, 4096, 8192, 256 * 1024,
				    8 << 20, (8 << 20) + 4096, U32_MAX };

	get_random_bytes(p, sizeof(*p));
	if (c < ARRAY_SIZE(lens))
		p->max_len = lens[c];
	else if (c & 1)
		p->max_len = (rnd_below(2048) + 1) << PAGE_SHIFT;
}

static void diff_opfn(struct diff_tally *te, struct diff_tally *td,
		      unsigned long cases)
{
	struct tid_rdma_params a, b;
	unsigned long c;

	for (c = 0; c < cases; c++) {
		u64 wa, wb, data;

		random_params(&a, c);
		b = a;
		wa = hfi1_orig_tid_rdma_opfn_encode(&a);
		wb = hfi1_tid_route_tid_rdma_opfn_encode(&b);
		tally(te, wa == wb, "params qp %#x len %u: orig %#llx, rust %#llx",
		      a.qp, a.max_len, wa, wb);

		/* Decode into identical garbage: untouched bytes stay equal. */
		data = c < 2 ? (c ? U64_MAX : 0) : rnd();
		get_random_bytes(&a, sizeof(a));
		b = a;
		hfi1_orig_tid_rdma_opfn_decode(&a, data);
		hfi1_tid_route_tid_rdma_opfn_decode(&b, data);
		tally(td, !memcmp(&a, &b, sizeof(a)), "word %#llx", data);
		if (!(c & 4095))
			cond_resched();
	}
}

/* ---- page lists for find_phys_blocks ---- */

struct diff_pool {
	struct page *block[POOL_BLOCKS];
};

static struct page *pool_page(struct diff_pool *p, u32 n)
{
	n %= POOL_PAGES;
	return nth_page(p->block[n >> POOL_ORDER], n & ((1 << POOL_ORDER) - 1));
}

/*
 * Fills pages[] with n pages of the pool: runs of consecutive pool pages
 * (contiguous within a block) broken at random, with a per-case break
 * rate, plus backward steps and repeats; the first cases are fixed shapes.
 */
static u32 make_pages(struct diff_pool *p, struct page **pages, unsigned long c)
{
	static const u32 rates[] = { 0, 2, 10, 50, 100 }; /* % breaks */
	u32 n, i, at, rate;

	switch (c) {
	case 0: /* empty */
		return 0;
	case 1: case 2: case 3: case 4: /* 64 contiguous, from even/odd */
		n = c < 3 ? NPAGES : NPAGES - 1;
		for (i = 0; i < n; i++)
			pages[i] = pool_page(p, (c & 1) + i);
		return n;
	case 5: case 6: /* every page alone */
		n = c == 5 ? NPAGES : 7;
		for (i = 0; i < n; i++)
			pages[i] = pool_page(p, 2 * i);
		return n;
	case 7: /* pairs that do not continue each other */
		for (i = 0; i < NPAGES; i++)
			pages[i] = pool_page(p, (i / 2) * 3 + (i & 1));
		return NPAGES;
	default:
		break;
	}
	n = rnd_below(NPAGES + 1);
	rate = rates[rnd_below(ARRAY_SIZE(rates))];
	at = rnd_below(POOL_PAGES);
	for (i = 0; i < n; i++) {
		if (i && rnd_below(100) < rate) {
			switch (rnd_below(4)) {
			case 0: at = rnd_below(POOL_PAGES); break;
			case 1: at = at ? at - 1 : 0; break;	/* backwards */
			case 2: break;				/* repeat */
			default: at += 2; break;		/* skip one */
			}
		} else if (i) {
			at++;
		}
		pages[i] = pool_page(p, at);
	}
	return n;
}

typedef u32 (*find_fn)(struct tid_rdma_flow *, struct page **, u32,
		       struct tid_rdma_pageset *);

static void diff_find(struct diff_tally *t, unsigned long cases,
		      struct diff_pool *pool, find_fn orig, find_fn routed,
		      struct tid_rdma_flow *flow)
{
	struct page **pages;
	struct tid_rdma_pageset *a, *b;
	unsigned long c;

	pages = kcalloc(NPAGES, sizeof(*pages), GFP_KERNEL);
	a = kcalloc(NPAGES, sizeof(*a), GFP_KERNEL);
	b = kcalloc(NPAGES, sizeof(*b), GFP_KERNEL);
	if (!pages || !a || !b) {
		tally(t, false, "no memory");
		goto out;
	}
	for (c = 0; c < cases; c++) {
		u32 n = make_pages(pool, pages, c);
		u32 ra, rb;

		/* Same garbage in both: untouched bytes must stay equal. */
		get_random_bytes(a, NPAGES * sizeof(*a));
		memcpy(b, a, NPAGES * sizeof(*a));
		ra = orig(flow, pages, n, a);
		rb = routed(flow, pages, n, b);
		tally(t, ra == rb && !memcmp(a, b, NPAGES * sizeof(*a)),
		      "case %lu, %u pages: orig %u sets, rust %u sets", c, n,
		      ra, rb);
		if (!(c & 1023))
			cond_resched();
	}
out:
	kfree(pages);
	kfree(a);
	kfree(b);
}

/* ---- tid_flush_pages ---- */

static void diff_flush(struct diff_tally *t, unsigned long cases)
{
	struct tid_rdma_pageset *a, *b;
	unsigned long c;

	a = kcalloc(NPAGES, sizeof(*a), GFP_KERNEL);
	b = kcalloc(NPAGES, sizeof(*b), GFP_KERNEL);
	if (!a || !b) {
		tally(t, false, "no memory");
		goto out;
	}
	for (c = 0; c < cases; c++) {
		/*
		 * The domain the driver uses: idx + pages within the 64-page
		 * segment, and room for the sets (at most 7 chunks and a
		 * filler for 64 pages).
		 */
		u32 idx = c < 65 ? (u32)c : rnd_below(NPAGES + 1);
		u32 pages = c < 65 ? NPAGES - idx : rnd_below(NPAGES - idx + 1);
		u32 sets = rnd_below(NPAGES - 8 + 1);
		u32 ia = idx, ib = idx, ra, rb;

		get_random_bytes(a, NPAGES * sizeof(*a));
		memcpy(b, a, NPAGES * sizeof(*a));
		ra = hfi1_orig_tid_flush_pages(a, &ia, pages, sets);
		rb = hfi1_tid_route_tid_flush_pages(b, &ib, pages, sets);
		tally(t, ra == rb && ia == ib &&
			 !memcmp(a, b, NPAGES * sizeof(*a)),
		      "idx %u pages %u sets %u: orig %u/%u, rust %u/%u", idx,
		      pages, sets, ra, ia, rb, ib);
		if (!(c & 1023))
			cond_resched();
	}
out:
	kfree(a);
	kfree(b);
}

static void run_diff(unsigned long cases)
{
	struct diff_tally t_gen = { .name = "kern_flow_generation_next" };
	struct diff_tally t_res = { .name = "kern_reserve_flow" };
	struct diff_tally t_enc = { .name = "tid_rdma_opfn_encode" };
	struct diff_tally t_dec = { .name = "tid_rdma_opfn_decode" };
	struct diff_tally t_4k = { .name = "tid_rdma_find_phys_blocks_4k" };
	struct diff_tally t_8k = { .name = "tid_rdma_find_phys_blocks_8k" };
	struct diff_tally t_flush = { .name = "tid_flush_pages" };
	struct diff_tally *all[] = { &t_gen, &t_res, &t_enc, &t_dec,
				     &t_4k, &t_8k, &t_flush };
	struct hfi1_ctxtdata *rcd_a, *rcd_b;
	struct diff_pool pool = {};
	struct tid_rdma_request *req;
	struct tid_rdma_flow *flow;
	unsigned long passed = 0, failed = 0;
	bool have_mem;
	int i;

	rng = tid_diff_seed ? tid_diff_seed : (get_random_u64() | 1);
	pr_info("%s: %lu cases per function, seed %llu\n", DIFF, cases, rng);

	/* The originals trace through flow->req->qp when tracing is on. */
	if (trace_hfi1_tid_flow_page_enabled() || trace_hfi1_tid_pageset_enabled()) {
		pr_err("%s: tid tracepoints are on; turn them off first\n", DIFF);
		t_4k.failed++;
	}
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	flow = kzalloc(sizeof(*flow), GFP_KERNEL);
	rcd_a = kzalloc(sizeof(*rcd_a), GFP_KERNEL);
	rcd_b = kzalloc(sizeof(*rcd_b), GFP_KERNEL);
	have_mem = req && flow && rcd_a && rcd_b;
	for (i = 0; i < POOL_BLOCKS; i++) {
		pool.block[i] = alloc_pages(GFP_KERNEL, POOL_ORDER);
		have_mem = have_mem && pool.block[i];
	}
	if (have_mem && !t_4k.failed) {
		flow->req = req;
		diff_generation_next(&t_gen, cases);
		diff_reserve_flow(&t_res, cases, rcd_a, rcd_b);
		diff_opfn(&t_enc, &t_dec, cases);
		diff_find(&t_4k, cases, &pool,
			  hfi1_orig_tid_rdma_find_phys_blocks_4k,
			  hfi1_tid_route_tid_rdma_find_phys_blocks_4k, flow);
		diff_find(&t_8k, cases, &pool,
			  hfi1_orig_tid_rdma_find_phys_blocks_8k,
			  hfi1_tid_route_tid_rdma_find_phys_blocks_8k, flow);
		diff_flush(&t_flush, cases);
	} else if (!t_4k.failed) {
		pr_err("%s: no memory for the test\n", DIFF);
		t_gen.failed++;
	}
	for (i = 0; i < POOL_BLOCKS; i++)
		if (pool.block[i])
			__free_pages(pool.block[i], POOL_ORDER);
	kfree(flow);
	kfree(req);
	kfree(rcd_a);
	kfree(rcd_b);

	for (i = 0; i < ARRAY_SIZE(all); i++) {
		report(all[i]);
		passed += all[i]->passed;
		failed += all[i]->failed;
	}
	pr_info("%s: %lu passed, %lu failed\n", DIFF, passed, failed);
}

HFI1_TID_RUN_PARAM(tid_diff, run_diff,
		   "run the Rust-vs-original differential test with N cases per function (0: off)");
