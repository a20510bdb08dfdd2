//! A store's group-commit lanes: per lane the round trips in flight and the calls queued
//! for the next one, and the rule of who boards next. Only state and its rules: sending is
//! `group_commit`'s.

use std::sync::Mutex;

use redis::Value;
use tokio::sync::oneshot;

use crate::error::Result;
use crate::keys::fnv1a_32;
use crate::scripts::BatchItem;
use std::sync::Arc;

/// Most round trips of one lane in flight at once.
pub const MAX_IN_FLIGHT: usize = 3;

/// Round trips of one lane that may be in flight whatever they carry; one more (up to
/// [`MAX_IN_FLIGHT`]) takes off only while those carry at most [`FEW_CALLS`] calls. The
/// third keeps Redis busy while small batches gather (8 workers); when the two in flight
/// carry many, the calls that wait make one larger next batch instead, and every round trip
/// costs Redis and this process alike (64 workers, medians of seven alternated rounds: W1
/// +5 %, Redis CPU per append −7 %, client CPU −14 %; docs/benchmarks-decisions.md).
pub const ALWAYS_IN_FLIGHT: usize = 2;

/// See [`ALWAYS_IN_FLIGHT`].
pub const FEW_CALLS: usize = 8;

/// Most calls one batch carries; what queued beyond it goes with the next round trip. It
/// bounds how long one script holds Redis (about 10 µs of Redis time per item).
pub const MAX_BATCH: usize = 128;

/// The lanes of a store: one per partition on a cluster, one in all on a single node.
pub(crate) struct Lanes(Vec<Mutex<Lane>>);

impl Lanes {
    /// Idle lanes: `partitions` of them on a cluster, else one.
    pub(crate) fn new(partitions: u32, cluster: bool) -> Self {
        let count = if cluster { partitions } else { 1 };
        Lanes((0..count).map(|_| Mutex::default()).collect())
    }

    /// The lane of partition `p`.
    pub(super) fn of(&self, p: u32) -> usize {
        p as usize % self.0.len()
    }

    pub(super) fn lock(&self, lane: usize) -> std::sync::MutexGuard<'_, Lane> {
        // A panic while holding the lock cannot leave a half-updated lane (the critical
        // sections only push or take), so a poisoned lock is used as is.
        self.0[lane]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One lane.
#[derive(Default)]
pub(super) struct Lane {
    /// The round trips in flight: each one's number and its sessions' tags.
    pub(super) flights: Vec<(u64, Vec<u32>)>,
    /// The number the next round trip gets.
    pub(super) next_flight: u64,
    /// Calls waiting for a round trip, in arrival order.
    pub(super) queue: Vec<Waiting>,
}

impl Lane {
    /// Whether a round trip in flight carries a write of the session tagged `session`.
    pub(super) fn carries(flights: &[(u64, Vec<u32>)], session: u32) -> bool {
        flights
            .iter()
            .any(|(_, sessions)| sessions.contains(&session))
    }

    /// Whether another round trip may take off now: fewer than [`ALWAYS_IN_FLIGHT`] are in
    /// flight, or fewer than [`MAX_IN_FLIGHT`] carrying at most [`FEW_CALLS`] calls in all.
    pub(super) fn may_take_off(&self) -> bool {
        let n = self.flights.len();
        let carried = || {
            self.flights
                .iter()
                .map(|(_, sessions)| sessions.len())
                .sum::<usize>()
        };
        n < ALWAYS_IN_FLIGHT || (n < MAX_IN_FLIGHT && carried() <= FEW_CALLS)
    }

    /// Records a round trip of `sessions` in flight; returns its number.
    pub(super) fn take_off(&mut self, sessions: Vec<u32>) -> u64 {
        let flight = self.next_flight;
        self.next_flight += 1;
        self.flights.push((flight, sessions));
        flight
    }

    /// Takes the queued calls that may go now, in order, up to [`MAX_BATCH`]: none while
    /// every slot is taken, and none of a session a round trip in flight carries (those
    /// stay queued, in order, with every later call of their session).
    pub(super) fn boarding(&mut self) -> Vec<Waiting> {
        if !self.may_take_off() || self.queue.is_empty() {
            return Vec::new();
        }
        let flights = &self.flights;
        let mut batch = Vec::new();
        let mut held = Vec::new();
        for w in self.queue.drain(..) {
            if batch.len() < MAX_BATCH && !Lane::carries(flights, w.session) {
                batch.push(w);
            } else {
                held.push(w);
            }
        }
        self.queue = held;
        batch
    }
}

/// A call waiting in a lane, with where its reply (its own script's reply) goes.
pub(super) struct Waiting {
    pub(super) item: Arc<BatchItem>,
    /// Its session's tag ([`session_tag`]).
    pub(super) session: u32,
    pub(super) reply: oneshot::Sender<Result<Value>>,
}

/// A session's tag: [`fnv1a_32`] of its meta key. Two sessions that share one only wait for
/// each other (the order check is conservative), never reorder.
pub(super) fn session_tag(item: &BatchItem) -> u32 {
    fnv1a_32(item.session_key().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lane whose round trips in flight carry these many calls each.
    fn carrying(calls: &[usize]) -> Lane {
        let mut lane = Lane::default();
        for &n in calls {
            lane.take_off((0..n as u32).collect());
        }
        lane
    }

    #[test]
    fn a_third_round_trip_takes_off_only_beside_few_calls() {
        assert!(carrying(&[]).may_take_off());
        assert!(carrying(&[40]).may_take_off());
        assert!(carrying(&[1, 1]).may_take_off());
        assert!(carrying(&[4, 4]).may_take_off());
        assert!(!carrying(&[4, 5]).may_take_off());
        assert!(!carrying(&[30, 1]).may_take_off());
        assert!(!carrying(&[1, 1, 1]).may_take_off());
    }
}
