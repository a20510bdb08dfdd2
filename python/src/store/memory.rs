//! Long-term memory items: put, get, delete, search, list namespaces.

use std::collections::BTreeMap;

use agentstate::{MemoryItem, MemorySearch, NamespaceListing, NewMemoryItem};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use super::*;
use crate::convert::{json_to_py, ToDict};

/// The dict of one item: `namespace` (a tuple), `key`, `value`, `created_at` and
/// `updated_at` (ms since the epoch, Redis' clock), `expires_at` (ms or None),
/// `ttl_minutes` (or None) and `score` (None outside a ranked search).
impl ToDict for MemoryItem {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "namespace"), PyTuple::new(py, &self.namespace)?)?;
        d.set_item(intern!(py, "key"), &self.key)?;
        let value = PyDict::new(py);
        for (k, v) in &self.value {
            value.set_item(k, json_to_py(py, v)?)?;
        }
        d.set_item(intern!(py, "value"), value)?;
        d.set_item(intern!(py, "created_at"), self.created_at)?;
        d.set_item(intern!(py, "updated_at"), self.updated_at)?;
        d.set_item(intern!(py, "expires_at"), self.expires_at)?;
        d.set_item(intern!(py, "ttl_minutes"), self.ttl_minutes)?;
        d.set_item(intern!(py, "score"), self.score)?;
        Ok(d)
    }
}

/// A namespace path argument `name`: a tuple or list of str (a str alone is refused: its
/// characters would be the labels).
fn labels(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let refuse = || {
        PyTypeError::new_err(format!(
            "{name} must be a tuple or list of str, got {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string())
        ))
    };
    let items: Vec<Bound<'_, PyAny>> = if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else {
        return Err(refuse());
    };
    items
        .iter()
        .map(|x| {
            x.cast::<PyString>()
                .map_err(|_| refuse())
                .and_then(|s| Ok(s.to_cow()?.into_owned()))
        })
        .collect()
}

/// A vector argument `name`: a sequence of numbers.
fn vector(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a list of numbers, got str"
        )));
    }
    obj.extract::<Vec<f32>>()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a list of numbers")))
}

/// The `vectors` argument: a dict of field name to vector.
fn vectors(obj: Option<&Bound<'_, PyAny>>) -> PyResult<BTreeMap<String, Vec<f32>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(BTreeMap::new());
    };
    let d = obj.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err("vectors must be a dict of field name to list of numbers")
    })?;
    d.iter()
        .map(|(k, v)| {
            let field = k
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("vectors' keys must be str (field names)"))?
                .to_cow()?
                .into_owned();
            let v = vector(&format!("vectors[{field:?}]"), &v)?;
            Ok((field, v))
        })
        .collect()
}

twins! {
    impl PyStore;

    /// Stores `value` (a dict) under `key` in `namespace` (a tuple of str), replacing what
    /// was there (its `created_at` stays). `vectors`: embedding vectors by indexed field,
    /// computed by the caller, that `search_memory`'s `query` ranks by; `ttl_minutes`: the
    /// item expires that many whole minutes after this put (None: never).
    #[pyo3(signature = (namespace, key, value, *, vectors = None, ttl_minutes = None))]
    fn put_memory / aput_memory(
        self,
        py,
        namespace: Bound<'_, PyAny>,
        key: String,
        value: Bound<'_, PyAny>,
        vectors: Option<Bound<'_, PyAny>>,
        ttl_minutes: Option<Whole<'_>>,
    ) -> () {
        let ns = labels("namespace", &namespace)?;
        let item = NewMemoryItem {
            value: json_object("value", Some(&value))?
                .ok_or_else(|| PyTypeError::new_err("value must be a dict"))?,
            vectors: self::vectors(vectors.as_ref())?,
            ttl_minutes: opt(&ttl_minutes, "ttl_minutes")?,
        };
        let s = self.s(py)?;
        async move { s.put_memory(&ns, &key, &item).await }
    }

    /// The item under `key` in `namespace` as a dict (see `search_memory`), or None when
    /// absent or expired. `refresh_ttl`: an item with a TTL expires that TTL from now.
    #[pyo3(signature = (namespace, key, *, refresh_ttl = false))]
    fn get_memory / aget_memory(
        self,
        py,
        namespace: Bound<'_, PyAny>,
        key: String,
        refresh_ttl: bool,
    ) -> OptDict<MemoryItem> {
        let ns = labels("namespace", &namespace)?;
        let s = self.s(py)?;
        async move { s.get_memory(&ns, &key, refresh_ttl).await.map(OptDict) }
    }

    /// Removes the item under `key` in `namespace` (absent: nothing to do).
    #[pyo3(signature = (namespace, key))]
    fn delete_memory / adelete_memory(
        self,
        py,
        namespace: Bound<'_, PyAny>,
        key: String,
    ) -> () {
        let ns = labels("namespace", &namespace)?;
        let s = self.s(py)?;
        async move { s.delete_memory(&ns, &key).await }
    }

    /// The items under namespace `prefix` (empty: all) whose value passes `filter`
    /// (`{"field": value}` or `{"field": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}}` on
    /// top-level fields), ranked by cosine similarity with the `query` vector (best field
    /// first; items without vectors last) or, without one, newest update first; then
    /// `offset` and `limit` (0: 10). Each a dict: `namespace` (tuple), `key`, `value`,
    /// `created_at`, `updated_at` (ms since the epoch), `expires_at`, `ttl_minutes`, `score`.
    /// `refresh_ttl`: the returned items with a TTL expire that TTL from now.
    #[pyo3(signature = (prefix = None, *, filter = None, query = None, limit = None, offset = None, refresh_ttl = false))]
    fn search_memory / asearch_memory(
        self,
        py,
        prefix: Option<Bound<'_, PyAny>>,
        filter: Option<Bound<'_, PyAny>>,
        query: Option<Bound<'_, PyAny>>,
        limit: Option<Whole<'_>>,
        offset: Option<Whole<'_>>,
        refresh_ttl: bool,
    ) -> Dicts<MemoryItem> {
        let search = MemorySearch {
            prefix: prefix.as_ref().map(|p| labels("prefix", p)).transpose()?.unwrap_or_default(),
            filter: json_object("filter", filter.as_ref())?.unwrap_or_default(),
            query: query.as_ref().filter(|q| !q.is_none()).map(|q| vector("query", q)).transpose()?,
            limit: opt(&limit, "limit")?.unwrap_or(10),
            offset: opt(&offset, "offset")?.unwrap_or(0),
            refresh_ttl,
        };
        let s = self.s(py)?;
        async move { s.search_memory(&search).await.map(Dicts) }
    }

    /// The namespaces holding items (tuples, sorted) that start with `prefix` and end with
    /// `suffix` (`"*"` matches any one label), cut to `max_depth` labels and deduplicated;
    /// then `offset` and `limit` (0: 100).
    #[pyo3(signature = (*, prefix = None, suffix = None, max_depth = None, limit = None, offset = None))]
    fn list_memory_namespaces / alist_memory_namespaces(
        self,
        py,
        prefix: Option<Bound<'_, PyAny>>,
        suffix: Option<Bound<'_, PyAny>>,
        max_depth: Option<Whole<'_>>,
        limit: Option<Whole<'_>>,
        offset: Option<Whole<'_>>,
    ) -> Vec<Namespace> {
        let listing = NamespaceListing {
            prefix: prefix.as_ref().map(|p| labels("prefix", p)).transpose()?.unwrap_or_default(),
            suffix: suffix.as_ref().map(|p| labels("suffix", p)).transpose()?.unwrap_or_default(),
            max_depth: opt(&max_depth, "max_depth")?,
            limit: opt(&limit, "limit")?.unwrap_or(100),
            offset: opt(&offset, "offset")?.unwrap_or(0),
        };
        let s = self.s(py)?;
        async move {
            let found = s.list_memory_namespaces(&listing).await?;
            Ok(found.into_iter().map(Namespace).collect())
        }
    }
}

/// A namespace path on its way to Python as a tuple of str.
pub struct Namespace(Vec<String>);

impl<'py> IntoPyObject<'py> for Namespace {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        PyTuple::new(py, self.0)
    }
}
