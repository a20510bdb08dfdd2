//! Read-only views for operators: [`stats`] per partition from Redis alone,
//! [`export_session`], the durable history of one session as JSON lines from SQLite
//! (opened read-only), and [`checkpoint_history`], SQLite's full checkpoint history merged
//! with Redis' latest per label.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use rusqlite::params;
use serde::Serialize;
use serde_json::{json, value::RawValue};

use crate::checkpoints::Checkpoint;
use crate::error::{Error, Result};
use crate::records::{committed, parse_stream_id};
use crate::store::Store;

/// Pending entries are counted up to this many per stream.
const PENDING_COUNT_CAP: usize = 100_000;

/// The spill figures of one partition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartitionStats {
    /// The partition.
    pub partition: u32,
    /// wal entries not committed to SQLite yet (counted up to 100 000).
    pub wal_pending: usize,
    /// decisions entries not committed to SQLite yet (counted up to 100 000).
    pub decisions_pending: usize,
    /// Last wal id committed to SQLite, if any.
    pub wal_committed: Option<String>,
    /// Last decisions id committed to SQLite, if any.
    pub decisions_committed: Option<String>,
    /// Entries per second the owning daemon committed over its last window.
    pub flush_rate: Option<f64>,
    /// How long the oldest entry SQLite has not committed has waited, ms: `at` minus its
    /// time, the larger over both streams; 0 when nothing waits. It grows while the daemon
    /// is stopped or behind, and a write after an idle hour is not an hour of lag: alert on
    /// it.
    pub lag_ms: u64,
    /// The daemon that owns the partition (`<pid>-<random>`), if any.
    pub owner: Option<String>,
    /// When the figures were read, ms since the epoch (Redis clock, as the entry ids).
    pub at: u64,
}

/// Pending count and lag of one stream after `committed`, at `now` (ms, Redis clock).
async fn pending(
    conn: &mut crate::connection::Connection,
    key: &str,
    committed: Option<&str>,
    now: u64,
) -> Result<(usize, u64)> {
    let from = committed.map_or_else(|| "-".to_string(), |c| format!("({c}"));
    let ids: Vec<(String, HashMap<String, String>)> = redis::cmd("XRANGE")
        .arg(key)
        .arg(&from)
        .arg("+")
        .arg("COUNT")
        .arg(PENDING_COUNT_CAP)
        .query_async(conn)
        .await?;
    // The oldest uncommitted entry has waited since its id's time.
    let lag = ids
        .first()
        .and_then(|(id, _)| parse_stream_id(id))
        .map_or(0, |(ms, _)| now.saturating_sub(ms));
    Ok((ids.len(), lag))
}

/// Per-partition spill figures, read from Redis only (no SQLite access needed).
pub async fn stats(store: &Store) -> Result<Vec<PartitionStats>> {
    let keys = store.keys();
    let mut conn = store.conn().await?;
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await?;
    let now = secs * 1000 + micros / 1000;
    let mut out = Vec::new();
    for p in 0..keys.partitions() {
        let (published, spill, lease): (
            HashMap<String, String>,
            HashMap<String, String>,
            Option<String>,
        ) = redis::pipe()
            .hgetall(keys.committed(p))
            .hgetall(keys.spill_stats(p))
            .get(keys.lease(p))
            .query_async(&mut conn)
            .await?;
        let wal_committed = published.get(committed::WAL).cloned();
        let decisions_committed = published.get(committed::DECISIONS).cloned();
        let (wal_pending, wal_lag) =
            pending(&mut conn, &keys.wal(p), wal_committed.as_deref(), now).await?;
        let (decisions_pending, d_lag) = pending(
            &mut conn,
            &keys.decisions(p),
            decisions_committed.as_deref(),
            now,
        )
        .await?;
        out.push(PartitionStats {
            partition: p,
            wal_pending,
            decisions_pending,
            wal_committed,
            decisions_committed,
            flush_rate: spill.get("rate").and_then(|r| r.parse().ok()),
            lag_ms: wal_lag.max(d_lag),
            owner: lease.and_then(|l| l.split_once(' ').map(|(o, _)| o.to_string())),
            at: now,
        });
    }
    Ok(out)
}

/// Every checkpoint of session `sid`, ordered by `created_at`: the full history from the
/// SQLite file at `db_path` (opened read-only) merged with Redis' latest per label, so a
/// checkpoint not flushed yet is listed too; each id once. Without a file at `db_path`, only
/// Redis' latest per label ([`Store::checkpoints`]).
pub async fn checkpoint_history(
    store: &Store,
    db_path: &Path,
    sid: &str,
) -> Result<Vec<Checkpoint>> {
    let live = store.checkpoints(sid).await?;
    if !db_path.exists() {
        return Ok(live);
    }
    let (path, ns, id) = (
        db_path.to_path_buf(),
        store.config().namespace.clone(),
        sid.to_string(),
    );
    let mut all = tokio::task::spawn_blocking(move || -> Result<Vec<Checkpoint>> {
        let conn = super::schema::open_read_only(&path, &ns)?;
        let mut stmt =
            conn.prepare("SELECT record FROM checkpoints WHERE session_id = ?1 ORDER BY seq")?;
        let rows = stmt.query_map(params![id], |r| r.get::<_, String>(0))?;
        rows.map(|record| Ok(serde_json::from_str(&record?)?))
            .collect()
    })
    .await
    .map_err(|e| Error::sqlite(format!("sqlite thread failed: {e}")))??;
    for c in live {
        if !all.iter().any(|h| h.id == c.id) {
            all.push(c);
        }
    }
    // Stable: checkpoints of the same millisecond keep SQLite's order.
    all.sort_by_key(|c| c.created_at);
    Ok(all)
}

/// Writes the durable history of session `sid` from the SQLite file at `db_path` as JSON
/// lines: one `session` line, then `message`, `compaction`, `usage`, `checkpoint` (the full
/// history), `decision` and `round` lines, each object carrying a `type` field. Returns the
/// number of lines, 0 when SQLite does not know the session.
pub fn export_session(
    store: &Store,
    db_path: &Path,
    sid: &str,
    out: &mut dyn Write,
) -> Result<usize> {
    crate::keys::validate_id("session", sid)?;
    let conn = super::schema::open_read_only(db_path, &store.config().namespace)?;
    let mut lines = 0;
    let mut emit = |kind: &str, raw: &str, out: &mut dyn Write| -> Result<()> {
        // `{"type":"<kind>",` + the record's own fields.
        let body = raw.trim_start().strip_prefix('{').unwrap_or("}");
        let sep = if body.trim_start().starts_with('}') {
            ""
        } else {
            ","
        };
        writeln!(out, "{{\"type\":\"{kind}\"{sep}{body}")?;
        lines += 1;
        Ok(())
    };
    let session = conn.query_row(
        "SELECT user_id, kind, parent, spawn_depth, lifecycle, status, model, system_prompt,
                config, metadata, ttl, created_at, updated_at, round_index, pending
         FROM sessions WHERE id = ?1",
        params![sid],
        |r| {
            let opt = |i: usize| -> rusqlite::Result<Option<String>> {
                Ok(Some(r.get::<_, String>(i)?).filter(|s| !s.is_empty()))
            };
            let raw = |i: usize| -> rusqlite::Result<Option<Box<RawValue>>> {
                Ok(opt(i)?.and_then(|s| RawValue::from_string(s).ok()))
            };
            Ok(json!({
                "id": sid,
                "user_id": opt(0)?,
                "kind": r.get::<_, String>(1)?,
                "parent": opt(2)?,
                "spawn_depth": r.get::<_, i64>(3)?,
                "lifecycle": r.get::<_, String>(4)?,
                "status": r.get::<_, String>(5)?,
                "model": opt(6)?,
                "system_prompt": opt(7)?,
                "config": raw(8)?,
                "metadata": raw(9)?,
                "ttl": r.get::<_, i64>(10)?,
                "created_at": r.get::<_, i64>(11)?,
                "updated_at": r.get::<_, i64>(12)?,
                "round_index": r.get::<_, i64>(13)?,
                "pending": raw(14)?,
            }))
        },
    );
    let session = match session {
        Ok(s) => s,
        Err(rusqlite::Error::QueryReturnedNoRows) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    emit("session", &session.to_string(), out)?;
    for (kind, sql) in [
        (
            "message",
            "SELECT element FROM messages WHERE session_id = ?1 ORDER BY seq",
        ),
        (
            "compaction",
            "SELECT record FROM compactions WHERE session_id = ?1 ORDER BY compact_seq",
        ),
        (
            "usage",
            "SELECT record FROM usage WHERE session_id = ?1 ORDER BY round_index",
        ),
        (
            "checkpoint",
            "SELECT record FROM checkpoints WHERE session_id = ?1 ORDER BY seq",
        ),
        (
            "decision",
            "SELECT json_object('id', id, 'session_id', session_id, 'decision', decision,
                 'rationale', rationale, 'planned_action', nullif(planned_action, ''),
                 'meta', json(meta), 'outcome', outcome, 'created_at', created_at)
             FROM decisions WHERE session_id = ?1 ORDER BY created_at, id",
        ),
        (
            "round",
            "SELECT json_object('user_id', user_id, 'session_id', session_id, 'round_id', round_id,
                 'created_at', created_at, 'state', json(state))
             FROM rounds WHERE session_id = ?1 ORDER BY user_id, round_id",
        ),
        (
            // Graph checkpoint log entries (without channel values) and pending writes.
            "graph_checkpoint",
            "SELECT value FROM graph_log WHERE session_id = ?1 AND field LIKE 'c|%'
             ORDER BY json_extract(value, '$.ns'), json_extract(value, '$.id')",
        ),
        (
            "graph_write",
            "SELECT value FROM graph_log WHERE session_id = ?1 AND field LIKE 'w|%' ORDER BY field",
        ),
    ] {
        let mut stmt = conn.prepare(sql)?;
        let mut rows = stmt.query(params![sid])?;
        while let Some(r) = rows.next()? {
            emit(kind, &r.get::<_, String>(0)?, out)?;
        }
    }
    Ok(lines)
}
