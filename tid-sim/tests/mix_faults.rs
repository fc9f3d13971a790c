// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! READs and TID WRITEs on one QP under faults (`--ops mix`): each test
//! is a seeded run that once failed, named for the behaviour it pins.
//! The run must pass, a QP ending retry-exceeded only after retries the
//! faults on its pair explain.

use tid_sim::cli::{Ops, Options};
use tid_sim::scenario::{self, Report, RunFaults};
use tid_sim::soak::soak_options;

fn run(o: &Options) -> Report {
    scenario::run_observed(o, RunFaults::from_options(o), &mut ())
}

/// The soak's scenario for `seed`, as a mix.
fn mix_seed(seed: u64) -> Options {
    Options {
        ops: Ops::Mix,
        read_sizes: None,
        ..soak_options(seed)
    }
}

/// Mix soak seed 109: a stale copy of an answered READ_REQ rewound the
/// responder's send pointer to it; the READs went again, and the pointer
/// came to rest on the fully answered TID WRITE after them, which had
/// nothing to send. The READs accepted behind it were never answered:
/// eight timeouts on one stale copy, RETRY_EXC_ERR with seven retries no
/// fault explains.
#[test]
fn an_answered_write_does_not_stop_the_reads_behind_it() {
    let o = mix_seed(109);
    assert!(o.stale > 0.0 && o.drop == 0.0, "{o:?}");
    let r = run(&o);
    assert!(r.all_succeeded(), "{}", r.summary());
}

/// Mix soak seed 251: a stale copy of an answered READ_REQ rewound the
/// send pointer behind other answered entries; the first of them parked
/// the pointer at the head, past a TID WRITE whose WRITE_RESPs had not
/// gone. Its requester waited for them through seven timeouts on one
/// stale copy (RETRY_EXC_ERR, six retries no fault explains).
#[test]
fn a_parked_send_pointer_stops_at_an_unanswered_write() {
    let o = mix_seed(251);
    assert!(o.stale > 0.0 && o.drop == 0.0 && o.dup == 0.0, "{o:?}");
    let r = run(&o);
    assert!(r.all_succeeded(), "{}", r.summary());
}

/// Mix soak seed 20550 (8K MTU): a WRITE_REQ's RNR NAK waited behind
/// other QPs' READ responses on a full link, and the requester's 262 us
/// timer expired with nothing lost; its later retries spent the budget on
/// the losses that followed, one retry short of what they explain. The
/// simulator's timeout outlasts its fabric's worst round trip at every
/// MTU.
#[test]
fn an_8k_round_trip_behind_full_links_does_not_time_out() {
    let o = mix_seed(20550);
    assert_eq!(o.mtu, 8192);
    let r = run(&o);
    assert!(r.ok(), "{}", r.summary());
    assert_eq!(r.explain.unexplained_pairs, []);
}

/// `--ops mix --drop 0.05 --dup 0.01 --reorder 8 --stale 0.01
/// --resp-groups 32`: one QP held the responder's whole RcvArray, so the
/// others' WRITE_REQs went back and forth against RNR NAKs; six resent
/// WRITE_REQs waited behind about 230 packets on the requester's full
/// link and their RNR NAKs behind 253 to 255 on the responder's. Every
/// delivery on either link advances the one simulated clock, so each wait
/// lasted twice its own link's share: a round trip of about 310 us, and
/// the 262 us timeout expired on NAKs still queued, each pair's first
/// retry with no fault on the pair yet (RETRY_EXC_ERR later, one retry
/// no fault explains).
#[test]
fn a_round_trip_behind_two_full_links_does_not_time_out() {
    let o = Options {
        ops: Ops::Mix,
        drop: 0.05,
        dup: 0.01,
        reorder: 8,
        stale: 0.01,
        resp_groups: Some(32),
        ..Options::default()
    };
    let r = run(&o);
    assert!(r.write.rnr_naks > 0, "{}", r.summary());
    assert!(r.ok(), "{}", r.summary());
    assert_eq!(r.explain.unexplained_pairs, []);
}

/// The timeout at each MTU is the shortest (from `SIM_TIMEOUT`) that
/// outlasts the worst round trip by half: both links full of MTU-sized
/// packets, each crossing at half the wire's rate because the other
/// link's deliveries take the same clock.
#[test]
fn the_timeout_outlasts_the_worst_round_trip() {
    for mtu in [4096, 8192] {
        let rtt = scenario::worst_round_trip_ns(mtu);
        // LINK_CREDITS packets ahead on each link, as many again on the
        // other link meanwhile, at 12.5 bytes per ns.
        assert!(
            rtt as f64 >= 4.0 * 256.0 * f64::from(mtu) / 12.5,
            "{mtu}: {rtt}"
        );
        let e = scenario::sim_timeout(mtu);
        let timeout = |e: u8| 4096u64 << e;
        assert!(timeout(e) * 2 >= rtt * 3, "{mtu}: {} for {rtt}", timeout(e));
        assert!(e == scenario::SIM_TIMEOUT || timeout(e - 1) * 2 < rtt * 3);
    }
    assert_eq!(scenario::sim_timeout(4096), 7);
    assert_eq!(scenario::sim_timeout(8192), 8);
}

/// Mix soak seed 20858: a stale copy of a WRITE_REQ arrived during an RNR
/// episode and asked for the first segment's WRITE_RESP again; that
/// segment's data then arrived (the first WRITE_RESP had got through),
/// leaving the resend behind the received segments. The requester's
/// resend after the RNR NAK rewound the entry past its allocated
/// segments, and the WRITE was never answered again (RETRY_EXC_ERR, six
/// retries no fault explains).
#[test]
fn a_resend_overtaken_by_its_data_moves_on() {
    let o = mix_seed(20858);
    assert!(o.stale > 0.0 && o.drop == 0.0, "{o:?}");
    let r = run(&o);
    assert!(r.all_succeeded(), "{}", r.summary());
}

/// A hostile mix on a responder with room for few WRITE segments loses
/// most of its WRITEs to RNR retries running out while the losses eat
/// the budget; the same run with a roomy responder completes every
/// request. `--resp-groups` sizes the responder alone.
#[test]
fn a_lossy_mix_completes_when_the_responder_has_room() {
    let base = Options {
        ops: Ops::Mix,
        drop: 0.02,
        ..Options::default()
    };
    let tight = run(&base);
    let roomy = run(&Options {
        resp_groups: Some(128),
        ..base.clone()
    });
    assert!(!tight.all_succeeded(), "{}", tight.summary());
    assert!(tight.ok(), "{}", tight.summary());
    assert!(roomy.all_succeeded(), "{}", roomy.summary());
    assert!(roomy.ok(), "{}", roomy.summary());
    assert_ne!(tight.inputs_line(), roomy.inputs_line());
    assert!(roomy.inputs_line().contains("--resp-groups 128"));
}
