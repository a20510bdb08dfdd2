//! User-attributed data scripts: set, delete, forget.

use super::*;

/// `set_user_value.lua`: stores `value` (JSON) under `key` for `user`.
pub fn set_user_value(ns: &Keys, user: &str, key: &str, value: &str, limit: usize) -> ScriptCall {
    let wal = ns.wal(ns.partition(user));
    ScriptCall::new(&SET_USER_VALUE, &[&ns.user(user), &wal])
        .arg(user)
        .arg(key)
        .arg(value)
        .arg(limit)
}

/// `delete_user_value.lua`: deletes `key` of `user`.
pub fn delete_user_value(ns: &Keys, user: &str, key: &str) -> ScriptCall {
    let wal = ns.wal(ns.partition(user));
    ScriptCall::new(&DELETE_USER_VALUE, &[&ns.user(user), &wal])
        .arg(user)
        .arg(key)
}

/// `forget_user.lua`: erases `user`'s values and leaves a tombstone for `tombstone_secs`.
pub fn forget_user(ns: &Keys, user: &str, tombstone_secs: u64) -> ScriptCall {
    let wal = ns.wal(ns.partition(user));
    ScriptCall::new(
        &FORGET_USER,
        &[&ns.user(user), &wal, &ns.user_forgotten(user)],
    )
    .arg(user)
    .arg(tombstone_secs)
}
