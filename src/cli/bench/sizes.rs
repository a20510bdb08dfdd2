//! The workloads' sizes: the published ones, or the `--quick` ones.

use super::decisions::W4Sizes;
use super::measure::WORKERS;

/// Sizes of the workloads (`quick` shrinks them for a fast smoke run).
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Concurrent workers of W1–W3 (and redis-benchmark's `-c` next to them).
    pub workers: usize,
    /// W1 sessions.
    pub sessions: usize,
    /// W1 messages per session.
    pub messages: usize,
    /// W2 loads of each session.
    pub loads: usize,
    /// W3 sessions.
    pub state_sessions: usize,
    /// W3 rounds per session.
    pub rounds: usize,
    /// Requests per redis-benchmark run.
    pub raw_requests: usize,
    /// W4 sizes.
    pub w4: W4Sizes,
    /// Messages of the session W6 rehydrates.
    pub rehydrate_messages: usize,
    /// W7 sizes.
    pub w7: W7Sizes,
}

impl Sizes {
    /// The published workload sizes, or much smaller ones when `quick`.
    pub fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                workers: WORKERS,
                sessions: 16,
                messages: 100,
                loads: 2,
                state_sessions: 8,
                rounds: 40,
                raw_requests: 5_000,
                w4: W4Sizes::new(true),
                rehydrate_messages: 1_000,
                w7: W7Sizes::new(true),
            }
        } else {
            Sizes {
                workers: WORKERS,
                sessions: 64,
                messages: 500,
                loads: 5,
                state_sessions: 16,
                rounds: 200,
                raw_requests: 50_000,
                w4: W4Sizes::new(false),
                rehydrate_messages: 10_000,
                w7: W7Sizes::new(false),
            }
        }
    }
}

/// What W7 measures.
#[derive(Debug, Clone, Copy)]
pub struct W7Sizes {
    /// Sessions whose leases are cycled and appended to, shared out among the workers.
    pub sessions: usize,
    /// Acquire → renew → release cycles per worker.
    pub cycles: usize,
    /// Passes of each kind of append (plain and fenced alternate, plain first).
    pub passes: usize,
    /// Appends per worker in one pass.
    pub appends: usize,
}

impl W7Sizes {
    /// The published sizes, or much smaller ones when `quick`.
    pub fn new(quick: bool) -> W7Sizes {
        if quick {
            W7Sizes {
                sessions: 16,
                cycles: 100,
                passes: 2,
                appends: 50,
            }
        } else {
            W7Sizes {
                sessions: 64,
                cycles: 2_000,
                passes: 4,
                appends: 625,
            }
        }
    }
}
