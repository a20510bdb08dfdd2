//! The flush on SQLite: executes the interpreter's changes (`durable::plan`) of one batch in a
//! single transaction together with the new stream cursors, so every entry lands exactly once
//! whenever the process dies. Retention's removals run through the same executor. Runs on a
//! blocking thread.

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::durable::payloads::ColumnValue;
use crate::durable::plan::{self, Applied, Batch, Change, Cursors, CURSORS_SQL, REBASE_SQL};
use crate::error::{Error, Result};

/// The cursors and fencing token SQLite holds for `partition` (defaults when none).
pub(crate) fn cursors(conn: &Connection, partition: u32) -> Result<Cursors> {
    Ok(conn
        .query_row(CURSORS_SQL, params![partition], |r| {
            Ok(Cursors {
                wal: r.get(0)?,
                decisions: r.get(1)?,
                token: r.get(2)?,
            })
        })
        .optional()?
        .unwrap_or_default())
}

/// `durable::plan::REBASE_SQL` on SQLite. Returns false when fenced.
pub(crate) fn rebase(
    conn: &mut Connection,
    partition: u32,
    token: i64,
    wal: bool,
    decisions: bool,
) -> Result<bool> {
    let n = conn.execute(REBASE_SQL, params![partition, token, wal, decisions])?;
    Ok(n == 1)
}

/// Applies several partitions' batches in one transaction, each with its cursors (one commit
/// for what one wake of the daemon read). Per batch `None`, writing nothing for it, when
/// SQLite shows another daemon owns its partition now (a higher fencing token or moved
/// cursors). A batch that fails to apply fails them all; the caller then flushes each alone.
pub(crate) fn flush_many(conn: &mut Connection, batches: &[Batch]) -> Result<Vec<Option<Applied>>> {
    let result = apply_many(conn, batches);
    // A failure whose rollback failed too (dropping the transaction ignores that error)
    // leaves the connection inside it, and every later flush would fail at its BEGIN: roll
    // back here, so the next flush starts clean.
    if result.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    result
}

/// [`flush_many`]'s transaction.
fn apply_many(conn: &mut Connection, batches: &[Batch]) -> Result<Vec<Option<Applied>>> {
    let plans = batches
        .iter()
        .map(|b| plan::plan(b, Error::sqlite))
        .collect::<Result<Vec<_>>>()?;
    // IMMEDIATE: take the write lock before reading the cursors. A deferred transaction
    // that reads first cannot wait for another daemon's write lock (SQLITE_BUSY at once,
    // without the busy timeout) when several daemons share the file.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut out = Vec::with_capacity(batches.len());
    for (batch, changes) in batches.iter().zip(&plans) {
        if batch.is_fenced_by(&cursors(&tx, batch.partition)?) {
            out.push(None);
            continue;
        }
        let mut erased = false;
        for change in changes {
            erased |= execute(&tx, change)?;
        }
        let next = batch.next_cursors();
        tx.execute(
            "INSERT INTO cursors (partition, wal, decisions, token) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (partition) DO UPDATE SET wal = ?2, decisions = ?3, token = ?4",
            params![batch.partition, next.wal, next.decisions, next.token],
        )?;
        out.push(Some(Applied {
            wal: next.wal,
            decisions: next.decisions,
            erased,
        }));
    }
    tx.commit()?;
    Ok(out)
}

/// Executes one change; returns true when it deleted user data.
pub(crate) fn execute(tx: &Transaction<'_>, change: &Change<'_>) -> Result<bool> {
    match change {
        Change::UpsertMessages(rows) => {
            // A row at the same seq with another element is history the durable tier
            // committed: the update does not apply (0 rows) and the batch fails.
            let mut upsert = tx.prepare_cached(
                "INSERT INTO messages (session_id, seq, element, idem_key) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (session_id, seq) DO UPDATE
                 SET element = excluded.element, idem_key = excluded.idem_key
                 WHERE messages.element = excluded.element",
            )?;
            for m in rows {
                if upsert.execute(params![m.session, m.seq, m.element, m.idem_key])? == 0 {
                    return Err(Error::SeqConflict {
                        session: m.session.to_string(),
                        seq: m.seq,
                    });
                }
            }
        }
        Change::DeleteMessage { session, seq } => {
            tx.prepare_cached("DELETE FROM messages WHERE session_id = ?1 AND seq = ?2")?
                .execute(params![session, seq])?;
        }
        Change::ReplaceElement {
            session,
            seq,
            element,
        } => {
            tx.prepare_cached(
                "INSERT INTO messages (session_id, seq, element) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, seq) DO UPDATE SET element = excluded.element",
            )?
            .execute(params![session, seq, element])?;
        }
        Change::DeleteSessions {
            ids,
            decisions_before,
        } => delete_sessions(tx, ids, *decisions_before)?,
        Change::InsertSession(r) => {
            tx.prepare_cached(
                "INSERT INTO sessions (id, partition, user_id, kind, parent, spawn_depth, lifecycle,
                 status, model, system_prompt, config, metadata, ttl, created_at, updated_at,
                 round_index, pending)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14, 0, '')",
            )?
            .execute(params![
                r.id,
                r.partition,
                r.user_id,
                r.kind,
                r.parent,
                r.spawn_depth,
                r.lifecycle,
                r.status,
                r.model,
                r.system_prompt,
                r.config,
                r.metadata,
                r.ttl,
                r.created_at,
            ])?;
        }
        Change::UpdateSession { id, column, value } => {
            // The column name comes from a fixed list, never from the data.
            let sql = format!("UPDATE sessions SET {column} = ?2 WHERE id = ?1");
            let mut stmt = tx.prepare_cached(&sql)?;
            match value {
                ColumnValue::Text(text) => stmt.execute(params![id, text])?,
                ColumnValue::Int(n) => stmt.execute(params![id, n])?,
            };
        }
        Change::CloseSession {
            id,
            cascade,
            closed_at,
        } => close_session(tx, id, *cascade, *closed_at)?,
        Change::UpsertGraphLog { session, fields } => {
            let mut upsert = tx.prepare_cached(
                "INSERT INTO graph_log (session_id, field, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, field) DO UPDATE SET value = excluded.value",
            )?;
            for (field, value) in fields {
                upsert.execute(params![session, field, value])?;
            }
        }
        Change::DeleteGraphLog { session, fields } => {
            let mut delete =
                tx.prepare_cached("DELETE FROM graph_log WHERE session_id = ?1 AND field = ?2")?;
            for field in fields {
                delete.execute(params![session, field])?;
            }
        }
        Change::UpsertInboxItem {
            session,
            item_id,
            record,
        } => {
            tx.prepare_cached(
                "INSERT INTO inbox (session_id, item_id, record) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, item_id) DO UPDATE SET record = excluded.record",
            )?
            .execute(params![session, item_id, record])?;
        }
        Change::UpsertEffect {
            session,
            call_id,
            record,
        } => {
            tx.prepare_cached(
                "INSERT INTO effects (session_id, call_id, record) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, call_id) DO UPDATE SET record = excluded.record",
            )?
            .execute(params![session, call_id, record])?;
        }
        Change::Compact {
            session,
            compaction: c,
            record,
        } => {
            tx.prepare_cached(
                "INSERT INTO compactions (session_id, compact_seq, from_seq, to_seq, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                session,
                c.compact_seq,
                c.from_seq,
                c.to_seq,
                record
            ])?;
        }
        Change::UpsertUsage {
            session,
            round_index,
            record,
        } => {
            tx.prepare_cached(
                "INSERT INTO usage (session_id, round_index, record) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, round_index) DO UPDATE SET record = ?3",
            )?
            .execute(params![session, round_index, record])?;
        }
        Change::InsertCheckpoint {
            session,
            checkpoint: c,
            record,
        } => {
            tx.prepare_cached(
                "INSERT INTO checkpoints (id, session_id, label, created_at, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![c.id, session, c.label, c.created_at, record])?;
        }
        Change::UpsertRound(r) => {
            tx.prepare_cached(
                "INSERT INTO rounds (user_id, session_id, round_id, created_at, state)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (user_id, session_id, round_id) DO UPDATE SET created_at = ?4, state = ?5",
            )?
            .execute(params![
                r.user_id,
                r.session_id,
                r.round_id,
                r.created_at,
                r.state.get()
            ])?;
        }
        Change::SetUserValue { user, key, value } => {
            tx.prepare_cached(
                "INSERT INTO user_values (user_id, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (user_id, key) DO UPDATE SET value = ?3",
            )?
            .execute(params![user, key, value])?;
        }
        Change::DeleteUserValue { user, key } => {
            let n = tx
                .prepare_cached("DELETE FROM user_values WHERE user_id = ?1 AND key = ?2")?
                .execute(params![user, key])?;
            return Ok(n > 0);
        }
        Change::ForgetUser { user } => {
            let n = tx
                .prepare_cached("DELETE FROM user_values WHERE user_id = ?1")?
                .execute(params![user])?;
            return Ok(n > 0);
        }
        Change::SetMemoryItem {
            partition,
            namespace,
            key,
            record,
            expires_at,
        } => {
            tx.prepare_cached(
                "INSERT INTO memory_items (namespace, key, partition, record, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (namespace, key) DO UPDATE SET record = ?4, expires_at = ?5",
            )?
            .execute(params![namespace, key, partition, record, expires_at])?;
        }
        Change::DeleteMemoryItem { namespace, key } => {
            let n = tx
                .prepare_cached("DELETE FROM memory_items WHERE namespace = ?1 AND key = ?2")?
                .execute(params![namespace, key])?;
            return Ok(n > 0);
        }
        Change::ForgetMemory { user, label } => {
            let names = tx
                .prepare_cached(
                    "SELECT DISTINCT namespace FROM memory_items WHERE namespace LIKE ?1 ESCAPE '\\'",
                )?
                .query_map(params![plan::user_like_pattern(user)], |r| {
                    r.get::<_, String>(0)
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut n = 0;
            for ns in names.iter().filter(|ns| plan::names_user(ns, user, *label)) {
                n += tx
                    .prepare_cached("DELETE FROM memory_items WHERE namespace = ?1")?
                    .execute(params![ns])?;
            }
            return Ok(n > 0);
        }
        Change::InsertDecision { id, decision: d } => {
            tx.prepare_cached(
                "INSERT INTO decisions (id, session_id, decision, rationale, planned_action, meta,
                 created_at)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
                 WHERE NOT EXISTS (SELECT 1 FROM tombstones WHERE session_id = ?2 AND closed_at >= ?7)",
            )?
            .execute(params![
                id,
                d.session_id,
                d.decision,
                d.rationale,
                d.planned_action,
                d.meta,
                d.created_at,
            ])?;
        }
        Change::SetOutcome {
            decision_id,
            outcome,
            created_at,
        } => {
            tx.prepare_cached("UPDATE decisions SET outcome = ?2, outcome_at = ?3 WHERE id = ?1")?
                .execute(params![decision_id, outcome, created_at])?;
        }
        Change::Touch(touched) => {
            let mut bump = tx.prepare_cached(
                "UPDATE sessions SET updated_at = max(updated_at, ?2) WHERE id = ?1",
            )?;
            for (sid, at) in touched {
                bump.execute(params![sid, at])?;
            }
        }
        Change::DeleteRounds { session } => {
            tx.prepare_cached("DELETE FROM rounds WHERE session_id = ?1")?
                .execute(params![session])?;
        }
        Change::Orphan { parent } => {
            tx.prepare_cached("UPDATE sessions SET parent = '' WHERE parent = ?1")?
                .execute(params![parent])?;
        }
        Change::DeleteTombstone { session } => {
            tx.prepare_cached("DELETE FROM tombstones WHERE session_id = ?1")?
                .execute(params![session])?;
        }
        Change::DeleteCheckpoint { id } => {
            tx.prepare_cached("DELETE FROM checkpoints WHERE id = ?1")?
                .execute(params![id])?;
        }
        Change::DeleteDecision { id } => {
            tx.prepare_cached("DELETE FROM decisions WHERE id = ?1")?
                .execute(params![id])?;
        }
    }
    Ok(false)
}

/// `Change::CloseSession` on SQLite.
fn close_session(tx: &Transaction<'_>, sid: &str, cascade: bool, closed_at: i64) -> Result<()> {
    let mut doomed = vec![sid.to_string()];
    if cascade {
        let mut stmt = tx.prepare_cached(plan::DESCENDANTS_SQL)?;
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
    let ids: Vec<&str> = doomed.iter().map(String::as_str).collect();
    delete_sessions(tx, &ids, closed_at + 1)
}

/// `Change::DeleteSessions` on SQLite.
fn delete_sessions(tx: &Transaction<'_>, ids: &[&str], decisions_before: i64) -> Result<()> {
    for table in plan::SESSION_TABLES {
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

/// After user data was erased: copy the zeroed pages into the main file and truncate the
/// `-wal` file, so the erased bytes are in neither (`secure_delete` zeroed them on delete).
pub(crate) fn truncate_wal_file(conn: &Connection) {
    match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0)) {
        Ok(0) => {}
        Ok(_) => tracing::warn!("wal checkpoint after an erasure was blocked by a reader; erased bytes stay in the -wal file until the next checkpoint"),
        Err(err) => tracing::warn!(error = %err, "wal checkpoint after an erasure failed"),
    }
}

#[cfg(test)]
mod tests {
    //! The flush under faults injected into the real connection at random points: the call
    //! interrupted at its n-th SQLite VM step (a write failing after `BEGIN`, midway through
    //! the batch), and its k-th commit turned into a rollback (a commit that fails); each
    //! fault once, as a transient one strikes. The invariant: a flush that fails wrote nothing (rows and cursors as before),
    //! one that succeeds wrote its batch and its cursors together, so retrying lands every
    //! entry exactly once.
    use std::collections::HashMap;

    use super::*;
    use crate::config::Namespace;
    use crate::records::WalEntry;

    /// A tiny deterministic generator (xorshift64*): the same faults on every run of a seed.
    struct Faults(u64);

    impl Faults {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % below
        }
    }

    fn msg(id: &str, sid: &str, seq: u64) -> WalEntry {
        (
            id.to_string(),
            vec![
                ("op".into(), "batch".into()),
                (
                    format!("msg {sid} {seq}"),
                    format!(r#"{{"at":{seq},"role":"user"}}"#),
                ),
            ],
        )
    }

    /// Per partition: its wal cursor and its message rows.
    fn state(conn: &Connection) -> Vec<(String, i64)> {
        (0..2u32)
            .map(|p| {
                let rows: i64 = conn
                    .query_row(
                        "SELECT COUNT(*) FROM messages WHERE session_id = ?1",
                        params![format!("s{p}")],
                        |r| r.get(0),
                    )
                    .unwrap();
                (cursors(conn, p).unwrap().wal, rows)
            })
            .collect()
    }

    #[test]
    fn a_flush_failing_at_random_points_writes_all_or_nothing_and_lands_every_entry_once() {
        for seed in 1..=8u64 {
            let dir = tempfile::tempdir().unwrap();
            let mut conn =
                super::super::open_writer(&dir.path().join("f.db"), &Namespace::default()).unwrap();
            let mut faults = Faults(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let (mut failed, mut next_seq) = (0, [1u64, 1]);
            for round in 1..=30u64 {
                // Both partitions' next entries, from the cursors the file holds.
                let batches: Vec<Batch> = (0..2u32)
                    .map(|p| {
                        let from = cursors(&conn, p).unwrap().wal;
                        let n = 1 + faults.next(20);
                        let wal = (0..n)
                            .map(|i| {
                                let seq = next_seq[p as usize] + i;
                                msg(&format!("{round}-{i}"), &format!("s{p}"), seq)
                            })
                            .collect();
                        Batch {
                            partition: p,
                            token: 1,
                            wal_from: from,
                            decisions_from: "0-0".into(),
                            wal,
                            decisions: vec![],
                            referred: HashMap::new(),
                        }
                    })
                    .collect();
                loop {
                    let before = state(&conn);
                    // Interrupt at the n-th VM step of the call, or fail its k-th commit.
                    let at = 1 + faults.next(600);
                    match faults.next(3) {
                        0 => {
                            let mut steps = 0;
                            let hook = move || {
                                steps += 1;
                                steps == at
                            };
                            conn.progress_handler(1, Some(hook)).unwrap();
                        }
                        1 => {
                            let (mut commits, k) = (0, 1 + at % 2);
                            let hook = move || {
                                commits += 1;
                                commits == k
                            };
                            conn.commit_hook(Some(hook)).unwrap();
                        }
                        _ => {}
                    }
                    let result = flush_many(&mut conn, &batches);
                    conn.progress_handler(0, None::<fn() -> bool>).unwrap();
                    conn.commit_hook(None::<fn() -> bool>).unwrap();
                    let after = state(&conn);
                    match result {
                        Ok(applied) => {
                            for (p, b) in batches.iter().enumerate() {
                                let n = b.wal.len() as i64;
                                assert_eq!(
                                    after[p],
                                    (b.wal.last().unwrap().0.clone(), before[p].1 + n),
                                    "seed {seed} round {round}: a commit holds its rows and cursor"
                                );
                                assert!(applied[p].is_some());
                                next_seq[p] += n as u64;
                            }
                            break;
                        }
                        Err(_) => {
                            assert!(
                                conn.is_autocommit(),
                                "seed {seed} round {round}: left in a transaction"
                            );
                            failed += 1;
                            assert_eq!(
                                after, before,
                                "seed {seed} round {round}: a failure wrote nothing"
                            );
                        }
                    }
                }
            }
            // Every entry once: seqs 1..next without a gap or a second row.
            for (p, next) in next_seq.iter().enumerate() {
                let (rows, max): (i64, i64) = conn
                    .query_row(
                        "SELECT COUNT(*), MAX(seq) FROM messages WHERE session_id = ?1",
                        params![format!("s{p}")],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .unwrap();
                assert_eq!((rows, max), (*next as i64 - 1, *next as i64 - 1));
            }
            assert!(failed >= 5, "seed {seed}: faults were injected ({failed})");
        }
    }
}
