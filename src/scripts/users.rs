//! User-attributed data scripts: set, delete, forget.

use super::*;

/// `set_user_value.lua`: stores `value` (JSON) under `key` for `user`.
pub fn set_user_value(ns: &Keys, user: &str, key: &str, value: &str, limit: usize) -> ScriptCall {
    let p = ns.partition(user);
    ScriptCall::new(
        &SET_USER_VALUE,
        &[&ns.user(user), &ns.wal(p), &ns.committed(p)],
    )
    .arg(user)
    .arg(key)
    .arg(value)
    .arg(limit)
}

/// `delete_user_value.lua`: deletes `key` of `user`.
pub fn delete_user_value(ns: &Keys, user: &str, key: &str) -> ScriptCall {
    let p = ns.partition(user);
    ScriptCall::new(
        &DELETE_USER_VALUE,
        &[&ns.user(user), &ns.wal(p), &ns.committed(p)],
    )
    .arg(user)
    .arg(key)
}

/// `forget_user.lua`: erases `user`'s values and leaves a tombstone for `tombstone_secs`.
pub fn forget_user(ns: &Keys, user: &str, tombstone_secs: u64) -> ScriptCall {
    let p = ns.partition(user);
    ScriptCall::new(
        &FORGET_USER,
        &[
            &ns.user(user),
            &ns.wal(p),
            &ns.user_forgotten(user),
            &ns.committed(p),
        ],
    )
    .arg(user)
    .arg(tombstone_secs)
}
