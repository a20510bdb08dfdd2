//! The Lua scripts and their calls: every file in `lua/` embedded once (prefixed with the
//! shared `_prelude.lua`), hashed once, and one typed function per script that builds its
//! KEYS and ARGV as the script's header documents them. The library, the spill daemon and
//! the benchmark all call these functions, so a script's arguments are built in one place.
//!
//! Architecture Invariant: this module is the only place an `EVALSHA` command is built;
//! [`ScriptCall::run`] sends it (loading the script on NOSCRIPT), pipelines add
//! [`ScriptCall::cmd`] after [`preload`].

use std::sync::{Arc, LazyLock};

use redis::{aio::ConnectionLike, Cmd, FromRedisValue, RedisResult, Script, ToRedisArgs};

use crate::keys::{Keys, SessionKeys};

/// Registers each script: `NAME => "file"`, or `NAME => "file" #!"flags"` for a script that
/// declares Redis 7 script flags in a shebang line (put before the prelude: it must be the
/// first line).
macro_rules! lua_scripts {
    ($($name:ident => $file:literal $(#! $flags:literal)?),* $(,)?) => {
        $(
            #[doc = concat!("`lua/", $file, ".lua`")]
            static $name: LazyLock<Script> = LazyLock::new(|| {
                Script::new(concat!(
                    $("#!lua flags=", $flags, "\n",)?
                    include_str!("../lua/_prelude.lua"),
                    include_str!(concat!("../lua/", $file, ".lua"))
                ))
            });
        )*
        /// Every script with its file name (pre-loading, readable benchmark output, tests).
        fn all() -> Vec<(&'static str, &'static Script)> {
            vec![$(($file, &*$name)),*]
        }
    };
}

lua_scripts! {
    CREATE_SESSION => "create_session",
    LINK_CHILD => "link_child",
    UPDATE_SESSION => "update_session",
    CLOSE_SESSION => "close_session",
    APPEND_MESSAGE => "append_message",
    SESSION_BATCH => "session_batch",
    APPEND_MESSAGES => "append_messages",
    POP_MESSAGE => "pop_message",
    REPLACE_MESSAGE => "replace_message",
    COMPACT => "compact",
    LOAD_MESSAGES => "load_messages",
    WRITE_WORKING => "write_working",
    READ_WORKING => "read_working",
    RECORD_USAGE => "record_usage",
    CREATE_CHECKPOINT => "create_checkpoint",
    PUT_CHECKPOINT => "put_checkpoint",
    SAVE_ROUND => "save_round",
    READ_ROUND => "read_round",
    RECORD_DECISION => "record_decision",
    RECORD_OUTCOME => "record_outcome",
    DEAD_LETTER => "dead_letter",
    SET_USER_VALUE => "set_user_value",
    DELETE_USER_VALUE => "delete_user_value",
    FORGET_USER => "forget_user",
    RESEED_USER_VALUES => "reseed_user_values",
    // The daemon's bookkeeping runs on a Redis at maxmemory too (`allow-oom`): it must keep
    // its lease, publish what SQLite committed and trim the streams, which frees memory.
    CLAIM_LEASE => "claim_lease" #!"allow-oom",
    PUBLISH_COMMITTED => "publish_committed" #!"allow-oom",
    TRIM_STREAM => "trim_stream",
    RESTORE_SESSION => "restore_session",
    RESTORE_ROUNDS => "restore_rounds",
    GRAPH_PUT => "graph_put",
    GRAPH_READ => "graph_read",
    GRAPH_DROP => "graph_drop",
    RESTORE_GRAPH => "restore_graph",
}

/// One call of one script: the `EVALSHA sha numkeys KEYS... ARGV...` command, built by the
/// script's function in this module.
#[derive(Debug, Clone)]
pub struct ScriptCall {
    /// Its source, for SCRIPT LOAD on NOSCRIPT.
    script: &'static Script,
    /// The EVALSHA command.
    cmd: Cmd,
    /// Whether sending it twice has the effect of sending it once (reads, appends with an
    /// idempotency key, the daemon's only-if-absent and fenced writes): such a call is
    /// retried while Redis is unreachable.
    idempotent: bool,
}

impl ScriptCall {
    fn new(script: &'static Script, keys: &[&str]) -> Self {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
        ScriptCall {
            script,
            cmd,
            idempotent: false,
        }
    }

    /// Marks the call as safe to send twice.
    fn idempotent(mut self, yes: bool) -> Self {
        self.idempotent = yes;
        self
    }

    /// Whether sending the call twice has the effect of sending it once.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        self.cmd.arg(arg);
        self
    }

    /// The EVALSHA command, for a pipeline (call [`preload`] on the connection first: a
    /// pipeline does not reload a script on NOSCRIPT).
    pub fn cmd(&self) -> &Cmd {
        &self.cmd
    }

    /// The command's words as text (for `redis-benchmark`, which takes them as arguments).
    pub fn argv(&self) -> Vec<String> {
        self.cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "0".to_string(), // a SCAN cursor: never part of an EVALSHA
            })
            .collect()
    }

    /// Sends the call (one round trip); on NOSCRIPT (a restarted or flushed Redis) loads the
    /// script and sends it once more.
    pub async fn run<T: FromRedisValue>(&self, conn: &mut impl ConnectionLike) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // Boxed: a rare path whose future would otherwise enlarge every call's.
                Box::pin(self.script.load_async(conn)).await?;
                self.cmd.query_async(conn).await
            }
            other => other,
        }
    }
}

/// Loads every script (SCRIPT LOAD), so pipelines of [`ScriptCall::cmd`] never meet NOSCRIPT.
pub async fn preload(conn: &mut impl ConnectionLike) -> RedisResult<()> {
    for (_, script) in all() {
        script.load_async(conn).await?;
    }
    Ok(())
}

/// The file name of the script whose SHA1 is `sha` (for readable benchmark output).
pub fn name_of(sha: &str) -> Option<&'static str> {
    all()
        .into_iter()
        .find(|(_, script)| script.get_hash().eq_ignore_ascii_case(sha))
        .map(|(name, _)| name)
}

/// `''` for `None`: scripts take optional numbers as empty strings.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|n| n.to_string()).unwrap_or_default()
}

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
    ]);
    ScriptCall::new(&CLOSE_SESSION, &keys)
        .arg(sid)
        .arg(if cascade { "1" } else { "0" })
}

/// A message body as the scripts take it: the JSON object text without its opening brace
/// (the script puts seq, state and created_at in front of the rest; see `bad_message_body`
/// in `_prelude.lua`). Text that is not an object goes as `""`, which the script rejects.
fn body_tail(body: &str) -> &str {
    body.strip_prefix('{').unwrap_or("")
}

/// `append_message.lua`: appends the message `body` (JSON object) with the next seq. A
/// [`BatchItem`]: `.call()` for the lone call.
pub fn append_item(
    s: impl Into<Arc<SessionKeys>>,
    sid: &str,
    body: &str,
    idempotency_key: Option<&str>,
    expect_seq: Option<u64>,
    limit: usize,
) -> BatchItem {
    BatchItem {
        op: "append",
        script: &APPEND_MESSAGE,
        session: s.into(),
        extra_keys: Vec::new(),
        args: vec![
            sid.to_string(),
            body_tail(body).to_string(),
            idempotency_key.unwrap_or("").to_string(),
            opt(expect_seq),
            limit.to_string(),
        ],
        idempotent: idempotency_key.is_some(),
    }
}

/// One call of a session script that can also go as an item of `session_batch.lua` (group
/// commit): `append_message`, `record_decision`, `write_working`. Owned, so it can wait in a
/// queue.
#[derive(Debug, Clone)]
pub struct BatchItem {
    /// The item's op in `session_batch.lua`.
    op: &'static str,
    /// The script a lone call runs.
    script: &'static Script,
    /// The session's keys (KEYS[1..9] of the lone call).
    session: Arc<SessionKeys>,
    /// KEYS after the session's nine of the lone call (a decision's stream and open hash).
    extra_keys: Vec<String>,
    /// ARGV of the lone call, which is also the item's arguments in the batch.
    args: Vec<String>,
    /// Whether sending it twice has the effect of sending it once.
    idempotent: bool,
}

impl BatchItem {
    /// Whether sending the item twice has the effect of sending it once.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// The lone call (one EVALSHA of the item's own script).
    pub fn call(&self) -> ScriptCall {
        let mut keys: Vec<&str> = self.session.as_array().to_vec();
        keys.extend(self.extra_keys.iter().map(String::as_str));
        let mut call = ScriptCall::new(self.script, &keys).idempotent(self.idempotent);
        for a in &self.args {
            call = call.arg(a);
        }
        call
    }

    /// Its session's meta key (names the session within the namespace).
    pub fn session_key(&self) -> &str {
        &self.session.meta
    }

    /// The partition of its session.
    pub fn partition(&self) -> u32 {
        self.session.partition
    }

    /// How many values its own script's reply has in its line of `session_batch.lua`'s
    /// reply: three for an append (seq, wal entry id, repeat), one otherwise.
    pub fn reply_len(&self) -> usize {
        if self.op == "append" {
            3
        } else {
            1
        }
    }
}

/// `session_batch.lua`: `items` run in order in one EVALSHA, one reply per item (a line of
/// one text: `1 ` then the lone call's reply values, or `0 ` then `CODE detail`); each item
/// brings the KEYS of its lone call (nine, eleven for a decision). Items of several
/// partitions touch several slots: only a single node takes them (group commit batches per
/// partition on a cluster). Safe to send twice only when every item is.
pub fn session_batch(items: &[&BatchItem]) -> ScriptCall {
    let mut keys: Vec<&str> = Vec::with_capacity(items.len() * 11);
    for item in items {
        keys.extend(item.session.as_array());
        keys.extend(item.extra_keys.iter().map(String::as_str));
    }
    let mut call =
        ScriptCall::new(&SESSION_BATCH, &keys).idempotent(items.iter().all(|i| i.idempotent));
    for item in items {
        call = call.arg(item.op);
        for a in &item.args {
            call = call.arg(a);
        }
    }
    call
}

/// `append_messages.lua`: appends the message `bodies` (JSON objects) with consecutive seqs in
/// one atomic step; `expect_seq` is the seq the caller believes the first one gets.
pub fn append_messages(
    s: &SessionKeys,
    sid: &str,
    bodies: &[String],
    expect_seq: Option<u64>,
    limit: usize,
) -> ScriptCall {
    ScriptCall::new(&APPEND_MESSAGES, &s.as_array())
        .arg(sid)
        .arg(opt(expect_seq))
        .arg(limit)
        .arg(bodies.iter().map(|b| body_tail(b)).collect::<Vec<_>>())
}

/// `pop_message.lua`: removes the newest message of session `sid`.
pub fn pop_message(s: &SessionKeys, sid: &str) -> ScriptCall {
    ScriptCall::new(&POP_MESSAGE, &s.as_array()).arg(sid)
}

/// `replace_message.lua`: replaces the body of message `seq` with `body` (JSON object).
/// `append_messages`, `pop_message` and `put_checkpoint` are not idempotent (a repeat would
/// append, pop or record again), so they fail fast while Redis is unreachable.
pub fn replace_message(
    s: &SessionKeys,
    sid: &str,
    seq: u64,
    body: &str,
    limit: usize,
) -> ScriptCall {
    ScriptCall::new(&REPLACE_MESSAGE, &s.as_array())
        .arg(sid)
        .arg(seq)
        .arg(body_tail(body))
        .arg(limit)
        // Applying the same replacement twice leaves the same message (and a second,
        // identical wal record): safe to retry while Redis is unreachable.
        .idempotent(true)
}

/// What [`load_messages`] reads.
#[derive(Debug, Clone, Copy)]
pub enum LoadMode {
    /// Active messages after `after`, the last `last` of them.
    Active {
        /// Seq to start after (0 = from the start).
        after: u64,
        /// At most this many, the newest (`None` = all).
        last: Option<u64>,
    },
    /// Every message after `after`, whatever its state, the last `last` of them.
    All {
        /// Seq to start after (0 = from the start).
        after: u64,
        /// At most this many, the newest (`None` = all).
        last: Option<u64>,
    },
    /// The one message with this seq.
    One(u64),
}

/// `load_messages.lua`: reads messages of session `sid` (read-only).
pub fn load_messages(s: &SessionKeys, sid: &str, mode: LoadMode) -> ScriptCall {
    let (name, after, last) = match mode {
        LoadMode::Active { after, last } => ("active", after, last),
        LoadMode::All { after, last } => ("all", after, last),
        LoadMode::One(seq) => ("one", seq, None),
    };
    ScriptCall::new(&LOAD_MESSAGES, &[&s.meta, &s.msgs])
        .arg(sid)
        .arg(name)
        .arg(after)
        .arg(opt(last))
        .idempotent(true)
}

/// `compact.lua`: marks `[from, to]` compacted out and appends the note `body`.
pub fn compact(
    s: &SessionKeys,
    sid: &str,
    range: (u64, u64),
    body: &str,
    tokens: (Option<i64>, Option<i64>),
    round_index: Option<i64>,
) -> ScriptCall {
    ScriptCall::new(&COMPACT, &s.as_array())
        .arg(sid)
        .arg(range.0)
        .arg(range.1)
        .arg(body_tail(body))
        .arg(opt(tokens.0))
        .arg(opt(tokens.1))
        .arg(opt(round_index))
}

/// `write_working.lua`: `op` is `set` (with `value`), `del` or `clear`; `if_version` makes it
/// a compare-and-set. A [`BatchItem`]: `.call()` for the lone call.
pub fn write_working(
    s: impl Into<Arc<SessionKeys>>,
    sid: &str,
    op: &str,
    key: &str,
    value: &str,
    if_version: Option<u64>,
    limit: usize,
) -> BatchItem {
    BatchItem {
        op: "working",
        script: &WRITE_WORKING,
        session: s.into(),
        extra_keys: Vec::new(),
        args: vec![
            sid.to_string(),
            op.to_string(),
            key.to_string(),
            value.to_string(),
            opt(if_version),
            limit.to_string(),
        ],
        idempotent: false,
    }
}

/// `read_working.lua`: one working-state value (`Some(key)`) or all, with the version.
pub fn read_working(s: &SessionKeys, sid: &str, key: Option<&str>) -> ScriptCall {
    ScriptCall::new(&READ_WORKING, &[&s.meta, &s.work])
        .arg(sid)
        .arg(key.unwrap_or(""))
        .idempotent(true)
}

/// `record_usage.lua`: upserts the usage `body` of one round.
pub fn record_usage(s: &SessionKeys, sid: &str, round_index: i64, body: &str) -> ScriptCall {
    ScriptCall::new(&RECORD_USAGE, &s.as_array())
        .arg(sid)
        .arg(round_index)
        .arg(body)
}

/// `create_checkpoint.lua`: snapshots working state (`include_keys` only, when given).
pub fn create_checkpoint(
    s: &SessionKeys,
    sid: &str,
    id: &str,
    label: &str,
    limit: usize,
    include_keys: &[&str],
) -> ScriptCall {
    ScriptCall::new(&CREATE_CHECKPOINT, &s.as_array())
        .arg(sid)
        .arg(id)
        .arg(label)
        .arg(limit)
        .arg(include_keys)
}

/// `put_checkpoint.lua`: stores checkpoint `id` of `label` with the given `payload` (a JSON
/// object).
pub fn put_checkpoint(
    s: &SessionKeys,
    sid: &str,
    id: &str,
    label: &str,
    payload: &str,
    limit: usize,
) -> ScriptCall {
    ScriptCall::new(&PUT_CHECKPOINT, &s.as_array())
        .arg(sid)
        .arg(id)
        .arg(label)
        .arg(payload)
        .arg(limit)
}

/// `save_round.lua`: stores a StateService round (`None` = the next one).
pub fn save_round(
    ns: &Keys,
    user: &str,
    session: &str,
    round: Option<u64>,
    state: &str,
    limit: usize,
) -> ScriptCall {
    let rounds = ns.rounds(user, session);
    let wal = ns.wal(ns.partition(user));
    ScriptCall::new(&SAVE_ROUND, &[&rounds, &wal])
        .arg(user)
        .arg(session)
        .arg(opt(round))
        .arg(state)
        .arg(limit)
}

/// `read_round.lua`: one round's state (`None` = the latest).
pub fn read_round(ns: &Keys, user: &str, session: &str, round: Option<u64>) -> ScriptCall {
    ScriptCall::new(&READ_ROUND, &[&ns.rounds(user, session)])
        .arg(opt(round))
        .idempotent(true)
}

/// The decision `record_decision.lua` records.
#[derive(Debug, Clone)]
pub struct DecisionArgs<'a> {
    /// What was decided.
    pub decision: &'a str,
    /// Why.
    pub rationale: &'a str,
    /// Planned action, `""` for none.
    pub planned_action: &'a str,
    /// Metadata JSON object.
    pub meta: &'a str,
}

/// `record_decision.lua`: appends a decision to the partition's decisions stream and keeps
/// it open until its outcome. A [`BatchItem`]: `.call()` for the lone call.
pub fn record_decision(
    ns: &Keys,
    s: impl Into<Arc<SessionKeys>>,
    sid: &str,
    d: &DecisionArgs,
) -> BatchItem {
    let s = s.into();
    let p = s.partition;
    BatchItem {
        op: "decision",
        script: &RECORD_DECISION,
        session: s,
        extra_keys: vec![ns.decisions(p), ns.open_decisions(p)],
        args: vec![
            sid.to_string(),
            p.to_string(),
            d.decision.to_string(),
            d.rationale.to_string(),
            d.planned_action.to_string(),
            d.meta.to_string(),
        ],
        idempotent: false,
    }
}

/// `record_outcome.lua`: closes decision `decision_id` (entry `entry` of partition `p`).
pub fn record_outcome(
    ns: &Keys,
    p: u32,
    decision_id: &str,
    entry: &str,
    outcome: &str,
) -> ScriptCall {
    ScriptCall::new(&RECORD_OUTCOME, &[&ns.decisions(p), &ns.open_decisions(p)])
        .arg(decision_id)
        .arg(entry)
        .arg(outcome)
}

/// `dead_letter.lua`: moves entries `ids` of partition `p` to its dead-letter stream and
/// acks them for `group`.
pub fn dead_letter(ns: &Keys, p: u32, group: &str, reason: &str, ids: &[&str]) -> ScriptCall {
    ScriptCall::new(&DEAD_LETTER, &[&ns.decisions(p), &ns.dead_letters(p)])
        .arg(group)
        .arg(reason)
        .arg(ids)
}

/// `set_user_value.lua`: stores `value` (JSON) under `key` for `user`.
pub fn set_user_value(ns: &Keys, user: &str, key: &str, value: &str, limit: usize) -> ScriptCall {
    let wal = ns.wal(ns.partition(user));
    ScriptCall::new(&SET_USER_VALUE, &[&ns.user(user), &wal])
        .arg(user)
        .arg(key)
        .arg(value)
        .arg(limit)
}

/// `delete_user_value.lua`: deletes `key` of `user`.
pub fn delete_user_value(ns: &Keys, user: &str, key: &str) -> ScriptCall {
    let wal = ns.wal(ns.partition(user));
    ScriptCall::new(&DELETE_USER_VALUE, &[&ns.user(user), &wal])
        .arg(user)
        .arg(key)
}

/// `forget_user.lua`: erases `user`'s values and leaves a tombstone for `tombstone_secs`.
pub fn forget_user(ns: &Keys, user: &str, tombstone_secs: u64) -> ScriptCall {
    let wal = ns.wal(ns.partition(user));
    ScriptCall::new(
        &FORGET_USER,
        &[&ns.user(user), &wal, &ns.user_forgotten(user)],
    )
    .arg(user)
    .arg(tombstone_secs)
}

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

/// `claim_lease.lua`: acquires or renews (`ttl_ms` > 0) or releases (0) partition `p`'s lease.
pub fn claim_lease(ns: &Keys, p: u32, owner: &str, ttl_ms: u64, floor: i64) -> ScriptCall {
    ScriptCall::new(&CLAIM_LEASE, &[&ns.lease(p), &ns.lease_token(p)])
        .arg(owner)
        .arg(ttl_ms)
        .arg(floor)
        .idempotent(true)
}

/// `publish_committed.lua`: sets `fields` of partition `p`'s committed hash while `lease`
/// (the caller's lease value) still holds the partition.
pub fn publish_committed(ns: &Keys, p: u32, lease: &str, fields: &[(&str, &str)]) -> ScriptCall {
    ScriptCall::new(&PUBLISH_COMMITTED, &[&ns.committed(p), &ns.lease(p)])
        .arg(lease)
        .arg(fields)
        .idempotent(true)
}

/// `trim_stream.lua`: XTRIM MINID `min_id` of `stream` (a stream of partition `p`) while
/// `lease` still holds the partition.
pub fn trim_stream(ns: &Keys, p: u32, stream: &str, lease: &str, min_id: &str) -> ScriptCall {
    ScriptCall::new(&TRIM_STREAM, &[stream, &ns.lease(p)])
        .arg(lease)
        .arg(min_id)
        .idempotent(true)
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
    let mut keys = s.as_array().to_vec();
    keys.extend([index.as_str(), by_user.as_str(), open.as_str()]);
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
    section(call, &image.decisions).idempotent(true)
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// Every file in lua/ (but the prelude) is registered, and every script opens with the
    /// header contract: its name, its KEYS and its return value.
    #[test]
    fn every_lua_file_is_registered_with_a_header() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lua");
        let files: BTreeSet<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".lua") && !n.starts_with('_'))
            .map(|n| n.trim_end_matches(".lua").to_string())
            .collect();
        let registered: BTreeSet<String> =
            super::all().iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(files, registered);
        for name in &files {
            let text = std::fs::read_to_string(format!("{dir}/{name}.lua")).unwrap();
            assert!(
                text.starts_with(&format!("--[[\n  {name}:")),
                "{name}.lua lacks its header"
            );
            assert!(text.contains("KEYS["), "{name}.lua header names no KEYS");
            assert!(
                text.contains("Returns:"),
                "{name}.lua header has no Returns"
            );
        }
    }

    /// A call's words are EVALSHA, the script's SHA, the key count, the keys, the args.
    #[test]
    fn calls_spell_evalsha_with_their_keys_and_args() {
        let ns = crate::keys::Keys::new("as", 16);
        let call = super::read_round(&ns, "alice", "default", Some(3));
        let argv = call.argv();
        assert_eq!(argv[0], "EVALSHA");
        assert_eq!(super::name_of(&argv[1]), Some("read_round"));
        assert_eq!(&argv[2..], ["1", &ns.rounds("alice", "default"), "3"]);
    }
}

/// What [`graph_put`] writes into a graph log, as (hash field, ...) items the caller encoded
/// (see `graph_put.lua` for the layout).
#[derive(Debug, Default, Clone)]
pub struct GraphItems {
    /// (checkpoint field, namespace member, entry JSON).
    pub checkpoints: Vec<(String, String, String)>,
    /// (blob field, value).
    pub blobs: Vec<(String, String)>,
    /// (write field, overwrite, write JSON).
    pub writes: Vec<(String, bool, String)>,
}

/// `graph_put.lua`: writes `items` into session `sid`'s graph log and indexes the thread
/// under `run_ids`; `stamp` adds created_at to the checkpoint entries (a put) rather than
/// keeping theirs (a copy). Not idempotent (a repeated put would log again), so it fails
/// fast while Redis is unreachable.
pub fn graph_put(
    ns: &Keys,
    s: &SessionKeys,
    sid: &str,
    run_ids: &[&str],
    stamp: bool,
    items: &GraphItems,
) -> ScriptCall {
    let runs: Vec<String> = run_ids
        .iter()
        .map(|r| ns.graph_run(s.partition, r))
        .collect();
    let mut keys = s.as_array().to_vec();
    keys.extend([s.graph.as_str(), s.glog.as_str()]);
    keys.extend(runs.iter().map(String::as_str));
    let mut call = ScriptCall::new(&GRAPH_PUT, &keys)
        .arg(sid)
        .arg(if stamp { "1" } else { "0" })
        .arg(items.checkpoints.len());
    for (field, member, entry) in &items.checkpoints {
        call = call.arg(field).arg(member).arg(entry);
    }
    call = call.arg(items.blobs.len()).arg(&items.blobs);
    call = call.arg(items.writes.len());
    for (field, overwrite, write) in &items.writes {
        call = call
            .arg(field)
            .arg(if *overwrite { "1" } else { "0" })
            .arg(write);
    }
    call
}

/// What [`graph_read`] reads.
#[derive(Debug, Clone, Copy)]
pub enum GraphRead<'a> {
    /// The checkpoint `id` (encoded) of namespace `ns` (encoded), or its greatest.
    One {
        /// Encoded namespace.
        ns: &'a str,
        /// Encoded checkpoint id; `None` = the greatest of the namespace.
        id: Option<&'a str>,
    },
    /// Up to `limit` checkpoints below `before`, newest first, of `ns` or of every namespace.
    Page {
        /// Encoded namespace; `None` = every namespace.
        ns: Option<&'a str>,
        /// Encoded checkpoint id to list below (exclusive).
        before: Option<&'a str>,
        /// At most this many.
        limit: usize,
    },
    /// Every field and value of the graph log.
    Dump,
}

/// `graph_read.lua`: reads session `sid`'s graph log (read-only).
pub fn graph_read(s: &SessionKeys, sid: &str, what: GraphRead<'_>) -> ScriptCall {
    let call = ScriptCall::new(&GRAPH_READ, &[&s.meta, &s.graph, &s.glog]).arg(sid);
    match what {
        GraphRead::One { ns, id } => call.arg("one").arg(ns).arg(id.unwrap_or("")),
        GraphRead::Page { ns, before, limit } => call
            .arg("page")
            .arg(ns.unwrap_or(""))
            .arg(if ns.is_some() { "ns" } else { "all" })
            .arg(before.unwrap_or(""))
            .arg(limit),
        GraphRead::Dump => call.arg("dump"),
    }
    .idempotent(true)
}

/// Which checkpoints [`graph_drop`] removes.
#[derive(Debug, Clone, Copy)]
pub enum GraphDrop<'a> {
    /// All but the greatest checkpoint of each namespace.
    KeepLatest,
    /// Every checkpoint.
    All,
    /// Checkpoints whose metadata `run_id` is one of these.
    Runs(&'a [&'a str]),
}

/// `graph_drop.lua`: removes checkpoints of session `sid`'s graph log with their writes and
/// the channel values nothing else references. Repeating it removes nothing more.
pub fn graph_drop(ns: &Keys, s: &SessionKeys, sid: &str, what: GraphDrop<'_>) -> ScriptCall {
    let run_keys: Vec<String> = match what {
        GraphDrop::Runs(runs) => runs.iter().map(|r| ns.graph_run(s.partition, r)).collect(),
        _ => Vec::new(),
    };
    let mut keys = s.as_array().to_vec();
    keys.extend([s.graph.as_str(), s.glog.as_str()]);
    keys.extend(run_keys.iter().map(String::as_str));
    let call = ScriptCall::new(&GRAPH_DROP, &keys).arg(sid);
    match what {
        GraphDrop::KeepLatest => call.arg("keep_latest"),
        GraphDrop::All => call.arg("all"),
        GraphDrop::Runs(runs) => call.arg("runs").arg(runs),
    }
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
