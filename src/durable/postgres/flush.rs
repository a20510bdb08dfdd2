//! The flush on PostgreSQL: executes the interpreter's changes (`durable::plan`) of one batch
//! in a single transaction with the new cursors, as `sqlite::flush` does. The partition's
//! cursor row is locked (`FOR UPDATE`) and its fencing token checked inside the transaction,
//! so a daemon whose lease lapsed writes nothing even when it commits after its successor.
//! Runs of `msg` records are written with one multi-row statement (`unnest`). Retention's
//! removals run through the same executor.

use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use super::snapshot::dollar;
use super::Pg;
use crate::durable::payloads::ColumnValue;
use crate::durable::plan::{self, Applied, Batch, Change, Cursors};
use crate::error::{Error, Result};

impl Pg {
    /// Flushes `batch` in one transaction. Returns `None`, writing nothing, when PostgreSQL
    /// shows another daemon owns the partition now (a higher fencing token or moved cursors).
    pub(crate) async fn flush(&self, batch: &Batch) -> Result<Option<Applied>> {
        // Planned before the transaction opens: inside it the statements follow one another,
        // so the session is never idle in it for long (a flusher's session is ended after a
        // lease time idle in a transaction: `Limits::flusher`) and the cursor row is locked
        // for the writes only.
        let changes = plan::plan(batch, Error::postgres)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // A paused old owner may hold the cursor row locked: the session's lock_timeout
        // (`Limits::flusher`) bounds the wait, then this partition's pass fails and is retried;
        // the server ends the old owner's session within a lease time of its pause.
        let p = batch.partition as i64;
        tx.execute(
            "INSERT INTO cursors (partition) VALUES ($1) ON CONFLICT (partition) DO NOTHING",
            &[&p],
        )
        .await?;
        let row = tx
            .query_one(&format!("{} FOR UPDATE", dollar(plan::CURSORS_SQL)), &[&p])
            .await?;
        let held = Cursors {
            wal: row.get(0),
            decisions: row.get(1),
            token: row.get(2),
        };
        if batch.is_fenced_by(&held) {
            return Ok(None);
        }
        let mut erased = false;
        for change in &changes {
            erased |= execute(&tx, change).await?;
        }
        let next = batch.next_cursors();
        tx.execute(
            "UPDATE cursors SET wal = $2, decisions = $3, token = $4 WHERE partition = $1",
            &[&p, &next.wal, &next.decisions, &next.token],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(Applied {
            wal: next.wal,
            decisions: next.decisions,
            erased,
        }))
    }
}

/// Runs one prepared (cached) statement.
async fn exec(tx: &Transaction<'_>, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
    let stmt = tx.prepare_cached(sql).await?;
    Ok(tx.execute(&stmt, params).await?)
}

/// Executes one change; returns true when it deleted user data. The statements are
/// SQLite's (`sqlite::flush`) in PostgreSQL's dialect, many rows per statement.
pub(crate) async fn execute(tx: &Transaction<'_>, change: &Change<'_>) -> Result<bool> {
    match change {
        Change::UpsertMessages(rows) => {
            let sids: Vec<&str> = rows.iter().map(|m| m.session).collect();
            let seqs: Vec<i64> = rows.iter().map(|m| m.seq).collect();
            let elements: Vec<&str> = rows.iter().map(|m| m.element).collect();
            let idem: Vec<Option<&str>> = rows.iter().map(|m| m.idem_key).collect();
            // A row at the same seq with another element is history the durable tier
            // committed: its update does not apply, so fewer rows than sent, and the batch
            // fails naming the first such row.
            let applied = exec(
                tx,
                "INSERT INTO messages AS m (session_id, seq, element, idem_key)
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[])
                 ON CONFLICT (session_id, seq) DO UPDATE
                 SET element = excluded.element, idem_key = excluded.idem_key
                 WHERE m.element = excluded.element",
                &[&sids, &seqs, &elements, &idem],
            )
            .await?;
            if applied < rows.len() as u64 {
                let row = tx
                    .query_one(
                        "SELECT u.s, u.q FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(s, q, e)
                         JOIN messages m ON m.session_id = u.s AND m.seq = u.q
                         WHERE m.element <> u.e ORDER BY u.s, u.q LIMIT 1",
                        &[&sids, &seqs, &elements],
                    )
                    .await?;
                return Err(Error::SeqConflict {
                    session: row.get(0),
                    seq: row.get(1),
                });
            }
        }
        Change::DeleteMessage { session, seq } => {
            exec(
                tx,
                "DELETE FROM messages WHERE session_id = $1 AND seq = $2",
                &[session, seq],
            )
            .await?;
        }
        Change::ReplaceElement {
            session,
            seq,
            element,
        } => {
            exec(
                tx,
                "INSERT INTO messages (session_id, seq, element) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, seq) DO UPDATE SET element = excluded.element",
                &[session, seq, element],
            )
            .await?;
        }
        Change::DeleteSessions {
            ids,
            decisions_before,
        } => delete_sessions(tx, ids, *decisions_before).await?,
        Change::InsertSession(r) => {
            exec(
                tx,
                "INSERT INTO sessions (id, partition, user_id, kind, parent, spawn_depth, lifecycle,
                 status, model, system_prompt, config, metadata, ttl, created_at, updated_at,
                 round_index, pending)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, 0, '')",
                &[
                    &r.id,
                    &(r.partition as i64),
                    &r.user_id,
                    &r.kind,
                    &r.parent,
                    &r.spawn_depth,
                    &r.lifecycle,
                    &r.status,
                    &r.model,
                    &r.system_prompt,
                    &r.config,
                    &r.metadata,
                    &r.ttl,
                    &r.created_at,
                ],
            )
            .await?;
        }
        Change::UpdateSession { id, column, value } => {
            // The column name comes from a fixed list, never from the data.
            let sql = format!("UPDATE sessions SET {column} = $2 WHERE id = $1");
            match value {
                ColumnValue::Text(text) => exec(tx, &sql, &[id, text]).await?,
                ColumnValue::Int(n) => exec(tx, &sql, &[id, n]).await?,
            };
        }
        Change::CloseSession {
            id,
            cascade,
            closed_at,
        } => close_session(tx, id, *cascade, *closed_at).await?,
        Change::UpsertGraphLog { session, fields } => {
            let (names, values): (Vec<&str>, Vec<&str>) =
                fields.iter().map(|(f, v)| (f.as_str(), v.as_str())).unzip();
            exec(
                tx,
                "INSERT INTO graph_log (session_id, field, value)
                 SELECT $1, f, v FROM unnest($2::text[], $3::text[]) AS t(f, v)
                 ON CONFLICT (session_id, field) DO UPDATE SET value = excluded.value",
                &[session, &names, &values],
            )
            .await?;
        }
        Change::DeleteGraphLog { session, fields } => {
            exec(
                tx,
                "DELETE FROM graph_log WHERE session_id = $1 AND field = ANY($2)",
                &[session, fields],
            )
            .await?;
        }
        Change::UpsertInboxItem {
            session,
            item_id,
            record,
        } => {
            exec(
                tx,
                "INSERT INTO inbox (session_id, item_id, record) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, item_id) DO UPDATE SET record = excluded.record",
                &[session, item_id, record],
            )
            .await?;
        }
        Change::UpsertEffect {
            session,
            call_id,
            record,
        } => {
            exec(
                tx,
                "INSERT INTO effects (session_id, call_id, record) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, call_id) DO UPDATE SET record = excluded.record",
                &[session, call_id, record],
            )
            .await?;
        }
        Change::Compact {
            session,
            compaction: c,
            record,
        } => {
            exec(
                tx,
                "INSERT INTO compactions (session_id, compact_seq, from_seq, to_seq, record)
                 VALUES ($1, $2, $3, $4, $5)",
                &[session, &c.compact_seq, &c.from_seq, &c.to_seq, record],
            )
            .await?;
        }
        Change::UpsertUsage {
            session,
            round_index,
            record,
        } => {
            exec(
                tx,
                "INSERT INTO usage (session_id, round_index, record) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, round_index) DO UPDATE SET record = excluded.record",
                &[session, round_index, record],
            )
            .await?;
        }
        Change::InsertCheckpoint {
            session,
            checkpoint: c,
            record,
        } => {
            exec(
                tx,
                "INSERT INTO checkpoints (id, session_id, label, created_at, record)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&c.id, session, &c.label, &c.created_at, record],
            )
            .await?;
        }
        Change::UpsertRound(r) => {
            exec(
                tx,
                "INSERT INTO rounds (user_id, session_id, round_id, created_at, state)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (user_id, session_id, round_id)
                 DO UPDATE SET created_at = excluded.created_at, state = excluded.state",
                &[
                    &r.user_id,
                    &r.session_id,
                    &r.round_id,
                    &r.created_at,
                    &r.state.get(),
                ],
            )
            .await?;
        }
        Change::SetUserValue { user, key, value } => {
            exec(
                tx,
                "INSERT INTO user_values (user_id, key, value) VALUES ($1, $2, $3)
                 ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value",
                &[user, key, value],
            )
            .await?;
        }
        Change::DeleteUserValue { user, key } => {
            let n = exec(
                tx,
                "DELETE FROM user_values WHERE user_id = $1 AND key = $2",
                &[user, key],
            )
            .await?;
            return Ok(n > 0);
        }
        Change::ForgetUser { user } => {
            let n = exec(tx, "DELETE FROM user_values WHERE user_id = $1", &[user]).await?;
            return Ok(n > 0);
        }
        Change::SetMemoryItem {
            partition,
            namespace,
            key,
            record,
            expires_at,
        } => {
            exec(
                tx,
                "INSERT INTO memory_items (namespace, key, partition, record, expires_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (namespace, key)
                 DO UPDATE SET record = excluded.record, expires_at = excluded.expires_at",
                &[namespace, key, &i64::from(*partition), record, expires_at],
            )
            .await?;
        }
        Change::DeleteMemoryItem { namespace, key } => {
            let n = exec(
                tx,
                "DELETE FROM memory_items WHERE namespace = $1 AND key = $2",
                &[namespace, key],
            )
            .await?;
            return Ok(n > 0);
        }
        Change::ForgetMemory { user, label } => {
            let stmt = tx
                .prepare_cached(
                    "SELECT DISTINCT namespace FROM memory_items WHERE namespace LIKE $1 ESCAPE '\\'",
                )
                .await?;
            let names: Vec<String> = tx
                .query(&stmt, &[&plan::user_like_pattern(user)])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let mut n = 0;
            for ns in names.iter().filter(|ns| plan::names_user(ns, user, *label)) {
                n += exec(tx, "DELETE FROM memory_items WHERE namespace = $1", &[ns]).await?;
            }
            return Ok(n > 0);
        }
        Change::InsertDecision { id, decision: d } => {
            // A decision of a session closed after it was recorded is not kept.
            exec(
                tx,
                "INSERT INTO decisions (id, session_id, decision, rationale, planned_action, meta,
                 created_at)
                 SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint
                 WHERE NOT EXISTS
                     (SELECT 1 FROM tombstones WHERE session_id = $2 AND closed_at >= $7)",
                &[
                    id,
                    &d.session_id,
                    &d.decision,
                    &d.rationale,
                    &d.planned_action,
                    &d.meta,
                    &d.created_at,
                ],
            )
            .await?;
        }
        Change::SetOutcome {
            decision_id,
            outcome,
            created_at,
        } => {
            exec(
                tx,
                "UPDATE decisions SET outcome = $2, outcome_at = $3 WHERE id = $1",
                &[decision_id, outcome, created_at],
            )
            .await?;
        }
        Change::Touch(touched) => {
            let (ids, ats): (Vec<&str>, Vec<i64>) = touched.iter().copied().unzip();
            exec(
                tx,
                "UPDATE sessions s SET updated_at = GREATEST(s.updated_at, t.at)
                 FROM unnest($1::text[], $2::bigint[]) AS t(id, at) WHERE s.id = t.id",
                &[&ids, &ats],
            )
            .await?;
        }
        Change::DeleteRounds { session } => {
            exec(tx, "DELETE FROM rounds WHERE session_id = $1", &[session]).await?;
        }
        Change::Orphan { parent } => {
            exec(
                tx,
                "UPDATE sessions SET parent = '' WHERE parent = $1",
                &[parent],
            )
            .await?;
        }
        Change::DeleteTombstone { session } => {
            exec(
                tx,
                "DELETE FROM tombstones WHERE session_id = $1",
                &[session],
            )
            .await?;
        }
        Change::DeleteCheckpoint { id } => {
            exec(tx, "DELETE FROM checkpoints WHERE id = $1", &[id]).await?;
        }
        Change::DeleteDecision { id } => {
            exec(tx, "DELETE FROM decisions WHERE id = $1", &[id]).await?;
        }
    }
    Ok(false)
}

/// `Change::CloseSession` on PostgreSQL.
async fn close_session(
    tx: &Transaction<'_>,
    sid: &str,
    cascade: bool,
    closed_at: i64,
) -> Result<()> {
    let mut doomed = vec![sid.to_string()];
    if cascade {
        let stmt = tx.prepare_cached(&dollar(plan::DESCENDANTS_SQL)).await?;
        for row in tx.query(&stmt, &[&sid]).await? {
            doomed.push(row.get(0));
        }
    }
    exec(
        tx,
        "INSERT INTO tombstones (session_id, closed_at)
         SELECT id, $2 FROM unnest($1::text[]) AS t(id)
         ON CONFLICT (session_id)
         DO UPDATE SET closed_at = GREATEST(tombstones.closed_at, excluded.closed_at)",
        &[&doomed, &closed_at],
    )
    .await?;
    exec(
        tx,
        "UPDATE sessions SET parent = '' WHERE parent = ANY($1)",
        &[&doomed],
    )
    .await?;
    let ids: Vec<&str> = doomed.iter().map(String::as_str).collect();
    delete_sessions(tx, &ids, closed_at + 1).await
}

/// `Change::DeleteSessions` on PostgreSQL.
async fn delete_sessions(tx: &Transaction<'_>, ids: &[&str], decisions_before: i64) -> Result<()> {
    for table in plan::SESSION_TABLES {
        exec(tx, &format!("DELETE FROM {table} = ANY($1)"), &[&ids]).await?;
    }
    exec(
        tx,
        "DELETE FROM decisions WHERE session_id = ANY($1) AND created_at < $2",
        &[&ids, &decisions_before],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The fence inside the transaction, on a database of this test's own on the test
    //! server (`AGENTSTATE_TEST_PG`; scripts/test.sh finds or starts one).
    use std::collections::HashMap;

    use super::*;
    use crate::config::Namespace;

    /// An empty database of this test's own, dropped with the guard.
    async fn database() -> super::super::ScratchDatabase {
        let admin = std::env::var("AGENTSTATE_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        super::super::ScratchDatabase::create(&admin, "agentstate_unit")
            .await
            .unwrap()
    }

    fn msg(id: &str, sid: &str, seq: i64) -> crate::records::WalEntry {
        (
            id.to_string(),
            vec![
                ("op".into(), "batch".into()),
                (
                    format!("msg {sid} {seq}"),
                    r#"{"at":1,"role":"user"}"#.into(),
                ),
            ],
        )
    }

    fn batch(token: i64, from: &str, wal: Vec<crate::records::WalEntry>) -> Batch {
        Batch {
            partition: 0,
            token,
            wal_from: from.into(),
            decisions_from: "0-0".into(),
            wal,
            decisions: vec![],
            referred: HashMap::new(),
        }
    }

    /// Applies partition 0's first batch (token 1, wal entry 1-0) through `pg`.
    async fn apply_the_first_batch(pg: &Pg) {
        assert!(pg
            .flush(&batch(1, "0-0", vec![msg("1-0", "s", 1)]))
            .await
            .unwrap()
            .is_some());
    }

    /// Locks partition 0's cursor row in `held`, as an owner does inside its transaction.
    async fn lock_the_cursor_row(held: &Transaction<'_>) {
        held.execute("SELECT 1 FROM cursors WHERE partition = 0 FOR UPDATE", &[])
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_stale_fencing_token_writes_nothing_inside_the_transaction() {
        let db = database().await;
        let pg = Pg::open(db.url(), &Namespace::default(), true)
            .await
            .unwrap();
        // The successor (token 2) committed first...
        let applied = pg.flush(&batch(2, "0-0", vec![msg("1-0", "s", 1)])).await;
        assert!(applied.unwrap().is_some());
        // ...the paused old owner (token 1) resumes with a batch after the same cursor.
        let stale = pg.flush(&batch(1, "1-0", vec![msg("2-0", "s", 2)])).await;
        assert_eq!(stale.unwrap(), None);
        let client = pg.client().await.unwrap();
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM messages), wal, token FROM cursors WHERE partition = 0",
                &[],
            )
            .await
            .unwrap();
        let (n, wal, token): (i64, String, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!((n, wal.as_str(), token), (1, "1-0", 2));
    }

    #[tokio::test]
    async fn a_paused_owner_holding_the_cursor_row_fails_its_successors_batch_instead_of_hanging() {
        let db = database().await;
        let pg = Pg::open(db.url(), &Namespace::default(), true)
            .await
            .unwrap();
        apply_the_first_batch(&pg).await;
        // The old owner, paused inside its transaction with the cursor row locked.
        let mut paused = pg.client().await.unwrap();
        let held = paused.transaction().await.unwrap();
        lock_the_cursor_row(&held).await;
        let err = pg
            .flush(&batch(2, "1-0", vec![msg("2-0", "s", 2)]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("55P03"), "{err}");
        drop(held);
    }

    #[tokio::test]
    async fn a_flusher_paused_inside_its_transaction_is_ended_after_its_lease_time() {
        let db = database().await;
        let lease = std::time::Duration::from_millis(300);
        let pg = Pg::open_flusher(db.url(), &Namespace::default(), lease)
            .await
            .unwrap();
        apply_the_first_batch(&pg).await;
        // The old owner, paused between two statements with the cursor row locked.
        let mut paused = pg.client().await.unwrap();
        let held = paused.transaction().await.unwrap();
        lock_the_cursor_row(&held).await;
        // Its successor's passes fail on the lock until the server ends the paused session.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            match pg.flush(&batch(2, "1-0", vec![msg("2-0", "s", 2)])).await {
                Ok(applied) => {
                    assert!(applied.is_some());
                    break;
                }
                Err(err) => assert!(err.to_string().contains("55P03"), "{err}"),
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the row stayed locked"
            );
        }
        // The woken old owner's transaction is gone: it commits nothing.
        assert!(held.execute("SELECT 1", &[]).await.is_err());
        let client = pg.client().await.unwrap();
        let row = client
            .query_one("SELECT wal, token FROM cursors WHERE partition = 0", &[])
            .await
            .unwrap();
        assert_eq!(
            (row.get::<_, String>(0), row.get::<_, i64>(1)),
            ("2-0".into(), 2)
        );
    }
}
