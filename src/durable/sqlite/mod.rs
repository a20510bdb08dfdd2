//! The SQLite durable tier (a path as `--db`): opening the database (WAL journal,
//! secure_delete), the versioned schema with forward-only migrations applied at startup, the
//! namespace record, and rows read as text. `database` is the daemon's checked connection,
//! `flush` executes the interpreter's changes, `retention` and `snapshot` run the shared
//! plans' reads.

pub(crate) mod database;
pub(crate) mod flush;
pub(crate) mod retention;
pub(crate) mod snapshot;

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

use super::rows::TextRows;
use crate::config::Namespace;
use crate::error::{Error, Result};

/// Forward-only migrations; `PRAGMA user_version` is the number applied so far. Append new
/// steps, never edit old ones.
const MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    "CREATE TABLE namespace (
         id INTEGER PRIMARY KEY CHECK (id = 1),
         prefix TEXT NOT NULL,
         partitions INTEGER NOT NULL
     );
     CREATE TABLE cursors (
         partition INTEGER PRIMARY KEY,
         wal TEXT NOT NULL DEFAULT '0-0',
         decisions TEXT NOT NULL DEFAULT '0-0',
         token INTEGER NOT NULL DEFAULT 0
     );
     CREATE TABLE sessions (
         id TEXT PRIMARY KEY,
         partition INTEGER NOT NULL,
         user_id TEXT NOT NULL,
         kind TEXT NOT NULL,
         parent TEXT NOT NULL,
         spawn_depth INTEGER NOT NULL,
         lifecycle TEXT NOT NULL,
         status TEXT NOT NULL,
         model TEXT NOT NULL,
         system_prompt TEXT NOT NULL,
         config TEXT NOT NULL,
         metadata TEXT NOT NULL,
         ttl INTEGER NOT NULL,
         created_at INTEGER NOT NULL,
         updated_at INTEGER NOT NULL,
         round_index INTEGER NOT NULL,
         pending TEXT NOT NULL
     );
     CREATE INDEX sessions_parent ON sessions (parent);
     CREATE INDEX sessions_user ON sessions (user_id);
     CREATE TABLE messages (
         session_id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         element TEXT NOT NULL,
         idem_key TEXT,
         PRIMARY KEY (session_id, seq)
     ) WITHOUT ROWID;
     CREATE TABLE compactions (
         session_id TEXT NOT NULL,
         compact_seq INTEGER NOT NULL,
         from_seq INTEGER NOT NULL,
         to_seq INTEGER NOT NULL,
         record TEXT NOT NULL,
         PRIMARY KEY (session_id, compact_seq)
     ) WITHOUT ROWID;
     CREATE TABLE usage (
         session_id TEXT NOT NULL,
         round_index INTEGER NOT NULL,
         record TEXT NOT NULL,
         PRIMARY KEY (session_id, round_index)
     ) WITHOUT ROWID;
     CREATE TABLE checkpoints (
         seq INTEGER PRIMARY KEY,
         id TEXT NOT NULL UNIQUE,
         session_id TEXT NOT NULL,
         label TEXT NOT NULL,
         created_at INTEGER NOT NULL,
         record TEXT NOT NULL
     );
     CREATE INDEX checkpoints_session ON checkpoints (session_id, label);
     CREATE TABLE decisions (
         id TEXT PRIMARY KEY,
         session_id TEXT NOT NULL,
         decision TEXT NOT NULL,
         rationale TEXT NOT NULL,
         planned_action TEXT NOT NULL,
         meta TEXT NOT NULL,
         created_at INTEGER NOT NULL,
         outcome TEXT,
         outcome_at INTEGER
     );
     CREATE INDEX decisions_session ON decisions (session_id);
     CREATE TABLE tombstones (
         session_id TEXT PRIMARY KEY,
         closed_at INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE TABLE rounds (
         user_id TEXT NOT NULL,
         session_id TEXT NOT NULL,
         round_id INTEGER NOT NULL,
         created_at INTEGER NOT NULL,
         state TEXT NOT NULL,
         PRIMARY KEY (user_id, session_id, round_id)
     ) WITHOUT ROWID;
     CREATE INDEX rounds_session ON rounds (session_id);
     CREATE TABLE user_values (
         user_id TEXT NOT NULL,
         key TEXT NOT NULL,
         value TEXT NOT NULL,
         PRIMARY KEY (user_id, key)
     ) WITHOUT ROWID;",
    // 2: retention (`agentstate gc`, the daemon's policy) finds the oldest decisions and
    // tombstones by index. The file also moves to incremental auto-vacuum, which needs a
    // VACUUM outside any transaction: `ensure_incremental_vacuum` does that after migrating.
    "CREATE INDEX decisions_created ON decisions (created_at);
     CREATE INDEX tombstones_closed ON tombstones (closed_at);",
    // 3: graph checkpoint logs (LangGraph threads): a mirror of each session's
    // <prefix>:{p}:s:<sid>:graph hash (fields c|..., b|..., w|..., see lua/graph_put.lua).
    "CREATE TABLE graph_log (
         session_id TEXT NOT NULL,
         field TEXT NOT NULL,
         value TEXT NOT NULL,
         PRIMARY KEY (session_id, field)
     ) WITHOUT ROWID;",
    // 4: the namespace's identity: the first daemon gives its durable tier one and records it
    // in Redis too (`<prefix>:config`), which binds the namespace to this tier.
    "ALTER TABLE namespace ADD COLUMN identity TEXT;",
    // 5: a session's inbox items and tool-effect ledger (mirrors of <prefix>:{p}:s:<sid>:inbox
    // and :effects; see lua/inbox_put.lua and lua/effect_begin.lua): each row the item's or
    // the tool call's latest record.
    "CREATE TABLE inbox (
         session_id TEXT NOT NULL,
         item_id TEXT NOT NULL,
         record TEXT NOT NULL,
         PRIMARY KEY (session_id, item_id)
     ) WITHOUT ROWID;
     CREATE TABLE effects (
         session_id TEXT NOT NULL,
         call_id TEXT NOT NULL,
         record TEXT NOT NULL,
         PRIMARY KEY (session_id, call_id)
     ) WITHOUT ROWID;",
    // 6: long-term memory items (mirrors of <prefix>:{p}:m:<namespace>; see
    // lua/memory_put.lua): each row an item's latest record, its partition (the re-seed after
    // a Redis loss reads one partition's) and when it expires (retention).
    "CREATE TABLE memory_items (
         namespace TEXT NOT NULL,
         key TEXT NOT NULL,
         partition INTEGER NOT NULL,
         record TEXT NOT NULL,
         expires_at INTEGER,
         PRIMARY KEY (namespace, key)
     ) WITHOUT ROWID;
     CREATE INDEX memory_items_partition ON memory_items (partition);
     CREATE INDEX memory_items_expiry ON memory_items (expires_at) WHERE expires_at IS NOT NULL;",
    // 7: a partition's sessions (the index re-seed after a Redis loss, a rollback repair)
    // without a scan of every session per partition; PostgreSQL's schema had it from 1.
    "CREATE INDEX sessions_partition ON sessions (partition);",
];

/// The schema version this build writes (the number of migrations).
pub(crate) fn schema_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Opens (creating if needed) the database for writing: WAL journal, `secure_delete` (erased
/// values are zeroed, not left on free pages), migrations applied, namespace checked.
///
/// Architecture Invariant: only the spill daemon calls this; everything else opens SQLite
/// read-only with [`open_read_only`].
pub(crate) fn open_writer(path: &Path, ns: &Namespace) -> Result<Connection> {
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Takes effect when a new file gets its first table; an existing one is converted below.
    // Set only when not set: setting it takes the write lock, which another connection may
    // hold while the daemon starts.
    let mode: i64 = conn.pragma_query_value(None, "auto_vacuum", |r| r.get(0))?;
    if mode != 2 {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    enable_wal(&conn)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    migrate(&mut conn)?;
    ensure_incremental_vacuum(&conn)?;
    check_namespace(&mut conn, ns)?;
    Ok(conn)
}

/// How long a statement waits for another connection's lock before it fails.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the daemon's statements wait for another connection's lock, once its schema is
/// open: a commit that fails sooner lets the daemon see a locked file as an outage within the
/// 2 s after which it spools (`spill::outage`), and a failed commit is only retried.
pub(crate) const FLUSH_BUSY_TIMEOUT: Duration = Duration::from_secs(1);

/// Puts the file in WAL mode. SQLite answers a switch that meets another connection's (daemons
/// starting together on a new file) with SQLITE_BUSY at once, without waiting in the busy
/// handler, so it is retried for as long as any other statement would wait.
fn enable_wal(conn: &Connection) -> Result<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == ErrorCode::DatabaseBusy && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            done => return Ok(done?),
        }
    }
}

/// Opens an existing database read-only (export, stats); checks the namespace.
pub(crate) fn open_read_only(path: &Path, ns: &Namespace) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| Error::sqlite(format!("{}: {e}", path.display())))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    check_recorded_namespace(&conn, ns)?;
    Ok(conn)
}

/// Applies every migration newer than `PRAGMA user_version`, each in its own write
/// transaction. The version is read inside that transaction: daemons starting together on a
/// new file take turns, and each applies only what the one before it left.
fn migrate(conn: &mut Connection) -> Result<()> {
    // A file that is current needs no write: a daemon starts while another connection holds
    // the write lock (and spools until it is given back).
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current == schema_version() {
        return Ok(());
    }
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if current > schema_version() {
            return Err(Error::sqlite(format!(
                "database schema version {current} is newer than this build ({}) — run a newer agentstate on this file",
                schema_version()
            )));
        }
        let Some(sql) = MIGRATIONS.get(current as usize) else {
            return Ok(());
        };
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", current + 1)?;
        tx.commit()?;
        tracing::debug!(version = current + 1, "applied sqlite migration");
    }
}

/// Puts the file in incremental auto-vacuum mode, so a gc can give freed pages back to the
/// filesystem (`PRAGMA incremental_vacuum`). The mode is stored in the file's header and an
/// existing file only switches with a VACUUM (a rewrite of the file, once, outside any
/// transaction); a new file is created in that mode.
fn ensure_incremental_vacuum(conn: &Connection) -> Result<()> {
    const INCREMENTAL: i64 = 2;
    let mode: i64 = conn.pragma_query_value(None, "auto_vacuum", |r| r.get(0))?;
    if mode == INCREMENTAL {
        return Ok(());
    }
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    tracing::info!("converting the SQLite file to incremental auto-vacuum (one VACUUM)");
    conn.execute_batch("VACUUM")?;
    Ok(())
}

/// Records the namespace on first use, with a new identity (an existing record without one
/// gets one); a different prefix or partition count is [`Error::NamespaceMismatch`].
fn check_namespace(conn: &mut Connection, ns: &Namespace) -> Result<()> {
    // A file that records its namespace with an identity needs no write (see `migrate`).
    let identity: Option<Option<String>> = conn
        .query_row("SELECT identity FROM namespace WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    if identity.flatten().is_some() {
        return check_recorded_namespace(conn, ns);
    }
    // One write transaction: daemons starting together on a new file record one namespace
    // and one identity.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    check_recorded_namespace(&tx, ns)?;
    tx.execute(
        "INSERT OR IGNORE INTO namespace (id, prefix, partitions) VALUES (1, ?1, ?2)",
        params![ns.prefix, ns.partitions],
    )?;
    tx.execute(
        "UPDATE namespace SET identity = ?1 WHERE id = 1 AND identity IS NULL",
        params![Namespace::new_identity()],
    )?;
    tx.commit()?;
    Ok(())
}

/// [`Error::NamespaceMismatch`] when the file records another prefix or partition count.
fn check_recorded_namespace(conn: &Connection, ns: &Namespace) -> Result<()> {
    let recorded: Option<(String, u32)> = conn
        .query_row(
            "SELECT prefix, partitions FROM namespace WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    match recorded {
        Some((prefix, partitions)) if prefix != ns.prefix || partitions != ns.partitions => {
            Err(ns.tier_mismatch(&Namespace { prefix, partitions }))
        }
        _ => Ok(()),
    }
}

/// The identity the file at `path` records for its namespace, read without creating or
/// changing anything: `None` when the file does not exist, has no namespace record yet or
/// was written by a build before identities.
pub(crate) fn recorded_identity(path: &Path) -> Result<Option<String>> {
    if !path.exists() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| Error::sqlite(format!("{}: {e}", path.display())))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version < 4 {
        return Ok(None);
    }
    Ok(conn
        .query_row("SELECT identity FROM namespace WHERE id = 1", [], |r| {
            r.get::<_, Option<String>>(0)
        })
        .optional()?
        .flatten())
}

/// Every row of `sql` on a SQLite connection (`?1` bound to `arg` when the statement has a
/// parameter).
pub(crate) fn text_rows(conn: &Connection, sql: &str, arg: &str) -> Result<TextRows> {
    let mut stmt = conn.prepare_cached(sql)?;
    let n = stmt.column_count();
    let params: &[&dyn rusqlite::ToSql] = if stmt.parameter_count() == 0 {
        &[]
    } else {
        &[&arg]
    };
    let rows = stmt.query_map(params, |r| {
        (0..n).map(|i| r.get::<_, Option<String>>(i)).collect()
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_applied_once_and_namespace_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let ns = Namespace::default();
        drop(open_writer(&path, &ns).unwrap());
        let conn = open_writer(&path, &ns).unwrap();
        let v: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, schema_version());
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let vacuum: i64 = conn
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .unwrap();
        assert_eq!(vacuum, 2, "incremental auto-vacuum");
        let other = Namespace {
            prefix: "as".into(),
            partitions: 4,
        };
        assert!(matches!(
            open_writer(&path, &other),
            Err(Error::NamespaceMismatch(_))
        ));
    }

    /// Daemons started together on a new file each migrate and record the namespace without
    /// tripping over one another, and the file ends with one identity.
    #[test]
    fn writers_opening_a_new_file_together_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        for round in 0..10 {
            let path = dir.path().join(format!("{round}.db"));
            let start = std::sync::Arc::new(std::sync::Barrier::new(6));
            let writers: Vec<_> = (0..6)
                .map(|_| {
                    let (path, start) = (path.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        open_writer(&path, &Namespace::default()).map(drop)
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap().unwrap();
            }
            let identity = recorded_identity(&path).unwrap();
            assert!(identity.is_some(), "round {round}: no identity recorded");
            drop(open_writer(&path, &Namespace::default()).unwrap());
            assert_eq!(recorded_identity(&path).unwrap(), identity);
        }
    }

    /// A file made by the first schema (no auto-vacuum) is migrated and switched to
    /// incremental auto-vacuum, its rows kept.
    #[test]
    fn an_existing_file_moves_to_incremental_auto_vacuum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO tombstones (session_id, closed_at) VALUES ('s', 1)",
                [],
            )
            .unwrap();
            let vacuum: i64 = conn
                .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
                .unwrap();
            assert_eq!(vacuum, 0);
        }
        let conn = open_writer(&path, &Namespace::default()).unwrap();
        let vacuum: i64 = conn
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .unwrap();
        assert_eq!(vacuum, 2);
        let v: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, schema_version());
        let n: i64 = conn
            .query_row("SELECT count(*) FROM tombstones", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }
}
