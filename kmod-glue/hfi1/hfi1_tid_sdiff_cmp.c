// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * The stateful differential test's comparison of its two worlds, and the
 * model of the three documented differences of the Rust engine (see
 * hfi1_tid_sdiff_run.c): what each operation must leave equal, and
 * exactly what B may do beyond A.
 */
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/workqueue.h>

#include "hfi.h"
#include "qp.h"
#include "verbs.h"
#include "exp_rcv.h"
#include "tid_rdma.h"
#include "hfi1_tid.h"
#include "hfi1_tid_route.h"
#include "hfi1_tid_sdiff.h"

static struct tid_rdma_request *req_of(struct sd_world *w, int qi, int ri)
{
	return &w->q[qi].req[ri].sp->tid_req;
}

/* The QPs on `queue`, head first, as indices; their number. */
static int queue_order(struct sd_world *w, struct tid_queue *queue, int *out)
{
	struct hfi1_qp_priv *priv;
	int n = 0;

	list_for_each_entry(priv, &queue->queue_head, tid_wait) {
		if (n >= SD_QPS)
			return -1;
		out[n++] = sd_qp_index(w, priv->owner);
	}
	return n;
}

/* The groups on `set`, head first, as indices; their number. */
static int group_order(struct hfi1_ctxtdata *rcd, struct exp_tid_set *set,
		       int *out, int max)
{
	struct tid_group *grp;
	int n = 0;

	list_for_each_entry(grp, &set->list, list) {
		if (n >= max)
			return -1;
		out[n++] = hfi1_tid_group_to_idx(rcd, grp);
	}
	return n;
}

/* ---- The model of the documented differences ----------------------------- */

void sd_model_before(struct sd_test *t, struct sd_model *m, enum sd_op op,
		     int qi, int ri)
{
	struct sd_world *a = &t->a;
	struct sd_shared *sh = &t->sh;
	struct tid_rdma_request *req = req_of(a, qi, ri);
	int order[SD_QPS], n, k;

	m->flush_succ = -1;
	switch (op) {
	case OP_FLUSH_WAIT:
		/* The QP behind it, if it is the head of a queue. */
		for (k = 0; k < 2; k++) {
			n = queue_order(a, k ? &a->rcd->rarr_queue :
					       &a->rcd->flow_queue, order);
			if (n >= 2 && order[0] == qi)
				m->flush_succ = order[1];
		}
		break;
	case OP_EXP_RCV_CLEAR_ALL:
		if (!sh->given_up[qi][ri] && req->flows) {
			struct tid_rdma_flow *f = &req->flows[req->setup_head];

			m->dev4_unmap = f->npagesets && f->pagesets[0].mapped;
		}
		break;
	case OP_FREE_FLOWS:
	case OP_CLEAN_SWQE:
		m->dev4_leak = sh->given_up[qi][ri] && req->flows;
		break;
	default:
		break;
	}
}

/* B woke the QP behind the flushed head: take that wake-up out of B. */
static void model_flush(struct sd_test *t, int succ)
{
	struct sd_world *b = &t->b;
	struct sd_event *e = b->nlog ? &b->log[b->nlog - 1] : NULL;
	u32 from;

	if (!e || e->kind != EV_QUEUE || e->a != succ) {
		sd_mismatch(t, "flush: B did not wake QP %d behind the head", succ);
		return;
	}
	t->sh.flush_wakes++;
	b->nlog--;
	if (!e->c)
		return;
	/* Queued: its work runs at once (the test's workqueue), in B only. */
	from = b->nlog;
	if (sd_run_work_last(b) != succ) {
		sd_mismatch(t, "flush: B's queued work is not QP %d's", succ);
		return;
	}
	while (b->nlog > from) {
		e = &b->log[b->nlog - 1];
		if (e->kind != EV_DO_SEND || e->a != succ) {
			sd_mismatch(t, "flush: B's extra wake-up of QP %d did more", succ);
			return;
		}
		b->nlog--;
	}
}

/*
 * B unmapped and forgot the waiting setup at the end of clear_all; the
 * request is given up (only freed from now on, as the driver does).
 */
static void model_dev4_unmap(struct sd_test *t, int qi, int ri)
{
	struct sd_shared *sh = &t->sh;
	struct sd_world *b = &t->b;
	struct tid_rdma_request *req = req_of(&t->a, qi, ri);
	struct tid_rdma_flow *f = &req->flows[req->setup_head];
	u32 i, k = 0, first;

	for (i = 0; i < f->npagesets; i++)
		if (f->pagesets[i].count && f->pagesets[i].mapped)
			k++;
	if (b->nlog < k) {
		sd_mismatch(t, "clear_all: B did not unmap the waiting setup");
		return;
	}
	first = b->nlog - k;
	k = 0;
	for (i = 0; i < f->npagesets; i++) {
		struct sd_event *e = &b->log[first + k];
		u64 len = (u64)f->pagesets[i].count * PAGE_SIZE;

		if (!f->pagesets[i].count || !f->pagesets[i].mapped)
			continue;
		if (e->kind != EV_UNMAP || e->a != f->pagesets[i].addr || e->b != len) {
			sd_mismatch(t, "clear_all: B's unmap %u is not set %u", k, i);
			return;
		}
		sh->dev4[qi][ri][k].bus = e->a;
		sh->dev4[qi][ri][k].len = e->b;
		k++;
	}
	sh->ndev4[qi][ri] = k;
	sh->dev4_slot[qi][ri] = req->setup_head;
	sh->given_up[qi][ri] = true;
	b->nlog = first;
	sh->clear_all_unmaps++;
}

void sd_model_after(struct sd_test *t, struct sd_model *m, enum sd_op op,
		    int qi, int ri)
{
	struct sd_shared *sh = &t->sh;
	u32 k;

	if (m->flush_succ >= 0)
		model_flush(t, m->flush_succ);
	if (m->dev4_unmap)
		model_dev4_unmap(t, qi, ri);
	if (m->dev4_leak) {
		/* A's mappings are lost for good: counted, out of the books. */
		for (k = 0; k < sh->ndev4[qi][ri]; k++) {
			t->a.nmap = sd_map_remove(t->a.map, t->a.nmap,
						  &sh->dev4[qi][ri][k]);
			sh->nleaked++;
		}
		sh->ndev4[qi][ri] = 0;
		sh->given_up[qi][ri] = false;
	}
}

/* ---- The comparison -------------------------------------------------------- */

void sd_compare_logs(struct sd_test *t)
{
	struct sd_world *a = &t->a, *b = &t->b;
	u32 i;

	CHECK(t, !a->overflow && !b->overflow, "a record overflowed");
	for (i = 0; i < a->nlog && i < b->nlog; i++) {
		struct sd_event *x = &a->log[i], *y = &b->log[i];

		if (memcmp(x, y, sizeof(*x))) {
			sd_mismatch(t, "call %u: %u(%llx %llx %llx %llx) / %u(%llx %llx %llx %llx)",
				    i, x->kind, x->a, x->b, x->c, x->d,
				    y->kind, y->a, y->b, y->c, y->d);
			return;
		}
	}
	CHECK(t, a->nlog == b->nlog, "%u calls / %u calls (next: %u / %u)",
	      a->nlog, b->nlog, i < a->nlog ? a->log[i].kind : 0,
	      i < b->nlog ? b->log[i].kind : 0);
}

static void compare_groups(struct sd_test *t)
{
	struct hfi1_ctxtdata *ra = t->a.rcd, *rb = t->b.rcd;
	int oa[SD_GROUPS], ob[SD_GROUPS];
	struct exp_tid_set *sa[3] = { &ra->tid_group_list, &ra->tid_used_list,
				      &ra->tid_full_list };
	struct exp_tid_set *sb[3] = { &rb->tid_group_list, &rb->tid_used_list,
				      &rb->tid_full_list };
	u32 n = ra->expected_count / 8, g;
	int k, na, nb;

	CHECK(t, !ra->groups == !rb->groups, "groups allocated / not");
	for (g = 0; ra->groups && rb->groups && g < n; g++) {
		struct tid_group *x = &ra->groups[g], *y = &rb->groups[g];

		CHECK(t, x->base == y->base && x->size == y->size &&
		      x->used == y->used && x->map == y->map,
		      "group %u: base %u/%u size %u/%u used %u/%u map %x/%x", g,
		      x->base, y->base, x->size, y->size, x->used, y->used,
		      x->map, y->map);
	}
	for (k = 0; k < 3; k++) {
		na = group_order(ra, sa[k], oa, SD_GROUPS);
		nb = group_order(rb, sb[k], ob, SD_GROUPS);
		CHECK(t, na == nb && na >= 0 && !memcmp(oa, ob, na * sizeof(int)),
		      "group list %d: %d / %d groups, or another order", k, na, nb);
		CHECK(t, sa[k]->count == sb[k]->count, "group list %d count %u / %u",
		      k, sa[k]->count, sb[k]->count);
	}
}

static void compare_queues(struct sd_test *t)
{
	struct hfi1_ctxtdata *ra = t->a.rcd, *rb = t->b.rcd;
	struct tid_queue *qa[2] = { &ra->flow_queue, &ra->rarr_queue };
	struct tid_queue *qb[2] = { &rb->flow_queue, &rb->rarr_queue };
	int oa[SD_QPS], ob[SD_QPS], k, na, nb;

	for (k = 0; k < 2; k++) {
		na = queue_order(&t->a, qa[k], oa);
		nb = queue_order(&t->b, qb[k], ob);
		CHECK(t, na == nb && na >= 0 && !memcmp(oa, ob, na * sizeof(int)),
		      "%s queue: %d / %d QPs, or another order (heads %d / %d)",
		      k ? "RcvArray" : "flow", na, nb, na > 0 ? oa[0] : -1,
		      nb > 0 ? ob[0] : -1);
		CHECK(t, qa[k]->enqueue == qb[k]->enqueue &&
		      qa[k]->dequeue == qb[k]->dequeue,
		      "%s queue counters %u+%u / %u+%u", k ? "RcvArray" : "flow",
		      qa[k]->enqueue, qa[k]->dequeue, qb[k]->enqueue,
		      qb[k]->dequeue);
	}
}

static void compare_qps(struct sd_test *t)
{
	int i;
	u32 k;

	for (i = 0; i < SD_QPS; i++) {
		struct rvt_qp *x = t->a.q[i].qp, *y = t->b.q[i].qp;
		struct hfi1_qp_priv *px = x->priv, *py = y->priv;

		CHECK(t, x->s_flags == y->s_flags, "QP %d s_flags %x / %x", i,
		      x->s_flags, y->s_flags);
		CHECK(t, !memcmp(&px->flow_state, &py->flow_state,
				 sizeof(px->flow_state)),
		      "QP %d flow state idx %u/%u gen %x/%x psn %u/%u last %u/%u",
		      i, px->flow_state.index, py->flow_state.index,
		      px->flow_state.generation, py->flow_state.generation,
		      px->flow_state.psn, py->flow_state.psn,
		      px->flow_state.last_index, py->flow_state.last_index);
		CHECK(t, px->tid_enqueue == py->tid_enqueue,
		      "QP %d tid_enqueue %u / %u", i, px->tid_enqueue,
		      py->tid_enqueue);
		CHECK(t, list_empty(&px->tid_wait) == list_empty(&py->tid_wait),
		      "QP %d waits / does not", i);
		CHECK(t, atomic_read(&x->refcount) == atomic_read(&y->refcount),
		      "QP %d references %d / %d", i, atomic_read(&x->refcount),
		      atomic_read(&y->refcount));
		CHECK(t, work_pending(&px->tid_rdma.trigger_work) ==
			 work_pending(&py->tid_rdma.trigger_work),
		      "QP %d trigger work pending / not", i);
	}
	CHECK(t, t->a.nwork == t->b.nwork, "%u / %u trigger work items queued",
	      t->a.nwork, t->b.nwork);
	for (k = 0; k < t->a.nwork && k < t->b.nwork; k++)
		CHECK(t, sd_work_qp(&t->a, k) == sd_work_qp(&t->b, k),
		      "trigger work %u: QP %d / %d", k, sd_work_qp(&t->a, k),
		      sd_work_qp(&t->b, k));
	CHECK(t, t->a.nkmem == t->b.nkmem, "%u / %u QPs wait for memory",
	      t->a.nkmem, t->b.nkmem);
	for (k = 0; k < t->a.nkmem && k < t->b.nkmem; k++)
		CHECK(t, sd_qp_index(&t->a, t->a.kmem[k]) ==
			 sd_qp_index(&t->b, t->b.kmem[k]),
		      "memory waiter %u differs", k);
}

/* A's live mappings, less the ones B legitimately lacks, against B's. */
static void compare_maps(struct sd_test *t)
{
	struct sd_shared *sh = &t->sh;
	struct sd_map *s = t->scratch;
	u32 n = t->a.nmap, i, k, qi, ri;

	memcpy(s, t->a.map, n * sizeof(*s));
	for (qi = 0; qi < SD_QPS; qi++)
		for (ri = 0; ri < SD_REQS; ri++)
			for (k = 0; k < sh->ndev4[qi][ri]; k++)
				n = sd_map_remove(s, n, &sh->dev4[qi][ri][k]);
	CHECK(t, n == t->b.nmap, "%u / %u live mappings", n, t->b.nmap);
	for (i = 0; i < t->b.nmap; i++) {
		u32 before = n;

		n = sd_map_remove(s, n, &t->b.map[i]);
		CHECK(t, n < before, "B's mapping %llx+%llx is not A's",
		      t->b.map[i].bus, t->b.map[i].len);
	}
	CHECK(t, t->b.bad_unmaps == 0, "B unmapped %u addresses never mapped",
	      t->b.bad_unmaps);
}

void sd_compare_state(struct sd_test *t)
{
	struct hfi1_ctxtdata *ra = t->a.rcd, *rb = t->b.rcd;
	int f;

	CHECK(t, ra->flow_mask == rb->flow_mask, "flow mask %lx / %lx",
	      ra->flow_mask, rb->flow_mask);
	for (f = 0; f < RXE_NUM_TID_FLOWS; f++)
		CHECK(t, !memcmp(&ra->flows[f], &rb->flows[f], sizeof(ra->flows[f])),
		      "flow %d generation %x / %x", f, ra->flows[f].generation,
		      rb->flows[f].generation);
	CHECK(t, !memcmp(t->a.csr, t->b.csr, sizeof(t->a.csr)),
	      "flow registers differ");
	CHECK(t, ra->jkey == rb->jkey, "J_KEY %u / %u", ra->jkey, rb->jkey);
	CHECK(t, ra->dd->verbs_dev.n_tidwait == rb->dd->verbs_dev.n_tidwait,
	      "TID waits %llu / %llu", ra->dd->verbs_dev.n_tidwait,
	      rb->dd->verbs_dev.n_tidwait);
	compare_groups(t);
	compare_queues(t);
	compare_qps(t);
	compare_maps(t);
}

/* A node's group as an index into its context's groups, or its raw value. */
static u64 node_grp(struct hfi1_ctxtdata *rcd, struct tid_group *grp)
{
	u32 n = rcd->expected_count / 8;

	if (rcd->groups && grp >= rcd->groups && grp < rcd->groups + n)
		return grp - rcd->groups;
	return (u64)(uintptr_t)grp;
}

static void compare_flow(struct sd_test *t, int qi, int ri, u32 slot,
			 struct tid_rdma_flow *x, struct tid_rdma_flow *y)
{
	struct sd_shared *sh = &t->sh;
	struct tid_rdma_request *rxa = req_of(&t->a, qi, ri);
	struct tid_rdma_request *rxb = req_of(&t->b, qi, ri);
	bool dev4 = sh->given_up[qi][ri] && sh->dev4_slot[qi][ri] == slot;
	u32 i;

	CHECK(t, !memcmp(&x->flow_state, &y->flow_state, sizeof(x->flow_state)),
	      "record %u flow state gen %x/%x spsn %u/%u lpsn %u/%u next %x/%x",
	      slot, x->flow_state.generation, y->flow_state.generation,
	      x->flow_state.spsn, y->flow_state.spsn, x->flow_state.lpsn,
	      y->flow_state.lpsn, x->flow_state.r_next_psn,
	      y->flow_state.r_next_psn);
	CHECK(t, (x->req == rxa) == (y->req == rxb), "record %u req", slot);
	CHECK(t, x->tid_qpn == y->tid_qpn && x->tid_offset == y->tid_offset &&
	      x->length == y->length && x->sent == y->sent,
	      "record %u length %u / %u (or qpn, offset, sent)", slot, x->length,
	      y->length);
	CHECK(t, x->tnode_cnt == y->tnode_cnt && x->tidcnt == y->tidcnt &&
	      x->tid_idx == y->tid_idx && x->idx == y->idx &&
	      (x->npagesets == y->npagesets || (dev4 && !y->npagesets)) &&
	      x->npkts == y->npkts &&
	      x->pkt == y->pkt && x->resync_npkts == y->resync_npkts,
	      "record %u counts tnode %u/%u tid %u/%u idx %u/%u sets %u/%u pkts %u/%u",
	      slot, x->tnode_cnt, y->tnode_cnt, x->tidcnt, y->tidcnt, x->idx,
	      y->idx, x->npagesets, y->npagesets, x->npkts, y->npkts);
	for (i = 0; i < TID_RDMA_MAX_PAGES; i++) {
		struct kern_tid_node *na = &x->tnode[i], *nb = &y->tnode[i];
		struct tid_rdma_pageset *pa = &x->pagesets[i], *pb = &y->pagesets[i];
		bool masked = dev4 && i < x->npagesets && pa->count;

		CHECK(t, node_grp(t->a.rcd, na->grp) == node_grp(t->b.rcd, nb->grp) &&
		      na->map == nb->map && na->cnt == nb->cnt,
		      "record %u node %u: group %llx/%llx map %x/%x cnt %u/%u", slot,
		      i, node_grp(t->a.rcd, na->grp), node_grp(t->b.rcd, nb->grp),
		      na->map, nb->map, na->cnt, nb->cnt);
		CHECK(t, pa->idx == pb->idx && pa->count == pb->count &&
		      (masked || pa->mapped == pb->mapped) &&
		      (!pa->mapped || masked || pa->addr == pb->addr),
		      "record %u set %u: idx %u/%u count %u/%u mapped %u/%u addr %llx/%llx",
		      slot, i, pa->idx, pb->idx, pa->count, pb->count, pa->mapped,
		      pb->mapped, (u64)pa->addr, (u64)pb->addr);
		CHECK(t, x->tid_entry[i] == y->tid_entry[i],
		      "record %u TID entry %u: %x / %x", slot, i, x->tid_entry[i],
		      y->tid_entry[i]);
		if (t->bad)
			return;
	}
}

void sd_compare_request(struct sd_test *t, int qi, int ri)
{
	struct tid_rdma_request *x = req_of(&t->a, qi, ri), *y = req_of(&t->b, qi, ri);
	u32 k;

	CHECK(t, !x->flows == !y->flows, "req %d.%d flows %s / %s", qi, ri,
	      x->flows ? "allocated" : "none", y->flows ? "allocated" : "none");
	CHECK(t, x->setup_head == y->setup_head && x->clear_tail == y->clear_tail &&
	      x->flow_idx == y->flow_idx && x->n_flows == y->n_flows &&
	      x->seg_len == y->seg_len && x->isge == y->isge,
	      "req %d.%d ring head %u/%u tail %u/%u idx %u/%u n %u/%u len %u/%u isge %u/%u",
	      qi, ri, x->setup_head, y->setup_head, x->clear_tail, y->clear_tail,
	      x->flow_idx, y->flow_idx, x->n_flows, y->n_flows, x->seg_len,
	      y->seg_len, x->isge, y->isge);
	CHECK(t, !memcmp(&x->ss.sge, &y->ss.sge, sizeof(x->ss.sge)) &&
	      x->ss.num_sge == y->ss.num_sge,
	      "req %d.%d scatter list position %px+%u / %px+%u", qi, ri,
	      x->ss.sge.vaddr, x->ss.sge.length, y->ss.sge.vaddr,
	      y->ss.sge.length);
	for (k = 0; x->flows && y->flows && !t->bad && k < MAX_FLOWS_SD; k++)
		compare_flow(t, qi, ri, k, &x->flows[k], &y->flows[k]);
}
