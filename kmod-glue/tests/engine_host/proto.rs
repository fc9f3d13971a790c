// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The READ and WRITE protocol's C entry points (`proto.rs`) between two
//! engine QPs on two contexts, driven as a C driver drives them: the
//! `s_lock` entries inside [`with_s_lock`], the packet handlers with the
//! QP's `r_lock` held, the second leg's work run from its queue with no
//! lock. Each context's chip is the software chip (`hfi1_tid_sim_*`),
//! and this file plays its hardware: a TID packet goes through the chip's
//! expected receive, which places its data at the bus addresses the
//! engine programmed (this file's DMA map moves them away from the
//! virtual ones) and hands software only what header suppression lets
//! through, with the chip's error for the KDETH error path.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

use hfi1_hal::consts::*;
use hfi1_hal::sim::{ExpectedPacket, RcvError, SimContext, SimMemory};
use hfi1_hal::{FlowPsn, Kdeth0};
use kmod_glue::abi::*;
use kmod_glue::engine::*;
use kmod_glue::kplat::*;
use kmod_glue::proto::*;
use kmod_glue::route::OpfnParams;
use tid_read_proto::opfn::TidParams;
use tid_read_proto::wire::{frame, read_resp, write_data};

use super::{DMA_LIVE, TID_SENDS, TQp, with_s_lock};

const BUS: u64 = 0x8000_0000_0000;
const RKEY: u32 = 0x5000;
/// B's region (remote reads and writes).
const REGION: u64 = 1 << 40;
/// A's READ destination and WRITE source.
const A_DST: u64 = 0x10_0000_0000;
const A_SRC: u64 = 0x20_0000_0000;
/// One segment: the smallest TID WRITE (`TID_RDMA_MIN_SEGMENT_SIZE`).
const LEN: u64 = 256 * 1024;
const PAGES: u64 = LEN / 4096;

/// One node as its driver and hardware see it.
struct Node {
    rcd: *mut Rcd,
    chip: *mut c_void,
    qp: *mut TQp,
    r_lock: Box<AtomicU32>,
    mem: RefCell<SimMemory>,
    region: Vec<SgeC>,
    refs: Cell<i64>,
    out: RefCell<Vec<Vec<u8>>>,
    buf: RefCell<Vec<u8>>,
    wrong: Cell<u32>,
}

fn node(cookie: *mut c_void) -> &'static Node {
    // SAFETY: every cookie is a leaked `Node`.
    unsafe { &*cookie.cast::<Node>() }
}

unsafe extern "C" fn mr_get(
    c: *mut c_void,
    vaddr: u64,
    len: u32,
    rkey: u32,
    _write: bool,
    mr: *mut u32,
) -> bool {
    let n = node(c);
    let ok = rkey == RKEY && vaddr >= REGION && vaddr + u64::from(len) <= REGION + LEN;
    if ok {
        n.refs.set(n.refs.get() + 1);
        // SAFETY: the engine passes a valid out-pointer.
        unsafe { mr.write(0) };
    }
    ok
}

unsafe extern "C" fn mr_put(c: *mut c_void, _mr: u32) {
    let n = node(c);
    n.refs.set(n.refs.get() - 1);
}

unsafe extern "C" fn mr_pages(
    c: *mut c_void,
    _mr: u32,
    vaddr: u64,
    cnt: *mut u32,
    off: *mut u64,
) -> *const SgeC {
    let n = node(c);
    if !(REGION..REGION + LEN).contains(&vaddr) {
        return std::ptr::null();
    }
    // SAFETY: valid out-pointers from the engine.
    unsafe {
        cnt.write(n.region.len() as u32);
        off.write(vaddr - REGION);
    }
    n.region.as_ptr()
}

/// Virtual address to the node's memory: the region reads through its
/// page list; everything else is identity.
fn resolve(n: &Node, vaddr: u64) -> u64 {
    if (REGION..REGION + LEN).contains(&vaddr) {
        let off = vaddr - REGION;
        n.region[(off / 4096) as usize].vaddr + off % 4096
    } else {
        vaddr
    }
}

unsafe extern "C" fn read(c: *mut c_void, vaddr: u64, out: *mut u8, len: u32) -> bool {
    let n = node(c);
    // SAFETY: the engine passes a writable buffer of `len` bytes.
    let out = unsafe { std::slice::from_raw_parts_mut(out, len as usize) };
    // Whole pages only: every read here stays inside one page.
    n.mem.borrow().read(resolve(n, vaddr), out).is_ok()
}

unsafe extern "C" fn write(c: *mut c_void, addr: u64, data: *const u8, len: u32) -> bool {
    // SAFETY: the engine passes `len` readable bytes.
    let data = unsafe { std::slice::from_raw_parts(data, len as usize) };
    node(c).mem.borrow_mut().write(addr, data).is_ok()
}

unsafe extern "C" fn send_pkt(c: *mut c_void, pkt: *const u8, len: u32) {
    // SAFETY: the engine passes a built packet of `len` bytes.
    let p = unsafe { std::slice::from_raw_parts(pkt, len as usize) };
    node(c).out.borrow_mut().push(p.to_vec());
}

static VERBS: VerbsOps = VerbsOps {
    mr_get: Some(mr_get),
    mr_put: Some(mr_put),
    mr_pages: Some(mr_pages),
    read: Some(read),
    write: Some(write),
    send: Some(send_pkt),
};

impl Node {
    fn io(&'static self) -> IoC {
        let mut b = self.buf.borrow_mut();
        IoC {
            ops: &VERBS,
            cookie: std::ptr::from_ref(self).cast_mut().cast(),
            buf: b.as_mut_ptr(),
            cap: b.len() as u32,
        }
    }

    fn h(&self) -> *mut KQp {
        // SAFETY: the TQp is live for the test.
        unsafe { (*self.qp).h }
    }

    fn r_lock(&self) -> *mut c_void {
        std::ptr::from_ref::<AtomicU32>(&self.r_lock)
            .cast_mut()
            .cast()
    }

    /// Runs `f` with the QP's `r_lock` held, as the receive path does.
    fn with_r_lock<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: a lock word of ours.
        let flags = unsafe { super::spin_lock(self.r_lock()) };
        let out = f();
        // SAFETY: taken just above.
        unsafe { super::spin_unlock(self.r_lock(), flags) };
        out
    }

    /// The chip's expected receive of a TID packet; `None` if software
    /// does not see it.
    fn chip_receive(
        &self,
        dest_qp: u32,
        psn: u32,
        kdeth0: Kdeth0,
        payload: &[u8],
    ) -> Option<Option<RcvError>> {
        // SAFETY: the chip is a live `SimContext` of this node; the engine
        // touches it only inside its own calls, none of which runs now.
        let chip = unsafe { &mut *self.chip.cast::<SimContext>() };
        let o = chip.receive_expected(
            &mut self.mem.borrow_mut(),
            ExpectedPacket {
                dest_qp,
                psn: FlowPsn::from_raw(psn),
                kdeth0,
                payload,
            },
        );
        o.delivered.then_some(o.error)
    }
}

fn rte(e: RcvError) -> u32 {
    match e {
        RcvError::Tid => 1,
        RcvError::FlowSeq => 2,
        RcvError::FlowGen => 3,
    }
}

fn new_node(ctxt: u8, qpn: u32, slot: u32, conn: &ConnC) -> &'static Node {
    let chip = hfi1_tid_sim_create(0, 16 * 8);
    let p = CtxParams {
        ctxt: u32::from(ctxt),
        expected_base: 0,
        ngroups: 16,
        qp_slots: 8,
    };
    // SAFETY: valid parameters and the software chip's own table.
    let rcd = unsafe { hfi1_tid_ctx_create(&p, hfi1_tid_sim_ops(), chip, std::ptr::null_mut()) };
    assert!(!rcd.is_null());
    let q = super::new_qp_with(qpn, slot, conn);
    Box::leak(Box::new(Node {
        rcd,
        chip,
        qp: q,
        r_lock: Box::new(AtomicU32::new(0)),
        mem: RefCell::new(SimMemory::new()),
        region: Vec::new(),
        refs: Cell::new(0),
        out: RefCell::new(Vec::new()),
        buf: RefCell::new(vec![0; 8192 + 128]),
        wrong: Cell::new(0),
    }))
}

fn conn(local: u8, remote: u8, qpn: u32, rqpn: u32) -> ConnC {
    let p = |c| OpfnParams::from(TidParams::local(c, TID_RDMA_JKEY, 14, false));
    ConnC {
        local: p(local),
        remote: p(remote),
        verbs_qpn: qpn,
        remote_verbs_qpn: rqpn,
        psn: 0x100,
        pmtu: 4096,
        max_rd_atomic: 16,
        tid_read_min: 4096,
        dlid: u16::from(remote),
        slid: u16::from(local),
        tid: true,
        remote_read: true,
        remote_write: true,
        retry_cnt: 7,
        rnr_retry: 7,
        timeout: 14,
    }
}

/// Scattered pages (every other one) starting at `base`, filled with a
/// pattern of `seed` if asked.
fn pages(mem: &mut SimMemory, base: u64, seed: Option<u8>) -> Vec<SgeC> {
    (0..PAGES)
        .map(|i| {
            let va = base + i * 0x2000;
            mem.add_page(va >> 12);
            // The chip places at the bus address.
            mem.add_page((va ^ BUS) >> 12);
            if let Some(s) = seed {
                let data: Vec<u8> = (0..4096u32).map(|b| (b as u8) ^ s ^ (i as u8)).collect();
                mem.write(va, &data).unwrap();
            }
            SgeC {
                vaddr: va,
                length: 4096,
            }
        })
        .collect()
}

/// Bytes at `sges` (through `bus` if the chip placed them) in `mem`.
fn gather(mem: &SimMemory, sges: &[SgeC], bus: bool) -> Vec<u8> {
    let mut v = Vec::new();
    for s in sges {
        let mut page = vec![0; s.length as usize];
        let at = if bus { s.vaddr ^ BUS } else { s.vaddr };
        mem.read(at, &mut page).unwrap();
        v.extend(page);
    }
    v
}

/// A packet from A reaches B.
fn to_b(a: &'static Node, b: &'static Node, p: &[u8]) {
    let f = frame::parse(p).unwrap();
    let (rcd, h, r, io) = (b.rcd, b.h(), b.r_lock(), b.io());
    let ret = match f.bth.opcode {
        OP_TID_RDMA_READ_REQ => b.with_r_lock(|| {
            // SAFETY: live handles, r_lock held, the frame's bytes.
            unsafe { hfi1_tid_rcv_read_req(rcd, h, r, &io, p.as_ptr(), p.len() as u32) }
        }),
        OP_TID_RDMA_WRITE_REQ => b.with_r_lock(|| {
            // SAFETY: as above.
            unsafe { hfi1_tid_rcv_write_req(rcd, h, r, &io, p.as_ptr(), p.len() as u32) }
        }),
        OP_TID_RDMA_WRITE_DATA | OP_TID_RDMA_WRITE_DATA_LAST => {
            let v = write_data::Packet::new_checked(f.body).unwrap();
            let hdr = write_data::Repr::parse(&v).unwrap();
            match b.chip_receive(
                f.bth.dest_qp,
                f.bth.psn.get(),
                hdr.kdeth.kdeth0,
                v.payload(),
            ) {
                None => return,
                Some(Some(e)) => panic!("WRITE_DATA with chip error {e:?}"),
                Some(None) => b.with_r_lock(|| {
                    // SAFETY: as above.
                    unsafe { hfi1_tid_rcv_write_data(rcd, h, r, &io, p.as_ptr(), p.len() as u32) }
                }),
            }
        }
        op => panic!("A sent opcode {op:#x}"),
    };
    assert_eq!(ret, 0, "B's verdict on opcode {:#x}", f.bth.opcode);
    let _ = a;
}

/// A packet from B reaches A.
fn to_a(a: &'static Node, p: &[u8]) {
    let f = frame::parse(p).unwrap();
    let (rcd, h, r, io) = (a.rcd, a.h(), a.r_lock(), a.io());
    let (ptr, len) = (p.as_ptr(), p.len() as u32);
    let ret = match f.bth.opcode {
        OP_TID_RDMA_READ_RESP => {
            let v = read_resp::Packet::new_checked(f.body).unwrap();
            let hdr = read_resp::Repr::parse(&v).unwrap();
            match a.chip_receive(
                f.bth.dest_qp,
                f.bth.psn.get(),
                hdr.kdeth.kdeth0,
                v.payload(),
            ) {
                None => return,
                // SAFETY: live handles, the frame's bytes, no lock held.
                Some(Some(e)) => unsafe { hfi1_tid_kdeth_eflags(rcd, h, r, &io, ptr, len, rte(e)) },
                Some(None) => a.with_r_lock(|| {
                    // SAFETY: as above, r_lock held.
                    unsafe { hfi1_tid_rcv_read_resp(rcd, h, r, ptr, len) }
                }),
            }
        }
        OP_TID_RDMA_WRITE_RESP => {
            // The wrong handler refuses it without touching the QP.
            // SAFETY: as above.
            let wrong = a.with_r_lock(|| unsafe { hfi1_tid_rcv_tid_ack(rcd, h, r, ptr, len) });
            assert_eq!(wrong, -71, "-EPROTO");
            a.wrong.set(a.wrong.get() + 1);
            // SAFETY: as above.
            a.with_r_lock(|| unsafe { hfi1_tid_rcv_write_resp(rcd, h, r, ptr, len) })
        }
        // SAFETY: as above.
        OP_TID_RDMA_ACK => a.with_r_lock(|| unsafe { hfi1_tid_rcv_tid_ack(rcd, h, r, ptr, len) }),
        // SAFETY: as above.
        _ => a.with_r_lock(|| unsafe { hfi1_tid_rcv_rc_resp(rcd, h, r, &io, ptr, len) }),
    };
    assert!(
        (0..=1).contains(&ret),
        "A's verdict {ret} on opcode {:#x}",
        f.bth.opcode
    );
}

/// One READ and one WRITE of 256 KiB each from A to B through the C ABI,
/// every byte compared, nothing held at the end.
pub fn read_and_write_through_the_c_abi() {
    let a = new_node(1, 0x100, 0, &conn(1, 2, 0x100, 0x400));
    let b = new_node(2, 0x400, 0, &conn(2, 1, 0x400, 0x100));
    let (dst, src, region);
    {
        let mut am = a.mem.borrow_mut();
        dst = pages(&mut am, A_DST, None);
        src = pages(&mut am, A_SRC, Some(0xA5));
        let mut bm = b.mem.borrow_mut();
        region = pages(&mut bm, REGION + (1 << 30), Some(0x3C));
    }
    // SAFETY: `b` is leaked; its region is set before any packet moves.
    unsafe { (*std::ptr::from_ref(b).cast_mut()).region = region.clone() };
    let read_src = gather(&b.mem.borrow(), &region, false);
    let wr = |id, sges: &[SgeC]| WrC {
        wr_id: id,
        remote_addr: REGION,
        rkey: RKEY,
        nsges: sges.len() as u32,
        sges: sges.as_ptr(),
    };
    let (r, w) = (wr(1, &dst), wr(2, &src));
    with_s_lock(a.qp, || {
        // SAFETY: live handles, s_lock held, valid work requests.
        unsafe {
            assert_eq!(hfi1_tid_post_read(a.rcd, a.h(), &r), 0);
            assert_eq!(hfi1_tid_post_write(a.rcd, a.h(), &w), 0);
            assert_eq!(hfi1_tid_post_write(a.rcd, a.h(), std::ptr::null()), -22);
        }
    });
    let mut done = Vec::new();
    let mut counts = [0u64; 3];
    for _round in 0..1000 {
        let io_a = a.io();
        // SAFETY: live handles, s_lock held.
        let n = with_s_lock(a.qp, || unsafe { hfi1_tid_make_req(a.rcd, a.h(), &io_a) });
        assert!(n >= 0);
        while let Some(c) = {
            let mut q = TID_SENDS.lock().unwrap();
            let at = q.iter().position(|&c| c == a.qp as usize);
            at.and_then(|i| q.remove(i))
        } {
            assert_eq!(c, a.qp as usize);
            // SAFETY: no lock held; the QP lives.
            let n = unsafe { hfi1_tid_do_tid_send(a.rcd, a.h(), &io_a) };
            assert!(n >= 0);
            counts[0] += n as u64;
        }
        let moved: Vec<_> = a.out.borrow_mut().drain(..).collect();
        for p in &moved {
            to_b(a, b, p);
        }
        super::run_triggers();
        let io_b = b.io();
        with_s_lock(b.qp, || {
            // SAFETY: live handles, s_lock held.
            unsafe {
                assert!(hfi1_tid_make_resp(b.rcd, b.h(), &io_b, 64) >= 0);
                counts[1] += hfi1_tid_make_tid_ack(b.rcd, b.h(), &io_b) as u64;
            }
        });
        let back: Vec<_> = b.out.borrow_mut().drain(..).collect();
        for p in &back {
            to_a(a, p);
        }
        with_s_lock(a.qp, || {
            let mut wc = WcC::default();
            // SAFETY: live handle, s_lock held, writable completion.
            while unsafe { hfi1_tid_poll(a.h(), &mut wc) } == 1 {
                done.push(wc);
            }
        });
        counts[2] += 1;
        if moved.is_empty() && back.is_empty() && TID_SENDS.lock().unwrap().is_empty() {
            break;
        }
    }
    println!(
        "proto: {done:?}, WRITE_DATA {}, TID ACKs {}, rounds {}",
        counts[0], counts[1], counts[2]
    );
    let ok = |id| WcC {
        wr_id: id,
        length: LEN as u32,
        status: 0,
    };
    assert_eq!(done, vec![ok(1), ok(2)]);
    assert!(counts[0] >= PAGES && counts[1] >= 1, "{counts:?}");
    assert!(a.wrong.get() >= 1, "a WRITE_RESP reached the wrong handler");
    assert_eq!(gather(&a.mem.borrow(), &dst, true), read_src, "READ data");
    assert_eq!(
        gather(&b.mem.borrow(), &region, true),
        gather(&a.mem.borrow(), &src, false),
        "WRITE data"
    );
    // A frame that does not parse.
    let (rcd, h, rl) = (a.rcd, a.h(), a.r_lock());
    // SAFETY: live handles, r_lock held, 3 readable bytes.
    let bad =
        a.with_r_lock(|| unsafe { hfi1_tid_rcv_read_resp(rcd, h, rl, [1u8, 2, 3].as_ptr(), 3) });
    assert_eq!(bad, -74, "-EBADMSG");
    let io = a.io();
    // SAFETY: live handles, no lock held; an unknown error code.
    let bad = unsafe { hfi1_tid_kdeth_eflags(rcd, h, rl, &io, [0u8; 4].as_ptr(), 4, 0) };
    assert_eq!(bad, -22, "-EINVAL");
    for n in [a, b] {
        let io = n.io();
        with_s_lock(n.qp, || {
            // SAFETY: live handles, s_lock held.
            assert_eq!(unsafe { hfi1_tid_qp_reset(n.rcd, n.h(), &io) }, 0)
        });
        let mut st = CtxStats::default();
        // SAFETY: live context, writable stats.
        assert_eq!(unsafe { hfi1_tid_ctx_stats(n.rcd, &mut st) }, 0);
        assert_eq!((st.flows_used, st.groups_used, st.groups_full), (0, 0, 0));
        assert_eq!(n.refs.get(), 0, "MR references");
        // SAFETY: the test's reference: the QP goes.
        unsafe { super::qp_put(n.qp.cast()) };
        // SAFETY: nothing uses the context any more.
        assert_eq!(unsafe { hfi1_tid_ctx_destroy(n.rcd) }, 0);
        // SAFETY: the chip's context is gone.
        unsafe { hfi1_tid_sim_destroy(n.chip) };
    }
    assert_eq!(DMA_LIVE.load(Ordering::Acquire), 0);
}
