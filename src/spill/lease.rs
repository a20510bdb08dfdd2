//! Partition leases: one daemon owns a partition at a time through `<prefix>:{p}:lease` (a
//! Redis key with a millisecond expiry); every new lease gets a fencing token from
//! `<prefix>:{p}:lease_token`, which SQLite keeps with the partition's cursors so a daemon
//! whose lease lapsed cannot commit over its successor. The primitives, Redis only.

use std::time::Duration;

use crate::error::Result;
use crate::scripts;
use crate::store::Store;

/// Acquires or renews the lease of partition `p` for `owner`; returns the fencing token, or
/// `None` while another owner holds it. A new token is above `floor`, the highest token
/// SQLite recorded for `p` (Redis may have lost its counter with its memory).
pub(crate) async fn claim(
    store: &Store,
    p: u32,
    owner: &str,
    ttl: Duration,
    floor: i64,
) -> Result<Option<i64>> {
    let token: i64 = invoke(store, p, owner, ttl.as_millis().max(1) as u64, floor).await?;
    Ok((token > 0).then_some(token))
}

/// The lease key's value while `owner` holds the lease with `token` — the format
/// `claim_lease.lua` writes, which scripts compare to check the caller still owns the
/// partition.
pub(crate) fn value(owner: &str, token: i64) -> String {
    format!("{owner} {token}")
}

/// Gives the lease of partition `p` up (if `owner` holds it), so a standby takes over at once.
pub(crate) async fn release(store: &Store, p: u32, owner: &str) -> Result<()> {
    invoke(store, p, owner, 0, 0).await.map(|_: i64| ())
}

async fn invoke(store: &Store, p: u32, owner: &str, ttl_ms: u64, floor: i64) -> Result<i64> {
    let call = scripts::claim_lease(store.keys(), p, owner, ttl_ms, floor);
    store.invoke(&call).await
}
