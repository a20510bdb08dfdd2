//! Tool-effect ledger scripts: begin (record the intent), finish (record the result).

use super::*;

/// `effect_begin.lua`: records the intent of tool call `call_id` with `digest` of its
/// arguments, or answers what is recorded for it; with `fence`, only while that run lease
/// token is the session's.
pub fn effect_begin(
    s: &SessionKeys,
    sid: &str,
    call_id: &str,
    digest: &str,
    fence: Option<u64>,
) -> ScriptCall {
    ScriptCall::new(&EFFECT_BEGIN, &s.with_run_gated())
        .arg(sid)
        .arg(call_id)
        .arg(digest)
        .arg(opt(fence))
        // A second begin answers the first one's record: safe to resend.
        .idempotent(true)
}

/// `effect_finish.lua`: records the `result` (JSON) of tool call `call_id`; with `fence`,
/// only while that run lease token is the session's.
pub fn effect_finish(
    s: &SessionKeys,
    sid: &str,
    call_id: &str,
    result: &str,
    limit: usize,
    fence: Option<u64>,
) -> ScriptCall {
    ScriptCall::new(&EFFECT_FINISH, &s.with_run_gated())
        .arg(sid)
        .arg(call_id)
        .arg(result)
        .arg(limit)
        .arg(opt(fence))
        // The first result stays: safe to resend.
        .idempotent(true)
}
