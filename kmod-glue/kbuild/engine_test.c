// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * Self-test of the wait queues and the stateful engine on
 * real kernel primitives: named
 * spinlocks, a real workqueue for the deferred wake-ups (queue_work_on with
 * its "already pending" answer), reference-counted QPs, DMA mappings that
 * are counted, and get_random_u32() for the flow generations.
 *
 * Phase 1 ("exhaustion"): many QPs, each a small state machine on the
 * workqueue, set up a hardware flow and one segment, hold them a few
 * jiffies, and give them back. There are fewer flows than QPs and room in
 * the RcvArray for only two segments at a time, so most QPs are queued and
 * only progress when a deferred wake-up runs their send engine again.
 *
 * Phase 2 ("flush"): all 32 flows are taken, more QPs queue for one, half
 * of those are flushed (QP reset) while queued; releasing the flows must
 * wake only the others, and every reference must come back.
 *
 * Both phases run on two backends: the wait-queue harness (hfi1_tid_wt_*:
 * counted flow and RcvArray tokens taken and given back the way tid-flow
 * takes flows and TIDs, on the real qp-wait code), then the real receive
 * context (hfi1_tid_ctx_*, hfi1_tid_setup_hw_flow, hfi1_tid_exp_rcv_*,
 * ...). Each round of a QP is a new request, as each work request is in
 * the driver.
 *
 * As in the driver, the send engine calls every QP entry point with the
 * QP's s_lock held (engine_qp.c's wrappers take it); the engine asserts that
 * with lockdep_assert_held and takes the context's exp_lock inside, so
 * lockdep records s_lock -> exp_lock from these calls.
 */
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/delay.h>
#include <linux/jiffies.h>

#include "engine_test_priv.h"

static void phase_exhaustion(struct hfi1_tid_test_result *res, bool engine)
{
	struct etest *t = kzalloc(sizeof(*t), GFP_KERNEL);
	struct etest_occupancy s;
	int i, errors = 0, sends = 0;
	long waited;

	atomic_long_set(&etest_counters.wakeups_queued, 0);
	atomic_long_set(&etest_counters.wakeups_pending, 0);
	if (!t || etest_setup(t, NQPS, MODE_SEGMENT, engine)) {
		res->failed++;
		pr_err("%s: exhaustion: setup failed\n", HFI1_TID_MOD);
		goto out;
	}
	for (i = 0; i < NQPS; i++)
		queue_delayed_work(t->wq, &t->qps[i]->send_work, 0);
	waited = wait_for_completion_timeout(&t->all_done, 60 * HZ);
	flush_workqueue(t->wq);
	for (i = 0; i < NQPS; i++) {
		errors += t->qps[i]->error != 0;
		sends += atomic_read(&t->qps[i]->sends);
	}
	HFI1_TID_CHECK(res, waited > 0);
	HFI1_TID_CHECK(res, atomic_read(&t->done) == NQPS);
	HFI1_TID_CHECK(res, errors == 0);
	/* Most QPs had to wait: wake-ups ran their send engines again. */
	HFI1_TID_CHECK(res, sends > NQPS);
	HFI1_TID_CHECK(res, etest_stats(t, &s));
	HFI1_TID_CHECK(res, !s.tid_waits_known || s.tid_waits >= NQPS);
	HFI1_TID_CHECK(res, s.flows_used == 0 && s.groups_free == NGROUPS);
	HFI1_TID_CHECK(res, s.flow_waiters == 0 && s.rarr_waiters == 0);
	HFI1_TID_CHECK(res, !engine || (t->chip.tids > 0 && t->chip.writes > NFLOWS));
	HFI1_TID_CHECK(res, etest_chip_clean(t));
	HFI1_TID_CHECK(res, atomic_long_read(&etest_counters.dma_live) == 0);
	pr_info("%s: exhaustion (%s): %d QPs x 2 rounds, %d send-engine runs, %ld wake-ups queued, %ld already pending\n",
		HFI1_TID_MOD, engine ? "engine" : "wait queues", NQPS, sends,
		atomic_long_read(&etest_counters.wakeups_queued), atomic_long_read(&etest_counters.wakeups_pending));
out:
	if (t)
		etest_teardown(t, res);
	kfree(t);
}

static void phase_flush(struct hfi1_tid_test_result *res, bool engine)
{
	struct etest *t = kzalloc(sizeof(*t), GFP_KERNEL);
	struct etest_occupancy s;
	int i, tries, queued = 0, woken = 0, wrongly_woken = 0;

	if (!t || etest_setup(t, NFLOWS + NWAITERS, MODE_FLOW_ONLY, engine)) {
		res->failed++;
		pr_err("%s: flush: setup failed\n", HFI1_TID_MOD);
		goto out;
	}
	for (i = 0; i < NFLOWS; i++)
		HFI1_TID_CHECK(res, etest_acquire_flow(t, t->qps[i]) == 0);
	for (i = NFLOWS; i < NFLOWS + NWAITERS; i++) {
		queued += etest_acquire_flow(t, t->qps[i]) == -EAGAIN;
		HFI1_TID_CHECK(res, hfi1_tid_qp_waiting(t->qps[i]->h) == 1);
		/* The queue holds a reference. */
		HFI1_TID_CHECK(res, atomic_read(&t->qps[i]->refs) == 2);
	}
	HFI1_TID_CHECK(res, queued == NWAITERS);
	/* QP reset of every other waiter while it is queued. */
	for (i = NFLOWS; i < NFLOWS + NWAITERS; i += 2) {
		t->qps[i]->flushed = true;
		HFI1_TID_CHECK(res, etest_flush(t, t->qps[i]) == 0);
		HFI1_TID_CHECK(res, hfi1_tid_qp_waiting(t->qps[i]->h) == 0);
		HFI1_TID_CHECK(res, atomic_read(&t->qps[i]->refs) == 1);
	}
	flush_workqueue(t->wq);
	HFI1_TID_CHECK(res, etest_stats(t, &s) && s.flows_used == NFLOWS &&
			    s.flow_waiters == NWAITERS / 2);
	/* Release the flows: the remaining waiters must get them. */
	for (i = 0; i < NFLOWS; i++) {
		etest_release_flow(t, t->qps[i]);
		t->qps[i]->got_flow = false;
	}
	/*
	 * Each waiter that gets a flow wakes the next through its trigger
	 * work, so the chain of work items grows while we flush: wait until
	 * it has settled (or give up after five seconds).
	 */
	for (tries = 0; tries < 500; tries++) {
		flush_workqueue(t->wq);
		woken = 0;
		for (i = NFLOWS; i < NFLOWS + NWAITERS; i++)
			woken += !t->qps[i]->flushed && t->qps[i]->got_flow;
		if (woken == NWAITERS / 2)
			break;
		msleep(10);
	}
	flush_workqueue(t->wq);
	woken = 0;
	for (i = NFLOWS; i < NFLOWS + NWAITERS; i++) {
		if (t->qps[i]->flushed)
			wrongly_woken += atomic_read(&t->qps[i]->sends);
		else
			woken += t->qps[i]->got_flow;
	}
	HFI1_TID_CHECK(res, woken == NWAITERS / 2);
	HFI1_TID_CHECK(res, wrongly_woken == 0);
	HFI1_TID_CHECK(res, etest_stats(t, &s) && s.flows_used == NWAITERS / 2 &&
			    s.flow_waiters == 0);
	for (i = NFLOWS; i < NFLOWS + NWAITERS; i++) {
		if (t->qps[i]->got_flow)
			etest_release_flow(t, t->qps[i]);
		HFI1_TID_CHECK(res, atomic_read(&t->qps[i]->refs) == 1);
	}
	flush_workqueue(t->wq);
	HFI1_TID_CHECK(res, etest_stats(t, &s) && s.flows_used == 0);
	HFI1_TID_CHECK(res, etest_chip_clean(t));
	pr_info("%s: flush (%s): %d queued, %d flushed, %d woken after release\n",
		HFI1_TID_MOD, engine ? "engine" : "wait queues", queued,
		NWAITERS / 2, woken);
out:
	if (t)
		etest_teardown(t, res);
	kfree(t);
}

/*
 * Phases 3 to 5 ("read", "write", "mixed"): TID RDMA READs, TID RDMA
 * WRITEs, and both mixed on each QP, between requester and responder
 * engines (prototest.rs): kernel spinlocks of the r_lock, s_lock and
 * exp_lock classes and kmalloc, each side's data placed by its software
 * chip and compared byte by byte, nothing held at the end.
 */
enum proto_phase { PHASE_READ, PHASE_WRITE, PHASE_MIXED };

static void phase_proto(struct hfi1_tid_test_result *res, enum proto_phase p)
{
	static const char *const names[] = { "READ", "WRITE", "mixed" };
	unsigned int failed_before = res->failed;
	struct hfi1_tid_proto_result r = {};
	int ret;

	switch (p) {
	case PHASE_READ:
		ret = hfi1_tid_read_test(&r);
		break;
	case PHASE_WRITE:
		ret = hfi1_tid_write_test(&r);
		break;
	default:
		ret = hfi1_tid_mix_test(&r);
		break;
	}
	HFI1_TID_CHECK(res, ret == 0);
	HFI1_TID_CHECK(res, r.posted > 0 && r.completed == r.posted);
	HFI1_TID_CHECK(res, r.failed == 0 && r.errors == 0 && r.timeouts == 0);
	HFI1_TID_CHECK(res, r.verified_bytes > 0 && r.mismatched_bytes == 0);
	HFI1_TID_CHECK(res, r.left_over == 0);
	switch (p) {
	case PHASE_READ:
		/* The requesters had to wait for RcvArray space. */
		HFI1_TID_CHECK(res, r.writes == 0 && r.tid_waits > 0);
		break;
	case PHASE_WRITE:
		/*
		 * Every request a TID WRITE, its data received by the
		 * responder and TID-ACKed; the responders ran out of
		 * RcvArray space and RNR-NAKed, and the RNR timer
		 * brought the WRITE_REQs back.
		 */
		HFI1_TID_CHECK(res, r.writes == r.posted && r.write_segments > 0);
		HFI1_TID_CHECK(res, r.tid_acks > 0 && r.second_leg_runs > 0);
		HFI1_TID_CHECK(res, r.rnr_naks > 0 && r.rnr_timeouts > 0);
		break;
	default:
		HFI1_TID_CHECK(res, r.writes > 0 && r.writes < r.posted);
		HFI1_TID_CHECK(res, r.segments > 0 && r.write_segments > 0);
		break;
	}
	res->proto_left += r.left_over;
	pr_info("%s: %s (engines): %llu of %llu requests (%llu WRITEs) %s, %llu bytes checked, %llu mismatched, %llu READ segments, %llu RcvArray waits, %llu WRITE segments, %llu RNR NAKs, %llu RNR timeouts, %llu TID ACKs, %llu second legs, %llu+%llu packets, %llu retry timeouts, %llu errors, %llu steps, %llu left over\n",
		HFI1_TID_MOD, names[p], r.completed, r.posted, r.writes,
		res->failed == failed_before ? "passed" : "FAILED",
		r.verified_bytes, r.mismatched_bytes, r.segments, r.tid_waits,
		r.write_segments, r.rnr_naks, r.rnr_timeouts, r.tid_acks,
		r.second_leg_runs, r.to_responder, r.to_requester, r.timeouts,
		r.errors, r.steps, r.left_over);
}

void hfi1_tid_engine_test(struct hfi1_tid_test_result *res)
{
	int r = hfi1_tid_platform_register(&etest_platform_ops);

	HFI1_TID_CHECK(res, r == 0);
	if (r)
		return;
	/* A second table is refused; a table with a hole would be too. */
	HFI1_TID_CHECK(res, hfi1_tid_platform_register(&etest_platform_ops) == -EBUSY);
	phase_exhaustion(res, false);
	phase_flush(res, false);
	phase_exhaustion(res, true);
	phase_flush(res, true);
	phase_proto(res, PHASE_READ);
	phase_proto(res, PHASE_WRITE);
	phase_proto(res, PHASE_MIXED);
	HFI1_TID_CHECK(res, atomic_long_read(&etest_counters.extra_refs) == 0);
	HFI1_TID_CHECK(res, atomic_long_read(&etest_counters.dma_live) == 0);
	HFI1_TID_CHECK(res, atomic_long_read(&etest_counters.kmem_waits) == 0);
	res->objects_left = hfi1_tid_live_objects();
	res->qp_refs_left = atomic_long_read(&etest_counters.extra_refs);
	res->dma_left = atomic_long_read(&etest_counters.dma_live);
	HFI1_TID_CHECK(res, res->objects_left == 0);
	HFI1_TID_CHECK(res, hfi1_tid_platform_unregister() == 0);
}
