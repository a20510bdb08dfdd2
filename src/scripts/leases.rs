//! Run lease scripts: acquire, renew, release a session's run lease.

use super::*;

/// `lease_acquire.lua`: takes session `sid`'s run lease for `owner` for `ttl_ms`.
pub fn lease_acquire(s: &SessionKeys, sid: &str, owner: &str, ttl_ms: u64) -> ScriptCall {
    ScriptCall::new(&LEASE_ACQUIRE, &s.with_run())
        .arg(sid)
        .arg(owner)
        .arg(ttl_ms)
        // The same owner acquiring again keeps its token: safe to resend.
        .idempotent(true)
}

/// `lease_renew.lua`: extends the lease while `owner` holds it with `token`.
pub fn lease_renew(s: &SessionKeys, sid: &str, owner: &str, token: u64, ttl_ms: u64) -> ScriptCall {
    ScriptCall::new(&LEASE_RENEW, &s.with_run())
        .arg(sid)
        .arg(owner)
        .arg(token)
        .arg(ttl_ms)
        .idempotent(true)
}

/// `lease_release.lua`: drops the lease if `owner` holds it with `token`.
pub fn lease_release(s: &SessionKeys, sid: &str, owner: &str, token: u64) -> ScriptCall {
    ScriptCall::new(&LEASE_RELEASE, &s.as_array())
        .arg(sid)
        .arg(owner)
        .arg(token)
        .idempotent(true)
}
