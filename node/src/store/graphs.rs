//! Graph checkpoint logs (the storage of the LangGraph.js `AgentStateSaver`), the same
//! records the Python saver reads and writes.

use agentstate::{GraphPut, GraphTuple};

use super::*;

/// One checkpoint of `graphPut`.
#[napi(object)]
pub struct GraphPutInput {
    /// Namespace ("" at the root).
    pub ns: String,
    /// Checkpoint id.
    pub id: String,
    /// The checkpoint it follows.
    pub parent: Option<String>,
    /// The document without channel values (JSON).
    pub checkpoint: Value,
    /// Metadata (a JSON object).
    pub metadata: Value,
    /// `[channel, version]` of every channel it holds.
    pub channels: Vec<Vec<String>>,
    /// `[channel, version, value]` of the values new in it.
    pub blobs: Vec<Vec<String>>,
}

/// A pending write as `graphPutWrites` takes it.
#[napi(object)]
pub struct GraphWriteInput {
    /// Index among the task's writes (negative for special channels).
    pub idx: i64,
    /// The channel.
    pub channel: String,
    /// The stored value.
    pub value: String,
}

/// A checkpoint with its values and pending writes.
#[napi(object)]
pub struct GraphRecord {
    /// Namespace.
    pub ns: String,
    /// Checkpoint id.
    pub id: String,
    /// Parent id.
    pub parent: Option<String>,
    /// The document (JSON).
    pub checkpoint: Value,
    /// Metadata (JSON object).
    pub metadata: Value,
    /// When it was put, ms since the epoch.
    pub created_at: i64,
    /// Channel -> stored value.
    pub values: std::collections::HashMap<String, String>,
    /// `[taskId, channel, value]` in the order LangGraph applies them.
    pub writes: Vec<Vec<String>>,
}

fn pairs<const N: usize>(what: &str, v: Vec<Vec<String>>) -> Result<Vec<[String; N]>> {
    v.into_iter()
        .enumerate()
        .map(|(i, t)| {
            <[String; N]>::try_from(t).map_err(|_| {
                errors::invalid(format!("{what}[{i}] must be an array of {N} strings"))
            })
        })
        .collect()
}

fn record(t: GraphTuple) -> Result<GraphRecord> {
    let parse = |raw: &serde_json::value::RawValue| {
        serde_json::from_str::<Value>(raw.get())
            .map_err(|e| errors::invalid(format!("stored JSON: {e}")))
    };
    Ok(GraphRecord {
        checkpoint: parse(&t.checkpoint)?,
        metadata: parse(&t.metadata)?,
        ns: t.ns,
        id: t.id,
        parent: t.parent,
        created_at: t.created_at,
        values: t.values.into_iter().collect(),
        writes: t
            .writes
            .into_iter()
            .map(|w| vec![w.task_id, w.channel, w.value])
            .collect(),
    })
}

#[napi]
impl NativeStore {
    /// Puts a checkpoint into graph thread `thread` (created on its first put): one script
    /// call, logged to the wal.
    #[napi]
    pub async fn graph_put(&self, thread: String, put: GraphPutInput) -> Result<()> {
        let mut p = GraphPut::new(put.ns, put.id);
        p.parent = put.parent;
        p.checkpoint = put.checkpoint;
        p.metadata = put.metadata;
        p.channels = pairs::<2>("channels", put.channels)?
            .into_iter()
            .map(|[c, v]| (c, v))
            .collect();
        p.blobs = pairs::<3>("blobs", put.blobs)?
            .into_iter()
            .map(|[c, v, b]| (c, v, b))
            .collect();
        self.store
            .graph_put(&thread, &p)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Stores task `taskId`'s pending writes for checkpoint `checkpointId` of `ns`: a
    /// repeated (task, idx) is kept, a negative idx overwrites.
    #[napi]
    pub async fn graph_put_writes(
        &self,
        thread: String,
        ns: String,
        checkpoint_id: String,
        task_id: String,
        task_path: String,
        writes: Vec<GraphWriteInput>,
    ) -> Result<()> {
        let w: Vec<(i64, String, String)> = writes
            .into_iter()
            .map(|w| (w.idx, w.channel, w.value))
            .collect();
        self.store
            .graph_put_writes(&thread, &ns, &checkpoint_id, &task_id, &task_path, &w)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Checkpoint `checkpointId` of `ns` (the greatest id when absent) with its values and
    /// writes; null when there is none. One round trip.
    #[napi]
    pub async fn graph_get(
        &self,
        thread: String,
        ns: String,
        checkpoint_id: Option<String>,
    ) -> Result<Option<GraphRecord>> {
        let t = self
            .store
            .graph_get(&thread, &ns, checkpoint_id.as_deref())
            .await
            .map_err(|e| self.fail(e))?;
        t.map(record).transpose()
    }

    /// Records newest first: of `ns` (every namespace when absent), below checkpoint
    /// `before`, whose metadata has every key of `filter`, at most `limit`.
    #[napi]
    pub async fn graph_list(
        &self,
        thread: String,
        ns: Option<String>,
        before: Option<String>,
        filter: Option<Value>,
        limit: Option<u32>,
    ) -> Result<Vec<GraphRecord>> {
        let filter = match filter {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(errors::invalid("filter must be an object".into())),
        };
        let v = self
            .store
            .graph_list(
                &thread,
                ns.as_deref(),
                before.as_deref(),
                filter.as_ref(),
                limit.map(|l| l as usize),
            )
            .await
            .map_err(|e| self.fail(e))?;
        v.into_iter().map(record).collect()
    }

    /// Deletes graph thread `thread` (every namespace) in Redis and SQLite; false when it
    /// did not exist.
    #[napi]
    pub async fn graph_delete(&self, thread: String) -> Result<bool> {
        self.store
            .graph_delete(&thread)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Keeps the latest checkpoint of each namespace (`keepLatest`) or none; resolves to
    /// the number removed.
    #[napi]
    pub async fn graph_prune(&self, thread: String, keep_latest: bool) -> Result<i64> {
        self.store
            .graph_prune(&thread, keep_latest)
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }

    /// Removes every checkpoint whose metadata `run_id` is listed, in every thread.
    #[napi]
    pub async fn graph_delete_runs(&self, run_ids: Vec<String>) -> Result<i64> {
        let refs: Vec<&str> = run_ids.iter().map(String::as_str).collect();
        self.store
            .graph_delete_runs(&refs)
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }

    /// Copies every checkpoint, value and write of thread `source` into `target`.
    #[napi]
    pub async fn graph_copy(&self, source: String, target: String) -> Result<i64> {
        self.store
            .graph_copy(&source, &target)
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }
}
