//! The flusher's SQLite half: applies one batch of `wal` and `decisions` entries of a
//! partition in a single transaction, together with the new stream cursors, so every entry
//! lands exactly once whenever the process dies. Runs on a blocking thread.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::records::*;

use crate::error::{Error, Result};
use crate::records::{decision_id, stream_id_ms, DecisionEntry, Entry, WalEntry, WalOp, WalRecord};

/// A batch read from Redis, ready to apply.
pub(crate) struct Batch {
    /// The partition.
    pub partition: u32,
    /// This daemon's fencing token for the partition; a higher token in SQLite wins.
    pub token: i64,
    /// The wal cursor the batch starts after (must equal SQLite's, or another daemon moved).
    pub wal_from: String,
    /// The decisions cursor the batch starts after.
    pub decisions_from: String,
    /// wal entries in stream order.
    pub wal: Vec<WalEntry>,
    /// decisions-stream entries in stream order.
    pub decisions: Vec<Entry>,
    /// Current Redis values of the user data the batch's `user_set` records refer to
    /// (`None` when the value is gone by now).
    pub user_values: HashMap<(String, String), Option<String>>,
}

/// What a committed batch moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The new wal cursor.
    pub wal: String,
    /// The new decisions cursor.
    pub decisions: String,
    /// True when user data was deleted (the caller truncates the SQLite -wal file).
    pub erased: bool,
}

/// The cursors and fencing token SQLite holds for `partition` (defaults when none).
pub(crate) fn cursors(conn: &Connection, partition: u32) -> Result<(String, String, i64)> {
    Ok(conn
        .query_row(
            "SELECT wal, decisions, token FROM cursors WHERE partition = ?1",
            params![partition],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?
        .unwrap_or_else(|| ("0-0".into(), "0-0".into(), 0)))
}

/// Points the cursors of `partition` back to `0-0` (for the streams named), unless a
/// higher fencing token owns it: used when Redis lost the streams, whose new entries are all
/// uncommitted whatever their ids. Returns false when fenced.
pub(crate) fn rebase(
    conn: &mut Connection,
    partition: u32,
    token: i64,
    wal: bool,
    decisions: bool,
) -> Result<bool> {
    let n = conn.execute(
        "UPDATE cursors SET wal = CASE WHEN ?3 THEN '0-0' ELSE wal END,
                            decisions = CASE WHEN ?4 THEN '0-0' ELSE decisions END
         WHERE partition = ?1 AND token <= ?2",
        params![partition, token, wal, decisions],
    )?;
    Ok(n == 1)
}

/// Applies `batch` in one transaction. Returns `None`, writing nothing, when SQLite shows
/// another daemon owns the partition now (a higher fencing token or moved cursors).
pub(crate) fn apply(conn: &mut Connection, batch: &Batch) -> Result<Option<Applied>> {
    // IMMEDIATE: take the write lock before reading the cursors. A deferred transaction
    // that reads first cannot wait for another daemon's write lock (SQLITE_BUSY at once,
    // without the busy timeout) when several daemons share the file.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let (wal_at, decisions_at, token) = cursors(&tx, batch.partition)?;
    if token > batch.token || wal_at != batch.wal_from || decisions_at != batch.decisions_from {
        return Ok(None);
    }
    let mut touched: HashMap<String, i64> = HashMap::new();
    let mut erased = false;
    for entry in &batch.wal {
        let in_entry = |e: Error| Error::sqlite(format!("wal entry {}: {e}", entry.0));
        for record in WalRecord::parse_entry(entry).map_err(in_entry)? {
            erased |= apply_wal(&tx, &record, batch, &mut touched).map_err(in_entry)?;
        }
    }
    for (id, fields) in &batch.decisions {
        DecisionEntry::parse(id, fields)
            .and_then(|d| apply_decision(&tx, batch.partition, id, &d, &mut touched))
            .map_err(|e| Error::sqlite(format!("decisions entry {id}: {e}")))?;
    }
    {
        let mut bump = tx
            .prepare_cached("UPDATE sessions SET updated_at = max(updated_at, ?2) WHERE id = ?1")?;
        for (sid, at) in &touched {
            bump.execute(params![sid, at])?;
        }
    }
    let wal = batch.wal.last().map_or(&batch.wal_from, |e| &e.0).clone();
    let decisions = batch
        .decisions
        .last()
        .map_or(&batch.decisions_from, |e| &e.0)
        .clone();
    tx.execute(
        "INSERT INTO cursors (partition, wal, decisions, token) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (partition) DO UPDATE SET wal = ?2, decisions = ?3, token = ?4",
        params![batch.partition, wal, decisions, batch.token],
    )?;
    tx.commit()?;
    Ok(Some(Applied {
        wal,
        decisions,
        erased,
    }))
}

/// Applies one wal record; returns true when it deleted user data.
fn apply_wal(
    tx: &Transaction<'_>,
    record: &WalRecord<'_>,
    batch: &Batch,
    touched: &mut HashMap<String, i64>,
) -> Result<bool> {
    let (subject, d) = (record.subject, record.d);
    let Some(op) = record.op else {
        tracing::warn!(
            op = record.op_text,
            entry = record.entry_id,
            "skipping unknown wal op"
        );
        return Ok(false);
    };
    match op {
        WalOp::Msg => {
            let m: Stamped = serde_json::from_str(d)?;
            tx.prepare_cached(
                // Redis is the live truth: should it come back behind SQLite (an old AOF or
                // RDB) and hand out a seq again, the message it holds now replaces the old one
                // instead of failing the batch forever.
                "INSERT INTO messages (session_id, seq, element, idem_key) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (session_id, seq) DO UPDATE
                 SET element = excluded.element, idem_key = excluded.idem_key",
            )?
            .execute(params![subject, m.seq, d, record.idem_key])?;
            touch(touched, subject, m.created_at);
        }
        WalOp::MsgPop => {
            let r: PopRecord = serde_json::from_str(d)?;
            tx.prepare_cached("DELETE FROM messages WHERE session_id = ?1 AND seq = ?2")?
                .execute(params![subject, r.seq])?;
            touch(touched, subject, r.updated_at);
        }
        WalOp::MsgReplace => {
            let m: Stamped = serde_json::from_str(d)?;
            // The element replaces the one its `msg` record stored; the idempotency key
            // stays (a replay of that key still names this seq).
            tx.prepare_cached(
                "INSERT INTO messages (session_id, seq, element) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, seq) DO UPDATE SET element = excluded.element",
            )?
            .execute(params![subject, m.seq, d])?;
            touch(touched, subject, stream_id_ms(record.entry_id) as i64);
        }
        WalOp::SessionCreate => {
            let r: CreateRecord = serde_json::from_str(d)?;
            // A create for an id SQLite still holds replaces the old incarnation; decisions
            // come through their own stream and may already hold the new incarnation's
            // (recorded after this create), which stay.
            delete_sessions(tx, &[subject.to_string()], r.created_at)?;
            tx.prepare_cached(
                "INSERT INTO sessions (id, partition, user_id, kind, parent, spawn_depth, lifecycle,
                 status, model, system_prompt, config, metadata, ttl, created_at, updated_at,
                 round_index, pending)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14, 0, '')",
            )?
            .execute(params![
                subject,
                batch.partition,
                r.user_id.unwrap_or_default(),
                r.kind,
                r.parent.unwrap_or_default(),
                r.spawn_depth,
                r.lifecycle,
                r.status,
                r.model.unwrap_or_default(),
                r.system_prompt.unwrap_or_default(),
                r.config.get(),
                r.metadata.get(),
                r.ttl,
                r.created_at,
            ])?;
        }
        WalOp::SessionUpdate => apply_session_update(tx, subject, d, touched)?,
        WalOp::GraphPut => {
            let r: GraphPutRecord = serde_json::from_str(d)?;
            let mut upsert = tx.prepare_cached(
                "INSERT INTO graph_log (session_id, field, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, field) DO UPDATE SET value = excluded.value",
            )?;
            for (field, value) in r.checkpoints.iter().chain(&r.writes) {
                upsert.execute(params![subject, field, value.get()])?;
            }
            for (field, value) in &r.blobs {
                upsert.execute(params![subject, field, value])?;
            }
            touch(touched, subject, r.at);
        }
        WalOp::GraphDrop => {
            let r: GraphDropRecord = serde_json::from_str(d)?;
            let mut delete =
                tx.prepare_cached("DELETE FROM graph_log WHERE session_id = ?1 AND field = ?2")?;
            for field in r.checkpoints.iter().chain(&r.writes).chain(&r.blobs) {
                delete.execute(params![subject, field])?;
            }
            touch(touched, subject, r.at);
        }
        WalOp::SessionClose => {
            let r: CloseRecord = serde_json::from_str(d)?;
            close_session(tx, subject, r.cascade, stream_id_ms(record.entry_id) as i64)?;
        }
        WalOp::Compact => {
            let c: CompactRecord = serde_json::from_str(d)?;
            tx.prepare_cached(
                "INSERT INTO compactions (session_id, compact_seq, from_seq, to_seq, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![subject, c.compact_seq, c.from_seq, c.to_seq, d])?;
            // Same rewrite as compact.lua: the element's prefix `{"seq":N,"state":"active"`.
            tx.prepare_cached(
                "UPDATE messages SET element = '{\"seq\":' || seq || ',\"state\":\"compacted_out\"'
                     || substr(element, length('{\"seq\":' || seq || ',\"state\":\"active\"') + 1)
                 WHERE session_id = ?1 AND seq BETWEEN ?2 AND ?3
                   AND substr(element, 1, length('{\"seq\":' || seq || ',\"state\":\"active\"'))
                       = '{\"seq\":' || seq || ',\"state\":\"active\"'",
            )?
            .execute(params![subject, c.from_seq, c.to_seq])?;
            touch(touched, subject, c.created_at);
        }
        WalOp::Usage => {
            let u: UsageRecord = serde_json::from_str(d)?;
            tx.prepare_cached(
                "INSERT INTO usage (session_id, round_index, record) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, round_index) DO UPDATE SET record = ?3",
            )?
            .execute(params![subject, u.round_index, d])?;
            touch(touched, subject, u.created_at);
        }
        WalOp::Checkpoint => {
            let c: CheckpointRecord = serde_json::from_str(d)?;
            tx.prepare_cached(
                "INSERT INTO checkpoints (id, session_id, label, created_at, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![c.id, subject, c.label, c.created_at, d])?;
            touch(touched, subject, c.created_at);
        }
        WalOp::Round => {
            let r: RoundRecord = serde_json::from_str(d)?;
            tx.prepare_cached(
                "INSERT INTO rounds (user_id, session_id, round_id, created_at, state)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (user_id, session_id, round_id) DO UPDATE SET created_at = ?4, state = ?5",
            )?
            .execute(params![r.user_id, r.session_id, r.round_id, r.created_at, r.state.get()])?;
        }
        WalOp::UserSet => {
            let k: KeyRecord = serde_json::from_str(d)?;
            match batch
                .user_values
                .get(&(subject.to_string(), k.key.clone()))
                .cloned()
                .flatten()
            {
                Some(value) => {
                    tx.prepare_cached(
                        "INSERT INTO user_values (user_id, key, value) VALUES (?1, ?2, ?3)
                         ON CONFLICT (user_id, key) DO UPDATE SET value = ?3",
                    )?
                    .execute(params![subject, k.key, value])?;
                }
                None => return delete_user_value(tx, subject, &k.key),
            }
        }
        WalOp::UserDel => {
            let k: KeyRecord = serde_json::from_str(d)?;
            return delete_user_value(tx, subject, &k.key);
        }
        WalOp::UserForget => {
            let n = tx
                .prepare_cached("DELETE FROM user_values WHERE user_id = ?1")?
                .execute(params![subject])?;
            return Ok(n > 0);
        }
    }
    Ok(false)
}

fn touch(touched: &mut HashMap<String, i64>, sid: &str, at: i64) {
    let e = touched.entry(sid.to_string()).or_insert(at);
    *e = (*e).max(at);
}

fn delete_user_value(tx: &Transaction<'_>, user: &str, key: &str) -> Result<bool> {
    let n = tx
        .prepare_cached("DELETE FROM user_values WHERE user_id = ?1 AND key = ?2")?
        .execute(params![user, key])?;
    Ok(n > 0)
}

/// `session_update`: sets the columns the record names.
fn apply_session_update(
    tx: &Transaction<'_>,
    sid: &str,
    d: &str,
    touched: &mut HashMap<String, i64>,
) -> Result<()> {
    let update = SessionUpdate::parse(d)?;
    if let Some(at) = update.updated_at {
        touch(touched, sid, at);
    }
    for (column, value) in &update.columns {
        // The column name comes from a fixed list, never from the data.
        let sql = format!("UPDATE sessions SET {column} = ?2 WHERE id = ?1");
        tx.prepare_cached(&sql)?.execute(params![sid, value])?;
    }
    Ok(())
}

/// `session_close`: deletes the session; with `cascade` also its non-detached descendants
/// (some may have expired from Redis, so Redis' own walk missed them). Surviving children
/// are re-parented to none.
fn close_session(tx: &Transaction<'_>, sid: &str, cascade: bool, closed_at: i64) -> Result<()> {
    let mut doomed = vec![sid.to_string()];
    if cascade {
        let mut stmt = tx.prepare_cached(
            "WITH RECURSIVE tree(id) AS (
                 SELECT id FROM sessions WHERE parent = ?1 AND lifecycle != 'detached'
                 UNION SELECT s.id FROM sessions s JOIN tree t ON s.parent = t.id
                 WHERE s.lifecycle != 'detached')
             SELECT id FROM tree",
        )?;
        let rows = stmt.query_map(params![sid], |r| r.get::<_, String>(0))?;
        for row in rows {
            doomed.push(row?);
        }
    }
    let mut tomb = tx.prepare_cached(
        "INSERT INTO tombstones (session_id, closed_at) VALUES (?1, ?2)
         ON CONFLICT (session_id) DO UPDATE SET closed_at = max(closed_at, ?2)",
    )?;
    let mut orphan = tx.prepare_cached("UPDATE sessions SET parent = '' WHERE parent = ?1")?;
    for id in &doomed {
        tomb.execute(params![id, closed_at])?;
        orphan.execute(params![id])?;
    }
    // Decisions recorded after the close belong to a new incarnation (their stream may be
    // applied ahead of the wal); the tombstone keeps late ones of the old one out.
    delete_sessions(tx, &doomed, closed_at + 1)
}

/// Deletes every row of the given sessions (meta, messages, compactions, usage,
/// checkpoints) and their decisions recorded before `decisions_before` (ms).
pub(crate) fn delete_sessions(
    tx: &Transaction<'_>,
    ids: &[String],
    decisions_before: i64,
) -> Result<()> {
    for table in [
        "sessions WHERE id",
        "messages WHERE session_id",
        "compactions WHERE session_id",
        "usage WHERE session_id",
        "checkpoints WHERE session_id",
        "graph_log WHERE session_id",
    ] {
        let mut stmt = tx.prepare_cached(&format!("DELETE FROM {table} = ?1"))?;
        for id in ids {
            stmt.execute(params![id])?;
        }
    }
    let mut stmt =
        tx.prepare_cached("DELETE FROM decisions WHERE session_id = ?1 AND created_at < ?2")?;
    for id in ids {
        stmt.execute(params![id, decisions_before])?;
    }
    Ok(())
}

/// Applies one decisions-stream entry (a decision or an outcome).
fn apply_decision(
    tx: &Transaction<'_>,
    partition: u32,
    id: &str,
    entry: &DecisionEntry<'_>,
    touched: &mut HashMap<String, i64>,
) -> Result<()> {
    match entry {
        DecisionEntry::Decision(d) => {
            // A decision of a session closed after it was recorded is not kept.
            tx.prepare_cached(
                "INSERT INTO decisions (id, session_id, decision, rationale, planned_action, meta,
                 created_at)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
                 WHERE NOT EXISTS (SELECT 1 FROM tombstones WHERE session_id = ?2 AND closed_at >= ?7)",
            )?
            .execute(params![
                decision_id(partition, id),
                d.session_id,
                d.decision,
                d.rationale,
                d.planned_action,
                d.meta,
                d.created_at,
            ])?;
            touch(touched, d.session_id, d.created_at);
        }
        DecisionEntry::Outcome(o) => {
            tx.prepare_cached("UPDATE decisions SET outcome = ?2, outcome_at = ?3 WHERE id = ?1")?
                .execute(params![o.decision_id, o.outcome, o.created_at])?;
        }
    }
    Ok(())
}

/// After user data was erased: copy the zeroed pages into the main file and truncate the
/// `-wal` file, so the erased bytes are in neither (`secure_delete` zeroed them on delete).
pub(crate) fn truncate_wal_file(conn: &Connection) {
    match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0)) {
        Ok(0) => {}
        Ok(_) => tracing::warn!("wal checkpoint after an erasure was blocked by a reader; erased bytes stay in the -wal file until the next checkpoint"),
        Err(err) => tracing::warn!(error = %err, "wal checkpoint after an erasure failed"),
    }
}
