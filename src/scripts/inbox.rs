//! Inbox scripts: put, claim, deliver, void.

use super::*;

/// `inbox_put.lua`: adds `(item id, message body)` pairs not in the inbox yet.
pub fn inbox_put(s: &SessionKeys, sid: &str, limit: usize, items: &[(&str, String)]) -> ScriptCall {
    let mut call = ScriptCall::new(&INBOX_PUT, &s.with_run_gated())
        .arg(sid)
        .arg(limit);
    for (id, body) in items {
        call = call.arg(*id).arg(body);
    }
    // An id the inbox holds is left alone: safe to resend.
    call.idempotent(true)
}

/// `inbox_claim.lua`: the lease holder takes up to `limit` undelivered items.
pub fn inbox_claim(
    s: &SessionKeys,
    sid: &str,
    owner: &str,
    token: u64,
    limit: usize,
) -> ScriptCall {
    ScriptCall::new(&INBOX_CLAIM, &s.with_run_gated())
        .arg(sid)
        .arg(owner)
        .arg(token)
        .arg(limit)
        .idempotent(true)
}

/// `inbox_deliver.lua`: the lease holder appends items `ids` to the transcript and marks
/// them delivered.
pub fn inbox_deliver(
    s: &SessionKeys,
    sid: &str,
    owner: &str,
    token: u64,
    limit: usize,
    ids: &[&str],
) -> ScriptCall {
    ScriptCall::new(&INBOX_DELIVER, &s.with_run_gated())
        .arg(sid)
        .arg(owner)
        .arg(token)
        .arg(limit)
        .arg(ids)
        // A delivered item keeps its seq and is not appended again: safe to resend.
        .idempotent(true)
}

/// `inbox_void.lua`: drops undelivered items `ids`.
pub fn inbox_void(s: &SessionKeys, sid: &str, ids: &[&str]) -> ScriptCall {
    ScriptCall::new(&INBOX_VOID, &s.with_run_gated())
        .arg(sid)
        .arg(ids)
        .idempotent(true)
}
