//! Long-term memory: what agents remember across sessions (a user's preferences, facts, past
//! episodes), shared by every process on the namespace. An item is a namespace path (a tuple
//! of labels), a key and a JSON object, with the times it was created and updated, an
//! optional TTL in minutes and, for the fields a caller indexes, the embedding vectors that
//! caller computed.
//!
//! Items live in Redis, one hash per namespace (`Keys::memory`), and reach the durable tier
//! through the wal and the spill daemon as user values do: the wal carries a reference
//! (namespace, key), never the item. After a Redis loss the daemon puts them back.
//!
//! Search runs in the agent process over the items it reads: the namespaces under a prefix
//! (from each partition's namespace set), every item of each, filtered, then ranked by exact
//! cosine similarity of the caller's query vector with the item's vectors (the best of its
//! fields). Agents still need only Redis; its cost is linear in the items under the prefix
//! (docs/architecture-memory.md).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{within_limit, Error, Result};
use crate::scripts;
use crate::store::Store;

/// Most labels in a namespace path.
pub const MAX_NAMESPACE_DEPTH: usize = 16;

/// Longest namespace label and item key, bytes.
pub const MAX_LABEL_BYTES: usize = 256;

/// One long-term memory item, as read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryItem {
    /// Its namespace path.
    pub namespace: Vec<String>,
    /// Its key within the namespace.
    pub key: String,
    /// The stored JSON object.
    pub value: Map<String, Value>,
    /// When it was first put, ms since the epoch (Redis' clock).
    pub created_at: i64,
    /// When it was last put, ms since the epoch.
    pub updated_at: i64,
    /// When it expires, ms since the epoch (`None`: never).
    pub expires_at: Option<i64>,
    /// Its TTL, minutes (`None`: none).
    pub ttl_minutes: Option<u64>,
    /// Its similarity to a search's query vector (`None` outside a ranked search, or for an
    /// item without vectors).
    pub score: Option<f64>,
}

/// A record as `lua/memory_put.lua` stores it.
#[derive(Deserialize)]
struct Record {
    created_at: i64,
    updated_at: i64,
    expires_at: Option<i64>,
    ttl: Option<u64>,
    value: Map<String, Value>,
    vectors: Option<BTreeMap<String, Vec<f64>>>,
}

/// What to put: the value, and optionally its vectors and TTL.
#[derive(Debug, Clone, Default)]
pub struct NewMemoryItem {
    /// The JSON object to store.
    pub value: Map<String, Value>,
    /// Embedding vectors by indexed field, computed by the caller (empty: none).
    pub vectors: BTreeMap<String, Vec<f32>>,
    /// TTL in whole minutes (`None`: the item does not expire).
    pub ttl_minutes: Option<u64>,
}

/// A comparison of a search filter (`{"field": {"$gt": 3}}`); a bare value is `$eq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterOp {
    /// `$eq`
    Eq,
    /// `$ne`
    Ne,
    /// `$gt`
    Gt,
    /// `$gte`
    Gte,
    /// `$lt`
    Lt,
    /// `$lte`
    Lte,
}

impl FilterOp {
    fn parse(op: &str) -> Result<FilterOp> {
        Ok(match op {
            "$eq" => FilterOp::Eq,
            "$ne" => FilterOp::Ne,
            "$gt" => FilterOp::Gt,
            "$gte" => FilterOp::Gte,
            "$lt" => FilterOp::Lt,
            "$lte" => FilterOp::Lte,
            other => {
                return Err(Error::InvalidInput(format!(
                    "unknown filter operator {other:?}: use $eq, $ne, $gt, $gte, $lt or $lte"
                )))
            }
        })
    }
}

/// A search over the items under a namespace prefix.
#[derive(Debug, Clone, Default)]
pub struct MemorySearch {
    /// Namespace prefix (empty: every namespace).
    pub prefix: Vec<String>,
    /// Field conditions on the item's value: `{"field": value}` (equality) or
    /// `{"field": {"$op": value, ...}}`.
    pub filter: Map<String, Value>,
    /// A query vector: results are ranked by cosine similarity with it, best first.
    pub query: Option<Vec<f32>>,
    /// Most results (0: 10).
    pub limit: usize,
    /// Results skipped first.
    pub offset: usize,
    /// Whether each result with a TTL expires that TTL from now (in both tiers).
    pub refresh_ttl: bool,
}

/// A listing of namespaces.
#[derive(Debug, Clone, Default)]
pub struct NamespaceListing {
    /// Only namespaces starting with these labels (`*` matches any one label).
    pub prefix: Vec<String>,
    /// Only namespaces ending with these labels (`*` matches any one label).
    pub suffix: Vec<String>,
    /// Namespaces cut to this many labels, then deduplicated.
    pub max_depth: Option<usize>,
    /// Most namespaces (0: 100).
    pub limit: usize,
    /// Namespaces skipped first.
    pub offset: usize,
}

/// Checks a namespace path and returns its text (labels joined by `.`).
pub fn namespace_text<S: AsRef<str>>(namespace: &[S]) -> Result<String> {
    if namespace.is_empty() || namespace.len() > MAX_NAMESPACE_DEPTH {
        return Err(Error::InvalidInput(format!(
            "a memory namespace has 1 to {MAX_NAMESPACE_DEPTH} labels, not {}",
            namespace.len()
        )));
    }
    for label in namespace {
        check_label("namespace label", label.as_ref())?;
        if label.as_ref().contains('.') {
            return Err(Error::InvalidInput(format!(
                "memory namespace label {:?} contains '.': labels are joined by '.'",
                label.as_ref()
            )));
        }
    }
    Ok(namespace
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join("."))
}

/// Checks an item key or a label: 1 to [`MAX_LABEL_BYTES`] bytes, no control character.
fn check_label(what: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.len() > MAX_LABEL_BYTES || s.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!(
            "memory {what} {:?} must be 1 to {MAX_LABEL_BYTES} bytes without control characters",
            s.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}

impl Store {
    /// Stores `item` under `key` in `namespace`, replacing what was there (its creation
    /// time stays).
    pub async fn put_memory<S: AsRef<str>>(
        &self,
        namespace: &[S],
        key: &str,
        item: &NewMemoryItem,
    ) -> Result<()> {
        let ns = namespace_text(namespace)?;
        check_label("item key", key)?;
        let value = serde_json::to_string(&item.value)?;
        let vectors = if item.vectors.is_empty() {
            String::new()
        } else {
            if let Some((field, _)) = item
                .vectors
                .iter()
                .find(|(_, v)| v.is_empty() || v.iter().any(|x| !x.is_finite()))
            {
                return Err(Error::InvalidInput(format!(
                    "the vector of field {field:?} is empty or holds a number that is not finite"
                )));
            }
            serde_json::to_string(&item.vectors)?
        };
        let limit = self.config().limits.state;
        within_limit("memory item", value.len() + vectors.len(), limit)?;
        let call = scripts::memory_put(
            self.keys(),
            &ns,
            key,
            &value,
            &vectors,
            item.ttl_minutes,
            limit,
        );
        let wal_id: String = self.invoke(&call).await?;
        self.settle(self.keys().memory_partition(&ns), &wal_id)
            .await
    }

    /// The item under `key` in `namespace`, unless absent or expired. With `refresh_ttl`, an
    /// item with a TTL expires that TTL from now (in both tiers).
    pub async fn get_memory<S: AsRef<str>>(
        &self,
        namespace: &[S],
        key: &str,
        refresh_ttl: bool,
    ) -> Result<Option<MemoryItem>> {
        let ns = namespace_text(namespace)?;
        check_label("item key", key)?;
        let mut conn = self.conn().await?;
        let record: Option<String> = redis::cmd("HGET")
            .arg(self.keys().memory(&ns))
            .arg(key)
            .query_async(&mut conn)
            .await?;
        let now = now_ms();
        let Some(text) = record else {
            return Ok(None);
        };
        let (it, _) = item(&ns, key, &text)?;
        if it.expires_at.is_some_and(|at| at <= now) {
            return Ok(None);
        }
        let mut found = [it];
        if refresh_ttl {
            self.refresh_memory_ttl(&mut found).await?;
        }
        let [it] = found;
        Ok(Some(it))
    }

    /// Removes the item under `key` in `namespace` (absent: nothing changes in Redis; the
    /// durable tier deletes its row if it has one).
    pub async fn delete_memory<S: AsRef<str>>(&self, namespace: &[S], key: &str) -> Result<()> {
        let ns = namespace_text(namespace)?;
        check_label("item key", key)?;
        let call = scripts::memory_delete(self.keys(), &ns, &[key]);
        let wal_id: String = self.invoke(&call).await?;
        self.settle(self.keys().memory_partition(&ns), &wal_id)
            .await
    }

    /// The items under `search.prefix` that pass its filter, ranked by similarity to its
    /// query vector when it has one (items without vectors last), else the most recently
    /// updated first; then `offset` and `limit`.
    pub async fn search_memory(&self, search: &MemorySearch) -> Result<Vec<MemoryItem>> {
        if !search.prefix.is_empty() {
            namespace_text(&search.prefix)?;
        }
        let conditions = conditions(&search.filter)?;
        let namespaces: Vec<String> = self
            .memory_namespaces()
            .await?
            .into_iter()
            .filter(|ns| has_prefix(&labels(ns), &search.prefix, false))
            .collect();
        let mut found = Vec::new();
        if !namespaces.is_empty() {
            // Namespaces hash to their partitions' slots: fan_out reaches each on a cluster.
            let reads = namespaces
                .iter()
                .map(|ns| redis::cmd("HGETALL").arg(self.keys().memory(ns)).clone())
                .collect();
            let hashes: Vec<Vec<(String, String)>> = self.fan_out(reads).await?;
            let now = now_ms();
            for (ns, fields) in namespaces.iter().zip(hashes) {
                for (key, text) in fields {
                    let (mut it, vectors) = item(ns, &key, &text)?;
                    if it.expires_at.is_some_and(|at| at <= now)
                        || !conditions.iter().all(|c| c.holds(&it.value))
                    {
                        continue;
                    }
                    if let Some(q) = &search.query {
                        it.score = vectors
                            .values()
                            .filter_map(|v| cosine(q, v))
                            .max_by(|a, b| a.total_cmp(b));
                    }
                    found.push(it);
                }
            }
        }
        if search.query.is_some() {
            found.sort_by(|a, b| match (a.score, b.score) {
                (Some(x), Some(y)) => y.total_cmp(&x),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => b.updated_at.cmp(&a.updated_at),
            });
        } else {
            found.sort_by(|a, b| {
                b.updated_at
                    .cmp(&a.updated_at)
                    .then_with(|| (&a.namespace, &a.key).cmp(&(&b.namespace, &b.key)))
            });
        }
        let limit = if search.limit == 0 { 10 } else { search.limit };
        let mut page: Vec<MemoryItem> = found.into_iter().skip(search.offset).take(limit).collect();
        if search.refresh_ttl {
            self.refresh_memory_ttl(&mut page).await?;
        }
        Ok(page)
    }

    /// Moves the expiry of `items` that have a TTL to now + that TTL, one script call a
    /// namespace, and updates their `expires_at` as it did. An item that expired or went
    /// meanwhile keeps what was read.
    async fn refresh_memory_ttl(&self, items: &mut [MemoryItem]) -> Result<()> {
        let mut by_namespace: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, it) in items.iter().enumerate() {
            if it.ttl_minutes.is_some() {
                by_namespace
                    .entry(namespace_text(&it.namespace)?)
                    .or_default()
                    .push(i);
            }
        }
        for (ns, indexes) in by_namespace {
            let keys: Vec<&str> = indexes.iter().map(|&i| items[i].key.as_str()).collect();
            let call = scripts::memory_refresh(self.keys(), &ns, &keys);
            let (wal_id, expiries): (String, Vec<i64>) = self.invoke(&call).await?;
            for (&i, at) in indexes.iter().zip(expiries) {
                if at > 0 {
                    items[i].expires_at = Some(at);
                }
            }
            if !wal_id.is_empty() {
                self.settle(self.keys().memory_partition(&ns), &wal_id)
                    .await?;
            }
        }
        Ok(())
    }

    /// The namespaces that hold items, filtered and cut as `listing` says, sorted.
    pub async fn list_memory_namespaces(
        &self,
        listing: &NamespaceListing,
    ) -> Result<Vec<Vec<String>>> {
        let mut out = BTreeSet::new();
        for ns in self.memory_namespaces().await? {
            let mut path = labels(&ns);
            if !has_prefix(&path, &listing.prefix, true) || !has_suffix(&path, &listing.suffix) {
                continue;
            }
            if let Some(depth) = listing.max_depth {
                path.truncate(depth);
            }
            out.insert(path);
        }
        let limit = if listing.limit == 0 {
            100
        } else {
            listing.limit
        };
        Ok(out.into_iter().skip(listing.offset).take(limit).collect())
    }

    /// Erases every memory namespace whose label at position `label` (0: the first) is
    /// `user`, in Redis now and in the durable tier when the daemon applies the wal record
    /// (which erases by the same rule there, namespaces Redis lacked included). Returns the
    /// namespaces erased from Redis, sorted. A namespace created for the user while this runs
    /// is a later write and stays.
    pub async fn forget_user_memory(&self, user: &str, label: usize) -> Result<Vec<Vec<String>>> {
        crate::keys::validate_id("user", user)?;
        let keys = self.keys();
        let sets = self.memory_namespace_sets().await?;
        let home = keys.partition(user);
        let mut erased = Vec::new();
        for (p, set) in (0..).zip(sets) {
            let mine: Vec<String> = set
                .into_iter()
                .filter(|ns| names_user(ns, user, label))
                .collect();
            // The user's own partition always logs the erasure, for the durable tier.
            if mine.is_empty() && p != home {
                continue;
            }
            let call = scripts::memory_forget(keys, p, user, label, &mine);
            let wal_id: String = self.invoke(&call).await?;
            self.settle(p, &wal_id).await?;
            erased.extend(mine.iter().map(|ns| labels(ns)));
        }
        erased.sort();
        Ok(erased)
    }

    /// Every namespace text that holds items, from each partition's namespace set.
    async fn memory_namespaces(&self) -> Result<Vec<String>> {
        Ok(self
            .memory_namespace_sets()
            .await?
            .into_iter()
            .flatten()
            .collect())
    }

    /// Each partition's namespace set, in partition order (through `fan_out`: the sets live
    /// in their partitions' slots, on different nodes of a cluster).
    async fn memory_namespace_sets(&self) -> Result<Vec<Vec<String>>> {
        let reads = (0..self.keys().partitions())
            .map(|p| {
                redis::cmd("SMEMBERS")
                    .arg(self.keys().memory_namespaces(p))
                    .clone()
            })
            .collect();
        self.fan_out(reads).await
    }
}

/// An item of namespace text `ns` from its stored record, with its vectors.
fn item(ns: &str, key: &str, text: &str) -> Result<(MemoryItem, BTreeMap<String, Vec<f64>>)> {
    let r: Record = serde_json::from_str(text).map_err(|e| Error::MalformedJson {
        what: "memory item record",
        detail: e.to_string(),
    })?;
    Ok((
        MemoryItem {
            namespace: labels(ns),
            key: key.to_string(),
            value: r.value,
            created_at: r.created_at,
            updated_at: r.updated_at,
            expires_at: r.expires_at,
            ttl_minutes: r.ttl,
            score: None,
        },
        r.vectors.unwrap_or_default(),
    ))
}

/// Whether namespace text `namespace` (labels joined by `.`) has `user` as its label at
/// position `label`: the rule a memory erasure goes by, in both tiers.
pub(crate) fn names_user(namespace: &str, user: &str, label: usize) -> bool {
    namespace.split('.').nth(label) == Some(user)
}

fn labels(ns: &str) -> Vec<String> {
    ns.split('.').map(str::to_string).collect()
}

/// Whether `path` starts with `prefix` (`*` in it matching any one label when `wildcards`).
fn has_prefix(path: &[String], prefix: &[String], wildcards: bool) -> bool {
    prefix.len() <= path.len()
        && prefix
            .iter()
            .zip(path)
            .all(|(want, got)| want == got || (wildcards && want == "*"))
}

/// Whether `path` ends with `suffix` (`*` matching any one label).
fn has_suffix(path: &[String], suffix: &[String]) -> bool {
    suffix.len() <= path.len()
        && suffix
            .iter()
            .rev()
            .zip(path.iter().rev())
            .all(|(want, got)| want == got || want == "*")
}

/// One condition of a filter: the value's `field` compared by `op` with `operand`.
struct Condition {
    field: String,
    op: FilterOp,
    operand: Value,
}

fn conditions(filter: &Map<String, Value>) -> Result<Vec<Condition>> {
    let mut out = Vec::new();
    for (field, spec) in filter {
        match spec {
            Value::Object(ops) if ops.keys().any(|k| k.starts_with('$')) => {
                for (op, operand) in ops {
                    out.push(Condition {
                        field: field.clone(),
                        op: FilterOp::parse(op)?,
                        operand: operand.clone(),
                    });
                }
            }
            other => out.push(Condition {
                field: field.clone(),
                op: FilterOp::Eq,
                operand: other.clone(),
            }),
        }
    }
    Ok(out)
}

impl Condition {
    fn holds(&self, value: &Map<String, Value>) -> bool {
        let got = value.get(&self.field);
        match self.op {
            FilterOp::Eq => got == Some(&self.operand),
            FilterOp::Ne => got != Some(&self.operand),
            op => got
                .and_then(|g| order(g, &self.operand))
                .is_some_and(|o| match op {
                    FilterOp::Gt => o == Ordering::Greater,
                    FilterOp::Gte => o != Ordering::Less,
                    FilterOp::Lt => o == Ordering::Less,
                    _ => o != Ordering::Greater,
                }),
        }
    }
}

/// How two JSON values order: numbers by value, strings by bytes; `None` across kinds.
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// Cosine similarity of `q` and `v`, `None` when their lengths differ or either is zero.
fn cosine(q: &[f32], v: &[f64]) -> Option<f64> {
    if q.len() != v.len() {
        return None;
    }
    let (mut dot, mut nq, mut nv) = (0.0, 0.0, 0.0);
    for (a, b) in q.iter().zip(v) {
        let a = f64::from(*a);
        dot += a * b;
        nq += a * a;
        nv += b * b;
    }
    (nq > 0.0 && nv > 0.0).then(|| dot / (nq.sqrt() * nv.sqrt()))
}

/// This process' clock, ms since the epoch: what expiry is judged by on reads (items are
/// stamped by Redis' clock; a skew of the two shifts expiry by as much).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn namespaces_are_checked_and_joined() {
        assert_eq!(
            namespace_text(&["users", "u1", "prefs"]).unwrap(),
            "users.u1.prefs"
        );
        assert!(namespace_text::<&str>(&[]).is_err());
        assert!(namespace_text(&["a.b"]).is_err());
        assert!(namespace_text(&[""]).is_err());
        assert!(namespace_text(&["a\nb"]).is_err());
        assert!(namespace_text(&vec!["x"; MAX_NAMESPACE_DEPTH + 1]).is_err());
    }

    #[test]
    fn filters_compare_as_langgraph_does() {
        let v = obj(json!({"n": 5, "s": "b", "t": true}));
        let holds = |f: Value| conditions(&obj(f)).unwrap().iter().all(|c| c.holds(&v));
        assert!(holds(json!({"n": 5, "t": true})));
        assert!(!holds(json!({"n": 4})));
        assert!(holds(json!({"n": {"$gt": 4, "$lte": 5}})));
        assert!(!holds(json!({"n": {"$lt": 5}})));
        assert!(holds(json!({"s": {"$gte": "a", "$ne": "c"}})));
        assert!(!holds(json!({"missing": {"$gt": 1}})));
        assert!(holds(json!({"missing": {"$ne": 1}})));
        assert!(conditions(&obj(json!({"n": {"$in": [1]}}))).is_err());
    }

    #[test]
    fn cosine_ranks_by_angle_not_length() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]).unwrap() - 1.0).abs() < 1e-9);
        assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).unwrap().abs() < 1e-9);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn prefixes_and_suffixes_match_labels_with_wildcards() {
        let path = labels("users.u1.prefs");
        let l = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(has_prefix(&path, &l(&["users"]), false));
        assert!(has_prefix(&path, &l(&["users", "*"]), true));
        assert!(!has_prefix(&path, &l(&["users", "*"]), false));
        assert!(has_suffix(&path, &l(&["*", "prefs"])));
        assert!(!has_suffix(&path, &l(&["u1"])));
    }
}
