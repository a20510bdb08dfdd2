//! The flusher: reads a batch of a partition's `wal` and `decisions` streams after its
//! cursors (the Redis half, here) and commits it in one transaction of the durable tier with
//! the new cursors (`Durable::flush`: the shared interpreter, `crate::durable::plan`, run by
//! either backend), then publishes the committed ids in `<prefix>:{p}:committed`. Every entry
//! lands exactly once whenever the process dies.

use std::collections::{BTreeSet, HashMap};

use super::{lease, SpillDaemon};
use crate::durable::plan::{Applied, Batch};
use crate::error::Result;
use crate::records::{committed, parse_stream_id, wal_field, Entry, WalEntry, WalOp, WalRecord};
use crate::scripts;
use crate::store::Store;

/// A batch read from Redis, with what its commit reports.
pub(super) struct ReadBatch {
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
        let Some(read) = self.read_batch(p).await? else {
            return Ok(None);
        };
        if read.counts == (0, 0) {
            return Ok(Some((0, 0)));
        }
        let started = std::time::Instant::now();
        let applied = self.db.flush(read.batch).await?;
        self.committed(p, applied, read.counts, &read.acked, started)
            .await
    }

    /// [`SpillDaemon::flush_batch`] for several partitions at once (those a wait woke for):
    /// their batches in one durable-tier transaction, so a wake costs one commit however
    /// many partitions it covers. Returns what each committed, as `flush_batch` does; on an
    /// error that is about one batch (SQLite rejecting an entry) nothing is committed and the
    /// caller flushes each partition alone, which isolates it.
    pub(super) async fn flush_together(
        &mut self,
        parts: &[u32],
    ) -> Result<Vec<(u32, Option<(usize, usize)>)>> {
        let mut reads = Vec::new();
        let mut done = Vec::new();
        for &p in parts {
            if !self.hold_lease(p).await? {
                continue;
            }
            match self.read_batch(p).await? {
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
        let applied = match self.db.flush_many(batches).await {
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
        for ((p, counts, acked), applied) in rest.into_iter().zip(applied) {
            let outcome = self.committed(p, applied, counts, &acked, started).await?;
            done.push((p, outcome));
        }
        Ok(done)
    }

    /// Reads the next batch of `p` after its cursors, with its lease in the same round trip;
    /// `None` (and the lease forgotten) when another daemon or a Redis loss took it.
    async fn read_batch(&mut self, p: u32) -> Result<Option<ReadBatch>> {
        let keys = self.store.keys();
        let part = &self.parts[p as usize];
        let count = self.config.batch_size;
        let lease = lease::value(&self.owner, part.token);
        let mut conn = self.store.conn().await?;
        let (held, wal, decisions): (Option<String>, Vec<WalEntry>, Vec<Entry>) = redis::pipe()
            .get(keys.lease(p))
            .cmd("XRANGE")
            .arg(keys.wal(p))
            .arg(format!("({}", part.wal))
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .cmd("XRANGE")
            .arg(keys.decisions(p))
            .arg(format!("({}", part.decisions))
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut conn)
            .await?;
        if held.as_deref() != Some(lease.as_str()) {
            self.lost_lease(p);
            return Ok(None);
        }
        // user_set records carry a reference only: read the values they refer to now. They
        // are classic entries of op `user_set`: only those are parsed here, every entry once
        // when applied.
        let is_user_set = |e: &&WalEntry| wal_field(e, "op") == Some(WalOp::UserSet.as_str());
        let wanted: BTreeSet<(String, String)> = wal
            .iter()
            .filter(is_user_set)
            .filter_map(|e| WalRecord::parse_entry(e).ok())
            .flatten()
            .filter_map(|r| {
                let d: serde_json::Value = serde_json::from_str(r.d).ok()?;
                Some((r.subject.to_string(), d.get("key")?.as_str()?.to_string()))
            })
            .collect();
        let mut user_values = HashMap::new();
        if !wanted.is_empty() {
            let mut pipe = redis::pipe();
            for (uid, key) in &wanted {
                pipe.hget(keys.user(uid), key);
            }
            let values: Vec<Option<String>> = pipe.query_async(&mut conn).await?;
            user_values = wanted.into_iter().zip(values).collect();
        }
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
            user_values,
        };
        Ok(Some(ReadBatch {
            batch,
            counts: (nw, nd),
            acked,
        }))
    }

    /// After the durable tier applied (or, `None`, fenced) `p`'s batch of `counts` entries:
    /// publishes the committed ids and records the figures; the entries committed, or
    /// `None` when the partition turned out to be another daemon's.
    async fn committed(
        &mut self,
        p: u32,
        applied: Option<Applied>,
        counts: (usize, usize),
        acked: &[u64],
        started: std::time::Instant,
    ) -> Result<Option<(usize, usize)>> {
        let (nw, nd) = counts;
        let Some(Applied { wal, decisions, .. }) = applied else {
            // Fenced: another daemon owns the partition now.
            self.lost_lease(p);
            return Ok(None);
        };
        let lease = lease::value(&self.owner, self.parts[p as usize].token);
        let ids = [
            (committed::WAL, wal.as_str()),
            (committed::DECISIONS, &decisions),
        ];
        let Some(published_at) = publish_committed(&self.store, p, &lease, &ids).await? else {
            self.lost_lease(p);
            return Ok(None);
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
        Ok(Some((nw, nd)))
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
    let at: u64 = store.invoke(&call).await?;
    Ok((at > 0).then_some(at))
}
