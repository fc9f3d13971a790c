// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Reading a fuzz input: bytes that yield zeros once they run out, the
//! connection parameters its first bytes pick, packets mutated at the byte
//! level, and one-line packet descriptions for traces.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use hfi1_hal::consts::{
    OP_TID_RDMA_ACK, OP_TID_RDMA_RESYNC, OP_TID_RDMA_WRITE_DATA, OP_TID_RDMA_WRITE_DATA_LAST,
    OP_TID_RDMA_WRITE_REQ, OP_TID_RDMA_WRITE_RESP,
};
use hfi1_hal::{FlowPsn, Psn};
use tid_read_proto::packet::{self, Parsed};
use tid_read_proto::wire::{frame, lrh};

use crate::world::Setup;

/// A reader of fuzz bytes that yields zeros once they run out.
pub struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    /// Reads `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self(data)
    }

    /// True once every byte was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    /// The next two bytes, little endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// A value below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else if n <= 256 {
            usize::from(self.u8()) % n
        } else {
            usize::from(self.u16()) % n
        }
    }

    /// Up to `n` bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}

/// The two nodes an input picks with its first two bytes: 1 or 2 QP
/// pairs, 1..=4 TID groups, either MTU, the responder's segment size
/// (its OPFN `max_len`: 4, 8, 16 or 256 KiB) and `max_read` (1..=6),
/// `max_rd_atomic` (1..=16), a first PSN sometimes just before the wrap,
/// and the seed of the flow generations. READs of 8 KiB and more become
/// TID READs ([`FUZZ_TID_READ_MIN`]), so an input of a few pages runs
/// plain READs and TID READs; the retry budget is the kernel's largest.
pub fn read_setup(inp: &mut Input<'_>) -> Setup {
    let a = inp.u8();
    let b = inp.u8();
    Setup {
        qps: 1 + usize::from(a & 1),
        groups: 1 + usize::from((a >> 1) & 3),
        pmtu: if a & 8 != 0 { 8192 } else { 4096 },
        seg_len: [4096, 8192, 16384, 256 * 1024][usize::from((a >> 4) & 3)],
        max_read: 1 + b % 6,
        max_rd_atomic: 1 + u32::from(b >> 3) % 16,
        first_psn: Psn::new(if a & 0x40 != 0 { 0x7FFF_FFF8 } else { 0x10 }),
        seed: u64::from(a >> 7) | u64::from(b) << 1,
        tid_read_min: FUZZ_TID_READ_MIN,
        retry_cnt: 7,
        region_len: FUZZ_REGION_LEN,
        ..Setup::default()
    }
}

/// Bytes of each responder QP's READ region in the fuzz world: room for
/// every READ a QP posts over an input (checked at compile time in the
/// fuzz module), and small enough that a forged READ_REQ or RDMA READ
/// whose length was mutated into gigabytes falls outside it and is NAKed
/// at once, as the kernel's rkey check does for a region of this size.
/// With a 4 GiB region such a request was served packet by packet and
/// one input ran for seconds.
pub const FUZZ_REGION_LEN: u64 = 1 << 20;

/// The smallest READ the fuzz world makes a TID READ: two pages (the
/// kernel's 256 KiB would need 64 packets per segment, too many for the
/// fuzzer to schedule around).
pub const FUZZ_TID_READ_MIN: u32 = 8192;

/// A one-line description of a packet, for traces.
pub fn describe(bytes: &[u8]) -> String {
    if let Some(s) = describe_write(bytes) {
        return s;
    }
    match packet::parse(bytes) {
        Ok((_, Parsed::ReadReq { bth, hdr, .. })) => format!(
            "READ_REQ psn {:#x} len {} vaddr {:#x} flow_psn g{}:{} tid_flow_qp {:#x} verbs_qp {:#x}",
            bth.psn.get(),
            hdr.reth.length,
            hdr.reth.vaddr,
            hdr.flow_psn.generation().get(),
            hdr.flow_psn.seq(),
            hdr.tid_flow_qp,
            hdr.verbs_qp
        ),
        Ok((_, Parsed::ReadResp { bth, hdr, payload })) => format!(
            "READ_RESP flow_psn g{}:{} verbs_psn {:#x} kdeth0 {:#x} len {}",
            FlowPsn::from_raw(bth.psn.get()).generation().get(),
            FlowPsn::from_raw(bth.psn.get()).seq(),
            hdr.verbs_psn.get(),
            hdr.kdeth.kdeth0.raw(),
            payload.len()
        ),
        Ok((_, Parsed::Ack { bth, aeth })) => format!(
            "ACK psn {:#x} syndrome {:#x} msn {}",
            bth.psn.get(),
            aeth.syndrome,
            aeth.msn
        ),
        Ok((_, Parsed::ReadRequest { bth, reth })) => format!(
            "RDMA_READ_REQUEST psn {:#x} len {} vaddr {:#x} qp {:#x}",
            bth.psn.get(),
            reth.length,
            reth.vaddr,
            bth.dest_qp
        ),
        Ok((
            _,
            Parsed::ReadResponse {
                bth, kind, payload, ..
            },
        )) => format!(
            "READ_RESPONSE_{kind:?} psn {:#x} len {} qp {:#x}",
            bth.psn.get(),
            payload.len(),
            bth.dest_qp
        ),
        Err(e) => format!("unparsable ({e})"),
    }
}

/// A WRITE-family packet's opcode name and BTH PSN (a flow PSN as
/// generation:sequence), or `None` for any other packet.
fn describe_write(bytes: &[u8]) -> Option<String> {
    let f = frame::parse(bytes).ok()?;
    let name = match f.bth.opcode {
        OP_TID_RDMA_WRITE_REQ => "WRITE_REQ",
        OP_TID_RDMA_WRITE_RESP => "WRITE_RESP",
        OP_TID_RDMA_WRITE_DATA => "WRITE_DATA",
        OP_TID_RDMA_WRITE_DATA_LAST => "WRITE_DATA_LAST",
        OP_TID_RDMA_RESYNC => "RESYNC",
        OP_TID_RDMA_ACK => "TID_ACK",
        _ => return None,
    };
    let psn = f.bth.psn.get();
    let flow = FlowPsn::from_raw(psn);
    Some(format!(
        "{name} psn {psn:#x} (g{}:{}) qp {:#x} len {}",
        flow.generation().get(),
        flow.seq(),
        f.bth.dest_qp,
        bytes.len()
    ))
}

/// Picks a queue index: mostly the head (in order), else any.
pub fn pick(inp: &mut Input<'_>, len: usize) -> Option<usize> {
    if len == 0 {
        return None;
    }
    let b = inp.u8();
    Some(if b < 160 { 0 } else { usize::from(b) % len })
}

/// A packet from `hist` with bytes changed; usually the ICRC is fixed up
/// so the change reaches the handlers.
pub fn mutated(hist: &VecDeque<Vec<u8>>, inp: &mut Input<'_>) -> Option<Vec<u8>> {
    let k = inp.below(hist.len());
    let mut b = hist.get(k)?.clone();
    let n = 1 + inp.below(4);
    for _ in 0..n {
        let off = if inp.u8() < 220 {
            inp.below(64.min(b.len()))
        } else {
            inp.below(b.len())
        };
        let x = inp.u8();
        if let Some(v) = b.get_mut(off) {
            *v ^= x;
        }
    }
    let how = inp.u8();
    if how & 0x10 != 0 {
        let cut = inp.below(b.len() + 1);
        b.truncate(cut);
    }
    if how & 3 != 0 {
        lrh::Packet::new_unchecked(&mut b[..]).fill_icrc();
    }
    Some(b)
}
