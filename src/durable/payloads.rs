//! The payloads of wal records (`d`) as the interpreter (`durable::plan`) reads them.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;

/// `session_create`: the new session's settings.
#[derive(Deserialize)]
pub(crate) struct CreateRecord<'a> {
    pub user_id: Option<String>,
    pub kind: String,
    pub parent: Option<String>,
    pub spawn_depth: i64,
    pub lifecycle: String,
    pub status: String,
    pub model: Option<String>,
    pub system_prompt: Option<String>,
    #[serde(borrow)]
    pub config: &'a RawValue,
    #[serde(borrow)]
    pub metadata: &'a RawValue,
    pub ttl: i64,
    pub created_at: i64,
}

/// `msg` / `msg_replace`: the message's element, read for its append time (`at`; an
/// element an earlier build wrote has `created_at`, and its `seq`, which its record did not).
#[derive(Deserialize)]
pub(crate) struct Stamped {
    #[serde(default)]
    pub seq: Option<u64>,
    #[serde(alias = "created_at")]
    pub at: i64,
}

/// `msg_pop`: the removed seq and when.
#[derive(Deserialize)]
pub(crate) struct PopRecord {
    pub seq: i64,
    pub updated_at: i64,
}

/// `compact`: the compaction's number, range and time.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct CompactRecord {
    pub compact_seq: i64,
    pub from_seq: i64,
    pub to_seq: i64,
    pub created_at: i64,
}

/// `usage`: the round and time.
#[derive(Deserialize)]
pub(crate) struct UsageRecord {
    pub round_index: i64,
    pub created_at: i64,
}

/// `checkpoint`: its id, label and time.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct CheckpointRecord {
    pub id: String,
    pub label: String,
    pub created_at: i64,
}

/// `round`: a StateService round.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RoundRecord<'a> {
    pub user_id: String,
    pub session_id: String,
    pub round_id: i64,
    pub created_at: i64,
    #[serde(borrow)]
    pub state: &'a RawValue,
}

/// Equal when every field is, the state compared as its JSON text.
impl PartialEq for RoundRecord<'_> {
    fn eq(&self, other: &Self) -> bool {
        let key = |r: &Self| {
            (
                r.user_id.clone(),
                r.session_id.clone(),
                r.round_id,
                r.created_at,
            )
        };
        key(self) == key(other) && self.state.get() == other.state.get()
    }
}

impl Eq for RoundRecord<'_> {}

/// `user_set` / `user_del` / `mem_put` / `mem_del`: the key (the value stays in Redis).
#[derive(Deserialize)]
pub(crate) struct KeyRecord {
    pub key: String,
}

/// `mem_forget`: the user's label position.
#[derive(Deserialize)]
pub(crate) struct ForgetMemoryRecord {
    pub label: usize,
}

/// What the flush reads of a long-term memory item's record (`lua/memory_put.lua`).
#[derive(Deserialize)]
pub(crate) struct MemoryHeader {
    pub expires_at: Option<i64>,
}

/// `inbox`: the item's id (the row keeps the whole record).
#[derive(Deserialize)]
pub(crate) struct InboxRecord {
    pub item_id: String,
}

/// `effect`: the tool call's id (the row keeps the whole record).
#[derive(Deserialize)]
pub(crate) struct EffectRecord {
    pub call_id: String,
}

/// `session_close`: whether descendants go too.
#[derive(Deserialize)]
pub(crate) struct CloseRecord {
    pub cascade: bool,
}

/// `graph_put`: graph log values written (field → entry / write JSON, field → value).
#[derive(Deserialize)]
pub(crate) struct GraphPutRecord<'a> {
    /// The write's time (the session's `updated_at`), ms.
    pub at: i64,
    #[serde(borrow)]
    pub checkpoints: HashMap<String, &'a RawValue>,
    pub blobs: HashMap<String, String>,
    #[serde(borrow)]
    pub writes: HashMap<String, &'a RawValue>,
}

/// `graph_drop`: graph log fields removed.
#[derive(Deserialize)]
pub(crate) struct GraphDropRecord {
    /// The removal's time (the session's `updated_at`), ms.
    pub at: i64,
    pub checkpoints: Vec<String>,
    pub writes: Vec<String>,
    pub blobs: Vec<String>,
}

/// A value `session_update` sets, typed as the column stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ColumnValue {
    /// A text column (`status`, `parent`, `pending`).
    Text(String),
    /// An integer column (`round_index`).
    Int(i64),
}

/// A `session_update` record (`{updated_at, status?, parent? (null = none), pending? (null =
/// none), round_index?}`) as the columns it sets.
pub(crate) struct SessionUpdate {
    /// The write's time, ms.
    pub updated_at: Option<i64>,
    /// (column, value); columns from a fixed list.
    pub columns: Vec<(&'static str, ColumnValue)>,
}

impl SessionUpdate {
    /// Reads a record's payload; unknown fields are skipped with a warning.
    pub(crate) fn parse(d: &str) -> crate::error::Result<SessionUpdate> {
        let fields: HashMap<String, &RawValue> = serde_json::from_str(d)?;
        let mut update = SessionUpdate {
            updated_at: None,
            columns: Vec::new(),
        };
        for (name, raw) in &fields {
            let text = raw.get();
            let (column, value): (&'static str, ColumnValue) = match name.as_str() {
                "updated_at" => {
                    update.updated_at = Some(text.parse().unwrap_or(0));
                    continue;
                }
                "status" => ("status", ColumnValue::Text(serde_json::from_str(text)?)),
                "parent" => (
                    "parent",
                    ColumnValue::Text(
                        serde_json::from_str::<Option<String>>(text)?.unwrap_or_default(),
                    ),
                ),
                "pending" if text == "null" => ("pending", ColumnValue::Text(String::new())),
                "pending" => ("pending", ColumnValue::Text(text.to_string())),
                "round_index" => ("round_index", ColumnValue::Int(serde_json::from_str(text)?)),
                other => {
                    tracing::warn!(field = other, "skipping unknown session field");
                    continue;
                }
            };
            update.columns.push((column, value));
        }
        Ok(update)
    }
}
