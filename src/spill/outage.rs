//! Through a durable-tier outage: when the tier has failed for [`DOWN_BEFORE_SPOOLING`], or
//! the wal of the daemon's partitions in Redis passes its budget, the owner moves wal entries
//! into its spool (`spool`) and trims Redis below what the spool committed, so the live tier
//! keeps serving. The spool is replayed into the tier through the flush, before Redis is read
//! again, as soon as the tier commits.
//!
//! The invariant: a partition's wal is trimmed below `max(durable cursor, spooled)`, where
//! `spooled` is the last id the spool committed (fsynced); `<prefix>:{p}:committed` publishes
//! the durable cursor only, so a durable write is acknowledged only once the durable tier
//! holds it. Before its first trim past the durable cursor, the owner records its spool's
//! identity in that hash (field `spool`, fenced by the lease); a daemon that takes the
//! partition with another spool's identity there releases it again: only the spool's daemon
//! (restarted on the same file) may commit past it. The field is cleared once the spool is
//! drained.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::spool::{Held, Spool};
use super::{flusher, lease, SpillConfig, SpillDaemon};
use crate::durable::plan::Batch;
use crate::durable::Location;
use crate::error::{Error, Result};
use crate::records::{parse_stream_id, WalEntry};
use crate::store::Store;

/// How long the durable tier fails before the daemon spools.
pub(super) const DOWN_BEFORE_SPOOLING: Duration = Duration::from_secs(2);

/// Least time between two probes of a tier that is down.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The wal budget when Redis has no `maxmemory`.
const DEFAULT_BUDGET: u64 = 256 << 20;

/// The field of `<prefix>:{p}:committed` naming the spool that holds entries of `p` past
/// the durable cursor (empty or absent: none).
pub(super) const SPOOL_FIELD: &str = "spool";

/// The daemon's spool and what it knows of the durable tier's outage.
#[derive(Debug, Default)]
pub(super) struct Outage {
    /// The spool; `None` when it could not be opened (logged): Redis then holds everything.
    spool: Option<Spool>,
    /// `--wal-budget`, when set.
    configured: Option<u64>,
    /// The wal budget in force, bytes.
    pub(super) budget: u64,
    /// Whether the owned partitions' wal in Redis was past the budget at the last look.
    over_budget: bool,
    /// Since when the durable tier fails (from the start of the first commit that failed).
    pub(super) down_since: Option<Instant>,
    /// The last probe of a tier that is down: when, and whether it took a write.
    probed: Option<(Instant, bool)>,
    /// Whether the last spool write failed (logged once).
    spool_failing: bool,
    /// What the spool holds, per partition (refreshed every full pass).
    pub(super) held: BTreeMap<u32, Held>,
    /// Partitions the spool held entries of when the daemon started: it takes them back
    /// whatever its share.
    owed: BTreeSet<u32>,
}

impl Outage {
    /// Opens the spool `config` names (by default beside a SQLite file, or in the working
    /// directory for PostgreSQL) for the tier with identity `tier`, and resolves the budget.
    /// A spool that cannot be opened is logged, not fatal: the daemon then never trims what
    /// the durable tier did not commit, as without one.
    pub(super) async fn open(store: &Store, config: &SpillConfig, tier: &str) -> Outage {
        let (dir, base) = default_place(&config.durable);
        let dir = config.spool.clone().unwrap_or(dir);
        let spool = match Spool::open(dir.clone(), base, tier.to_string()).await {
            Ok(spool) => Some(spool),
            Err(err) => {
                tracing::warn!(error = %err, dir = %dir.display(), "no spool: through a durable-tier outage Redis keeps every entry, and writes fail with Backpressure once it is full — pass --spool DIR with a writable directory");
                None
            }
        };
        let held = match &spool {
            Some(spool) => spool.held().await.unwrap_or_default(),
            None => BTreeMap::new(),
        };
        if !held.is_empty() {
            tracing::warn!(
                partitions = %super::events::ranges(&held.keys().copied().collect::<Vec<_>>()),
                entries = held.values().map(|h| h.entries).sum::<u64>(),
                "the spool holds entries from before a restart: taking their partitions back to replay them"
            );
        }
        let mut outage = Outage {
            owed: held.keys().copied().collect(),
            held,
            spool,
            configured: config.wal_budget,
            budget: config.wal_budget.unwrap_or(DEFAULT_BUDGET),
            ..Outage::default()
        };
        outage.budget = outage.resolve_budget(store, 0).await;
        outage
    }

    /// The budget in force: the configured one, else half of what Redis has free under
    /// `maxmemory` for the wal (the wal's own `wal_bytes` counted as free), else 256 MiB.
    async fn resolve_budget(&self, store: &Store, wal_bytes: u64) -> u64 {
        if let Some(budget) = self.configured {
            return budget;
        }
        let info: Result<String> = async {
            let mut conn = store.conn().await?;
            Ok(redis::cmd("INFO")
                .arg("memory")
                .query_async(&mut conn)
                .await?)
        }
        .await;
        let field = |info: &str, name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        match info {
            Ok(info) => match (field(&info, "maxmemory"), field(&info, "used_memory")) {
                (Some(max), Some(used)) if max > 0 => {
                    max.saturating_sub(used.saturating_sub(wal_bytes)) / 2
                }
                _ => DEFAULT_BUDGET,
            },
            Err(_) => self.budget,
        }
    }

    /// Whether the daemon has a spool that holds entries, or spools now.
    fn spooling(&self) -> bool {
        self.held.values().any(|h| h.entries > 0) || self.spool_due()
    }

    /// Whether the owned partitions' wal goes into the spool now.
    pub(super) fn spool_due(&self) -> bool {
        self.spool.is_some()
            && (self.over_budget
                || self
                    .down_since
                    .is_some_and(|t| t.elapsed() >= DOWN_BEFORE_SPOOLING))
    }

    /// Whether the daemon must take `p` whatever its share: its spool holds entries of it.
    pub(super) fn owes(&self, p: u32) -> bool {
        self.owed.contains(&p)
    }
}

/// Whether `err` shows the durable tier out of reach rather than rejecting a batch:
/// PostgreSQL unreachable (`Error::is_durable_unreachable`), or SQLite locked, busy, out of
/// space, or failing to read or write its files.
pub(super) fn is_outage(err: &Error) -> bool {
    if err.is_durable_unreachable() {
        return true;
    }
    let Error::Sqlite {
        source: Some(source),
        ..
    } = err
    else {
        return false;
    };
    matches!(
        source.downcast_ref::<rusqlite::Error>(),
        Some(rusqlite::Error::SqliteFailure(e, _)) if matches!(
            e.code,
            rusqlite::ErrorCode::DatabaseBusy
                | rusqlite::ErrorCode::DatabaseLocked
                | rusqlite::ErrorCode::DiskFull
                | rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::CannotOpen
        )
    )
}

/// Where the spool goes by default, and its file's base name: beside a SQLite file (named
/// after it), or the working directory for PostgreSQL.
fn default_place(db: &Path) -> (PathBuf, String) {
    match Location::of(db) {
        Location::Sqlite(path) => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            let base = path
                .file_name()
                .map_or_else(|| "agentstate".into(), |n| n.to_string_lossy().into_owned());
            (dir, base)
        }
        Location::Postgres(_) => (PathBuf::from("."), "agentstate-postgres".into()),
    }
}

impl SpillDaemon {
    /// Notes a commit of the durable tier that failed (it started at `started`): the outage
    /// starts then, when the tier is out of reach ([`is_outage`]); a batch it rejects is
    /// about that batch, not an outage.
    pub(super) fn durable_failed(&mut self, started: Instant, err: &Error) {
        if !is_outage(err) {
            return;
        }
        if self.outage.down_since.is_none() {
            self.outage.down_since = Some(started);
            match &self.outage.spool {
                Some(spool) => {
                    tracing::warn!(error = %err, spool = %spool.path().display(), "the durable tier does not commit: Redis keeps every entry it has not committed, and after 2 s the daemon moves them into its spool")
                }
                None => {
                    tracing::warn!(error = %err, "the durable tier does not commit and there is no spool: Redis keeps every entry it has not committed")
                }
            }
        }
        self.outage.probed = Some((Instant::now(), false));
    }

    /// Notes a commit of the durable tier: an outage is over.
    pub(super) fn durable_committed(&mut self) {
        if let Some(since) = self.outage.down_since.take() {
            let spooled: u64 = self.outage.held.values().map(|h| h.entries).sum();
            tracing::warn!(
                down_s = %format!("{:.1}", since.elapsed().as_secs_f64()),
                spooled,
                "the durable tier commits again; replaying the spool into it"
            );
        }
        self.outage.probed = None;
    }

    /// Whether a commit is worth trying: always, unless the tier is down and its probe (at
    /// most every second) says it still refuses a write.
    pub(super) async fn durable_answers(&mut self) -> bool {
        if self.outage.down_since.is_none() {
            return true;
        }
        if let Some((at, answered)) = self.outage.probed {
            if at.elapsed() < PROBE_EVERY {
                return answered;
            }
        }
        let answered = self.db.probe().await;
        self.outage.probed = Some((Instant::now(), answered));
        answered
    }

    /// A full pass's look at the outage: what the spool holds, the wal's size in Redis
    /// against the budget, and the figures (Prometheus; `publish_stats` writes them into
    /// Redis). Failures are logged: figures do not stop a pass.
    pub(super) async fn refresh_outage(&mut self) {
        if let Some(spool) = &self.outage.spool {
            match spool.held().await {
                Ok(held) => self.outage.held = held,
                Err(err) => tracing::debug!(error = %err, "could not read the spool's figures"),
            }
        }
        let owned: Vec<u32> = (0..self.parts.len() as u32)
            .filter(|&p| self.parts[p as usize].token > 0)
            .collect();
        let cmds = owned
            .iter()
            .map(|&p| {
                let mut cmd = redis::cmd("MEMORY");
                cmd.arg("USAGE").arg(self.store.keys().wal(p));
                cmd
            })
            .collect();
        match self.store.fan_out::<Option<u64>>(cmds).await {
            Ok(sizes) => {
                let wal: u64 = sizes.into_iter().flatten().sum();
                self.outage.budget = self.outage.resolve_budget(&self.store, wal).await;
                let over = wal > self.outage.budget;
                if over && !self.outage.over_budget && self.outage.spool.is_some() {
                    tracing::warn!(
                        wal_bytes = wal,
                        budget = self.outage.budget,
                        "the wal in Redis passed its budget: moving entries into the spool"
                    );
                }
                self.outage.over_budget = over;
            }
            Err(err) => tracing::debug!(error = %err, "could not measure the wal in Redis"),
        }
        let held = &self.outage.held;
        super::metrics::outage(
            held.values().map(|h| h.entries).sum(),
            held.values().map(|h| h.bytes).sum(),
            self.outage
                .down_since
                .map_or(0.0, |t| t.elapsed().as_secs_f64()),
            self.outage.budget,
            self.outage.spooling(),
        );
    }

    /// Moves `p`'s wal entries after what the durable tier and the spool hold into the
    /// spool, records the spool on the partition before the first of them, then trims the
    /// wal below what the spool committed. A spool that cannot take them (a full disk) is
    /// logged once and nothing is trimmed: Redis keeps them.
    pub(super) async fn spool_partition(&mut self, p: u32) -> Result<()> {
        let Some(spool) = self.outage.spool.clone() else {
            return Ok(());
        };
        let keys = self.store.keys().clone();
        let count = self.config.batch_size;
        loop {
            let lease = lease::value(&self.owner, self.parts[p as usize].token);
            let (held, wal): (Option<String>, Vec<WalEntry>) = redis::pipe()
                .get(keys.lease(p))
                .cmd("XRANGE")
                .arg(keys.wal(p))
                .arg(format!("({}", self.parts[p as usize].floor()))
                .arg("+")
                .arg("COUNT")
                .arg(count)
                .query_async(&mut self.store.conn().await?)
                .await?;
            if held.as_deref() != Some(lease.as_str()) {
                self.lost_lease(p);
                return Ok(());
            }
            let Some(last) = wal.last().map(|(id, _)| id.clone()) else {
                break;
            };
            let n = wal.len();
            let referred = flusher::referred(&self.store, &wal).await?;
            if let Err(err) = spool.append(p, wal, referred).await {
                if !self.outage.spool_failing {
                    tracing::error!(error = %err, partition = p, "the spool does not take entries: Redis keeps them, and once it is full writes fail with Backpressure");
                    self.outage.spool_failing = true;
                }
                return Ok(());
            }
            if std::mem::take(&mut self.outage.spool_failing) {
                tracing::warn!("the spool takes entries again");
            }
            if self.parts[p as usize].spooled.is_empty() && !self.mark_spool(p, true).await? {
                return Ok(());
            }
            let part = &mut self.parts[p as usize];
            part.spooled = last;
            let held = self.outage.held.entry(p).or_default();
            held.entries += n as u64;
            if n < count {
                break;
            }
        }
        let part = &self.parts[p as usize];
        if part.spooled.is_empty() {
            return Ok(());
        }
        let lease = lease::value(&self.owner, part.token);
        let (floor, decisions) = (part.spooled.clone(), part.decisions.clone());
        let cap = self.config.decisions_cap;
        if !super::trimmer::trim(&self.store, p, &lease, &floor, &decisions, cap).await? {
            self.lost_lease(p);
        }
        Ok(())
    }

    /// Records (`ours`) or clears this daemon's spool on `p` (fenced by the lease); false
    /// (and the lease forgotten) when the lease is gone.
    async fn mark_spool(&mut self, p: u32, ours: bool) -> Result<bool> {
        let identity = match (&self.outage.spool, ours) {
            (Some(spool), true) => spool.identity().to_string(),
            _ => String::new(),
        };
        let lease = lease::value(&self.owner, self.parts[p as usize].token);
        let fields = [(SPOOL_FIELD, identity.as_str())];
        if flusher::publish_committed(&self.store, p, &lease, &fields)
            .await?
            .is_none()
        {
            self.lost_lease(p);
            return Ok(false);
        }
        Ok(true)
    }

    /// The next batch of `p`'s spool committed to the durable tier with the cursors (the
    /// flush's exactly-once transaction), then dropped from the spool. `None` when the spool
    /// holds nothing more of `p` (its mark cleared): the flush reads Redis again; otherwise
    /// what [`SpillDaemon::flush_batch`] returns.
    pub(super) async fn replay_batch(&mut self, p: u32) -> Result<Option<Option<(usize, usize)>>> {
        let Some(spool) = self.outage.spool.clone() else {
            self.parts[p as usize].spooled.clear();
            return Ok(None);
        };
        let lease = lease::value(&self.owner, self.parts[p as usize].token);
        let held: Option<String> = redis::cmd("GET")
            .arg(self.store.keys().lease(p))
            .query_async(&mut self.store.conn().await?)
            .await?;
        if held.as_deref() != Some(lease.as_str()) {
            self.lost_lease(p);
            return Ok(Some(None));
        }
        let part = &self.parts[p as usize];
        let (wal, values) = spool.read(p, &part.wal, self.config.batch_size).await?;
        if wal.is_empty() {
            if !self.mark_spool(p, false).await? {
                return Ok(Some(None));
            }
            self.parts[p as usize].spooled.clear();
            self.outage.owed.remove(&p);
            self.outage.held.remove(&p);
            tracing::info!(partition = p, "the spool is replayed into the durable tier");
            return Ok(None);
        }
        let n = wal.len();
        let acked: Vec<u64> = wal
            .iter()
            .filter_map(|(id, _)| parse_stream_id(id).map(|(ms, _)| ms))
            .collect();
        let part = &self.parts[p as usize];
        let batch = Batch {
            partition: p,
            token: part.token,
            wal_from: part.wal.clone(),
            decisions_from: part.decisions.clone(),
            wal,
            decisions: Vec::new(),
            referred: values,
        };
        let started = Instant::now();
        let applied = self.apply(vec![batch]).await?.pop().flatten();
        let published = match &applied {
            Some(a) => self.publish(p, a).await?,
            None => None,
        };
        let done = self.committed(p, applied, published, (n, 0), &acked, started);
        if done.is_some() {
            spool.drop_through(p, &self.parts[p as usize].wal).await?;
        }
        Ok(Some(done))
    }

    /// On taking `p` (token `token`, the durable cursors `wal`/`decisions`, `lost`: Redis
    /// lost its data): `None` when another daemon's spool holds entries of `p` (the lease is
    /// given back); else the last id this daemon's spool holds past `wal` (empty: none),
    /// entries at or below `wal` dropped, and whether the partition carries a mark (to be
    /// cleared when the spool holds nothing of it). After a loss the spool is replayed first
    /// (the tier must commit: an error leaves the partition untaken) and `wal` moves past it.
    pub(super) async fn take_spooled(
        &mut self,
        p: u32,
        token: i64,
        wal: &mut String,
        decisions: &str,
        lost: bool,
    ) -> Result<Option<(String, bool)>> {
        let mark: Option<String> = redis::cmd("HGET")
            .arg(self.store.keys().committed(p))
            .arg(SPOOL_FIELD)
            .query_async(&mut self.store.conn().await?)
            .await?;
        let ours = self.outage.spool.as_ref().map(|s| s.identity().to_string());
        let marked = mark.as_ref().is_some_and(|m| !m.is_empty());
        if let Some(mark) = mark.filter(|m| !m.is_empty() && Some(m) != ours.as_ref()) {
            tracing::warn!(partition = p, spool = %mark, "another daemon's spool holds entries of this partition: leaving it to that daemon (restart it on the same --spool); committing past them would lose them");
            super::lease::release(&self.store, p, &self.owner).await?;
            return Ok(None);
        }
        let Some(spool) = self.outage.spool.clone() else {
            return Ok(Some((String::new(), marked)));
        };
        let Some(last) = spool.last(p).await? else {
            return Ok(Some((String::new(), marked)));
        };
        if parse_stream_id(&last) <= parse_stream_id(wal) {
            spool.drop_through(p, &last).await?;
            return Ok(Some((String::new(), marked)));
        }
        if !lost {
            return Ok(Some((last, marked)));
        }
        // The spool's entries come before anything of the new timeline Redis holds.
        loop {
            let (entries, values) = spool.read(p, wal, self.config.batch_size).await?;
            let Some(next) = entries.last().map(|(id, _)| id.clone()) else {
                return Ok(Some((String::new(), marked)));
            };
            let batch = Batch {
                partition: p,
                token,
                wal_from: wal.clone(),
                decisions_from: decisions.to_string(),
                wal: entries,
                decisions: Vec::new(),
                referred: values,
            };
            if self.apply(vec![batch]).await?.pop().flatten().is_none() {
                // Fenced: another daemon holds the partition.
                return Ok(None);
            }
            spool.drop_through(p, &next).await?;
            *wal = next;
        }
    }
}

impl SpillDaemon {
    /// This daemon's spool's identity (empty without a spool).
    pub(super) fn spool_identity(&self) -> String {
        self.outage
            .spool
            .as_ref()
            .map_or_else(String::new, |s| s.identity().to_string())
    }
}

impl super::Partition {
    /// The wal id Redis is trimmed below and read after: what the spool holds past the
    /// durable cursor, else the durable cursor.
    pub(super) fn floor(&self) -> &str {
        if self.spooled.is_empty() {
            &self.wal
        } else {
            &self.spooled
        }
    }
}
