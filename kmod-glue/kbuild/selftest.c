// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * In-kernel self-test of the Rust TID RDMA engine. Runs at module load,
 * prints "hfi1_tid_selftest: N passed, M failed", and at unload reports
 * whether every allocation (and, as the engine grows, every QP reference,
 * TID and flow) was given back.
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/random.h>

#include "hfi1_tid.h"
#include "glue.h"
#include "engine_test.h"

static ulong seed;
module_param(seed, ulong, 0444);
MODULE_PARM_DESC(seed, "seed for the random inputs (0: pick one and print it)");

static unsigned int passed, failed;
static struct hfi1_tid_test_result engine;

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (cond) {                                                  \
			passed++;                                            \
		} else {                                                     \
			failed++;                                            \
			pr_err("%s: check failed at %s:%d: %s\n", HFI1_TID_MOD, \
			       __func__, __LINE__, #cond);                    \
		}                                                            \
	} while (0)

/* xorshift64*: reproducible inputs from the printed seed. */
static u64 rng_state;

static u64 rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* ---- a register-file chip: what the driver's CSR writes would hit ---- */

#define NFLOWS 32
#define GEN_RESERVED 0xFFFFFu
#define GEN_MASK 0xFFFFFu

struct reg_chip {
	spinlock_t exp_lock;
	u64 flow[NFLOWS];
	unsigned int flow_writes;
	unsigned int bad_index;
	unsigned int tid_writes;
	unsigned int wc_fills;
};

/* Disabling the flows must not touch the RcvArray: any write is wrong. */
static void reg_put_tid(void *chip, u32 rcventry, u32 ty, u64 pa, u32 order)
{
	struct reg_chip *c = chip;

	c->tid_writes++;
	c->bad_index++;
}

static void reg_wc_fill(void *chip, u32 rcventry)
{
	struct reg_chip *c = chip;

	c->wc_fills++;
	c->bad_index++;
}

static void reg_write_flow(void *chip, u32 flow, u64 value)
{
	struct reg_chip *c = chip;

	lockdep_assert_held(&c->exp_lock);
	if (flow >= NFLOWS) {
		c->bad_index++;
		return;
	}
	c->flow[flow] = value;
	c->flow_writes++;
}

static u64 reg_read_flow(void *chip, u32 flow)
{
	struct reg_chip *c = chip;

	if (flow >= NFLOWS) {
		c->bad_index++;
		return 0;
	}
	return c->flow[flow];
}

static const struct hfi1_tid_chip_ops reg_ops = {
	.put_tid = reg_put_tid,
	.wc_fill = reg_wc_fill,
	.write_flow = reg_write_flow,
	.read_flow = reg_read_flow,
};

/* The disabled-flow register value, built from the SPEC's bit layout. */
static u64 disabled_flow_value(void)
{
	return ((u64)GEN_RESERVED << 11) | BIT_ULL(32) | BIT_ULL(34) |
	       BIT_ULL(35) | BIT_ULL(37) | BIT_ULL(38);
}

/* ---- tests ---- */

static void test_abi(void)
{
	CHECK(hfi1_tid_abi_version() == HFI1_TID_ABI_VERSION);
}

static void test_generation_next(void)
{
	static const u32 edge[] = { 0, 1, 0xFFFFD, 0xFFFFE, 0xFFFFF, 0x100000,
				    0x7FFFFFFF, 0xFFFFFFFF };
	unsigned int i, bad = 0;

	CHECK(hfi1_tid_generation_next(0xFFFFE) == 0);
	CHECK(hfi1_tid_generation_next(0xFFFFF) == 0);
	CHECK(hfi1_tid_generation_next(0) == 1);
	for (i = 0; i < ARRAY_SIZE(edge) + 100000; i++) {
		u32 g = i < ARRAY_SIZE(edge) ? edge[i] : (u32)rnd();
		u32 n = hfi1_tid_generation_next(g);
		u32 plain = (g + 1) & GEN_MASK;

		/* Never the reserved value, always 20 bits, +1 otherwise. */
		if (n == GEN_RESERVED || n > GEN_MASK ||
		    n != (plain == GEN_RESERVED ? 0 : plain))
			bad++;
	}
	CHECK(bad == 0);
}

static void test_flows_disable_regfile(void)
{
	struct hfi1_tid_chip_ops partial = reg_ops;
	struct reg_chip *c;
	unsigned long flags;
	unsigned int i, wrong = 0;
	int ret;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	CHECK(c);
	if (!c)
		return;
	spin_lock_init(&c->exp_lock);
	for (i = 0; i < NFLOWS; i++)
		c->flow[i] = rnd();

	spin_lock_irqsave(&c->exp_lock, flags);
	ret = hfi1_tid_flows_disable(&reg_ops, c);
	spin_unlock_irqrestore(&c->exp_lock, flags);
	CHECK(ret == 0);
	CHECK(c->flow_writes == NFLOWS);
	CHECK(c->bad_index == 0);
	for (i = 0; i < NFLOWS; i++)
		if (c->flow[i] != disabled_flow_value())
			wrong++;
	CHECK(wrong == 0);

	/* Bad tables are refused before any callback runs. */
	CHECK(hfi1_tid_flows_disable(NULL, c) == -EINVAL);
	partial.read_flow = NULL;
	CHECK(hfi1_tid_flows_disable(&partial, c) == -EINVAL);
	CHECK(c->flow_writes == NFLOWS);
	kfree(c);
}

static void test_sim_chips(void)
{
	struct hfi1_tid_alloc_stats before, after;
	spinlock_t lock;
	unsigned long flags;
	void *a, *b;
	unsigned int i, wrong = 0;

	spin_lock_init(&lock);
	hfi1_tid_alloc_stats(&before);
	a = hfi1_tid_sim_create(0, 2048);	/* process context: GFP_KERNEL */
	spin_lock_irqsave(&lock, flags);
	b = hfi1_tid_sim_create(2048, 2048);	/* under a spinlock: GFP_ATOMIC */
	spin_unlock_irqrestore(&lock, flags);
	hfi1_tid_alloc_stats(&after);
	CHECK(a && b);
	CHECK(after.live > before.live);
	CHECK(after.atomic > before.atomic);
	if (a && b) {
		CHECK(hfi1_tid_flows_disable(hfi1_tid_sim_ops(), a) == 0);
		CHECK(hfi1_tid_flows_disable(hfi1_tid_sim_ops(), b) == 0);
		for (i = 0; i < NFLOWS; i++)
			if (hfi1_tid_sim_read_flow(a, i) != disabled_flow_value() ||
			    hfi1_tid_sim_read_flow(b, i) != disabled_flow_value())
				wrong++;
		CHECK(wrong == 0);
		CHECK(hfi1_tid_sim_read_flow(a, NFLOWS) == U64_MAX);
		CHECK(hfi1_tid_sim_stats(a) == 0);	/* 0 expected, 0 faults */
	}
	hfi1_tid_sim_destroy(a);
	hfi1_tid_sim_destroy(b);
	hfi1_tid_sim_destroy(NULL);
	hfi1_tid_alloc_stats(&after);
	CHECK(after.live == before.live);

	/* Out-of-range and failing allocations come back as NULL. */
	CHECK(!hfi1_tid_sim_create(U32_MAX, 2));
	CHECK(!hfi1_tid_sim_create(0, 1u << 20));
	hfi1_tid_fail_next_allocs(1);
	a = hfi1_tid_sim_create(0, 64);
	hfi1_tid_fail_next_allocs(0);
	CHECK(!a);
	hfi1_tid_sim_destroy(a);
}

static int __init hfi1_tid_selftest_init(void)
{
	if (!seed)
		seed = get_random_u64() | 1;
	rng_state = seed;
	pr_info("%s: seed %lu\n", HFI1_TID_MOD, seed);

	test_abi();
	test_generation_next();
	test_flows_disable_regfile();
	test_sim_chips();
	hfi1_tid_engine_test(&engine);
	passed += engine.passed;
	failed += engine.failed;
#ifdef HFI1_TID_LOCKDEP_DEMO
	CHECK(hfi1_tid_lockdep_demo() == 0);
#endif
	pr_info("%s: %u passed, %u failed\n", HFI1_TID_MOD, passed, failed);
	return 0;
}

static void __exit hfi1_tid_selftest_exit(void)
{
	struct hfi1_tid_alloc_stats s;
	struct hfi1_tid_test_result *e = &engine;
	unsigned long left;

	hfi1_tid_alloc_stats(&s);
	left = s.live + e->flows_left + e->groups_left + e->waiters_left +
	       e->qps_still_referenced + e->ctx_busy + e->objects_left +
	       e->qp_refs_left + e->dma_left + e->proto_left;
	pr_info("%s: unload: allocations live %ld (of %ld, %ld atomic), qp refs %lu, QPs still referenced %lu, TID groups %lu, flows %lu, waiters %lu, busy contexts %lu, engine objects %lu, DMA mappings %lu, READ/WRITE tests %lu\n",
		HFI1_TID_MOD, s.live, s.total, s.atomic, e->qp_refs_left,
		e->qps_still_referenced, e->groups_left, e->flows_left,
		e->waiters_left, e->ctx_busy, e->objects_left, e->dma_left,
		e->proto_left);
	if (left)
		pr_err("%s: unload: LEAK\n", HFI1_TID_MOD);
	else
		pr_info("%s: unload: nothing left over\n", HFI1_TID_MOD);
}

module_init(hfi1_tid_selftest_init);
module_exit(hfi1_tid_selftest_exit);
MODULE_LICENSE("Dual BSD/GPL");
MODULE_DESCRIPTION("Self-test of the Rust hfi1 TID RDMA engine");
