//! The trimmer: shrinks a partition's streams only below what SQLite has committed. The
//! decisions stream also keeps what consumer groups have not been delivered (or have not
//! acknowledged) yet, up to a hard cap, with a warning when the cap bites.

use crate::error::Result;
use crate::records::parse_stream_id;
use crate::store::Store;

/// The smaller of two stream ids.
fn min_id<'a>(a: &'a str, b: &'a str) -> &'a str {
    if parse_stream_id(a) <= parse_stream_id(b) {
        a
    } else {
        b
    }
}

/// Trims partition `p`: the wal below `wal_committed`; the decisions stream below
/// `decisions_committed` and below every consumer group's oldest pending or undelivered
/// entry, unless more than `cap` entries would stay.
pub(super) async fn trim(
    store: &Store,
    p: u32,
    wal_committed: &str,
    decisions_committed: &str,
    cap: usize,
) -> Result<()> {
    let keys = store.keys();
    let mut conn = store.conn().await?;
    let wal_key = keys.wal(p);
    let decisions_key = keys.decisions(p);
    let _: u64 = redis::cmd("XTRIM")
        .arg(&wal_key)
        .arg("MINID")
        .arg(wal_committed)
        .query_async(&mut conn)
        .await?;
    let groups: redis::streams::StreamInfoGroupsReply = match redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(&decisions_key)
        .query_async(&mut conn)
        .await
    {
        Ok(g) => g,
        // No stream yet.
        Err(_) => return Ok(()),
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
    let _: u64 = redis::cmd("XTRIM")
        .arg(&decisions_key)
        .arg("MINID")
        .arg(&floor)
        .query_async(&mut conn)
        .await?;
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
            let removed: u64 = redis::cmd("XTRIM")
                .arg(&decisions_key)
                .arg("MINID")
                .arg(target)
                .query_async(&mut conn)
                .await?;
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
    Ok(())
}
