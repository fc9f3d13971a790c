// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The settings every loom model of the workspace runs with (host only,
//! `cfg(loom)` and feature `std`).
//!
//! One place for what would otherwise drift apart between the models
//! (`tid-flow/tests/loom.rs`, `tid-read-proto/tests/loom_write.rs`): the
//! preemption bound each model states, loom's branch limit, the stack of
//! model threads, the figures a run prints, and the worker doorbell and
//! signals the models' threads wait on ([`Doorbell`], [`Signal`]).
//! [`explore`] runs a model
//! and prints `loom model <name>: preemption bound <b>, <n> interleavings
//! explored`; it fails a model that explored one interleaving only (a
//! model that cannot race) or in which the lock-order checker saw no
//! acquisition (a model that runs without it).
#![allow(clippy::panic)] // a failed model is a failed test, by design

use std::eprintln;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::lockdep;

/// Stack of a model thread: the engines build a receive context and a
/// request's flow ring on the stack before they are boxed, and loom's own
/// first thread has a small stack.
pub const STACK: usize = 4 << 20;

/// Loom's limit on branches (lock, atomic and thread switch points) in
/// one execution; the models stay well below it, and a model that hits
/// it fails rather than being cut short silently.
pub const MAX_BRANCHES: usize = 50_000;

/// Spawns a model thread with a [`STACK`]-sized stack.
///
/// # Panics
///
/// If loom cannot spawn the thread (a model with more threads than loom
/// supports): a failed test.
pub fn spawn<F: FnOnce() + Send + 'static>(f: F) -> loom::thread::JoinHandle<()> {
    let spawned = loom::thread::Builder::new().stack_size(STACK).spawn(f);
    match spawned {
        Ok(h) => h,
        Err(e) => panic!("loom could not spawn a model thread: {e}"),
    }
}

/// Runs `body` under loom with at most `preemptions` preemptions per
/// execution, on a [`spawn`]ed thread, and prints the bound and the
/// number of interleavings (complete executions) explored. Returns that
/// number.
///
/// # Panics
///
/// If any execution panics (loom reports it with the schedule), if only
/// one interleaving was explored, or if the lock-order checker
/// ([`lockdep::CheckedSpinLock`]) saw no acquisition during the run.
pub fn explore(name: &str, preemptions: usize, body: impl Fn() + Send + Sync + 'static) -> u64 {
    let runs = Arc::new(AtomicU64::new(0));
    let body = Arc::new(body);
    let acquired = lockdep::acquisitions();
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.max_branches = MAX_BRANCHES;
    {
        let runs = Arc::clone(&runs);
        b.check(move || {
            runs.fetch_add(1, Relaxed);
            let body = Arc::clone(&body);
            if spawn(move || body()).join().is_err() {
                panic!("a loom model thread panicked");
            }
        });
    }
    let n = runs.load(Relaxed);
    eprintln!("loom model {name}: preemption bound {preemptions}, {n} interleavings explored");
    assert!(n > 1, "{name}: loom explored one interleaving only");
    assert!(
        lockdep::acquisitions() > acquired,
        "{name}: the lock-order checker saw no acquisition"
    );
    n
}

/// A worker's doorbell, as a workqueue's: threads [`kick`](Self::kick)
/// it after queueing work, the worker [`wait`](Self::wait)s for a kick
/// between runs, and [`stop`](Self::stop) lets it finish once no kick is
/// left.
#[derive(Debug, Default)]
pub struct Doorbell {
    state: loom::sync::Mutex<Bell>,
    rung: loom::sync::Condvar,
}

/// Kicks since the worker last looked, and whether it is told to stop.
#[derive(Debug, Default)]
struct Bell {
    kicks: u32,
    stop: bool,
}

impl Doorbell {
    /// Rings the bell: the worker runs the work (again) after this.
    pub fn kick(&self) {
        self.lock().kicks += 1;
        self.rung.notify_one();
    }

    /// Tells the worker to stop once it has seen every kick.
    pub fn stop(&self) {
        self.lock().stop = true;
        self.rung.notify_one();
    }

    /// Sleeps until a kick or the stop: true (and the kicks taken) if
    /// the worker is to run the work again, false if it is to stop.
    pub fn wait(&self) -> bool {
        let mut b = self.lock();
        while b.kicks == 0 && !b.stop {
            b = match self.rung.wait(b) {
                Ok(b) => b,
                Err(_) => panic!("a model thread panicked holding the doorbell"),
            };
        }
        let kicked = b.kicks > 0;
        b.kicks = 0;
        kicked
    }

    fn lock(&self) -> loom::sync::MutexGuard<'_, Bell> {
        match self.state.lock() {
            Ok(b) => b,
            Err(_) => panic!("a model thread panicked holding the doorbell"),
        }
    }
}

/// A one-way signal between model threads: [`set`](Self::set) once,
/// [`wait`](Self::wait) until it is set; [`take`](Self::take) also
/// clears it, for a signal given again and again (a QP woken each time
/// its wait ends).
#[derive(Debug, Default)]
pub struct Signal {
    set: loom::sync::Mutex<bool>,
    changed: loom::sync::Condvar,
}

impl Signal {
    /// Sets the signal and wakes a thread waiting for it.
    pub fn set(&self) {
        *self.lock() = true;
        self.changed.notify_one();
    }

    /// Sleeps until the signal is set.
    pub fn wait(&self) {
        drop(self.wait_set());
    }

    /// Sleeps until the signal is set, then clears it.
    pub fn take(&self) {
        *self.wait_set() = false;
    }

    fn wait_set(&self) -> loom::sync::MutexGuard<'_, bool> {
        let mut g = self.lock();
        while !*g {
            g = match self.changed.wait(g) {
                Ok(g) => g,
                Err(_) => panic!("a model thread panicked holding a signal"),
            };
        }
        g
    }

    fn lock(&self) -> loom::sync::MutexGuard<'_, bool> {
        match self.set.lock() {
            Ok(g) => g,
            Err(_) => panic!("a model thread panicked holding a signal"),
        }
    }
}
