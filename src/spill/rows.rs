//! Rows read as text: the one shape in which both durable tiers answer the same SQL (`?1`
//! bound as text when the statement has it; select text columns or `CAST(x AS TEXT)`). The
//! durable interface's `text_rows`, the retention plan and export read rows this way.

use rusqlite::Connection;

use crate::error::Result;

/// Rows read as text (NULL as `None`).
pub(crate) type TextRows = Vec<Vec<Option<String>>>;

/// Every row of `sql` on a SQLite connection (`?1` bound to `arg` when the statement has a
/// parameter).
pub(crate) fn sqlite(conn: &Connection, sql: &str, arg: &str) -> Result<TextRows> {
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
