// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The software cost of one 256 KiB TID RDMA READ segment end to end, on
//! the software platform, as the driver would spend it with the chip
//! doing its part (the READ_RESP payloads, their ICRCs and the placement
//! of the 63 header-suppressed packets are the chip's work and are not
//! here):
//!
//! 1. the requester posts the READ and its send engine runs: hardware
//!    flow, `setup_segment` of the 64 pages (scattered, or contiguous),
//!    the READ_REQ built into the send buffer (`tid_read_proto::qp`);
//! 2. the responder parses the READ_REQ (its ICRC checked) and validates
//!    it (`admission::validate`), then builds the 64 READ_RESP headers
//!    (`RespBuilder` and the header written into a buffer);
//! 3. the requester receives the segment's last READ_RESP, the one the
//!    chip delivers (`qp::receive_read_resp`): the segment and the READ
//!    complete, the TIDs are cleared and the hardware flow released; the
//!    completion is polled.
//!
//! Platform: the software chip (call log off), an identity DMA map that
//! only counts (the sim's `SimDma` keeps a map of every mapping for its
//! checks), counted memory, and the plain host spin lock (no lock-order
//! checker), as in `benches/segment.rs`. [`Segment::cycle`] is one
//! iteration; the state after it is the state before it.

use hfi1_hal::Psn;
use hfi1_hal::lock_order::{LockToken, Unlocked};
use hfi1_hal::sim::SimRef;
use hfi1_hal::sync::SpinLock;
use qp_wait::Qp;
use tid_flow::{RcvCtxt, Sge};
use tid_harness::world::{Setup, new_qp};
use tid_read_proto::admission::{QpView, Request, validate};
use tid_read_proto::packet::{self, MAX_PACKET, Parsed};
use tid_read_proto::qp::{self as tqp, TidQp};
use tid_read_proto::rc::{PacketSink, WcStatus};
use tid_read_proto::requester::ReadWr;
use tid_read_proto::response_stream::RespBuilder;
use tid_read_proto::wire::{aeth, read_resp};

use crate::{IdDma, bench_ctxt};

tid_harness::sim_platform! {
    /// The READ engines on the software chip with a plain spin lock and
    /// the counting identity DMA map.
    pub enum Bench { ext: TidQp<Bench>, lock: SpinLock, dma: IdDma }
}

/// A send buffer that keeps the last packet (no copy, no allocation).
#[derive(Debug)]
pub struct LastPacket {
    buf: Vec<u8>,
    len: usize,
    sent: u64,
}

impl PacketSink for LastPacket {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn send(&mut self, len: usize) {
        self.len = len;
        self.sent += 1;
    }
}

/// Bytes of a segment.
pub const SEGMENT: u32 = 256 << 10;

/// One requester QP on its context, and what the responder side needs.
pub struct Segment {
    rcd: Box<RcvCtxt<Bench>>,
    qp: SimRef<Qp<Bench>>,
    sges: Vec<Sge>,
    sink: LastPacket,
    hdr_buf: [u8; read_resp::HEADER_LEN],
    /// The responder's next expected IB PSN.
    resp_psn: Psn,
    wr_id: u64,
}

impl Segment {
    /// A context of 16 groups and one connected QP reading 64 pages that
    /// are `scattered` (no two contiguous) or one contiguous run.
    pub fn new(scattered: bool) -> Self {
        let setup = Setup::default();
        let rcd = bench_ctxt::<Bench>();
        let (conn, _) = setup.connections(0);
        let qp = new_qp::<Bench>(conn.verbs_qpn, 0, 0, conn, setup.first_psn);
        let sges = if scattered {
            (0..64)
                .map(|i| Sge {
                    vaddr: 0x1_0000_0000 + 2 * i * 4096,
                    length: 4096,
                })
                .collect()
        } else {
            vec![Sge {
                vaddr: 0x2_0000_0000,
                length: SEGMENT,
            }]
        };
        Self {
            rcd,
            qp,
            sges,
            sink: LastPacket {
                buf: vec![0; MAX_PACKET],
                len: 0,
                sent: 0,
            },
            hdr_buf: [0; read_resp::HEADER_LEN],
            resp_psn: setup.first_psn,
            wr_id: 1,
        }
    }

    /// One segment end to end; returns the READ_RESP headers built (64).
    /// Panics if any step does not do what it must (so a benchmark of a
    /// broken path cannot report a number).
    pub fn cycle(&mut self, root: &mut LockToken<'_, Unlocked>) -> u32 {
        // 1. Post and run the send engine: flow, setup, READ_REQ.
        {
            let mut g = self.qp.s_lock.lock(root);
            let wr = ReadWr {
                wr_id: self.wr_id,
                remote_addr: 0x10_0000,
                rkey: 0x100,
                sges: &self.sges,
            };
            assert!(tqp::post_read(&self.rcd, &self.qp, &mut g, &wr).is_ok());
        }
        self.wr_id += 1;
        assert!(tqp::send_engine(&self.rcd, &self.qp, root, &mut self.sink).is_ok());
        // 2. The responder: parse, validate, 64 headers.
        let Ok((_, Parsed::ReadReq { bth, hdr, payload })) =
            packet::parse(&self.sink.buf[..self.sink.len])
        else {
            panic!("the send engine sent no READ_REQ");
        };
        let view = QpView {
            remote_read: true,
            max_len: SEGMENT,
            pmtu: 4096,
            expected_psn: self.resp_psn,
            ack_queue_full: false,
        };
        let req = Request {
            psn: bth.psn,
            header: hdr,
            payload,
        };
        let Ok(acc) = validate(&view, &req, |_, _, _| true) else {
            panic!("the READ_REQ was refused");
        };
        let flow = acc.resp_flow(32, false, 4096);
        let mut last = None;
        let mut n = 0;
        for pkt in RespBuilder::new(&flow) {
            let Ok(pkt) = pkt else {
                panic!("READ_RESP build")
            };
            let mut h = read_resp::Repr::default();
            h.kdeth.kdeth0 = pkt.kdeth0;
            h.kdeth.kdeth1 = pkt.kdeth1;
            h.verbs_psn = pkt.verbs_psn;
            h.verbs_qp = hdr.verbs_qp;
            h.aeth = aeth::Repr {
                syndrome: packet::ACK_SYNDROME,
                msn: 0,
            };
            let mut p = read_resp::Packet::new_unchecked(&mut self.hdr_buf[..]);
            assert!(h.emit(&mut p).is_ok());
            last = Some((pkt.bth_psn, h));
            n += 1;
        }
        self.resp_psn = self.resp_psn.add(acc.npkts);
        // 3. The requester receives the last packet; the READ completes.
        let Some((psn, h)) = last else {
            panic!("no READ_RESP")
        };
        let mut g = self.qp.s_lock.lock(root);
        assert!(tqp::receive_read_resp(&self.rcd, &self.qp, &mut g, psn, &h, None).is_ok());
        let c = g.ext.requester.poll();
        assert!(c.is_some_and(|c| c.status == WcStatus::Success), "{c:?}");
        assert!(g.ext.flow.index.is_none(), "the flow went back");
        n
    }

    /// DMA mappings still live (0 between cycles).
    pub fn live_mappings(&self) -> i64 {
        self.rcd.dma.live()
    }
}
