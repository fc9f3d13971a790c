// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! TID RDMA WRITE under faults: each test is a seeded run that once
//! failed, named for the behaviour it pins. Every WRITE must succeed with
//! its bytes checked in the responder's pages and nothing held on either
//! node (a fault mix this light leaves the retry budget untouched).

use tid_sim::cli::{Ops, Options};
use tid_sim::scenario::{self, Report, RunFaults};

fn run(o: &Options) -> Report {
    scenario::run_observed(o, RunFaults::from_options(o), &mut ())
}

fn write_run(o: Options) -> Report {
    let r = run(&Options {
        ops: Ops::Write,
        ..o
    });
    assert!(r.all_succeeded(), "{}", r.summary());
    assert_eq!(r.write.verified_bytes, r.requested_bytes);
    r
}

/// Kernel: `do_rc_completion()`, which moves `s_last_psn` for every
/// request but a TID WRITE (completed by its TID ACKs, which may come
/// after the next WRITE's WRITE_RESPs moved it on). One QP, four WRITEs,
/// 5% loss: with the exception taken out the completion pulled
/// `s_last_psn` back, the next RNR NAK resent a WRITE_REQ the responder
/// took as a duplicate and never answered, and the run ended with a
/// WRITE stuck (3 of 4 done).
#[test]
fn a_completed_tid_write_leaves_s_last_psn_to_its_responses() {
    write_run(Options {
        qps: 1,
        bytes: 4 << 20,
        drop: 0.05,
        seed: 9,
        ..Options::default()
    });
}

/// Kernel: `reset_psn()`, which zeroes `pending_tid_w_resp` (every
/// WRITE_REQ from the restart PSN on is sent again and counts its
/// responses again). With the zeroing taken out every go-back-N resend
/// added its responses once more, the RC retry timer never stopped after
/// the last WRITE_RESP, and its expiries sent WRITE_REQs past the last
/// WRITE until both QPs ended RETRY_EXC_ERR.
#[test]
fn a_restart_counts_the_write_responses_it_asks_for_again() {
    write_run(Options {
        qps: 2,
        bytes: 8 << 20,
        drop: 0.05,
        seed: 5,
        ..Options::default()
    });
}

/// Kernel: `kern_find_pages()` walks the responder's region through an
/// SGE as long as the WRITE (`rvt_rkey_ok()` with the request's length),
/// so the last segment of a 260K WRITE programs one page. With the walk
/// taken out of the request's bounds it programmed a whole 256K segment,
/// the requester sent the 4K it had, the responder waited for 63 more
/// packets, and on an 8K MTU the requester failed to read its source past
/// the WRITE (engine error): a clean fabric, and every WRITE stuck or
/// failed.
#[test]
fn the_last_segment_of_a_write_programs_only_the_write_s_pages() {
    for mtu in [4096, 8192] {
        write_run(Options {
            qps: 4,
            bytes: 2080 << 10,
            request: 260 << 10,
            mtu,
            ..Options::default()
        });
    }
}

/// Kernel: `hfi1_rc_rcv_tid_rdma_write_data()` frees a received
/// segment's TIDs at once (`hfi1_kern_exp_rcv_clear()`); here they are
/// held until the flow leaves their generation (the responder's `held`
/// deviation). With the hold taken out (entries released at the last
/// packet) a duplicate and a stale copy of a finished segment were placed
/// by the chip through TIDs the next segment had taken: 7680 bytes of a
/// WRITE that completed successfully differed.
#[test]
fn late_copies_of_a_received_segment_do_not_reach_the_next_owner() {
    write_run(Options {
        qps: 6,
        bytes: 3 << 20,
        request: 256 << 10,
        groups: 11,
        mtu: 8192,
        seed: 17,
        dup: 0.00578,
        stale: 0.00936,
        ..Options::default()
    });
}

/// Kernel: `hfi1_rc_rcv_tid_rdma_resync()` / the RESYNC ACK of
/// `hfi1_build_tid_rdma_write_ack()`, which reports
/// `r_next_psn_kdeth - 1`: 0 until software has seen a packet. With that
/// rule put back, the requester took 0 as lying past a segment the
/// responder never got, acknowledged it, and waited for ever on the next
/// ones while the responder kept its TIDs: 38 QPs stuck.
#[test]
fn a_resync_ack_before_any_packet_reports_nothing_received() {
    write_run(Options {
        qps: 39,
        bytes: 39 << 20,
        groups: 19,
        mtu: 8192,
        seed: 18,
        drop: 0.04625,
        reorder: 4,
        ..Options::default()
    });
}

/// Kernel: the `schedule:` tail of `tid_rdma_rcv_error()`, which ends an
/// RNR episode and allocates with `r_nak_state` still set, so no RNR NAK
/// goes and `r_psn` stays past the unallocated segments. With that
/// ordering put back, a QP whose duplicate WRITE_REQ ended its episode
/// got no answer to its resends until TIDs came free, spent its retries
/// and ended RETRY_EXC_ERR holding the responder's TIDs from 15 others
/// (the fault mix on 16 QPs). Also pins the end of a NAK episode
/// the chip closed (`hfi1_handle_kdeth_eflags()` keeps `s_nak_state`
/// until software sees the PSN it NAKed, which the chip placed
/// silently): with that taken out a second loss in a segment waited for
/// the TID retry timer and a RESYNC, and the same run was cut short with
/// 15 QPs stuck and one RETRY_EXC_ERR. Seeds 21 and 23: with the
/// simulator's timeout longer than its worst round trip, most seeds of
/// this mix end a pair or two RETRY_EXC_ERR on losses alone (a QP kept
/// waiting for TIDs makes many RNR round trips, and each one lost costs a
/// retry no RNR NAK gives back); on these two every WRITE completes. With
/// the ordering put back 7 and 4 of their WRITEs fail, with the chip's
/// episode end taken out 26 and 31.
#[test]
fn a_duplicate_ending_an_rnr_episode_rnr_naks_again_while_tids_are_short() {
    for seed in [21, 23] {
        let r = write_run(Options {
            drop: 0.05,
            dup: 0.01,
            reorder: 8,
            stale: 0.01,
            seed,
            ..Options::default()
        });
        assert!(r.write.rnr_naks > 0, "{}", r.summary());
    }
}

/// Kernel: `hfi1_compute_tid_rnr_timeout()`, whose RNR NAK sends a QP
/// far back in the responder's queue away for long (here 15.36 ms) while
/// the QPs ahead of it retry every few tens of microseconds. Seed 124 of
/// `--soak 300 --ops write`: with the simulator's stuck check counting
/// only timer expiries (not the simulated time they span) the run was
/// declared stuck after 200 short RNR retries, before the two QPs holding
/// the responder's TIDs (128 entries, their WRITE_RESPs still owed) ever
/// retried: 9 QPs left in `TidWriteRest` and `Start`, 33 of 42 WRITEs done.
#[test]
fn a_long_rnr_wait_gets_its_turn_among_short_ones() {
    write_run(Options {
        qps: 42,
        bytes: 21 << 20,
        request: 512 << 10,
        groups: 21,
        mtu: 8192,
        seed: 124,
        drop: 0.00945,
        dup: 0.01882,
        ..Options::default()
    });
}
