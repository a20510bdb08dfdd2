//! `agentstate db copy`: moves a SQLite durable tier into PostgreSQL when a deployment
//! outgrows one machine. Every table is copied, the cursors included, so a daemon started on
//! the URL resumes from where SQLite stopped. The source is read in one read transaction (a
//! consistent snapshot, even with a daemon still writing); the target gets chunks of rows by
//! `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING`, so a copy interrupted half-way
//! is finished by running it again, without a row twice. The cursors go last. A target
//! that holds another namespace is refused before anything is written, and the copy ends by
//! comparing each table's row count.

use std::path::Path;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::mpsc;
use tokio_postgres::types::{ToSql, Type};

use super::postgres::Pg;
use super::sqlite as schema;
use crate::config::Namespace;
use crate::error::{Error, Result};

/// The tables copied, in order: the history first, the cursors last (a copy interrupted
/// before them leaves nothing a daemon would resume from).
pub const TABLES: &[&str] = &[
    "sessions",
    "messages",
    "compactions",
    "usage",
    "checkpoints",
    "decisions",
    "tombstones",
    "rounds",
    "user_values",
    "graph_log",
    "inbox",
    "effects",
    "memory_items",
    "cursors",
];

/// Rows sent to PostgreSQL per statement.
const CHUNK: usize = 2000;

/// One table's rows in the source and, after the copy, in the target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct TableCount {
    /// The table.
    pub table: &'static str,
    /// Rows in the SQLite file (the snapshot copied).
    pub source: u64,
    /// Rows in PostgreSQL after the copy.
    pub target: u64,
}

/// What the reading thread sends: a table's row count, or a chunk of its rows (columns in
/// the target's order).
enum Read {
    /// The next table of [`TABLES`] and its row count.
    Table(u64),
    /// Rows of the current table.
    Rows(Vec<Vec<Value>>),
}

/// Copies the SQLite durable tier at `source` into the PostgreSQL database at `url`
/// (creating its schema), then compares row counts. `progress` hears each table's name
/// and total, then the rows done so far.
pub(crate) async fn sqlite_to_postgres(
    source: &Path,
    url: &str,
    progress: &(dyn Fn(&str, u64, u64) + Sync),
) -> Result<Vec<TableCount>> {
    let conn = open_source(source)?;
    let ns = namespace_of(&conn, source)?;
    // Migrates the target, and refuses one that records another namespace.
    let pg = Pg::open(url, &ns, true).await?;
    // The namespace moves with its identity: Redis binds it to this tier, now in PostgreSQL.
    if let Some(identity) = schema::recorded_identity(source)? {
        pg.client()
            .await?
            .execute(
                "UPDATE namespace SET identity = $1 WHERE id = 1",
                &[&identity],
            )
            .await?;
    }
    let mut columns = Vec::new();
    for table in TABLES {
        columns.push(target_columns(&pg, table).await?);
    }
    let names: Vec<Vec<String>> = columns
        .iter()
        .map(|cols| cols.iter().map(|(n, _)| n.clone()).collect())
        .collect();
    let (tx, mut rx) = mpsc::channel::<Result<Read>>(4);
    let reader = tokio::task::spawn_blocking(move || read_all(conn, &names, &tx));
    // The tables arrive in order: `counts[i]` is TABLES[i]'s total, the last one the table
    // being copied.
    let mut counts: Vec<u64> = Vec::new();
    let mut done = 0;
    while let Some(read) = rx.recv().await {
        match read? {
            Read::Table(total) => {
                if let Some(previous) = counts.len().checked_sub(1) {
                    finish_table(&pg, TABLES[previous]).await?;
                }
                counts.push(total);
                done = 0;
                progress(TABLES[counts.len() - 1], total, 0);
            }
            Read::Rows(rows) => {
                let i = counts.len() - 1;
                done += rows.len() as u64;
                insert_chunk(&pg, TABLES[i], &columns[i], rows).await?;
                progress(TABLES[i], counts[i], done);
            }
        }
    }
    reader
        .await
        .map_err(|e| Error::sqlite(format!("reading thread failed: {e}")))?;
    if let Some(last) = counts.len().checked_sub(1) {
        finish_table(&pg, TABLES[last]).await?;
    }
    let client = pg.client().await?;
    let mut out = Vec::new();
    for (table, source) in TABLES.iter().copied().zip(counts) {
        let target: i64 = client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await?
            .get(0);
        out.push(TableCount {
            table,
            source,
            target: target.max(0) as u64,
        });
    }
    Ok(out)
}

/// Opens the source read-only and checks it is at this build's schema version.
fn open_source(source: &Path) -> Result<Connection> {
    if !source.exists() {
        return Err(Error::sqlite(format!("{}: no such file", source.display())));
    }
    let conn = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| Error::sqlite(format!("{}: {e}", source.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version != schema::schema_version() {
        return Err(Error::sqlite(format!(
            "{}: schema version {version}, this build copies version {} — run `agentstate --db {} spill --once` with this build first (it migrates the file)",
            source.display(),
            schema::schema_version(),
            source.display()
        )));
    }
    Ok(conn)
}

/// The namespace the SQLite file records (the copy keeps it: the target must match).
fn namespace_of(conn: &Connection, source: &Path) -> Result<Namespace> {
    let (prefix, partitions): (String, u32) = conn
        .query_row(
            "SELECT prefix, partitions FROM namespace WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|_| {
            Error::sqlite(format!(
                "{}: records no namespace (no daemon has written it): nothing to copy",
                source.display()
            ))
        })?;
    Ok(Namespace { prefix, partitions })
}

/// The target table's columns in order, with their types (text or bigint).
async fn target_columns(pg: &Pg, table: &str) -> Result<Vec<(String, Type)>> {
    let client = pg.client().await?;
    let rows = client
        .query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1
             ORDER BY ordinal_position",
            &[&table],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let (name, kind): (String, String) = (r.get(0), r.get(1));
            match kind.as_str() {
                "bigint" => Ok((name, Type::INT8)),
                "text" => Ok((name, Type::TEXT)),
                other => Err(Error::postgres(format!(
                    "{table}.{name} has type {other}; the copy knows text and bigint"
                ))),
            }
        })
        .collect()
}

/// The reading thread: one read transaction over every table (a consistent snapshot), each
/// table's count, then its rows in chunks, in the target's column order.
fn read_all(mut conn: Connection, names: &[Vec<String>], out: &mpsc::Sender<Result<Read>>) {
    let result = (|| -> Result<()> {
        let tx = conn.transaction()?;
        for (table, cols) in TABLES.iter().zip(names) {
            let total: i64 =
                tx.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
            if out.blocking_send(Ok(Read::Table(total as u64))).is_err() {
                return Ok(());
            }
            let mut stmt = tx.prepare(&format!("SELECT {} FROM {table}", cols.join(", ")))?;
            let mut rows = stmt.query([])?;
            let mut chunk = Vec::with_capacity(CHUNK);
            while let Some(row) = rows.next()? {
                chunk.push(
                    (0..cols.len())
                        .map(|i| row.get::<_, Value>(i))
                        .collect::<rusqlite::Result<Vec<_>>>()?,
                );
                if chunk.len() == CHUNK {
                    let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                    if out.blocking_send(Ok(Read::Rows(full))).is_err() {
                        return Ok(());
                    }
                }
            }
            if !chunk.is_empty() && out.blocking_send(Ok(Read::Rows(chunk))).is_err() {
                return Ok(());
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = out.blocking_send(Err(e));
    }
}

/// A column of a chunk as one PostgreSQL array parameter.
enum ColumnArray {
    Int(Vec<Option<i64>>),
    Text(Vec<Option<String>>),
}

/// Inserts a chunk with one statement; rows the target already holds are left alone.
async fn insert_chunk(
    pg: &Pg,
    table: &str,
    columns: &[(String, Type)],
    rows: Vec<Vec<Value>>,
) -> Result<()> {
    let mut arrays: Vec<ColumnArray> = columns
        .iter()
        .map(|(_, ty)| match *ty {
            Type::INT8 => ColumnArray::Int(Vec::with_capacity(rows.len())),
            _ => ColumnArray::Text(Vec::with_capacity(rows.len())),
        })
        .collect();
    for row in rows {
        for ((value, array), (name, _)) in row.into_iter().zip(&mut arrays).zip(columns) {
            match (array, value) {
                (ColumnArray::Int(a), Value::Integer(i)) => a.push(Some(i)),
                (ColumnArray::Int(a), Value::Null) => a.push(None),
                (ColumnArray::Text(a), Value::Text(t)) => a.push(Some(t)),
                (ColumnArray::Text(a), Value::Integer(i)) => a.push(Some(i.to_string())),
                (ColumnArray::Text(a), Value::Null) => a.push(None),
                (_, other) => {
                    return Err(Error::sqlite(format!(
                        "{table}.{name} holds {other:?}, which its PostgreSQL column cannot take"
                    )))
                }
            }
        }
    }
    let casts: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, (_, ty))| {
            let kind = if *ty == Type::INT8 { "bigint" } else { "text" };
            format!("${}::{kind}[]", i + 1)
        })
        .collect();
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    let sql = format!(
        "INSERT INTO {table} ({}) SELECT * FROM unnest({}) ON CONFLICT DO NOTHING",
        names.join(", "),
        casts.join(", ")
    );
    let params: Vec<&(dyn ToSql + Sync)> = arrays
        .iter()
        .map(|a| match a {
            ColumnArray::Int(v) => v as &(dyn ToSql + Sync),
            ColumnArray::Text(v) => v as &(dyn ToSql + Sync),
        })
        .collect();
    let client = pg.client().await?;
    client.execute(&sql, &params).await?;
    Ok(())
}

/// After a table: the checkpoints' identity continues above the copied seqs.
async fn finish_table(pg: &Pg, table: &str) -> Result<()> {
    if table == "checkpoints" {
        pg.client()
            .await?
            .execute(
                "SELECT setval(pg_get_serial_sequence('checkpoints', 'seq'),
                               GREATEST((SELECT max(seq) FROM checkpoints), 1))",
                &[],
            )
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table added to the schema without being added here would be left behind.
    #[test]
    fn every_table_of_the_schema_is_copied() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open_writer(&dir.path().join("t.db"), &Namespace::default()).unwrap();
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        let tables: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let mut copied: Vec<&str> = TABLES.to_vec();
        copied.push("namespace"); // claimed by the target's open, checked against the file's;
                                  // its identity copied
        copied.sort_unstable();
        assert_eq!(tables, copied);
    }
}
