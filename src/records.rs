//! What the streams carry, typed: the `wal` records the Lua scripts append
//! ([`WalRecord`]), the entries of a `decisions` stream ([`DecisionEntry`]), the field names
//! of `<prefix>:{p}:committed` ([`committed`]) and stream-id helpers. The flusher, the
//! consumer, `stats` and durable waits all parse through here, so a record's shape has one
//! home on the Rust side (its writers are the scripts in `lua/`, see their headers).
//! Public because services that read the streams themselves (an `XREAD` of a `wal` or
//! `decisions` stream, named by [`crate::keys`]) parse the same records.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// Field names of `<prefix>:{p}:committed`, the hash the spill daemon writes after each
/// SQLite commit (and durable callers poll).
pub mod committed {
    /// Last `wal` stream id committed to SQLite.
    pub const WAL: &str = "wal";
    /// Last `decisions` stream id committed to SQLite.
    pub const DECISIONS: &str = "decisions";
    /// Set to 1 once the owner re-seeded user values and rounds into this Redis.
    pub const SEEDED: &str = "seeded";
}

/// Which of a partition's two streams (also the field of `committed` that tracks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// `<prefix>:{p}:wal`.
    Wal,
    /// `<prefix>:{p}:decisions`.
    Decisions,
}

impl Stream {
    /// Its field in `<prefix>:{p}:committed`.
    pub fn committed_field(self) -> &'static str {
        match self {
            Stream::Wal => committed::WAL,
            Stream::Decisions => committed::DECISIONS,
        }
    }
}

/// A stream entry id `ms-seq`, ordered as Redis orders them; `None` when it is not one.
pub fn parse_stream_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// The milliseconds part of a stream id (0 when it is not one).
pub fn stream_id_ms(id: &str) -> u64 {
    parse_stream_id(id).map_or(0, |(ms, _)| ms)
}

/// One stream entry as redis-rs returns it from XRANGE: its id and its fields.
pub type Entry = (String, HashMap<String, String>);

/// One `wal` entry from XRANGE: its id and its fields in order (a batch entry's records are
/// its fields, in order; see [`WalRecord::parse_entry`]).
pub type WalEntry = (String, Vec<(String, String)>);

/// The operation of a wal record (`op` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WalOp {
    /// `session_create`: `d` = the new session's meta.
    SessionCreate,
    /// `session_update`: `d` = `{updated_at, <changed fields>}`.
    SessionUpdate,
    /// `session_close`: `d` = `{cascade}`.
    SessionClose,
    /// `msg`: `d` = the stored message element; `seq` its seq; `k` = its idempotency key.
    Msg,
    /// `msg_pop`: `d` = `{seq, updated_at}` — the newest message, `seq`, was removed.
    MsgPop,
    /// `msg_replace`: `d` = the message's new element (same seq, state and append time); `seq`
    /// its seq.
    MsgReplace,
    /// `compact`: `d` = the compaction audit record.
    Compact,
    /// `usage`: `d` = one round's usage.
    Usage,
    /// `checkpoint`: `d` = the checkpoint.
    Checkpoint,
    /// `round`: `d` = a StateService round (the subject is the user).
    Round,
    /// `user_set`: `d` = `{key}` (a reference: the value is read from Redis).
    UserSet,
    /// `user_del`: `d` = `{key}`.
    UserDel,
    /// `user_forget`: `d` = `{keys}`.
    UserForget,
    /// `graph_put`: `d` = `{checkpoints: {field: entry}, blobs: {field: value}, writes:
    /// {field: write}}` — graph log values written (see `crate::graphs`).
    GraphPut,
    /// `graph_drop`: `d` = `{checkpoints: [field], writes: [field], blobs: [field]}` — graph
    /// log values removed.
    GraphDrop,
    /// `inbox`: `d` = an inbox item's new record (put, delivered, void; see `crate::inbox`).
    Inbox,
    /// `effect`: `d` = a tool call's new ledger record (begun, done; see `crate::effects`).
    Effect,
    /// `mem_put`: `id` = a long-term memory namespace, `d` = `{key}` (a reference: the item
    /// is read from Redis; see `crate::long_term`).
    MemoryPut,
    /// `mem_del`: `id` = a long-term memory namespace, `d` = `{key}`.
    MemoryDelete,
    /// `mem_forget`: `id` = a user, `d` = `{label}` — every memory namespace whose label at
    /// that position is the user is erased.
    MemoryForget,
}

impl WalOp {
    /// The `op` text the scripts write.
    pub fn as_str(self) -> &'static str {
        match self {
            WalOp::SessionCreate => "session_create",
            WalOp::SessionUpdate => "session_update",
            WalOp::SessionClose => "session_close",
            WalOp::Msg => "msg",
            WalOp::MsgPop => "msg_pop",
            WalOp::MsgReplace => "msg_replace",
            WalOp::Compact => "compact",
            WalOp::Usage => "usage",
            WalOp::Checkpoint => "checkpoint",
            WalOp::Round => "round",
            WalOp::UserSet => "user_set",
            WalOp::UserDel => "user_del",
            WalOp::UserForget => "user_forget",
            WalOp::GraphPut => "graph_put",
            WalOp::GraphDrop => "graph_drop",
            WalOp::Inbox => "inbox",
            WalOp::Effect => "effect",
            WalOp::MemoryPut => "mem_put",
            WalOp::MemoryDelete => "mem_del",
            WalOp::MemoryForget => "mem_forget",
        }
    }

    /// Every op (a unit test checks it against the ops `lua/` writes).
    pub const ALL: [WalOp; 20] = [
        WalOp::SessionCreate,
        WalOp::SessionUpdate,
        WalOp::SessionClose,
        WalOp::Msg,
        WalOp::MsgPop,
        WalOp::MsgReplace,
        WalOp::Compact,
        WalOp::Usage,
        WalOp::Checkpoint,
        WalOp::Round,
        WalOp::UserSet,
        WalOp::UserDel,
        WalOp::UserForget,
        WalOp::GraphPut,
        WalOp::GraphDrop,
        WalOp::Inbox,
        WalOp::Effect,
        WalOp::MemoryPut,
        WalOp::MemoryDelete,
        WalOp::MemoryForget,
    ];

    /// The op whose text is `op`, if any.
    pub fn parse(op: &str) -> Option<WalOp> {
        WalOp::ALL.into_iter().find(|o| o.as_str() == op)
    }
}

/// The `op` of a wal entry that holds several records (`lua/_prelude.lua::log_messages`).
pub const BATCH_OP: &str = "batch";

/// One record of the `wal`: what one write did. A classic entry is one record, fields `op`,
/// `id` (session id, or user id for user and round records), `d` (JSON) and, in a `msg` an
/// earlier build wrote, `k`. A batch entry (`op` = [`BATCH_OP`]) holds the `msg` and
/// `msg_replace` records of one script, in order, after its `op` field: each record is one
/// field, `<op> <sid> <seq>` or `msg <sid> <seq> <idempotency key>`, whose value is the
/// message element (`d`). See docs/architecture-key-protocol.md, "wal records".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord<'a> {
    /// Stream entry id (shared by the records of one entry).
    pub entry_id: &'a str,
    /// What happened; `None` for an op this build does not know (skipped with a warning).
    pub op: Option<WalOp>,
    /// The `op` field as written.
    pub op_text: &'a str,
    /// The session (or user) it concerns.
    pub subject: &'a str,
    /// The record's JSON.
    pub d: &'a str,
    /// The message's seq, for a message record of a batch entry (a message element does not
    /// hold it).
    pub seq: Option<u64>,
    /// Idempotency key of a `msg`.
    pub idem_key: Option<&'a str>,
}

/// The field `name` of a wal entry (field names are unique within an entry).
pub fn wal_field<'a>(entry: &'a WalEntry, name: &str) -> Option<&'a str> {
    entry
        .1
        .iter()
        .find(|(f, _)| f == name)
        .map(|(_, v)| v.as_str())
}

impl<'a> WalRecord<'a> {
    /// The records of a wal entry, in order: one for a classic entry, one per field after
    /// `op` for a batch entry. A missing field or a batch field that is not `<op> <id> <seq>
    /// [<key>]` is an error naming the entry.
    pub fn parse_entry(entry: &'a WalEntry) -> Result<Vec<WalRecord<'a>>> {
        let (id, fields) = entry;
        let field = |name: &str| {
            wal_field(entry, name)
                .ok_or_else(|| Error::InvalidInput(format!("entry {id} has no field {name}")))
        };
        let op_text = field("op")?;
        if op_text != BATCH_OP {
            return Ok(vec![WalRecord {
                entry_id: id,
                op: WalOp::parse(op_text),
                op_text,
                subject: field("id")?,
                d: field("d")?,
                seq: None,
                idem_key: field("k").ok(),
            }]);
        }
        fields
            .iter()
            .filter(|(name, _)| name != "op")
            .map(|(name, d)| {
                let mut words = name.split(' ');
                let (Some(op_text), Some(subject), Some(third), key, None) = (
                    words.next(),
                    words.next(),
                    words.next(),
                    words.next(),
                    words.next(),
                ) else {
                    return Err(Error::InvalidInput(format!(
                        "entry {id}: batch field {name:?} is not <op> <id> <seq> [<key>]"
                    )));
                };
                let op = WalOp::parse(op_text);
                // an `inbox` record's third word is its item id
                let message = matches!(op, Some(WalOp::Msg | WalOp::MsgReplace));
                Ok(WalRecord {
                    entry_id: id,
                    op,
                    op_text,
                    subject,
                    d,
                    seq: message.then(|| third.parse().ok()).flatten(),
                    idem_key: key,
                })
            })
            .collect()
    }
}

/// A `type=decision` entry of a decisions stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRecord<'a> {
    /// The session that decided.
    pub session_id: &'a str,
    /// What was decided.
    pub decision: &'a str,
    /// Why.
    pub rationale: &'a str,
    /// The planned action, `""` for none.
    pub planned_action: &'a str,
    /// Caller metadata, a JSON object (text).
    pub meta: &'a str,
    /// ms since the epoch, Redis clock.
    pub created_at: i64,
}

/// A `type=outcome` entry of a decisions stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeRecord<'a> {
    /// `<partition>:<entry id>` of the decision.
    pub decision_id: &'a str,
    /// The decision's session.
    pub session_id: &'a str,
    /// What happened.
    pub outcome: &'a str,
    /// ms since the epoch, Redis clock.
    pub created_at: i64,
}

/// One entry of a `decisions` stream, as `record_decision.lua` / `record_outcome.lua` write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionEntry<'a> {
    /// A decision.
    Decision(DecisionRecord<'a>),
    /// An outcome of an earlier decision.
    Outcome(OutcomeRecord<'a>),
}

impl<'a> DecisionEntry<'a> {
    /// Parses a decisions-stream entry; a missing field or unknown type is an error naming
    /// the entry.
    pub fn parse(id: &str, fields: &'a HashMap<String, String>) -> Result<DecisionEntry<'a>> {
        let field = |name: &str| required(id, fields, name);
        let created_at = field("created_at")?
            .parse::<i64>()
            .map_err(|e| Error::InvalidInput(format!("entry {id}: created_at: {e}")))?;
        match field("type")? {
            "decision" => Ok(DecisionEntry::Decision(DecisionRecord {
                session_id: field("session_id")?,
                decision: field("decision")?,
                rationale: field("rationale")?,
                planned_action: field("planned_action")?,
                meta: field("meta")?,
                created_at,
            })),
            "outcome" => Ok(DecisionEntry::Outcome(OutcomeRecord {
                decision_id: field("decision_id")?,
                session_id: field("session_id")?,
                outcome: field("outcome")?,
                created_at,
            })),
            other => Err(Error::InvalidInput(format!(
                "entry {id} has unknown type {other:?}"
            ))),
        }
    }
}

/// The decision id of entry `entry_id` of partition `p`'s decisions stream.
pub fn decision_id(p: u32, entry_id: &str) -> String {
    format!("{p}:{entry_id}")
}

fn required<'a>(id: &str, fields: &'a HashMap<String, String>, name: &str) -> Result<&'a str> {
    fields
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| Error::InvalidInput(format!("entry {id} has no field {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_order_numerically() {
        assert!(parse_stream_id("10-0") > parse_stream_id("9-5"));
        assert!(parse_stream_id("10-10") > parse_stream_id("10-9"));
        assert_eq!(parse_stream_id("junk"), None);
        assert_eq!(stream_id_ms("1700-3"), 1700);
    }

    fn wal_entry(id: &str, fields: &[(&str, &str)]) -> WalEntry {
        let fields = fields
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        (id.to_string(), fields)
    }

    #[test]
    fn wal_records_parse_and_name_missing_fields() {
        let entry = wal_entry(
            "1-0",
            &[("op", "msg"), ("id", "s1"), ("d", "{}"), ("k", "r1")],
        );
        let r = WalRecord::parse_entry(&entry).unwrap();
        assert_eq!(
            r.iter()
                .map(|r| (r.op, r.subject, r.idem_key, r.d))
                .collect::<Vec<_>>(),
            [(Some(WalOp::Msg), "s1", Some("r1"), "{}")]
        );
        let broken = wal_entry("1-0", &[("op", "msg"), ("id", "s1")]);
        let err = WalRecord::parse_entry(&broken).unwrap_err().to_string();
        assert!(err.contains("entry 1-0 has no field d"), "{err}");
    }

    /// A batch entry's records come out in field order, each with its own subject, key and
    /// element; a field that is not `<op> <id> <seq> [<key>]` is an error naming the entry.
    #[test]
    fn batch_entries_hold_their_records_in_order() {
        let entry = wal_entry(
            "7-1",
            &[
                ("op", BATCH_OP),
                ("msg s2 4 r9", r#"{"seq":4}"#),
                ("msg s1 1", r#"{"seq":1,"x":[1,2]}"#),
            ],
        );
        let records = WalRecord::parse_entry(&entry).unwrap();
        let seen: Vec<_> = records
            .iter()
            .map(|r| (r.entry_id, r.op, r.subject, r.idem_key, r.d))
            .collect();
        assert_eq!(
            seen,
            [
                ("7-1", Some(WalOp::Msg), "s2", Some("r9"), r#"{"seq":4}"#),
                (
                    "7-1",
                    Some(WalOp::Msg),
                    "s1",
                    None,
                    r#"{"seq":1,"x":[1,2]}"#
                ),
            ]
        );
        for bad in ["msg s1", "msg s1 1 k extra"] {
            let broken = wal_entry("7-2", &[("op", BATCH_OP), (bad, "{}")]);
            let err = WalRecord::parse_entry(&broken).unwrap_err().to_string();
            assert!(err.contains("entry 7-2: batch field"), "{err}");
        }
    }

    /// Every op a script in `lua/` writes to the wal is one the flusher knows (an unknown
    /// one would be skipped with a warning, losing it from SQLite), and every op it knows is
    /// written by some script.
    #[test]
    fn the_scripts_write_exactly_the_known_wal_ops() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lua");
        let mut written = std::collections::BTreeSet::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for part in text.split("'op', '").skip(1) {
                written.insert(part.split('\'').next().unwrap().to_string());
            }
            // the records of a batch entry (write_message's fields `msg <sid> <seq>`, the
            // inbox scripts' `inbox <sid> <item id>`, a lone `msg_replace <sid> <seq>`)
            for form in [
                "local field = '",
                "'op', 'batch', '",
                "log[#log + 1], log[#log + 2] = '",
            ] {
                for part in text.split(form).skip(1) {
                    written.insert(part.split(' ').next().unwrap().to_string());
                }
            }
        }
        assert!(written.remove(BATCH_OP), "no script writes a batch entry");
        let known: std::collections::BTreeSet<String> =
            WalOp::ALL.iter().map(|o| o.as_str().to_string()).collect();
        assert_eq!(written, known);
    }
}
