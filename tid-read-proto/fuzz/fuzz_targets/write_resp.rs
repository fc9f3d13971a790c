// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! WRITE_RESP header parse -> emit round trip (every byte but the reserved
//! words, which come back zero; the TID entries left as is), then the
//! requester's WRITE_DATA stream over the received entries: whatever the
//! peer granted, the builder never panics, never sends a packet larger
//! than the MTU or outside an entry, and stops.
#![no_main]

mod write_common;

use libfuzzer_sys::fuzz_target;
use tid_read_proto::wire::write_data::{DataBuilder, DataFlow};
use tid_read_proto::wire::write_resp::{HEADER_LEN, Packet, Repr};

const RESERVED: core::ops::Range<usize> = 12..24;

fuzz_target!(|data: &[u8]| {
    let Some((&[l0, l1, mtu], frame)) = data.split_first_chunk::<3>() else {
        return;
    };
    let Ok(p) = Packet::new_checked(frame) else {
        return;
    };
    let Ok(r) = Repr::parse(&p) else {
        assert!(p.tid_flow_psn_raw() >> 31 == 1);
        return;
    };
    write_common::assert_round_trip(frame, HEADER_LEN, RESERVED, |out| {
        r.emit(&mut Packet::new_unchecked(out))
            .expect("a parsed WRITE_RESP emits")
    });

    let entries: Vec<_> = p.tid_entries().iter().collect();
    let pmtu = if mtu & 1 == 0 { 4096 } else { 8192 };
    let length = u32::from(u16::from_le_bytes([l0, l1])) << 6;
    let flow = DataFlow {
        entries: &entries,
        length,
        pmtu,
        spsn: r.flow_psn.seq(),
        generation: r.flow_psn.generation(),
        tid_qpn: r.tid_flow_qp,
        jkey: 32,
        urg: mtu & 2 != 0,
        verbs_qp: r.verbs_qp,
        last_segment: mtu & 4 != 0,
    };
    let covered: u64 = entries.iter().map(|e| u64::from(e.len()) * 4096).sum();
    let mut sent = 0u64;
    let mut count = 0usize;
    for pkt in DataBuilder::new(&flow) {
        let Ok(pkt) = pkt else { break };
        assert!(pkt.len <= pmtu);
        assert_eq!(u64::from(pkt.data_offset), sent);
        sent += u64::from(pkt.len);
        assert!(sent <= covered);
        count += 1;
        assert!(count <= entries.len() * 2048, "the stream stops");
    }
});
