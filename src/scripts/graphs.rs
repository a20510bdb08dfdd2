//! Graph checkpoint log scripts: put, read, drop.

use super::*;

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
    keys.push(&s.committed);
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
    keys.push(&s.committed);
    let call = ScriptCall::new(&GRAPH_DROP, &keys).arg(sid);
    match what {
        GraphDrop::KeepLatest => call.arg("keep_latest"),
        GraphDrop::All => call.arg("all"),
        GraphDrop::Runs(runs) => call.arg("runs").arg(runs),
    }
    .idempotent(true)
}
