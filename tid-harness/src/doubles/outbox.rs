// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The packet sink every harness sends into ([`Outbox`]).

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use tid_read_proto::packet::MAX_PACKET;
use tid_read_proto::rc::PacketSink;

/// Packet buffers an [`Outbox`] keeps for reuse.
const SPARE_PACKETS: usize = 1024;

/// Keeps every packet an engine sends, oldest first.
///
/// A caller that is done with a packet may hand its buffer back
/// ([`Outbox::recycle`]); the next sends reuse it instead of allocating,
/// so a long run's packets cost no allocation once warm.
#[derive(Debug)]
pub struct Outbox {
    buf: Vec<u8>,
    sent: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    oversized: u64,
}

impl Default for Outbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Outbox {
    /// An empty outbox with a buffer of [`MAX_PACKET`] bytes.
    pub fn new() -> Self {
        Self {
            buf: vec![0; MAX_PACKET],
            sent: VecDeque::new(),
            spare: Vec::new(),
            oversized: 0,
        }
    }

    /// Takes the oldest packet.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        self.sent.pop_front()
    }

    /// Takes every packet, oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.sent.drain(..)
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// True if nothing waits.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// Takes back a packet's buffer (one [`Outbox::pop`] or
    /// [`Outbox::drain`] gave out) for the next sends; beyond a bounded
    /// number kept, it is freed.
    pub fn recycle(&mut self, packet: Vec<u8>) {
        if self.spare.len() < SPARE_PACKETS {
            self.spare.push(packet);
        }
    }

    /// Sends of more bytes than the buffer holds (an engine bug; the
    /// packet is dropped).
    pub fn oversized(&self) -> u64 {
        self.oversized
    }
}

impl PacketSink for Outbox {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn send(&mut self, len: usize) {
        match self.buf.get(..len) {
            Some(p) => {
                let mut v = self.spare.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(p);
                self.sent.push_back(v);
            }
            None => self.oversized += 1,
        }
    }
}
