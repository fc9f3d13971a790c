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
/// timer expired with nothing lost (a round trip behind two full links of
/// 8K packets takes about 336 us); its later retries spent the budget on
/// the losses that followed, one retry short of what they explain. The
/// simulator's timeout is one step longer on an 8K MTU.
#[test]
fn an_8k_round_trip_behind_full_links_does_not_time_out() {
    let o = mix_seed(20550);
    assert_eq!(o.mtu, 8192);
    let r = run(&o);
    assert!(r.ok(), "{}", r.summary());
    assert_eq!(r.explain.unexplained_pairs, []);
    assert_eq!(scenario::sim_timeout(8192), scenario::SIM_TIMEOUT + 1);
    assert_eq!(scenario::sim_timeout(4096), scenario::SIM_TIMEOUT);
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
