//! The trimmer: shrinks a partition's streams only below what SQLite has committed. The
//! decisions stream also keeps what consumer groups have not been delivered (or have not
//! acknowledged) yet, up to a hard cap, with a warning when the cap bites.

use crate::error::Result;
use crate::records::parse_stream_id;
use crate::scripts;
use crate::store::Store;

/// The smaller of two stream ids.
fn min_id<'a>(a: &'a str, b: &'a str) -> &'a str {
    if parse_stream_id(a) <= parse_stream_id(b) {
        a
    } else {
        b
    }
}

/// XTRIM MINID `min_id` of `stream` while `lease` holds partition `p`: the entries trimmed,
/// or `None` when the lease is gone (nothing trimmed).
async fn fenced_trim(
    store: &Store,
    p: u32,
    lease: &str,
    stream: &str,
    min_id: &str,
) -> Result<Option<u64>> {
    let call = scripts::trim_stream(store.keys(), p, stream, lease, min_id);
    let trimmed: i64 = store.invoke(&call).await?;
    Ok(u64::try_from(trimmed).ok())
}

/// Trims partition `p` while `lease` (the owner's lease value) holds it: the wal below
/// `wal_committed`; the decisions stream below `decisions_committed` and below every
/// consumer group's oldest pending or undelivered entry, unless more than `cap` entries
/// would stay. False (and nothing more trimmed) once the lease is found gone: after a Redis
/// loss the streams are a new timeline SQLite has none of.
pub(super) async fn trim(
    store: &Store,
    p: u32,
    lease: &str,
    wal_committed: &str,
    decisions_committed: &str,
    cap: usize,
) -> Result<bool> {
    let keys = store.keys();
    let mut conn = store.conn().await?;
    let wal_key = keys.wal(p);
    let decisions_key = keys.decisions(p);
    if fenced_trim(store, p, lease, &wal_key, wal_committed)
        .await?
        .is_none()
    {
        return Ok(false);
    }
    let groups: redis::streams::StreamInfoGroupsReply = match redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(&decisions_key)
        .query_async(&mut conn)
        .await
    {
        Ok(g) => g,
        // No stream yet.
        Err(_) => return Ok(true),
    };
    let mut floor = decisions_committed.to_string();
    for group in &groups.groups {
        // Entries after last-delivered-id are undelivered: keep from the one after it.
        let (ms, seq) = parse_stream_id(&group.last_delivered_id).unwrap_or((0, 0));
        let undelivered = format!("{ms}-{}", seq + 1);
        floor = min_id(&floor, &undelivered).to_string();
        let pending: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
            .arg(&decisions_key)
            .arg(&group.name)
            .query_async(&mut conn)
            .await?;
        if let redis::streams::StreamPendingReply::Data(data) = pending {
            floor = min_id(&floor, &data.start_id).to_string();
        }
    }
    if fenced_trim(store, p, lease, &decisions_key, &floor)
        .await?
        .is_none()
    {
        return Ok(false);
    }
    let len: usize = redis::cmd("XLEN")
        .arg(&decisions_key)
        .query_async(&mut conn)
        .await?;
    if len > cap {
        // The oldest of the newest `cap` entries, but never above what SQLite holds.
        let newest: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
            .arg(&decisions_key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(cap)
            .query_async(&mut conn)
            .await?;
        if let Some((oldest_kept, _)) = newest.last() {
            let target = min_id(oldest_kept, decisions_committed);
            let Some(removed) = fenced_trim(store, p, lease, &decisions_key, target).await? else {
                return Ok(false);
            };
            if removed > 0 {
                tracing::warn!(
                    partition = p,
                    removed,
                    cap,
                    "decisions cap reached: trimmed decisions some consumer groups were not delivered yet"
                );
            }
        }
    }
    Ok(true)
}
