// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA READ on top of `tid-flow`: the packets, the connection's
//! parameters, and the requester and responder engines (SPEC §3 and §5
//! "tid-read-proto").
//!
//! Three layers, each using only the ones below it:
//!
//! 1. **Packets and parameters**, pure functions and plain values:
//!    [`wire`] (the bytes of every header, the ICRC, ERF records),
//!    [`packet`] (framing and parsing whole packets), what the two TID
//!    READ packets mean: [`segment_request`] (the requester's READ_REQ
//!    for a segment), [`admission`] (the responder's checks of it) and
//!    [`response_stream`] (the responder's READ_RESPs for it);
//!    [`plain_read`] (the IB RDMA READ request and responses a READ that
//!    is no TID READ goes as), [`opfn`] and [`qualify`] (what the two
//!    sides agree on and which READs become TID READs).
//! 2. **The engines**, over one QP's state: [`requester`] and
//!    [`responder`] (with the TID RDMA WRITE requester and the second leg
//!    in [`write`](mod@write)), on the shared types of [`rc`] (connection,
//!    completions, errors, the sink and memory-region traits the caller
//!    provides). They take the parts they use and know nothing of how a
//!    QP keeps them.
//! 3. **The QP**: [`qp`] holds both engines' state ([`qp::TidQp`]) and
//!    the entry points that take the QP's `s_lock` guard, as the driver
//!    enters them.
//!
//! The engines are tested on the software platform, doubles and two-node
//! world of the `tid-harness` crate.
//!
//! # Example
//!
//! The responder's side of one segment of two TID entries (three pages at
//! a 4 KiB MTU): [`response_stream::RespBuilder`] says what each READ_RESP
//! carries, [`response_stream::write_packet`] builds it (ICRC included) and
//! [`packet::parse`] reads it back, checking the ICRC.
//!
//! ```
//! use hfi1_hal::{Generation, Psn, TidCtrl, TidEntry};
//! use tid_read_proto::packet::{self, MAX_PACKET, Parsed, Path};
//! use tid_read_proto::response_stream::{self, RespBuilder, RespFlow};
//! use tid_read_proto::wire::read_resp::Repr;
//!
//! // What the READ_REQ asked for: a pair of entries (2 pages), then one.
//! let entries = [
//!     TidEntry::new(0, TidCtrl::Pair, 2).unwrap(),
//!     TidEntry::new(1, TidCtrl::Even, 1).unwrap(),
//! ];
//! let flow = RespFlow {
//!     entries: &entries,
//!     length: 3 * 4096,
//!     pmtu: 4096,
//!     spsn: 0,
//!     generation: Generation::new(5).unwrap(),
//!     ib_spsn: Psn::new(100),
//!     jkey: 32,
//!     urg: false,
//! };
//! let mut buf = vec![0u8; MAX_PACKET];
//! let mut last = Vec::new();
//! for (i, pkt) in RespBuilder::new(&flow).enumerate() {
//!     let pkt = pkt.unwrap();
//!     let mut hdr = Repr::default();
//!     hdr.kdeth.kdeth0 = pkt.kdeth0;
//!     hdr.kdeth.kdeth1 = pkt.kdeth1;
//!     hdr.verbs_psn = pkt.verbs_psn;
//!     hdr.verbs_qp = 0x42;
//!     let n = response_stream::write_packet(
//!         &mut buf,
//!         Path { dlid: 1, slid: 2 },
//!         0x80_0801, // the requester's tid_flow_qp
//!         Psn::new(pkt.bth_psn.raw()),
//!         &hdr,
//!         pkt.len as usize,
//!         |data| {
//!             data.fill(i as u8); // the source bytes
//!             true
//!         },
//!     )
//!     .unwrap();
//!     let Ok((_, Parsed::ReadResp { bth, hdr, payload })) = packet::parse(&buf[..n]) else {
//!         panic!("a READ_RESP must parse back");
//!     };
//!     assert_eq!(bth.psn.get(), pkt.bth_psn.raw());
//!     assert_eq!(hdr.verbs_psn, Psn::new(100 + i as u32));
//!     assert_eq!(payload.len(), 4096);
//!     last.push(hdr.kdeth.kdeth0.sh());
//! }
//! // SH (header suppression) on every packet but the segment's last.
//! assert_eq!(last, [true, true, false]);
//! // A flipped byte fails the ICRC.
//! buf[40] ^= 1;
//! assert!(packet::parse(&buf[..4156]).is_err());
//! ```
//!
//! # Locking
//!
//! Layer 1 takes and needs no lock. The engines run under the QP's
//! `s_lock` and take `exp_lock` only through `tid-flow`; [`qp`]'s table
//! says which entry point needs and takes what.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::panic, clippy::indexing_slicing))]

extern crate alloc;

pub mod admission;
pub mod opfn;
pub mod packet;
pub mod plain_read;
pub mod qp;
pub mod qualify;
pub mod qualify_write;
pub mod rc;
pub mod requester;
pub mod responder;
pub mod response_stream;
pub mod segment_request;
pub mod wire;
pub mod write;
