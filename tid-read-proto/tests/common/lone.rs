// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! One requester QP on its own context, with the other side played by
//! the test: the connection those tests give it and the verbs they drive
//! it with (post under the QP's `s_lock`, run the send engine).

use hfi1_hal::lock_order::LockToken;
use tid_flow::{RcvCtxt, Sge};
use tid_harness::doubles::Outbox;
use tid_harness::platform::{SoftPlatform, SoftQp};
use tid_read_proto::opfn::TidParams;
use tid_read_proto::packet::Path;
use tid_read_proto::qp;
use tid_read_proto::rc::{Connection, EngineError};
use tid_read_proto::requester::ReadWr;

/// The remote address the tests' READs name.
pub const REMOTE: u64 = 0x5000_0000;

/// The connection of requester `qpn` (port 1, talking to QP 0x400 on
/// port 2, 4 KiB MTU): it refuses remote READs and takes READs of two
/// pages and more as TID READs.
pub fn requester_conn(qpn: u32) -> Connection {
    Connection {
        verbs_qpn: qpn,
        remote_verbs_qpn: 0x400,
        local: TidParams::local(1, 32, 14, false),
        remote: TidParams::local(2, 32, 14, false),
        pmtu: 4096,
        path: Path { dlid: 2, slid: 1 },
        max_rd_atomic: 16,
        remote_read: false,
        tid_read_min: 8192,
        ..Connection::default()
    }
}

/// Posts a READ of [`REMOTE`] (rkey 9) into `sges` on `qp`, taking its
/// `s_lock` as the verbs call does.
pub fn post_read(
    rcd: &RcvCtxt<SoftPlatform>,
    qp: &SoftQp,
    wr_id: u64,
    sges: &[Sge],
) -> Result<(), EngineError> {
    let mut root = LockToken::root();
    let mut g = qp.s_lock.lock(&mut root);
    let wr = ReadWr {
        wr_id,
        remote_addr: REMOTE,
        rkey: 9,
        sges,
    };
    qp::post_read(rcd, qp, &mut g, &wr)
}

/// Runs the send engine once per scheduled QP and returns what it built.
pub fn send(rcd: &RcvCtxt<SoftPlatform>) -> Vec<Vec<u8>> {
    let mut root = LockToken::root();
    let mut s = Outbox::new();
    while let Some(qp) = rcd.sched.pop_send() {
        qp::send_engine(rcd, &qp, &mut root, &mut s).unwrap();
    }
    s.drain().collect()
}
