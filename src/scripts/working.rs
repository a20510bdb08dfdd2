//! Working-state scripts: write (compare-and-set), read.

use super::*;

/// `write_working.lua`: `op` is `set` (with `value`), `del` or `clear`; `if_version` makes it
/// a compare-and-set; `fence` a write only while that run lease token is the session's. A
/// [`BatchItem`]: `.call()` for the lone call.
#[allow(clippy::too_many_arguments)]
pub fn write_working(
    s: impl Into<Arc<SessionKeys>>,
    sid: &str,
    op: &str,
    key: &str,
    value: &str,
    if_version: Option<u64>,
    limit: usize,
    fence: Option<u64>,
) -> BatchItem {
    BatchItem {
        op: "working",
        script: &WRITE_WORKING,
        session: s.into(),
        extra_keys: Vec::new(),
        args: vec![
            sid.to_string(),
            op.to_string(),
            key.to_string(),
            value.to_string(),
            opt(if_version),
            limit.to_string(),
            opt(fence),
        ],
        idempotent: false,
    }
}

/// `read_working.lua`: one working-state value (`Some(key)`) or all, with the version.
pub fn read_working(s: &SessionKeys, sid: &str, key: Option<&str>) -> ScriptCall {
    ScriptCall::new(&READ_WORKING, &[&s.meta, &s.work])
        .arg(sid)
        .arg(key.unwrap_or(""))
        .idempotent(true)
}
