// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The READ_REQ the requester sends for one segment: [`ReadReq::build`]
//! fills the header from the segment and the connection, and
//! [`ReadReq::write_packet`] frames the whole packet. The header's bytes
//! are [`crate::wire::read_req`]'s; what the responder checks of it is
//! [`crate::admission`]. Kernel: `hfi1_build_tid_rdma_read_packet()`.

use hfi1_hal::consts::OP_TID_RDMA_READ_REQ;
use hfi1_hal::{FlowIndex, FlowPsn, Generation, Kdeth0, Kdeth1, Psn, TidEntry};

use crate::packet::{BthOut, PacketError, Path, frame};
use crate::wire::{self, kdeth, read_req, reth, tid_header};

/// What the requester's READ_REQ for one segment is built from.
#[derive(Debug, Clone, Copy)]
pub struct ReadReqFlow<'a> {
    /// The segment's TID entries from the cursor's entry on (what the
    /// responder has still to fill).
    pub entries: &'a [TidEntry],
    /// The flow's generation.
    pub generation: Generation,
    /// First flow sequence of the segment.
    pub spsn: u32,
    /// Packets of the segment already received (the cursor after a
    /// restart, 0 otherwise).
    pub pkt: u8,
    /// Bytes of the segment already received.
    pub sent: u32,
    /// IB PSN of the segment's first packet.
    pub ib_spsn: Psn,
    /// The hardware flow the segment uses.
    pub flow: FlowIndex,
    /// Local KDETH QPN (prefix << 16 | ctxt), the local OPFN `qp`.
    pub local_qp: u32,
    /// Local receive context.
    pub ctxt: u8,
    /// The peer's KDETH QPN (its OPFN `qp`): the BTH destination.
    pub remote_qp: u32,
    /// The peer's J_KEY (OPFN).
    pub remote_jkey: u16,
    /// The peer's verbs QP number.
    pub remote_verbs_qp: u32,
    /// The work request's remote address (start of the whole READ).
    pub remote_addr: u64,
    /// The work request's remote key.
    pub rkey: u32,
    /// Index of this segment in the request.
    pub cur_seg: u32,
    /// Segment length of the request (`seg_len`).
    pub seg_len: u32,
    /// Bytes this READ_REQ asks for.
    pub len: u32,
}

/// A built READ_REQ: BTH fields, the header after the BTH, and the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadReq<'a> {
    /// BTH destination QP: the peer's KDETH QPN (24 bits).
    pub bth_dest_qp: u32,
    /// BTH PSN: the IB PSN of the segment's next packet; AckReq is set.
    pub bth_psn: Psn,
    /// The header after the BTH.
    pub header: read_req::Repr,
    /// The payload: TID entries.
    pub entries: &'a [TidEntry],
}

impl ReadReq<'_> {
    /// Bytes after the BTH: header plus payload.
    pub const fn len(&self) -> usize {
        read_req::HEADER_LEN + wire::tid_entries::payload_len(self.entries.len())
    }

    /// Never empty: the header is always there.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the header and the TID entries (the bytes after the BTH) and
    /// returns how many were written.
    ///
    /// # Errors
    ///
    /// `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, wire::Error> {
        let need = self.len();
        let buf = buf.get_mut(..need).ok_or(wire::Error::Truncated)?;
        let mut p = read_req::Packet::new_unchecked(buf);
        self.header.emit(&mut p)?;
        wire::tid_entries::emit(self.entries, p.payload_mut())?;
        Ok(need)
    }

    /// Kernel: the frame `hfi1_make_rc_req()` puts around
    /// `hfi1_build_tid_rdma_read_packet()`.
    ///
    /// Writes the whole packet (LRH, BTH with AckReq, this READ_REQ, ICRC)
    /// into `buf` and returns its length.
    ///
    /// # Errors
    ///
    /// [`PacketError::NoRoom`] if `buf` is too short.
    pub fn write_packet(&self, buf: &mut [u8], path: Path) -> Result<usize, PacketError> {
        let b = BthOut {
            opcode: OP_TID_RDMA_READ_REQ,
            dest_qp: self.bth_dest_qp,
            ack_req: true,
            psn: self.bth_psn,
        };
        frame(buf, path, b, self.len(), |body| {
            self.emit(body).map_err(|_| PacketError::NoRoom)?;
            Ok(())
        })
    }
}

impl<'a> ReadReq<'a> {
    /// Kernel: `hfi1_build_tid_rdma_read_packet()` (the header part; the
    /// request bookkeeping it also does belongs to the requester).
    ///
    /// The READ_REQ of one segment.
    pub fn build(f: &ReadReqFlow<'a>) -> Self {
        let vaddr = f
            .remote_addr
            .wrapping_add(u64::from(f.cur_seg).wrapping_mul(u64::from(f.seg_len)))
            .wrapping_add(u64::from(f.sent));
        ReadReq {
            bth_dest_qp: f.remote_qp & 0x00FF_FFFF,
            bth_psn: f.ib_spsn.add(u32::from(f.pkt)),
            header: read_req::Repr {
                kdeth: kdeth::Repr {
                    kdeth0: Kdeth0::from_raw(Kdeth0::KVER << 30),
                    kdeth1: Kdeth1::with_jkey(f.remote_jkey),
                },
                reth: reth::Repr {
                    vaddr,
                    rkey: f.rkey,
                    length: f.len,
                },
                flow_psn: FlowPsn::new(f.generation, f.spsn.wrapping_add(u32::from(f.pkt))),
                tid_flow_qp: tid_header::tid_flow_qp(f.local_qp, f.flow, f.ctxt),
                verbs_qp: f.remote_verbs_qp,
            },
            entries: f.entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfi1_hal::TidCtrl;

    #[test]
    fn read_req_fields() {
        let e = [TidEntry::new(0, TidCtrl::Pair, 64).unwrap()];
        let r = ReadReq::build(&ReadReqFlow {
            entries: &e,
            generation: Generation::masked(3),
            spsn: 5,
            pkt: 0,
            sent: 0,
            ib_spsn: Psn::new(0x20),
            flow: FlowIndex::new(3).unwrap(),
            local_qp: 0x80_0003,
            ctxt: 3,
            remote_qp: 0x80_0002,
            remote_jkey: 32,
            remote_verbs_qp: 0x11,
            remote_addr: 0x1_0000,
            rkey: 0x55,
            cur_seg: 1,
            seg_len: 256 * 1024,
            len: 256 * 1024,
        });
        assert_eq!(r.bth_dest_qp, 0x80_0002);
        assert_eq!(r.bth_psn, Psn::new(0x20));
        assert_eq!(r.header.tid_flow_qp, 0x80_1803);
        assert_eq!(r.header.flow_psn.raw(), 0x1805);
        assert_eq!(r.header.reth.vaddr, 0x1_0000 + 256 * 1024);
        assert_eq!(r.header.kdeth.kdeth0.kver(), 1);
        let mut buf = [0u8; 64];
        assert_eq!(r.emit(&mut buf), Ok(40));
        assert_eq!(&buf[36..40], &[0x40, 0x00, 0x30, 0x00]);
        assert!(r.emit(&mut buf[..39]).is_err());
    }
}
