//! Checkpoint scripts: create from working state, put a given document.

use super::*;

/// `create_checkpoint.lua`: snapshots working state (`include_keys` only, when given).
pub fn create_checkpoint(
    s: &SessionKeys,
    sid: &str,
    id: &str,
    label: &str,
    limit: usize,
    include_keys: &[&str],
) -> ScriptCall {
    ScriptCall::new(&CREATE_CHECKPOINT, &s.as_array())
        .arg(sid)
        .arg(id)
        .arg(label)
        .arg(limit)
        .arg(include_keys)
}

/// `put_checkpoint.lua`: stores checkpoint `id` of `label` with the given `payload` (a JSON
/// object).
pub fn put_checkpoint(
    s: &SessionKeys,
    sid: &str,
    id: &str,
    label: &str,
    payload: &str,
    limit: usize,
) -> ScriptCall {
    ScriptCall::new(&PUT_CHECKPOINT, &s.as_array())
        .arg(sid)
        .arg(id)
        .arg(label)
        .arg(payload)
        .arg(limit)
}
