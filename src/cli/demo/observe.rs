//! What the checks look at: the daemon catching up, the durable tier's row counts, and a comparable
//! image of a session.

use std::time::{Duration, Instant};

use crate::spill::inspect;
use crate::{MessageQuery, Result, Store};
use serde_json::{json, Value};

/// Waits until no partition has wal or decisions entries the durable tier has not committed.
pub(super) async fn wait_caught_up(store: &Store, within: Duration) -> Result<bool> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let stats = inspect::stats(store).await?;
        if stats
            .iter()
            .all(|s| s.wal_pending == 0 && s.decisions_pending == 0)
        {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(false)
}

/// Rows of `sid` in the durable tier at `db`: (messages, decisions, checkpoints), read-only.
pub(super) async fn durable_counts(
    db: &std::path::Path,
    ns: &crate::config::Namespace,
    sid: &str,
) -> Result<(i64, i64, i64)> {
    let durable = crate::durable::Durable::open_reader(db, ns).await?;
    let mut counts = [0i64; 3];
    for (n, table) in counts
        .iter_mut()
        .zip(["messages", "decisions", "checkpoints"])
    {
        let sql = format!("SELECT CAST(count(*) AS TEXT) FROM {table} WHERE session_id = ?1");
        let rows = durable.text_rows(&sql, sid).await?;
        *n = rows
            .first()
            .and_then(|r| r[0].as_deref())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
    }
    Ok((counts[0], counts[1], counts[2]))
}

/// The top-level fields (and `session.*` fields) where two session images differ.
pub(super) fn differences(before: &Value, after: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(b), Some(a)) = (before.as_object(), after.as_object()) {
        for (k, v) in b {
            match (v.as_object(), a.get(k).and_then(Value::as_object)) {
                (Some(bo), Some(ao)) => out.extend(
                    bo.iter()
                        .filter(|(f, fv)| ao.get(*f) != Some(fv))
                        .map(|(f, _)| format!("{k}.{f}")),
                ),
                _ if a.get(k) != Some(v) => out.push(k.clone()),
                _ => {}
            }
        }
    }
    out
}

/// Everything durable about a session, as one comparable document. The working-state
/// `version` is left out: working state is ephemeral, so a restored session starts at 0.
pub(super) async fn session_image(store: &Store, sid: &str) -> Result<Value> {
    let mut session = serde_json::to_value(store.require_session(sid).await?)?;
    if let Some(meta) = session.as_object_mut() {
        meta.remove("version");
    }
    Ok(json!({
        "session": session,
        "messages": store.messages(sid, MessageQuery::all()).await?,
        "compactions": store.compactions(sid).await?,
        "usage": store.usage(sid).await?,
        "checkpoints": store.checkpoints(sid).await?,
        "children": store.children(sid).await?,
    }))
}
