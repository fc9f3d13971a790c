// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The fabric between the two nodes: an ordered link per direction with
//! seeded, reproducible faults.
//!
//! Faults (all off by default): drop by packet kind, duplicate, reorder
//! within a window, and replay of a stale copy of an earlier packet. Every
//! decision draws from the simulator's one [`Rng`], so a run is a function
//! of its seed.
//!
//! Reordering never lets a packet overtake an earlier one of the same
//! flow (the same QP): the fabric delivers each path in order, and a
//! packet of one QP overtakes packets of others. (Within one flow the TID
//! RDMA protocol of Linux 6.1 treats an overtaking packet as a loss: the
//! chip stops placing in sequence, and every swapped stream costs a
//! restart from its retry budget. The fuzz world reorders freely and
//! judges that outcome.) Duplicates and stale replays are copies, not
//! reorders: they arrive after the original.

use std::collections::VecDeque;

use crate::rng::Rng;

/// What a packet is, as far as fault injection cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketKind {
    /// TID RDMA READ_REQ.
    ReadReq,
    /// A READ_RESP that is not the last of its segment.
    ReadRespMiddle,
    /// The last READ_RESP of a segment.
    ReadRespLast,
    /// ACK or NAK.
    Ack,
    /// Anything else.
    Other,
    /// TID RDMA WRITE_REQ.
    WriteReq,
    /// TID RDMA WRITE_RESP.
    WriteResp,
    /// A WRITE_DATA that is not the last of its segment (SH set).
    WriteData,
    /// The last WRITE_DATA of a segment (SH clear), or the WRITE_DATA_LAST.
    WriteDataTail,
    /// TID RDMA RESYNC.
    Resync,
    /// TID RDMA ACK (TID ACK, TID NAK, RESYNC ACK).
    TidAck,
}

/// How many kinds there are.
pub const KINDS: usize = 11;

impl PacketKind {
    /// Every kind, for reports.
    pub const ALL: [PacketKind; KINDS] = [
        PacketKind::ReadReq,
        PacketKind::ReadRespMiddle,
        PacketKind::ReadRespLast,
        PacketKind::Ack,
        PacketKind::Other,
        PacketKind::WriteReq,
        PacketKind::WriteResp,
        PacketKind::WriteData,
        PacketKind::WriteDataTail,
        PacketKind::Resync,
        PacketKind::TidAck,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            PacketKind::ReadReq => "read_req",
            PacketKind::ReadRespMiddle => "read_resp_middle",
            PacketKind::ReadRespLast => "read_resp_last",
            PacketKind::Ack => "ack",
            PacketKind::Other => "other",
            PacketKind::WriteReq => "write_req",
            PacketKind::WriteResp => "write_resp",
            PacketKind::WriteData => "write_data",
            PacketKind::WriteDataTail => "write_data_tail",
            PacketKind::Resync => "resync",
            PacketKind::TidAck => "tid_ack",
        }
    }
}

/// A packet the fabric can carry.
pub trait Packet: Clone {
    /// Its kind.
    fn kind(&self) -> PacketKind;

    /// The flow it belongs to: packets of one flow are delivered in
    /// order.
    fn flow(&self) -> u32;
}

/// Fault probabilities (0..=1) and the reorder window (packets).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    /// Drop probability per kind, indexed like [`PacketKind::ALL`].
    pub drop: [f64; KINDS],
    /// Probability that a packet is delivered twice.
    pub dup: f64,
    /// Reorder window: a delivery picks uniformly among the first `reorder`
    /// packets in flight that are the oldest of their flow (0 or 1: in
    /// order).
    pub reorder: usize,
    /// Probability, per packet sent, that a stale copy of an earlier
    /// packet is injected as well.
    pub stale: f64,
}

impl Faults {
    /// The same drop probability for every kind.
    pub fn drop_all(p: f64) -> [f64; KINDS] {
        [p; KINDS]
    }

    /// True when no fault is configured.
    pub fn is_clean(&self) -> bool {
        self.drop.iter().all(|&p| p <= 0.0)
            && self.dup <= 0.0
            && self.reorder <= 1
            && self.stale <= 0.0
    }
}

/// What the fabric did, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Packets handed to the fabric.
    pub sent: u64,
    /// Packets delivered (including duplicates and stale copies).
    pub delivered: u64,
    /// Packets dropped, by kind (indexed like [`PacketKind::ALL`]).
    pub dropped: [u64; KINDS],
    /// Duplicates injected.
    pub duplicated: u64,
    /// Stale copies injected.
    pub stale_injected: u64,
    /// Deliveries that overtook an earlier packet.
    pub reordered: u64,
}

/// How many earlier packets a link remembers for stale replays.
const HISTORY: usize = 512;

/// Which copy of a packet a delivery is, as the fault injector made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// The packet as sent.
    Sent,
    /// The second delivery of a duplicated packet.
    Duplicate,
    /// A replay of an earlier packet.
    Stale,
}

/// One packet leaving the fabric, with what the fault injector did to it
/// (for the capture).
#[derive(Debug, Clone)]
pub struct Delivery<P> {
    /// The packet.
    pub packet: P,
    /// Which copy it is.
    pub origin: Origin,
    /// Earlier packets in flight it overtook (0: in order).
    pub overtook: usize,
}

/// One direction of the fabric.
#[derive(Debug)]
pub struct Link<P: Packet> {
    in_flight: VecDeque<(P, Origin)>,
    history: VecDeque<P>,
    faults: Faults,
    stats: FabricStats,
}

impl<P: Packet> Link<P> {
    /// An empty link with the given faults.
    pub fn new(faults: Faults) -> Self {
        Self {
            in_flight: VecDeque::new(),
            history: VecDeque::new(),
            faults,
            stats: FabricStats::default(),
        }
    }

    /// Hands a packet to the link; faults may drop, duplicate or add a
    /// stale copy. Returns the packet if the fault injector dropped it.
    pub fn send(&mut self, p: P, rng: &mut Rng) -> Option<P> {
        self.stats.sent += 1;
        let kind = p.kind() as usize;
        if !self.faults.is_clean() {
            if self.faults.stale > 0.0 && !self.history.is_empty() && rng.chance(self.faults.stale)
            {
                let i = rng.below(self.history.len() as u64) as usize;
                if let Some(old) = self.history.get(i).cloned() {
                    self.in_flight.push_back((old, Origin::Stale));
                    self.stats.stale_injected += 1;
                }
            }
            if self.history.len() == HISTORY {
                self.history.pop_front();
            }
            self.history.push_back(p.clone());
            if rng.chance(self.faults.drop.get(kind).copied().unwrap_or(0.0)) {
                if let Some(d) = self.stats.dropped.get_mut(kind) {
                    *d += 1;
                }
                return Some(p);
            }
            if rng.chance(self.faults.dup) {
                self.in_flight.push_back((p.clone(), Origin::Sent));
                self.stats.duplicated += 1;
                self.in_flight.push_back((p, Origin::Duplicate));
                return None;
            }
        }
        self.in_flight.push_back((p, Origin::Sent));
        None
    }

    /// Takes the next packet to deliver, if any.
    pub fn deliver(&mut self, rng: &mut Rng) -> Option<P> {
        self.deliver_marked(rng).map(|d| d.packet)
    }

    /// Takes the next packet to deliver, if any, with what the fault
    /// injector did to it.
    pub fn deliver_marked(&mut self, rng: &mut Rng) -> Option<Delivery<P>> {
        let window = self.faults.reorder.min(self.in_flight.len());
        let i = if window > 1 {
            // The oldest packet of each flow in the window.
            let mut firsts: Vec<(usize, u32)> = Vec::with_capacity(window);
            for (k, p) in self.in_flight.iter().take(window).enumerate() {
                let f = p.0.flow();
                if firsts.iter().all(|&(_, g)| g != f) {
                    firsts.push((k, f));
                }
            }
            firsts
                .get(rng.below(firsts.len() as u64) as usize)
                .map_or(0, |&(k, _)| k)
        } else {
            0
        };
        if i > 0 {
            self.stats.reordered += 1;
        }
        let (packet, origin) = self.in_flight.remove(i)?;
        self.stats.delivered += 1;
        Some(Delivery {
            packet,
            origin,
            overtook: i,
        })
    }

    /// Packets in flight.
    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// What the link did so far.
    pub fn stats(&self) -> FabricStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct P(u32, PacketKind);

    impl Packet for P {
        fn kind(&self) -> PacketKind {
            self.1
        }

        /// Five flows, by the packet number.
        fn flow(&self) -> u32 {
            self.0 % 5
        }
    }

    fn drain(l: &mut Link<P>, rng: &mut Rng) -> Vec<u32> {
        std::iter::from_fn(|| l.deliver(rng)).map(|p| p.0).collect()
    }

    #[test]
    fn clean_link_is_fifo_and_lossless() {
        let mut rng = Rng::new(1);
        let mut l = Link::new(Faults::default());
        for i in 0..100 {
            l.send(P(i, PacketKind::ReadRespMiddle), &mut rng);
        }
        assert_eq!(drain(&mut l, &mut rng), (0..100).collect::<Vec<_>>());
        assert_eq!(l.stats().delivered, 100);
    }

    #[test]
    fn drops_only_the_selected_kind() {
        let mut rng = Rng::new(2);
        let mut f = Faults::default();
        f.drop[PacketKind::Ack as usize] = 1.0;
        let mut l = Link::new(f);
        for i in 0..50 {
            l.send(
                P(
                    i,
                    if i % 2 == 0 {
                        PacketKind::Ack
                    } else {
                        PacketKind::ReadReq
                    },
                ),
                &mut rng,
            );
        }
        let got = drain(&mut l, &mut rng);
        assert!(got.iter().all(|i| i % 2 == 1));
        assert_eq!(got.len(), 25);
        assert_eq!(l.stats().dropped[PacketKind::Ack as usize], 25);
    }

    #[test]
    fn duplicates_reorders_and_stale_are_counted_and_reproducible() {
        let f = Faults {
            drop: [0.0; KINDS],
            dup: 0.2,
            reorder: 8,
            stale: 0.1,
        };
        let run = |seed| {
            let mut rng = Rng::new(seed);
            let mut l = Link::new(f);
            let mut out = Vec::new();
            for i in 0..500 {
                l.send(P(i, PacketKind::ReadRespMiddle), &mut rng);
                if i % 3 == 0 {
                    out.extend(l.deliver(&mut rng).map(|p| p.0));
                }
            }
            out.extend(drain(&mut l, &mut rng));
            (out, l.stats())
        };
        let (a, sa) = run(9);
        let (b, sb) = run(9);
        assert_eq!((a.clone(), sa), (b, sb));
        assert!(
            sa.duplicated > 50 && sa.stale_injected > 20 && sa.reordered > 50,
            "{sa:?}"
        );
        assert_eq!(a.len() as u64, 500 + sa.duplicated + sa.stale_injected);
        // Every original packet arrives at least once.
        for i in 0..500 {
            assert!(a.contains(&i));
        }
    }

    /// Reordering lets a flow's packets overtake other flows' but never
    /// each other: the fabric delivers a path in order. With the flow
    /// check taken out of `deliver`, packets of one flow come out of
    /// order.
    #[test]
    fn reordering_keeps_each_flows_order() {
        let f = Faults {
            reorder: 8,
            ..Faults::default()
        };
        let mut rng = Rng::new(3);
        let mut l = Link::new(f);
        for i in 0..400 {
            l.send(P(i, PacketKind::ReadRespMiddle), &mut rng);
        }
        let out = drain(&mut l, &mut rng);
        assert!(l.stats().reordered > 50);
        for flow in 0..5 {
            let mine: Vec<u32> = out.iter().copied().filter(|i| i % 5 == flow).collect();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "flow {flow}: {mine:?}"
            );
        }
    }
}
