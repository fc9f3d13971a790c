// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Regression test for SPEC §7 "a READ after an unfinished TID WRITE waits
//! for it (interlock)", through the public `qualify::interlock` API.

use tid_read_proto::qualify::{InterlockState, WqeOp, interlock};

const OPS: [WqeOp; 7] = [
    WqeOp::Send,
    WqeOp::Atomic,
    WqeOp::RdmaWrite,
    WqeOp::RdmaRead,
    WqeOp::TidRdmaRead,
    WqeOp::TidRdmaWrite,
    WqeOp::Other,
];

fn state(prev: WqeOp, unacked: bool, prev_write_pending: bool) -> InterlockState {
    InterlockState {
        prev,
        unacked,
        prev_write_pending,
    }
}

/// The kernel's decision, written the way `hfi1_tid_rdma_wqe_interlock()`
/// is laid out: one switch on the new entry's opcode, a plain READ falling
/// into the TID READ case only when the previous entry is a TID WRITE,
/// then a switch on the previous entry's opcode. `ack_seg != total_segs`
/// (the previous TID WRITE is not fully acknowledged) is only looked at
/// when the previous entry is a TID WRITE; `s_acked != s_cur` is
/// `unacked`.
fn kernel_waits(op: WqeOp, prev: WqeOp, unacked: bool, write_pending: bool) -> bool {
    let tid_read_case = |prev: WqeOp| match prev {
        WqeOp::RdmaRead => unacked,
        WqeOp::TidRdmaWrite => write_pending,
        _ => false,
    };
    match op {
        // SEND (with immediate / invalidate), both atomics, RDMA WRITE
        // (with or without immediate).
        WqeOp::Send | WqeOp::Atomic | WqeOp::RdmaWrite => match prev {
            WqeOp::TidRdmaWrite => write_pending,
            _ => false,
        },
        WqeOp::RdmaRead => {
            if prev != WqeOp::TidRdmaWrite {
                false
            } else {
                tid_read_case(prev)
            }
        }
        WqeOp::TidRdmaRead => tid_read_case(prev),
        WqeOp::TidRdmaWrite | WqeOp::Other => false,
    }
}

/// SPEC §7: a READ (plain or TID) queued behind a TID RDMA WRITE whose
/// segments are not all acknowledged is held back, and goes as soon as
/// the WRITE is finished; the other cases of the kernel's
/// `hfi1_tid_rdma_wqe_interlock()` hold too: SENDs, atomics and RDMA
/// WRITEs also wait for an unfinished TID WRITE, a TID READ waits behind a
/// plain READ while anything is unacknowledged, and nothing else waits.
///
/// Depends on the TID WRITE check in `interlock`
/// (tid-read-proto/src/qualify.rs): the `WqeOp::RdmaRead =>
/// after_unfinished_write` arm and the `WqeOp::TidRdmaWrite =>
/// st.prev_write_pending` arm of the TID READ case. With the first
/// replaced by `false` this test fails (checked: "a plain READ behind TID
/// WRITE with 0 of 4 segments acknowledged went ahead (unacked true)");
/// with the second replaced by `false` it fails too (checked: "a TID READ
/// behind TID WRITE with 0 of 4 segments acknowledged went ahead (unacked
/// true)").
///
/// Overlaps the unit test `interlock_cases` in qualify.rs, which checks
/// the same arms case by case (and fails with them removed as well); this
/// one walks the WRITE's acknowledgements and compares every opcode pair
/// with the kernel's layout.
#[test]
fn a_read_after_an_unfinished_tid_write_waits() {
    // The WRITE ahead is acknowledged one segment at a time: every READ
    // waits until the last segment's ACK, whatever the unacked state.
    const TOTAL_SEGS: u32 = 4;
    for (read, name) in [
        (WqeOp::RdmaRead, "a plain READ"),
        (WqeOp::TidRdmaRead, "a TID READ"),
    ] {
        for unacked in [true, false] {
            for ack_seg in 0..=TOTAL_SEGS {
                let st = state(WqeOp::TidRdmaWrite, unacked, ack_seg != TOTAL_SEGS);
                let waits = interlock(read, &st);
                if ack_seg < TOTAL_SEGS {
                    assert!(
                        waits,
                        "{name} behind TID WRITE with {ack_seg} of {TOTAL_SEGS} segments \
                         acknowledged went ahead (unacked {unacked})"
                    );
                } else {
                    assert!(
                        !waits,
                        "{name} still held after the TID WRITE finished (unacked {unacked})"
                    );
                }
            }
        }
    }

    // A TID READ behind a plain READ waits while responses are
    // outstanding, and not after.
    assert!(interlock(
        WqeOp::TidRdmaRead,
        &state(WqeOp::RdmaRead, true, false)
    ));
    assert!(!interlock(
        WqeOp::TidRdmaRead,
        &state(WqeOp::RdmaRead, false, false)
    ));
    // A plain READ behind a plain READ does not (RC orders those itself).
    assert!(!interlock(
        WqeOp::RdmaRead,
        &state(WqeOp::RdmaRead, true, false)
    ));
    // A "pending" flag means nothing unless the previous entry is a TID
    // WRITE.
    for prev in OPS.into_iter().filter(|p| *p != WqeOp::TidRdmaWrite) {
        assert!(
            !interlock(WqeOp::RdmaRead, &state(prev, false, true)),
            "plain READ after {prev:?}"
        );
        assert!(
            !interlock(WqeOp::Send, &state(prev, true, true)),
            "SEND after {prev:?}"
        );
    }

    // Every opcode pair and flag combination agrees with the kernel's
    // decision, and the table is not trivial either way.
    let mut held = 0;
    let mut cases = 0;
    for op in OPS {
        for prev in OPS {
            for unacked in [false, true] {
                for pending in [false, true] {
                    let want = kernel_waits(op, prev, unacked, pending);
                    assert_eq!(
                        interlock(op, &state(prev, unacked, pending)),
                        want,
                        "{op:?} after {prev:?}, unacked {unacked}, write pending {pending}"
                    );
                    held += usize::from(want);
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 7 * 7 * 4);
    // 5 opcodes x 2 (unacked) behind a pending TID WRITE, plus a TID READ
    // behind a plain READ x 2 (pending ignored).
    assert_eq!(held, 5 * 2 + 2);
}
