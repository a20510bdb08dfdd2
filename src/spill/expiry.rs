//! Long-term memory items whose TTL ran out, removed by the partition's owner in every full
//! pass: from Redis at once, from the durable tier through the `mem_del` records the removal
//! logs (`lua/memory_expire.lua`). Reads skip an expired item before this runs.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::scripts;
use crate::store::Store;

/// Most items one pass removes per partition; the rest wait for the next pass.
const PER_PASS: usize = 1000;

/// Removes partition `p`'s expired memory items (up to [`PER_PASS`]); returns how many.
pub(super) async fn expire_memory(store: &Store, p: u32) -> Result<u64> {
    let now = crate::durable::retention::now_ms();
    // ZRANGE BYSCORE, not ZRANGEBYSCORE: the documented ACL user has +zrange.
    let due: Vec<String> = redis::cmd("ZRANGE")
        .arg(store.keys().memory_expiry(p))
        .arg("-inf")
        .arg(now)
        .arg("BYSCORE")
        .arg("LIMIT")
        .arg(0)
        .arg(PER_PASS)
        .query_async(&mut store.conn().await?)
        .await?;
    let mut by_namespace: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for member in &due {
        if let Some((namespace, key)) = member.split_once('\n') {
            by_namespace.entry(namespace).or_default().push(key);
        }
    }
    let mut removed = 0;
    for (namespace, keys) in by_namespace {
        let call = scripts::memory_expire(store.keys(), namespace, &keys);
        removed += store.invoke::<u64>(&call).await?;
    }
    Ok(removed)
}
