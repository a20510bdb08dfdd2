//! The spill daemon: the only durable-tier writer. Per partition it holds a lease, flushes the
//! `wal` and `decisions` streams into the durable tier (`flusher`), serves restore requests
//! from agent processes (`restore`) and trims the streams below what it committed
//! (`trimmer`). Runs embedded ([`SpillDaemon::run`] with a `CancellationToken`) or as
//! `agentstate spill`.
//!
//! # Layout
//! - this module: the daemon loop (passes over the partitions, run / run_once, figures).
//! - `binding`: the namespace bound to one durable tier (its identity in both tiers).
//! - `lease`: the partition lease with its fencing token (claim, release, its value).
//! - `ownership`: taking a partition, noticing and recovering from a Redis loss.
//! - `membership`: sharing partitions among daemons.
//! - `flusher`: one batch read from Redis → one durable-tier transaction, cursors included
//!   (exactly once; `crate::durable` applies it), then the committed ids published.
//! - `restore`: the daemon side of restore (serving requests, re-seeding after a loss).
//! - `rollback`: a partition whose Redis came back behind its durable tier, found before
//!   agents write and repaired before it opens.
//! - `drain`: `spill --once`, which drains every partition or names those it could not.
//! - `trimmer`: XTRIM below the committed ids, keeping undelivered decisions up to a cap.
//! - `spool`: the local file wal entries move into while the durable tier is down or the
//!   wal passes its budget; `outage` decides when, spools and replays.
//! - [`inspect`]: read-only views for the CLI: `stats` (Redis only) and `export` (durable).
//! - `events`: a pass's events, logged once per kind.
//! - `metrics`: the daemon's Prometheus series, one call per instrumentation point.
//! - `behind`: the write-behind window (acknowledged write → its commit) as a histogram.
//! - `wake`: the wait between passes, which a write or a restore request ends.
//! - `expiry`: long-term memory items whose TTL ran out, removed in every full pass.

mod behind;
mod binding;
mod drain;
mod events;
mod expiry;
mod flusher;
pub mod inspect;
mod lease;
mod membership;
pub(crate) mod metrics;
mod outage;
mod ownership;
mod restore;
mod rollback;
mod spool;
mod trimmer;
mod wake;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

pub use crate::durable::retention::Retention;
use crate::durable::{self, retention, Durable};
use crate::error::{Error, Result};
use crate::store::Store;
use events::PassEvents;
pub use restore::restore_from_durable;

/// Least time between two trims of a partition outside full passes: trimming is several
/// round trips, which a pass a write woke for would otherwise spend on every commit.
const TRIM_EVERY: Duration = Duration::from_millis(100);

/// The shortest response timeout the daemon's calls get, however short the lease: a loaded
/// machine must not read as an outage.
const MIN_RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// How the daemon runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SpillConfig {
    /// The durable tier, as `--db` names it: a SQLite file (created with the schema when
    /// absent) or a `postgres://` / `postgresql://` URL.
    pub durable: PathBuf,
    /// Longest time between two full passes over every partition (leases renewed, shares
    /// rebalanced, free partitions claimed), at most a third of the lease time (default
    /// 1 s). Writes do not wait for it: the daemon blocks on its partitions' streams and
    /// commits each write as it arrives (`wake`).
    pub interval: Duration,
    /// Most entries read per stream per transaction (default 5000).
    pub batch_size: usize,
    /// Lease time; a standby takes a partition over this long after its owner died
    /// (default 3 s).
    pub lease_ttl: Duration,
    /// Most decisions kept for consumer groups that have not been delivered them yet
    /// (default 100 000); older ones are trimmed with a warning once the durable tier has them.
    pub decisions_cap: usize,
    /// What the durable history keeps (default: everything), applied every `gc_interval`.
    pub retention: Retention,
    /// How often the retention policy runs (default 1 h; the first run is at start).
    pub gc_interval: Duration,
    /// Bytes of wal the daemon's partitions may hold in Redis before it moves entries into
    /// its spool. `None` (the default): half of what Redis has free under `maxmemory` when
    /// that is set, else 256 MiB.
    pub wal_budget: Option<u64>,
    /// The directory of the spool file. `None` (the default): beside a SQLite file, the
    /// working directory for PostgreSQL.
    pub spool: Option<PathBuf>,
}

impl SpillConfig {
    /// Defaults, writing to the durable tier `durable` (a SQLite path or a PostgreSQL URL).
    pub fn new(durable: impl Into<PathBuf>) -> Self {
        SpillConfig {
            durable: durable.into(),
            interval: Duration::from_secs(1),
            batch_size: 5000,
            lease_ttl: Duration::from_secs(3),
            decisions_cap: 100_000,
            retention: Retention::default(),
            gc_interval: Duration::from_secs(3600),
            wal_budget: None,
            spool: None,
        }
    }
    /// Sets the wal budget, bytes.
    pub fn wal_budget(mut self, bytes: u64) -> Self {
        self.wal_budget = Some(bytes);
        self
    }
    /// Sets the spool's directory.
    pub fn spool(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spool = Some(dir.into());
        self
    }
    /// Sets the longest time between full passes.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
    /// Sets the batch size.
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }
    /// Sets the lease time.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }
    /// Sets the retention policy the daemon applies to the durable tier.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }
    /// Sets how often the retention policy runs.
    pub fn gc_interval(mut self, every: Duration) -> Self {
        self.gc_interval = every;
        self
    }
    /// Sets the cap on retained undelivered decisions.
    pub fn decisions_cap(mut self, cap: usize) -> Self {
        self.decisions_cap = cap.max(1);
        self
    }
}

/// What one or more passes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PassReport {
    /// Partitions this daemon owned.
    pub partitions: u32,
    /// wal entries committed to the durable tier.
    pub wal: u64,
    /// decisions-stream entries committed to the durable tier.
    pub decisions: u64,
    /// Sessions restored into Redis.
    pub restored: u64,
}

impl PassReport {
    fn add(&mut self, other: PassReport) {
        self.partitions = self.partitions.max(other.partitions);
        self.wal += other.wal;
        self.decisions += other.decisions;
        self.restored += other.restored;
    }
    fn idle(&self) -> bool {
        self.wal == 0 && self.decisions == 0 && self.restored == 0
    }
}

/// This daemon's view of one partition.
#[derive(Debug, Default)]
pub(crate) struct Partition {
    /// Fencing token of the lease we hold; 0 when we do not own the partition.
    token: i64,
    /// The token of our last lease when we lost it (0: none since we took the partition).
    lapsed: i64,
    /// When the lease was last renewed.
    renewed: Option<Instant>,
    /// Last wal id SQLite committed (valid while we own the partition).
    wal: String,
    /// Last wal id the spool holds, when it holds entries past `wal` (else empty): Redis is
    /// trimmed below it, and the flush replays the spool before it reads Redis again.
    spooled: String,
    /// Last decisions id SQLite committed.
    decisions: String,
    /// Entries committed since `window`, for the flush rate.
    window_count: u64,
    /// Start of the current rate window.
    window: Option<Instant>,
    /// Entries committed since this daemon took the partition.
    flushed: u64,
    /// Whether the streams moved since the last trim.
    trim_due: bool,
    /// When the partition was last trimmed.
    trimmed: Option<Instant>,
    /// Whether restore requests may wait: a full pass, or the restore bell rang (`wake`).
    restore_due: bool,
    /// Write-behind windows of the entries committed since `window` (published with the
    /// figures).
    behind: behind::Histogram,
    /// The last restore-bell entry the wait saw (`wake`); empty before the first.
    rung: String,
    /// Whether the partition's last pass failed: the wait leaves it to the next full pass.
    failed: bool,
    /// Whether user data and rounds are still to be re-seeded from SQLite (Redis lost its
    /// state: `<prefix>:{p}:committed` has no `seeded` field); done once the flush drained.
    reseed_due: bool,
}

/// The spill daemon. Build it with [`SpillDaemon::open`], then [`run`](SpillDaemon::run) it
/// until cancelled or [`run_once`](SpillDaemon::run_once).
pub struct SpillDaemon {
    /// Redis side (the namespace's key formatter and scripts).
    store: Store,
    /// Timing and sizes.
    config: SpillConfig,
    /// Unique per instance: `<pid>-<random>`; written into leases.
    owner: String,
    /// The durable tier: SQLite's one writing connection, or a PostgreSQL pool.
    db: Durable,
    /// The tier's identity and location, bound again after Redis lost the binding.
    binding: binding::Binding,
    /// Per-partition state, indexed by partition.
    parts: Vec<Partition>,
    /// Stops the batch loops between transactions.
    cancel: CancellationToken,
    /// What happened to partitions during the current pass, logged once per kind at its end.
    events: PassEvents,
    /// When the heartbeat in `<prefix>:daemons` was last renewed (`membership`).
    heartbeat: Option<Instant>,
    /// How many partitions this daemon owns at most: partitions / live daemons, rounded up.
    share: u32,
    /// `spill --once`: claims every free partition, whatever its share (`drain`).
    draining: bool,
    /// The blocking read the daemon waits on between passes (`wake`).
    waker: wake::Waker,
    /// Set when a lease was lost: the next step is a full pass, which takes it back.
    full_pass_due: bool,
    /// The spool and the durable tier's outage (`outage`).
    outage: outage::Outage,
}

impl std::fmt::Debug for SpillDaemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillDaemon")
            .field("owner", &self.owner)
            .field("db", &durable::Location::of(&self.config.durable).display())
            .finish()
    }
}

impl SpillDaemon {
    /// Opens (creating or migrating) the durable tier (a SQLite file or a PostgreSQL
    /// database), checks its namespace and binds the namespace in Redis to it (`binding`).
    /// A namespace bound to another tier is [`Error::NamespaceMismatch`], before anything is
    /// created or written.
    pub async fn open(store: Store, config: SpillConfig) -> Result<SpillDaemon> {
        // Calls bounded by the lease time (a call that outlasts it is moot: the partition
        // may have moved), so a cut network shows as an outage within seconds.
        let timeout = config
            .lease_ttl
            .max(MIN_RESPONSE_TIMEOUT)
            .min(store.config().response_timeout);
        let store = store.with_response_timeout(timeout).await?;
        if let Some(bound) = binding::recorded(&store).await? {
            let ours = durable::recorded_identity(&config.durable).await?;
            if ours.as_deref() != Some(bound.identity.as_str()) {
                return Err(binding::refusal(
                    &store,
                    &bound,
                    &config.durable,
                    ours.as_deref(),
                ));
            }
        }
        let ns = &store.config().namespace;
        let db = Durable::open_writer(&config.durable, ns, config.lease_ttl).await?;
        let binding = binding::Binding::of(&config.durable, db.identity().await?);
        binding::bind(&store, &binding, &config.durable).await?;
        store.preload_scripts().await?;
        let upgraded = store.upgrade_session_indexes().await?;
        if upgraded > 0 {
            tracing::info!(
                indexes = upgraded,
                "session indexes written by an earlier build are in buckets now"
            );
        }
        let parts = (0..store.keys().partitions())
            .map(|_| Partition::default())
            .collect();
        let outage = outage::Outage::open(&store, &config, &binding.identity).await;
        Ok(SpillDaemon {
            owner: format!("{}-{:08x}", std::process::id(), rand::random::<u32>()),
            store,
            config,
            db,
            binding,
            parts,
            cancel: CancellationToken::new(),
            events: PassEvents::default(),
            heartbeat: None,
            share: 0,
            draining: false,
            waker: wake::Waker::default(),
            full_pass_due: true,
            outage,
        })
    }

    /// A daemon on `config`'s durable tier for a command that is not the daemon itself, or
    /// `None` when this process does not hold the namespace's tier: the tier does not exist
    /// or has no identity (nothing is created), or Redis binds the namespace to another
    /// tier. `may_bind`: an unbound namespace is bound to this tier (an explicit `restore`);
    /// otherwise only a namespace already bound to it is taken (a command's implicit check,
    /// which must not bind a namespace whose Redis lost its data to a stale file).
    pub(crate) async fn open_if_holding_tier(
        store: Store,
        config: SpillConfig,
        may_bind: bool,
    ) -> Result<Option<SpillDaemon>> {
        let ours = match durable::recorded_identity(&config.durable).await {
            Ok(Some(ours)) => ours,
            Ok(None) => return Ok(None),
            Err(err) if may_bind => return Err(err),
            Err(err) => {
                tracing::debug!(error = %err, "the durable tier cannot be read: acting as an agent");
                return Ok(None);
            }
        };
        let holds = match binding::recorded(&store).await? {
            Some(bound) => bound.identity == ours,
            None => may_bind,
        };
        if !holds {
            return Ok(None);
        }
        SpillDaemon::open(store, config).await.map(Some)
    }

    /// This instance's owner id (as written into the leases).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Runs until `shutdown` completes (any future: a signal, a channel, a token's
    /// `cancelled()`): a full pass over every partition at least every `interval`, and
    /// between them a wait that a write or a restore request ends, followed by a pass over
    /// the partitions it woke for. On
    /// shutdown it finishes the transaction in flight, releases its leases and returns.
    /// Errors of a pass (Redis down, ...) are logged and retried. It logs one line when it
    /// starts (Redis address, SQLite file, partitions, lease time) and one when it stops, and
    /// one line per event: an outage is one warning when it starts and one when Redis
    /// answers again, however many partitions and passes it spans.
    ///
    /// ```no_run
    /// # async fn demo() -> agentstate::Result<()> {
    /// use agentstate::{Config, SpillConfig, SpillDaemon, Store};
    /// let store = Store::connect(Config::new("redis://127.0.0.1:6379")).await?;
    /// let daemon = SpillDaemon::open(store, SpillConfig::new("./agentstate.db")).await?;
    /// daemon.run(async { tokio::signal::ctrl_c().await.unwrap_or(()) }).await
    /// # }
    /// ```
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
        // The passes watch a token (they check it between steps); `shutdown` fires it.
        let cancel = CancellationToken::new();
        let mut run = std::pin::pin!(self.run_until(cancel.clone()));
        tokio::select! {
            done = &mut run => return done,
            () = shutdown => cancel.cancel(),
        }
        run.await
    }

    /// [`SpillDaemon::run`] until `cancel` fires.
    async fn run_until(mut self, cancel: CancellationToken) -> Result<()> {
        self.cancel = cancel.clone();
        let started = Instant::now();
        let redis = crate::address::redacted(&self.store.config().redis_url);
        let mut total = PassReport::default();
        // Since when passes fail (Redis unreachable, ...), and the error last logged.
        let mut failing: Option<(Instant, String)> = None;
        let mut first = true;
        let mut last_gc: Option<Instant> = None;
        // When the next full pass is due.
        let mut next_full: Option<Instant> = None;
        while !cancel.is_cancelled() {
            if !self.config.retention.keeps_everything()
                && last_gc.is_none_or(|t| t.elapsed() >= self.config.gc_interval)
            {
                last_gc = Some(Instant::now());
                if let Err(err) = self.collect_garbage().await {
                    tracing::error!(error = %err, "spill daemon stopped: its SQLite file cannot be used; Redis keeps every entry SQLite has not committed");
                    self.release_all().await;
                    return Err(err);
                }
            }
            // The leases the first pass takes are part of starting: the start line says
            // which, after it.
            self.events.quiet_takes(first);
            let full = first
                || failing.is_some()
                || std::mem::take(&mut self.full_pass_due)
                || next_full.is_none_or(|t| Instant::now() >= t);
            let outcome = if full {
                next_full = Some(Instant::now() + self.pass_every());
                self.pass().await
            } else {
                let until = next_full.map_or(Duration::ZERO, |t| {
                    t.saturating_duration_since(Instant::now())
                });
                let woken = tokio::select! {
                    _ = cancel.cancelled() => break,
                    woken = self.wait_for_work(until) => woken,
                };
                match woken {
                    Ok((parts, _)) if parts.is_empty() => continue,
                    Ok((parts, prefetched)) => self.pass_over(&parts, false, prefetched).await,
                    Err(err) => Err(err),
                }
            };
            if std::mem::take(&mut first) {
                let owned: Vec<u32> = (0..self.parts.len() as u32)
                    .filter(|p| self.parts[*p as usize].token > 0)
                    .collect();
                tracing::info!(
                    redis = %redis,
                    db = %durable::Location::of(&self.config.durable).display(),
                    partitions = self.store.keys().partitions(),
                    owns = %events::ranges(&owned),
                    lease_ms = self.config.lease_ttl.as_millis() as u64,
                    owner = %self.owner,
                    "spill daemon started"
                );
                self.warn_eviction_risk().await;
            }
            let pause = match outcome {
                Ok(report) => {
                    if let Some((since, _)) = failing.take() {
                        tracing::warn!(
                            redis = %redis,
                            after_s = %format!("{:.1}", since.elapsed().as_secs_f64()),
                            "spill passes work again"
                        );
                    }
                    total.add(report);
                    // The wait that follows is the pause: it returns at once while
                    // anything is left to flush.
                    Duration::ZERO
                }
                Err(err @ Error::NamespaceMismatch(_)) => {
                    // Redis lost its data and another tier's daemon bound the namespace
                    // first: flushing on would split the namespace between two tiers.
                    tracing::error!(error = %err, "spill daemon stopped");
                    self.release_all().await;
                    return Err(err);
                }
                Err(err) if err.is_database_unusable() => {
                    // Committing on would write where nobody reads (or into a damaged
                    // file), and trimming would drop the only copy: stop.
                    tracing::error!(error = %err, "spill daemon stopped: its SQLite file cannot be used; Redis keeps every entry SQLite has not committed");
                    self.release_all().await;
                    return Err(err);
                }
                Err(err) => {
                    // An outage is one event whatever each attempt's error says (a broken
                    // pipe, then connection refused).
                    let postgres = matches!(err, Error::Postgres { .. });
                    let text = if err.is_unavailable() {
                        "redis unavailable".to_string()
                    } else if postgres {
                        "postgres failing".to_string()
                    } else {
                        err.to_string()
                    };
                    match &failing {
                        Some((_, logged)) if *logged == text => {
                            tracing::debug!(error = %err, "spill pass failed again; retrying")
                        }
                        _ if err.is_unavailable() => tracing::warn!(
                            redis = %redis,
                            error = %err,
                            "cannot reach Redis; retrying until it answers"
                        ),
                        _ if postgres => tracing::warn!(
                            db = %durable::Location::of(&self.config.durable).display(),
                            error = %err,
                            "cannot commit to PostgreSQL; Redis keeps every entry it has not committed (nothing is trimmed); retrying with backoff — check the server is up and reachable at --db"
                        ),
                        _ => tracing::error!(error = %err, "spill pass failed; retrying"),
                    }
                    let since = failing.take().map_or_else(Instant::now, |(t, _)| t);
                    failing = Some((since, text));
                    // Backoff grows with the outage: 200 ms plus half its length so far, at
                    // most 5 s.
                    let waited = since.elapsed().as_millis() as u64;
                    Duration::from_millis((200 + waited / 2).min(5000))
                }
            };
            if !pause.is_zero() {
                // The blocking connection may be the broken one.
                self.waker = wake::Waker::default();
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
        self.release_all().await;
        tracing::info!(
            owner = %self.owner,
            wal = total.wal,
            decisions = total.decisions,
            restored = total.restored,
            ran_s = %format!("{:.1}", started.elapsed().as_secs_f64()),
            "spill daemon stopped; leases released"
        );
        Ok(())
    }

    /// Applies the retention policy to the durable tier and logs what it removed. An error is
    /// logged and the next run retries; a file that cannot be used stops the daemon.
    async fn collect_garbage(&self) -> Result<()> {
        let policy = self.config.retention.clone();
        match self.db.retain(policy).await {
            Ok(removed) if removed.is_empty() => Ok(()),
            Ok(removed) => {
                metrics::gc_removed(&removed);
                let count = |kind: fn(&retention::Removal) -> bool| {
                    removed.iter().filter(|r| kind(r)).count()
                };
                tracing::info!(
                    sessions = count(|r| matches!(r, retention::Removal::Session { .. })),
                    tombstones = count(|r| matches!(r, retention::Removal::Tombstone { .. })),
                    checkpoints = count(|r| matches!(r, retention::Removal::Checkpoint { .. })),
                    decisions = count(|r| matches!(r, retention::Removal::Decision { .. })),
                    "retention: removed history the policy does not keep"
                );
                Ok(())
            }
            Err(err) if err.is_database_unusable() => Err(err),
            Err(err) => {
                tracing::warn!(error = %err, "retention gc failed; retrying at the next interval");
                Ok(())
            }
        }
    }

    /// Logs a warning when Redis' `maxmemory-policy` can evict the namespace's keys (see
    /// [`crate::memory::EvictionRisk`]); a Redis that does not say is not a failure.
    async fn warn_eviction_risk(&self) {
        match self.store.eviction_risk().await {
            Ok(Some(risk)) => tracing::warn!("{}", risk.explain()),
            Ok(None) => {}
            Err(err) => tracing::debug!(error = %err, "could not read maxmemory-policy"),
        }
    }

    /// Passes until nothing is left to flush or restore in the partitions it can own within
    /// its share, then releases its leases: a command's check of this Redis, which leaves
    /// partitions other daemons hold to them.
    pub(crate) async fn run_until_idle(mut self) -> Result<PassReport> {
        let mut total = PassReport::default();
        let result = loop {
            match self.pass().await {
                Ok(report) => {
                    total.add(report);
                    if report.idle() {
                        break Ok(total);
                    }
                }
                Err(err) => break Err(err),
            }
        };
        self.release_all().await;
        result
    }

    /// One pass over every partition: hold the lease, flush to the end, serve restore
    /// requests, trim. A partition that fails (an entry SQLite rejects, say) is logged and
    /// retried next pass without holding the others back; the pass fails only when no
    /// partition could be worked on (Redis down).
    pub async fn pass(&mut self) -> Result<PassReport> {
        self.rebalance().await?;
        self.refresh_outage().await;
        for part in &mut self.parts {
            part.failed = false;
            part.restore_due = true;
        }
        let all: Vec<u32> = (0..self.store.keys().partitions()).collect();
        self.pass_over(&all, true, HashMap::new()).await
    }

    /// The pass over partitions `parts` (all of them, or those a wait woke for, with the
    /// batches it read); see [`SpillDaemon::pass`]. `full`: a full pass, which trims
    /// whatever moved.
    async fn pass_over(
        &mut self,
        parts: &[u32],
        full: bool,
        prefetched: HashMap<u32, flusher::Prefetched>,
    ) -> Result<PassReport> {
        let mut report = PassReport::default();
        let (mut worked, mut failure, mut unreachable) = (false, None, None);
        // The partitions a wait woke for commit in one transaction; each pass below then
        // goes on from what it committed.
        let mut together = Vec::new();
        let down = self.outage.down_since.is_some();
        if !full && !down && (parts.len() > 1 || !prefetched.is_empty()) && !self.store.is_cluster()
        {
            together = self.flush_together(parts, prefetched).await?;
        }
        for &p in parts {
            if self.cancel.is_cancelled() {
                break;
            }
            let flushed = together
                .iter()
                .find(|(q, _)| *q == p)
                .and_then(|(_, counts)| *counts);
            match self.pass_partition(p, &mut report, full, flushed).await {
                Ok(()) => worked = true,
                // Nor is a SQLite file that cannot be used (removed, replaced, corrupt), nor
                // a namespace bound to another tier.
                Err(err)
                    if err.is_database_unusable() || matches!(err, Error::NamespaceMismatch(_)) =>
                {
                    self.events.emit(false);
                    return Err(err);
                }
                // Redis or PostgreSQL out of reach is not about one partition: the pass
                // fails as a whole (one log line per outage, and backoff).
                Err(err) if err.is_unavailable() || err.is_durable_unreachable() => {
                    // One Redis out of reach fails every partition, each after its
                    // timeout: stop at the first. (On a cluster, one node out of reach
                    // leaves the others' partitions to work on.)
                    let stop = err.is_unavailable() && !self.store.is_cluster();
                    unreachable.get_or_insert(err);
                    if stop {
                        break;
                    }
                }
                Err(err) => {
                    if let Error::SeqConflict { session, seq } = &err {
                        tracing::error!(partition = p, session = %session, seq, "a flush met another message at a seq the durable tier committed: kept the durable row, committed nothing for the partition");
                        metrics::seq_conflict();
                    }
                    self.events.failed(p, &err);
                    self.parts[p as usize].failed = true;
                    failure = Some(err);
                }
            }
        }
        match (unreachable, failure) {
            (Some(err), _) => {
                self.events.emit(false);
                Err(err)
            }
            // No partition could be worked on: one error for the caller to log.
            (None, Some(err)) if !worked => {
                self.events.emit(false);
                Err(err)
            }
            _ => {
                self.explain_lost().await;
                self.events.emit(true);
                metrics::owned(self.parts.iter().filter(|p| p.token > 0).count());
                Ok(report)
            }
        }
    }

    /// The pass over partition `p` (see [`SpillDaemon::pass`]); adds what it did to `report`.
    /// Outside a full pass it serves restore requests only when the bell rang, and trims at
    /// most every [`TRIM_EVERY`]: a write's wake costs the read, the commit and its
    /// publication. `flushed`: the batch [`SpillDaemon::flush_together`] committed already.
    async fn pass_partition(
        &mut self,
        p: u32,
        report: &mut PassReport,
        full: bool,
        mut flushed: Option<(usize, usize)>,
    ) -> Result<()> {
        // Above its share (`membership`), a daemon leaves the partitions it does not hold
        // to the others.
        if self.parts[p as usize].token == 0
            && !self.below_share()
            && !self.draining
            && !self.outage.owes(p)
        {
            return Ok(());
        }
        if !self.hold_lease(p).await? {
            return Ok(());
        }
        // A full pass, and every new lease (`hold_lease`), checks the Redis history.
        if full && !self.open_history(p).await? {
            return Ok(());
        }
        report.partitions += 1;
        if self.outage.spool_due() {
            self.spool_partition(p).await?;
            if self.parts[p as usize].token == 0 {
                return Ok(());
            }
        }
        // A tier that is down is probed (at most every second) rather than waited on.
        let drained = self.durable_answers().await
            && loop {
                let step = match flushed.take() {
                    Some(counts) => Some(counts),
                    None => self.flush_batch(p).await?,
                };
                let Some((w, d)) = step else {
                    break false;
                };
                report.wal += w as u64;
                report.decisions += d as u64;
                if w < self.config.batch_size && d < self.config.batch_size {
                    break true;
                }
                if self.cancel.is_cancelled() || !self.hold_lease(p).await? {
                    break false;
                }
            };
        if self.parts[p as usize].token == 0 {
            return Ok(());
        }
        if drained && self.parts[p as usize].reseed_due {
            self.complete_reseed(p).await?;
        }
        if std::mem::take(&mut self.parts[p as usize].restore_due) {
            report.restored += restore::serve_requests(&self.store, &self.db, p).await?;
        }
        let part = &self.parts[p as usize];
        let trim_now = full || part.trimmed.is_none_or(|t| t.elapsed() >= TRIM_EVERY);
        if part.trim_due && trim_now {
            let part = &mut self.parts[p as usize];
            part.trim_due = false;
            part.trimmed = Some(Instant::now());
            let part = &self.parts[p as usize];
            let lease = lease::value(&self.owner, part.token);
            let cap = self.config.decisions_cap;
            let floor = part.floor();
            if !trimmer::trim(&self.store, p, &lease, floor, &part.decisions, cap).await? {
                self.lost_lease(p);
                return Ok(());
            }
        }
        if full {
            expiry::expire_memory(&self.store, p).await?;
        }
        self.publish_stats(p).await
    }

    /// Publishes this partition's figures in `<prefix>:{p}:spill` about once a second.
    async fn publish_stats(&mut self, p: u32) -> Result<()> {
        let part = &mut self.parts[p as usize];
        let start = *part.window.get_or_insert_with(Instant::now);
        let elapsed = start.elapsed();
        if elapsed < Duration::from_secs(1) {
            return Ok(());
        }
        let rate = part.window_count as f64 / elapsed.as_secs_f64();
        part.window = Some(Instant::now());
        part.window_count = 0;
        let flushed = part.flushed;
        // The last window that committed anything stays readable until the next one.
        let behind = std::mem::take(&mut part.behind);
        if rate > 0.0 {
            tracing::debug!(partition = p, rate = format!("{rate:.0}"), flushed, wal = %part.wal, decisions = %part.decisions, "spill figures");
        }
        let mut conn = self.store.conn().await?;
        let mut hset = redis::cmd("HSET");
        hset.arg(self.store.keys().spill_stats(p))
            .arg("owner")
            .arg(&self.owner)
            .arg("rate")
            .arg(format!("{rate:.1}"))
            .arg("flushed")
            .arg(flushed)
            .arg("at")
            .arg(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
            );
        if behind.total() > 0 {
            hset.arg("behind").arg(behind.to_field());
        }
        let held = self.outage.held.get(&p).copied().unwrap_or_default();
        let down = self
            .outage
            .down_since
            .map_or(0, |t| t.elapsed().as_millis() as u64);
        hset.arg("spool_entries")
            .arg(held.entries)
            .arg("spool_bytes")
            .arg(held.bytes)
            .arg("spool_oldest")
            .arg(held.oldest_ms)
            .arg("durable_down_ms")
            .arg(down)
            .arg("wal_budget")
            .arg(self.outage.budget);
        let _: () = hset.query_async(&mut conn).await?;
        Ok(())
    }
}
