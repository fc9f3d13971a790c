// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The TID RDMA RESYNC packet: the WRITE_DATA header layout with no data.
//!
//! ```text
//! KDETH (2 x LE32) | 6 reserved BE32 | verbs_qp BE32
//! ```
//!
//! After a flow generation error the requester tells the responder to move
//! every hardware flow of the QP to a new generation. The packet is
//! addressed by its BTH PSN alone: the last PSN of the generation before
//! the one the requester will use next, `mask_psn((next_gen << 11) - 1)`
//! (sequence 0x7FF, which no data packet ever carries), with AckReq set,
//! sent to the responder's KDETH QPN. The KDETH carries only KVER and the
//! responder's J_KEY. Kernel: `struct tid_rdma_resync`,
//! `hfi1_build_tid_rdma_resync()`, `hfi1_tid_rdma_is_resync_psn()`.
//!
//! The driver fills this header through the field names of the ACK header
//! (`ohdr->u.tid_rdma.ack.kdeth1`, `.verbs_qp`): that works only because
//! both put `verbs_qp` in word 8. The reserved words are never written
//! and are ignored on parse: see [`super::tid_header`].
//!
//! The view and `Repr` are [`super::write_data`]'s: one layout, one parser.

use hfi1_hal::consts::{KDETH_SEQ_MASK, KDETH_SEQ_SHIFT, OP_TID_RDMA_RESYNC};
use hfi1_hal::{Generation, Kdeth0, Kdeth1, Psn};

use super::kdeth;
use super::tid_header::{BthFields, Built};
pub use super::write_data::{HEADER_LEN, Packet, Repr};

/// The PSN just before `generation`'s first one: sequence 0x7FF of the
/// generation before it, masked to 31 bits (so generation 0 gives
/// 0x7FFF_FFFF). The RESYNC carries it for the generation after the
/// flow's, and the responder's ACK of a RESYNC for the QP's new
/// generation. Kernel: `mask_psn((generation << HFI1_KDETH_BTH_SEQ_SHIFT)
/// - 1)` in `hfi1_build_tid_rdma_resync()` and
/// `hfi1_build_tid_rdma_write_ack()`.
pub const fn psn_before(generation: Generation) -> Psn {
    Psn::new((generation.get() << KDETH_SEQ_SHIFT).wrapping_sub(1))
}

/// True if `psn` is a RESYNC PSN (its sequence bits all set).
/// Kernel: `hfi1_tid_rdma_is_resync_psn()`.
pub const fn is_resync_psn(psn: u32) -> bool {
    psn & KDETH_SEQ_MASK == KDETH_SEQ_MASK
}

/// What the requester's RESYNC is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResyncFields {
    /// The responder's KDETH QPN (its OPFN `qp`): the BTH destination.
    pub remote_qp: u32,
    /// The responder's J_KEY (OPFN; the low eight bits travel).
    pub remote_jkey: u16,
    /// The responder's verbs QP number.
    pub remote_verbs_qp: u32,
    /// The generation of the flow of the most recent WRITE_RESP.
    pub flow_generation: Generation,
}

/// Builds the RESYNC; its BTH PSN is [`psn_before`] the generation after
/// the flow's. Kernel: `hfi1_build_tid_rdma_resync()` (the header part; it
/// also records the PSN as `s_resync_psn`, which is the requester's).
pub const fn build(f: &ResyncFields) -> Built<Repr> {
    Built {
        bth: BthFields {
            opcode: OP_TID_RDMA_RESYNC,
            dest_qp: f.remote_qp,
            psn: psn_before(f.flow_generation.next()),
            ack_req: true,
        },
        header: Repr {
            kdeth: kdeth::Repr {
                kdeth0: Kdeth0::from_raw(Kdeth0::KVER << 30),
                kdeth1: Kdeth1::with_jkey(f.remote_jkey),
            },
            verbs_qp: f.remote_verbs_qp,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resync_psn_is_the_end_of_the_previous_generation() {
        assert_eq!(psn_before(Generation::masked(1)), Psn::new(0x7FF));
        assert_eq!(
            psn_before(Generation::masked(0x12)),
            Psn::new(0x11 << 11 | 0x7FF)
        );
        assert_eq!(psn_before(Generation::masked(0)), Psn::new(0x7FFF_FFFF));
        assert!(is_resync_psn(0x7FF) && is_resync_psn(0x7FFF_FFFF));
        assert!(!is_resync_psn(0x800) && !is_resync_psn(0x7FE));
    }

    #[test]
    fn build_and_emit_literal() {
        let b = build(&ResyncFields {
            remote_qp: 0x80_0009,
            remote_jkey: 0x20,
            remote_verbs_qp: 0x00AB_0123,
            flow_generation: Generation::masked(0x3_0000),
        });
        assert_eq!(b.bth.opcode, 0xE6);
        assert_eq!(b.bth.dest_qp, 0x80_0009);
        // Next generation 0x30001: PSN 0x30000 << 11 | 0x7FF.
        assert_eq!(b.bth.psn, Psn::new(0x1800_07FF));
        assert!(b.bth.ack_req);
        let mut out = [0x55u8; HEADER_LEN];
        b.header
            .emit(&mut Packet::new_unchecked(&mut out[..]))
            .unwrap();
        let mut want = [0u8; HEADER_LEN];
        want[..8].copy_from_slice(&[0, 0, 0, 0x40, 0x20, 0, 0, 0]);
        want[32..].copy_from_slice(&[0x00, 0xAB, 0x01, 0x23]);
        assert_eq!(out, want);
        let back = Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap();
        assert_eq!(back, b.header);
    }

    #[test]
    fn generation_next_skips_the_reserved_one() {
        // The flow at 0xFFFFE: the next live generation is 0, so the
        // RESYNC PSN is that of generation 0.
        let b = build(&ResyncFields {
            remote_qp: 0x80_0001,
            remote_jkey: 32,
            remote_verbs_qp: 1,
            flow_generation: Generation::masked(0xF_FFFE),
        });
        assert_eq!(b.bth.psn, Psn::new(0x7FFF_FFFF));
    }
}
