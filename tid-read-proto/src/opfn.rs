// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! OPFN: the TID RDMA parameter word and its negotiation (SPEC §3, §5).
//!
//! Two QPs exchange one 64-bit word each through OPFN (an atomic request
//! with a special key, handled by `opfn.c` in the driver). The word packs
//! [`TidParams`]:
//!
//! ```text
//! 63..56 ctxt (qp & 0xFF)      55..48 KDETH prefix ((qp >> 16) & 0xFF)
//! 47..37 max_len / 4096 - 1    36..32 timeout      31..26 reserved
//! 25     urg                   24..22 version      21..16 jkey
//! 15..10 max_read              9..4   max_write    3..0   capability code
//! ```
//!
//! Quirks kept from the driver (the vectors check each of them): the version
//! is never encoded and never decoded; bits 8..15 and 24..31 of `qp` are
//! lost; `max_len` is taken modulo 8 MiB in 4 KiB units (the `- 1` wraps in
//! 32-bit arithmetic, so a `max_len` below 4 KiB comes back as 8 MiB and
//! 8 MiB + 4 KiB comes back as 4 KiB); every other field is masked to its
//! width; the capability code and reserved bits are ignored on decode.
//!
//! `max_read` and `max_write` bound the segments of one request in flight:
//! a TID READ's requester uses the peer's `max_read`
//! ([`crate::qualify::TidReadPlan::n_flows`]); for a TID WRITE the
//! responder enforces its own `max_write` and the requester records the
//! peer's (see [`crate::qualify_write`]).

use hfi1_hal::consts::{
    KDETH_QP_PREFIX, KDETH_QP_PREFIX_SHIFT, MAX_READ_SEGS_PER_REQ, MAX_SEGMENT_SIZE,
    MAX_WRITE_SEGS_PER_REQ, PAGE_SHIFT,
};

const CTXT_SHIFT: u32 = 56;
const KDETH_SHIFT: u32 = 48;
const MAX_LEN_SHIFT: u32 = 37;
const MAX_LEN_MASK: u64 = 0x7FF;
const TIMEOUT_SHIFT: u32 = 32;
const TIMEOUT_MASK: u64 = 0x1F;
const URG_SHIFT: u32 = 25;
const JKEY_SHIFT: u32 = 16;
const SIX_BITS: u64 = 0x3F;
const MAX_READ_SHIFT: u32 = 10;
const MAX_WRITE_SHIFT: u32 = 4;
/// The capability-code nibble, cleared before a received word is used.
const CAPCODE_MASK: u64 = 0xF;

/// The TID RDMA parameters of one side of a connection.
/// Kernel: `struct tid_rdma_params` (without `version`, which the driver
/// neither sends nor reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TidParams {
    /// KDETH QPN of the side: prefix << 16 | receive context.
    pub qp: u32,
    /// Largest segment in bytes.
    pub max_len: u32,
    /// J_KEY of the receive context.
    pub jkey: u16,
    /// Segments of one READ in flight.
    pub max_read: u8,
    /// Segments of one WRITE in flight.
    pub max_write: u8,
    /// The QP's local ACK timeout exponent.
    pub timeout: u8,
    /// Urgent-interrupt capable (only bit 0 travels).
    pub urg: u8,
}

impl TidParams {
    /// Packs the parameters into the OPFN word.
    /// Kernel: `tid_rdma_opfn_encode()`.
    pub const fn encode(&self) -> u64 {
        let max_len_units = ((self.max_len >> PAGE_SHIFT).wrapping_sub(1)) as u64;
        ((self.qp as u64 & 0xFF) << CTXT_SHIFT)
            | (((self.qp as u64 >> 16) & 0xFF) << KDETH_SHIFT)
            | ((max_len_units & MAX_LEN_MASK) << MAX_LEN_SHIFT)
            | ((self.timeout as u64 & TIMEOUT_MASK) << TIMEOUT_SHIFT)
            | ((self.urg as u64 & 1) << URG_SHIFT)
            | ((self.jkey as u64 & SIX_BITS) << JKEY_SHIFT)
            | ((self.max_read as u64 & SIX_BITS) << MAX_READ_SHIFT)
            | ((self.max_write as u64 & SIX_BITS) << MAX_WRITE_SHIFT)
    }

    /// Unpacks an OPFN word. Every word decodes; `max_len` is 4 KiB..=8 MiB.
    /// Kernel: `tid_rdma_opfn_decode()`.
    pub const fn decode(word: u64) -> Self {
        let units = ((word >> MAX_LEN_SHIFT) & MAX_LEN_MASK) as u32;
        Self {
            qp: ((((word >> KDETH_SHIFT) & 0xFF) << 16) | ((word >> CTXT_SHIFT) & 0xFF)) as u32,
            max_len: (units + 1) << PAGE_SHIFT,
            jkey: ((word >> JKEY_SHIFT) & SIX_BITS) as u16,
            max_read: ((word >> MAX_READ_SHIFT) & SIX_BITS) as u8,
            max_write: ((word >> MAX_WRITE_SHIFT) & SIX_BITS) as u8,
            timeout: ((word >> TIMEOUT_SHIFT) & TIMEOUT_MASK) as u8,
            urg: ((word >> URG_SHIFT) & 1) as u8,
        }
    }

    /// The local side's parameters for a QP whose receive context is
    /// `ctxt`: KDETH QPN `0x80 << 16 | ctxt`, 256 KiB segments, 6 READ and
    /// 4 WRITE segments in flight.
    /// Kernel: `tid_rdma_opfn_init()` (with the default `kdeth_qp`).
    pub const fn local(ctxt: u8, jkey: u16, timeout: u8, urg: bool) -> Self {
        Self {
            qp: (KDETH_QP_PREFIX << KDETH_QP_PREFIX_SHIFT) | ctxt as u32,
            max_len: MAX_SEGMENT_SIZE,
            jkey,
            max_read: MAX_READ_SEGS_PER_REQ as u8,
            max_write: MAX_WRITE_SEGS_PER_REQ as u8,
            timeout,
            urg: urg as u8,
        }
    }

    /// How long the requester waits for a TID response before it gives up,
    /// in microseconds: `((4096 << timeout) / 1000 << 3) * 7`, with
    /// `timeout` as decoded (0..=31).
    /// Kernel: the `tid_timer_timeout_jiffies` computation in
    /// `tid_rdma_conn_reply()`, before the conversion to jiffies.
    pub const fn tid_timer_timeout_us(&self) -> u64 {
        let t = (self.timeout as u64) & TIMEOUT_MASK;
        (((4096u64 << t) / 1000) << 3) * 7
    }
}

const _: () = assert!(MAX_READ_SEGS_PER_REQ <= 0x3F && MAX_WRITE_SEGS_PER_REQ <= 0x3F);

/// OPFN capability code of TID RDMA, carried in the word's low nibble.
/// Kernel: `STL_VERBS_EXTD_TID_RDMA`.
pub const CAPCODE_TID_RDMA: u64 = 1;

/// The word as OPFN carries it: the parameter word with the capability
/// code in the low nibble. Kernel: `(data & ~0xf) | capcode` in
/// `opfn_conn_request()` and `opfn_conn_response()`.
pub const fn with_capcode(word: u64) -> u64 {
    (word & !CAPCODE_MASK) | CAPCODE_TID_RDMA
}

/// A QP's local parameters as the driver sets them when the QP is
/// modified: the kernel defaults when the path MTU is 4 KiB or 8 KiB, all
/// zero otherwise (such a QP never starts a negotiation, but as a responder
/// it still answers with the encoding of the zeros, whose `max_len` field
/// reads back as 8 MiB). Kernel: `opfn_qp_init()`.
pub const fn local_for_mtu(pmtu: u32, ctxt: u8, jkey: u16, timeout: u8, urg: bool) -> TidParams {
    if pmtu == 4096 || pmtu == 8192 {
        TidParams::local(ctxt, jkey, timeout, urg)
    } else {
        TidParams {
            qp: 0,
            max_len: 0,
            jkey: 0,
            max_read: 0,
            max_write: 0,
            timeout: 0,
            urg: 0,
        }
    }
}

/// Packets in one full segment of the peer's `max_len`: `max_len >>
/// log2(pmtu)`, truncated to 16 bits as the driver stores it.
/// Kernel: `priv->pkts_ps = rvt_div_mtu(qp, remote->max_len)`.
pub const fn pkts_per_segment(max_len: u32, pmtu: u32) -> u16 {
    // The driver stores the packet count in a u16.
    #[allow(clippy::cast_possible_truncation)]
    let p = crate::qualify::div_mtu(max_len, pmtu) as u16;
    p
}

/// How far a TID READ_REQ's retry timer is shifted beyond the QP's
/// timeout: `ilog2(pkts_per_segment - 1) + 1`, computed in 32 bits as the
/// driver does (the index of the highest set bit of `n - 1`, plus one; 0
/// for one-packet segments). Kernel: `priv->timeout_shift`.
pub const fn timeout_shift(max_len: u32, pmtu: u32) -> u8 {
    let below = (pkts_per_segment(max_len, pmtu) as u32).wrapping_sub(1);
    // At most 32.
    #[allow(clippy::cast_possible_truncation)]
    let s = (u32::BITS - below.leading_zeros()) as u8;
    s
}

/// What the local side keeps about the peer once negotiation succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// The peer's decoded parameters.
    pub params: TidParams,
    /// Packets in one full segment: `max_len >> log2(pmtu)`, truncated to
    /// 16 bits.
    /// Kernel: `priv->pkts_ps`.
    pub pkts_per_segment: u16,
    /// Bits of a PSN that number packets inside a segment:
    /// `ilog2(pkts_per_segment - 1) + 1` (0 for one-packet segments).
    /// Kernel: `priv->timeout_shift`.
    pub timeout_shift: u8,
}

/// One QP's side of the OPFN exchange: its own parameters and, when
/// negotiated, the peer's. TID RDMA is used only while [`Self::remote`] is
/// `Some`.
///
/// # Locking
///
/// The driver changes this under the QP's `opfn.lock`; here it is a plain
/// value that the caller keeps wherever it keeps the QP's OPFN state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiation {
    local: TidParams,
    remote: Option<Remote>,
}

impl Negotiation {
    /// A QP that has not negotiated yet (TID RDMA off).
    pub const fn new(local: TidParams) -> Self {
        Self {
            local,
            remote: None,
        }
    }

    /// The local parameters.
    pub const fn local(&self) -> &TidParams {
        &self.local
    }

    /// The peer's parameters, if negotiated.
    pub const fn remote(&self) -> Option<&Remote> {
        self.remote.as_ref()
    }

    /// The word the requester sends. Kernel: `tid_rdma_conn_req()`.
    pub const fn request(&self) -> u64 {
        self.local.encode()
    }

    /// Takes the peer's word (the reply at the requester, or the request at
    /// the responder). The capability nibble is cleared first; a zero word,
    /// or TID RDMA disabled locally (`tid_rdma_enabled` false, the driver's
    /// `HFI1_CAP_IS_KSET(TID_RDMA)`), turns TID RDMA off. `pmtu` is the QP's
    /// path MTU in bytes; an MTU of 0 (no path yet) also keeps TID RDMA
    /// off.
    ///
    /// Returns true when negotiation is finished either way. The driver's
    /// other `false` case, a failed allocation, cannot happen here.
    /// Kernel: `tid_rdma_conn_reply()`.
    pub fn reply(&mut self, word: u64, tid_rdma_enabled: bool, pmtu: u32) -> bool {
        let word = word & !CAPCODE_MASK;
        if word == 0 || !tid_rdma_enabled || pmtu == 0 {
            self.remote = None;
            return true;
        }
        let params = TidParams::decode(word);
        self.remote = Some(Remote {
            params,
            pkts_per_segment: pkts_per_segment(params.max_len, pmtu),
            timeout_shift: timeout_shift(params.max_len, pmtu),
        });
        true
    }

    /// The responder's step: take the requester's word, then answer with
    /// the local word. The driver answers 0 only when it could not allocate
    /// the remote record (then TID RDMA turns off at the requester too);
    /// that cannot happen here, so the answer is always the local word, even
    /// when [`Self::reply`] turned TID RDMA off locally (a zero word or
    /// TID RDMA disabled), exactly as the driver does.
    /// Kernel: `tid_rdma_conn_resp()`.
    pub fn respond(&mut self, word: u64, tid_rdma_enabled: bool, pmtu: u32) -> u64 {
        // `reply` reports failure only for the driver's allocation failure.
        let _finished = self.reply(word, tid_rdma_enabled, pmtu);
        self.request()
    }

    /// Forgets the peer (negotiation failed or the QP is reset).
    /// Kernel: `tid_rdma_conn_error()`.
    pub fn error(&mut self) {
        self.remote = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_defaults_round_trip() {
        let p = TidParams::local(3, 32, 14, true);
        assert_eq!(p.qp, 0x80_0003);
        let w = p.encode();
        assert_eq!(w >> 56, 3);
        assert_eq!((w >> 48) & 0xFF, 0x80);
        assert_eq!((w >> 37) & 0x7FF, 63);
        assert_eq!(TidParams::decode(w), p);
    }

    #[test]
    fn quirks() {
        let mut p = TidParams::local(0, 0, 0, false);
        p.max_len = 0;
        assert_eq!(TidParams::decode(p.encode()).max_len, 8 << 20);
        p.max_len = (8 << 20) + 4096;
        assert_eq!(TidParams::decode(p.encode()).max_len, 4096);
        p.qp = 0xFFFF_FFFF;
        assert_eq!(TidParams::decode(p.encode()).qp, 0xFF_00FF);
        assert_eq!(TidParams::decode(0).max_len, 4096);
    }

    #[test]
    fn negotiation() {
        let a_params = TidParams::local(1, 32, 14, false);
        let b_params = TidParams::local(2, 32, 14, true);
        let mut a = Negotiation::new(a_params);
        let mut b = Negotiation::new(b_params);
        let req = a.request();
        let resp = b.respond(req, true, 4096);
        assert_eq!(b.remote().unwrap().params, a_params);
        assert!(a.reply(resp, true, 4096));
        let r = a.remote().unwrap();
        assert_eq!(r.params, b_params);
        assert_eq!(r.pkts_per_segment, 64);
        assert_eq!(r.timeout_shift, 6);
        // Capability nibble is ignored; a zero word turns TID RDMA off.
        assert!(a.reply(resp | 0xF, true, 8192));
        assert_eq!(a.remote().unwrap().timeout_shift, 5);
        assert!(a.reply(0xF, true, 4096));
        assert_eq!(a.remote(), None);
        // Disabled locally: no remote, but the answer is still the local
        // word, as the driver sends it.
        assert_eq!(b.respond(req, false, 4096), b_params.encode());
        assert_eq!(b.remote(), None);
        assert_eq!(b.respond(0, true, 4096), b_params.encode());
        assert_eq!(b.remote(), None);
        // The OPFN wire form carries capability code 1.
        assert_eq!(with_capcode(req) & 0xF, 1);
        assert!(a.reply(with_capcode(resp), true, 4096));
        assert_eq!(a.remote().unwrap().params, b_params);
        // A QP with a 2 KiB MTU keeps zero parameters; their encoding reads
        // back as 8 MiB segments.
        let z = local_for_mtu(2048, 3, 32, 14, true);
        assert_eq!(z, TidParams::default());
        assert_eq!(TidParams::decode(z.encode()).max_len, 8 << 20);
        assert_eq!(local_for_mtu(8192, 3, 32, 14, true).qp, 0x80_0003);
        a.reply(resp, true, 4096);
        a.error();
        assert_eq!(a.remote(), None);
    }

    /// Each side learns the other's `max_write` (bits 4..=9), whatever it
    /// is, in both directions of the exchange; the value is masked to six
    /// bits and never mixed with `max_read` next to it.
    #[test]
    fn max_write_travels_both_ways() {
        let a_params = TidParams {
            max_write: 2,
            max_read: 0x3F,
            ..TidParams::local(1, 32, 14, false)
        };
        let b_params = TidParams {
            max_write: 5,
            max_read: 0,
            ..TidParams::local(2, 32, 14, false)
        };
        assert_eq!((a_params.encode() >> 4) & 0x3F, 2);
        assert_eq!((b_params.encode() >> 4) & 0x3F, 5);
        let mut a = Negotiation::new(a_params);
        let mut b = Negotiation::new(b_params);
        let resp = b.respond(with_capcode(a.request()), true, 4096);
        assert!(a.reply(with_capcode(resp), true, 4096));
        let (ar, br) = (a.remote().unwrap().params, b.remote().unwrap().params);
        assert_eq!((ar.max_write, ar.max_read), (5, 0));
        assert_eq!((br.max_write, br.max_read), (2, 0x3F));
        // Wider values keep their low six bits only.
        let wide = TidParams {
            max_write: 0x45,
            ..a_params
        };
        assert_eq!(TidParams::decode(wide.encode()).max_write, 5);
        assert_eq!(TidParams::decode(wide.encode()).max_read, 0x3F);
        // The kernel default is 4 (SPEC §2).
        assert_eq!(TidParams::local(0, 32, 14, false).max_write, 4);
    }

    #[test]
    fn one_packet_segments_have_no_shift() {
        let mut p = TidParams::local(0, 0, 0, false);
        p.max_len = 4096;
        let mut n = Negotiation::new(p);
        n.reply(p.encode(), true, 4096);
        assert_eq!(n.remote().unwrap().timeout_shift, 0);
        assert_eq!(p.tid_timer_timeout_us(), ((4096 / 1000) << 3) * 7);
    }
}
