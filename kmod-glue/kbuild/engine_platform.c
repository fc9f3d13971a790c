// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * The platform and chip callbacks of the stateful-engine self-test: real
 * kernel primitives (a workqueue for the deferred wake-ups, counted QP
 * references and DMA mappings, get_random_u32()), and a register file
 * that checks every RcvArray and flow-table write the engine makes.
 */
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/io.h>
#include <linux/random.h>
#include <linux/cpumask.h>

#include "engine_test_priv.h"

struct etest_counters etest_counters = {
	.extra_refs = ATOMIC_LONG_INIT(0),
	.dma_live = ATOMIC_LONG_INIT(0),
	.wakeups_queued = ATOMIC_LONG_INIT(0),
	.wakeups_pending = ATOMIC_LONG_INIT(0),
	.kmem_waits = ATOMIC_LONG_INIT(0),
};

/* ---- platform callbacks ---- */

static void p_qp_get(void *cookie)
{
	struct tqp *q = cookie;

	atomic_inc(&q->refs);
	atomic_long_inc(&etest_counters.extra_refs);
}

static void p_qp_put(void *cookie)
{
	struct tqp *q = cookie;

	atomic_long_dec(&etest_counters.extra_refs);
	if (atomic_dec_and_test(&q->refs))
		tqp_release(q);
}

static bool p_queue_trigger(void *cookie, u32 cpu)
{
	struct tqp *q = cookie;
	bool queued;

	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		cpu = WORK_CPU_UNBOUND;
	queued = queue_work_on(cpu, q->t->wq, &q->trigger_work);
	atomic_long_inc(queued ? &etest_counters.wakeups_queued : &etest_counters.wakeups_pending);
	return queued;
}

static void p_schedule_send(void *cookie)
{
	struct tqp *q = cookie;

	atomic_inc(&q->sends);
	queue_delayed_work(q->t->wq, &q->send_work, 0);
}

static void p_do_send(void *cookie)
{
	p_schedule_send(cookie);
}

static int p_dma_map(void *dev, u64 addr, u32 len, u64 *bus)
{
	if (!virt_addr_valid((void *)(uintptr_t)addr))
		return -EFAULT;
	*bus = virt_to_phys((void *)(uintptr_t)addr);
	atomic_long_inc(&etest_counters.dma_live);
	return 0;
}

static void p_dma_unmap(void *dev, u64 bus, u32 len)
{
	atomic_long_dec(&etest_counters.dma_live);
}

static void p_wait_kmem(void *cookie, u32 *s_flags)
{
	*s_flags |= 0x2000; /* RVT_S_WAIT_KMEM */
	atomic_long_inc(&etest_counters.kmem_waits);
}

static u32 p_random_u32(void)
{
	return get_random_u32();
}

/*
 * The second leg's work: these phases post no WRITE, so the engine must
 * never ask for it (the READ and WRITE test's QPs run on the Rust side's
 * own scheduler).
 */
static bool p_queue_tid_send(void *cookie, u32 cpu)
{
	WARN_ONCE(1, "hfi1_tid_selftest: second leg queued without a WRITE\n");
	return false;
}

const struct hfi1_tid_platform_ops etest_platform_ops = {
	.spin_lock_init = hfi1_tid_spin_lock_init,
	.spin_lock_irqsave = hfi1_tid_spin_lock_irqsave,
	.spin_unlock_irqrestore = hfi1_tid_spin_unlock_irqrestore,
	.lockdep_assert_held = hfi1_tid_lockdep_assert_held,
	.qp_get = p_qp_get,
	.qp_put = p_qp_put,
	.queue_trigger = p_queue_trigger,
	.schedule_send = p_schedule_send,
	.do_send = p_do_send,
	.dma_map = p_dma_map,
	.dma_unmap = p_dma_unmap,
	.wait_kmem = p_wait_kmem,
	.random_u32 = p_random_u32,
	.queue_tid_send = p_queue_tid_send,
};

/* The chip: a register file, written under exp_lock. */
static void chip_bad(struct etest *t, const char *what, u32 at, u64 v)
{
	if (t->chip.bad++ < 4)
		pr_err("%s: chip: %s (entry/flow %u, value %#llx)\n", HFI1_TID_MOD,
		       what, at, v);
}

static bool is_test_page_bus(struct etest *t, u64 pa)
{
	int i;

	for (i = 0; i < SEG_PAGES; i++)
		if (t->pages[i] && pa == virt_to_phys(page_address(t->pages[i])))
			return true;
	return false;
}

static void c_put_tid(void *chip, u32 rcventry, u32 ty, u64 pa, u32 order)
{
	struct etest *t = chip;
	u32 e = rcventry - EXP_BASE;

	t->chip.tids++;
	if (rcventry < EXP_BASE || e >= NENTRIES) {
		chip_bad(t, "RcvArray entry outside the context", rcventry, pa);
		return;
	}
	if (ty == HFI1_TID_RCV_EXPECTED) {
		if (t->chip.expected[e]) {
			chip_bad(t, "EXPECTED over a programmed entry", rcventry, pa);
			return;
		}
		if (order != 1 || !is_test_page_bus(t, pa)) {
			chip_bad(t, "EXPECTED with a wrong address or order", rcventry, pa);
			return;
		}
		t->chip.expected[e] = true;
	} else if (ty == HFI1_TID_RCV_INVALID) {
		if (pa || order) {
			chip_bad(t, "INVALID with an address or order", rcventry, pa);
			return;
		}
		if (!t->chip.expected[e]) {
			chip_bad(t, "INVALID over a free entry", rcventry, pa);
			return;
		}
		t->chip.expected[e] = false;
	} else {
		chip_bad(t, "unknown RcvArray type", rcventry, ty);
	}
}

static void c_wc_fill(void *chip, u32 rcventry)
{
	struct etest *t = chip;

	t->chip.fills++;
	if (rcventry < EXP_BASE || rcventry - EXP_BASE >= NENTRIES)
		chip_bad(t, "write-combining fill outside the context", rcventry, 0);
}

static void c_write_flow(void *chip, u32 flow, u64 value)
{
	struct etest *t = chip;
	u64 gen = (value >> 11) & GEN_RESERVED;
	u64 want = (gen << 11) | FLOW_FIXED_BITS |
		   (gen == GEN_RESERVED ? 0 : FLOW_HDR_SUPP);

	t->chip.writes++;
	if (flow >= NFLOWS) {
		chip_bad(t, "flow index out of range", flow, value);
		return;
	}
	if (value != want) {
		chip_bad(t, "flow register value the driver never writes", flow, value);
		return;
	}
	if (gen != GEN_RESERVED && t->chip.armed[flow]) {
		chip_bad(t, "arming an armed flow", flow, value);
		return;
	}
	t->chip.armed[flow] = gen != GEN_RESERVED;
	t->chip.flow[flow] = value;
}

/* Every write was one the driver makes, and nothing is left programmed. */
bool etest_chip_clean(struct etest *t)
{
	int i;

	if (!t->engine)
		return true;
	for (i = 0; i < NENTRIES; i++)
		if (t->chip.expected[i])
			return false;
	for (i = 0; i < NFLOWS; i++)
		if (t->chip.armed[i])
			return false;
	return t->chip.bad == 0;
}

static u64 c_read_flow(void *chip, u32 flow)
{
	struct etest *t = chip;

	return flow < NFLOWS ? t->chip.flow[flow] : 0;
}

const struct hfi1_tid_chip_ops etest_chip_ops = {
	.put_tid = c_put_tid,
	.wc_fill = c_wc_fill,
	.write_flow = c_write_flow,
	.read_flow = c_read_flow,
};
