// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Which READs go as TID READs, as Linux 6.1 decides at post time, and
//! the plain RDMA READ every other READ goes as: qualification (length,
//! SGE alignment), the fallback when flow records cannot be allocated,
//! and the interlock between plain and TID READs. Each test's doc names
//! the kernel function it pins and what it showed with the rule taken
//! out (checked).

mod common;

use common::{Kind, Pair, kind};
use hfi1_hal::Psn;
use tid_flow::Sge;
use tid_harness::world::Setup;
use tid_read_proto::rc::WcStatus;

/// The kinds of the requests among `pkts`.
fn requests(pkts: &[Vec<u8>]) -> Vec<Kind> {
    pkts.iter()
        .map(|p| kind(p))
        .filter(|k| matches!(k, Kind::TidReq(_) | Kind::PlainReq(_)))
        .collect()
}

/// A READ shorter than `TID_RDMA_MIN_SEGMENT_SIZE` (256 KiB) goes as a
/// plain RDMA READ; one of 256 KiB with page-aligned elements as a TID
/// READ. Both complete with every byte right.
/// Kernel: `hfi1_setup_tid_rdma_wqe()` (`wqe->length >=
/// TID_RDMA_MIN_SEGMENT_SIZE`), called from `hfi1_setup_wqe()` at post.
///
/// Fails with the length rule taken out (checked: `qualify_min` given a
/// 4 KiB minimum): the 252 KiB READ goes as a TID READ.
#[test]
fn read_below_256_kib_goes_as_plain_read() {
    let mut p = Pair::new(Setup::default());
    let small = p.post(0, 63);
    let big = p.post(0, 64);
    let reqs = p.send();
    // The TID READ waits for the plain READ (the interlock).
    assert_eq!(requests(&reqs), [Kind::PlainReq(Psn::new(0x10))]);
    p.give_responder(&reqs);
    let r = p.respond();
    p.give_requester(&r);
    let reqs = p.send();
    assert!(
        requests(&reqs).iter().all(|k| matches!(k, Kind::TidReq(_))),
        "{:?}",
        requests(&reqs)
    );
    p.give_responder(&reqs);
    p.finish(0);
    assert_eq!(
        p.done[0],
        [(small, WcStatus::Success), (big, WcStatus::Success)]
    );
    let s = p.req_stats();
    assert_eq!((s.plain_reads, s.not_qualified), (1, 1));
    p.teardown_clean();
}

/// A READ of 256 KiB whose scatter list has an element that does not
/// start or end on a page goes as a plain RDMA READ, its bytes landing
/// where the elements say. Kernel: `hfi1_check_sge_align()` in
/// `setup_tid_rdma_wqe()`.
///
/// Fails with the alignment rule taken out (checked: `sge_list_aligned`
/// not consulted): the READ is planned as a TID READ and the send engine
/// fails on its unaligned pages.
#[test]
fn unaligned_sge_read_goes_as_plain_read() {
    let mut p = Pair::new(Setup::default());
    let run = p.n.pages.run(1, 65);
    // 256 KiB from 512 bytes into the first page: the harness maps whole
    // pages an element covers, so the 65th page is added here.
    p.n.mem.add_page((run.vaddr >> 12) + 64);
    let sges = vec![Sge {
        vaddr: run.vaddr + 512,
        length: 64 * 4096,
    }];
    let wr = p.post_sges(0, sges);
    let reqs = p.send();
    assert_eq!(requests(&reqs), [Kind::PlainReq(Psn::new(0x10))]);
    p.give_responder(&reqs);
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// A READ that qualifies but whose flow records cannot be allocated goes
/// as a plain RDMA READ (no error, nothing held).
/// Kernel: `setup_tid_rdma_wqe()` (`hfi1_kern_exp_rcv_alloc_flows()`
/// failing: `goto exit`, the opcode left `IB_WR_RDMA_READ`).
///
/// Fails with the engine's old rule (checked: the failure refusing the
/// post with `NoMemory`): the post is refused.
#[test]
fn flow_record_allocation_failure_makes_a_plain_read() {
    let mut p = Pair::new(Setup::default());
    p.n.rcd.mem.fail_in(0);
    let wr = p.post(0, 64);
    let reqs = p.send();
    assert_eq!(requests(&reqs), [Kind::PlainReq(Psn::new(0x10))]);
    assert_eq!(p.req_stats().no_memory, 1);
    p.give_responder(&reqs);
    p.finish(0);
    assert_eq!(p.done[0], [(wr, WcStatus::Success)]);
    p.teardown_clean();
}

/// A TID READ posted behind a plain READ is not started until the plain
/// READ completed (a plain READ behind a TID READ goes at once, as in the
/// kernel); the send engine applies the interlock to every READ it
/// starts. Kernel:
/// `hfi1_tid_rdma_wqe_interlock()` from `hfi1_make_rc_req()`
/// (`HFI1_S_TID_WAIT_INTERLCK`), cleared by `do_rc_completion()`.
///
/// Fails with the interlock taken out of the send engine (checked:
/// `interlocked` always false): the TID READ_REQ goes out with the plain
/// READ's request.
#[test]
fn tid_read_after_plain_read_waits_for_its_response() {
    let mut p = Pair::new(Setup::default());
    let a = p.post(0, 1);
    let b = p.post(0, 64);
    let c = p.post(0, 1);
    let first = p.send();
    assert_eq!(requests(&first), [Kind::PlainReq(Psn::new(0x10))]);
    p.give_responder(&first);
    let r = p.respond();
    p.give_requester(&r);
    assert_eq!(p.done[0], [(a, WcStatus::Success)]);
    let second = p.send();
    let kinds = requests(&second);
    assert!(matches!(kinds[0], Kind::TidReq(_)), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&Kind::PlainReq(Psn::new(0x51))));
    p.give_responder(&second);
    p.finish(0);
    assert_eq!(
        p.done[0],
        [
            (a, WcStatus::Success),
            (b, WcStatus::Success),
            (c, WcStatus::Success)
        ]
    );
    p.teardown_clean();
}
