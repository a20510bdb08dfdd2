//! Calls of the long-term memory scripts (`crate::long_term`).

use super::*;

/// `memory_put.lua`: stores item `key` of `namespace` with `value` (a JSON object), its
/// `vectors` (a JSON object, or "" for none) and a TTL in whole minutes.
pub fn memory_put(
    ns: &Keys,
    namespace: &str,
    key: &str,
    value: &str,
    vectors: &str,
    ttl_minutes: Option<u64>,
    limit: usize,
) -> ScriptCall {
    let p = ns.memory_partition(namespace);
    ScriptCall::new(
        &MEMORY_PUT,
        &memory_keys(ns, namespace, p).each_ref().map(String::as_str),
    )
    .arg(namespace)
    .arg(key)
    .arg(value)
    .arg(vectors)
    .arg(ttl_minutes.map(|m| m.to_string()).unwrap_or_default())
    .arg(limit)
}

/// `memory_delete.lua`: removes items `keys` (at least one) of `namespace`.
pub fn memory_delete(ns: &Keys, namespace: &str, keys: &[&str]) -> ScriptCall {
    per_item(&MEMORY_DELETE, ns, namespace, keys)
}

/// `memory_expire.lua`: removes items `keys` of `namespace` whose TTL ran out.
pub fn memory_expire(ns: &Keys, namespace: &str, keys: &[&str]) -> ScriptCall {
    per_item(&MEMORY_EXPIRE, ns, namespace, keys)
}

/// `memory_refresh.lua`: moves the expiry of items `keys` of `namespace` that have a TTL to
/// now + that TTL.
pub fn memory_refresh(ns: &Keys, namespace: &str, keys: &[&str]) -> ScriptCall {
    per_item(&MEMORY_REFRESH, ns, namespace, keys)
}

/// A call of `script` (delete, expire or refresh) on items `keys` of `namespace`.
fn per_item(script: &'static Loaded, ns: &Keys, namespace: &str, keys: &[&str]) -> ScriptCall {
    let p = ns.memory_partition(namespace);
    let mut call = ScriptCall::new(
        script,
        &memory_keys(ns, namespace, p).each_ref().map(String::as_str),
    )
    .arg(namespace);
    for key in keys {
        call = call.arg(*key);
    }
    call
}

/// The five keys the put, delete, expire and refresh scripts take, in their order.
fn memory_keys(ns: &Keys, namespace: &str, p: u32) -> [String; 5] {
    [
        ns.memory(namespace),
        ns.memory_namespaces(p),
        ns.memory_expiry(p),
        ns.wal(p),
        ns.committed(p),
    ]
}

/// `memory_forget.lua`: erases `namespaces` (texts) of partition `p`, which name `user` at
/// label position `label`, and logs the erasure.
pub fn memory_forget(
    ns: &Keys,
    p: u32,
    user: &str,
    label: usize,
    namespaces: &[String],
) -> ScriptCall {
    let mut keys = vec![ns.memory_namespaces(p), ns.memory_expiry(p), ns.wal(p)];
    keys.extend(namespaces.iter().map(|n| ns.memory(n)));
    keys.push(ns.committed(p));
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut call = ScriptCall::new(&MEMORY_FORGET, &keys).arg(user).arg(label);
    for n in namespaces {
        call = call.arg(n);
    }
    call
}
