// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Whether the faults a QP pair met explain its retries: the rule behind
//! a passing `RETRY_EXC_ERR`.
//!
//! A faulty fabric may exhaust a requester's retry budget, and the kernel
//! then fails the oldest request `RETRY_EXC_ERR`; that is a correct
//! outcome only if the fabric really did lose or garble what each of
//! those retries recovered from. An engine that stalls on its own (a
//! request waiting for one that waits for it, a responder that stops
//! answering) spends its budget the same way, with nothing lost.
//!
//! So each QP pair keeps a [`Ledger`] row: the faults the fabric injected
//! on the pair's packets (either direction: a packet dropped when it was
//! sent; a duplicate or a stale copy when it was delivered) and the
//! retries its requester took (RC restarts, `hfi1_restart_rc()`, and TID
//! retry timer expiries, `hfi1_tid_retry_timeout()`). Each retry must
//! have a fault of its own before it: the k-th retry is *explained* when
//! the pair had met at least k faults by then, each fault explaining one
//! retry at most. One loss costs one go-back-N, after which the resent
//! packets, untouched, get through; two losses in one burst may cost two
//! (a plain READ restarts at its first gap, then at the second), so a
//! fault not yet behind a retry stays in the ledger for a later one.
//!
//! The verdict ([`Explained`]): every pair whose requester completed a
//! request `RETRY_EXC_ERR` must have every retry explained; one that
//! does not fails the run. Pairs that recovered are not judged (their
//! unexplained retries, if any, are counted for the report).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// What the fabric did to one packet of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Dropped when sent.
    Drop,
    /// Delivered a second time.
    Duplicate,
    /// An earlier packet delivered again.
    Stale,
}

/// One QP pair's row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairLedger {
    /// Its packets the fabric dropped.
    pub drops: u64,
    /// Duplicates of its packets delivered.
    pub duplicates: u64,
    /// Stale copies of its packets delivered.
    pub stale: u64,
    /// Retries its requester took.
    pub retries: u64,
    /// Those with no fault since the retry before.
    pub unexplained: u64,
    /// Its requester completed a request `RETRY_EXC_ERR`.
    pub retry_exceeded: bool,
    /// Faults not yet behind a retry.
    #[serde(skip)]
    pending: u64,
}

impl PairLedger {
    /// Every fault the pair met.
    pub fn faults(&self) -> u64 {
        self.drops + self.duplicates + self.stale
    }
}

/// The ledger of every QP pair of a run.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    pairs: Vec<PairLedger>,
}

impl Ledger {
    /// An empty ledger for `pairs` QP pairs.
    pub fn new(pairs: usize) -> Self {
        Self {
            pairs: vec![PairLedger::default(); pairs],
        }
    }

    /// The fabric did `f` to a packet of pair `pair` (ignored if there is
    /// no such pair: a packet of no QP).
    pub fn fault(&mut self, pair: usize, f: Fault) {
        if let Some(p) = self.pairs.get_mut(pair) {
            match f {
                Fault::Drop => p.drops += 1,
                Fault::Duplicate => p.duplicates += 1,
                Fault::Stale => p.stale += 1,
            }
            p.pending += 1;
        }
    }

    /// Pair `pair`'s requester has taken `total` retries so far: each new
    /// one uses up a fault not yet behind a retry, or is counted
    /// unexplained.
    pub fn retries(&mut self, pair: usize, total: u64) {
        let Some(p) = self.pairs.get_mut(pair) else {
            return;
        };
        let new = total.saturating_sub(p.retries);
        if new == 0 {
            return;
        }
        p.retries = total;
        let explained = new.min(p.pending);
        p.unexplained += new - explained;
        p.pending -= explained;
    }

    /// Pair `pair`'s requester completed a request `RETRY_EXC_ERR`.
    pub fn retry_exceeded(&mut self, pair: usize) {
        if let Some(p) = self.pairs.get_mut(pair) {
            p.retry_exceeded = true;
        }
    }

    /// The pair rows.
    pub fn pairs(&self) -> &[PairLedger] {
        &self.pairs
    }

    /// The verdict over the rows.
    pub fn explained(&self) -> Explained {
        let mut e = Explained::default();
        for (i, p) in self.pairs.iter().enumerate() {
            if p.retry_exceeded {
                e.judged_pairs += 1;
                e.judged_retries += p.retries;
                e.judged_faults += p.faults();
                if p.unexplained > 0 {
                    e.unexplained_pairs
                        .push((u32::try_from(i).unwrap_or(u32::MAX), *p));
                }
            } else {
                e.other_unexplained += p.unexplained;
            }
        }
        e
    }
}

/// The verdict on a run's `RETRY_EXC_ERR` completions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Explained {
    /// Pairs whose requester completed a request `RETRY_EXC_ERR`.
    pub judged_pairs: u64,
    /// Their retries.
    pub judged_retries: u64,
    /// The faults they met.
    pub judged_faults: u64,
    /// Those of them with a retry no fault explains, with their rows: each
    /// fails the run.
    pub unexplained_pairs: Vec<(u32, PairLedger)>,
    /// Unexplained retries of the pairs that recovered (not judged).
    pub other_unexplained: u64,
}

impl Explained {
    /// True if every retry of every judged pair is explained.
    pub fn ok(&self) -> bool {
        self.unexplained_pairs.is_empty()
    }

    /// The summary's line (without its label): why it passed or failed.
    pub fn line(&self) -> String {
        let mut s = String::new();
        if self.judged_pairs == 0 {
            s.push_str("no QP pair ended retry-exceeded");
        } else if self.ok() {
            let _ = write!(
                s,
                "{} QP pairs ended retry-exceeded, each of their {} retries behind a fault \
                 ({} faults on them)",
                self.judged_pairs, self.judged_retries, self.judged_faults
            );
        } else {
            let _ = write!(
                s,
                "FAIL: {} of {} QP pairs ended retry-exceeded with retries no fault explains:",
                self.unexplained_pairs.len(),
                self.judged_pairs
            );
            for (i, p) in self.unexplained_pairs.iter().take(4) {
                let _ = write!(
                    s,
                    " pair {i} {} of {} retries ({} drops, {} duplicates, {} stale);",
                    p.unexplained, p.retries, p.drops, p.duplicates, p.stale
                );
            }
            s.pop();
        }
        if self.other_unexplained > 0 {
            let _ = write!(
                s,
                "; {} unexplained retries on pairs that recovered",
                self.other_unexplained
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One drop explains one retry; a second retry with no second fault
    /// is unexplained, and fails the pair once it ends retry-exceeded.
    #[test]
    fn each_retry_needs_its_own_fault() {
        let mut l = Ledger::new(2);
        l.fault(0, Fault::Drop);
        l.retries(0, 1);
        assert!(l.explained().ok());
        l.retries(0, 2);
        assert_eq!(l.pairs()[0].unexplained, 1);
        // Not judged until it ends retry-exceeded.
        assert!(l.explained().ok());
        assert_eq!(l.explained().other_unexplained, 1);
        l.retry_exceeded(0);
        let e = l.explained();
        assert!(!e.ok());
        assert!(e.line().starts_with("FAIL: 1 of 1"), "{}", e.line());
    }

    /// Faults on another pair explain nothing here; faults of every kind
    /// count; faults before one retry carry over to the next ones, one
    /// each.
    #[test]
    fn faults_count_per_pair_and_carry_over_one_each() {
        let mut l = Ledger::new(2);
        l.fault(1, Fault::Drop);
        l.fault(1, Fault::Duplicate);
        l.fault(1, Fault::Stale);
        l.retries(0, 1);
        l.retries(1, 1);
        l.retries(1, 3);
        l.retries(1, 4);
        l.retry_exceeded(0);
        l.retry_exceeded(1);
        let p = l.pairs();
        assert_eq!((p[0].unexplained, p[1].unexplained), (1, 1));
        assert_eq!(p[1].faults(), 3);
        // No such pair: ignored.
        l.fault(7, Fault::Drop);
        l.retries(7, 3);
        assert_eq!(l.explained().unexplained_pairs.len(), 2);
    }

    /// A pair whose every retry came after a fault passes, and says so.
    #[test]
    fn explained_retries_pass() {
        let mut l = Ledger::new(1);
        for n in 1..=8 {
            l.fault(0, Fault::Stale);
            l.retries(0, n);
        }
        l.retry_exceeded(0);
        let e = l.explained();
        assert!(e.ok());
        assert_eq!((e.judged_retries, e.judged_faults), (8, 8));
        assert!(e.line().contains("each of their 8 retries behind a fault"));
    }
}
