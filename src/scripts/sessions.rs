//! Session scripts: create, link a child, update the meta, close.

use super::*;

/// The fields `create_session.lua` stores for a new session (ARGV[2..11]).
#[derive(Debug, Clone)]
pub struct NewSessionArgs<'a> {
    /// Owning user, `""` for none.
    pub user: &'a str,
    /// Parent session, `""` for a root session.
    pub parent: &'a str,
    /// 0 for a root session, parent's + 1 for a sub-agent.
    pub depth: u32,
    /// `linked`, `ephemeral` or `detached`.
    pub lifecycle: &'a str,
    /// Model name, `""` for none.
    pub model: &'a str,
    /// System prompt, `""` for none.
    pub system_prompt: &'a str,
    /// Config JSON object.
    pub config: &'a str,
    /// Metadata JSON object.
    pub metadata: &'a str,
    /// Idle TTL, seconds.
    pub ttl: u64,
}

/// `create_session.lua`: creates, indexes and logs session `sid`.
pub fn create_session(ns: &Keys, s: &SessionKeys, sid: &str, a: &NewSessionArgs) -> ScriptCall {
    let index = ns.sessions_index(s.partition);
    let by_user = ns.user_sessions(s.partition, a.user);
    let committed = ns.committed(s.partition);
    let (index_buckets, user_buckets) =
        (Keys::index_buckets(&index), Keys::index_buckets(&by_user));
    let mut keys = s.as_array().to_vec();
    keys.extend([
        index.as_str(),
        by_user.as_str(),
        committed.as_str(),
        index_buckets.as_str(),
        user_buckets.as_str(),
    ]);
    let kind = if a.parent.is_empty() {
        "root"
    } else {
        "subagent"
    };
    ScriptCall::new(&CREATE_SESSION, &keys)
        .arg(sid)
        .arg(a.user)
        .arg(a.parent)
        .arg(a.depth)
        .arg(kind)
        .arg(a.lifecycle)
        .arg(a.model)
        .arg(a.system_prompt)
        .arg(a.config)
        .arg(a.metadata)
        .arg(a.ttl)
}

/// `link_child.lua`: adds `child` to (or removes it from) the children set of `parent`'s
/// session keys `p`.
pub fn link_child(p: &SessionKeys, child: &str, add: bool) -> ScriptCall {
    ScriptCall::new(&LINK_CHILD, &p.gated())
        .arg(if add { "add" } else { "remove" })
        .arg(child)
}

/// `update_session.lua`: sets meta `fields`, logging `record` (`""` = a touch, no wal entry).
pub fn update_session(
    s: &SessionKeys,
    sid: &str,
    record: &str,
    fields: &[(&str, String)],
) -> ScriptCall {
    let mut keys = s.as_array().to_vec();
    keys.extend([s.graph.as_str(), s.glog.as_str(), s.committed.as_str()]);
    let mut call = ScriptCall::new(&UPDATE_SESSION, &keys).arg(sid).arg(record);
    for (field, value) in fields {
        call = call.arg(*field).arg(value);
    }
    call
}

/// `close_session.lua`: deletes one session's keys, index entries and open decisions.
pub fn close_session(
    ns: &Keys,
    s: &SessionKeys,
    sid: &str,
    user: Option<&str>,
    cascade: bool,
) -> ScriptCall {
    let p = s.partition;
    let index = ns.sessions_index(p);
    let by_user = match user {
        Some(u) => ns.user_sessions(p, u),
        None => index.clone(),
    };
    let open = ns.open_decisions(p);
    let (index_buckets, user_buckets) =
        (Keys::index_buckets(&index), Keys::index_buckets(&by_user));
    let mut keys = s.as_array().to_vec();
    keys.extend([
        index.as_str(),
        by_user.as_str(),
        open.as_str(),
        s.graph.as_str(),
        s.glog.as_str(),
        s.inbox.as_str(),
        s.effects.as_str(),
        index_buckets.as_str(),
        user_buckets.as_str(),
        s.committed.as_str(),
    ]);
    ScriptCall::new(&CLOSE_SESSION, &keys)
        .arg(sid)
        .arg(if cascade { "1" } else { "0" })
}

/// `list_index.lua`: the buckets of session index `index` that may hold ids between the
/// lexicographic bounds `min` and `max` (as `ZRANGEBYLEX` takes them), until they hold
/// `count` more past the first (0 = all).
pub fn list_index(index: &str, min: &[u8], max: &[u8], count: usize) -> ScriptCall {
    ScriptCall::new(&LIST_INDEX, &[index, &Keys::index_buckets(index)])
        .arg(min)
        .arg(max)
        .arg(count)
        .idempotent(true)
}

/// `index_sessions.lua`: adds `sessions` (id, user or `""`) of partition `p` to its index and
/// their users' (any index an earlier build wrote among them turned into buckets first).
pub fn index_sessions(ns: &Keys, index: &str, p: u32, sessions: &[(String, String)]) -> ScriptCall {
    let mut keys: Vec<String> = vec![index.to_string(), Keys::index_buckets(index)];
    for (_, user) in sessions {
        let user_index = match user.as_str() {
            "" => index.to_string(),
            u => ns.user_sessions(p, u),
        };
        let buckets = Keys::index_buckets(&user_index);
        keys.extend([user_index, buckets]);
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut call =
        ScriptCall::with_room(&INDEX_SESSIONS, &keys, sessions.len(), 32 * sessions.len());
    for (sid, _) in sessions {
        call = call.arg(sid);
    }
    // Adding an id twice leaves it once; an upgrade runs once.
    call.idempotent(true)
}

/// `index_sessions.lua` with no session: turns session index `index`, if an earlier build
/// wrote it, into buckets; replies 1 when it did, else 0.
pub fn upgrade_index(index: &str) -> ScriptCall {
    ScriptCall::new(&INDEX_SESSIONS, &[index, &Keys::index_buckets(index)]).idempotent(true)
}
