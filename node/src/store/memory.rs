//! Long-term memory items (the storage of the LangGraph.js `AgentStateStore`): put, get,
//! delete, search, list namespaces. The records are the core's, so the Python store reads
//! what this one writes. Arguments arrive as JSON and are checked here, so a wrong one is
//! refused with its name rather than napi's conversion message.

use std::collections::BTreeMap;

use agentstate::{MemorySearch, NamespaceListing, NewMemoryItem};
use serde_json::Map;

use super::*;

/// `name` as a list of strings (a namespace path or its pattern).
fn strings(name: &str, v: Value) -> Result<Vec<String>> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, s)| match s {
                Value::String(s) => Ok(s),
                other => Err(errors::invalid(format!(
                    "{name}[{i}] must be a string, not {other}"
                ))),
            })
            .collect(),
        other => Err(errors::invalid(format!(
            "{name} must be an array of strings, not {other}"
        ))),
    }
}

/// `name` as a string.
fn string(name: &str, v: Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(errors::invalid(format!(
            "{name} must be a string, not {other}"
        ))),
    }
}

/// `name` as a JSON object.
fn object(name: &str, v: Value) -> Result<Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(errors::invalid(format!(
            "{name} must be a JSON object, not {other}"
        ))),
    }
}

/// The options object `name`, its keys checked against `known` (a misspelt option is refused,
/// not ignored).
fn options(name: &str, v: Option<Value>, known: &[&str]) -> Result<Map<String, Value>> {
    let m = match v {
        None | Some(Value::Null) => Map::new(),
        Some(v) => object(name, v)?,
    };
    if let Some(k) = m.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(errors::invalid(format!(
            "{name} has no option {k:?}: use {}",
            known.join(", ")
        )));
    }
    Ok(m)
}

/// A non-negative integer option (absent or null: `None`).
fn count(name: &str, v: Option<&Value>) -> Result<Option<u64>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => whole(name, n.as_f64().unwrap_or(f64::NAN)).map(Some),
        Some(other) => Err(errors::invalid(format!(
            "{name} must be a non-negative integer, not {other}"
        ))),
    }
}

/// A boolean option (absent or null: false).
fn flag(name: &str, v: Option<&Value>) -> Result<bool> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(errors::invalid(format!(
            "{name} must be true or false, not {other}"
        ))),
    }
}

/// A vector of finite numbers.
fn vector(name: &str, v: Value) -> Result<Vec<f32>> {
    let bad = || errors::invalid(format!("{name} must be an array of finite numbers"));
    match v {
        Value::Array(xs) => xs
            .iter()
            .map(|x| {
                x.as_f64()
                    .filter(|f| f.is_finite())
                    .map(|f| f as f32)
                    .ok_or_else(bad)
            })
            .collect(),
        _ => Err(bad()),
    }
}

#[napi]
impl NativeStore {
    /// Stores `value` (a JSON object) under `key` in `namespace`, replacing what was there
    /// (its creation time stays); `options`: `vectors` (field -> embedding, computed by the
    /// caller) and `ttlMinutes`.
    #[napi]
    pub async fn put_memory(
        &self,
        namespace: Value,
        key: Value,
        value: Value,
        options: Option<Value>,
    ) -> Result<()> {
        let namespace = strings("namespace", namespace)?;
        let key = string("key", key)?;
        let mut o = self::options("options", options, &["vectors", "ttlMinutes"])?;
        let mut vectors = BTreeMap::new();
        match o.remove("vectors") {
            None | Some(Value::Null) => {}
            Some(v) => {
                for (field, v) in object("options.vectors", v)? {
                    let x = vector(&format!("options.vectors[{field:?}]"), v)?;
                    vectors.insert(field, x);
                }
            }
        }
        let item = NewMemoryItem {
            value: object("value", value)?,
            vectors,
            ttl_minutes: count("options.ttlMinutes", o.get("ttlMinutes"))?,
        };
        self.store
            .put_memory(&namespace, &key, &item)
            .await
            .map_err(|e| self.fail(e))
    }

    /// The item under `key` in `namespace` (`{ namespace, key, value, createdAt, updatedAt,
    /// expiresAt, ttlMinutes }`, times in ms since the epoch), or null when absent or expired;
    /// `options.refreshTtl`: an item with a TTL expires that TTL from now.
    #[napi]
    pub async fn get_memory(
        &self,
        namespace: Value,
        key: Value,
        options: Option<Value>,
    ) -> Result<Option<Value>> {
        let namespace = strings("namespace", namespace)?;
        let key = string("key", key)?;
        let o = self::options("options", options, &["refreshTtl"])?;
        let refresh = flag("options.refreshTtl", o.get("refreshTtl"))?;
        let item = self
            .store
            .get_memory(&namespace, &key, refresh)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(item.map(|i| js(&i)))
    }

    /// Removes the item under `key` in `namespace` (absent: nothing to do).
    #[napi]
    pub async fn delete_memory(&self, namespace: Value, key: Value) -> Result<()> {
        let namespace = strings("namespace", namespace)?;
        let key = string("key", key)?;
        self.store
            .delete_memory(&namespace, &key)
            .await
            .map_err(|e| self.fail(e))
    }

    /// The items under `prefix` that pass `filter`, ranked by cosine similarity to `query`
    /// (a vector; each result's `score`) or newest first, then `offset` and `limit` (10);
    /// `refreshTtl`: each result with a TTL expires that TTL from now.
    #[napi]
    pub async fn search_memory(&self, search: Option<Value>) -> Result<Vec<Value>> {
        let mut o = options(
            "search",
            search,
            &["prefix", "filter", "query", "limit", "offset", "refreshTtl"],
        )?;
        let mut s = MemorySearch {
            limit: count("search.limit", o.get("limit"))?.unwrap_or(10) as usize,
            offset: count("search.offset", o.get("offset"))?.unwrap_or(0) as usize,
            refresh_ttl: flag("search.refreshTtl", o.get("refreshTtl"))?,
            ..MemorySearch::default()
        };
        if s.limit == 0 {
            return Ok(Vec::new());
        }
        if let Some(p) = o.remove("prefix").filter(|v| !v.is_null()) {
            s.prefix = strings("search.prefix", p)?;
        }
        if let Some(f) = o.remove("filter").filter(|v| !v.is_null()) {
            s.filter = object("search.filter", f)?;
        }
        if let Some(q) = o.remove("query").filter(|v| !v.is_null()) {
            s.query = Some(vector("search.query", q)?);
        }
        let found = self
            .store
            .search_memory(&s)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(found.iter().map(js).collect())
    }

    /// The namespaces holding items, sorted: only those starting with `prefix` and ending
    /// with `suffix` (`*` matches any one label), cut to `maxDepth` labels and
    /// deduplicated, then `offset` and `limit` (100).
    #[napi]
    pub async fn list_memory_namespaces(&self, listing: Option<Value>) -> Result<Vec<Vec<String>>> {
        let mut o = options(
            "listing",
            listing,
            &["prefix", "suffix", "maxDepth", "limit", "offset"],
        )?;
        let mut l = NamespaceListing {
            max_depth: count("listing.maxDepth", o.get("maxDepth"))?.map(|d| d as usize),
            limit: count("listing.limit", o.get("limit"))?.unwrap_or(100) as usize,
            offset: count("listing.offset", o.get("offset"))?.unwrap_or(0) as usize,
            ..NamespaceListing::default()
        };
        if l.limit == 0 {
            return Ok(Vec::new());
        }
        if let Some(p) = o.remove("prefix").filter(|v| !v.is_null()) {
            l.prefix = strings("listing.prefix", p)?;
        }
        if let Some(p) = o.remove("suffix").filter(|v| !v.is_null()) {
            l.suffix = strings("listing.suffix", p)?;
        }
        self.store
            .list_memory_namespaces(&l)
            .await
            .map_err(|e| self.fail(e))
    }
}
