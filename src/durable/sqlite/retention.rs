//! Retention on SQLite: the shared plan (`durable::retention`) read on the connection, its
//! removals executed as changes (`durable::plan::removal_changes`) in one transaction, then
//! the freed pages given back to the filesystem (incremental auto-vacuum, then a WAL
//! checkpoint).

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::flush::execute;
use crate::config::Namespace;
use crate::durable::plan::removal_changes;
use crate::durable::retention::{now_ms, plan_from, GcReport, Removal, Retention};
use crate::error::Result;

/// Lists what `policy` removes from the SQLite database now (reads only).
pub(crate) fn plan(conn: &Connection, policy: &Retention) -> Result<Vec<Removal>> {
    let rows = policy.queries(now_ms()).map(|q| match q {
        Some((sql, arg)) => super::text_rows(conn, sql, &arg),
        None => Ok(Vec::new()),
    });
    let [a, b, c, d, e] = rows;
    Ok(plan_from(policy, [a?, b?, c?, d?, e?]))
}

/// Removes what `policy` lists now, in one transaction, then returns the freed pages to the
/// filesystem. Returns what it removed.
pub(crate) fn retain(conn: &mut Connection, policy: &Retention) -> Result<Vec<Removal>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let removed = plan(&tx, policy)?;
    for change in removed.iter().flat_map(removal_changes) {
        execute(&tx, &change)?;
    }
    tx.commit()?;
    if !removed.is_empty() {
        reclaim(conn)?;
    }
    Ok(removed)
}

/// Gives free pages back to the filesystem: incremental vacuum, then a WAL checkpoint that
/// truncates the `-wal` file (a reader may block it: the next gc finishes it).
fn reclaim(conn: &Connection) -> Result<()> {
    // Each step of the pragma frees one page: run it to the end.
    let mut stmt = conn.prepare("PRAGMA incremental_vacuum")?;
    let mut rows = stmt.query([])?;
    while rows.next()?.is_some() {}
    let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
    if busy != 0 {
        tracing::debug!("gc: wal checkpoint blocked by a reader; the file shrinks at the next one");
    }
    Ok(())
}

/// Bytes the database takes on disk: the file and its `-wal`.
fn file_size(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    size(path) + size(Path::new(&format!("{}-wal", path.display())))
}

/// `agentstate gc`: applies `policy` to the database at `path` (or, `dry`, only lists what it
/// would remove, opening the file read-only).
pub(crate) fn collect_garbage(
    path: &Path,
    ns: &Namespace,
    policy: &Retention,
    dry: bool,
) -> Result<GcReport> {
    let bytes_before = file_size(path);
    if dry {
        let conn = super::open_read_only(path, ns)?;
        return Ok(GcReport {
            removed: plan(&conn, policy)?,
            bytes_before,
            bytes_after: bytes_before,
        });
    }
    let mut conn = super::open_writer(path, ns)?;
    let removed = retain(&mut conn, policy)?;
    Ok(GcReport {
        removed,
        bytes_before,
        bytes_after: file_size(path),
    })
}
