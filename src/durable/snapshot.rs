//! Snapshots: what the daemon reads from the durable tier to put into Redis again — one
//! session as the arguments of `restore_session.lua` ([`SessionImage`]) plus its StateService
//! rounds, and a partition's user data for the after-loss re-seed. The SQL and the assembly
//! are shared here; each backend (`sqlite::snapshot`, `postgres::snapshot`) only runs the
//! reads.

use crate::error::{Error, Result};
use crate::scripts::SessionImage;
use crate::sessions::META_FIELDS;

/// A session as SQLite holds it: what `restore_session.lua` writes, and the rounds of the
/// same session id (`restore_rounds.lua`).
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// The session's keys' contents.
    pub image: SessionImage,
    /// StateService rounds of this session id: (user, [(round id, state)]).
    pub rounds: Vec<(String, Vec<(i64, String)>)>,
    /// The graph log (field, value), when the session is a graph thread.
    pub graph: Vec<(String, String)>,
}

/// Groups `(key, item)` rows sorted by key into one `(key, items)` entry per key.
pub(crate) fn group_sorted<K: PartialEq, V>(
    rows: impl IntoIterator<Item = (K, V)>,
) -> Vec<(K, Vec<V>)> {
    let mut groups: Vec<(K, Vec<V>)> = Vec::new();
    for (key, item) in rows {
        match groups.last_mut() {
            Some((k, items)) if *k == key => items.push(item),
            _ => groups.push((key, vec![item])),
        }
    }
    groups
}

/// The `sessions` row of a session: the text columns (user_id, kind, parent, lifecycle,
/// status, model, system_prompt, config, metadata, pending) and the integer ones (ttl,
/// created_at, updated_at, round_index, spawn_depth).
pub(crate) struct SessionRow {
    pub texts: [String; 10],
    pub ints: [i64; 5],
}

/// Every row a durable store holds for one session, as read by either backend; [`assemble`]
/// makes the restore image of them, so SQLite and PostgreSQL restore alike.
pub(crate) struct SessionRows {
    pub head: SessionRow,
    /// (seq, element, idempotency key) by seq.
    pub messages: Vec<(i64, String, Option<String>)>,
    /// Compaction records by compact_seq.
    pub compactions: Vec<String>,
    /// (round index, record) by round index.
    pub usage: Vec<(i64, String)>,
    /// (label, record) of the latest checkpoint per label, oldest first.
    pub checkpoints: Vec<(String, String)>,
    /// Open decisions: id, decision, rationale, planned_action, meta, created_at.
    pub decisions: Vec<Vec<String>>,
    /// (user, (round id, state)) sorted by user and round.
    pub rounds: Vec<(String, (i64, String))>,
    /// Child session ids, sorted.
    pub children: Vec<String>,
    /// The graph log (field, value), sorted by field.
    pub graph: Vec<(String, String)>,
    /// Inbox items (item id, record).
    pub inbox: Vec<(String, String)>,
    /// The tool-effect ledger (call id, record).
    pub effects: Vec<(String, String)>,
}

/// The SQL both backends run for a session's rows (`?1` is the session id; PostgreSQL
/// spells it `$1`), in the order of [`SessionRows`]' fields.
pub(crate) mod sql {
    pub const HEAD: &str =
        "SELECT user_id, kind, parent, lifecycle, status, model, system_prompt, config, metadata,
                pending, ttl, created_at, updated_at, round_index, spawn_depth
         FROM sessions WHERE id = ?1";
    pub const MESSAGES: &str =
        "SELECT seq, element, idem_key FROM messages WHERE session_id = ?1 ORDER BY seq";
    pub const COMPACTIONS: &str =
        "SELECT record FROM compactions WHERE session_id = ?1 ORDER BY compact_seq";
    pub const USAGE: &str =
        "SELECT round_index, record FROM usage WHERE session_id = ?1 ORDER BY round_index";
    pub const CHECKPOINTS: &str = "SELECT label, record FROM checkpoints WHERE seq IN
             (SELECT max(seq) FROM checkpoints WHERE session_id = ?1 GROUP BY label)
         ORDER BY seq";
    pub const DECISIONS: &str =
        "SELECT id, decision, rationale, planned_action, meta, created_at FROM decisions
         WHERE session_id = ?1 AND outcome IS NULL ORDER BY created_at, id";
    pub const ROUNDS: &str = "SELECT user_id, round_id, state FROM rounds WHERE session_id = ?1
         ORDER BY user_id, round_id";
    pub const CHILDREN: &str = "SELECT id FROM sessions WHERE parent = ?1 ORDER BY id";
    pub const GRAPH: &str =
        "SELECT field, value FROM graph_log WHERE session_id = ?1 ORDER BY field";
    pub const INBOX: &str =
        "SELECT item_id, record FROM inbox WHERE session_id = ?1 ORDER BY item_id";
    pub const EFFECTS: &str =
        "SELECT call_id, record FROM effects WHERE session_id = ?1 ORDER BY call_id";
}

/// The restore image of a session's rows (either backend's).
pub(crate) fn assemble(sid: &str, rows: SessionRows) -> Result<Snapshot> {
    let SessionRow { texts, ints } = rows.head;
    let [user_id, kind, parent, lifecycle, status, model, prompt, config, metadata, pending] =
        texts;
    let [ttl, created, updated, round_index, depth] = ints;
    let mut snapshot = Snapshot::default();
    let s = &mut snapshot.image;
    s.user_id = user_id.clone();
    s.ttl = ttl;
    for (seq, element, key) in rows.messages {
        if seq != s.messages.len() as i64 + 1 {
            return Err(Error::sqlite(format!(
                "session {sid}: message seq {seq} follows {} (gap in the durable tier)",
                s.messages.len()
            )));
        }
        s.messages.push(element);
        if let Some(k) = key {
            s.idem.push((k, seq));
        }
    }
    s.compactions = rows.compactions;
    s.usage = rows.usage;
    s.checkpoints = rows.checkpoints;
    s.decisions = rows.decisions;
    snapshot.rounds = group_sorted(rows.rounds);
    s.children = rows.children;
    s.inbox = rows.inbox;
    s.effects = rows.effects;
    let last_compact_seq = s.compactions.len();
    // Every field of `META_FIELDS` but the last, `compacted`, which restore_session.lua
    // derives from the compaction records; in that order, a value each.
    let values: [String; META_FIELDS.len() - 1] = [
        (s.messages.len() + 1).to_string(), // next_seq
        ttl.to_string(),                    // ttl
        "0".into(),                         // ttl_at: restore_session's refresh_ttl sets it
        updated.to_string(),                // updated_at
        "0".into(),                         // version
        user_id,                            // user_id
        kind,                               // kind
        parent,                             // parent
        depth.to_string(),                  // spawn_depth
        lifecycle,                          // lifecycle
        status,                             // status
        model,                              // model
        prompt,                             // system_prompt
        config,                             // config
        metadata,                           // metadata
        created.to_string(),                // created_at
        round_index.to_string(),            // round_index
        last_compact_seq.to_string(),       // last_compact_seq
        pending,                            // pending
    ];
    debug_assert_eq!(META_FIELDS.last(), Some(&"compacted"));
    s.meta = META_FIELDS.into_iter().zip(values).collect();
    snapshot.graph = rows.graph;
    Ok(snapshot)
}

/// User values (user → key/value pairs) and StateService rounds of sessions that are not
/// agentstate sessions ((user, session) → round/state pairs) SQLite holds for one partition.
pub(crate) type UserData = (
    Vec<(String, Vec<(String, String)>)>,
    Vec<((String, String), Vec<(i64, String)>)>,
);
