//! The durable tier (cargo feature `spill`): one interface, [`Durable`], over two thin
//! backends — a SQLite file (`sqlite`; run on the blocking pool) and a PostgreSQL database
//! (`postgres`; async). `--db` / `AGENTSTATE_DB` choose: a `postgres://` or `postgresql://`
//! URL, else a path. Callers never ask which one they hold; each operation is one match here.
//!
//! What both backends share lives beside this file, so they cannot drift apart:
//! - `plan`: the flush's one interpreter (a batch → typed changes) and the fence on cursors;
//!   each backend executes the changes with one arm per change kind.
//! - `payloads`: the wal records' payloads as the interpreter reads them.
//! - `retention`: retention policies, the SQL of a plan's reads and the pure planner.
//! - `snapshot`: the SQL of a restore's reads and the image made of their rows.
//! - `rows`: rows read as text, the shape in which both answer the same SQL.
//! - `copy`: `agentstate db copy`, SQLite into PostgreSQL.

pub(crate) mod copy;
pub(crate) mod payloads;
pub(crate) mod plan;
pub(crate) mod postgres;
pub(crate) mod retention;
pub(crate) mod rows;
pub(crate) mod snapshot;
pub(crate) mod sqlite;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::Namespace;
use crate::decisions::Decision;
use crate::error::{Error, Result};
use crate::records::decision_id;
use plan::{Applied, Batch, Cursors};
use postgres::Pg;
use rows::TextRows;
use snapshot::{Snapshot, UserData};
use sqlite::database::{self, with_db, Database, Db};
use sqlite::flush;
use sqlite::snapshot as sqlite_snapshot;

/// Where the durable tier lives, as `--db` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location<'a> {
    /// A SQLite file.
    Sqlite(&'a Path),
    /// A PostgreSQL database URL.
    Postgres(&'a str),
}

impl<'a> Location<'a> {
    /// Reads `--db`: a `postgres://` / `postgresql://` URL, else a SQLite path.
    pub(crate) fn of(db: &'a Path) -> Location<'a> {
        match db.to_str() {
            Some(url) if postgres::is_url(url) => Location::Postgres(url),
            _ => Location::Sqlite(db),
        }
    }

    /// The tier's name for people: "SQLite" or "PostgreSQL".
    pub(crate) fn tier(&self) -> &'static str {
        match self {
            Location::Sqlite(_) => "SQLite",
            Location::Postgres(_) => "PostgreSQL",
        }
    }

    /// The location for messages and logs (a URL's password redacted).
    pub(crate) fn display(&self) -> String {
        match self {
            Location::Sqlite(path) => path.display().to_string(),
            Location::Postgres(url) => crate::address::redacted_db(url),
        }
    }
}

/// An open durable tier (cheap to clone: a shared connection or a pool).
#[derive(Clone)]
pub(crate) enum Durable {
    /// The daemon's one SQLite connection with its file's identity.
    Sqlite(Db),
    /// A PostgreSQL connection pool.
    Postgres(Pg),
}

impl Durable {
    /// Opens for writing (creating or migrating the schema) and checks the namespace, for
    /// a daemon whose lease time is `lease` (a PostgreSQL session of its that pauses inside
    /// a transaction is ended after it: `postgres::Limits::flusher`).
    pub(crate) async fn open_writer(db: &Path, ns: &Namespace, lease: Duration) -> Result<Durable> {
        match Location::of(db) {
            Location::Postgres(url) => {
                Ok(Durable::Postgres(Pg::open_flusher(url, ns, lease).await?))
            }
            Location::Sqlite(path) => {
                let (path, ns) = (path.to_path_buf(), ns.clone());
                let db = tokio::task::spawn_blocking(move || {
                    sqlite::open_writer(&path, &ns)
                        .and_then(|conn| {
                            conn.busy_timeout(sqlite::FLUSH_BUSY_TIMEOUT)?;
                            Ok(conn)
                        })
                        .map_err(|e| database::classify(e, &path))
                        .and_then(|conn| Database::new(conn, &path))
                })
                .await
                .map_err(|e| Error::sqlite(e.to_string()))??;
                Ok(Durable::Sqlite(Arc::new(Mutex::new(db))))
            }
        }
    }

    /// Opens for reading (a SQLite file read-only; a PostgreSQL database without
    /// migrating) and checks the namespace.
    pub(crate) async fn open_reader(db: &Path, ns: &Namespace) -> Result<Durable> {
        match Location::of(db) {
            Location::Postgres(url) => Ok(Durable::Postgres(Pg::open(url, ns, false).await?)),
            Location::Sqlite(path) => {
                let conn = sqlite::open_read_only(path, ns)?;
                let db = Database::new(conn, path)?;
                Ok(Durable::Sqlite(Arc::new(Mutex::new(db))))
            }
        }
    }

    /// Every row of `sql` (`?1`, when the statement has it, is `arg`; the same text on both
    /// backends), each column read as text (NULL as `None`): select text columns or
    /// `CAST(x AS TEXT)`. Order by a cast column through its table (`ORDER BY messages.seq`):
    /// PostgreSQL takes a bare `seq` for the output column, the text, and sorts 1, 10, 2.
    pub(crate) async fn text_rows(&self, sql: &str, arg: &str) -> Result<TextRows> {
        match self {
            Durable::Sqlite(db) => {
                let (sql, arg) = (sql.to_string(), arg.to_string());
                with_db(db, move |c| sqlite::text_rows(c, &sql, &arg)).await
            }
            Durable::Postgres(pg) => pg.text_rows(sql, arg).await,
        }
    }

    /// The namespace's identity, which an open writer always has.
    pub(crate) async fn identity(&self) -> Result<String> {
        let rows = self
            .text_rows("SELECT identity FROM namespace WHERE id = 1", "")
            .await?;
        rows.into_iter()
            .next()
            .and_then(|mut row| row.swap_remove(0))
            .ok_or_else(|| Error::sqlite("the namespace record has no identity".to_string()))
    }

    /// The cursors and fencing token recorded for `p` (defaults when none).
    pub(crate) async fn cursors(&self, p: u32) -> Result<Cursors> {
        match self {
            Durable::Sqlite(db) => with_db(db, move |c| flush::cursors(c, p)).await,
            Durable::Postgres(pg) => pg.cursors(p).await,
        }
    }

    /// Whether the tier takes a write now, asked without waiting: SQLite's write lock taken
    /// and given back at once (no busy wait), a statement on PostgreSQL. The daemon asks it
    /// while the tier is down, before it tries a commit that would wait out a timeout.
    pub(crate) async fn probe(&self) -> bool {
        match self {
            Durable::Sqlite(db) => with_db(db, |c| {
                c.busy_timeout(Duration::ZERO)?;
                let taken = c.execute_batch("BEGIN IMMEDIATE; ROLLBACK;");
                c.busy_timeout(sqlite::FLUSH_BUSY_TIMEOUT)?;
                Ok(taken?)
            })
            .await
            .is_ok(),
            // Any statement on the schema (the same read as `/readyz`).
            Durable::Postgres(pg) => pg
                .text_rows("SELECT id FROM sessions WHERE id = ?1", "")
                .await
                .is_ok(),
        }
    }

    /// Points the named cursors of `p` back to `0-0` unless a higher token owns it; false
    /// when fenced.
    pub(crate) async fn rebase(&self, p: u32, token: i64, wal: bool, dec: bool) -> Result<bool> {
        match self {
            Durable::Sqlite(db) => with_db(db, move |c| flush::rebase(c, p, token, wal, dec)).await,
            Durable::Postgres(pg) => pg.rebase(p, token, wal, dec).await,
        }
    }

    /// Applies several partitions' batches, each with its cursors: on SQLite in one
    /// transaction (one commit for a wake's partitions; a batch that fails fails them all),
    /// on PostgreSQL one transaction each (each holds its partition's cursor row). Per batch
    /// what [`Durable::flush`] returns.
    pub(crate) async fn flush_many(&self, batches: Vec<Batch>) -> Result<Vec<Option<Applied>>> {
        match self {
            Durable::Sqlite(db) => {
                with_db(db, move |c| {
                    let applied = flush::flush_many(c, &batches)?;
                    if applied.iter().flatten().any(|a| a.erased) {
                        flush::truncate_wal_file(c);
                    }
                    Ok(applied)
                })
                .await
            }
            Durable::Postgres(pg) => {
                let mut applied = Vec::with_capacity(batches.len());
                for batch in &batches {
                    applied.push(pg.flush(batch).await?);
                }
                Ok(applied)
            }
        }
    }

    /// Applies a retention policy; what it removed.
    pub(crate) async fn retain(
        &self,
        policy: retention::Retention,
    ) -> Result<Vec<retention::Removal>> {
        match self {
            Durable::Sqlite(db) => {
                with_db(db, move |c| sqlite::retention::retain(c, &policy)).await
            }
            Durable::Postgres(pg) => pg.retain(&policy).await,
        }
    }

    /// Session `sid` as the durable tier holds it; `None` when unknown.
    pub(crate) async fn load_snapshot(&self, sid: &str) -> Result<Option<Snapshot>> {
        match self {
            Durable::Sqlite(db) => {
                let sid = sid.to_string();
                with_db(db, move |c| sqlite_snapshot::load_snapshot(c, &sid)).await
            }
            Durable::Postgres(pg) => pg.load_snapshot(sid).await,
        }
    }

    /// User values and loose rounds of partition `p`.
    pub(crate) async fn load_user_data(
        &self,
        keys: &crate::keys::Keys,
        p: u32,
    ) -> Result<UserData> {
        match self {
            Durable::Sqlite(db) => {
                let keys = keys.clone();
                with_db(db, move |c| sqlite_snapshot::load_user_data(c, &keys, p)).await
            }
            Durable::Postgres(pg) => pg.load_user_data(keys, p).await,
        }
    }

    /// The long-term memory items of partition `p` that have not expired by `now_ms`, by
    /// namespace: (namespace, [(key, record)]), sorted.
    pub(crate) async fn memory_items(
        &self,
        p: u32,
        now_ms: i64,
    ) -> Result<Vec<(String, Vec<(String, String)>)>> {
        let rows = self
            .text_rows(
                "SELECT namespace, key, record, CAST(expires_at AS TEXT) FROM memory_items
                 WHERE CAST(partition AS TEXT) = ?1 ORDER BY namespace, key",
                &p.to_string(),
            )
            .await?;
        let live = rows.into_iter().filter_map(|mut r| {
            let expires = r.pop()?.and_then(|t| t.parse::<i64>().ok());
            if expires.is_some_and(|at| at <= now_ms) {
                return None;
            }
            let record = r.pop()??;
            let key = r.pop()??;
            Some((r.pop()??, (key, record)))
        });
        Ok(snapshot::group_sorted(live))
    }

    /// The sessions of partition `p`: (id, user id or '').
    pub(crate) async fn partition_sessions(&self, p: u32) -> Result<Vec<(String, String)>> {
        match self {
            Durable::Sqlite(db) => {
                with_db(db, move |c| sqlite_snapshot::partition_sessions(c, p)).await
            }
            Durable::Postgres(pg) => pg.partition_sessions(p).await,
        }
    }

    /// The decisions of partition `p` without an outcome, oldest first.
    pub(crate) async fn open_decisions(&self, p: u32) -> Result<Vec<Decision>> {
        let rows = self
            .text_rows(OPEN_DECISIONS_SQL, &decision_id(p, "%"))
            .await?;
        Ok(rows.iter().map(|r| decision_of(r)).collect())
    }
}

/// The identity the durable tier at `db` records for its namespace, read without creating
/// or changing anything (a missing SQLite file stays missing): `None` when it has none yet.
pub(crate) async fn recorded_identity(db: &Path) -> Result<Option<String>> {
    match Location::of(db) {
        Location::Postgres(url) => Pg::recorded_identity(url).await,
        Location::Sqlite(path) => {
            let path = path.to_path_buf();
            tokio::task::spawn_blocking(move || {
                sqlite::recorded_identity(&path).map_err(|e| database::classify(e, &path))
            })
            .await
            .map_err(|e| Error::sqlite(e.to_string()))?
        }
    }
}

/// Reads session `sid` from the durable tier at `db` without a daemon (a SQLite file opened
/// read-only, or a PostgreSQL database).
pub(crate) async fn read_snapshot(
    db: &Path,
    ns: &Namespace,
    sid: &str,
) -> Result<Option<Snapshot>> {
    match Location::of(db) {
        Location::Postgres(url) => Pg::open(url, ns, false).await?.load_snapshot(sid).await,
        Location::Sqlite(path) => {
            let conn = sqlite::open_read_only(path, ns)?;
            sqlite_snapshot::load_snapshot(&conn, sid)
        }
    }
}

/// `agentstate gc`: applies `policy` to the durable tier at `db` now, or (`dry`) lists what
/// it would remove and changes nothing. Sizes are the SQLite file with its `-wal`, or the
/// PostgreSQL database's (`pg_database_size`).
pub(crate) async fn collect_garbage(
    db: &Path,
    ns: &Namespace,
    policy: retention::Retention,
    dry: bool,
) -> Result<retention::GcReport> {
    match Location::of(db) {
        Location::Sqlite(path) => {
            if !path.exists() {
                return Err(Error::sqlite(format!("{}: no such file", path.display())));
            }
            let (path, ns) = (path.to_path_buf(), ns.clone());
            tokio::task::spawn_blocking(move || {
                sqlite::retention::collect_garbage(&path, &ns, &policy, dry)
            })
            .await
            .map_err(|e| Error::sqlite(e.to_string()))?
        }
        Location::Postgres(url) => {
            let pg = Pg::open(url, ns, false).await?;
            let bytes_before = pg.size_bytes().await?;
            let removed = if dry {
                pg.plan(&policy).await?
            } else {
                pg.retain(&policy).await?
            };
            let bytes_after = if dry {
                bytes_before
            } else {
                pg.size_bytes().await?
            };
            Ok(retention::GcReport {
                removed,
                bytes_before,
                bytes_after,
            })
        }
    }
}

/// A partition's decisions without an outcome (`?1`: `decision_id(p, "%")`), oldest first,
/// in the columns [`decision_of`] reads. The same text on both backends.
const OPEN_DECISIONS_SQL: &str =
    "SELECT id, session_id, decision, rationale, planned_action, meta, outcome,
            CAST(created_at AS TEXT)
     FROM decisions WHERE id LIKE ?1 AND outcome IS NULL ORDER BY decisions.created_at";

/// A decision from a row of `id, session_id, decision, rationale, planned_action, meta,
/// outcome, created_at` read as text ([`OPEN_DECISIONS_SQL`], the console's session view).
pub(crate) fn decision_of(row: &[Option<String>]) -> Decision {
    let text = |i: usize| row[i].clone().unwrap_or_default();
    Decision {
        id: text(0),
        session_id: text(1),
        decision: text(2),
        rationale: text(3),
        planned_action: Some(text(4)).filter(|a| !a.is_empty()),
        meta: serde_json::from_str(&text(5)).unwrap_or(serde_json::Value::Null),
        outcome: row[6].clone(),
        created_at: text(7).parse().unwrap_or(0),
    }
}
