//! The flush's one interpreter: a batch of a partition's `wal` and `decisions` entries becomes
//! the list of typed [`Change`]s it makes to the durable tier, without touching a database.
//! Each backend (`sqlite::flush`, `postgres::flush`) executes the list in one transaction with
//! one `match` arm per change and no wildcard, so a change kind handled by one backend only
//! does not compile. Retention's removals become the same changes ([`removal_changes`]).

use std::collections::{BTreeMap, HashMap};

use super::payloads::*;
use super::retention::Removal;
use crate::error::{Error, Result};
use crate::records::{
    decision_id, stream_id_ms, DecisionEntry, DecisionRecord, Entry, WalEntry, WalOp, WalRecord,
};

/// A batch read from Redis, ready to apply.
pub(crate) struct Batch {
    /// The partition.
    pub partition: u32,
    /// This daemon's fencing token for the partition; a higher token in the durable tier wins.
    pub token: i64,
    /// The wal cursor the batch starts after (must equal the durable tier's, or another
    /// daemon moved).
    pub wal_from: String,
    /// The decisions cursor the batch starts after.
    pub decisions_from: String,
    /// wal entries in stream order.
    pub wal: Vec<WalEntry>,
    /// decisions-stream entries in stream order.
    pub decisions: Vec<Entry>,
    /// What the batch's reference records point at (see [`Referred`]).
    pub referred: Referred,
}

pub(crate) use crate::long_term::names_user;

/// The `LIKE` pattern (`ESCAPE '\'`) of the namespaces that may name `user`: those holding
/// its text anywhere, which `names_user` then decides.
pub(crate) fn user_like_pattern(user: &str) -> String {
    let escaped: String = user
        .chars()
        .flat_map(|c| match c {
            '%' | '_' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect();
    format!("%{escaped}%")
}

/// What reference records point at, as Redis held it when the batch was read: per (op,
/// subject, key) of a `user_set` (the user's value) or a `mem_put` (the memory item's
/// record); `None` when it was gone by then. The wal carries references only, so erasing
/// leaves no copy in a stream.
pub(crate) type Referred = HashMap<(WalOp, String, String), Option<String>>;

/// What a committed batch moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The new wal cursor.
    pub wal: String,
    /// The new decisions cursor.
    pub decisions: String,
    /// True when user data was deleted (SQLite then truncates its `-wal` file).
    pub erased: bool,
}

/// The cursors and fencing token the durable tier holds for a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursors {
    /// The last wal entry applied.
    pub wal: String,
    /// The last decisions entry applied.
    pub decisions: String,
    /// The fencing token of the daemon that applied them.
    pub token: i64,
}

impl Default for Cursors {
    fn default() -> Cursors {
        Cursors {
            wal: "0-0".into(),
            decisions: "0-0".into(),
            token: 0,
        }
    }
}

/// The cursors of a partition, the same text on both backends (PostgreSQL's `$1`).
pub(crate) const CURSORS_SQL: &str =
    "SELECT wal, decisions, token FROM cursors WHERE partition = ?1";

/// Points the named cursors of partition `?1` back to `0-0` (`?3` wal, `?4` decisions) unless
/// a token higher than `?2` owns it: used when Redis lost the streams, whose new entries are
/// all uncommitted whatever their ids. The same text on both backends.
pub(crate) const REBASE_SQL: &str = "UPDATE cursors SET wal = CASE WHEN ?3 THEN '0-0' ELSE wal END,
                        decisions = CASE WHEN ?4 THEN '0-0' ELSE decisions END
     WHERE partition = ?1 AND token <= ?2";

/// The non-detached descendants of session `?1` (a closed session's cascade), the same text
/// on both backends.
pub(crate) const DESCENDANTS_SQL: &str = "WITH RECURSIVE tree(id) AS (
         SELECT id FROM sessions WHERE parent = ?1 AND lifecycle != 'detached'
         UNION SELECT s.id FROM sessions s JOIN tree t ON s.parent = t.id
         WHERE s.lifecycle != 'detached')
     SELECT id FROM tree";

/// The tables holding a session's rows, each with the column naming the session, as
/// `DELETE FROM {table} = <ids>` completes them (decisions apart: they go by time).
pub(crate) const SESSION_TABLES: [&str; 8] = [
    "sessions WHERE id",
    "messages WHERE session_id",
    "compactions WHERE session_id",
    "usage WHERE session_id",
    "checkpoints WHERE session_id",
    "graph_log WHERE session_id",
    "inbox WHERE session_id",
    "effects WHERE session_id",
];

impl Batch {
    /// True when the durable tier's `held` cursors show another daemon owns the partition
    /// now (a higher fencing token, or cursors that moved since this batch was read): the
    /// batch must then write nothing.
    pub(crate) fn is_fenced_by(&self, held: &Cursors) -> bool {
        held.token > self.token
            || held.wal != self.wal_from
            || held.decisions != self.decisions_from
    }

    /// The cursors the batch leaves once committed.
    pub(crate) fn next_cursors(&self) -> Cursors {
        Cursors {
            wal: self.wal.last().map_or(&self.wal_from, |e| &e.0).clone(),
            decisions: self
                .decisions
                .last()
                .map_or(&self.decisions_from, |e| &e.0)
                .clone(),
            token: self.token,
        }
    }
}

/// One message row of a run of `msg` records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageRow<'a> {
    /// The session.
    pub session: &'a str,
    /// The message's seq.
    pub seq: i64,
    /// The element (the record's payload as stored).
    pub element: &'a str,
    /// The idempotency key the append carried.
    pub idem_key: Option<&'a str>,
}

/// The `sessions` row a `session_create` inserts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewSessionRow<'a> {
    /// The session id.
    pub id: &'a str,
    /// Its partition.
    pub partition: u32,
    /// The owning user, or ''.
    pub user_id: String,
    /// The session's kind.
    pub kind: String,
    /// The parent session, or ''.
    pub parent: String,
    /// Depth below its root.
    pub spawn_depth: i64,
    /// `attached` or `detached`.
    pub lifecycle: String,
    /// The status.
    pub status: String,
    /// The model, or ''.
    pub model: String,
    /// The system prompt, or ''.
    pub system_prompt: String,
    /// The config (JSON text).
    pub config: &'a str,
    /// The metadata (JSON text).
    pub metadata: &'a str,
    /// The idle TTL, seconds.
    pub ttl: i64,
    /// Creation time (also its first `updated_at`), ms.
    pub created_at: i64,
}

/// One typed change to the durable tier, in the order a batch makes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change<'a> {
    /// Upserts a run of consecutive `msg` records (one row per (session, seq), the last
    /// record's). The durable tier is the authority for what it committed: the same element
    /// again (an entry applied twice) changes nothing, another element at a committed seq
    /// fails the batch with [`crate::Error::SeqConflict`] and the row stays.
    UpsertMessages(Vec<MessageRow<'a>>),
    /// `msg_pop`: deletes one message.
    DeleteMessage {
        /// The session.
        session: &'a str,
        /// The popped seq.
        seq: i64,
    },
    /// `msg_replace`: replaces a message's element, keeping its idempotency key (a replay of
    /// that key still names this seq).
    ReplaceElement {
        /// The session.
        session: &'a str,
        /// The replaced seq.
        seq: i64,
        /// The new element.
        element: &'a str,
    },
    /// Deletes every row of the sessions and their decisions recorded before
    /// `decisions_before` (ms).
    DeleteSessions {
        /// The sessions.
        ids: Vec<&'a str>,
        /// Decisions at or after this time stay (a newer incarnation's).
        decisions_before: i64,
    },
    /// Inserts a new session's row.
    InsertSession(NewSessionRow<'a>),
    /// `session_update`: sets one column of a session.
    UpdateSession {
        /// The session.
        id: &'a str,
        /// The column, from a fixed list, never from the data.
        column: &'static str,
        /// Its new value.
        value: ColumnValue,
    },
    /// `session_close`: tombstones and deletes the session, with `cascade` also its
    /// non-detached descendants (some may have expired from Redis, so Redis' own walk missed
    /// them); surviving children are re-parented to none. Decisions recorded after
    /// `closed_at` belong to a new incarnation and stay.
    CloseSession {
        /// The session.
        id: &'a str,
        /// Whether its non-detached descendants go too.
        cascade: bool,
        /// When, ms (the wal entry's time).
        closed_at: i64,
    },
    /// `graph_put`: upserts graph log fields.
    UpsertGraphLog {
        /// The session.
        session: &'a str,
        /// (field, value) pairs.
        fields: Vec<(String, String)>,
    },
    /// `graph_drop`: deletes graph log fields.
    DeleteGraphLog {
        /// The session.
        session: &'a str,
        /// The fields.
        fields: Vec<String>,
    },
    /// `inbox`: upserts an inbox item's latest record.
    UpsertInboxItem {
        /// The session.
        session: &'a str,
        /// The item id.
        item_id: String,
        /// The item (JSON text).
        record: &'a str,
    },
    /// `effect`: upserts a tool call's latest ledger record.
    UpsertEffect {
        /// The session.
        session: &'a str,
        /// The tool call id.
        call_id: String,
        /// The record (JSON text).
        record: &'a str,
    },
    /// `compact`: records the compaction and marks its range's active messages
    /// `compacted_out`, as `compact.lua` does.
    Compact {
        /// The session.
        session: &'a str,
        /// The compaction's number and range.
        compaction: CompactRecord,
        /// The compaction record (JSON text).
        record: &'a str,
    },
    /// `usage`: upserts a round's usage record.
    UpsertUsage {
        /// The session.
        session: &'a str,
        /// The round.
        round_index: i64,
        /// The record (JSON text).
        record: &'a str,
    },
    /// `checkpoint`: inserts a checkpoint.
    InsertCheckpoint {
        /// The session.
        session: &'a str,
        /// The checkpoint's id, label and time.
        checkpoint: CheckpointRecord,
        /// The record (JSON text).
        record: &'a str,
    },
    /// `round`: upserts a StateService round (its session id need not be an agentstate
    /// session's).
    UpsertRound(RoundRecord<'a>),
    /// `user_set` whose value Redis still holds: upserts it.
    SetUserValue {
        /// The user.
        user: &'a str,
        /// The key.
        key: String,
        /// The value Redis holds now (the wal carries references only).
        value: String,
    },
    /// `user_del`, or a `user_set` whose value is gone: deletes one user value (an erasure
    /// when a row goes).
    DeleteUserValue {
        /// The user.
        user: &'a str,
        /// The key.
        key: String,
    },
    /// `user_forget`: deletes every value of a user (an erasure when a row goes).
    ForgetUser {
        /// The user.
        user: &'a str,
    },
    /// `mem_put` whose item Redis still holds: upserts the long-term memory item.
    SetMemoryItem {
        /// The partition (of the namespace).
        partition: u32,
        /// The namespace (labels joined by `.`).
        namespace: &'a str,
        /// The item's key.
        key: String,
        /// The record Redis holds now (the wal carries references only).
        record: String,
        /// When it expires (ms), from the record.
        expires_at: Option<i64>,
    },
    /// `mem_del`, or a `mem_put` whose item is gone: deletes one item (an erasure when a row
    /// goes).
    DeleteMemoryItem {
        /// The namespace.
        namespace: &'a str,
        /// The item's key.
        key: String,
    },
    /// `mem_forget`: deletes every memory namespace whose label at `label` is `user` (an
    /// erasure when a row goes).
    ForgetMemory {
        /// The user.
        user: &'a str,
        /// The label position (0: the first).
        label: usize,
    },
    /// A decision, kept unless its session was closed after it was recorded.
    InsertDecision {
        /// The durable id (`decision_id` of partition and entry).
        id: String,
        /// The decision as the stream recorded it.
        decision: DecisionRecord<'a>,
    },
    /// An outcome of a recorded decision.
    SetOutcome {
        /// The decision's durable id.
        decision_id: &'a str,
        /// The outcome.
        outcome: &'a str,
        /// When, ms.
        created_at: i64,
    },
    /// Raises sessions' `updated_at` to the latest write the batch made to each.
    Touch(Vec<(&'a str, i64)>),
    /// Retention: deletes the StateService rounds of a session.
    DeleteRounds {
        /// The session id.
        session: &'a str,
    },
    /// Retention: re-parents a session's children to none.
    Orphan {
        /// The former parent.
        parent: &'a str,
    },
    /// Retention: deletes a closed session's tombstone.
    DeleteTombstone {
        /// The session id.
        session: &'a str,
    },
    /// Retention: deletes one checkpoint.
    DeleteCheckpoint {
        /// The checkpoint id.
        id: &'a str,
    },
    /// Retention: deletes one decision.
    DeleteDecision {
        /// The decision's durable id.
        id: &'a str,
    },
}

/// The changes `batch` makes, in order, ending with the sessions' `updated_at` bump.
/// `tier_error` makes the error of an entry that cannot be parsed (its backend's kind).
pub(crate) fn plan(batch: &Batch, tier_error: fn(String) -> Error) -> Result<Vec<Change<'_>>> {
    let mut planner = Planner {
        batch,
        changes: Vec::new(),
        run: Vec::new(),
        touched: BTreeMap::new(),
    };
    for entry in &batch.wal {
        let in_entry = |e: Error| tier_error(format!("wal entry {}: {e}", entry.0));
        for record in WalRecord::parse_entry(entry).map_err(in_entry)? {
            planner.wal(&record).map_err(in_entry)?;
        }
    }
    planner.end_run();
    for (id, fields) in &batch.decisions {
        DecisionEntry::parse(id, fields)
            .map(|d| planner.decision(id, d))
            .map_err(|e| tier_error(format!("decisions entry {id}: {e}")))?;
    }
    let Planner {
        mut changes,
        touched,
        ..
    } = planner;
    if !touched.is_empty() {
        changes.push(Change::Touch(touched.into_iter().collect()));
    }
    Ok(changes)
}

/// The changes that remove what retention listed: a session goes with its rows, decisions,
/// rounds and its children's link to it.
pub(crate) fn removal_changes(removal: &Removal) -> Vec<Change<'_>> {
    match removal {
        Removal::Session { id } => vec![
            Change::DeleteSessions {
                ids: vec![id],
                decisions_before: i64::MAX,
            },
            Change::DeleteRounds { session: id },
            Change::Orphan { parent: id },
        ],
        Removal::Tombstone { id } => vec![Change::DeleteTombstone { session: id }],
        Removal::Checkpoint { id, .. } => vec![Change::DeleteCheckpoint { id }],
        Removal::Decision { id, .. } => vec![Change::DeleteDecision { id }],
    }
}

/// The seq of a `msg` or `msg_replace` record: its batch field's, or the element's own in a
/// classic record an earlier build wrote (whose element still held its seq).
fn message_seq(record: &WalRecord<'_>, element: &Stamped) -> Result<i64> {
    record
        .seq
        .or(element.seq)
        .map(|seq| seq as i64)
        .ok_or_else(|| Error::InvalidInput(format!("{} record without a seq", record.op_text)))
}

/// The interpreter's state while it walks a batch.
struct Planner<'a> {
    batch: &'a Batch,
    changes: Vec<Change<'a>>,
    /// The current run of `msg` records, written as one change.
    run: Vec<MessageRow<'a>>,
    /// Each session's latest write time in the batch.
    touched: BTreeMap<&'a str, i64>,
}

impl<'a> Planner<'a> {
    /// What the `op` record about (`subject`, `key`) points at, as read with the batch.
    fn referred(&self, op: WalOp, subject: &str, key: &str) -> Option<String> {
        self.batch
            .referred
            .get(&(op, subject.to_string(), key.to_string()))
            .cloned()
            .flatten()
    }

    fn push(&mut self, change: Change<'a>) {
        self.end_run();
        self.changes.push(change);
    }

    fn touch(&mut self, session: &'a str, at: i64) {
        let latest = self.touched.entry(session).or_insert(at);
        *latest = (*latest).max(at);
    }

    /// Closes the current run of `msg` records: one row per (session, seq), the last record's,
    /// as applying them one by one would leave.
    fn end_run(&mut self) {
        if self.run.is_empty() {
            return;
        }
        let run = std::mem::take(&mut self.run);
        let mut last: HashMap<(&str, i64), usize> = HashMap::new();
        for (i, m) in run.iter().enumerate() {
            last.insert((m.session, m.seq), i);
        }
        let rows = run
            .into_iter()
            .enumerate()
            .filter(|(i, m)| last[&(m.session, m.seq)] == *i)
            .map(|(_, m)| m)
            .collect();
        self.changes.push(Change::UpsertMessages(rows));
    }

    fn wal(&mut self, record: &WalRecord<'a>) -> Result<()> {
        let (subject, d) = (record.subject, record.d);
        let Some(op) = record.op else {
            tracing::warn!(
                op = record.op_text,
                entry = record.entry_id,
                "skipping unknown wal op"
            );
            return Ok(());
        };
        match op {
            WalOp::Msg => {
                let m: Stamped = serde_json::from_str(d)?;
                self.run.push(MessageRow {
                    session: subject,
                    seq: message_seq(record, &m)?,
                    element: d,
                    idem_key: record.idem_key,
                });
                self.touch(subject, m.at);
            }
            WalOp::MsgPop => {
                let r: PopRecord = serde_json::from_str(d)?;
                self.push(Change::DeleteMessage {
                    session: subject,
                    seq: r.seq,
                });
                self.touch(subject, r.updated_at);
            }
            WalOp::MsgReplace => {
                let m: Stamped = serde_json::from_str(d)?;
                self.push(Change::ReplaceElement {
                    session: subject,
                    seq: message_seq(record, &m)?,
                    element: d,
                });
                self.touch(subject, stream_id_ms(record.entry_id) as i64);
            }
            WalOp::SessionCreate => {
                let r: CreateRecord = serde_json::from_str(d)?;
                // A create for an id the durable tier still holds replaces the old
                // incarnation; decisions come through their own stream and may already hold
                // the new incarnation's (recorded after this create), which stay.
                self.push(Change::DeleteSessions {
                    ids: vec![subject],
                    decisions_before: r.created_at,
                });
                self.push(Change::InsertSession(NewSessionRow {
                    id: subject,
                    partition: self.batch.partition,
                    user_id: r.user_id.unwrap_or_default(),
                    kind: r.kind,
                    parent: r.parent.unwrap_or_default(),
                    spawn_depth: r.spawn_depth,
                    lifecycle: r.lifecycle,
                    status: r.status,
                    model: r.model.unwrap_or_default(),
                    system_prompt: r.system_prompt.unwrap_or_default(),
                    config: r.config.get(),
                    metadata: r.metadata.get(),
                    ttl: r.ttl,
                    created_at: r.created_at,
                }));
            }
            WalOp::SessionUpdate => {
                let update = SessionUpdate::parse(d)?;
                if let Some(at) = update.updated_at {
                    self.touch(subject, at);
                }
                for (column, value) in update.columns {
                    self.push(Change::UpdateSession {
                        id: subject,
                        column,
                        value,
                    });
                }
            }
            WalOp::GraphPut => {
                let r: GraphPutRecord = serde_json::from_str(d)?;
                let mut fields: Vec<(String, String)> = Vec::new();
                for (field, value) in r.checkpoints.into_iter().chain(r.writes) {
                    fields.push((field, value.get().to_string()));
                }
                fields.extend(r.blobs);
                self.push(Change::UpsertGraphLog {
                    session: subject,
                    fields,
                });
                self.touch(subject, r.at);
            }
            WalOp::GraphDrop => {
                let r: GraphDropRecord = serde_json::from_str(d)?;
                let fields = r
                    .checkpoints
                    .into_iter()
                    .chain(r.writes)
                    .chain(r.blobs)
                    .collect();
                self.push(Change::DeleteGraphLog {
                    session: subject,
                    fields,
                });
                self.touch(subject, r.at);
            }
            WalOp::SessionClose => {
                let r: CloseRecord = serde_json::from_str(d)?;
                self.push(Change::CloseSession {
                    id: subject,
                    cascade: r.cascade,
                    closed_at: stream_id_ms(record.entry_id) as i64,
                });
            }
            WalOp::Compact => {
                let c: CompactRecord = serde_json::from_str(d)?;
                self.touch(subject, c.created_at);
                self.push(Change::Compact {
                    session: subject,
                    compaction: c,
                    record: d,
                });
            }
            WalOp::Usage => {
                let u: UsageRecord = serde_json::from_str(d)?;
                self.push(Change::UpsertUsage {
                    session: subject,
                    round_index: u.round_index,
                    record: d,
                });
                self.touch(subject, u.created_at);
            }
            WalOp::Checkpoint => {
                let c: CheckpointRecord = serde_json::from_str(d)?;
                self.touch(subject, c.created_at);
                self.push(Change::InsertCheckpoint {
                    session: subject,
                    checkpoint: c,
                    record: d,
                });
            }
            WalOp::Round => {
                self.push(Change::UpsertRound(serde_json::from_str(d)?));
            }
            WalOp::UserSet => {
                let k: KeyRecord = serde_json::from_str(d)?;
                let current = self.referred(WalOp::UserSet, subject, &k.key);
                self.push(match current {
                    Some(value) => Change::SetUserValue {
                        user: subject,
                        key: k.key,
                        value,
                    },
                    None => Change::DeleteUserValue {
                        user: subject,
                        key: k.key,
                    },
                });
            }
            WalOp::UserDel => {
                let k: KeyRecord = serde_json::from_str(d)?;
                self.push(Change::DeleteUserValue {
                    user: subject,
                    key: k.key,
                });
            }
            WalOp::UserForget => self.push(Change::ForgetUser { user: subject }),
            WalOp::MemoryPut => {
                let k: KeyRecord = serde_json::from_str(d)?;
                let current = self.referred(WalOp::MemoryPut, subject, &k.key);
                self.push(match current {
                    Some(record) => Change::SetMemoryItem {
                        partition: self.batch.partition,
                        namespace: subject,
                        key: k.key,
                        expires_at: serde_json::from_str::<MemoryHeader>(&record)?.expires_at,
                        record,
                    },
                    None => Change::DeleteMemoryItem {
                        namespace: subject,
                        key: k.key,
                    },
                });
            }
            WalOp::MemoryDelete => {
                let k: KeyRecord = serde_json::from_str(d)?;
                self.push(Change::DeleteMemoryItem {
                    namespace: subject,
                    key: k.key,
                });
            }
            WalOp::MemoryForget => {
                let f: ForgetMemoryRecord = serde_json::from_str(d)?;
                self.push(Change::ForgetMemory {
                    user: subject,
                    label: f.label,
                });
            }
            WalOp::Inbox => {
                let r: InboxRecord = serde_json::from_str(d)?;
                self.push(Change::UpsertInboxItem {
                    session: subject,
                    item_id: r.item_id,
                    record: d,
                });
            }
            WalOp::Effect => {
                let r: EffectRecord = serde_json::from_str(d)?;
                self.push(Change::UpsertEffect {
                    session: subject,
                    call_id: r.call_id,
                    record: d,
                });
            }
        }
        Ok(())
    }

    fn decision(&mut self, entry_id: &str, entry: DecisionEntry<'a>) {
        match entry {
            DecisionEntry::Decision(d) => {
                self.touch(d.session_id, d.created_at);
                self.changes.push(Change::InsertDecision {
                    id: decision_id(self.batch.partition, entry_id),
                    decision: d,
                });
            }
            DecisionEntry::Outcome(o) => self.changes.push(Change::SetOutcome {
                decision_id: o.decision_id,
                outcome: o.outcome,
                created_at: o.created_at,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The interpreter on its own: records in, changes out, no database.
    use super::*;

    fn entry(id: &str, op: &str, subject: &str, d: &str) -> WalEntry {
        let fields = [("op", op), ("id", subject), ("d", d)];
        (
            id.to_string(),
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// A `msg` record as the scripts write it: a batch entry whose field names the seq.
    fn msg(id: &str, sid: &str, seq: i64, at: i64) -> WalEntry {
        (
            id.to_string(),
            vec![
                ("op".into(), "batch".into()),
                (
                    format!("msg {sid} {seq}"),
                    format!(r#"{{"at":{at},"role":"user"}}"#),
                ),
            ],
        )
    }

    fn batch(wal: Vec<WalEntry>) -> Batch {
        Batch {
            partition: 3,
            token: 7,
            wal_from: "0-0".into(),
            decisions_from: "0-0".into(),
            wal,
            decisions: vec![],
            referred: HashMap::new(),
        }
    }

    #[test]
    fn a_run_of_messages_is_one_upsert_keeping_the_last_record_of_a_seq() {
        let b = batch(vec![
            msg("1-0", "s", 1, 10),
            msg("2-0", "s", 2, 30),
            msg("3-0", "s", 1, 20),
        ]);
        let changes = plan(&b, Error::sqlite).unwrap();
        let [Change::UpsertMessages(rows), Change::Touch(touched)] = &changes[..] else {
            panic!("{changes:?}");
        };
        let kept: Vec<(i64, &str)> = rows.iter().map(|r| (r.seq, r.element)).collect();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].0, 2);
        assert_eq!(kept[1], (1, b.wal[2].1[1].1.as_str()));
        assert_eq!(touched, &vec![("s", 30)]);
    }

    /// A wal written by an earlier build: a classic `msg` record whose element holds its seq,
    /// state and `created_at`.
    #[test]
    fn a_classic_message_record_takes_its_seq_and_time_from_its_element() {
        let old = r#"{"seq":4,"state":"active","created_at":40,"role":"user"}"#;
        let b = batch(vec![entry("1-0", "msg", "s", old)]);
        let changes = plan(&b, Error::sqlite).unwrap();
        let [Change::UpsertMessages(rows), Change::Touch(touched)] = &changes[..] else {
            panic!("{changes:?}");
        };
        assert_eq!((rows[0].seq, rows[0].element), (4, old));
        assert_eq!(touched, &vec![("s", 40)]);
        let seqless = batch(vec![entry("1-0", "msg", "s", r#"{"at":4,"role":"user"}"#)]);
        let err = plan(&seqless, Error::sqlite).unwrap_err().to_string();
        assert!(err.contains("msg record without a seq"), "{err}");
    }

    #[test]
    fn a_create_replaces_the_old_incarnation_and_a_close_cascades() {
        let create = r#"{"kind":"agent","spawn_depth":0,"lifecycle":"attached","status":"active",
            "config":{},"metadata":{"a":1},"ttl":60,"created_at":5}"#;
        let b = batch(vec![
            entry("1-0", "session_create", "s", create),
            msg("2-0", "s", 1, 6),
            entry("9-0", "session_close", "s", r#"{"cascade":true}"#),
        ]);
        let changes = plan(&b, Error::sqlite).unwrap();
        assert_eq!(
            changes[0],
            Change::DeleteSessions {
                ids: vec!["s"],
                decisions_before: 5
            }
        );
        let Change::InsertSession(row) = &changes[1] else {
            panic!("{changes:?}");
        };
        assert_eq!(
            (row.partition, row.metadata, row.user_id.as_str()),
            (3, r#"{"a":1}"#, "")
        );
        assert!(matches!(changes[2], Change::UpsertMessages(ref r) if r.len() == 1));
        assert_eq!(
            changes[3],
            Change::CloseSession {
                id: "s",
                cascade: true,
                closed_at: 9
            }
        );
        assert_eq!(changes[4], Change::Touch(vec![("s", 6)]));
    }

    #[test]
    fn a_user_set_whose_value_is_gone_is_an_erasure() {
        let mut b = batch(vec![
            entry("1-0", "user_set", "u", r#"{"key":"k1"}"#),
            entry("2-0", "user_set", "u", r#"{"key":"k2"}"#),
            entry("3-0", "user_forget", "v", "{}"),
        ]);
        b.referred
            .insert((WalOp::UserSet, "u".into(), "k1".into()), Some("v1".into()));
        let changes = plan(&b, Error::sqlite).unwrap();
        assert_eq!(
            changes,
            vec![
                Change::SetUserValue {
                    user: "u",
                    key: "k1".into(),
                    value: "v1".into()
                },
                Change::DeleteUserValue {
                    user: "u",
                    key: "k2".into()
                },
                Change::ForgetUser { user: "v" },
            ]
        );
    }

    #[test]
    fn session_updates_are_typed_columns_and_unknown_ops_are_skipped() {
        let b = batch(vec![
            entry(
                "1-0",
                "session_update",
                "s",
                r#"{"updated_at":8,"round_index":4,"parent":null}"#,
            ),
            entry("2-0", "no_such_op", "s", "{}"),
        ]);
        let mut changes = plan(&b, Error::sqlite).unwrap();
        let touch = changes.pop();
        changes.sort_by_key(|c| format!("{c:?}"));
        assert_eq!(
            changes,
            vec![
                Change::UpdateSession {
                    id: "s",
                    column: "parent",
                    value: ColumnValue::Text(String::new())
                },
                Change::UpdateSession {
                    id: "s",
                    column: "round_index",
                    value: ColumnValue::Int(4)
                },
            ]
        );
        assert_eq!(touch, Some(Change::Touch(vec![("s", 8)])));
    }

    #[test]
    fn decisions_and_outcomes_follow_the_wal_and_a_bad_entry_names_itself() {
        let mut b = batch(vec![]);
        let fields = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        b.decisions = vec![(
            "4-1".into(),
            fields(&[
                ("type", "decision"),
                ("session_id", "s"),
                ("decision", "go"),
                ("rationale", "why"),
                ("planned_action", ""),
                ("meta", "{}"),
                ("created_at", "12"),
            ]),
        )];
        let changes = plan(&b, Error::sqlite).unwrap();
        let Change::InsertDecision { id, decision } = &changes[0] else {
            panic!("{changes:?}");
        };
        assert_eq!(
            (id.as_str(), decision.session_id, decision.created_at),
            (decision_id(3, "4-1").as_str(), "s", 12)
        );
        assert_eq!(changes[1], Change::Touch(vec![("s", 12)]));

        let bad = batch(vec![entry("5-0", "msg", "s", "not json")]);
        let err = plan(&bad, Error::postgres).unwrap_err();
        assert!(matches!(err, Error::Postgres { .. }), "{err:?}");
        assert!(err.to_string().contains("wal entry 5-0"), "{err}");
    }

    #[test]
    fn the_fence_admits_only_the_batch_read_after_the_held_cursors() {
        let mut b = batch(vec![msg("2-0", "s", 1, 1)]);
        b.wal_from = "1-0".into();
        let held = Cursors {
            wal: "1-0".into(),
            ..Cursors::default()
        };
        assert!(!b.is_fenced_by(&held));
        assert!(b.is_fenced_by(&Cursors {
            token: 8,
            ..held.clone()
        }));
        assert!(b.is_fenced_by(&Cursors::default()));
        assert_eq!(
            b.next_cursors(),
            Cursors {
                wal: "2-0".into(),
                decisions: "0-0".into(),
                token: 7
            }
        );
    }

    #[test]
    fn a_removed_session_takes_its_rounds_and_its_childrens_link() {
        let removal = Removal::Session { id: "s".into() };
        assert_eq!(
            removal_changes(&removal),
            vec![
                Change::DeleteSessions {
                    ids: vec!["s"],
                    decisions_before: i64::MAX
                },
                Change::DeleteRounds { session: "s" },
                Change::Orphan { parent: "s" },
            ]
        );
    }
}
