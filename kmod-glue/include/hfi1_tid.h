/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The C interface of the Rust TID RDMA engine (crate kmod-glue).
 *
 * Written by hand and checked against the Rust definitions by
 * kmod-glue/tests/header.rs: every hfi1_tid_* prototype and every member of
 * the structs below must match the Rust side in name, order and type.
 * Functions returning int give 0 or a negative errno.
 */
#ifndef HFI1_TID_H
#define HFI1_TID_H

#include <linux/types.h>

#define HFI1_TID_ABI_VERSION 1

/* RcvArray entry types for put_tid(). */
#define HFI1_TID_RCV_EXPECTED 0
#define HFI1_TID_RCV_INVALID 1

/*
 * One receive context's chip access: the rebuilt driver points these at
 * hfi1_put_tid(), rcv_array_wc_fill() and write/read_uctxt_csr() of the
 * flow table; the self-test at a register file or at the software chip.
 * Called from any context the engine runs in, with spinlocks held.
 */
struct hfi1_tid_chip_ops {
	void (*put_tid)(void *chip, u32 rcventry, u32 ty, u64 pa, u32 order);
	void (*wc_fill)(void *chip, u32 rcventry);
	void (*write_flow)(void *chip, u32 flow, u64 value);
	u64 (*read_flow)(void *chip, u32 flow);
};

/* One page set: first page index and page count (0 = filler). */
struct hfi1_tid_pageset {
	u32 idx;
	u32 count;
};

/* struct tid_rdma_params without the RCU head and the version. */
struct hfi1_tid_opfn_params {
	u32 qp;
	u32 max_len;
	u16 jkey;
	u8 max_read;
	u8 max_write;
	u8 timeout;
	u8 urg;
};

/* Opaque handles of the stateful engine. */
struct hfi1_tid_rcd;
struct hfi1_tid_qp;
struct hfi1_tid_req;
struct hfi1_tid_wt;

/*
 * Kernel services, registered once (hfi1_tid_platform_register). Called
 * with spinlocks held and interrupts off, except do_send (no lock held).
 * spin_lock_init initialises a spinlock_t where it stays, in the lock class
 * of its level: name and static struct lock_class_key come from the engine
 * (one per level: "hfi1_tid_qp_s_lock", "hfi1_tid_rcd_exp_lock", ...).
 * lockdep_assert_held is lockdep_assert_held(lock). wait_kmem puts the QP
 * on the memory-wait list (hfi1_wait_kmem()) after a failed DMA mapping,
 * setting RVT_S_WAIT_KMEM in *s_flags (the QP's flags word, s_lock held).
 * queue_trigger returns
 * true if it queued the QP's trigger work (which then owns the reference
 * and hands it to hfi1_tid_trigger_resume), false if that work was already
 * pending. queue_tid_send queues the QP's second-leg work
 * (hfi1_schedule_tid_send(), s_lock held; no reference changes hands),
 * which calls hfi1_tid_do_tid_send; false if it was already pending.
 */
struct hfi1_tid_platform_ops {
	void (*spin_lock_init)(void *lock, const char *name, void *key);
	size_t (*spin_lock_irqsave)(void *lock);
	void (*spin_unlock_irqrestore)(void *lock, size_t flags);
	void (*lockdep_assert_held)(void *lock);
	void (*qp_get)(void *qp);
	void (*qp_put)(void *qp);
	bool (*queue_trigger)(void *qp, u32 cpu);
	void (*schedule_send)(void *qp);
	void (*do_send)(void *qp);
	int (*dma_map)(void *dev, u64 addr, u32 len, u64 *bus);
	void (*dma_unmap)(void *dev, u64 bus, u32 len);
	void (*wait_kmem)(void *qp, u32 *s_flags);
	u32 (*random_u32)(void);
	bool (*queue_tid_send)(void *qp, u32 cpu);
};

/*
 * The rebuilt hfi1.ko's routed stateful functions (src/driver/): the
 * driver's structures they reach, declared only (hfi1.ko's headers define
 * them; hfi1_hal::layout checks their layout at build time).
 */
struct tid_flow_state;
struct tid_group;
struct exp_tid_set;
struct tid_queue;
struct tid_rdma_request;
struct rvt_sge_state;

/*
 * The driver's services and accessors for the routed functions, with the
 * driver's own signatures (void * for its structures). hfi1_tid_route.c
 * fills one with the driver's functions; the in-kernel differential test
 * its recording copies, which the originals it runs call too. Every member
 * must be set.
 */
struct hfi1_tid_drv_qp;
struct hfi1_tid_drv_ops {
	size_t (*lock)(void *lock);
	void (*unlock)(void *lock, size_t flags);
	void (*assert_held)(void *lock);
	void (*qp_get)(void *qp);
	void (*qp_put)(void *qp);
	void *(*qp_of_wait)(struct list_head *tid_wait);
	void (*qp_view)(void *qp, struct hfi1_tid_drv_qp *view);
	bool (*queue_work_on)(int cpu, void *wq, void *work);
	void (*schedule_send)(void *qp);
	void (*do_send)(void *qp, bool in_thread);
	void (*wait_kmem)(void *qp, u32 *s_flags);
	void (*put_tid)(void *dd, u32 index, u32 ty, u64 pa, u16 order);
	void (*wc_fill)(void *dd, u32 index);
	void (*write_csr)(void *dd, int ctxt, u32 offset, u64 value);
	u64 (*read_csr)(void *dd, int ctxt, u32 offset);
	u64 (*dma_map)(void *dev, void *page, size_t offset, size_t size, int dir);
	int (*dma_error)(void *dev, u64 addr);
	void (*dma_unmap)(void *dev, u64 addr, size_t size, int dir);
	void *(*page_of)(u64 vaddr);
	u64 (*address_of)(void *page);
	u32 (*mr_lkey)(void *mr);
	void (*mr_seg)(void *mr, u32 m, u32 n, u64 *vaddr, u64 *length);
	void *(*kmalloc)(size_t size, u32 gfp, int node);
	void *(*kcalloc)(size_t n, size_t size, u32 gfp, int node);
	void (*kfree)(void *p);
	u32 (*random_u32)(void);
	void (*set_ctxt_jkey)(void *dd, void *rcd, u16 jkey);
};

/* A QP: pointers into its struct rvt_qp and struct hfi1_qp_priv. */
struct hfi1_tid_drv_qp {
	void *qp;
	void *s_lock;
	u32 *s_flags;
	struct tid_flow_state *flow_state;
	struct list_head *tid_wait;
	u32 *tid_enqueue;
	void **pages;
	void *wq;
	void *trigger_work;
	u32 pmtu;
	u32 cpu;
};

/* A receive context: pointers into its struct hfi1_ctxtdata. */
struct hfi1_tid_drv_rcd {
	void *rcd;
	void *dd;
	void *dev;
	void *exp_lock;
	u64 *flow_mask;
	struct tid_flow_state *flows;
	struct tid_group **groups;
	struct exp_tid_set *tid_group_list;
	struct exp_tid_set *tid_used_list;
	struct exp_tid_set *tid_full_list;
	struct tid_queue *flow_queue;
	struct tid_queue *rarr_queue;
	u16 *jkey;
	u64 *n_tidwait;
	u32 ctxt;
	u32 expected_base;
	u32 expected_count;
	u32 group_size;
	int numa_id;
};

/* Bytes a spinlock_t the engine owns may take. */
#define HFI1_TID_SPINLOCK_BYTES 128
/* Bytes a struct lock_class_key may take (the engine's per-level keys). */
#define HFI1_TID_LOCK_CLASS_KEY_BYTES 16

struct hfi1_tid_ctx_params {
	u32 ctxt;
	u32 expected_base;
	u32 ngroups;
	u32 qp_slots;
};

struct hfi1_tid_ctx_stats {
	u32 flows_used;
	u32 groups_free;
	u32 groups_used;
	u32 groups_full;
	u32 flow_waiters;
	u32 rarr_waiters;
	u64 tid_waits;
};

struct hfi1_tid_sge {
	u64 vaddr;
	u32 length;
};

/* What hfi1_tid_read/write/mix_test() saw (prototest.rs). */
struct hfi1_tid_proto_result {
	u64 posted;
	u64 writes;
	u64 completed;
	u64 failed;
	u64 verified_bytes;
	u64 mismatched_bytes;
	u64 segments;
	u64 tid_waits;
	u64 write_segments;
	u64 rnr_naks;
	u64 rnr_timeouts;
	u64 tid_acks;
	u64 second_leg_runs;
	u64 to_responder;
	u64 to_requester;
	u64 timeouts;
	u64 errors;
	u64 steps;
	u64 left_over;
};

/*
 * The READ and WRITE protocol on the engine's own QPs (proto.rs). A QP's
 * connection: the RC attributes and what OPFN negotiated.
 */
struct hfi1_tid_conn {
	struct hfi1_tid_opfn_params local;
	struct hfi1_tid_opfn_params remote;
	u32 verbs_qpn;
	u32 remote_verbs_qpn;
	u32 psn;
	u32 pmtu;
	u32 max_rd_atomic;
	u32 tid_read_min;
	u16 dlid;
	u16 slid;
	bool tid;
	bool remote_read;
	bool remote_write;
	u8 retry_cnt;
	u8 rnr_retry;
	u8 timeout;
};

/* An RDMA READ or WRITE work request (at least one element). */
struct hfi1_tid_wr {
	u64 wr_id;
	u64 remote_addr;
	u32 rkey;
	u32 nsges;
	const struct hfi1_tid_sge *sges;
};

/* A completion; status is enum ib_wc_status. */
struct hfi1_tid_wc {
	u64 wr_id;
	u32 length;
	u32 status;
};

/*
 * The verbs side of a QP, every member set: mr_get is rvt_rkey_ok() (a
 * reference in *mr; write: IB_ACCESS_REMOTE_WRITE), mr_put rvt_put_mr(),
 * mr_pages the region's pages (valid while the reference is held) and the
 * offset of vaddr in them (NULL outside), read the data a response or a
 * WRITE carries, write rvt_copy_sge() of an eager READ response, send
 * hfi1_verbs_send() of one built packet (may be called with s_lock held:
 * queue, do not wait).
 */
struct hfi1_tid_verbs_ops {
	bool (*mr_get)(void *cookie, u64 vaddr, u32 len, u32 rkey, bool write,
		       u32 *mr);
	void (*mr_put)(void *cookie, u32 mr);
	const struct hfi1_tid_sge *(*mr_pages)(void *cookie, u32 mr, u64 vaddr,
					       u32 *n, u64 *offset);
	bool (*read)(void *cookie, u64 vaddr, u8 *out, u32 len);
	bool (*write)(void *cookie, u64 addr, const u8 *data, u32 len);
	void (*send)(void *cookie, const u8 *pkt, u32 len);
};

/* Bytes of the smallest packet buffer (an 8 KiB MTU and headers). */
#define HFI1_TID_MAX_PACKET (8192 + 128)

/* One call's verbs side and packet buffer (cap >= HFI1_TID_MAX_PACKET). */
struct hfi1_tid_io {
	const struct hfi1_tid_verbs_ops *ops;
	void *cookie;
	u8 *buf;
	u32 cap;
};

/* What a receive entry did with a packet (or a negative errno). */
#define HFI1_TID_RCV_DONE 0
#define HFI1_TID_RCV_DROPPED 1
#define HFI1_TID_RCV_RESTART 2
#define HFI1_TID_RCV_QP_ERROR 3

/* --- Implemented in Rust ------------------------------------------------ */

/*
 * Stateful engine on its own objects (engine.rs, qp.rs, kplat/; Rust
 * feature "engine", the self-test module only). As in the driver, the
 * functions that work on a QP (setup/clear_hw_flow, exp_rcv_setup/clear/
 * clear_all, flush_wait, free_flows) are called with that QP's s_lock
 * held and take the context's exp_lock inside; qp_waiting and
 * trigger_resume take the s_lock themselves; the rest need no lock.
 * Returns 0 or a negative errno (-EAGAIN: queued, woken later).
 */
int hfi1_tid_platform_register(const struct hfi1_tid_platform_ops *ops);
int hfi1_tid_platform_unregister(void);
int hfi1_tid_s_lock_init(void *lock);
u64 hfi1_tid_live_objects(void);
struct hfi1_tid_rcd *hfi1_tid_ctx_create(const struct hfi1_tid_ctx_params *p,
					 const struct hfi1_tid_chip_ops *chip_ops,
					 void *chip, void *dev);
int hfi1_tid_ctx_destroy(struct hfi1_tid_rcd *rcd);
int hfi1_tid_ctx_stats(const struct hfi1_tid_rcd *rcd,
		       struct hfi1_tid_ctx_stats *out);
struct hfi1_tid_qp *hfi1_tid_qp_create(void *cookie, u32 qpn, u32 slot, u32 cpu,
				       void *s_lock,
				       const struct hfi1_tid_conn *conn);
void hfi1_tid_qp_destroy(struct hfi1_tid_qp *qp);
int hfi1_tid_qp_waiting(struct hfi1_tid_qp *qp);
int hfi1_tid_setup_hw_flow(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp);
int hfi1_tid_clear_hw_flow(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp);
struct hfi1_tid_req *hfi1_tid_req_create(u32 seg_len, u32 n_flows, u32 pmtu);
int hfi1_tid_req_alloc_flows(struct hfi1_tid_req *req);
int hfi1_tid_free_flows(struct hfi1_tid_qp *qp, struct hfi1_tid_req *req);
int hfi1_tid_req_destroy(struct hfi1_tid_req *req);
int hfi1_tid_exp_rcv_setup(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			   struct hfi1_tid_req *req,
			   const struct hfi1_tid_sge *sges, u32 nsges);
int hfi1_tid_exp_rcv_clear(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			   struct hfi1_tid_req *req);
int hfi1_tid_exp_rcv_clear_all(const struct hfi1_tid_rcd *rcd,
			       struct hfi1_tid_qp *qp, struct hfi1_tid_req *req);
int hfi1_tid_flush_wait(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp);
int hfi1_tid_trigger_resume(struct hfi1_tid_qp *qp);

/*
 * The READ and WRITE protocol (proto.rs; Rust feature "engine"), each
 * entered as the driver enters the kernel function it replaces. Frames
 * are whole packets (LRH to ICRC). Receive entries return an
 * HFI1_TID_RCV_* value or -errno (-EBADMSG: does not parse, -EPROTO: not
 * this entry's opcode).
 *   s_lock held (asserted): post_read/write (hfi1_setup_tid_rdma_wqe),
 *     make_req (hfi1_make_rc_req), make_resp (make_rc_ack),
 *     rc_timeout (rvt_rc_timeout -> hfi1_restart_rc ->
 *     hfi1_tid_rdma_restart_req), rnr_timeout, tid_retry_timeout (the
 *     driver's static hfi1_tid_retry_timeout: no export may take a name
 *     of the driver's, this header is included in hfi1.ko),
 *     make_tid_ack (make_tid_rdma_ack), poll, qp_reset (rvt_reset_qp);
 *   r_lock held (asserted), s_lock taken: rcv_read_req, rcv_write_req,
 *     rcv_read_resp, rcv_rc_resp (rc_rcv_resp), rcv_write_resp,
 *     rcv_write_data, rcv_tid_ack, rcv_resync (hfi1_rc_rcv_tid_rdma_*),
 *     reap_timeout (hfi1_tid_timeout);
 *   nothing held: kdeth_eflags (hfi1_handle_kdeth_eflags, both halves;
 *     takes r_lock, s_lock), do_tid_send (hfi1_do_tid_send, the second
 *     leg's work; takes s_lock per packet).
 * Every entry that takes s_lock takes exp_lock inside it where needed.
 */
int hfi1_tid_post_read(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
		       const struct hfi1_tid_wr *wr);
int hfi1_tid_post_write(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			const struct hfi1_tid_wr *wr);
int hfi1_tid_make_req(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
		      const struct hfi1_tid_io *io);
int hfi1_tid_rcv_read_req(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			  void *r_lock, const struct hfi1_tid_io *io,
			  const u8 *pkt, u32 len);
int hfi1_tid_rcv_write_req(const struct hfi1_tid_rcd *rcd,
			   struct hfi1_tid_qp *qp, void *r_lock,
			   const struct hfi1_tid_io *io, const u8 *pkt, u32 len);
int hfi1_tid_make_resp(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
		       const struct hfi1_tid_io *io, u32 budget);
int hfi1_tid_rcv_read_resp(const struct hfi1_tid_rcd *rcd,
			   struct hfi1_tid_qp *qp, void *r_lock, const u8 *pkt,
			   u32 len);
int hfi1_tid_kdeth_eflags(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			  void *r_lock, const struct hfi1_tid_io *io,
			  const u8 *pkt, u32 len, u32 rte);
int hfi1_tid_rcv_resync(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			void *r_lock, const u8 *pkt, u32 len);
int hfi1_tid_reap_timeout(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			  void *r_lock, const struct hfi1_tid_io *io);
int hfi1_tid_rcv_rc_resp(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			 void *r_lock, const struct hfi1_tid_io *io,
			 const u8 *pkt, u32 len);
int hfi1_tid_rcv_write_resp(const struct hfi1_tid_rcd *rcd,
			    struct hfi1_tid_qp *qp, void *r_lock,
			    const u8 *pkt, u32 len);
int hfi1_tid_rcv_write_data(const struct hfi1_tid_rcd *rcd,
			    struct hfi1_tid_qp *qp, void *r_lock,
			    const struct hfi1_tid_io *io, const u8 *pkt,
			    u32 len);
int hfi1_tid_rcv_tid_ack(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			 void *r_lock, const u8 *pkt, u32 len);
int hfi1_tid_rc_timeout(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp);
int hfi1_tid_rnr_timeout(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp);
int hfi1_tid_tid_retry_timeout(const struct hfi1_tid_rcd *rcd,
			       struct hfi1_tid_qp *qp);
int hfi1_tid_do_tid_send(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			 const struct hfi1_tid_io *io);
int hfi1_tid_make_tid_ack(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
			  const struct hfi1_tid_io *io);
int hfi1_tid_poll(struct hfi1_tid_qp *qp, struct hfi1_tid_wc *wc);
int hfi1_tid_qp_reset(const struct hfi1_tid_rcd *rcd, struct hfi1_tid_qp *qp,
		      const struct hfi1_tid_io *io);

/*
 * Test harness (waittest.rs, Rust feature "selftest"): two counted
 * resources (0 = flow, 1 = RcvArray) acquired and released the way
 * tid-flow does, on the real wait queues and kernel platform. acquire,
 * release and flush are called with the QP's s_lock held; the rest with
 * no lock held.
 */
struct hfi1_tid_wt *hfi1_tid_wt_create(u32 slots, u32 flows, u32 rarr);
int hfi1_tid_wt_destroy(struct hfi1_tid_wt *wt);
int hfi1_tid_wt_acquire(const struct hfi1_tid_wt *wt, struct hfi1_tid_qp *qp,
			u32 k);
int hfi1_tid_wt_release(const struct hfi1_tid_wt *wt, struct hfi1_tid_qp *qp,
			u32 k);
int hfi1_tid_wt_flush(const struct hfi1_tid_wt *wt, struct hfi1_tid_qp *qp);
u64 hfi1_tid_wt_stats(const struct hfi1_tid_wt *wt, u32 k);

/*
 * Test harness (prototest.rs, Rust feature "selftest"): TID RDMA READs,
 * TID RDMA WRITEs, and both mixed on each QP, between requester and
 * responder engines on kernel locks and memory, each side's data placed
 * by its software chip. Need the registered platform; call with no lock
 * held (they take r_lock, s_lock and exp_lock, in that order).
 */
int hfi1_tid_read_test(struct hfi1_tid_proto_result *out);
int hfi1_tid_write_test(struct hfi1_tid_proto_result *out);
int hfi1_tid_mix_test(struct hfi1_tid_proto_result *out);


u32 hfi1_tid_abi_version(void);
u32 hfi1_tid_generation_next(u32 generation);
int hfi1_tid_flows_disable(const struct hfi1_tid_chip_ops *ops, void *chip);

/*
 * Stateful functions the rebuilt hfi1.ko routes to (src/driver/entry.rs), on
 * the driver's own structures. setup/clear_hw_flow, exp_rcv_setup/clear/
 * clear_all and flush_wait are called with the QP's s_lock held (asserted)
 * and take the context's exp_lock; trigger_resume takes the s_lock itself
 * and consumes the work item's QP reference; the rest need no lock.
 */
int hfi1_tid_drv_exp_rcv_init(const struct hfi1_tid_drv_ops *ops,
			      const struct hfi1_tid_drv_rcd *rcd, int reinit,
			      u32 gfp);
void hfi1_tid_drv_init_ctxt_generations(const struct hfi1_tid_drv_ops *ops,
					const struct hfi1_tid_drv_rcd *rcd);
int hfi1_tid_drv_setup_hw_flow(const struct hfi1_tid_drv_ops *ops,
			       const struct hfi1_tid_drv_rcd *rcd,
			       const struct hfi1_tid_drv_qp *qp);
void hfi1_tid_drv_clear_hw_flow(const struct hfi1_tid_drv_ops *ops,
				const struct hfi1_tid_drv_rcd *rcd,
				const struct hfi1_tid_drv_qp *qp);
int hfi1_tid_drv_exp_rcv_setup(const struct hfi1_tid_drv_ops *ops,
			       const struct hfi1_tid_drv_rcd *rcd,
			       const struct hfi1_tid_drv_qp *qp,
			       struct tid_rdma_request *req,
			       struct rvt_sge_state *ss, bool *last);
int hfi1_tid_drv_exp_rcv_clear(const struct hfi1_tid_drv_ops *ops,
			       const struct hfi1_tid_drv_rcd *rcd,
			       const struct hfi1_tid_drv_qp *qp,
			       struct tid_rdma_request *req);
void hfi1_tid_drv_exp_rcv_clear_all(const struct hfi1_tid_drv_ops *ops,
				    const struct hfi1_tid_drv_rcd *rcd,
				    const struct hfi1_tid_drv_qp *qp,
				    struct tid_rdma_request *req);
int hfi1_tid_drv_alloc_flows(const struct hfi1_tid_drv_ops *ops,
			     struct tid_rdma_request *req, u32 gfp, int node);
void hfi1_tid_drv_free_flows(const struct hfi1_tid_drv_ops *ops,
			     struct tid_rdma_request *req);
void hfi1_tid_drv_flush_wait(const struct hfi1_tid_drv_ops *ops,
			     const struct hfi1_tid_drv_rcd *rcd,
			     const struct hfi1_tid_drv_qp *qp);
void hfi1_tid_drv_trigger_resume(const struct hfi1_tid_drv_ops *ops,
				 const struct hfi1_tid_drv_qp *qp);

/* Stateless functions the rebuilt hfi1.ko routes to (route.rs). */
int hfi1_tid_find_phys_blocks_4k(const u64 *pages, u32 npages,
				 struct hfi1_tid_pageset *out, u32 cap);
int hfi1_tid_find_phys_blocks_8k(const u64 *pages, u32 npages,
				 struct hfi1_tid_pageset *out, u32 cap);
int hfi1_tid_flush_pages(struct hfi1_tid_pageset *list, u32 cap, u32 sets,
			 u32 *idx, u32 pages);
int hfi1_tid_flow_reserve(u32 *mask, int last);
u64 hfi1_tid_opfn_encode(const struct hfi1_tid_opfn_params *p);
int hfi1_tid_opfn_decode(u64 data, struct hfi1_tid_opfn_params *p);

/* Software chip (Rust feature "sim"). */
void *hfi1_tid_sim_create(u32 expected_base, u32 entries);
void hfi1_tid_sim_destroy(void *chip);
const struct hfi1_tid_chip_ops *hfi1_tid_sim_ops(void);
u64 hfi1_tid_sim_read_flow(const void *chip, u32 flow);
u64 hfi1_tid_sim_stats(const void *chip);

/* LOCKDEP_DEMO=1 module only (Rust feature "lockdep-demo"). */
int hfi1_tid_lockdep_demo_invert(void);

/* --- Implemented in C, called by Rust ------------------------------------ */

void *hfi1_tid_kmalloc(size_t size);
void hfi1_tid_kfree(void *ptr);
void hfi1_tid_panic(const u8 *msg, size_t len);

#endif /* HFI1_TID_H */
