//! The daemon's own Prometheus series, recorded through the `metrics` facade: every name is
//! declared here once, and each instrumentation point of the daemon is one call of a function
//! below. Without an installed recorder (a daemon embedded in an application, `--once`)
//! each call is a no-op; `agentstate spill --metrics` installs the Prometheus one
//! (`crate::web::metrics`), which also sets the series read from Redis at scrape time
//! ([`PENDING`], [`LAG`], [`CONSUMER_PENDING`], [`DEAD_LETTERS`]).

use std::time::Duration;

use crate::durable::retention::Removal;

/// Gauge `{partition}`: wal entries SQLite has not committed yet.
pub const PENDING: &str = "agentstate_wal_pending_entries";
/// Gauge `{partition}`: decisions-stream entries SQLite has not committed yet.
pub const DECISIONS_PENDING: &str = "agentstate_decisions_pending_entries";
/// Gauge `{partition}`: age of the oldest entry not yet committed, seconds (0 when none).
pub const LAG: &str = "agentstate_flush_lag_seconds";
/// Counter: stream entries committed to the durable tier.
pub const FLUSHED: &str = "agentstate_flushed_entries_total";
/// Histogram: seconds one flush transaction took (apply and cursors, committed).
pub const BATCH_SECONDS: &str = "agentstate_flush_batch_seconds";
/// Histogram: seconds from an acknowledged write (its wal entry's id) to the publication of
/// the commit that holds it: the write-behind window (`super::behind`).
pub const WRITE_BEHIND: &str = "agentstate_write_behind_seconds";
/// Gauge: partitions this daemon holds the lease of.
pub const OWNED: &str = "agentstate_partitions_owned";
/// Counter `{change}`: leases this daemon took, lost (fenced or lapsed) or released.
pub const LEASE_CHANGES: &str = "agentstate_lease_changes_total";
/// Counter `{result}`: restore requests served: `restored`, `live` (nothing to do),
/// `unknown` (the durable tier does not know the session).
pub const RESTORES: &str = "agentstate_restores_total";
/// Gauge `{group}`: decisions delivered to a consumer group and not acknowledged yet.
pub const CONSUMER_PENDING: &str = "agentstate_consumer_pending";
/// Gauge `{group}`: entries in the dead-letter streams, by the group that gave up on them.
pub const DEAD_LETTERS: &str = "agentstate_dead_letters";
/// Counter `{kind}`: rows the retention policy removed (session, tombstone, checkpoint,
/// decision).
pub const GC_REMOVED: &str = "agentstate_gc_removed_total";

/// Counter: flushes that met a message the durable tier holds at the same (session, seq)
/// with other content (nothing of that batch committed).
pub const SEQ_CONFLICTS: &str = "agentstate_seq_conflicts_total";
/// Counter: partitions found behind their durable tier (a failover to a lagging replica, a
/// restart from an older snapshot) and repaired.
pub const ROLLBACKS: &str = "agentstate_rollbacks_total";
/// Counter: records a rollback repair put back into Redis from the durable tier.
pub const ROLLBACK_RECORDS: &str = "agentstate_rollback_records_total";

/// Gauge: wal entries in this daemon's spool, waiting to be replayed into the durable tier.
pub const SPOOL_ENTRIES: &str = "agentstate_spool_entries";
/// Gauge: bytes of those entries.
pub const SPOOL_BYTES: &str = "agentstate_spool_bytes";
/// Gauge: seconds the durable tier has failed to commit (0 while it commits).
pub const DURABLE_DOWN: &str = "agentstate_durable_down_seconds";
/// Gauge: the wal budget, bytes: past it the daemon moves wal entries into its spool.
pub const WAL_BUDGET: &str = "agentstate_wal_budget_bytes";

/// Whether this process' daemon spools (its spool holds entries, or it moves them there
/// now): `/readyz` answers "degraded: spooling".
static SPOOLING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process' daemon spools ([`outage`] last said so).
pub(crate) fn spooling() -> bool {
    SPOOLING.load(std::sync::atomic::Ordering::Relaxed)
}

/// The outage figures of a full pass: the spool's `entries` and `bytes`, the seconds the
/// tier has been `down`, the wal `budget`, and whether the daemon is `spooling`.
pub(crate) fn outage(entries: u64, bytes: u64, down: f64, budget: u64, spooling: bool) {
    metrics::gauge!(SPOOL_ENTRIES).set(entries as f64);
    metrics::gauge!(SPOOL_BYTES).set(bytes as f64);
    metrics::gauge!(DURABLE_DOWN).set(down);
    metrics::gauge!(WAL_BUDGET).set(budget as f64);
    SPOOLING.store(spooling, std::sync::atomic::Ordering::Relaxed);
}

/// The bucket bounds of [`BATCH_SECONDS`], seconds.
pub const BATCH_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// A flush transaction committed `entries` in `took`.
pub(crate) fn batch_committed(entries: usize, took: Duration) {
    metrics::counter!(FLUSHED).increment(entries as u64);
    metrics::histogram!(BATCH_SECONDS).record(took.as_secs_f64());
}

/// The bucket bounds of [`WRITE_BEHIND`], ms: also `agentstate stats`' buckets.
pub const WRITE_BEHIND_BOUNDS_MS: &[u64] = &[1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000];

/// [`WRITE_BEHIND_BOUNDS_MS`] in seconds, as the Prometheus recorder takes them.
pub(crate) fn write_behind_bounds() -> Vec<f64> {
    WRITE_BEHIND_BOUNDS_MS
        .iter()
        .map(|&ms| ms as f64 / 1000.0)
        .collect()
}

/// A committed wal entry waited `ms` for its commit.
pub(crate) fn write_behind(ms: u64) {
    metrics::histogram!(WRITE_BEHIND).record(ms as f64 / 1000.0);
}

/// Describes every series (its `# HELP` line) and starts the daemon's counters at 0, so
/// `rate()` and alerts see them before their first event. Called once the recorder is
/// installed.
pub(crate) fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!(
        PENDING,
        "wal entries the durable tier has not committed yet"
    );
    describe_gauge!(
        DECISIONS_PENDING,
        "decisions-stream entries the durable tier has not committed yet"
    );
    describe_gauge!(
        LAG,
        Unit::Seconds,
        "age of the oldest entry not yet committed (0 when none)"
    );
    describe_counter!(FLUSHED, "stream entries committed to the durable tier");
    describe_histogram!(
        BATCH_SECONDS,
        Unit::Seconds,
        "duration of one flush transaction"
    );
    describe_histogram!(
        WRITE_BEHIND,
        Unit::Seconds,
        "time from an acknowledged write to the durable commit that holds it"
    );
    describe_gauge!(OWNED, "partitions this daemon holds the lease of");
    describe_counter!(LEASE_CHANGES, "leases this daemon took, lost or released");
    describe_counter!(RESTORES, "restore requests served, by result");
    describe_gauge!(
        CONSUMER_PENDING,
        "decisions delivered to the group and not acknowledged"
    );
    describe_gauge!(DEAD_LETTERS, "dead letters of the group");
    describe_counter!(GC_REMOVED, "rows the retention policy removed, by kind");
    describe_counter!(
        SEQ_CONFLICTS,
        "flushes refused: the durable tier holds another message at the seq"
    );
    describe_counter!(
        ROLLBACKS,
        "partitions found behind their durable tier and repaired"
    );
    describe_counter!(
        ROLLBACK_RECORDS,
        "records rollback repairs put back into Redis"
    );
    metrics::counter!(FLUSHED).absolute(0);
    for counter in [SEQ_CONFLICTS, ROLLBACKS, ROLLBACK_RECORDS] {
        metrics::counter!(counter).absolute(0);
    }
    for change in ["taken", "lost", "released"] {
        metrics::counter!(LEASE_CHANGES, "change" => change).absolute(0);
    }
    for result in ["restored", "live", "unknown"] {
        metrics::counter!(RESTORES, "result" => result).absolute(0);
    }
    for kind in ["session", "tombstone", "checkpoint", "decision"] {
        metrics::counter!(GC_REMOVED, "kind" => kind).absolute(0);
    }
    metrics::gauge!(OWNED).set(0.0);
}

/// What happened to one of this daemon's leases.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LeaseChange {
    /// Claimed a partition it did not hold.
    Taken,
    /// Found its lease gone or fenced.
    Lost,
    /// Gave it up (rebalancing, stopping).
    Released,
}

/// One lease changed hands.
pub(crate) fn lease_changed(change: LeaseChange) {
    let change = match change {
        LeaseChange::Taken => "taken",
        LeaseChange::Lost => "lost",
        LeaseChange::Released => "released",
    };
    metrics::counter!(LEASE_CHANGES, "change" => change).increment(1);
}

/// This daemon now holds `n` partitions.
pub(crate) fn owned(n: usize) {
    metrics::gauge!(OWNED).set(n as f64);
}

/// One restore request was answered with `result` (`restored`, `live`, `unknown`).
pub(crate) fn restore_served(result: &'static str) {
    metrics::counter!(RESTORES, "result" => result).increment(1);
}

/// A flush met another message at a committed (session, seq).
pub(crate) fn seq_conflict() {
    metrics::counter!(SEQ_CONFLICTS).increment(1);
}

/// A partition behind its durable tier was repaired, putting back `records`.
pub(crate) fn rollback_repaired(records: u64) {
    metrics::counter!(ROLLBACKS).increment(1);
    metrics::counter!(ROLLBACK_RECORDS).increment(records);
}

/// The retention policy removed `removed`.
pub(crate) fn gc_removed(removed: &[Removal]) {
    for r in removed {
        let kind = match r {
            Removal::Session { .. } => "session",
            Removal::Tombstone { .. } => "tombstone",
            Removal::Checkpoint { .. } => "checkpoint",
            Removal::Decision { .. } => "decision",
        };
        metrics::counter!(GC_REMOVED, "kind" => kind).increment(1);
    }
}
