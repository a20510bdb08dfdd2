//! The graph checkpoint log capabilities of `agentstate.Store` (the storage of
//! `agentstate.langgraph.AgentStateSaver`): one future per capability, behind the sync method
//! and its async twin in `store.rs`. Checkpoint tuples come back as dicts (see the stubs).

use agentstate::{GraphPut, Store};
use serde_json::{Map, Value};

use crate::convert::{to_json, Json, OptJson};

/// What `graph_put` takes from Python, gathered under the GIL.
pub struct PutArgs {
    pub thread: String,
    pub put: GraphPut,
}

impl PutArgs {
    /// A checkpoint put from the method's arguments.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        thread: String,
        ns: String,
        checkpoint_id: String,
        parent_id: Option<String>,
        checkpoint: Value,
        metadata: Value,
        channels: Vec<(String, String)>,
        blobs: Vec<(String, String, String)>,
    ) -> Self {
        let mut put = GraphPut::new(ns, checkpoint_id);
        put.parent = parent_id;
        put.checkpoint = checkpoint;
        put.metadata = metadata;
        put.channels = channels;
        put.blobs = blobs;
        PutArgs { thread, put }
    }
}

pub async fn put(s: Store, a: PutArgs) -> agentstate::Result<()> {
    s.graph_put(&a.thread, &a.put).await
}

/// Where a write goes: thread, namespace, checkpoint id, task id, task path.
pub type WriteTarget = (String, String, String, String, String);

pub async fn put_writes(
    s: Store,
    (thread, ns, id, task_id, task_path): WriteTarget,
    writes: Vec<(i64, String, String)>,
) -> agentstate::Result<()> {
    s.graph_put_writes(&thread, &ns, &id, &task_id, &task_path, &writes)
        .await
}

pub async fn get(
    s: Store,
    thread: String,
    ns: String,
    id: Option<String>,
) -> agentstate::Result<OptJson> {
    let t = s.graph_get(&thread, &ns, id.as_deref()).await?;
    Ok(OptJson(t.map(|t| to_json(&t).0)))
}

pub async fn list(
    s: Store,
    thread: String,
    ns: Option<String>,
    before: Option<String>,
    filter: Option<Map<String, Value>>,
    limit: Option<usize>,
) -> agentstate::Result<Json> {
    let list = s
        .graph_list(
            &thread,
            ns.as_deref(),
            before.as_deref(),
            filter.as_ref(),
            limit,
        )
        .await?;
    Ok(to_json(&list))
}

pub async fn delete(s: Store, thread: String) -> agentstate::Result<bool> {
    s.graph_delete(&thread).await
}

pub async fn prune(s: Store, thread: String, keep_latest: bool) -> agentstate::Result<u64> {
    s.graph_prune(&thread, keep_latest).await
}

pub async fn delete_runs(s: Store, run_ids: Vec<String>) -> agentstate::Result<u64> {
    let refs: Vec<&str> = run_ids.iter().map(String::as_str).collect();
    s.graph_delete_runs(&refs).await
}

pub async fn copy(s: Store, source: String, target: String) -> agentstate::Result<u64> {
    s.graph_copy(&source, &target).await
}
