//! Rehydration: an agent process (Redis only) asks for a session that is not live by
//! pushing its id onto `<prefix>:{p}:restore` and waits, bounded by
//! [`crate::Config::restore_wait`], for the meta key to appear or for the daemon's answer in
//! `<prefix>:{p}:restore:<sid>`. The daemon that owns the partition reads the session from
//! SQLite and writes it back with `restore_session.lua` in one atomic, idempotent step.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rusqlite::{params, Connection, OptionalExtension};

use super::{with_db, SpillDaemon};
use crate::decisions::Decision;
use crate::durability::Backoff;
use crate::error::{Error, Result};
use crate::scripts;
use crate::store::Store;

/// How long the daemon's answer to a restore request stays readable.
const REPLY_TTL_MS: u64 = 10_000;

/// Everything `restore_session.lua` needs, read from SQLite.
#[derive(Debug, Default)]
struct Snapshot {
    /// Owning user, '' for none.
    user_id: String,
    /// Idle TTL, seconds.
    ttl: i64,
    /// Meta fields in create_session's order.
    meta: Vec<(&'static str, String)>,
    /// Stored message elements, seq 1..n.
    messages: Vec<String>,
    /// Idempotency key → seq.
    idem: Vec<(String, i64)>,
    /// Compaction audit records, oldest first.
    compactions: Vec<String>,
    /// Round index → usage JSON.
    usage: Vec<(i64, String)>,
    /// Label → latest checkpoint JSON.
    checkpoints: Vec<(String, String)>,
    /// Child session ids.
    children: Vec<String>,
    /// Open decisions: id, decision, rationale, planned action, meta, created_at.
    decisions: Vec<Vec<String>>,
    /// StateService rounds of this session id: (user, [(round id, state)]).
    rounds: Vec<(String, Vec<(i64, String)>)>,
}

/// Merges compacted ranges into the meta `compacted` form `a-b,c-d` (as compact.lua does).
fn merge_ranges(mut ranges: Vec<(i64, i64)>) -> String {
    ranges.sort();
    let mut merged: Vec<(i64, i64)> = Vec::new();
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
        .iter()
        .map(|(a, b)| format!("{a}-{b}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Groups `(key, item)` rows sorted by key into one `(key, items)` entry per key.
fn group_sorted<K: PartialEq, V>(rows: impl IntoIterator<Item = (K, V)>) -> Vec<(K, Vec<V>)> {
    let mut groups: Vec<(K, Vec<V>)> = Vec::new();
    for (key, item) in rows {
        match groups.last_mut() {
            Some((k, items)) if *k == key => items.push(item),
            _ => groups.push((key, vec![item])),
        }
    }
    groups
}

fn strings<P: rusqlite::Params>(conn: &Connection, sql: &str, p: P) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(p, |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Reads session `sid` from SQLite; `None` when SQLite does not know it.
fn load_snapshot(conn: &Connection, sid: &str) -> Result<Option<Snapshot>> {
    type Row = (
        String,
        String,
        String,
        i64,
        String,
        String,
        String,
        String,
        String,
        String,
    );
    type Row2 = (i64, i64, i64, i64, String);
    let head: Option<(Row, Row2)> = conn
        .query_row(
            "SELECT user_id, kind, parent, spawn_depth, lifecycle, status, model, system_prompt,
                    config, metadata, ttl, created_at, updated_at, round_index, pending
             FROM sessions WHERE id = ?1",
            params![sid],
            |r| {
                Ok((
                    (
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(8)?,
                        r.get(9)?,
                    ),
                    (r.get(10)?, r.get(11)?, r.get(12)?, r.get(13)?, r.get(14)?),
                ))
            },
        )
        .optional()?;
    let Some((
        (user_id, kind, parent, depth, lifecycle, status, model, prompt, config, metadata),
        (ttl, created, updated, round_index, pending),
    )) = head
    else {
        return Ok(None);
    };
    let mut s = Snapshot {
        user_id: user_id.clone(),
        ttl,
        ..Snapshot::default()
    };
    {
        let mut stmt = conn.prepare_cached(
            "SELECT seq, element, idem_key FROM messages WHERE session_id = ?1 ORDER BY seq",
        )?;
        let mut rows = stmt.query(params![sid])?;
        while let Some(r) = rows.next()? {
            let seq: i64 = r.get(0)?;
            if seq != s.messages.len() as i64 + 1 {
                return Err(Error::Sqlite(format!(
                    "session {sid}: message seq {seq} follows {} (gap in SQLite)",
                    s.messages.len()
                )));
            }
            s.messages.push(r.get(1)?);
            if let Some(k) = r.get::<_, Option<String>>(2)? {
                s.idem.push((k, seq));
            }
        }
    }
    let mut ranges = Vec::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT from_seq, to_seq, record FROM compactions WHERE session_id = ?1
             ORDER BY compact_seq",
        )?;
        let mut rows = stmt.query(params![sid])?;
        while let Some(r) = rows.next()? {
            ranges.push((r.get(0)?, r.get(1)?));
            s.compactions.push(r.get(2)?);
        }
    }
    {
        let mut stmt = conn.prepare_cached(
            "SELECT round_index, record FROM usage WHERE session_id = ?1 ORDER BY round_index",
        )?;
        let rows = stmt.query_map(params![sid], |r| Ok((r.get(0)?, r.get(1)?)))?;
        s.usage = rows.collect::<rusqlite::Result<_>>()?;
        let mut stmt = conn.prepare_cached(
            "SELECT label, record FROM checkpoints WHERE seq IN
                 (SELECT max(seq) FROM checkpoints WHERE session_id = ?1 GROUP BY label)
             ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![sid], |r| Ok((r.get(0)?, r.get(1)?)))?;
        s.checkpoints = rows.collect::<rusqlite::Result<_>>()?;
        let mut stmt = conn.prepare_cached(
            "SELECT id, decision, rationale, planned_action, meta, created_at FROM decisions
             WHERE session_id = ?1 AND outcome IS NULL ORDER BY created_at, id",
        )?;
        let rows = stmt.query_map(params![sid], |r| {
            Ok(vec![
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get::<_, i64>(5)?.to_string(),
            ])
        })?;
        s.decisions = rows.collect::<rusqlite::Result<_>>()?;
        let mut stmt = conn.prepare_cached(
            "SELECT user_id, round_id, state FROM rounds WHERE session_id = ?1
             ORDER BY user_id, round_id",
        )?;
        let rows = stmt.query_map(params![sid], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?;
        s.rounds = group_sorted(rows.collect::<rusqlite::Result<Vec<_>>>()?);
    }
    s.children = strings(
        conn,
        "SELECT id FROM sessions WHERE parent = ?1 ORDER BY id",
        params![sid],
    )?;
    let last_compact_seq = s.compactions.len();
    s.meta = vec![
        ("user_id", user_id),
        ("kind", kind),
        ("parent", parent),
        ("spawn_depth", depth.to_string()),
        ("lifecycle", lifecycle),
        ("status", status),
        ("model", model),
        ("system_prompt", prompt),
        ("config", config),
        ("metadata", metadata),
        ("created_at", created.to_string()),
        ("updated_at", updated.to_string()),
        ("next_seq", (s.messages.len() + 1).to_string()),
        ("round_index", round_index.to_string()),
        ("last_compact_seq", last_compact_seq.to_string()),
        ("pending", pending),
        ("version", "0".into()),
        ("ttl", ttl.to_string()),
        ("compacted", merge_ranges(ranges)),
    ];
    Ok(Some(s))
}

/// Appends one section of `restore_session.lua`'s arguments: the count, then each item's
/// arguments (a pair or array item spreads into several).
fn section<T: redis::ToRedisArgs>(inv: &mut redis::ScriptInvocation<'_>, items: &[T]) {
    inv.arg(items.len());
    for item in items {
        inv.arg(item);
    }
}

/// Writes `s` into Redis unless the session is live; true when it restored.
async fn write_snapshot(store: &Store, sid: &str, s: &Snapshot) -> Result<bool> {
    let keys = store.keys().session(sid);
    let p = keys.partition;
    let mut inv = scripts::RESTORE_SESSION.prepare_invoke();
    inv.key(&keys.as_array()[..])
        .key(store.keys().sessions_index(p))
        .key(store.keys().user_sessions(p, &s.user_id))
        .key(store.keys().open_decisions(p))
        .arg(sid)
        .arg(&s.user_id)
        .arg(s.ttl);
    section(&mut inv, &s.meta);
    section(&mut inv, &s.messages);
    section(&mut inv, &s.idem);
    section(&mut inv, &s.compactions);
    section(&mut inv, &s.usage);
    section(&mut inv, &s.checkpoints);
    section(&mut inv, &s.children);
    section(&mut inv, &s.decisions);
    let restored: i64 = store.invoke(&inv).await?;
    for (user, rounds) in &s.rounds {
        restore_rounds(store, user, sid, rounds).await?;
    }
    Ok(restored == 1)
}

/// Writes the StateService rounds of `user`'s `session` with `restore_rounds.lua` unless that
/// rounds hash is live; true when it wrote them.
async fn restore_rounds(
    store: &Store,
    user: &str,
    session: &str,
    rounds: &[(i64, String)],
) -> Result<bool> {
    let mut inv = scripts::RESTORE_ROUNDS.prepare_invoke();
    inv.key(store.keys().rounds(user, session))
        .arg(rounds.iter().map(|r| r.0).max().unwrap_or(0));
    for (round, state) in rounds {
        inv.arg(round).arg(state);
    }
    let restored: i64 = store.invoke(&inv).await?;
    Ok(restored == 1)
}

/// User values (user → key/value pairs) and StateService rounds of sessions that are not
/// agentstate sessions ((user, session) → round/state pairs) SQLite holds for one partition.
type UserData = (
    Vec<(String, Vec<(String, String)>)>,
    Vec<((String, String), Vec<(i64, String)>)>,
);

/// Reads the user data of partition `p` (the partition of the user id) from SQLite.
fn load_user_data(conn: &Connection, keys: &crate::keys::Keys, p: u32) -> Result<UserData> {
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

/// After Redis lost its state: puts back the user values and the StateService rounds (of
/// sessions that are not agentstate sessions, whose rounds come back with the session) that
/// SQLite holds for partition `p`. Runs after the flush that applied every wal entry up to
/// `wal_committed`, so erasures made in the new Redis are in SQLite already; what agents did
/// since is never overwritten or resurrected (`reseed_user_values.lua`, `restore_rounds.lua`).
/// Returns the values and the rounds hashes written.
/// `lease` is the owner's lease value (`"<owner> <token>"`): a daemon that lost the partition
/// meanwhile writes nothing and gets [`Error::Redis`] ("lease lost"), leaving the re-seed to
/// the new owner.
pub(super) async fn reseed_user_data(
    store: &Store,
    db: &Arc<Mutex<Connection>>,
    p: u32,
    wal_committed: &str,
    lease: &str,
) -> Result<(u64, u64)> {
    let keys = store.keys().clone();
    let (values, rounds) = with_db(db, move |c| load_user_data(c, &keys, p)).await?;
    let mut written = (0, 0);
    for (user, pairs) in &values {
        let mut inv = scripts::RESEED_USER_VALUES.prepare_invoke();
        inv.key(store.keys().user(user))
            .key(store.keys().user_forgotten(user))
            .key(store.keys().wal(p))
            .key(store.keys().lease(p))
            .arg(user)
            .arg(wal_committed)
            .arg(lease);
        for (key, value) in pairs {
            inv.arg(key).arg(value);
        }
        let n: i64 = store.invoke(&inv).await?;
        if n < 0 {
            return Err(Error::Redis(format!(
                "lease on partition {p} lost during the user re-seed; the new owner repeats it"
            )));
        }
        written.0 += n as u64;
    }
    for ((user, session), list) in &rounds {
        written.1 += u64::from(restore_rounds(store, user, session, list).await?);
    }
    tracing::info!(
        partition = p,
        values = written.0,
        rounds = written.1,
        "re-seeded user data from SQLite"
    );
    Ok(written)
}

/// Re-adds every session SQLite holds for partition `p` to the session indexes (after Redis
/// lost them: the daemon found `<prefix>:{p}:committed` empty), so listing shows them again.
pub(super) async fn reseed_indexes(
    store: &Store,
    db: &Arc<Mutex<Connection>>,
    p: u32,
) -> Result<()> {
    let rows: Vec<(String, String)> = with_db(db, move |c| {
        let mut stmt = c.prepare_cached("SELECT id, user_id FROM sessions WHERE partition = ?1")?;
        let rows = stmt.query_map(params![p], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    })
    .await?;
    // Decisions still without an outcome, so crash recovery (`incomplete_decisions`) and
    // `record_outcome` work again; HSETNX leaves any the new Redis holds alone.
    let open: Vec<Decision> = with_db(db, move |c| {
        let mut stmt = c.prepare_cached(
            "SELECT id, session_id, decision, rationale, planned_action, meta, created_at
             FROM decisions WHERE id LIKE ?1 AND outcome IS NULL ORDER BY created_at",
        )?;
        let rows = stmt.query_map(params![format!("{p}:%")], |r| {
            let action: String = r.get(4)?;
            let meta: String = r.get(5)?;
            Ok(Decision {
                id: r.get(0)?,
                session_id: r.get(1)?,
                decision: r.get(2)?,
                rationale: r.get(3)?,
                planned_action: Some(action).filter(|a| !a.is_empty()),
                meta: serde_json::from_str(&meta).unwrap_or(serde_json::Value::Null),
                outcome: None,
                created_at: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    })
    .await?;
    let mut conn = store.conn().await?;
    for chunk in rows.chunks(1000) {
        let mut pipe = redis::pipe();
        for (sid, user) in chunk {
            pipe.sadd(store.keys().sessions_index(p), sid).ignore();
            if !user.is_empty() {
                pipe.sadd(store.keys().user_sessions(p, user), sid).ignore();
            }
        }
        let _: () = pipe.query_async(&mut conn).await?;
    }
    for chunk in open.chunks(1000) {
        let mut pipe = redis::pipe();
        for d in chunk {
            pipe.hset_nx(
                store.keys().open_decisions(p),
                &d.id,
                serde_json::to_string(d)?,
            )
            .ignore();
        }
        let _: () = pipe.query_async(&mut conn).await?;
    }
    tracing::info!(
        partition = p,
        sessions = rows.len(),
        open_decisions = open.len(),
        "re-seeded the session indexes and open decisions from SQLite"
    );
    Ok(())
}

impl SpillDaemon {
    /// Serves the pending restore requests of partition `p`; returns the sessions restored.
    pub(super) async fn serve_restores(&self, p: u32) -> Result<u64> {
        let mut conn = self.store.conn().await?;
        let requests: Option<Vec<String>> = redis::cmd("LPOP")
            .arg(self.store.keys().restore_requests(p))
            .arg(64)
            .query_async(&mut conn)
            .await?;
        let mut requests = requests.unwrap_or_default();
        requests.sort();
        requests.dedup();
        let mut restored = 0;
        for sid in requests {
            if crate::keys::validate_id("session", &sid).is_err() {
                continue;
            }
            let id = sid.clone();
            let snapshot = with_db(&self.db, move |c| load_snapshot(c, &id)).await?;
            let answer = match &snapshot {
                Some(s) => {
                    let started = Instant::now();
                    if write_snapshot(&self.store, &sid, s).await? {
                        restored += 1;
                        tracing::info!(session = %sid, messages = s.messages.len(), ms = started.elapsed().as_millis() as u64, "restored session");
                    }
                    "restored"
                }
                None => "unknown",
            };
            let _: () = redis::cmd("SET")
                .arg(self.store.keys().restore_reply(&sid))
                .arg(answer)
                .arg("PX")
                .arg(REPLY_TTL_MS)
                .query_async(&mut conn)
                .await?;
        }
        Ok(restored)
    }
}

/// Restores session `sid` from `db_path` straight into Redis (no daemon involved); used by
/// the rehydration benchmark (W6). Returns the number of messages restored, or `None` when SQLite
/// does not know the session or it is live already.
pub(crate) async fn restore_direct(
    store: &Store,
    db_path: &std::path::Path,
    sid: &str,
) -> Result<Option<usize>> {
    let conn = super::schema::open_read_only(db_path, &store.config().namespace)?;
    let snapshot = load_snapshot(&conn, sid)?;
    match snapshot {
        Some(s) if write_snapshot(store, sid, &s).await? => Ok(Some(s.messages.len())),
        _ => Ok(None),
    }
}

impl Store {
    /// Makes session `sid` live again from SQLite through the spill daemon. Returns `false`
    /// when it was live already, `true` when a daemon restored it; [`Error::UnknownSession`]
    /// when SQLite does not know it either; [`Error::NotLive`] when no daemon answered within
    /// [`crate::Config::restore_wait`].
    pub async fn restore_session(&self, sid: &str) -> Result<bool> {
        let keys = self.session_keys(sid)?;
        let mut conn = self.conn().await?;
        let live: bool = redis::cmd("EXISTS")
            .arg(&keys.meta)
            .query_async(&mut conn)
            .await?;
        if live {
            return Ok(false);
        }
        self.request_restore(sid).await?;
        Ok(true)
    }

    /// Runs `read` (a plain command on one of `sid`'s keys) in one round trip with an EXISTS
    /// of the meta key — a plain key cannot tell "no session" from "empty" — and, when the
    /// session is not live, restores it through the daemon and reads again.
    pub(crate) async fn read_live<T: redis::FromRedisValue>(
        &self,
        sid: &str,
        read: &redis::Cmd,
    ) -> Result<T> {
        let meta = self.session_keys(sid)?.meta;
        let mut restored = false;
        loop {
            let (live, value): (bool, T) = redis::pipe()
                .exists(&meta)
                .add_command(read.clone())
                .query_async(&mut self.conn().await?)
                .await?;
            if live || restored {
                return Ok(value);
            }
            self.request_restore(sid).await?;
            restored = true;
        }
    }

    /// Whether `sid` may be restored: the partition's session index keeps an id until the
    /// session is closed, so an id it lacks is unknown — answered at once, writing nothing,
    /// as long as the namespace is intact (`<prefix>:config` exists) and no daemon is busy
    /// taking the partition. After Redis lost its state (the config key is gone with it) the
    /// index is empty until a daemon takes the partition, re-seeds it and publishes
    /// `<prefix>:{p}:committed`; until then this waits (bounded by `restore_wait`, then
    /// [`Error::NotLive`]) instead of calling a session unknown that SQLite may hold.
    async fn restorable(&self, sid: &str, conn: &mut crate::pool::Connection) -> Result<bool> {
        let p = self.keys().partition(sid);
        let wait = self.config().restore_wait;
        let mut backoff = Backoff::new(wait);
        loop {
            let (indexed, published, daemon, intact): (bool, bool, bool, bool) = redis::pipe()
                .sismember(self.keys().sessions_index(p), sid)
                .exists(self.keys().committed(p))
                .exists(self.keys().lease(p))
                .exists(self.keys().config())
                .query_async(conn)
                .await?;
            if indexed || published || (intact && !daemon) {
                return Ok(indexed);
            }
            if !backoff.pause().await {
                return Err(Error::NotLive {
                    sid: sid.to_string(),
                    waited: wait,
                });
            }
        }
    }

    /// Asks the daemon to restore `sid` and waits for it (see [`Store::restore_session`]).
    pub(crate) async fn request_restore(&self, sid: &str) -> Result<()> {
        let keys = self.session_keys(sid)?;
        let mut conn = self.conn().await?;
        if !self.restorable(sid, &mut conn).await? {
            return Err(Error::UnknownSession(sid.to_string()));
        }
        let reply = self.keys().restore_reply(sid);
        let _: () = redis::pipe()
            .atomic()
            .del(&reply)
            .ignore()
            .rpush(self.keys().restore_requests(keys.partition), sid)
            .ignore()
            .query_async(&mut conn)
            .await?;
        let wait = self.config().restore_wait;
        let mut backoff = Backoff::new(wait);
        loop {
            // The answer first: the daemon writes it after the meta key, so a `restored`
            // read here means the EXISTS that follows sees the session (unless it vanished).
            let (answer, live): (Option<String>, bool) = redis::pipe()
                .get(&reply)
                .exists(&keys.meta)
                .query_async(&mut conn)
                .await?;
            match answer.as_deref() {
                _ if live => return Ok(()),
                Some("unknown") => return Err(Error::UnknownSession(sid.to_string())),
                // Restored, then gone again at once (closed or expired): report it as unknown.
                Some(_) => return Err(Error::UnknownSession(sid.to_string())),
                None => {}
            }
            if !backoff.pause().await {
                return Err(Error::NotLive {
                    sid: sid.to_string(),
                    waited: wait,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::merge_ranges;

    #[test]
    fn ranges_merge_like_compact_lua() {
        assert_eq!(merge_ranges(vec![]), "");
        assert_eq!(merge_ranges(vec![(5, 6), (2, 3)]), "2-3,5-6");
        assert_eq!(
            merge_ranges(vec![(2, 3), (4, 6), (10, 12), (11, 20)]),
            "2-6,10-20"
        );
    }
}
