//! Conversions between Python objects and JSON values / agentstate types, done under the GIL
//! after the Redis I/O (the I/O itself runs with the GIL released).

use agentstate::Message;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// A JSON value on its way to Python (converted when the awaitable or the call completes).
pub struct Json(pub Value);

/// Optional JSON: `None` becomes Python `None`.
pub struct OptJson(pub Option<Value>);

/// A value Python receives as a dict built field by field, not through a serde_json tree
/// (hot paths: messages, graph tuples).
pub trait ToDict {
    /// Its dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>>;
}

/// Values on their way to Python as a list of their dicts.
pub struct Dicts<T>(pub Vec<T>);

/// A value on its way to Python as its dict, or `None`.
pub struct OptDict<T>(pub Option<T>);

/// Anything serde can serialize, converted through a JSON value (sessions, checkpoints,
/// decisions, deliveries, receipts).
pub fn to_json<T: serde::Serialize>(v: &T) -> Json {
    Json(serde_json::to_value(v).unwrap_or(Value::Null))
}

/// Builds the Python object for a JSON value.
pub fn json_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(json_to_py(py, x)?)?;
            }
            list.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// Reads a Python object made of dicts (string keys), lists/tuples, str, int, float, bool and
/// None as a JSON value; anything else is a `TypeError`.
pub fn py_to_json(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        return Err(PyTypeError::new_err("integer out of the 64-bit range"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyTypeError::new_err("NaN and infinities are not JSON"));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut m = Map::new();
        for (k, v) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("JSON object keys must be str"))?;
            m.insert(key.to_cow()?.into_owned(), py_to_json(&v)?);
        }
        return Ok(Value::Object(m));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return l
            .iter()
            .map(|x| py_to_json(&x))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return t
            .iter()
            .map(|x| py_to_json(&x))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    Err(PyTypeError::new_err(format!(
        "cannot store a {} as JSON",
        obj.get_type().name()?
    )))
}

/// How deep [`plain_json`] follows nested lists and dicts before giving up (None).
const PLAIN_DEPTH: usize = 500;

/// The compact JSON text of `obj` when it is made only of the exact JSON types — dict with
/// str keys, list, str, int, finite float, bool, None; no subclass (an `IntEnum`, a
/// `defaultdict`), no tuple — else None, as for a str that is not UTF-8 (a lone surrogate)
/// or nesting deeper than 500. The text is `json.dumps(obj, ensure_ascii=False,
/// separators=(",", ":"))`'s (floats and ints past 64 bits are written by their Python
/// `repr`, as `json` does), so such a value reads back equal, type for type. One pass under
/// the GIL instead of a Python walk checking the types and then `json.dumps`.
#[pyfunction]
pub fn plain_json(obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let mut out = String::new();
    Ok(write_plain(obj, &mut out, 0)?.then_some(out))
}

/// Appends `obj`'s JSON text to `out`; false (and `out` unfinished) when it is not plain.
fn write_plain(obj: &Bound<'_, PyAny>, out: &mut String, depth: usize) -> PyResult<bool> {
    if obj.is_none() {
        out.push_str("null");
    } else if let Ok(s) = obj.cast_exact::<PyString>() {
        let Ok(s) = s.to_cow() else {
            return Ok(false);
        };
        write_json_str(out, &s);
    } else if obj.is_exact_instance_of::<PyBool>() {
        out.push_str(if obj.is_truthy()? { "true" } else { "false" });
    } else if obj.is_exact_instance_of::<PyInt>() {
        match obj.extract::<i64>() {
            Ok(i) => out.push_str(&i.to_string()),
            Err(_) => out.push_str(&obj.repr()?.to_cow()?),
        }
    } else if let Ok(f) = obj.cast_exact::<PyFloat>() {
        if !f.value().is_finite() {
            return Ok(false);
        }
        out.push_str(&f.repr()?.to_cow()?);
    } else if depth >= PLAIN_DEPTH {
        return Ok(false);
    } else if let Ok(l) = obj.cast_exact::<PyList>() {
        out.push('[');
        for (i, x) in l.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if !write_plain(&x, out, depth + 1)? {
                return Ok(false);
            }
        }
        out.push(']');
    } else if let Ok(d) = obj.cast_exact::<PyDict>() {
        out.push('{');
        for (i, (k, v)) in d.iter().enumerate() {
            let Ok(k) = k.cast_exact::<PyString>() else {
                return Ok(false);
            };
            let Ok(k) = k.to_cow() else {
                return Ok(false);
            };
            if i > 0 {
                out.push(',');
            }
            write_json_str(out, &k);
            out.push(':');
            if !write_plain(&v, out, depth + 1)? {
                return Ok(false);
            }
        }
        out.push('}');
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// A JSON string literal as `json.dumps(ensure_ascii=False)` writes it: `"`, `\\` and the
/// control characters escaped (`\n`-style where JSON has one, else `\u00xx`), the rest as is.
fn write_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ``[t1,t2,...]`` when each text is exactly one JSON value (whitespace around it allowed),
/// else None. Checking each text whole is what makes the join safe: ``1,2`` or ``"a"]``
/// would otherwise shift the array's elements.
pub fn json_array<'a>(texts: impl Iterator<Item = &'a str> + Clone) -> Option<String> {
    let mut out = String::with_capacity(texts.clone().map(|t| t.len() + 1).sum::<usize>() + 2);
    out.push('[');
    for (i, t) in texts.enumerate() {
        serde_json::from_str::<serde::de::IgnoredAny>(t).ok()?;
        if i > 0 {
            out.push(',');
        }
        out.push_str(t);
    }
    out.push(']');
    Some(out)
}

/// The dict of one stored message: `seq`, `state`, `created_at`, `role`, and the optional
/// fields that are set.
impl ToDict for Message {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("seq", self.seq)?;
        d.set_item(
            "state",
            match self.state {
                agentstate::MessageState::Active => "active",
                agentstate::MessageState::CompactedOut => "compacted_out",
            },
        )?;
        d.set_item("created_at", self.created_at)?;
        d.set_item("role", &self.role)?;
        if let Some(c) = &self.content {
            d.set_item("content", c)?;
        }
        if let Some(n) = &self.name {
            d.set_item("name", n)?;
        }
        if let Some(t) = &self.tool_calls {
            d.set_item("tool_calls", json_to_py(py, t)?)?;
        }
        if let Some(t) = &self.tool_call_id {
            d.set_item("tool_call_id", t)?;
        }
        if let Some(r) = self.round_index {
            d.set_item("round_index", r)?;
        }
        if let Some(meta) = &self.meta {
            d.set_item("meta", json_to_py(py, meta)?)?;
        }
        Ok(d)
    }
}

impl<'py> IntoPyObject<'py> for Json {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        json_to_py(py, &self.0)
    }
}

impl<'py> IntoPyObject<'py> for OptJson {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        match self.0 {
            Some(v) => json_to_py(py, &v),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

impl<'py, T: ToDict> IntoPyObject<'py> for Dicts<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        without_gc(py, || {
            let list = PyList::empty(py);
            for x in &self.0 {
                list.append(x.to_dict(py)?)?;
            }
            Ok(list.into_any())
        })
    }
}

/// Runs `build` with Python's cyclic garbage collector paused (when it was running): a page
/// of 500 checkpoint tuples is ~25,000 new dicts and lists, whose allocations set off a
/// generation-0 collection every 700 and with it a scan of every young container (16 % of
/// a list's CPU in the binding, perf). Nothing `build` makes forms a cycle.
fn without_gc<'py, T>(py: Python<'py>, build: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    let gc = py.import("gc")?;
    let running = gc.call_method0("isenabled")?.is_truthy()?;
    if running {
        gc.call_method0("disable")?;
    }
    let built = build();
    if running {
        gc.call_method0("enable")?;
    }
    built
}

impl<'py, T: ToDict> IntoPyObject<'py> for OptDict<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        match &self.0 {
            Some(x) => Ok(x.to_dict(py)?.into_any()),
            None => Ok(py.None().into_bound(py)),
        }
    }
}
