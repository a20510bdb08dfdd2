//! Read-only views for operators: [`stats`] per partition from Redis alone,
//! [`export_session`], the durable history of one session as JSON lines from the durable
//! tier (opened read-only), and [`checkpoint_history`], its full checkpoint history merged
//! with Redis' latest per label.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde_json::{json, value::RawValue};

pub use super::behind::{Histogram as WriteBehind, BOUNDS_MS as WRITE_BEHIND_BOUNDS_MS};
use crate::checkpoints::Checkpoint;
use crate::error::Result;
use crate::messages::{Message, MessageState};
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
    /// The write-behind window of the entries the owner committed in its last window with
    /// commits (about a second): from each acknowledged write to its commit.
    pub write_behind: Option<WriteBehind>,
    /// The daemon that owns the partition (`<pid>-<random>`), if any.
    pub owner: Option<String>,
    /// Whether agents' writes run: a daemon has checked the partition against the durable
    /// tier in this Redis history (after a failover or a restart, writes wait until it
    /// has). `None` on a cluster, whose nodes each have a history.
    pub writes_open: Option<bool>,
    /// Times a daemon found the partition's Redis behind its durable tier and repaired it.
    pub rollbacks: u64,
    /// Records those repairs put back into Redis.
    pub rollback_records: u64,
    /// wal entries of the partition in the owner's spool, waiting to be replayed into the
    /// durable tier (the durable tier was down or the wal passed its budget).
    pub spool_entries: u64,
    /// Bytes of those entries.
    pub spool_bytes: u64,
    /// How long the oldest of them has waited, ms (0 when none).
    pub spool_age_ms: u64,
    /// How long the owner's durable tier has failed to commit, ms (0 while it commits).
    pub durable_down_ms: u64,
    /// The owner's wal budget, bytes: past it the wal moves into the spool.
    pub wal_budget: u64,
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
    let history: Option<String> = if store.is_cluster() {
        None
    } else {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await?;
        info.lines()
            .find_map(|l| l.strip_prefix("master_replid:"))
            .map(|id| id.trim().to_string())
    };
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
        let number =
            |field: &str| -> u64 { spill.get(field).and_then(|n| n.parse().ok()).unwrap_or(0) };
        out.push(PartitionStats {
            partition: p,
            wal_pending,
            decisions_pending,
            wal_committed,
            decisions_committed,
            flush_rate: spill.get("rate").and_then(|r| r.parse().ok()),
            lag_ms: wal_lag.max(d_lag),
            write_behind: spill.get("behind").and_then(|b| WriteBehind::from_field(b)),
            owner: lease.and_then(|l| l.split_once(' ').map(|(o, _)| o.to_string())),
            writes_open: history
                .as_ref()
                .map(|h| published.get("history") == Some(h)),
            rollbacks: number("rollbacks"),
            rollback_records: number("rollback_records"),
            spool_entries: number("spool_entries"),
            spool_bytes: number("spool_bytes"),
            spool_age_ms: match number("spool_oldest") {
                0 => 0,
                oldest => now.saturating_sub(oldest),
            },
            durable_down_ms: number("durable_down_ms"),
            wal_budget: number("wal_budget"),
            at: now,
        });
    }
    Ok(out)
}

/// Every checkpoint of session `sid`, ordered by `created_at`: the full history from the
/// durable tier at `durable` (a SQLite file opened read-only, or a PostgreSQL URL) merged with Redis' latest per label, so a
/// checkpoint not flushed yet is listed too; each id once. Without a file at `durable`, only
/// Redis' latest per label ([`Store::checkpoints`]).
pub async fn checkpoint_history(
    store: &Store,
    durable: &Path,
    sid: &str,
) -> Result<Vec<Checkpoint>> {
    let live = store.checkpoints(sid).await?;
    let url = matches!(
        crate::durable::Location::of(durable),
        crate::durable::Location::Postgres(_)
    );
    if !url && !durable.exists() {
        return Ok(live);
    }
    let db = crate::durable::Durable::open_reader(durable, &store.config().namespace).await?;
    let mut all = db
        .text_rows(
            "SELECT record FROM checkpoints WHERE session_id = ?1 ORDER BY seq",
            sid,
        )
        .await?
        .into_iter()
        .map(|r| Ok(serde_json::from_str(r[0].as_deref().unwrap_or_default())?))
        .collect::<Result<Vec<Checkpoint>>>()?;
    for c in live {
        if !all.iter().any(|h| h.id == c.id) {
            all.push(c);
        }
    }
    // Stable: checkpoints of the same millisecond keep SQLite's order.
    all.sort_by_key(|c| c.created_at);
    Ok(all)
}

/// Writes the durable history of session `sid` from the durable tier at `durable` (a SQLite
/// file opened read-only, or a PostgreSQL URL) as JSON lines: one `session` line, then
/// `message`, `compaction`, `usage`, `checkpoint` (the full history), `decision` and `round`
/// lines, each object carrying a `type` field. Returns the number of lines, 0 when the
/// durable tier does not know the session. The rows are read as text by the same SQL on
/// both backends and made into JSON here, so both export the same bytes.
pub async fn export_session<W: Write>(
    store: &Store,
    durable: &Path,
    sid: &str,
    out: &mut W,
) -> Result<usize> {
    crate::keys::validate_id("session", sid)?;
    let db = crate::durable::Durable::open_reader(durable, &store.config().namespace).await?;
    let mut lines = 0;
    let mut emit = |kind: &str, raw: &str, out: &mut W| -> Result<()> {
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
    let head = db
        .text_rows(
            "SELECT user_id, kind, parent, CAST(spawn_depth AS TEXT), lifecycle, status, model,
                    system_prompt, config, metadata, CAST(ttl AS TEXT), CAST(created_at AS TEXT),
                    CAST(updated_at AS TEXT), CAST(round_index AS TEXT), pending
             FROM sessions WHERE id = ?1",
            sid,
        )
        .await?;
    let Some(r) = head.into_iter().next() else {
        return Ok(0);
    };
    let text = |i: usize| r[i].clone().unwrap_or_default();
    let opt = |i: usize| Some(text(i)).filter(|s| !s.is_empty());
    let raw = |i: usize| opt(i).and_then(|s| RawValue::from_string(s).ok());
    let int = |i: usize| text(i).parse::<i64>().unwrap_or(0);
    let session = json!({
        "id": sid,
        "user_id": opt(0),
        "kind": text(1),
        "parent": opt(2),
        "spawn_depth": int(3),
        "lifecycle": text(4),
        "status": text(5),
        "model": opt(6),
        "system_prompt": opt(7),
        "config": raw(8),
        "metadata": raw(9),
        "ttl": int(10),
        "created_at": int(11),
        "updated_at": int(12),
        "round_index": int(13),
        "pending": raw(14),
    });
    emit("session", &session.to_string(), out)?;
    // A stored element holds neither its seq nor its state: the row and the compactions do.
    let compacted: Vec<(u64, u64)> = db
        .text_rows(
            "SELECT CAST(from_seq AS TEXT), CAST(to_seq AS TEXT) FROM compactions
             WHERE session_id = ?1",
            sid,
        )
        .await?
        .iter()
        .map(|r| (whole(&r[0]), whole(&r[1])))
        .collect();
    for r in db
        .text_rows(
            "SELECT CAST(seq AS TEXT), element FROM messages WHERE session_id = ?1
             ORDER BY messages.seq",
            sid,
        )
        .await?
    {
        let mut message: Message = serde_json::from_str(r[1].as_deref().unwrap_or_default())?;
        message.seq = whole(&r[0]);
        message.state = MessageState::of(message.seq, &compacted);
        emit("message", &serde_json::to_string(&message)?, out)?;
    }
    for (kind, sql) in [
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
    ] {
        for row in db.text_rows(sql, sid).await? {
            emit(kind, row[0].as_deref().unwrap_or_default(), out)?;
        }
    }
    for r in db.text_rows(SESSION_DECISIONS_SQL, sid).await? {
        let line = DecisionLine {
            id: r[0].as_deref().unwrap_or_default(),
            session_id: r[1].as_deref().unwrap_or_default(),
            decision: r[2].as_deref().unwrap_or_default(),
            rationale: r[3].as_deref().unwrap_or_default(),
            planned_action: r[4].as_deref().filter(|a| !a.is_empty()),
            meta: json_value(r[5].as_deref())?,
            outcome: r[6].as_deref(),
            created_at: r[7].as_deref().unwrap_or("0").parse().unwrap_or(0),
        };
        emit("decision", &serde_json::to_string(&line)?, out)?;
    }
    for r in db
        .text_rows(
            "SELECT user_id, session_id, CAST(round_id AS TEXT), CAST(created_at AS TEXT), state
             FROM rounds WHERE session_id = ?1 ORDER BY rounds.user_id, rounds.round_id",
            sid,
        )
        .await?
    {
        let line = RoundLine {
            user_id: r[0].as_deref().unwrap_or_default(),
            session_id: r[1].as_deref().unwrap_or_default(),
            round_id: r[2].as_deref().unwrap_or("0").parse().unwrap_or(0),
            created_at: r[3].as_deref().unwrap_or("0").parse().unwrap_or(0),
            state: json_value(r[4].as_deref())?,
        };
        emit("round", &serde_json::to_string(&line)?, out)?;
    }
    // Graph checkpoint log entries (without channel values) ordered by (ns, id), then
    // pending writes by field.
    // ((ns, id), value)
    type Keyed = ((Option<String>, Option<String>), String);
    let mut graph: Vec<Keyed> = db
        .text_rows(
            "SELECT value FROM graph_log WHERE session_id = ?1 AND field LIKE 'c|%'",
            sid,
        )
        .await?
        .into_iter()
        .map(|r| {
            let value = r[0].clone().unwrap_or_default();
            let v: serde_json::Value = serde_json::from_str(&value).unwrap_or_default();
            let key = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
            ((key("ns"), key("id")), value)
        })
        .collect();
    graph.sort();
    for (_, value) in graph {
        emit("graph_checkpoint", &value, out)?;
    }
    for r in db
        .text_rows(
            "SELECT value FROM graph_log WHERE session_id = ?1 AND field LIKE 'w|%' ORDER BY field",
            sid,
        )
        .await?
    {
        emit("graph_write", r[0].as_deref().unwrap_or_default(), out)?;
    }
    Ok(lines)
}

/// A session's durable decisions, oldest first: id, session_id, decision, rationale,
/// planned_action, meta, outcome, created_at (`?1` the session id).
pub(crate) const SESSION_DECISIONS_SQL: &str =
    "SELECT id, session_id, decision, rationale, planned_action, meta, outcome,
            CAST(created_at AS TEXT)
     FROM decisions WHERE session_id = ?1 ORDER BY decisions.created_at, decisions.id";

/// A whole-number column read as text (0 when absent).
fn whole(text: &Option<String>) -> u64 {
    text.as_deref().unwrap_or("0").parse().unwrap_or(0)
}

/// A stored JSON text as a value (minified on output, as SQLite's `json()` did).
fn json_value(text: Option<&str>) -> Result<serde_json::Value> {
    Ok(match text {
        Some(t) => serde_json::from_str(t)?,
        None => serde_json::Value::Null,
    })
}

/// An exported decision, fields in this order.
#[derive(serde::Serialize)]
struct DecisionLine<'a> {
    id: &'a str,
    session_id: &'a str,
    decision: &'a str,
    rationale: &'a str,
    planned_action: Option<&'a str>,
    meta: serde_json::Value,
    outcome: Option<&'a str>,
    created_at: i64,
}

/// An exported StateService round, fields in this order.
#[derive(serde::Serialize)]
struct RoundLine<'a> {
    user_id: &'a str,
    session_id: &'a str,
    round_id: i64,
    created_at: i64,
    state: serde_json::Value,
}
