//! Snapshot reads on SQLite: the shared queries (`durable::snapshot::sql`) run on the
//! connection, made into the restore image by `durable::snapshot::assemble`. Read-only; runs
//! on the SQLite thread.

use rusqlite::{params, Connection, OptionalExtension};

use crate::durable::snapshot::{
    assemble, group_sorted, sql, SessionRow, SessionRows, Snapshot, UserData,
};
use crate::error::Result;

fn strings<P: rusqlite::Params>(conn: &Connection, sql: &str, p: P) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(p, |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Reads session `sid` from SQLite; `None` when SQLite does not know it.
pub(crate) fn load_snapshot(conn: &Connection, sid: &str) -> Result<Option<Snapshot>> {
    let head = conn
        .query_row(sql::HEAD, params![sid], |r| {
            let mut texts: [String; 10] = Default::default();
            for (i, t) in texts.iter_mut().enumerate() {
                *t = r.get(i)?;
            }
            let mut ints = [0i64; 5];
            for (i, n) in ints.iter_mut().enumerate() {
                *n = r.get(10 + i)?;
            }
            Ok(SessionRow { texts, ints })
        })
        .optional()?;
    let Some(head) = head else {
        return Ok(None);
    };
    fn all<T>(
        conn: &Connection,
        sql: &str,
        sid: &str,
        f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params![sid], f)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
    let rows = SessionRows {
        head,
        messages: all(conn, sql::MESSAGES, sid, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?,
        compactions: all(conn, sql::COMPACTIONS, sid, |r| r.get(0))?,
        usage: all(conn, sql::USAGE, sid, |r| Ok((r.get(0)?, r.get(1)?)))?,
        checkpoints: all(conn, sql::CHECKPOINTS, sid, |r| Ok((r.get(0)?, r.get(1)?)))?,
        decisions: all(conn, sql::DECISIONS, sid, |r| {
            Ok(vec![
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get::<_, i64>(5)?.to_string(),
            ])
        })?,
        rounds: all(conn, sql::ROUNDS, sid, |r| {
            Ok((r.get(0)?, (r.get(1)?, r.get(2)?)))
        })?,
        children: strings(conn, sql::CHILDREN, params![sid])?,
        graph: all(conn, sql::GRAPH, sid, |r| Ok((r.get(0)?, r.get(1)?)))?,
        inbox: all(conn, sql::INBOX, sid, |r| Ok((r.get(0)?, r.get(1)?)))?,
        effects: all(conn, sql::EFFECTS, sid, |r| Ok((r.get(0)?, r.get(1)?)))?,
    };
    assemble(sid, rows).map(Some)
}

/// Reads the user data of partition `p` (the partition of the user id) from SQLite.
pub(crate) fn load_user_data(
    conn: &Connection,
    keys: &crate::keys::Keys,
    p: u32,
) -> Result<UserData> {
    let mut stmt =
        conn.prepare_cached("SELECT user_id, key, value FROM user_values ORDER BY user_id, key")?;
    let values = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?))))?
        .filter(|row| row.as_ref().map_or(true, |(u, _)| keys.partition(u) == p))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut stmt = conn.prepare_cached(
        "SELECT user_id, session_id, round_id, state FROM rounds
         WHERE session_id NOT IN (SELECT id FROM sessions)
         ORDER BY user_id, session_id, round_id",
    )?;
    let rounds = stmt
        .query_map([], |r| {
            Ok(((r.get::<_, String>(0)?, r.get(1)?), (r.get(2)?, r.get(3)?)))
        })?
        .filter(|row| {
            row.as_ref()
                .map_or(true, |((u, _), _)| keys.partition(u) == p)
        })
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((group_sorted(values), group_sorted(rounds)))
}

/// The sessions SQLite holds for partition `p`: (id, user id or '').
pub(crate) fn partition_sessions(conn: &Connection, p: u32) -> Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare_cached("SELECT id, user_id FROM sessions WHERE partition = ?1")?;
    let rows = stmt.query_map(params![p], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
