//! Graph checkpoint tuples as Python sees them (the methods are in `store/graphs.rs`): dicts
//! (see the stubs), built straight from the core's [`GraphTuple`]s under the GIL once the I/O is over; their
//! documents and metadata, JSON text in the tuple, by Python's own C JSON scanner.

use agentstate::GraphTuple;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::value::RawValue;

use crate::convert::ToDict;

/// The dict of one graph tuple: `ns`, `id`, `parent`, `checkpoint`, `metadata`,
/// `created_at`, `values` (channel → stored value) and `writes` (`(task_id, channel,
/// value)` tuples, in the order LangGraph applies them): what the saver's `CheckpointTuple`
/// is made of and no more (a list's every object is allocated, scanned by the cyclic GC and
/// freed; the channel list, which the document's `channel_versions` repeats, and per write
/// a dict with its task path and index were a fifth of them). Built field by field: going
/// through a serde_json tree of the tuple copied every value string once more and was most
/// of a long list's time in the binding.
impl ToDict for GraphTuple {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "ns"), &self.ns)?;
        d.set_item(intern!(py, "id"), &self.id)?;
        d.set_item(intern!(py, "parent"), &self.parent)?;
        d.set_item(
            intern!(py, "checkpoint"),
            json_text_to_py(py, &self.checkpoint)?,
        )?;
        d.set_item(
            intern!(py, "metadata"),
            json_text_to_py(py, &self.metadata)?,
        )?;
        d.set_item(intern!(py, "created_at"), self.created_at)?;
        let values = PyDict::new(py);
        for (ch, value) in &self.values {
            values.set_item(ch, value)?;
        }
        d.set_item(intern!(py, "values"), values)?;
        let writes = PyList::empty(py);
        for w in &self.writes {
            writes.append((&w.task_id, &w.channel, &w.value))?;
        }
        d.set_item(intern!(py, "writes"), writes)?;
        Ok(d)
    }
}

/// The Python objects of a JSON text, built by the scanner behind `json.loads`
/// (`json.scanner.make_scanner(json.JSONDecoder())`, C in CPython) called at index 0: in one
/// pass from the text, where a `serde_json::Value` tree first and then its objects took
/// twice the instructions (callgrind, a 500-checkpoint list), with `json`'s own decoding
/// (exact floats, ints of any size).
fn json_text_to_py<'py>(py: Python<'py>, text: &RawValue) -> PyResult<Bound<'py, PyAny>> {
    static SCANNER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let scanner = SCANNER.get_or_try_init(py, || {
        let decoder = py.import("json")?.getattr("JSONDecoder")?.call0()?;
        py.import("json.scanner")?
            .getattr("make_scanner")?
            .call1((decoder,))
            .map(Bound::unbind)
    })?;
    let text = PyString::new(py, text.get());
    let (value, end): (Bound<'py, PyAny>, usize) = scanner.bind(py).call1((&text, 0))?.extract()?;
    if end != text.len()? {
        return Err(PyValueError::new_err("stored JSON has trailing text"));
    }
    Ok(value)
}
