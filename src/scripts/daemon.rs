//! The spill daemon's bookkeeping scripts: the namespace's binding, leases, committed ids,
//! stream trims.

use super::*;

/// `bind_namespace.lua`: binds the namespace to the durable tier `identity` (at `location`)
/// unless it is bound already; returns the identity and location it is bound to.
pub fn bind_namespace(ns: &Keys, identity: &str, location: &str) -> ScriptCall {
    ScriptCall::new(&BIND_NAMESPACE, &[&ns.config()])
        .arg(identity)
        .arg(location)
        .idempotent(true)
}

/// `claim_lease.lua`: acquires or renews (`ttl_ms` > 0) or releases (0) partition `p`'s lease.
pub fn claim_lease(ns: &Keys, p: u32, owner: &str, ttl_ms: u64, floor: i64) -> ScriptCall {
    ScriptCall::new(&CLAIM_LEASE, &[&ns.lease(p), &ns.lease_token(p)])
        .arg(owner)
        .arg(ttl_ms)
        .arg(floor)
        .idempotent(true)
}

/// `daemon_heartbeat.lua`: renews (`ttl_ms` > 0) or ends (0) `owner`'s membership among the
/// namespace's spill daemons; returns the live members.
pub fn daemon_heartbeat(ns: &Keys, owner: &str, ttl_ms: u64) -> ScriptCall {
    ScriptCall::new(&DAEMON_HEARTBEAT, &[&ns.daemons()])
        .arg(owner)
        .arg(ttl_ms)
        .idempotent(true)
}

/// `publish_committed.lua`: sets `fields` of partition `p`'s committed hash while `lease`
/// (the caller's lease value) still holds the partition, and rings its commit bell.
pub fn publish_committed(ns: &Keys, p: u32, lease: &str, fields: &[(&str, &str)]) -> ScriptCall {
    ScriptCall::new(
        &PUBLISH_COMMITTED,
        &[&ns.committed(p), &ns.lease(p), &ns.commit_bell(p)],
    )
    .arg(lease)
    .arg(fields)
    .idempotent(true)
}

/// `trim_stream.lua`: XTRIM MINID `min_id` of `stream` (a stream of partition `p`) while
/// `lease` still holds the partition.
pub fn trim_stream(ns: &Keys, p: u32, stream: &str, lease: &str, min_id: &str) -> ScriptCall {
    ScriptCall::new(&TRIM_STREAM, &[stream, &ns.lease(p)])
        .arg(lease)
        .arg(min_id)
        .idempotent(true)
}

/// `check_history.lua`: opens partition `p` to agents' writes in this Redis history when its
/// streams hold the ids the durable tier committed last (`wal`, `decisions`), or, after a
/// repair (`repaired`: the replication id it began under), when the history is still that
/// one; fenced by `lease`. Returns the state (`open`, `checked`, `behind`, `lost`) and the
/// replication id.
pub fn check_history(
    ns: &Keys,
    p: u32,
    lease: &str,
    wal: &str,
    decisions: &str,
    repaired: Option<&str>,
) -> ScriptCall {
    ScriptCall::new(
        &CHECK_HISTORY,
        &[&ns.committed(p), &ns.lease(p), &ns.wal(p), &ns.decisions(p)],
    )
    .arg(lease)
    .arg(wal)
    .arg(decisions)
    .arg(repaired.unwrap_or(""))
    .idempotent(true)
}
