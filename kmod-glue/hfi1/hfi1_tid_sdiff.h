/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The stateful differential test's worlds and recording services
 * (hfi1_tid_sdiff.c), shared with its driver and comparison
 * (hfi1_tid_sdiff_run.c).
 */
#ifndef HFI1_TID_SDIFF_H
#define HFI1_TID_SDIFF_H

#include <linux/types.h>

/*
 * Included after the driver's headers (hfi.h, verbs.h): the shared part
 * holds struct rvt_sge lists.
 */

#define SD "hfi1_tid_sdiff"
#define SD_QPS 6
#define SD_REQS 3
#define SD_LOG 640
#define SD_MAPS 1024
#define SD_SGES 12
#define SD_GROUPS 16	/* TID groups per context, at most */
#define MAX_FLOWS_SD 8	/* tid_rdma.c's MAX_FLOWS (checked in hfi1_hal::layout) */

/* What a world's services recorded, in order. */
enum sd_ev {
	EV_CSR = 1,	/* ctxt, offset, value: write_uctxt_csr() */
	EV_PUT_TID,	/* index, type, pa, order: hfi1_put_tid() */
	EV_WC_FILL,	/* index: rcv_array_wc_fill() */
	EV_MAP,		/* bus, size, dir: dma_map_page() */
	EV_UNMAP,	/* bus, size, dir: dma_unmap_page() of a mapping */
	EV_BAD_UNMAP,	/* bus, size, dir: dma_unmap_page() of no mapping */
	EV_QUEUE,	/* qp, cpu, queued: queue_work_on() of its trigger */
	EV_SEND,	/* qp: hfi1_schedule_send() */
	EV_DO_SEND,	/* qp, in_thread: hfi1_do_send() */
	EV_KMEM,	/* qp, flags ok: hfi1_wait_kmem() */
	EV_KMALLOC,	/* size, gfp, node: kmalloc_node() */
	EV_KFREE,	/* non-null: kfree() */
	EV_RANDOM,	/* value: get_random_u32() */
	EV_JKEY,	/* jkey: hfi1_set_ctxt_jkey() */
};

struct sd_event {
	u32 kind;
	u64 a, b, c, d;
};

/* The operations, one per routed function (and the two services). */
enum sd_op {
	OP_SETUP_HW_FLOW,
	OP_CLEAR_HW_FLOW,
	OP_EXP_RCV_SETUP,
	OP_EXP_RCV_CLEAR,
	OP_EXP_RCV_CLEAR_ALL,
	OP_ALLOC_FLOWS,
	OP_FREE_FLOWS,
	OP_CLEAN_SWQE,
	OP_FLUSH_WAIT,
	OP_TRIGGER_RESUME,
	OP_KMEM_TICK,
	OP_RENEW,
	OP_COUNT
};

struct rvt_qp;
struct rvt_swqe;
struct hfi1_swqe_priv;
struct hfi1_qp_priv;
struct hfi1_ctxtdata;
struct hfi1_devdata;
struct hfi1_pportdata;
struct pci_dev;
struct work_struct;

struct sd_req {
	struct rvt_swqe *wqe;		/* wqe->priv is sp */
	struct hfi1_swqe_priv *sp;	/* sp->tid_req is the request */
};

struct sd_qp {
	struct rvt_qp *qp;
	struct hfi1_qp_priv *priv;
	struct sd_req req[SD_REQS];
};

struct sd_map {
	u64 bus;
	u64 len;
};

struct sd_world {
	bool is_rust;
	struct hfi1_devdata *dd;
	struct hfi1_pportdata *ppd;
	struct pci_dev *pdev;
	struct hfi1_ctxtdata *rcd;
	struct sd_qp q[SD_QPS];
	/* The services' record of the current operation. */
	struct sd_event log[SD_LOG];
	u32 nlog;
	bool overflow;
	/* Live DMA mappings (a multiset). */
	struct sd_map map[SD_MAPS];
	u32 nmap;
	bool fail_alloc;	/* fail kmalloc_node() */
	u32 bad_unmaps;
	u64 csr[32];		/* the flow registers */
	struct work_struct *work[SD_QPS * 4];	/* queued trigger work */
	u32 nwork;
	struct rvt_qp *kmem[SD_QPS];	/* the memory-wait list */
	u32 nkmem;
	u32 rand;
	u32 nalloc;		/* kmalloc_node() calls, for the fill pattern */
};

#define POOL_BLOCKS 4
#define POOL_ORDER 6
#define POOL_PAGES (POOL_BLOCKS << POOL_ORDER)
#define SD_PAGESETS 64

struct page;

/* What both worlds share: the pages and the scatter lists over them. */
struct sd_shared {
	struct page *block[POOL_BLOCKS];
	struct rvt_sge sgl[SD_QPS][SD_REQS][SD_SGES];
	struct rvt_mregion *mr[SD_QPS][SD_REQS][SD_SGES];
	/*
	 * The clear_all deviation, per request: the sets B unmapped and A
	 * kept, in which record; whether the request is given up.
	 */
	struct sd_map dev4[SD_QPS][SD_REQS][SD_PAGESETS];
	u32 ndev4[SD_QPS][SD_REQS];
	u16 dev4_slot[SD_QPS][SD_REQS];
	bool given_up[SD_QPS][SD_REQS];
	/* A's mappings the driver leaked (its documented defect). */
	u32 nleaked;
	/* Documented differences met. */
	unsigned long flush_wakes, clear_all_unmaps;
};

struct sd_tally {
	unsigned long passed, failed;
};

struct sd_test {
	struct sd_world a, b;
	struct sd_shared sh;
	struct sd_tally tally[OP_COUNT];
	unsigned long total_failed;
	char why[160];
	bool bad;
	struct sd_map scratch[SD_MAPS];
};

/* What one operation's comparison found in the two worlds. */
struct sd_model {
	int flush_succ;		/* the QP behind a flushed head, or -1 */
	bool dev4_unmap;	/* clear_all clears a waiting setup in B */
	bool dev4_leak;		/* the request is freed: A keeps the maps */
};

void sd_mismatch(struct sd_test *t, const char *fmt, ...);

#define CHECK(t, cond, ...)					\
	do {							\
		if (!(cond))					\
			sd_mismatch(t, __VA_ARGS__);		\
	} while (0)

void sd_model_before(struct sd_test *t, struct sd_model *m, enum sd_op op,
		     int qi, int ri);
void sd_model_after(struct sd_test *t, struct sd_model *m, enum sd_op op,
		    int qi, int ri);
void sd_compare_logs(struct sd_test *t);
void sd_compare_state(struct sd_test *t);
void sd_compare_request(struct sd_test *t, int qi, int ri);
u32 sd_rnd_below(u32 n);

extern struct hfi1_tid_drv_ops sd_ops;
void sd_ops_init(void);
int sd_world_create(struct sd_world *w, bool rust, u32 ngroups, u32 pmtu);
void sd_world_destroy(struct sd_world *w);
int sd_call(struct sd_world *w, enum sd_op op, int qi, int ri, bool *last);
int sd_run_work(struct sd_world *w);
int sd_run_work_last(struct sd_world *w);
int sd_work_qp(struct sd_world *w, u32 k);
u32 sd_map_remove(struct sd_map *maps, u32 n, const struct sd_map *m);
int sd_kmem_tick(struct sd_world *w);
int sd_qp_index(struct sd_world *w, void *qp);

#endif /* HFI1_TID_SDIFF_H */
