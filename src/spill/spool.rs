//! The spool: a local SQLite file on the daemon's own disk (fsynced: `synchronous=FULL`) that
//! holds wal entries the daemon moved out of Redis while the durable tier was down or the wal
//! passed its budget. The daemon trims Redis only below what the spool committed, and
//! replays the spool into the durable tier through the flush (the tier's cursors keep it
//! exactly once); an entry leaves the spool only once the tier's cursor is at or past it.
//!
//! One daemon holds a spool file at a time: the connection takes SQLite's lock for good
//! (`locking_mode=EXCLUSIVE`), so a second daemon beside the same durable tier uses the next
//! name (`<base>.1.spool`, ...), and a daemon restarted after a crash takes the file back
//! (the kernel dropped the dead process' lock). Each file has an identity, which the daemon
//! records in Redis on the partitions it spooled, so no other daemon commits past them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, ErrorCode, OptionalExtension};

use crate::durable::plan::Referred;
use crate::error::{Error, Result};
use crate::records::{parse_stream_id, WalEntry, WalOp};

/// Most spool files tried beside one durable tier (one per daemon running there).
const NAMES: usize = 16;

/// What one partition's spool holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Held {
    /// Entries.
    pub(super) entries: u64,
    /// Bytes of their fields.
    pub(super) bytes: u64,
    /// The oldest entry's time (its id's ms), 0 when none.
    pub(super) oldest_ms: u64,
}

/// An open spool file (cheap to clone).
#[derive(Clone)]
pub(super) struct Spool {
    conn: Arc<Mutex<Connection>>,
    /// The file.
    path: PathBuf,
    /// Random, written once into the file: which spool a partition's entries are in.
    identity: String,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool").field("path", &self.path).finish()
    }
}

/// A spool error: says which file and what to do.
fn spool_error(path: &Path, err: impl std::fmt::Display) -> Error {
    Error::sqlite(format!(
        "spool {}: {err} — free space on its disk or point --spool at a writable directory",
        path.display()
    ))
}

/// Whether `err` is another connection holding the file.
fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(err, rusqlite::Error::SqliteFailure(e, _)
        if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

impl Spool {
    /// Opens the first spool file in `dir` named after `base` that no other daemon holds and
    /// that belongs to the durable tier `tier` (its identity), creating one when none is free.
    pub(super) async fn open(dir: PathBuf, base: String, tier: String) -> Result<Spool> {
        tokio::task::spawn_blocking(move || {
            for n in 0..NAMES {
                let name = match n {
                    0 => format!("{base}.spool"),
                    n => format!("{base}.{n}.spool"),
                };
                let path = dir.join(name);
                match Spool::open_file(&path, &tier) {
                    Ok(Some(spool)) => return Ok(spool),
                    Ok(None) => continue,
                    Err(err) => return Err(spool_error(&path, err)),
                }
            }
            Err(spool_error(
                &dir,
                format!("{NAMES} spool files here are held by other daemons or other tiers"),
            ))
        })
        .await
        .map_err(|e| Error::sqlite(e.to_string()))?
    }

    /// Opens `path`, or `None` when another daemon holds it or it spools for another tier.
    fn open_file(path: &Path, tier: &str) -> rusqlite::Result<Option<Spool>> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::ZERO)?;
        let held = (|| {
            conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            conn.execute_batch(
                "BEGIN IMMEDIATE;
                 CREATE TABLE IF NOT EXISTS spool_meta (
                     id INTEGER PRIMARY KEY CHECK (id = 1),
                     identity TEXT NOT NULL, tier TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS spool_entries (
                     partition INTEGER NOT NULL, ms INTEGER NOT NULL, seq INTEGER NOT NULL,
                     fields TEXT NOT NULL, PRIMARY KEY (partition, ms, seq));
                 CREATE TABLE IF NOT EXISTS spool_referred (
                     partition INTEGER NOT NULL, op TEXT NOT NULL, subject TEXT NOT NULL,
                     key TEXT NOT NULL, value TEXT, PRIMARY KEY (partition, op, subject, key));",
            )
        })();
        match held {
            Err(err) if is_busy(&err) => return Ok(None),
            other => other?,
        }
        let fresh = format!(
            "{:016x}{:016x}",
            rand::random::<u64>(),
            rand::random::<u64>()
        );
        conn.execute(
            "INSERT OR IGNORE INTO spool_meta (id, identity, tier) VALUES (1, ?1, ?2)",
            params![fresh, tier],
        )?;
        let (identity, owner): (String, String) = conn.query_row(
            "SELECT identity, tier FROM spool_meta WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        conn.execute_batch("COMMIT")?;
        if owner != tier {
            return Ok(None);
        }
        Ok(Some(Spool {
            conn: Arc::new(Mutex::new(conn)),
            path: path.to_path_buf(),
            identity,
        }))
    }

    /// The file.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's identity, recorded in Redis on the partitions it holds entries of.
    pub(super) fn identity(&self) -> &str {
        &self.identity
    }

    /// Runs `f` on the connection on the blocking pool; its errors name the file.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let (conn, path) = (self.conn.clone(), self.path.clone());
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut conn).map_err(|e| spool_error(&path, e))
        })
        .await
        .map_err(|e| Error::sqlite(e.to_string()))?
    }

    /// Commits `entries` of partition `p` (in stream order, after what it holds) with the
    /// values and memory items their reference records point at (as Redis held them when
    /// spooled), in one fsynced transaction.
    pub(super) async fn append(
        &self,
        p: u32,
        entries: Vec<WalEntry>,
        referred: Referred,
    ) -> Result<()> {
        self.with(move |c| {
            let tx = c.transaction()?;
            {
                let mut put = tx.prepare_cached(
                    "INSERT OR IGNORE INTO spool_entries (partition, ms, seq, fields)
                     VALUES (?1, ?2, ?3, ?4)",
                )?;
                for (id, fields) in &entries {
                    let (ms, seq) = parse_stream_id(id).unwrap_or((0, 0));
                    let fields = serde_json::to_string(fields).unwrap_or_default();
                    put.execute(params![p, ms as i64, seq as i64, fields])?;
                }
                let mut value = tx.prepare_cached(
                    "INSERT OR REPLACE INTO spool_referred (partition, op, subject, key, value)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?;
                for ((op, subject, key), v) in &referred {
                    value.execute(params![p, op.as_str(), subject, key, v])?;
                }
            }
            tx.commit()
        })
        .await
    }

    /// Up to `limit` entries of `p` after id `after`, in stream order, with what the
    /// reference records of the partition's spooled entries point at.
    pub(super) async fn read(
        &self,
        p: u32,
        after: &str,
        limit: usize,
    ) -> Result<(Vec<WalEntry>, Referred)> {
        let (ms, seq) = parse_stream_id(after).unwrap_or((0, 0));
        self.with(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT ms, seq, fields FROM spool_entries
                 WHERE partition = ?1 AND (ms > ?2 OR (ms = ?2 AND seq > ?3))
                 ORDER BY ms, seq LIMIT ?4",
            )?;
            let rows = stmt.query_map(params![p, ms as i64, seq as i64, limit as i64], |r| {
                let (ms, seq, fields): (i64, i64, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
                Ok((
                    format!("{ms}-{seq}"),
                    serde_json::from_str(&fields).unwrap_or_default(),
                ))
            })?;
            let entries = rows.collect::<rusqlite::Result<Vec<WalEntry>>>()?;
            let mut stmt = c.prepare_cached(
                "SELECT op, subject, key, value FROM spool_referred WHERE partition = ?1",
            )?;
            let rows = stmt.query_map(params![p], |r| {
                let op: String = r.get(0)?;
                Ok((op, r.get(1)?, r.get(2)?, r.get(3)?))
            })?;
            let mut referred = Referred::new();
            for row in rows {
                let (op, subject, key, value): (String, String, String, Option<String>) = row?;
                if let Some(op) = WalOp::parse(&op) {
                    referred.insert((op, subject, key), value);
                }
            }
            Ok((entries, referred))
        })
        .await
    }

    /// The last entry id of `p` the spool holds, if any.
    pub(super) async fn last(&self, p: u32) -> Result<Option<String>> {
        self.with(move |c| {
            c.query_row(
                "SELECT ms, seq FROM spool_entries WHERE partition = ?1
                 ORDER BY ms DESC, seq DESC LIMIT 1",
                params![p],
                |r| Ok(format!("{}-{}", r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
            )
            .optional()
        })
        .await
    }

    /// Removes `p`'s entries at or below `id` (the durable tier's cursor holds them); with
    /// the last of them, what their reference records pointed at.
    pub(super) async fn drop_through(&self, p: u32, id: &str) -> Result<()> {
        let (ms, seq) = parse_stream_id(id).unwrap_or((0, 0));
        self.with(move |c| {
            let tx = c.transaction()?;
            tx.execute(
                "DELETE FROM spool_entries
                 WHERE partition = ?1 AND (ms < ?2 OR (ms = ?2 AND seq <= ?3))",
                params![p, ms as i64, seq as i64],
            )?;
            tx.execute(
                "DELETE FROM spool_referred WHERE partition = ?1 AND NOT EXISTS
                 (SELECT 1 FROM spool_entries WHERE partition = ?1)",
                params![p],
            )?;
            tx.commit()
        })
        .await
    }

    /// What the spool holds, per partition that has entries.
    pub(super) async fn held(&self) -> Result<BTreeMap<u32, Held>> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT partition, COUNT(*), SUM(LENGTH(fields)), MIN(ms)
                 FROM spool_entries GROUP BY partition",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    Held {
                        entries: r.get::<_, i64>(1)? as u64,
                        bytes: r.get::<_, i64>(2)? as u64,
                        oldest_ms: r.get::<_, i64>(3)? as u64,
                    },
                ))
            })?;
            rows.collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_daemon_takes_the_next_file_and_entries_come_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let open = || Spool::open(dir.path().into(), "db".into(), "tier".into());
        let first = open().await.unwrap();
        let second = open().await.unwrap();
        assert_ne!(first.path(), second.path());
        assert_ne!(first.identity(), second.identity());
        let entry = |id: &str| (id.to_string(), vec![("op".to_string(), "x".to_string())]);
        let referred = Referred::from([
            (
                (WalOp::UserSet, "u".into(), "k".into()),
                Some("\"v\"".into()),
            ),
            ((WalOp::MemoryPut, "users.u".into(), "k".into()), None),
        ]);
        first
            .append(
                3,
                vec![entry("5-0"), entry("5-1"), entry("7-0")],
                referred.clone(),
            )
            .await
            .unwrap();
        let (read, values) = first.read(3, "5-0", 10).await.unwrap();
        assert_eq!(read, vec![entry("5-1"), entry("7-0")]);
        assert_eq!(
            values, referred,
            "a user value and a memory item, by their op"
        );
        first.drop_through(3, "5-1").await.unwrap();
        assert_eq!(first.last(3).await.unwrap().as_deref(), Some("7-0"));
        let identity = first.identity().to_string();
        drop(first);
        // The file is free again: the same identity, the same entries.
        let again = open().await.unwrap();
        assert_eq!(again.identity(), identity);
        assert_eq!(again.held().await.unwrap()[&3].entries, 1);
        // Another tier's spool is not taken.
        drop((again, second));
        let other = Spool::open(dir.path().into(), "db".into(), "other".into())
            .await
            .unwrap();
        assert_ne!(other.identity(), identity);
    }
}
