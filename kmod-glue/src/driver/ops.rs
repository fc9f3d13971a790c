// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the rebuilt driver hands the routed stateful functions: its
//! services as a table of C functions ([`DrvOps`], `struct
//! hfi1_tid_drv_ops`), and views of a QP ([`DrvQpView`], `struct
//! hfi1_tid_drv_qp`) and a receive context ([`DrvRcdView`], `struct
//! hfi1_tid_drv_rcd`) whose fields point into the driver's own structures.
//!
//! `struct rvt_qp`, `struct hfi1_qp_priv` and `struct hfi1_ctxtdata` change
//! layout with the kernel's configuration, so the C adapter
//! (`hfi1/hfi1_tid_route.c`) fills the views with `&qp->s_flags`,
//! `&priv->flow_state`, ... computed by the compiler of the kernel being
//! built; the layout table (`hfi1_hal::layout`) checks the type and size
//! of every field a view points to.
//!
//! The table's service members have the driver's own signatures
//! (`hfi1_put_tid()`, `write_uctxt_csr()`, `dma_map_page()`, ...): the
//! routed functions call them as the originals do, and the in-kernel
//! differential test gives both the same recording table.
//!
//! # Locking
//!
//! As the driver's: the members are called with the locks the driver
//! holds around the same calls (`hfi1_put_tid()` under `exp_lock`,
//! `hfi1_schedule_send()` under `s_lock`, `hfi1_do_send()` with none).

use core::ffi::c_void;

use hfi1_hal::layout::{CExpTidSet, CListHead, CTidFlowState, CTidGroup, CTidQueue};

/// `spin_lock_irqsave(lock, flags)`; returns the flags.
pub type DrvLockFn = unsafe extern "C" fn(lock: *mut c_void) -> usize;
/// `spin_unlock_irqrestore(lock, flags)`.
pub type DrvUnlockFn = unsafe extern "C" fn(lock: *mut c_void, flags: usize);
/// `lockdep_assert_held(lock)`.
pub type DrvAssertHeldFn = unsafe extern "C" fn(lock: *mut c_void);
/// `rvt_get_qp()` / `rvt_put_qp()` / `hfi1_schedule_send()` on a
/// `struct rvt_qp *`.
pub type DrvQpFn = unsafe extern "C" fn(qp: *mut c_void);
/// The QP owning a `qpriv->tid_wait` link (`container_of(..)->owner`).
pub type DrvQpOfWaitFn = unsafe extern "C" fn(tid_wait: *mut CListHead) -> *mut c_void;
/// Fills a QP's view.
pub type DrvQpViewFn = unsafe extern "C" fn(qp: *mut c_void, view: *mut DrvQpView);
/// `queue_work_on(cpu, wq, work)`.
pub type DrvQueueWorkFn =
    unsafe extern "C" fn(cpu: i32, wq: *mut c_void, work: *mut c_void) -> bool;
/// `hfi1_do_send(qp, in_thread)`.
pub type DrvDoSendFn = unsafe extern "C" fn(qp: *mut c_void, in_thread: bool);
/// `hfi1_wait_kmem(qp)`; `s_flags` is `&qp->s_flags`, which it changes.
pub type DrvWaitKmemFn = unsafe extern "C" fn(qp: *mut c_void, s_flags: *mut u32);
/// `hfi1_put_tid(dd, index, type, pa, order)`.
pub type DrvPutTidFn =
    unsafe extern "C" fn(dd: *mut c_void, index: u32, ty: u32, pa: u64, order: u16);
/// `rcv_array_wc_fill(dd, index)`.
pub type DrvWcFillFn = unsafe extern "C" fn(dd: *mut c_void, index: u32);
/// `write_uctxt_csr(dd, ctxt, offset, value)`.
pub type DrvWriteCsrFn = unsafe extern "C" fn(dd: *mut c_void, ctxt: i32, offset: u32, value: u64);
/// `read_uctxt_csr(dd, ctxt, offset)`.
pub type DrvReadCsrFn = unsafe extern "C" fn(dd: *mut c_void, ctxt: i32, offset: u32) -> u64;
/// `dma_map_page(dev, page, offset, size, dir)`.
pub type DrvDmaMapFn = unsafe extern "C" fn(
    dev: *mut c_void,
    page: *mut c_void,
    offset: usize,
    size: usize,
    dir: i32,
) -> u64;
/// `dma_mapping_error(dev, addr)`.
pub type DrvDmaErrorFn = unsafe extern "C" fn(dev: *mut c_void, addr: u64) -> i32;
/// `dma_unmap_page(dev, addr, size, dir)`.
pub type DrvDmaUnmapFn = unsafe extern "C" fn(dev: *mut c_void, addr: u64, size: usize, dir: i32);
/// `virt_to_page(vaddr)`.
pub type DrvVirtToPageFn = unsafe extern "C" fn(vaddr: u64) -> *mut c_void;
/// `page_address(page)`.
pub type DrvPageAddressFn = unsafe extern "C" fn(page: *mut c_void) -> u64;
/// `mr->lkey`.
pub type DrvMrLkeyFn = unsafe extern "C" fn(mr: *mut c_void) -> u32;
/// `mr->map[m]->segs[n]`: its address and length.
pub type DrvMrSegFn =
    unsafe extern "C" fn(mr: *mut c_void, m: u32, n: u32, vaddr: *mut u64, length: *mut u64);
/// `kmalloc_node(size, gfp, node)`.
pub type DrvKmallocFn = unsafe extern "C" fn(size: usize, gfp: u32, node: i32) -> *mut c_void;
/// `kcalloc_node(n, size, gfp, node)`.
pub type DrvKcallocFn =
    unsafe extern "C" fn(n: usize, size: usize, gfp: u32, node: i32) -> *mut c_void;
/// `kfree(p)`.
pub type DrvKfreeFn = unsafe extern "C" fn(p: *mut c_void);
/// `get_random_u32()`.
pub type DrvRandomFn = unsafe extern "C" fn() -> u32;
/// `hfi1_set_ctxt_jkey(dd, rcd, jkey)`.
pub type DrvSetJkeyFn = unsafe extern "C" fn(dd: *mut c_void, rcd: *mut c_void, jkey: u16);

/// The driver's services and accessors (`struct hfi1_tid_drv_ops`). Every
/// member is set: the routed adapters pass only the driver's table or the
/// differential test's.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DrvOps {
    /// `spin_lock_irqsave()`.
    pub lock: Option<DrvLockFn>,
    /// `spin_unlock_irqrestore()`.
    pub unlock: Option<DrvUnlockFn>,
    /// `lockdep_assert_held()`.
    pub assert_held: Option<DrvAssertHeldFn>,
    /// `rvt_get_qp()`.
    pub qp_get: Option<DrvQpFn>,
    /// `rvt_put_qp()`.
    pub qp_put: Option<DrvQpFn>,
    /// The QP of a wait link.
    pub qp_of_wait: Option<DrvQpOfWaitFn>,
    /// A QP's view.
    pub qp_view: Option<DrvQpViewFn>,
    /// `queue_work_on()`.
    pub queue_work_on: Option<DrvQueueWorkFn>,
    /// `hfi1_schedule_send()`.
    pub schedule_send: Option<DrvQpFn>,
    /// `hfi1_do_send()`.
    pub do_send: Option<DrvDoSendFn>,
    /// `hfi1_wait_kmem()`.
    pub wait_kmem: Option<DrvWaitKmemFn>,
    /// `hfi1_put_tid()`.
    pub put_tid: Option<DrvPutTidFn>,
    /// `rcv_array_wc_fill()`.
    pub wc_fill: Option<DrvWcFillFn>,
    /// `write_uctxt_csr()`.
    pub write_csr: Option<DrvWriteCsrFn>,
    /// `read_uctxt_csr()`.
    pub read_csr: Option<DrvReadCsrFn>,
    /// `dma_map_page()`.
    pub dma_map: Option<DrvDmaMapFn>,
    /// `dma_mapping_error()`.
    pub dma_error: Option<DrvDmaErrorFn>,
    /// `dma_unmap_page()`.
    pub dma_unmap: Option<DrvDmaUnmapFn>,
    /// `virt_to_page()`.
    pub page_of: Option<DrvVirtToPageFn>,
    /// `page_address()`.
    pub address_of: Option<DrvPageAddressFn>,
    /// A memory region's lkey.
    pub mr_lkey: Option<DrvMrLkeyFn>,
    /// A segment of a memory region's map.
    pub mr_seg: Option<DrvMrSegFn>,
    /// `kmalloc_node()`.
    pub kmalloc: Option<DrvKmallocFn>,
    /// `kcalloc_node()`.
    pub kcalloc: Option<DrvKcallocFn>,
    /// `kfree()`.
    pub kfree: Option<DrvKfreeFn>,
    /// `get_random_u32()`.
    pub random_u32: Option<DrvRandomFn>,
    /// `hfi1_set_ctxt_jkey()`.
    pub set_ctxt_jkey: Option<DrvSetJkeyFn>,
}

/// A QP as the routed functions reach it (`struct hfi1_tid_drv_qp`):
/// pointers into the driver's `struct rvt_qp` and `struct hfi1_qp_priv`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DrvQpView {
    /// The `struct rvt_qp`.
    pub qp: *mut c_void,
    /// `&qp->s_lock`.
    pub s_lock: *mut c_void,
    /// `&qp->s_flags`.
    pub s_flags: *mut u32,
    /// `&qpriv->flow_state`.
    pub flow_state: *mut CTidFlowState,
    /// `&qpriv->tid_wait`.
    pub tid_wait: *mut CListHead,
    /// `&qpriv->tid_enqueue`.
    pub tid_enqueue: *mut u32,
    /// `qpriv->pages` (`TID_RDMA_MAX_PAGES` `struct page *`).
    pub pages: *mut *mut c_void,
    /// `ppd->hfi1_wq`, where its trigger work is queued.
    pub wq: *mut c_void,
    /// `&qpriv->tid_rdma.trigger_work`.
    pub trigger_work: *mut c_void,
    /// `qp->pmtu`.
    pub pmtu: u32,
    /// The CPU of its trigger work: `priv->s_sde->cpu`, or the first CPU
    /// of the device's node.
    pub cpu: u32,
}

/// A receive context as the routed functions reach it (`struct
/// hfi1_tid_drv_rcd`): pointers into the driver's `struct hfi1_ctxtdata`
/// and its device.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DrvRcdView {
    /// The `struct hfi1_ctxtdata`.
    pub rcd: *mut c_void,
    /// `rcd->dd`.
    pub dd: *mut c_void,
    /// `&dd->pcidev->dev`, for DMA mapping.
    pub dev: *mut c_void,
    /// `&rcd->exp_lock`.
    pub exp_lock: *mut c_void,
    /// `&rcd->flow_mask` (an `unsigned long`).
    pub flow_mask: *mut u64,
    /// `rcd->flows` (`RXE_NUM_TID_FLOWS` of them).
    pub flows: *mut CTidFlowState,
    /// `&rcd->groups`.
    pub groups: *mut *mut CTidGroup,
    /// `&rcd->tid_group_list`.
    pub tid_group_list: *mut CExpTidSet,
    /// `&rcd->tid_used_list`.
    pub tid_used_list: *mut CExpTidSet,
    /// `&rcd->tid_full_list`.
    pub tid_full_list: *mut CExpTidSet,
    /// `&rcd->flow_queue`.
    pub flow_queue: *mut CTidQueue,
    /// `&rcd->rarr_queue`.
    pub rarr_queue: *mut CTidQueue,
    /// `&rcd->jkey`.
    pub jkey: *mut u16,
    /// `&dd->verbs_dev.n_tidwait`.
    pub n_tidwait: *mut u64,
    /// `rcd->ctxt`.
    pub ctxt: u32,
    /// `rcd->expected_base`.
    pub expected_base: u32,
    /// `rcd->expected_count`.
    pub expected_count: u32,
    /// `dd->rcv_entries.group_size`.
    pub group_size: u32,
    /// `rcd->numa_id`.
    pub numa_id: i32,
}

/// The table with every member checked.
#[derive(Debug, Clone, Copy)]
pub struct Ops {
    pub(crate) lock: DrvLockFn,
    pub(crate) unlock: DrvUnlockFn,
    pub(crate) assert_held: DrvAssertHeldFn,
    pub(crate) qp_get: DrvQpFn,
    pub(crate) qp_put: DrvQpFn,
    pub(crate) qp_of_wait: DrvQpOfWaitFn,
    pub(crate) qp_view: DrvQpViewFn,
    pub(crate) queue_work_on: DrvQueueWorkFn,
    pub(crate) schedule_send: DrvQpFn,
    pub(crate) do_send: DrvDoSendFn,
    pub(crate) wait_kmem: DrvWaitKmemFn,
    pub(crate) put_tid: DrvPutTidFn,
    pub(crate) wc_fill: DrvWcFillFn,
    pub(crate) write_csr: DrvWriteCsrFn,
    pub(crate) read_csr: DrvReadCsrFn,
    pub(crate) dma_map: DrvDmaMapFn,
    pub(crate) dma_error: DrvDmaErrorFn,
    pub(crate) dma_unmap: DrvDmaUnmapFn,
    pub(crate) page_of: DrvVirtToPageFn,
    pub(crate) address_of: DrvPageAddressFn,
    pub(crate) mr_lkey: DrvMrLkeyFn,
    pub(crate) mr_seg: DrvMrSegFn,
    pub(crate) kmalloc: DrvKmallocFn,
    pub(crate) kcalloc: DrvKcallocFn,
    pub(crate) kfree: DrvKfreeFn,
    pub(crate) random_u32: DrvRandomFn,
    pub(crate) set_ctxt_jkey: DrvSetJkeyFn,
}

impl Ops {
    /// The table with every member present, or `None`.
    pub fn check(o: &DrvOps) -> Option<Self> {
        Some(Self {
            lock: o.lock?,
            unlock: o.unlock?,
            assert_held: o.assert_held?,
            qp_get: o.qp_get?,
            qp_put: o.qp_put?,
            qp_of_wait: o.qp_of_wait?,
            qp_view: o.qp_view?,
            queue_work_on: o.queue_work_on?,
            schedule_send: o.schedule_send?,
            do_send: o.do_send?,
            wait_kmem: o.wait_kmem?,
            put_tid: o.put_tid?,
            wc_fill: o.wc_fill?,
            write_csr: o.write_csr?,
            read_csr: o.read_csr?,
            dma_map: o.dma_map?,
            dma_error: o.dma_error?,
            dma_unmap: o.dma_unmap?,
            page_of: o.page_of?,
            address_of: o.address_of?,
            mr_lkey: o.mr_lkey?,
            mr_seg: o.mr_seg?,
            kmalloc: o.kmalloc?,
            kcalloc: o.kcalloc?,
            kfree: o.kfree?,
            random_u32: o.random_u32?,
            set_ctxt_jkey: o.set_ctxt_jkey?,
        })
    }
}
