//! Checkpoint scripts: create from working state, put a given document.

use super::*;

/// `create_checkpoint.lua`: snapshots working state (`include_keys` only, when given); with
/// `fence`, only while that run lease token is the session's.
pub fn create_checkpoint(
    s: &SessionKeys,
    sid: &str,
    id: &str,
    label: &str,
    limit: usize,
    fence: Option<u64>,
    include_keys: &[&str],
) -> ScriptCall {
    ScriptCall::new(&CREATE_CHECKPOINT, &s.gated())
        .arg(sid)
        .arg(id)
        .arg(label)
        .arg(limit)
        .arg(opt(fence))
        .arg(include_keys)
}

/// `put_checkpoint.lua`: stores checkpoint `id` of `label` with the given `payload` (a JSON
/// object); with `fence`, only while that run lease token is the session's.
pub fn put_checkpoint(
    s: &SessionKeys,
    sid: &str,
    id: &str,
    label: &str,
    payload: &str,
    limit: usize,
    fence: Option<u64>,
) -> ScriptCall {
    ScriptCall::new(&PUT_CHECKPOINT, &s.gated())
        .arg(sid)
        .arg(id)
        .arg(label)
        .arg(payload)
        .arg(limit)
        .arg(opt(fence))
}

/// `append_checkpointed.lua`: appends the message `body` (JSON object) and stores checkpoint
/// `id` of `label` with `payload` (JSON object) in one atomic step; with `expect_seq`, only
/// if the message gets that seq. Not idempotent (a repeat would append again).
#[allow(clippy::too_many_arguments)]
pub fn append_checkpointed(
    s: &SessionKeys,
    sid: &str,
    body: &str,
    expect_seq: Option<u64>,
    message_limit: usize,
    checkpoint: (&str, &str, &str),
    checkpoint_limit: usize,
    fence: Option<u64>,
) -> ScriptCall {
    let (id, label, payload) = checkpoint;
    ScriptCall::new(&APPEND_CHECKPOINTED, &s.gated())
        .arg(sid)
        .arg(body_tail(body))
        .arg(opt(expect_seq))
        .arg(message_limit)
        .arg(id)
        .arg(label)
        .arg(payload)
        .arg(checkpoint_limit)
        .arg(opt(fence))
}
