//! Graph checkpoint logs (the storage of `agentstate.langgraph.AgentStateSaver`).

use agentstate::GraphPut;

use super::*;
use crate::args::{opt, Whole};

twins! {
    impl PyStore;

    /// Puts checkpoint `checkpoint_id` of namespace `ns` into graph thread `thread` (created
    /// on its first put): `checkpoint` is the document without channel values, `metadata` a
    /// JSON object, `channels` the (channel, version) pairs it holds, `blobs` the (channel,
    /// version, value) triples new in it. One script call, logged to the wal.
    #[pyo3(signature = (thread, ns, checkpoint_id, parent_id, checkpoint, metadata, channels, blobs))]
    fn graph_put / agraph_put(
        self,
        py,
        thread: String,
        ns: String,
        checkpoint_id: String,
        parent_id: Option<String>,
        checkpoint: Bound<'_, PyAny>,
        metadata: Bound<'_, PyAny>,
        channels: Vec<(String, String)>,
        blobs: Vec<(String, String, String)>,
    ) -> () {
        let mut put = GraphPut::new(ns, checkpoint_id);
        put.parent = parent_id;
        put.checkpoint = py_to_json(&checkpoint)?;
        put.metadata = py_to_json(&metadata)?;
        put.channels = channels;
        put.blobs = blobs;
        let s = self.s(py)?;
        async move { s.graph_put(&thread, &put).await }
    }

    /// Stores task `task_id`'s pending writes, (idx, channel, value) triples, for checkpoint
    /// `checkpoint_id` of `ns`: a repeated (task, idx) is kept, a negative idx overwrites.
    fn graph_put_writes / agraph_put_writes(
        self,
        py,
        thread: String,
        ns: String,
        checkpoint_id: String,
        task_id: String,
        task_path: String,
        writes: Vec<(i64, String, String)>,
    ) -> () {
        let s = self.s(py)?;
        async move {
            s.graph_put_writes(&thread, &ns, &checkpoint_id, &task_id, &task_path, &writes)
                .await
        }
    }

    /// Checkpoint `checkpoint_id` of `ns` (the greatest id when None) as a tuple dict with its
    /// values and writes; None when there is no such checkpoint or thread. One round trip.
    #[pyo3(signature = (thread, ns, checkpoint_id = None))]
    fn graph_get / agraph_get(
        self,
        py,
        thread: String,
        ns: String,
        checkpoint_id: Option<String>,
    ) -> OptDict<agentstate::GraphTuple> {
        let s = self.s(py)?;
        async move {
            s.graph_get(&thread, &ns, checkpoint_id.as_deref())
                .await
                .map(OptDict)
        }
    }

    /// Tuple dicts newest first: of `ns` (every namespace when None), below checkpoint
    /// `before`, whose metadata has every key of `filter`, at most `limit`. One round trip per
    /// page of checkpoints read.
    #[pyo3(signature = (thread, ns = None, before = None, filter = None, limit = None))]
    fn graph_list / agraph_list(
        self,
        py,
        thread: String,
        ns: Option<String>,
        before: Option<String>,
        filter: Option<Bound<'_, PyAny>>,
        limit: Option<Whole<'_>>,
    ) -> Dicts<agentstate::GraphTuple> {
        let limit = opt(&limit, "limit")?;
        let filter = json_object("filter", filter.as_ref())?;
        let s = self.s(py)?;
        async move {
            s.graph_list(&thread, ns.as_deref(), before.as_deref(), filter.as_ref(), limit)
                .await
                .map(Dicts)
        }
    }

    /// Deletes graph thread `thread` (every namespace) in Redis and SQLite; False when it
    /// did not exist.
    fn graph_delete / agraph_delete(self, py, thread: String) -> bool {
        let s = self.s(py)?;
        async move { s.graph_delete(&thread).await }
    }

    /// Keeps the latest checkpoint of each namespace (`keep_latest`) or none; returns the
    /// number of checkpoints removed.
    fn graph_prune / agraph_prune(self, py, thread: String, keep_latest: bool) -> u64 {
        let s = self.s(py)?;
        async move { s.graph_prune(&thread, keep_latest).await }
    }

    /// Removes every checkpoint whose metadata `run_id` is listed, in every thread; returns
    /// the number removed.
    fn graph_delete_runs / agraph_delete_runs(self, py, run_ids: Vec<String>) -> u64 {
        let s = self.s(py)?;
        async move {
            let refs: Vec<&str> = run_ids.iter().map(String::as_str).collect();
            s.graph_delete_runs(&refs).await
        }
    }

    /// Copies every checkpoint, value and write of thread `source` into `target` (a fork);
    /// returns the number of checkpoints copied.
    fn graph_copy / agraph_copy(self, py, source: String, target: String) -> u64 {
        let s = self.s(py)?;
        async move { s.graph_copy(&source, &target).await }
    }
}
