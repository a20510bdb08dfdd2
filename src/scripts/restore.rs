//! Restore scripts: a session, its rounds and graph log from a SQLite image, user values re-seeded.

use super::*;

/// `reseed_user_values.lua`: puts `pairs` (key, value JSON) of `user` back after a Redis loss,
/// only while `lease` still holds the partition.
pub fn reseed_user_values(
    ns: &Keys,
    user: &str,
    wal_committed: &str,
    lease: &str,
    pairs: &[(String, String)],
) -> ScriptCall {
    let p = ns.partition(user);
    let mut call = ScriptCall::new(
        &RESEED_USER_VALUES,
        &[
            &ns.user(user),
            &ns.user_forgotten(user),
            &ns.wal(p),
            &ns.lease(p),
        ],
    )
    .arg(user)
    .arg(wal_committed)
    .arg(lease);
    for (key, value) in pairs {
        call = call.arg(key).arg(value);
    }
    call.idempotent(true)
}

/// Everything `restore_session.lua` writes back for one session, section by section in the
/// script's ARGV order (see its header).
#[derive(Debug, Default, Clone)]
pub struct SessionImage {
    /// Owning user, `""` for none.
    pub user_id: String,
    /// Idle TTL, seconds.
    pub ttl: i64,
    /// Meta fields in create_session's order (`compacted` is derived by the script).
    pub meta: Vec<(&'static str, String)>,
    /// Stored message elements, seq 1..n.
    pub messages: Vec<String>,
    /// Idempotency key → seq.
    pub idem: Vec<(String, i64)>,
    /// Compaction audit records, oldest first.
    pub compactions: Vec<String>,
    /// Round index → usage JSON.
    pub usage: Vec<(i64, String)>,
    /// Label → latest checkpoint JSON.
    pub checkpoints: Vec<(String, String)>,
    /// Child session ids.
    pub children: Vec<String>,
    /// Open decisions: id, decision, rationale, planned action, meta, created_at.
    pub decisions: Vec<Vec<String>>,
    /// Inbox items: item id → record.
    pub inbox: Vec<(String, String)>,
    /// The tool-effect ledger: call id → record.
    pub effects: Vec<(String, String)>,
}

/// `replace_user_values.lua`: sets `user`'s values to exactly `pairs` (none: deletes them)
/// while `lease` holds the user's partition.
pub fn replace_user_values(
    ns: &Keys,
    user: &str,
    lease: &str,
    pairs: &[(String, String)],
) -> ScriptCall {
    let p = ns.partition(user);
    let mut call = ScriptCall::new(&REPLACE_USER_VALUES, &[&ns.user(user), &ns.lease(p)])
        .arg(lease)
        .idempotent(true);
    for (key, value) in pairs {
        call = call.arg(key).arg(value);
    }
    call
}

/// `restore_session.lua`: writes `image` back as session `sid` unless it is live.
pub fn restore_session(ns: &Keys, s: &SessionKeys, sid: &str, image: &SessionImage) -> ScriptCall {
    fn section<T: ToRedisArgs>(call: ScriptCall, items: &[T]) -> ScriptCall {
        call.arg(items.len()).arg(items)
    }
    let p = s.partition;
    let (index, by_user, open) = (
        ns.sessions_index(p),
        ns.user_sessions(p, &image.user_id),
        ns.open_decisions(p),
    );
    let (index_buckets, user_buckets) =
        (Keys::index_buckets(&index), Keys::index_buckets(&by_user));
    let mut keys = s.as_array().to_vec();
    keys.extend([
        index.as_str(),
        by_user.as_str(),
        open.as_str(),
        s.inbox.as_str(),
        s.effects.as_str(),
        index_buckets.as_str(),
        user_buckets.as_str(),
    ]);
    let call = ScriptCall::new(&RESTORE_SESSION, &keys)
        .arg(sid)
        .arg(&image.user_id)
        .arg(image.ttl);
    let call = section(call, &image.meta);
    let call = section(call, &image.messages);
    let call = section(call, &image.idem);
    let call = section(call, &image.compactions);
    let call = section(call, &image.usage);
    let call = section(call, &image.checkpoints);
    let call = section(call, &image.children);
    let call = section(call, &image.decisions);
    let call = section(call, &image.inbox);
    section(call, &image.effects).idempotent(true)
}

/// `restore_rounds.lua`: writes `user`'s StateService rounds of `session` unless that rounds
/// hash is live.
pub fn restore_rounds(
    ns: &Keys,
    user: &str,
    session: &str,
    rounds: &[(i64, String)],
) -> ScriptCall {
    let max = rounds.iter().map(|r| r.0).max().unwrap_or(0);
    ScriptCall::new(&RESTORE_ROUNDS, &[&ns.rounds(user, session)])
        .arg(max)
        .arg(rounds)
        .idempotent(true)
}

/// `restore_graph.lua`: writes one chunk of session `sid`'s graph log back (before its
/// meta), unless the session is live; `run_ids` are the runs of the chunk's checkpoints.
#[allow(clippy::too_many_arguments)]
pub fn restore_graph(
    ns: &Keys,
    s: &SessionKeys,
    sid: &str,
    first: bool,
    ttl: i64,
    values: &[(String, String)],
    members: &[String],
    run_ids: &[String],
) -> ScriptCall {
    let run_keys: Vec<String> = run_ids
        .iter()
        .map(|r| ns.graph_run(s.partition, r))
        .collect();
    let mut keys = vec![s.meta.as_str(), s.graph.as_str(), s.glog.as_str()];
    keys.extend(run_keys.iter().map(String::as_str));
    ScriptCall::new(&RESTORE_GRAPH, &keys)
        .arg(if first { "1" } else { "0" })
        .arg(ttl)
        .arg(sid)
        .arg(values.len())
        .arg(values)
        .arg(members.len())
        .arg(members)
        .idempotent(true)
}

/// `reseed_memory.lua`: puts `pairs` (key, record) of long-term memory namespace `namespace`
/// back after a Redis loss, as `reseed_user_values` does for user values.
pub fn reseed_memory(
    ns: &Keys,
    namespace: &str,
    wal_committed: &str,
    lease: &str,
    pairs: &[(String, String)],
) -> ScriptCall {
    let p = ns.memory_partition(namespace);
    let mut call = ScriptCall::new(
        &RESEED_MEMORY,
        &[
            &ns.memory(namespace),
            &ns.memory_namespaces(p),
            &ns.memory_expiry(p),
            &ns.wal(p),
            &ns.lease(p),
        ],
    )
    .arg(namespace)
    .arg(wal_committed)
    .arg(lease);
    for (key, record) in pairs {
        call = call.arg(key).arg(record);
    }
    call.idempotent(true)
}

/// `replace_memory.lua`: a rollback repair's write of long-term memory namespace `namespace`:
/// exactly `pairs` (key, record; none: the namespace goes).
pub fn replace_memory(
    ns: &Keys,
    namespace: &str,
    lease: &str,
    pairs: &[(String, String)],
) -> ScriptCall {
    let p = ns.memory_partition(namespace);
    let mut call = ScriptCall::new(
        &REPLACE_MEMORY,
        &[
            &ns.memory(namespace),
            &ns.memory_namespaces(p),
            &ns.memory_expiry(p),
            &ns.lease(p),
        ],
    )
    .arg(lease)
    .arg(namespace);
    for (key, record) in pairs {
        call = call.arg(key).arg(record);
    }
    call
}
