//! The flusher: reads a batch of a partition's `wal` and `decisions` streams after its
//! cursors (the Redis half, here) and commits it in one SQLite transaction with the new
//! cursors ([`sqlite::apply`]), then publishes the committed ids in
//! `<prefix>:{p}:committed`. Every entry lands exactly once whenever the process dies.

pub(crate) mod sqlite;

use std::collections::{BTreeSet, HashMap};

use rusqlite::Connection;

use super::{with_db, SpillDaemon};
use crate::error::Result;
use crate::records::{committed, Entry, WalOp, WalRecord};
use crate::store::Store;
use sqlite::{Applied, Batch};

impl SpillDaemon {
    /// Reads up to a batch from both streams of `p` and commits it to SQLite. Returns the
    /// entries committed, or `None` when the partition turned out to belong to another daemon.
    pub(super) async fn flush_batch(&mut self, p: u32) -> Result<Option<(usize, usize)>> {
        let keys = self.store.keys();
        let part = &self.parts[p as usize];
        let count = self.config.batch_size;
        let mut conn = self.store.conn().await?;
        let (wal, decisions): (Vec<Entry>, Vec<Entry>) = redis::pipe()
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
        if wal.is_empty() && decisions.is_empty() {
            return Ok(Some((0, 0)));
        }
        // user_set records carry a reference only: read the values they refer to now.
        let wanted: BTreeSet<(String, String)> = wal
            .iter()
            .filter_map(|e| WalRecord::parse(e).ok())
            .filter(|r| r.op == Some(WalOp::UserSet))
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
        let batch = Batch {
            partition: p,
            token: part.token,
            wal_from: part.wal.clone(),
            decisions_from: part.decisions.clone(),
            wal,
            decisions,
            user_values,
        };
        let applied = with_db(&self.db, move |c| {
            let applied = sqlite::apply(c, &batch)?;
            if applied.as_ref().is_some_and(|a| a.erased) {
                truncate_wal_file(c);
            }
            Ok(applied)
        })
        .await?;
        let Some(Applied { wal, decisions, .. }) = applied else {
            tracing::warn!(
                partition = p,
                "another daemon owns the partition now (fenced)"
            );
            self.parts[p as usize].token = 0;
            return Ok(None);
        };
        publish_committed(&self.store, p, &wal, &decisions).await?;
        let part = &mut self.parts[p as usize];
        part.wal = wal;
        part.decisions = decisions;
        part.trim_due = true;
        part.flushed += (nw + nd) as u64;
        part.window_count += (nw + nd) as u64;
        tracing::debug!(partition = p, wal = nw, decisions = nd, "committed batch");
        Ok(Some((nw, nd)))
    }
}

/// Publishes in `<prefix>:{p}:committed` the last ids of both streams SQLite committed
/// (durable callers poll it; the trimmer never cuts above it).
pub(super) async fn publish_committed(
    store: &Store,
    p: u32,
    wal: &str,
    decisions: &str,
) -> Result<()> {
    let mut conn = store.conn().await?;
    let _: () = redis::cmd("HSET")
        .arg(store.keys().committed(p))
        .arg(committed::WAL)
        .arg(wal)
        .arg(committed::DECISIONS)
        .arg(decisions)
        .query_async(&mut conn)
        .await?;
    Ok(())
}

/// After user data was erased: copy the zeroed pages into the main file and truncate the
/// `-wal` file, so the erased bytes are in neither (`secure_delete` zeroed them on delete).
fn truncate_wal_file(conn: &Connection) {
    match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0)) {
        Ok(0) => {}
        Ok(_) => tracing::warn!("wal checkpoint after an erasure was blocked by a reader; erased bytes stay in the -wal file until the next checkpoint"),
        Err(err) => tracing::warn!(error = %err, "wal checkpoint after an erasure failed"),
    }
}
