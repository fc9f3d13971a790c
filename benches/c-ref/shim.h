/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * The few kernel types and helpers the hfi1 functions measured here use,
 * so that they compile unchanged in user space (extract.sh pulls the
 * functions out of the Linux 6.1 source at build time; nothing of the
 * kernel is kept in this repository).
 *
 * Choices that decide the instruction counts, each as the kernel does it
 * on x86-64 unless said otherwise:
 *  - page_address(): the SPARSEMEM_VMEMMAP arithmetic, (page - vmemmap)
 *    scaled to a pfn, shifted, plus PAGE_OFFSET, with vmemmap_base and
 *    page_offset_base as variables (KASLR);
 *  - tracepoints: one 5-byte NOP per call site (the jump label of a
 *    disabled tracepoint; SHIM_TRACE=0 drops them);
 *  - writeq(): a volatile 64-bit store into a plain array standing in for
 *    the write-combining RcvArray; flush_wc() (an sfence) is left out, as
 *    the Rust side's RcvArray has none;
 *  - write_csr() and hfi1_put_tid() are out of line (platform.c and the
 *    extracted chip.c function), as in the driver;
 *  - bit operations: plain, non-atomic C (the "C with plain
 *    bitops"); WARN_ON and dd_dev_err only test their condition.
 */
#ifndef HFI1_SHIM_H
#define HFI1_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef unsigned long long u64;
typedef u64 dma_addr_t;

#define U32_MAX 0xFFFFFFFFu
#define EAGAIN 11
#define ENOMEM 12
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#define PAGE_SHIFT 12
#define PAGE_SIZE (1UL << PAGE_SHIFT)
#define BITS_PER_BYTE 8
#define BUILD_BUG_ON(c) _Static_assert(!(c), #c)
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define WARN_ON(c) ({ unlikely(c); })
#define WARN_ON_ONCE(c) ({ unlikely(c); })
#define dd_dev_err(dd, ...) do { (void)(dd); } while (0)
#define __must_hold(x)
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define container_of(p, t, m) ((t *)((char *)(p) - offsetof(t, m)))

#ifndef SHIM_TRACE
#define SHIM_TRACE 1
#endif
#if SHIM_TRACE
#define shim_trace() __asm__ volatile(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00")
#else
#define shim_trace() ((void)0)
#endif
#define trace_hfi1_tid_flow_page(...) shim_trace()
#define trace_hfi1_tid_pageset(...) shim_trace()
#define trace_hfi1_tid_node_add(...) shim_trace()
#define trace_hfi1_msg_alloc_tids(...) shim_trace()
#define trace_hfi1_tid_entry_alloc(...) shim_trace()
#define trace_hfi1_tid_flow_alloc(...) shim_trace()
#define trace_hfi1_put_tid(...) shim_trace()
#define trace_hfi1_write_rcvarray(...) shim_trace()

static inline bool is_power_of_2(unsigned long n)
{
	return n != 0 && (n & (n - 1)) == 0;
}

static inline unsigned long rounddown_pow_of_two(unsigned long n)
{
	return 1UL << (63 - __builtin_clzl(n));
}

static inline int ilog2(u32 n)
{
	return 31 - __builtin_clz(n);
}

/* Plain bit operations on one word. */
static inline bool test_and_set_bit(long nr, unsigned long *addr)
{
	bool old = (*addr >> nr) & 1;

	*addr |= 1UL << nr;
	return old;
}

static inline void set_bit(long nr, unsigned long *addr)
{
	*addr |= 1UL << nr;
}

static inline void clear_bit(long nr, unsigned long *addr)
{
	*addr &= ~(1UL << nr);
}

static inline unsigned long ffz(unsigned long word)
{
	return __builtin_ctzl(~word);
}

/* A circular doubly linked list, as <linux/list.h> without debugging. */
struct list_head {
	struct list_head *next, *prev;
};

static inline void INIT_LIST_HEAD(struct list_head *l)
{
	l->next = l;
	l->prev = l;
}

static inline void list_add_tail(struct list_head *n, struct list_head *head)
{
	struct list_head *prev = head->prev;

	n->next = head;
	n->prev = prev;
	prev->next = n;
	head->prev = n;
}

static inline void list_del_init(struct list_head *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	INIT_LIST_HEAD(e);
}

static inline int list_empty(const struct list_head *head)
{
	return head->next == head;
}

static inline int list_is_last(const struct list_head *l, const struct list_head *head)
{
	return l->next == head;
}

#define list_entry(p, t, m) container_of(p, t, m)
#define list_first_entry(h, t, m) list_entry((h)->next, t, m)
#define list_next_entry(pos, m) list_entry((pos)->m.next, __typeof__(*(pos)), m)
#define list_entry_is_head(pos, head, m) (&(pos)->m == (head))
#define list_for_each_entry(pos, head, m)                          \
	for (pos = list_first_entry(head, __typeof__(*pos), m);      \
	     !list_entry_is_head(pos, head, m);                      \
	     pos = list_next_entry(pos, m))
#define list_prepare_entry(pos, head, m) \
	((pos) ? : list_entry(head, __typeof__(*pos), m))

/* Memory-mapped I/O into plain memory. */
static inline void writeq(u64 v, volatile void *addr)
{
	*(volatile u64 *)addr = v;
}

#define flush_wc() ((void)0)

/*
 * page_address() for SPARSEMEM_VMEMMAP, with KASLR's variables
 * (SHIM_VMEMMAP=0: the page pointer is the address itself).
 */
struct page {
	unsigned long flags[8]; /* 64 bytes, as on x86-64 */
};

extern unsigned long vmemmap_base, page_offset_base;

#ifndef SHIM_VMEMMAP
#define SHIM_VMEMMAP 1
#endif

static inline void *page_address(const struct page *p)
{
#if SHIM_VMEMMAP
	unsigned long pfn = p - (const struct page *)vmemmap_base;

	return (void *)((pfn << PAGE_SHIFT) + page_offset_base);
#else
	return (void *)p;
#endif
}

/* The driver structures, reduced to the fields the functions touch. */
struct exp_tid_set {
	struct list_head list;
	u32 count;
};

struct hfi1_devdata;
void write_csr(const struct hfi1_devdata *dd, u32 offset, u64 value);

struct rcv_entries_info {
	u16 group_size;
};

struct hfi1_devdata {
	u32 flags;
	void *rcvarray_wc;
	struct rcv_entries_info rcv_entries;
};

struct tid_flow_state_shim;

struct rvt_qp {
	u32 pmtu;
};

#endif
