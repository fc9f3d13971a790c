// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! A bounded smoke run of the READ state-machine fuzz interpreter
//! ([`tid_harness::fuzz`], shared with the cargo-fuzz targets
//! `requester_rx`, `responder_rx`, `read_pair` and `write_pair` of
//! `tid-read-proto/fuzz`)
//! on inputs from a seeded generator, so `cargo test` exercises it too.
//! Each input must pass every check of the interpreter (no panic, invariants after every step, every
//! request completed, nothing left after destroy), and the inputs together
//! must really have driven the engines.
#![cfg(feature = "std")]

use tid_harness::fuzz::{Mode, Summary, run};

/// xorshift64*: a fixed, dependency-free byte source.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn input(&mut self) -> Vec<u8> {
        let len = 2 + (self.next() % 160) as usize;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn smoke(mode: Mode, seed: u64, inputs: usize) -> Summary {
    let mut g = Gen(seed);
    let mut total = Summary::default();
    for _ in 0..inputs {
        let data = g.input();
        total += run(mode, &data);
    }
    println!("{mode:?}: {inputs} inputs, {total:?}");
    // The generator must have reached the engines, or the run proves
    // nothing.
    assert!(total.steps > 0 && total.delivered > 0, "{total:?}");
    assert!(
        total.completed_ok > 0,
        "no request ever completed: {total:?}"
    );
    total
}

#[test]
fn requester_rx_smoke() {
    let s = smoke(Mode::RequesterRx, 0x5EED_0001, 100);
    assert!(s.injected > 0, "no forged packet reached the requester");
}

#[test]
fn responder_rx_smoke() {
    let s = smoke(Mode::ResponderRx, 0x5EED_0002, 100);
    assert!(s.injected > 0, "no forged packet reached the responder");
}

/// TID WRITEs (and READs) with RNR pressure, both second legs and the
/// TID timers: every input must pass, and some WRITE must complete.
#[test]
fn write_pair_smoke() {
    let s = smoke(Mode::WritePair, 0x5EED_0004, 100);
    assert!(s.completed_ok > 0, "no WRITE completed: {s:?}");
}

#[test]
fn read_pair_smoke() {
    let s = smoke(Mode::Pair, 0x5EED_0003, 100);
    assert!(
        s.restarts > 0,
        "the schedules never made a requester restart"
    );
}

/// Replays the inputs under `tid-read-proto/fuzz/regressions/<target>/`:
/// the fixed ones, or (`open`) the `open-*` ones, findings whose bug is
/// not fixed yet; returns how many ran.
fn replay(open: bool) -> usize {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tid-read-proto/fuzz/regressions");
    let mut ran = 0;
    for (target, mode) in [
        ("requester_rx", Mode::RequesterRx),
        ("responder_rx", Mode::ResponderRx),
        ("read_pair", Mode::Pair),
        ("write_pair", Mode::WritePair),
    ] {
        let Ok(files) = std::fs::read_dir(dir.join(target)) else {
            continue;
        };
        let mut files: Vec<_> = files
            .map(|f| f.unwrap().path())
            .filter(|f| {
                let name = f.file_name().unwrap().to_string_lossy();
                name.starts_with("open-") == open
            })
            .collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            println!("{target}: {}", f.display());
            run(mode, &data);
            ran += 1;
        }
    }
    assert!(
        open || ran > 0,
        "no regression input found under {}",
        dir.display()
    );
    ran
}

/// Replays every finding kept under
/// `tid-read-proto/fuzz/regressions/<target>/`, each passing every check
/// of the interpreter. What each pins, and what it showed with its rule
/// taken out (checked unless said otherwise):
///
/// - `read_pair/ack-queue-full-*`, `read_pair/stuck-segment-*`: the
///   responder's rewind of its send pointer on a duplicate
///   (`tid_rdma_rcv_error()`); they failed with the pointer rewound as
///   the driver rewinds it before the engines ran the kernel's whole rule.
/// - `read_pair/ack-queue-full-after-stale-duplicates`: the shared finding
///   `read_pair-ack-queue-after-restart` (`../shared/fuzz-findings/`). With the
///   engines as the kernel runs them this schedule no longer reaches the
///   full ack queue (it completes every READ); the kernel's refusal it
///   found is pinned by `engine_responder`'s
///   `stale_duplicates_fill_the_ack_queue_as_in_the_kernel`, and the
///   outcomes the kernel then allows by the interpreter's
///   `kernel_allows`.
/// - `read_pair/expiry-skips-a-segment-a-nak-passed`: the expiry restart
///   from the oldest unfinished TID segment (`rvt_rc_timeout()`): with
///   the restart from `s_last_psn + 1` its READ completes `RETRY_EXC_ERR`
///   after 6 faults with a budget of 7.
/// - `requester_rx/stuck-register-past-segment-end`: the chip's flow
///   register read for dropped packets too
///   (`hfi1_rc_rcv_tid_rdma_read_resp()`).
/// - `requester_rx/livelock-after-drain`: the shared finding of that name
///   (`../shared/fuzz-findings/`); with the engines as the kernel runs them (PSNs at WQE
///   start, 6.1's completion rule) it no longer loops, budget or not.
/// - `requester_rx/retry-budget-ends-a-livelock`: the retry budget
///   (`hfi1_restart_rc()`): with `spend_retry` always succeeding the
///   fault-free drain never ends.
/// - `requester_rx/forged-rnr-on-a-response-stops-the-wait`: the send
///   engine scheduled when an ACK stops the RNR timer (`do_rc_ack()`):
///   without it the drain is stuck.
/// - `requester_rx/forged-nak-aeth-on-a-last-packet`: a last packet whose
///   AETH is no ACK keeps its segment (`hfi1_rc_rcv_tid_rdma_read_resp()`):
///   with 6.1's order (TIDs freed first) the drain is stuck waiting for
///   RcvArray entries a later READ holds.
/// - `requester_rx/forged-nak-aeth-mid-segment-restart`: the same rule,
///   and a restart finding no segment going on only at the next segment's
///   first PSN (`hfi1_tid_rdma_restart_req()`): with both taken out the
///   drain is stuck (a restart inside the segment that is gone); either
///   one alone saves it.
/// - `requester_rx/a-later-response-during-a-restart-keeps-the-timer`:
///   the retry timer kept running when a later READ's last packet comes
///   while a restart is already asked for (`do_rc_ack()`'s
///   `set_restart_qp()` and `bail_stop`): a forged copy of a last packet
///   with a NAK AETH puts `s_last_psn` inside the segment, the restart
///   asks for part of it, which the responder ignores, and with 6.1's
///   rule (timers stopped) the drain is stuck with no timer armed.
/// - `write_pair/*`, four findings of TID WRITE recovery, each on a
///   fabric with no fault the schedule injected (only RNR pressure and
///   the timers of an idle fabric), kept since the engines pass them:
///   `rnr-on-a-clean-fabric-ends-retry-exceeded` (3 bytes: one QP, 4 KiB
///   segments, two 64-segment WRITEs; resent WRITE_REQs after an RNR NAK
///   were taken as duplicates until `RETRY_EXC_ERR`),
///   `resync-loop-second-leg-buffer-too-small` (3 bytes; TID retry
///   expiries and RESYNCs alternating with duplicate WRITE_REQs until the
///   second leg could not build a packet), `resync-ack-completes-a-write-without-its-data`
///   (14 bytes; a revived two-segment WRITE completed on a RESYNC's ACK
///   with one segment never placed) and `rnr-leaves-a-write-with-no-timer`
///   (39 bytes: two QPs, one TID group; a WRITE outstanding with neither
///   its RNR nor its retry timer armed).
/// - `write_pair/acked-pointer-past-the-head-refuses-a-resent-write`
///   (38 bytes, one QP; the kernel's own behaviour, kept as the engines
///   run it): fabric copies of WRITE_REQs delivered as duplicates while
///   the responder's send and acknowledged pointers meet set the
///   acknowledged pointer past the head (`tid_rdma_rcv_error()`), the
///   next WRITE_DATA_LAST packets move it on, and the resend of an
///   RNR-NAKed WRITE_REQ then meets a slot never filled and is NAKed
///   invalid; the interpreter allows that completion only through
///   `kernel_allows`, and with that rule taken out the replay fails.
/// - `write_pair/copy-of-a-scheduled-write-skips-an-unanswered-one`
///   (39 bytes, one QP, the kernel's own behaviour, kept): two one-segment
///   WRITEs allocated before the first leg ran, then fabric copies of
///   both WRITE_REQs; the copy of the second, already scheduled, moves
///   the send pointer to its own entry past the first
///   (`tid_rdma_rcv_error()`), the first never gets a WRITE_RESP and the
///   requester ends `RETRY_EXC_ERR` after 8 timeouts with 5 faults
///   injected against a budget of 7. The responder counts the skip
///   (`send_pointer_skips`), the interpreter allows the outcome through
///   `kernel_allows`, and with that rule taken out the replay fails;
///   `tests/write_responder.rs` pins the engine's steps.
/// - `write_pair/resync-after-a-rewinding-duplicate` (48 bytes, two QPs,
///   one requester TID group; a deviation from 6.1, fixed): a fabric copy
///   of WRITE_REQ #1 rewinds the send pointer while #2's WRITE_RESP is
///   out, and the RESYNC that follows renumbered only #1 (6.1 walks to
///   the send pointer); #2's data was NAKed in the new generation, the
///   next RESYNC numbered #2 where the requester resent #1, so #1's data
///   landed in #2's buffer and #2 never completed (stuck after the
///   drain). The responder now renumbers through its newest TID WRITE
///   entry (`tests/write_responder.rs`:
///   `a_resync_after_a_rewinding_duplicate_renumbers_every_segment`).
/// - `write_pair/second-copy-past-the-allocated-segments` (48 bytes, two
///   QPs, 16 KiB segments, two responder TID groups; a deviation from
///   6.1, fixed): a fabric copy of a WRITE_REQ rewound the resend to
///   segment 1, the requester's resend after an RNR NAK then named
///   segment 4, the first not allocated, which moved the resend position
///   to the end but left the count of responses sent at 1; when the RNR
///   episode ended the first leg sent WRITE_RESPs from the flow records of
///   segments long received, the requester took segment 4's with stale
///   PSNs and TIDs and counted it acknowledged, and the responder waited
///   for its data with its RcvArray held: both QPs RNR-NAKed forever
///   (`tests/write_responder.rs`:
///   `a_second_copy_past_the_allocated_segments_ends_the_resend`).
/// - `write_pair/a-failed-connections-responder-holds-the-rcvarray` (a
///   fault of the fuzz world, fixed there): requester 1 failed
///   (`RETRY_EXC_ERR`, more faults than its budget) while responder 1
///   held the only TID group for a WRITE it had RNR-NAKed, which no timer
///   reclaims in 6.1; the world kept that responder running, so QP 0's
///   WRITE waited for the group forever. The world now resets a failed
///   requester's peer responder, as the application (and tid-sim) does.
/// - `write_pair/write-resp-during-a-resync-miscounted` (one QP, 4 KiB
///   segments, one TID group each side; a deviation from 6.1, fixed):
///   WRITE_RESPs the responder built after taking a RESYNC reached the
///   requester while that RESYNC was out, already in the new generation;
///   the RESYNC ACK's renumbering counted one of them about 2048
///   packets, its last PSN wrapped onto the segment before it, a NAK
///   then acknowledged both, and every later RESYNC ACK (naming the
///   first of them unacknowledged) was dropped until `RETRY_EXC_ERR`
///   (`tests/write_requester.rs`:
///   `a_write_resp_during_a_resync_keeps_its_packet_count`).
/// - `write_pair/write-resp-from-before-a-resync` (one QP, 4 KiB segments,
///   one TID group each side; a deviation from 6.1, fixed): a WRITE_RESP
///   built before a RESYNC reached the requester after that RESYNC's ACK,
///   naming the old generation; its data failed the chip's generation
///   check, a NAK in the new generation acknowledged the segment, and
///   the responder held its TIDs for data that never came (stuck). Such a
///   segment now takes the next sequences of the new generation, as the
///   responder renumbered it (`tests/write_requester.rs`:
///   `a_write_resp_from_before_a_resync_is_renumbered`).
/// - `write_pair/restart-past-a-write-resends-it-empty` (two QPs; the
///   kernel's own behaviour, kept): a WRITE_RESP taken while the
///   WRITE_REQ was being resent leaves the RC retry timer running
///   (`do_rc_ack()`'s resend branch), its expiry restarts past the
///   WRITE's last PSN, `reset_psn()` resumes the WRITE with nothing left
///   and a zero-length WRITE_REQ goes out, which the responder NAKs
///   invalid. The requester counts it (`empty_write_req_resends`), the
///   interpreter allows the completion through `kernel_allows`, and with
///   that rule taken out the replay fails. Its twin
///   `restart-past-a-write-resends-it-empty-nak-dropped` (one QP) ends
///   `RETRY_EXC_ERR`: the responder drops that NAK while a READ's
///   responses are pending, as its NAK rule says.
/// - `write_pair/interlocked-read-never-sent` (two QPs; a deviation from
///   6.1, fixed): an RC retry expiry and a TID retry expiry in one step
///   backed QP 0's send state up to its TID WRITE (`TID_OP(WRITE_RESP)`)
///   while the RESYNC halted the first leg; the RESYNC's ACK completed
///   the WRITE and moved `s_cur` to the plain READ interlocked behind it,
///   not yet started, with the resend state kept, so the send engine
///   sent nothing, no timer ran and the drain ended stuck. A completion
///   that leaves nothing started after it now resets the send state
///   (`tests/write_requester.rs`:
///   `a_write_completing_under_a_restart_lets_the_read_behind_it_go`).
/// - `write_pair/late-copy-of-a-taken-resync` (one QP, a 64-segment
///   WRITE of 4 KiB segments; a deviation from 6.1, fixed): a copy of a
///   RESYNC held back by the fabric reached the responder after the
///   RESYNC's ACK and a segment in the new generation; 6.1 takes it
///   again, numbering the segments left from sequence 0 of the same
///   generation, onto the one received; the next RESYNC ACK then counted
///   that segment's packet for the following one, which the requester
///   renumbered to no packets, and its second leg could not build a
///   packet. The responder now ignores such a copy (`stale_resyncs`;
///   `tests/write_responder.rs`: `a_late_copy_of_a_taken_resync_is_ignored`).
/// - `write_pair/write-resp-from-a-resync-whose-ack-was-lost` (one QP,
///   one TID group each side, 4 KiB segments; a deviation from 6.1,
///   fixed): the ACK of a first RESYNC was dropped behind a second; the
///   WRITE_RESPs the responder built after the first named its
///   generation, between the old one and the second RESYNC's, and the
///   second RESYNC ACK counted them from the old generation's PSNs (2048
///   packets more); the next segments started on their sequences, an ACK
///   acknowledged a segment never received, and the responder RNR-NAKed
///   the rest for ever. Such a segment now keeps its own count
///   (`tests/write_requester.rs`:
///   `a_write_resp_from_a_resync_whose_ack_was_lost_keeps_its_packet_count`).
/// - `write_pair/resync-ack-acknowledges-a-segment-not-received` (one
///   QP, one TID group, 64 KiB segments; a deviation from 6.1, fixed): a
///   late copy of a RESYNC was taken again after the chip had placed
///   data of its generation without software seeing it (header
///   suppression), so the late-copy rule, which read only what software
///   saw, let it through; the flow went back to sequence 0, the rest of
///   the segment was NAKed, a later RESYNC ACK named the segment's last
///   packet as received, and the requester acknowledged a segment the
///   responder never completed and held TIDs for, RNR-NAKing the next
///   one for ever. The rule now also reads the chip's flow register
///   (`tests/write_responder.rs`:
///   `a_late_copy_of_a_taken_resync_is_ignored_once_the_chip_placed_data`).
/// - `write_pair/timeout-with-nothing-outstanding-clears-wait-ack` (two
///   QPs, 8 KiB MTU; a deviation from 6.1, fixed): an RC retry expiry
///   resent a request with `SEND_ONE`, so WAIT_ACK was set; the TID ACK
///   then completed the WRITE without clearing it, and the next expiry
///   found nothing outstanding and returned before clearing the wait
///   flags, with no timer left: the four posts behind never went. The
///   restart now clears the wait flags with nothing outstanding, as 6.1's
///   `hfi1_restart_rc()` does.
/// - `write_pair/read-near-psn-wrap-seq-restart-spends-a-retry` (one QP,
///   first PSN 0x7ffffff8; the kernel's own behaviour, kept): seven early
///   retry expiries re-requested a one-segment TID READ, a response to an
///   earlier request then met the chip's moved-on flow, and the
///   sequence-error restart spent the eighth retry, as 6.1's
///   `restart_tid_rdma_read_req()` does through `hfi1_restart_rc()`: the
///   READ ends `RETRY_EXC_ERR` with seven faults. The interpreter now
///   counts such restarts against the budget.
/// - `responder_rx/forged-read-longer-than-the-region`: a mutated RDMA
///   READ of 3.9 GB (the fuzz world's READ region,
///   `FUZZ_REGION_LEN`, is 1 MiB, so it is NAKed at once; with 4 GiB it
///   was served for 320,003 packets, see `tests/fuzz_region.rs`).
#[test]
fn fuzz_regressions() {
    replay(false);
}

/// Replays the open findings (`regressions/*/open-*`), inputs whose bug
/// is not fixed yet (none today). Run by hand while fixing one
/// (`cargo test -p tid-harness --features std --test fuzz_smoke --
/// --ignored`); once it passes every check, rename it without `open-`
/// and say in [`fuzz_regressions`]'s list what it pins.
#[test]
#[ignore = "run by hand: the open-* findings under regressions/"]
fn fuzz_open_findings() {
    replay(true);
}
