//! Restore, the daemon side: serves the restore requests agents queue (`crate::store::restore`) by
//! writing a durable tier's [`Snapshot`] back with `restore_session.lua` in one atomic, idempotent
//! step, and after a Redis loss puts back the session indexes, open decisions, user values
//! and rounds. The spill daemon calls these for the partitions it owns.

use std::time::Instant;

use super::lease::HeldLease;
use super::metrics;
use crate::durable::snapshot::Snapshot;
use crate::durable::Durable;
use crate::error::Result;
use crate::scripts;
use crate::store::Store;

/// Graph log values written back per `restore_graph.lua` call.
const GRAPH_CHUNK: usize = 1000;

/// Sessions per `index_sessions.lua` call in a re-seed: Redis serves nobody else during a
/// call, so a re-seed of many sessions goes in short calls.
const INDEX_CHUNK: usize = 250;

/// How long the daemon's answer to a restore request stays readable.
const REPLY_TTL_MS: u64 = 10_000;

/// Writes `snapshot` into Redis as session `sid` unless it is live (then its rounds too,
/// each hash only if absent); true when it restored.
pub(crate) async fn write_snapshot(store: &Store, sid: &str, snapshot: &Snapshot) -> Result<bool> {
    let keys = store.keys().session(sid);
    // The graph log first: the meta, written last by restore_session, makes it live.
    for (i, chunk) in snapshot.graph.chunks(GRAPH_CHUNK).enumerate() {
        let (members, runs) = crate::graphs::restore_index(chunk);
        let call = scripts::restore_graph(
            store.keys(),
            &keys,
            sid,
            i == 0,
            snapshot.image.ttl,
            chunk,
            &members,
            &runs,
        );
        let written: i64 = store.invoke(&call).await?;
        if written == 0 {
            // Live: restore_session may still owe it its inbox and ledger (returns 2).
            break;
        }
    }
    let call = scripts::restore_session(store.keys(), &keys, sid, &snapshot.image);
    let restored: i64 = store.invoke(&call).await?;
    if restored == 2 {
        tracing::info!(session = %sid, "put back the inbox and ledger of a live session");
        return Ok(true);
    }
    for (user, rounds) in &snapshot.rounds {
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
    let call = scripts::restore_rounds(store.keys(), user, session, rounds);
    let restored: i64 = store.invoke(&call).await?;
    Ok(restored == 1)
}

/// After Redis lost its state: puts back the user values, the long-term memory items and the
/// StateService rounds (of sessions that are not agentstate sessions, whose rounds come back
/// with the session) that SQLite holds for partition `p`. Runs after the flush that applied every wal entry up to
/// `wal_committed`, so erasures made in the new Redis are in SQLite already; what agents did
/// since is never overwritten or resurrected (`reseed_user_values.lua`, `restore_rounds.lua`).
/// Returns the values and memory items, and the rounds hashes, written; `None` when the
/// lease was lost meanwhile (the scripts are fenced by it): the new owner re-seeds.
pub(crate) async fn reseed_user_data(
    store: &Store,
    db: &Durable,
    p: u32,
    wal_committed: &str,
    lease: &mut HeldLease,
) -> Result<Option<(u64, u64)>> {
    let keys = store.keys().clone();
    let fence = lease.value();
    let (values, rounds) = db.load_user_data(&keys, p).await?;
    let mut written = (0, 0);
    for (user, pairs) in &values {
        if !lease.keep().await? {
            return Ok(None);
        }
        let call = scripts::reseed_user_values(store.keys(), user, wal_committed, &fence, pairs);
        let n: i64 = store.invoke(&call).await?;
        if n < 0 {
            // The script found the lease gone: the new owner repeats this step.
            return Ok(None);
        }
        written.0 += n as u64;
    }
    for ((user, session), list) in &rounds {
        if !lease.keep().await? {
            return Ok(None);
        }
        written.1 += u64::from(restore_rounds(store, user, session, list).await?);
    }
    let now_ms = crate::durable::retention::now_ms();
    for (namespace, pairs) in db.memory_items(p, now_ms).await? {
        if !lease.keep().await? {
            return Ok(None);
        }
        let call = scripts::reseed_memory(store.keys(), &namespace, wal_committed, &fence, &pairs);
        let n: i64 = store.invoke(&call).await?;
        if n < 0 {
            // The script found the lease gone: the new owner repeats this step.
            return Ok(None);
        }
        written.0 += n as u64;
    }
    Ok(Some(written))
}

/// A rollback repair's step for user data: every user hash and StateService rounds hash of
/// partition `p` becomes the durable tier's, and one the durable tier holds nothing of
/// (erased or deleted after Redis' copy was taken) goes. Runs while the partition is closed
/// to agents' writes. Returns the values and rounds written.
pub(crate) async fn overwrite_user_data(
    store: &Store,
    db: &Durable,
    p: u32,
    lease: &mut HeldLease,
) -> Result<Option<u64>> {
    let keys = store.keys().clone();
    let fence = lease.value();
    let (values, rounds) = db.load_user_data(&keys, p).await?;
    let durable: std::collections::HashSet<String> = values
        .iter()
        .map(|(user, _)| keys.user(user))
        .chain(
            rounds
                .iter()
                .map(|((user, session), _)| keys.rounds(user, session)),
        )
        .collect();
    let mut conn = store
        .dedicated_connection(&keys.committed(p), store.config().response_timeout)
        .await?;
    let mut gone: Vec<String> = Vec::new();
    'patterns: for pattern in [keys.users_pattern(p), keys.rounds_pattern(p)] {
        let mut cursor = 0u64;
        loop {
            let found: redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .arg("TYPE")
                .arg("hash")
                .query_async(&mut conn)
                .await;
            let (next, batch) = match found {
                Err(e) if e.code() == Some("NOPERM") => {
                    tracing::warn!(partition = p, "a rollback repair cannot list this Redis' user data (the daemon's user lacks +scan): user data erased after the replica's copy was taken stays in Redis until erased again");
                    break 'patterns;
                }
                other => other?,
            };
            gone.extend(batch.into_iter().filter(|k| !durable.contains(k)));
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    // The rounds hashes the durable tier holds are written anew (restore_rounds writes an
    // absent one), so they go too.
    gone.extend(
        rounds
            .iter()
            .map(|((user, session), _)| keys.rounds(user, session)),
    );
    for chunk in gone.chunks(1000) {
        let _: () = redis::cmd("DEL").arg(chunk).query_async(&mut conn).await?;
    }
    let mut written = 0;
    for (user, pairs) in &values {
        if !lease.keep().await? {
            return Ok(None);
        }
        let call = scripts::replace_user_values(store.keys(), user, &fence, pairs);
        let n: i64 = store.invoke(&call).await?;
        if n < 0 {
            // The script found the lease gone: the new owner repeats this step.
            return Ok(None);
        }
        written += n as u64;
    }
    for ((user, session), list) in &rounds {
        if !lease.keep().await? {
            return Ok(None);
        }
        if restore_rounds(store, user, session, list).await? {
            written += list.len() as u64;
        }
    }
    Ok(Some(written))
}

/// A rollback repair's step for long-term memory: every memory namespace of partition `p`
/// becomes the durable tier's (its unexpired items), and one the durable tier holds nothing
/// of goes. Runs while the partition is closed to agents' writes. Returns the items written.
pub(crate) async fn overwrite_memory(
    store: &Store,
    db: &Durable,
    p: u32,
    lease: &mut HeldLease,
) -> Result<Option<u64>> {
    let fence = lease.value();
    let durable = db
        .memory_items(p, crate::durable::retention::now_ms())
        .await?;
    let held: Vec<String> = redis::cmd("SMEMBERS")
        .arg(store.keys().memory_namespaces(p))
        .query_async(&mut store.conn().await?)
        .await?;
    let kept: std::collections::HashSet<&str> = durable.iter().map(|(n, _)| n.as_str()).collect();
    let gone = held
        .iter()
        .filter(|n| !kept.contains(n.as_str()))
        .map(|n| (n.clone(), Vec::new()));
    let mut written = 0;
    for (namespace, pairs) in durable.iter().cloned().chain(gone) {
        if !lease.keep().await? {
            return Ok(None);
        }
        let call = scripts::replace_memory(store.keys(), &namespace, &fence, &pairs);
        let n: i64 = store.invoke(&call).await?;
        if n < 0 {
            // The script found the lease gone: the new owner repeats this step.
            return Ok(None);
        }
        written += n as u64;
    }
    Ok(Some(written))
}

/// Re-adds every session SQLite holds for partition `p` to the session indexes (after Redis
/// lost them: the daemon found `<prefix>:{p}:committed` empty), so listing shows them again.
/// Returns how many sessions and open decisions it re-added; `None` when the lease was
/// lost meanwhile (the next owner re-seeds: adding an id the index holds changes nothing).
pub(crate) async fn reseed_indexes(
    store: &Store,
    db: &Durable,
    p: u32,
    lease: &mut HeldLease,
) -> Result<Option<(usize, usize)>> {
    let rows = db.partition_sessions(p).await?;
    // Decisions still without an outcome, so crash recovery (`incomplete_decisions`) and
    // `record_outcome` work again; HSETNX leaves any the new Redis holds alone.
    let open = db.open_decisions(p).await?;
    let index = store.keys().sessions_index(p);
    for chunk in rows.chunks(INDEX_CHUNK) {
        if !lease.keep().await? {
            return Ok(None);
        }
        let call = scripts::index_sessions(store.keys(), &index, p, chunk);
        let _: usize = store.invoke(&call).await?;
    }
    let mut conn = store.conn().await?;
    for chunk in open.chunks(1000) {
        if !lease.keep().await? {
            return Ok(None);
        }
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
    Ok(Some((rows.len(), open.len())))
}

/// Serves the pending restore requests of partition `p`; returns the sessions restored.
pub(crate) async fn serve_requests(store: &Store, db: &Durable, p: u32) -> Result<u64> {
    let mut conn = store.conn().await?;
    let requests: Option<Vec<String>> = redis::cmd("LPOP")
        .arg(store.keys().restore_requests(p))
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
        let snapshot = db.load_snapshot(&sid).await?;
        let answer = match &snapshot {
            Some(s) => {
                let started = Instant::now();
                if write_snapshot(store, &sid, s).await? {
                    restored += 1;
                    tracing::info!(session = %sid, messages = s.image.messages.len(), ms = started.elapsed().as_millis() as u64, "restored session");
                    metrics::restore_served("restored");
                } else {
                    metrics::restore_served("live");
                }
                "restored"
            }
            None => {
                metrics::restore_served("unknown");
                "unknown"
            }
        };
        let _: () = redis::cmd("SET")
            .arg(store.keys().restore_reply(&sid))
            .arg(answer)
            .arg("PX")
            .arg(REPLY_TTL_MS)
            .query_async(&mut conn)
            .await?;
    }
    Ok(restored)
}

/// Restores session `sid` from the durable tier `durable` (`--db`: a SQLite path, opened
/// read-only, or a PostgreSQL URL) straight into Redis, without a daemon. Returns the number
/// of messages restored, or `None` when the durable tier does not know the session or it is
/// live already.
pub async fn restore_from_durable(
    store: &Store,
    durable: &std::path::Path,
    sid: &str,
) -> Result<Option<usize>> {
    let snapshot = crate::durable::read_snapshot(durable, &store.config().namespace, sid).await?;
    match snapshot {
        Some(s) if write_snapshot(store, sid, &s).await? => Ok(Some(s.image.messages.len())),
        _ => Ok(None),
    }
}
