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
    let mut keys = s.as_array().to_vec();
    keys.extend([index.as_str(), by_user.as_str(), committed.as_str()]);
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
    ScriptCall::new(&LINK_CHILD, &p.as_array())
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
    keys.extend([s.graph.as_str(), s.glog.as_str()]);
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
    let mut keys = s.as_array().to_vec();
    keys.extend([
        index.as_str(),
        by_user.as_str(),
        open.as_str(),
        s.graph.as_str(),
        s.glog.as_str(),
        s.inbox.as_str(),
        s.effects.as_str(),
    ]);
    ScriptCall::new(&CLOSE_SESSION, &keys)
        .arg(sid)
        .arg(if cascade { "1" } else { "0" })
}
