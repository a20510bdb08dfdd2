//! Graph checkpoint logs: the per-thread checkpoint history of an agent graph (LangGraph's
//! checkpointer contract: checkpoints with parent and metadata, channel values per version,
//! pending writes per task), kept as part of an agentstate session — the thread — so it is
//! live in Redis, flushed to SQLite through the wal, restored with the session, and lives in
//! the session's hash slot (Cluster safe).
//!
//! Namespaces, checkpoint ids, channels, versions and task ids are opaque strings; channel
//! and write values are opaque strings too (the adapter's serialised form). They are encoded
//! into the graph log's field names here (`%` → `%25`, `|` → `%7C`, so `|` separates parts);
//! `lua/graph_put.lua` documents the layout. A put is one EVALSHA; reading one checkpoint
//! (the latest included) is one; a list reads one page of checkpoints per EVALSHA.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::{within_limit, Error, Result};
use crate::scripts::{self, GraphDrop, GraphItems, GraphRead};
use crate::sessions::NewSession;
use crate::store::Store;

/// The longest namespace, checkpoint id, channel, version, task id or task path accepted.
const MAX_PART: usize = 1024;

/// How many checkpoints one list round trip reads when the caller set no limit or filters.
const PAGE: usize = 100;

/// One checkpoint to put into a thread's graph log.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct GraphPut {
    /// Checkpoint namespace (`""` at the root, `name:<id>` for a subgraph).
    pub ns: String,
    /// Checkpoint id (LangGraph's are time-ordered: the greatest is the latest).
    pub id: String,
    /// The checkpoint it follows, if any.
    pub parent: Option<String>,
    /// The checkpoint document without its channel values (any JSON).
    pub checkpoint: Value,
    /// Metadata (a JSON object; lists filter on its top-level keys, `run_id` is indexed).
    pub metadata: Value,
    /// (channel, version) of every channel the checkpoint holds: the values it references.
    pub channels: Vec<(String, String)>,
    /// (channel, version, value) of the values new in this checkpoint.
    pub blobs: Vec<(String, String, String)>,
}

impl GraphPut {
    /// A checkpoint `id` of namespace `ns` with an empty document and metadata.
    pub fn new(ns: impl Into<String>, id: impl Into<String>) -> Self {
        GraphPut {
            ns: ns.into(),
            id: id.into(),
            checkpoint: Value::Object(Map::new()),
            metadata: Value::Object(Map::new()),
            ..Default::default()
        }
    }
}

/// A pending write of a task, as stored and returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// The task's path (`""` when not given).
    pub task_path: String,
    /// The channel written.
    pub channel: String,
    /// Its index among the task's writes (negative for LangGraph's special channels).
    pub idx: i64,
    /// The value (opaque).
    pub value: String,
}

/// A checkpoint with its channel values and pending writes. Its document and metadata are
/// handed over as the stored JSON text, not decoded: a reader converts them into its own
/// objects in one pass (the Python binding builds a 500-checkpoint list's dicts straight
/// from the text; a `serde_json::Value` tree in between was a third of its time). Two
/// tuples are equal when their parts are, the JSON texts compared as text.
#[derive(Debug, Clone, Serialize)]
pub struct GraphTuple {
    /// Namespace.
    pub ns: String,
    /// Checkpoint id.
    pub id: String,
    /// Parent checkpoint id.
    pub parent: Option<String>,
    /// The checkpoint document (without channel values), JSON text.
    pub checkpoint: Box<RawValue>,
    /// Metadata, JSON text of an object.
    pub metadata: Box<RawValue>,
    /// When it was put, ms since the epoch (Redis clock).
    pub created_at: i64,
    /// (channel, version) of every channel it holds.
    pub channels: Vec<(String, String)>,
    /// Channel → value, for the channels whose value is stored.
    pub values: BTreeMap<String, String>,
    /// Pending writes, in (task_path, task_id, idx) order — the order LangGraph applies them.
    pub writes: Vec<GraphWrite>,
}

impl PartialEq for GraphTuple {
    fn eq(&self, other: &Self) -> bool {
        (self.ns == other.ns && self.id == other.id && self.parent == other.parent)
            && self.checkpoint.get() == other.checkpoint.get()
            && self.metadata.get() == other.metadata.get()
            && (self.created_at, &self.channels, &self.values, &self.writes)
                == (
                    other.created_at,
                    &other.channels,
                    &other.values,
                    &other.writes,
                )
    }
}

/// A checkpoint entry as stored under `c|<ns>|<id>` (created_at is added by the script);
/// `D` is how its document and metadata are held: values, or their JSON text for reads.
#[derive(Debug, Serialize, Deserialize)]
struct Entry<D = Value> {
    #[serde(default, skip_serializing)]
    created_at: i64,
    /// The value field of each of `channels`, space-separated, in order: the first string
    /// of the entry, so `graph_read.lua` finds them with a pattern instead of decoding JSON.
    /// Never read back here (the channels say the same).
    #[serde(default, skip_deserializing)]
    fields: String,
    ns: String,
    id: String,
    parent: Option<String>,
    checkpoint: D,
    metadata: D,
    /// (channel, version).
    channels: Vec<(String, String)>,
}

/// One part of a field name, percent-escaped where it could break the layout: `%`, the
/// separator `|`, and what JSON would escape or the field list splits on (`"`, `\\`, space,
/// control characters), so a field list in an entry needs no JSON decoding in Lua.
fn enc(part: &str) -> Cow<'_, str> {
    let special = |c: char| matches!(c, '%' | '|' | '"' | '\\' | ' ') || c.is_ascii_control();
    if !part.contains(special) {
        return Cow::Borrowed(part);
    }
    let mut out = String::with_capacity(part.len() + 8);
    for c in part.chars() {
        if special(c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn checkpoint_field(ns: &str, id: &str) -> String {
    format!("c|{}|{}", enc(ns), enc(id))
}

fn namespace_member(ns: &str) -> String {
    format!("n|{}", enc(ns))
}

fn blob_field(ns: &str, channel: &str, version: &str) -> String {
    format!("b|{}|{}|{}", enc(ns), enc(channel), enc(version))
}

fn write_field(ns: &str, id: &str, task_id: &str, idx: i64) -> String {
    format!("w|{}|{}|{}|{idx}", enc(ns), enc(id), enc(task_id))
}

/// Rejects a part that is too long (or empty, when `required`), before Redis is touched.
fn check_part(what: &str, part: &str, required: bool) -> Result<()> {
    if required && part.is_empty() {
        return Err(Error::InvalidInput(format!("{what} is empty")));
    }
    if part.len() > MAX_PART {
        return Err(Error::InvalidInput(format!(
            "{what} is {} bytes, over {MAX_PART}",
            part.len()
        )));
    }
    Ok(())
}

/// The metadata's `run_id`, when it is a string.
fn run_id(metadata: &Value) -> Option<&str> {
    metadata.get("run_id").and_then(Value::as_str)
}

/// A `graph_read.lua` one/page reply: the entries (None where a listed checkpoint has none),
/// their channels' values in order (None where not stored), and a range of write fields with
/// their writes, which may hold writes of checkpoints not listed.
type ReadReply = (
    Vec<Option<String>>,
    Vec<Option<String>>,
    Vec<String>,
    Vec<Option<String>>,
);

/// The tuples of a [`ReadReply`], in its order: each entry takes as many values as it has
/// channels, and each write goes to the checkpoint its field names (`w|<ns>|<id>|...`).
fn tuples((entries, values, wfields, writes): ReadReply) -> Result<Vec<GraphTuple>> {
    let cut = || Error::redis("graph_read reply: values cut short");
    let mut values = values.into_iter();
    let mut out = Vec::with_capacity(entries.len());
    let mut index = HashMap::with_capacity(entries.len());
    for entry in entries.into_iter().flatten() {
        let e: Entry<Box<RawValue>> = serde_json::from_str(&entry)?;
        let mut stored = BTreeMap::new();
        for (ch, _) in &e.channels {
            if let Some(v) = values.next().ok_or_else(cut)? {
                stored.insert(ch.clone(), v);
            }
        }
        index.insert(format!("{}|{}", enc(&e.ns), enc(&e.id)), out.len());
        out.push(GraphTuple {
            ns: e.ns,
            id: e.id,
            parent: e.parent,
            checkpoint: e.checkpoint,
            metadata: e.metadata,
            created_at: e.created_at,
            channels: e.channels,
            values: stored,
            writes: Vec::new(),
        });
    }
    if values.next().is_some() {
        return Err(Error::redis("graph_read reply: values left over"));
    }
    for (field, write) in wfields.iter().zip(writes) {
        let checkpoint = field
            .strip_prefix("w|")
            .and_then(|rest| rest.match_indices('|').nth(1).map(|(at, _)| &rest[..at]));
        if let (Some(&i), Some(write)) = (checkpoint.and_then(|c| index.get(c)), write) {
            out[i].writes.push(serde_json::from_str(&write)?);
        }
    }
    for t in &mut out {
        t.writes.sort_by(|a, b| {
            (&a.task_path, &a.task_id, a.idx).cmp(&(&b.task_path, &b.task_id, b.idx))
        });
    }
    Ok(out)
}

/// Whether `metadata` (JSON text of an object) has every key of `filter` with an equal JSON
/// value.
fn matches(metadata: &RawValue, filter: &Map<String, Value>) -> Result<bool> {
    let metadata: Map<String, Value> = serde_json::from_str(metadata.get())?;
    Ok(filter.iter().all(|(k, v)| metadata.get(k) == Some(v)))
}

/// For graph log values read back from SQLite (field, value): the index members they need
/// (checkpoints, writes, namespaces) and the runs of their checkpoints (`restore_graph.lua`).
#[cfg(feature = "spill")]
pub(crate) fn restore_index(values: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    let mut members = BTreeSet::new();
    let mut runs = BTreeSet::new();
    for (field, value) in values {
        if let Some(rest) = field.strip_prefix("c|") {
            members.insert(field.clone());
            if let Some((ns, _)) = rest.split_once('|') {
                members.insert(format!("n|{ns}"));
            }
            if let Ok(e) = serde_json::from_str::<Entry>(value) {
                runs.extend(run_id(&e.metadata).map(str::to_string));
            }
        } else if field.starts_with("w|") {
            members.insert(field.clone());
        }
    }
    (members.into_iter().collect(), runs.into_iter().collect())
}

impl Store {
    /// Puts checkpoint `cp` into thread `thread`'s graph log (creating the thread, an
    /// agentstate session, on its first put): its entry and its new channel values in one
    /// script call, logged to the wal.
    pub async fn graph_put(&self, thread: &str, cp: &GraphPut) -> Result<()> {
        let keys = self.session_keys(thread)?;
        check_part("checkpoint namespace", &cp.ns, false)?;
        check_part("checkpoint id", &cp.id, true)?;
        if let Some(parent) = &cp.parent {
            check_part("parent checkpoint id", parent, true)?;
        }
        if !cp.metadata.is_object() {
            return Err(Error::InvalidInput(
                "checkpoint metadata must be a JSON object".into(),
            ));
        }
        for (ch, version) in &cp.channels {
            check_part("channel", ch, true)?;
            check_part("channel version", version, true)?;
        }
        let entry = Entry {
            created_at: 0,
            fields: cp
                .channels
                .iter()
                .map(|(ch, v)| blob_field(&cp.ns, ch, v))
                .collect::<Vec<_>>()
                .join(" "),
            ns: cp.ns.clone(),
            id: cp.id.clone(),
            parent: cp.parent.clone(),
            checkpoint: cp.checkpoint.clone(),
            metadata: cp.metadata.clone(),
            channels: cp.channels.clone(),
        };
        let mut items = GraphItems {
            checkpoints: vec![(
                checkpoint_field(&cp.ns, &cp.id),
                namespace_member(&cp.ns),
                serde_json::to_string(&entry)?,
            )],
            ..Default::default()
        };
        let mut size = items.checkpoints[0].2.len();
        for (ch, version, value) in &cp.blobs {
            check_part("channel", ch, true)?;
            check_part("channel version", version, true)?;
            size += value.len();
            items
                .blobs
                .push((blob_field(&cp.ns, ch, version), value.clone()));
        }
        self.check_graph_size("checkpoint", size)?;
        let runs: Vec<&str> = run_id(&cp.metadata).into_iter().collect();
        let call = scripts::graph_put(self.keys(), &keys, thread, &runs, true, &items);
        self.graph_write(thread, keys.partition, &call).await
    }

    /// Stores task `task_id`'s pending `writes` — (idx, channel, value) — for checkpoint `id`
    /// of namespace `ns`. A write whose (task, idx) is stored already is kept, unless its
    /// idx is negative (LangGraph's special channels: errors, interrupts), which overwrites.
    pub async fn graph_put_writes(
        &self,
        thread: &str,
        ns: &str,
        id: &str,
        task_id: &str,
        task_path: &str,
        writes: &[(i64, String, String)],
    ) -> Result<()> {
        let keys = self.session_keys(thread)?;
        check_part("checkpoint namespace", ns, false)?;
        check_part("checkpoint id", id, true)?;
        check_part("task id", task_id, true)?;
        check_part("task path", task_path, false)?;
        if writes.is_empty() {
            return Ok(());
        }
        let mut items = GraphItems::default();
        let mut size = 0;
        for (idx, channel, value) in writes {
            check_part("channel", channel, true)?;
            let write = serde_json::to_string(&GraphWrite {
                task_id: task_id.to_string(),
                task_path: task_path.to_string(),
                channel: channel.clone(),
                idx: *idx,
                value: value.clone(),
            })?;
            size += write.len();
            items
                .writes
                .push((write_field(ns, id, task_id, *idx), *idx < 0, write));
        }
        self.check_graph_size("pending writes", size)?;
        let call = scripts::graph_put(self.keys(), &keys, thread, &[], true, &items);
        self.graph_write(thread, keys.partition, &call).await
    }

    /// Checkpoint `id` of namespace `ns` (the greatest id when `None`) with its values and
    /// writes; `None` when the thread or the checkpoint does not exist.
    pub async fn graph_get(
        &self,
        thread: &str,
        ns: &str,
        id: Option<&str>,
    ) -> Result<Option<GraphTuple>> {
        let keys = self.session_keys(thread)?;
        check_part("checkpoint namespace", ns, false)?;
        let (e_ns, e_id) = (enc(ns), id.map(enc));
        let call = scripts::graph_read(
            &keys,
            thread,
            GraphRead::One {
                ns: &e_ns,
                id: e_id.as_deref(),
            },
        );
        match self.invoke_session(thread, &call).await {
            Err(Error::UnknownSession(_)) => Ok(None),
            other => Ok(tuples(other?)?.into_iter().next()),
        }
    }

    /// Checkpoints of `ns` (every namespace when `None`), newest first (greatest id first),
    /// below checkpoint `before` when given, whose metadata matches `filter` (every key equal),
    /// at most `limit` of them. Reads one page of checkpoints per round trip.
    pub async fn graph_list(
        &self,
        thread: &str,
        ns: Option<&str>,
        before: Option<&str>,
        filter: Option<&Map<String, Value>>,
        limit: Option<usize>,
    ) -> Result<Vec<GraphTuple>> {
        let keys = self.session_keys(thread)?;
        let e_ns = ns.map(enc);
        let page = match (limit, filter) {
            (Some(n), None) => n,
            (Some(n), Some(_)) => n.max(PAGE),
            (None, _) => PAGE,
        };
        let mut out = Vec::new();
        let mut cursor = before.map(|b| enc(b).into_owned());
        while limit.is_none_or(|n| out.len() < n) {
            let call = scripts::graph_read(
                &keys,
                thread,
                GraphRead::Page {
                    ns: e_ns.as_deref(),
                    before: cursor.as_deref(),
                    limit: page,
                },
            );
            let items = match self.invoke_session(thread, &call).await {
                Err(Error::UnknownSession(_)) => return Ok(out),
                other => tuples(other?)?,
            };
            let full = items.len() == page;
            for t in items {
                cursor = Some(enc(&t.id).into_owned());
                let kept = match filter {
                    Some(f) => matches(&t.metadata, f)?,
                    None => true,
                };
                if kept && limit.is_none_or(|n| out.len() < n) {
                    out.push(t);
                }
            }
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// Deletes thread `thread` (every namespace) from Redis and SQLite; false when it did not
    /// exist.
    pub async fn graph_delete(&self, thread: &str) -> Result<bool> {
        match self.close_session(thread, true).await {
            Ok(_) => Ok(true),
            Err(Error::UnknownSession(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Keeps only the latest checkpoint of each namespace (`keep_latest`) or none, with the
    /// writes and values the kept ones need; returns the number of checkpoints removed.
    pub async fn graph_prune(&self, thread: &str, keep_latest: bool) -> Result<u64> {
        let keys = self.session_keys(thread)?;
        let what = if keep_latest {
            GraphDrop::KeepLatest
        } else {
            GraphDrop::All
        };
        let call = scripts::graph_drop(self.keys(), &keys, thread, what);
        match self.invoke_session(thread, &call).await {
            Err(Error::UnknownSession(_)) => Ok(0),
            other => other,
        }
    }

    /// Removes every checkpoint whose metadata `run_id` is one of `run_ids`, with its writes,
    /// from every live thread; returns the number removed. Threads are found through the
    /// run indexes (`<prefix>:{p}:g_run:<run_id>`, one read per partition).
    pub async fn graph_delete_runs(&self, run_ids: &[&str]) -> Result<u64> {
        if run_ids.is_empty() {
            return Ok(0);
        }
        let parts = self.keys().partitions();
        let mut reads = Vec::new();
        for p in 0..parts {
            for run in run_ids {
                reads.push(
                    redis::cmd("SMEMBERS")
                        .arg(self.keys().graph_run(p, run))
                        .clone(),
                );
            }
        }
        let members: Vec<Vec<String>> = self.fan_out(reads).await?;
        let threads: BTreeSet<String> = members.into_iter().flatten().collect();
        let mut removed = 0;
        for thread in &threads {
            let keys = self.session_keys(thread)?;
            let call = scripts::graph_drop(self.keys(), &keys, thread, GraphDrop::Runs(run_ids));
            removed += match self.invoke_session::<u64>(thread, &call).await {
                Err(Error::UnknownSession(_)) => 0,
                other => other?,
            };
        }
        Ok(removed)
    }

    /// Copies every checkpoint, value and write of thread `source` (all namespaces) into
    /// thread `target` (created when new), keeping ids, parents and times: a fork. Returns the
    /// number of checkpoints copied (0 when `source` does not exist).
    pub async fn graph_copy(&self, source: &str, target: &str) -> Result<u64> {
        let src = self.session_keys(source)?;
        let dst = self.session_keys(target)?;
        let call = scripts::graph_read(&src, source, GraphRead::Dump);
        let fields: Vec<(String, String)> = match self.invoke_session(source, &call).await {
            Err(Error::UnknownSession(_)) => return Ok(0),
            other => other?,
        };
        let mut items = GraphItems::default();
        let mut runs = BTreeSet::new();
        for (field, value) in fields {
            match field.as_bytes().first() {
                Some(b'c') => {
                    let e: Entry = serde_json::from_str(&value)?;
                    if let Some(run) = run_id(&e.metadata) {
                        runs.insert(run.to_string());
                    }
                    items
                        .checkpoints
                        .push((field, namespace_member(&e.ns), value));
                }
                Some(b'b') => items.blobs.push((field, value)),
                Some(b'w') => items.writes.push((field, true, value)),
                _ => {}
            }
        }
        if items.checkpoints.is_empty() {
            return Ok(0);
        }
        let copied = items.checkpoints.len() as u64;
        let runs: Vec<&str> = runs.iter().map(String::as_str).collect();
        let call = scripts::graph_put(self.keys(), &dst, target, &runs, false, &items);
        self.graph_write(target, dst.partition, &call).await?;
        Ok(copied)
    }

    /// [`Error::TooLarge`] when one call's payload passes the state limit.
    fn check_graph_size(&self, what: &'static str, size: usize) -> Result<()> {
        within_limit(what, size, self.config().limits.state)
    }

    /// Runs a `graph_put.lua` call on `thread`, creating the thread's session when it does
    /// not exist (neither live nor restorable), then waits for durability as configured.
    async fn graph_write(&self, thread: &str, p: u32, call: &scripts::ScriptCall) -> Result<()> {
        let wal_id: String = match self.invoke_session(thread, call).await {
            Err(Error::UnknownSession(_)) => {
                let new = NewSession::new()
                    .id(thread)
                    .metadata(serde_json::json!({"graph": true}));
                match self.create_session(&new).await {
                    Ok(_) | Err(Error::AlreadyExists(_)) => {}
                    Err(e) => return Err(e),
                }
                self.invoke(call).await?
            }
            other => other?,
        };
        if !wal_id.is_empty() {
            self.settle(p, &wal_id).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_parts_cannot_contain_the_separator() {
        assert_eq!(checkpoint_field("", "1"), "c||1");
        assert_eq!(checkpoint_field("a|b:c", "x%y"), "c|a%7Cb:c|x%25y");
        assert_eq!(checkpoint_field("", "a b\"c\\\n"), "c||a%20b%22c%5C%0A");
        assert_eq!(
            blob_field("sub:1", "branch:to:a", "00.5"),
            "b|sub:1|branch:to:a|00.5"
        );
        assert_eq!(write_field("", "1", "t|1", -3), "w||1|t%7C1|-3");
        assert_eq!(namespace_member("n|s"), "n|n%7Cs");
    }
}
