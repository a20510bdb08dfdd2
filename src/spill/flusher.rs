//! The flusher: reads a batch of a partition's `wal` and `decisions` streams after its
//! cursors (the Redis half, here) and commits it in one transaction of the durable tier with
//! the new cursors (`Durable::flush`: the shared interpreter, `crate::durable::plan`, run by
//! either backend), then publishes the committed ids in `<prefix>:{p}:committed`. Every entry
//! lands exactly once whenever the process dies.

use std::collections::{BTreeSet, HashMap};

use super::{lease, SpillDaemon};
use crate::durable::plan::{Applied, Batch, Referred};
use crate::error::{Error, Result};
use crate::records::{committed, parse_stream_id, wal_field, Entry, WalEntry, WalOp, WalRecord};
use crate::scripts;
use crate::store::Store;

/// Commands in one partition's batch read ([`SpillDaemon::read_commands`]).
const READ_COMMANDS: usize = 3;

/// Where a partition's next batch is read from: its lease token and its wal and decisions
/// cursors.
pub(super) type ReadPoint = (i64, String, String);

/// A partition's batch read by the daemon's wait ([`SpillDaemon::wait_for_work`]): the
/// replies of [`SpillDaemon::read_commands`] (its lease, then its wal and decisions entries
/// after `at`'s cursors), which stand in for that read while the partition is still read
/// from `at`.
pub(super) struct Prefetched {
    /// The lease, the wal entries, the decisions entries.
    pub(super) reply: Vec<redis::Value>,
    /// Where they were read from.
    pub(super) at: ReadPoint,
}

/// A batch read from Redis, with what its commit reports.
struct ReadBatch {
    /// The entries and cursors, for the durable tier.
    batch: Batch,
    /// wal and decisions entries it holds.
    counts: (usize, usize),
    /// When each wal entry was acknowledged (its id's Redis clock), for the write-behind
    /// window.
    acked: Vec<u64>,
}

impl SpillDaemon {
    /// Reads up to a batch from both streams of `p` and commits it to the durable tier. Returns the
    /// entries committed, or `None` when the partition turned out to belong to another daemon
    /// or this Redis lost its state (the lease went with it): the batch is read in the same
    /// round trip as the lease, so entries of a new timeline are never read after an old
    /// cursor; the next pass takes the partition again and recovers.
    pub(super) async fn flush_batch(&mut self, p: u32) -> Result<Option<(usize, usize)>> {
        // The spool holds the entries that come next: they go first.
        if !self.parts[p as usize].spooled.is_empty() {
            if let Some(done) = self.replay_batch(p).await? {
                return Ok(done);
            }
        }
        // One pipeline, on a cluster too: the lease and the batch in one round trip.
        let mut pipe = redis::pipe();
        for cmd in self.read_commands(p) {
            pipe.add_command(cmd);
        }
        let read: Vec<redis::Value> = pipe.query_async(&mut self.store.conn().await?).await?;
        let Some(read) = self.read_batch(p, read).await? else {
            return Ok(None);
        };
        if read.counts == (0, 0) {
            return Ok(Some((0, 0)));
        }
        let started = std::time::Instant::now();
        let applied = self.apply(vec![read.batch]).await?.pop().flatten();
        let published = match &applied {
            Some(a) => self.publish(p, a).await?,
            None => None,
        };
        Ok(self.committed(p, applied, published, read.counts, &read.acked, started))
    }

    /// [`SpillDaemon::flush_batch`] for several partitions of one Redis node at once (those a
    /// wait woke for): the batches the wait read (`prefetched`), the others' reads in one
    /// pipeline (each lease with its batch, in order),
    /// their batches in one durable-tier transaction and their publications in one
    /// pipeline, so a wake costs about one commit however many partitions it covers. Returns what each committed, as `flush_batch` does; on an error
    /// that is about one batch (SQLite rejecting an entry) nothing is committed and the
    /// caller flushes each partition alone, which isolates it.
    pub(super) async fn flush_together(
        &mut self,
        parts: &[u32],
        mut prefetched: HashMap<u32, Prefetched>,
    ) -> Result<Vec<(u32, Option<(usize, usize)>)>> {
        let mut held = Vec::new();
        for &p in parts {
            // A partition whose spool holds entries replays them alone (`flush_batch`).
            if !self.parts[p as usize].spooled.is_empty() {
                continue;
            }
            if self.hold_lease(p).await? {
                held.push(p);
            }
        }
        // Holding the lease may have moved where a partition is read from (a new token).
        prefetched.retain(|&p, f| held.contains(&p) && f.at == self.read_point(p));
        let commands = held
            .iter()
            .filter(|p| !prefetched.contains_key(p))
            .flat_map(|&p| self.read_commands(p))
            .collect();
        let mut replies = self
            .store
            .fan_out::<redis::Value>(commands)
            .await?
            .into_iter();
        let mut reads = Vec::new();
        let mut done = Vec::new();
        for &p in &held {
            let reply: Vec<redis::Value> = match prefetched.remove(&p) {
                Some(f) => f.reply,
                None => replies.by_ref().take(READ_COMMANDS).collect(),
            };
            match self.read_batch(p, reply).await? {
                Some(read) if read.counts != (0, 0) => reads.push((p, read)),
                other => done.push((p, other.map(|r| r.counts))),
            }
        }
        if reads.is_empty() {
            return Ok(done);
        }
        let started = std::time::Instant::now();
        let (batches, rest): (Vec<_>, Vec<_>) = reads
            .into_iter()
            .map(|(p, r)| (r.batch, (p, r.counts, r.acked)))
            .unzip();
        let applied = match self.apply(batches).await {
            Ok(applied) => applied,
            Err(err)
                if err.is_database_unusable()
                    || err.is_durable_unreachable()
                    || err.is_unavailable() =>
            {
                return Err(err)
            }
            Err(err) => {
                tracing::debug!(error = %err, "a batch failed the shared transaction; flushing each partition alone");
                return Ok(done);
            }
        };
        let publications: Vec<(u32, &Applied)> = rest
            .iter()
            .zip(&applied)
            .filter_map(|((p, ..), a)| a.as_ref().map(|a| (*p, a)))
            .collect();
        let calls: Vec<_> = publications
            .iter()
            .map(|(p, a)| self.publish_call(*p, a))
            .collect();
        let mut published = self
            .store
            .invoke_all::<u64>(&calls)
            .await?
            .into_iter()
            .map(held_at);
        for ((p, counts, acked), applied) in rest.into_iter().zip(applied) {
            let at = match applied {
                Some(_) => published.next().flatten(),
                None => None,
            };
            let outcome = self.committed(p, applied, at, counts, &acked, started);
            done.push((p, outcome));
        }
        Ok(done)
    }

    /// Commits `batches` in the durable tier ([`crate::durable::Durable::flush_many`]),
    /// noting when the tier fails and when it commits again (`outage`).
    pub(super) async fn apply(&mut self, batches: Vec<Batch>) -> Result<Vec<Option<Applied>>> {
        let started = std::time::Instant::now();
        match self.db.flush_many(batches).await {
            Ok(applied) => {
                self.durable_committed();
                Ok(applied)
            }
            Err(err) => {
                self.durable_failed(started, &err);
                Err(err)
            }
        }
    }

    /// Where `p`'s next batch is read from.
    pub(super) fn read_point(&self, p: u32) -> ReadPoint {
        let part = &self.parts[p as usize];
        (part.token, part.wal.clone(), part.decisions.clone())
    }

    /// The round trip that reads `p`'s next batch after its cursors, with its lease
    /// ([`READ_COMMANDS`] commands: the lease, the wal, the decisions).
    fn read_commands(&self, p: u32) -> Vec<redis::Cmd> {
        let keys = self.store.keys();
        let part = &self.parts[p as usize];
        let count = self.config.batch_size;
        let mut lease = redis::cmd("GET");
        lease.arg(keys.lease(p));
        let mut wal = redis::cmd("XRANGE");
        wal.arg(keys.wal(p))
            .arg(format!("({}", part.wal))
            .arg("+")
            .arg("COUNT")
            .arg(count);
        let mut decisions = redis::cmd("XRANGE");
        decisions
            .arg(keys.decisions(p))
            .arg(format!("({}", part.decisions))
            .arg("+")
            .arg("COUNT")
            .arg(count);
        vec![lease, wal, decisions]
    }

    /// The batch of `p` from the replies to [`SpillDaemon::read_commands`]; `None` (and the
    /// lease forgotten) when another daemon or a Redis loss took the partition.
    async fn read_batch(&mut self, p: u32, reply: Vec<redis::Value>) -> Result<Option<ReadBatch>> {
        let [held, wal, decisions]: [redis::Value; READ_COMMANDS] = reply
            .try_into()
            .map_err(|_| Error::redis("a batch read answered with too few replies"))?;
        let parse = |e: redis::ParsingError| Error::redis(format!("a batch read: {e}"));
        let held: Option<String> = redis::from_redis_value(held).map_err(parse)?;
        let wal: Vec<WalEntry> = redis::from_redis_value(wal).map_err(parse)?;
        let decisions: Vec<Entry> = redis::from_redis_value(decisions).map_err(parse)?;
        let lease = lease::value(&self.owner, self.parts[p as usize].token);
        if held.as_deref() != Some(lease.as_str()) {
            self.lost_lease(p);
            return Ok(None);
        }
        let referred = referred(&self.store, &wal).await?;
        let part = &self.parts[p as usize];
        let (nw, nd) = (wal.len(), decisions.len());
        // When each wal entry was acknowledged (its id's Redis clock), for the write-behind window.
        let acked: Vec<u64> = wal
            .iter()
            .filter_map(|(id, _)| parse_stream_id(id).map(|(ms, _)| ms))
            .collect();
        let batch = Batch {
            partition: p,
            token: part.token,
            wal_from: part.wal.clone(),
            decisions_from: part.decisions.clone(),
            wal,
            decisions,
            referred,
        };
        Ok(Some(ReadBatch {
            batch,
            counts: (nw, nd),
            acked,
        }))
    }

    /// The fenced publication of `applied`, `p`'s commit.
    fn publish_call(&self, p: u32, applied: &Applied) -> scripts::ScriptCall {
        let lease = lease::value(&self.owner, self.parts[p as usize].token);
        let ids = [
            (committed::WAL, applied.wal.as_str()),
            (committed::DECISIONS, applied.decisions.as_str()),
        ];
        scripts::publish_committed(self.store.keys(), p, &lease, &ids)
    }

    /// Publishes `applied`, `p`'s commit: the Redis clock of the publication, `None` when the
    /// lease no longer holds the partition.
    pub(super) async fn publish(&self, p: u32, applied: &Applied) -> Result<Option<u64>> {
        Ok(held_at(
            self.store.invoke(&self.publish_call(p, applied)).await?,
        ))
    }

    /// Records `p`'s commit of `counts` entries (`applied`, published at `published`, both on
    /// success): the new cursors and figures. The entries committed, or `None` (the lease
    /// forgotten) when the partition turned out to be another daemon's: fenced in the durable
    /// tier (`applied` is `None`) or in Redis (`published` is).
    pub(super) fn committed(
        &mut self,
        p: u32,
        applied: Option<Applied>,
        published: Option<u64>,
        counts: (usize, usize),
        acked: &[u64],
        started: std::time::Instant,
    ) -> Option<(usize, usize)> {
        let (nw, nd) = counts;
        let (Some(Applied { wal, decisions, .. }), Some(published_at)) = (applied, published)
        else {
            self.lost_lease(p);
            return None;
        };
        super::metrics::batch_committed(nw + nd, started.elapsed());
        let part = &mut self.parts[p as usize];
        super::behind::record(&mut part.behind, published_at, acked);
        part.wal = wal;
        part.decisions = decisions;
        part.trim_due = true;
        part.flushed += (nw + nd) as u64;
        part.window_count += (nw + nd) as u64;
        tracing::debug!(partition = p, wal = nw, decisions = nd, "committed batch");
        Some((nw, nd))
    }
}

/// Sets `fields` of `<prefix>:{p}:committed` (the last ids of both streams the durable tier
/// committed, which durable callers wait for and the trimmer never cuts above; `seeded`) while
/// `lease` still holds the partition, and wakes the durable callers waiting on `p`. Returns
/// the Redis clock (ms) of the publication, or `None` (nothing written) when `lease` no
/// longer holds the partition.
pub(super) async fn publish_committed(
    store: &Store,
    p: u32,
    lease: &str,
    fields: &[(&str, &str)],
) -> Result<Option<u64>> {
    let call = scripts::publish_committed(store.keys(), p, lease, fields);
    Ok(held_at(store.invoke(&call).await?))
}

/// What the reference records (`user_set`, `mem_put`) of `wal` point at, as Redis holds it
/// now (see [`Referred`]). Only the classic entries of those ops are parsed here, every entry
/// once when applied.
pub(super) async fn referred(store: &Store, wal: &[WalEntry]) -> Result<Referred> {
    let keys = store.keys();
    let wanted: BTreeSet<(WalOp, String, String)> = wal
        .iter()
        .filter_map(|e| {
            // two text compares per entry: this runs over every entry of every batch
            let op = match wal_field(e, "op")? {
                o if o == WalOp::UserSet.as_str() => WalOp::UserSet,
                o if o == WalOp::MemoryPut.as_str() => WalOp::MemoryPut,
                _ => return None,
            };
            Some((op, e))
        })
        .filter_map(|(op, e)| Some((op, WalRecord::parse_entry(e).ok()?)))
        .flat_map(|(op, records)| records.into_iter().map(move |r| (op, r)))
        .filter_map(|(op, r)| {
            let d: serde_json::Value = serde_json::from_str(r.d).ok()?;
            Some((
                op,
                r.subject.to_string(),
                d.get("key")?.as_str()?.to_string(),
            ))
        })
        .collect();
    if wanted.is_empty() {
        return Ok(Referred::new());
    }
    let mut pipe = redis::pipe();
    for (op, subject, key) in &wanted {
        let hash = match op {
            WalOp::MemoryPut => keys.memory(subject),
            _ => keys.user(subject),
        };
        pipe.hget(hash, key);
    }
    let values: Vec<Option<String>> = pipe.query_async(&mut store.conn().await?).await?;
    Ok(wanted.into_iter().zip(values).collect())
}

/// `publish_committed.lua`'s reply read: the Redis clock of the publication, or `None` (0)
/// when the caller no longer held the lease.
fn held_at(at: u64) -> Option<u64> {
    (at > 0).then_some(at)
}
