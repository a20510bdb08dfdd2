//! The flusher's PostgreSQL half: applies one batch of a partition's `wal` and `decisions`
//! entries in a single transaction with the new cursors, as `flusher::sqlite` does. The
//! partition's cursor row is locked (`FOR UPDATE`) and its fencing token checked inside the
//! transaction, so a daemon whose lease lapsed writes nothing even when it commits after its
//! successor. Runs of `msg` records are written with one multi-row statement (`unnest`).

use std::collections::HashMap;

use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use super::Pg;
use crate::error::{Error, Result};
use crate::records::{decision_id, stream_id_ms, DecisionEntry, WalOp, WalRecord};
use crate::spill::flusher::records::*;
use crate::spill::flusher::sqlite::{Applied, Batch};

/// One message row of a run of `msg` records: (session, seq, element, idempotency key).
type MsgRow<'a> = (&'a str, i64, &'a str, Option<&'a str>);

/// One step of a batch, in wal order: a run of `msg` records as one statement's arrays, or
/// any other record.
enum Step<'a> {
    Messages(MessageRows<'a>),
    Record(WalRecord<'a>),
}

impl Pg {
    /// Applies `batch` in one transaction. Returns `None`, writing nothing, when PostgreSQL
    /// shows another daemon owns the partition now (a higher fencing token or moved cursors).
    pub(crate) async fn apply(&self, batch: &Batch) -> Result<Option<Applied>> {
        // Parsed before the transaction opens: inside it the statements follow one another,
        // so the session is never idle in it for long (a flusher's session is ended after a
        // lease time idle in a transaction: `Limits::flusher`) and the cursor row is locked
        // for the writes only.
        let mut touched: HashMap<String, i64> = HashMap::new();
        let mut steps: Vec<Step<'_>> = Vec::new();
        let mut run: Vec<MsgRow<'_>> = Vec::new();
        for entry in &batch.wal {
            let in_entry = |e: Error| Error::postgres(format!("wal entry {}: {e}", entry.0));
            for record in WalRecord::parse_entry(entry).map_err(in_entry)? {
                if record.op == Some(WalOp::Msg) {
                    let m: Stamped =
                        serde_json::from_str(record.d).map_err(|e| in_entry(e.into()))?;
                    run.push((record.subject, m.seq, record.d, record.idem_key));
                    touch(&mut touched, record.subject, m.created_at);
                    continue;
                }
                if !run.is_empty() {
                    steps.push(Step::Messages(message_rows(std::mem::take(&mut run))));
                }
                steps.push(Step::Record(record));
            }
        }
        if !run.is_empty() {
            steps.push(Step::Messages(message_rows(run)));
        }
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
            .query_one(
                "SELECT wal, decisions, token FROM cursors WHERE partition = $1 FOR UPDATE",
                &[&p],
            )
            .await?;
        let (wal_at, decisions_at, token): (String, String, i64) =
            (row.get(0), row.get(1), row.get(2));
        if token > batch.token || wal_at != batch.wal_from || decisions_at != batch.decisions_from {
            return Ok(None);
        }
        let mut erased = false;
        for step in &steps {
            match step {
                Step::Messages(rows) => insert_messages(&tx, rows).await?,
                Step::Record(record) => {
                    erased |= apply_wal(&tx, record, batch, &mut touched)
                        .await
                        .map_err(|e| {
                            Error::postgres(format!("wal entry {}: {e}", record.entry_id))
                        })?;
                }
            }
        }
        for (id, fields) in &batch.decisions {
            let d = DecisionEntry::parse(id, fields)
                .map_err(|e| Error::postgres(format!("decisions entry {id}: {e}")))?;
            apply_decision(&tx, batch.partition, id, &d, &mut touched)
                .await
                .map_err(|e| Error::postgres(format!("decisions entry {id}: {e}")))?;
        }
        if !touched.is_empty() {
            let (ids, ats): (Vec<&str>, Vec<i64>) =
                touched.iter().map(|(s, at)| (s.as_str(), *at)).unzip();
            tx.execute(
                "UPDATE sessions s SET updated_at = GREATEST(s.updated_at, t.at)
                 FROM unnest($1::text[], $2::bigint[]) AS t(id, at) WHERE s.id = t.id",
                &[&ids, &ats],
            )
            .await?;
        }
        let wal = batch.wal.last().map_or(&batch.wal_from, |e| &e.0).clone();
        let decisions = batch
            .decisions
            .last()
            .map_or(&batch.decisions_from, |e| &e.0)
            .clone();
        tx.execute(
            "UPDATE cursors SET wal = $2, decisions = $3, token = $4 WHERE partition = $1",
            &[&p, &wal, &decisions, &batch.token],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(Applied {
            wal,
            decisions,
            erased,
        }))
    }
}

fn touch(touched: &mut HashMap<String, i64>, sid: &str, at: i64) {
    let e = touched.entry(sid.to_string()).or_insert(at);
    *e = (*e).max(at);
}

/// A run of `msg` records as the columns of one multi-row statement.
#[derive(Default)]
struct MessageRows<'a> {
    sids: Vec<&'a str>,
    seqs: Vec<i64>,
    elements: Vec<&'a str>,
    idem: Vec<Option<&'a str>>,
}

/// The rows a run of `msg` records writes. Redis is the live truth: a seq it hands out again
/// (it came back behind the durable tier) replaces the stored message; within the run the
/// last record of a (session, seq) wins, as applying them one by one would.
fn message_rows(run: Vec<MsgRow<'_>>) -> MessageRows<'_> {
    let mut last: HashMap<(&str, i64), usize> = HashMap::new();
    for (i, (sid, seq, _, _)) in run.iter().enumerate() {
        last.insert((sid, *seq), i);
    }
    let mut rows = MessageRows::default();
    for (i, (sid, seq, element, key)) in run.iter().enumerate() {
        if last[&(*sid, *seq)] == i {
            rows.sids.push(sid);
            rows.seqs.push(*seq);
            rows.elements.push(element);
            rows.idem.push(*key);
        }
    }
    rows
}

/// Writes a run of `msg` records ([`message_rows`]) with one statement.
async fn insert_messages(tx: &Transaction<'_>, rows: &MessageRows<'_>) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO messages (session_id, seq, element, idem_key)
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[])
             ON CONFLICT (session_id, seq) DO UPDATE
             SET element = excluded.element, idem_key = excluded.idem_key",
        )
        .await?;
    tx.execute(&stmt, &[&rows.sids, &rows.seqs, &rows.elements, &rows.idem])
        .await?;
    Ok(())
}

/// Runs one prepared (cached) statement.
async fn exec(tx: &Transaction<'_>, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
    let stmt = tx.prepare_cached(sql).await?;
    Ok(tx.execute(&stmt, params).await?)
}

/// Applies one wal record but `msg` (see [`insert_messages`]); returns true when it deleted
/// user data. The statements are SQLite's (`flusher::sqlite`) in PostgreSQL's dialect.
async fn apply_wal(
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
        WalOp::Msg => unreachable!("msg records are written in runs"),
        WalOp::MsgPop => {
            let r: PopRecord = serde_json::from_str(d)?;
            exec(
                tx,
                "DELETE FROM messages WHERE session_id = $1 AND seq = $2",
                &[&subject, &r.seq],
            )
            .await?;
            touch(touched, subject, r.updated_at);
        }
        WalOp::MsgReplace => {
            let m: Stamped = serde_json::from_str(d)?;
            exec(
                tx,
                "INSERT INTO messages (session_id, seq, element) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, seq) DO UPDATE SET element = excluded.element",
                &[&subject, &m.seq, &d],
            )
            .await?;
            touch(touched, subject, stream_id_ms(record.entry_id) as i64);
        }
        WalOp::SessionCreate => {
            let r: CreateRecord = serde_json::from_str(d)?;
            delete_sessions(tx, &[subject.to_string()], r.created_at).await?;
            exec(
                tx,
                "INSERT INTO sessions (id, partition, user_id, kind, parent, spawn_depth, lifecycle,
                 status, model, system_prompt, config, metadata, ttl, created_at, updated_at,
                 round_index, pending)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, 0, '')",
                &[
                    &subject,
                    &(batch.partition as i64),
                    &r.user_id.unwrap_or_default(),
                    &r.kind,
                    &r.parent.unwrap_or_default(),
                    &r.spawn_depth,
                    &r.lifecycle,
                    &r.status,
                    &r.model.unwrap_or_default(),
                    &r.system_prompt.unwrap_or_default(),
                    &r.config.get(),
                    &r.metadata.get(),
                    &r.ttl,
                    &r.created_at,
                ],
            )
            .await?;
        }
        WalOp::SessionUpdate => {
            let update = SessionUpdate::parse(d)?;
            if let Some(at) = update.updated_at {
                touch(touched, subject, at);
            }
            for (column, value) in &update.columns {
                // The column name comes from a fixed list, never from the data.
                let sql = format!("UPDATE sessions SET {column} = $2 WHERE id = $1");
                if *column == "round_index" {
                    let n: i64 = value
                        .parse()
                        .map_err(|_| Error::postgres(format!("round_index {value:?}")))?;
                    exec(tx, &sql, &[&subject, &n]).await?;
                } else {
                    exec(tx, &sql, &[&subject, value]).await?;
                }
            }
        }
        WalOp::GraphPut => {
            let r: GraphPutRecord = serde_json::from_str(d)?;
            let (mut fields, mut values) = (vec![], vec![]);
            for (field, value) in r.checkpoints.iter().chain(&r.writes) {
                fields.push(field.as_str());
                values.push(value.get());
            }
            for (field, value) in &r.blobs {
                fields.push(field.as_str());
                values.push(value.as_str());
            }
            exec(
                tx,
                "INSERT INTO graph_log (session_id, field, value)
                 SELECT $1, f, v FROM unnest($2::text[], $3::text[]) AS t(f, v)
                 ON CONFLICT (session_id, field) DO UPDATE SET value = excluded.value",
                &[&subject, &fields, &values],
            )
            .await?;
            touch(touched, subject, r.at);
        }
        WalOp::GraphDrop => {
            let r: GraphDropRecord = serde_json::from_str(d)?;
            let fields: Vec<&str> = r
                .checkpoints
                .iter()
                .chain(&r.writes)
                .chain(&r.blobs)
                .map(String::as_str)
                .collect();
            exec(
                tx,
                "DELETE FROM graph_log WHERE session_id = $1 AND field = ANY($2)",
                &[&subject, &fields],
            )
            .await?;
            touch(touched, subject, r.at);
        }
        WalOp::SessionClose => {
            let r: CloseRecord = serde_json::from_str(d)?;
            close_session(tx, subject, r.cascade, stream_id_ms(record.entry_id) as i64).await?;
        }
        WalOp::Compact => {
            let c: CompactRecord = serde_json::from_str(d)?;
            exec(
                tx,
                "INSERT INTO compactions (session_id, compact_seq, from_seq, to_seq, record)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&subject, &c.compact_seq, &c.from_seq, &c.to_seq, &d],
            )
            .await?;
            // Same rewrite as compact.lua: the element's prefix `{"seq":N,"state":"active"`.
            exec(
                tx,
                "UPDATE messages SET element = '{\"seq\":' || seq || ',\"state\":\"compacted_out\"'
                     || substr(element, length('{\"seq\":' || seq || ',\"state\":\"active\"') + 1)
                 WHERE session_id = $1 AND seq BETWEEN $2 AND $3
                   AND substr(element, 1, length('{\"seq\":' || seq || ',\"state\":\"active\"'))
                       = '{\"seq\":' || seq || ',\"state\":\"active\"'",
                &[&subject, &c.from_seq, &c.to_seq],
            )
            .await?;
            touch(touched, subject, c.created_at);
        }
        WalOp::Usage => {
            let u: UsageRecord = serde_json::from_str(d)?;
            exec(
                tx,
                "INSERT INTO usage (session_id, round_index, record) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, round_index) DO UPDATE SET record = excluded.record",
                &[&subject, &u.round_index, &d],
            )
            .await?;
            touch(touched, subject, u.created_at);
        }
        WalOp::Checkpoint => {
            let c: CheckpointRecord = serde_json::from_str(d)?;
            exec(
                tx,
                "INSERT INTO checkpoints (id, session_id, label, created_at, record)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&c.id, &subject, &c.label, &c.created_at, &d],
            )
            .await?;
            touch(touched, subject, c.created_at);
        }
        WalOp::Round => {
            let r: RoundRecord = serde_json::from_str(d)?;
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
        WalOp::UserSet => {
            let k: KeyRecord = serde_json::from_str(d)?;
            match batch
                .user_values
                .get(&(subject.to_string(), k.key.clone()))
                .cloned()
                .flatten()
            {
                Some(value) => {
                    exec(
                        tx,
                        "INSERT INTO user_values (user_id, key, value) VALUES ($1, $2, $3)
                         ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value",
                        &[&subject, &k.key, &value],
                    )
                    .await?;
                }
                None => return delete_user_value(tx, subject, &k.key).await,
            }
        }
        WalOp::UserDel => {
            let k: KeyRecord = serde_json::from_str(d)?;
            return delete_user_value(tx, subject, &k.key).await;
        }
        WalOp::UserForget => {
            let n = exec(
                tx,
                "DELETE FROM user_values WHERE user_id = $1",
                &[&subject],
            )
            .await?;
            return Ok(n > 0);
        }
    }
    Ok(false)
}

async fn delete_user_value(tx: &Transaction<'_>, user: &str, key: &str) -> Result<bool> {
    let n = exec(
        tx,
        "DELETE FROM user_values WHERE user_id = $1 AND key = $2",
        &[&user, &key],
    )
    .await?;
    Ok(n > 0)
}

/// `session_close`, as `flusher::sqlite`: deletes the session (with `cascade` its
/// non-detached descendants too), tombstones it and re-parents surviving children to none.
async fn close_session(
    tx: &Transaction<'_>,
    sid: &str,
    cascade: bool,
    closed_at: i64,
) -> Result<()> {
    let mut doomed = vec![sid.to_string()];
    if cascade {
        let stmt = tx
            .prepare_cached(
                "WITH RECURSIVE tree(id) AS (
                     SELECT id FROM sessions WHERE parent = $1 AND lifecycle != 'detached'
                     UNION SELECT s.id FROM sessions s JOIN tree t ON s.parent = t.id
                     WHERE s.lifecycle != 'detached')
                 SELECT id FROM tree",
            )
            .await?;
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
    delete_sessions(tx, &doomed, closed_at + 1).await
}

/// Deletes every row of the given sessions and their decisions recorded before
/// `decisions_before` (ms), as `flusher::sqlite::delete_sessions`.
pub(crate) async fn delete_sessions(
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

/// Applies one decisions-stream entry (a decision or an outcome).
async fn apply_decision(
    tx: &Transaction<'_>,
    partition: u32,
    id: &str,
    entry: &DecisionEntry<'_>,
    touched: &mut HashMap<String, i64>,
) -> Result<()> {
    match entry {
        DecisionEntry::Decision(d) => {
            // A decision of a session closed after it was recorded is not kept.
            exec(
                tx,
                "INSERT INTO decisions (id, session_id, decision, rationale, planned_action, meta,
                 created_at)
                 SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint
                 WHERE NOT EXISTS
                     (SELECT 1 FROM tombstones WHERE session_id = $2 AND closed_at >= $7)",
                &[
                    &decision_id(partition, id),
                    &d.session_id,
                    &d.decision,
                    &d.rationale,
                    &d.planned_action,
                    &d.meta,
                    &d.created_at,
                ],
            )
            .await?;
            touch(touched, d.session_id, d.created_at);
        }
        DecisionEntry::Outcome(o) => {
            exec(
                tx,
                "UPDATE decisions SET outcome = $2, outcome_at = $3 WHERE id = $1",
                &[&o.decision_id, &o.outcome, &o.created_at],
            )
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The fence inside the transaction, on a database of this test's own on the test
    //! server (`AGENTSTATE_TEST_PG`; scripts/test.sh finds or starts one).
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
        let fields = [
            ("op", "msg".to_string()),
            ("id", sid.to_string()),
            (
                "d",
                format!(r#"{{"seq":{seq},"state":"active","created_at":1,"role":"user"}}"#),
            ),
        ];
        (
            id.to_string(),
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
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
            user_values: HashMap::new(),
        }
    }

    #[tokio::test]
    async fn a_stale_fencing_token_writes_nothing_inside_the_transaction() {
        let db = database().await;
        let pg = Pg::open(db.url(), &Namespace::default(), true)
            .await
            .unwrap();
        // The successor (token 2) committed first...
        let applied = pg.apply(&batch(2, "0-0", vec![msg("1-0", "s", 1)])).await;
        assert!(applied.unwrap().is_some());
        // ...the paused old owner (token 1) resumes with a batch after the same cursor.
        let stale = pg.apply(&batch(1, "1-0", vec![msg("2-0", "s", 2)])).await;
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
        assert!(pg
            .apply(&batch(1, "0-0", vec![msg("1-0", "s", 1)]))
            .await
            .unwrap()
            .is_some());
        // The old owner, paused inside its transaction with the cursor row locked.
        let mut paused = pg.client().await.unwrap();
        let held = paused.transaction().await.unwrap();
        held.execute("SELECT 1 FROM cursors WHERE partition = 0 FOR UPDATE", &[])
            .await
            .unwrap();
        let err = pg
            .apply(&batch(2, "1-0", vec![msg("2-0", "s", 2)]))
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
        assert!(pg
            .apply(&batch(1, "0-0", vec![msg("1-0", "s", 1)]))
            .await
            .unwrap()
            .is_some());
        // The old owner, paused between two statements with the cursor row locked.
        let mut paused = pg.client().await.unwrap();
        let held = paused.transaction().await.unwrap();
        held.execute("SELECT 1 FROM cursors WHERE partition = 0 FOR UPDATE", &[])
            .await
            .unwrap();
        // Its successor's passes fail on the lock until the server ends the paused session.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            match pg.apply(&batch(2, "1-0", vec![msg("2-0", "s", 2)])).await {
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
