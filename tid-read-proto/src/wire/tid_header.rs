// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What every TID RDMA header after the BTH shares, and what the WRITE
//! builders return.
//!
//! All eight TID RDMA headers (`struct tid_rdma_*` in the kernel's
//! `tid_rdma_defs.h`) are nine words long: the KDETH in words 0 and 1 and
//! the requester's or responder's verbs QP number in word 8. The receive
//! path relies on that: it finds the QP of any TID RDMA packet from word 8
//! before it knows which header it holds ([`verbs_qp_of`]).
//!
//! # Reserved words in the WRITE headers
//!
//! The WRITE-side headers ([`super::write_req`], [`super::write_resp`],
//! [`super::write_data`], [`super::resync`], [`super::tid_ack`]) read their
//! reserved words as the kernel's receive handlers do: not at all. Their
//! `Repr::parse` ignores them and `emit` writes zeros, so parse followed by
//! emit reproduces every byte except the reserved ones. This differs from
//! the READ headers on purpose: the driver's builders for WRITE_REQ,
//! WRITE_DATA, RESYNC and ACK never write those words, so a Linux peer
//! sends whatever an earlier packet left in the reused send buffer, and a
//! strict parser would drop good packets at random. Each view's
//! `reserved_is_zero` tells a caller who wants to count such packets.
//! Kernel: `hfi1_build_tid_rdma_write_req()`, `hfi1_build_tid_rdma_packet()`,
//! `hfi1_build_tid_rdma_resync()`, `hfi1_build_tid_rdma_write_ack()` (only
//! `hfi1_build_tid_rdma_write_resp()` clears its header first).

use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_READ_REQ, OP_TID_RDMA_READ_RESP, OP_TID_RDMA_RESYNC,
    OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST, OP_TID_RDMA_WRITE_REQ,
    OP_TID_RDMA_WRITE_RESP,
};
use hfi1_hal::{FlowIndex, Psn};

use super::bth;

/// Kernel: `TID_RDMA_DESTQP_FLOW_SHIFT` / `_MASK`.
///
/// Where the destination-QP bits of `tid_flow_qp` keep the flow index.
pub const DESTQP_FLOW_SHIFT: u32 = 11;
/// Mask of the flow index in `tid_flow_qp` (after the shift).
pub const DESTQP_FLOW_MASK: u32 = 0x1F;

/// Length in bytes of every TID RDMA header after the BTH (nine words).
pub const HEADER_LEN: usize = 36;

/// Offset of the verbs QP word in every TID RDMA header.
pub const VERBS_QP_OFFSET: usize = HEADER_LEN - 4;

/// Bits of a verbs QP number the receive path uses. Kernel: `RVT_QPN_MASK`.
pub const QPN_MASK: u32 = 0x00FF_FFFF;

/// True for the eight TID RDMA opcodes (0xE0..=0xE7).
pub const fn is_tid_opcode(opcode: u8) -> bool {
    matches!(
        opcode,
        OP_TID_RDMA_WRITE_REQ
            | OP_TID_RDMA_WRITE_RESP
            | OP_TID_RDMA_WRITE_DATA
            | OP_TID_RDMA_WRITE_DATA_LAST
            | OP_TID_RDMA_READ_REQ
            | OP_TID_RDMA_READ_RESP
            | OP_TID_RDMA_RESYNC
            | OP_TID_RDMA_ACK
    )
}

/// The verbs QP number (24 bits) of the TID RDMA header at the start of
/// `body` (what follows the BTH), whichever header it is; `None` if `body`
/// is shorter than a header. Kernel: the QP lookup in
/// `hfi1_kdeth_expected_rcv()` / `hfi1_kdeth_eager_rcv()`.
pub fn verbs_qp_of(body: &[u8]) -> Option<u32> {
    match body.get(VERBS_QP_OFFSET..HEADER_LEN)? {
        &[a, b, c, d] => Some(u32::from_be_bytes([a, b, c, d]) & QPN_MASK),
        _ => None,
    }
}

/// The `tid_flow_qp` word of READ_REQ, WRITE_RESP and ACK: the sender's
/// KDETH QPN with the hardware flow index in bits 11..=15 and the receive
/// context in the low bits, where the peer sends the flow's KDETH packets.
/// Kernel: `qpriv->tid_rdma.local.qp | (flow->idx & TID_RDMA_DESTQP_FLOW_MASK)
/// << TID_RDMA_DESTQP_FLOW_SHIFT | qpriv->rcd->ctxt`.
pub const fn tid_flow_qp(local_qp: u32, flow: FlowIndex, ctxt: u8) -> u32 {
    local_qp | (flow.get() as u32 & DESTQP_FLOW_MASK) << DESTQP_FLOW_SHIFT | ctxt as u32
}

/// The BTH fields a TID RDMA builder decides; the rest (P_Key, FECN/BECN,
/// pad count, SE, MigReq) are the RC layer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BthFields {
    /// Opcode (0xE0..=0xE7).
    pub opcode: u8,
    /// Destination QP (24 bits): a KDETH QPN, possibly with a flow index
    /// in bits 11..=15.
    pub dest_qp: u32,
    /// PSN: an IB PSN or a flow PSN, 31 bits.
    pub psn: Psn,
    /// AckReq.
    pub ack_req: bool,
}

impl BthFields {
    /// A BTH with these fields and `pkey`, everything else zero (pad count
    /// and ICRC are filled by [`super::frame::emit`]).
    ///
    /// The destination QP is masked to 24 bits. The driver is not: for
    /// WRITE_DATA it assigns the whole `tid_flow_qp` word of the peer's
    /// WRITE_RESP to `bth[1]`, so a high byte the peer set would land in
    /// FECN, BECN and the reserved bits. A Linux peer's high byte is zero
    /// (its KDETH QPN is 24 bits), so the two agree on every packet a
    /// Linux pair exchanges; the test `bth_fields_mask_the_qp` pins the
    /// masking. Kernel: `*bth1 = flow->tid_qpn` in
    /// `hfi1_build_tid_rdma_packet()`.
    pub const fn to_repr(&self, pkey: u16) -> bth::Repr {
        bth::Repr {
            opcode: self.opcode,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey,
            fecn: false,
            becn: false,
            dest_qp: self.dest_qp & QPN_MASK,
            ack_req: self.ack_req,
            psn: self.psn,
        }
    }
}

/// A header as a kernel builder fills it: the BTH fields and the header
/// after the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Built<R> {
    /// What goes in the BTH.
    pub bth: BthFields,
    /// The header after the BTH.
    pub header: R,
}

/// The accessors every WRITE-side view shares. The module must define a
/// private `Header` with fields `kdeth: kdeth::Header`, `reserved: [U32;
/// N]` and `verbs_qp: U32`, and `HEADER_LEN`; the view itself comes from
/// `fixed_header_view!`.
macro_rules! tid_header_common {
    () => {
        impl<T: AsRef<[u8]>> Packet<T> {
            /// The KDETH.
            pub fn kdeth(&self) -> $crate::wire::kdeth::Repr {
                $crate::wire::kdeth::Repr::from_header(&self.header().kdeth)
            }

            /// True if every reserved word is zero (see the module doc of
            /// [`crate::wire::tid_header`]: parse does not require it).
            pub fn reserved_is_zero(&self) -> bool {
                self.header().reserved.iter().all(|w| w.get() == 0)
            }

            /// `verbs_qp` as received (all 32 bits).
            pub fn verbs_qp(&self) -> u32 {
                self.header().verbs_qp.get()
            }

            /// What follows the header.
            pub fn payload(&self) -> &[u8] {
                self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            fn header_mut(&mut self) -> Option<&mut Header> {
                $crate::wire::view_mut(self.buffer.as_mut())
            }

            /// Sets the KDETH.
            pub fn set_kdeth(&mut self, k: &$crate::wire::kdeth::Repr) {
                if let Some(h) = self.header_mut() {
                    k.to_header(&mut h.kdeth);
                }
            }

            /// Zeroes the reserved words.
            pub fn clear_reserved(&mut self) {
                if let Some(h) = self.header_mut() {
                    for w in &mut h.reserved {
                        w.set(0);
                    }
                }
            }

            /// Sets `verbs_qp`.
            pub fn set_verbs_qp(&mut self, v: u32) {
                if let Some(h) = self.header_mut() {
                    h.verbs_qp.set(v);
                }
            }

            /// What follows the header, writable.
            pub fn payload_mut(&mut self) -> &mut [u8] {
                self.buffer
                    .as_mut()
                    .get_mut(HEADER_LEN..)
                    .unwrap_or(&mut [])
            }
        }
    };
}
pub(crate) use tid_header_common;

/// The AETH accessors of a view whose `Header` has `aeth: aeth::Header`
/// (WRITE_RESP and ACK).
macro_rules! aeth_field {
    () => {
        impl<T: AsRef<[u8]>> Packet<T> {
            /// The AETH.
            pub fn aeth(&self) -> $crate::wire::aeth::Repr {
                $crate::wire::aeth::Repr::from_header(&self.header().aeth)
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            /// Sets the AETH; fails if the MSN is wider than 24 bits.
            pub fn set_aeth(&mut self, a: &$crate::wire::aeth::Repr) -> $crate::wire::Result<()> {
                let h = self.header_mut().ok_or($crate::wire::Error::Truncated)?;
                a.to_header(&mut h.aeth)
            }
        }
    };
}
pub(crate) use aeth_field;

/// The `tid_flow_psn` and `tid_flow_qp` accessors of a view whose `Header`
/// has both as `U32` (WRITE_RESP and ACK).
macro_rules! tid_flow_fields {
    () => {
        impl<T: AsRef<[u8]>> Packet<T> {
            /// `tid_flow_psn` as received (all 32 bits).
            pub fn tid_flow_psn_raw(&self) -> u32 {
                self.header().tid_flow_psn.get()
            }

            /// `tid_flow_psn` masked to a flow PSN (what the driver uses).
            pub fn tid_flow_psn(&self) -> hfi1_hal::FlowPsn {
                hfi1_hal::FlowPsn::from_raw(self.tid_flow_psn_raw())
            }

            /// `tid_flow_qp`: the responder's KDETH QPN | flow << 11 | ctxt.
            pub fn tid_flow_qp(&self) -> u32 {
                self.header().tid_flow_qp.get()
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            /// Sets `tid_flow_psn`.
            pub fn set_tid_flow_psn(&mut self, v: hfi1_hal::FlowPsn) {
                if let Some(h) = self.header_mut() {
                    h.tid_flow_psn.set(v.raw());
                }
            }

            /// Sets `tid_flow_qp`.
            pub fn set_tid_flow_qp(&mut self, v: u32) {
                if let Some(h) = self.header_mut() {
                    h.tid_flow_qp.set(v);
                }
            }
        }
    };
}
pub(crate) use tid_flow_fields;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_qp_is_word_eight() {
        let mut body = [0u8; 40];
        body[32..36].copy_from_slice(&[0xAB, 0x12, 0x34, 0x56]);
        assert_eq!(verbs_qp_of(&body), Some(0x12_3456));
        assert_eq!(verbs_qp_of(&body[..36]), Some(0x12_3456));
        assert_eq!(verbs_qp_of(&body[..35]), None);
    }

    #[test]
    fn flow_qp_packs_flow_and_context() {
        let f = FlowIndex::new(0x1F).unwrap();
        assert_eq!(tid_flow_qp(0x80_0005, f, 5), 0x80_F805);
        assert_eq!(
            tid_flow_qp(0x80_0000, FlowIndex::new(2).unwrap(), 9),
            0x80_1009
        );
    }

    #[test]
    fn tid_opcodes() {
        assert!((0xE0..=0xE7).all(is_tid_opcode));
        assert!(!is_tid_opcode(0xDF) && !is_tid_opcode(0xE8) && !is_tid_opcode(0x11));
    }

    /// A `tid_flow_qp` with a high byte set (not what a Linux peer
    /// sends) never reaches FECN/BECN or the reserved BTH bits.
    #[test]
    fn bth_fields_mask_the_qp() {
        let b = BthFields {
            opcode: OP_TID_RDMA_ACK,
            dest_qp: 0xFF80_0803,
            psn: Psn::new(0x1234),
            ack_req: true,
        }
        .to_repr(0x8001);
        assert_eq!((b.opcode, b.dest_qp, b.pkey), (0xE7, 0x80_0803, 0x8001));
        assert!(b.ack_req && !b.fecn && !b.becn && !b.solicited);
        let mut out = [0u8; bth::HEADER_LEN];
        b.emit(&mut bth::Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out[4..8], [0x00, 0x80, 0x08, 0x03]);
    }
}
