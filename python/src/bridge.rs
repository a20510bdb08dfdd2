//! The runtime every call runs on, and the two ways a Rust future meets Python:
//! [`block`] (sync methods: the calling thread drives it with the GIL released) and
//! [`awaitable`] (async twins: spawned on the runtime; its result reaches the caller's event
//! loop through `loop.call_soon_threadsafe`).
//!
//! The asyncio bridge is ours rather than pyo3-async-runtimes' so that the interpreter can
//! exit cleanly: a runtime thread must not be inside Python when the interpreter finalizes
//! (CPython aborts the process when a foreign thread releases the GIL during finalization).
//! Every delivery holds [`GATE`] for reading while it is inside Python; the `atexit` hook
//! [`quiesce`] takes it for writing (GIL released, so running deliveries finish) and closes
//! it: later deliveries drop their result without touching Python.

use std::future::Future;
use std::sync::{OnceLock, RwLock};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::IntoPyObjectExt;
use tokio::task::AbortHandle;

use crate::errors;

/// `true` once the interpreter is exiting: results are no longer delivered into Python.
static GATE: RwLock<bool> = RwLock::new(false);

/// The process-wide multi-threaded tokio runtime shared by every `Store`.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("agentstate")
            .build()
            .expect("cannot start the agentstate tokio runtime")
    })
}

/// Runs `fut` to completion on the calling thread with the GIL released (the sync methods).
pub fn block<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = agentstate::Result<T>> + Send,
    T: Send,
{
    py.detach(|| runtime().block_on(fut)).map_err(errors::to_py)
}

/// Spawns `fut` on the runtime and returns an asyncio future of the caller's running loop
/// that gets its result (the async twins). Cancelling the asyncio future aborts the task.
pub fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = agentstate::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let event_loop = GET_RUNNING_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()?;
    let py_future = event_loop.call_method0("create_future")?;
    let target: Py<PyAny> = py_future.clone().unbind();
    let event_loop: Py<PyAny> = event_loop.unbind();
    let task = runtime().spawn(async move {
        let result = fut.await;
        let closed = GATE.read().unwrap_or_else(|e| e.into_inner());
        if !*closed {
            Python::attach(|py| {
                deliver(py, &event_loop, &target, result);
                drop((event_loop, target));
            });
        }
    });
    py_future.call_method1("add_done_callback", (AbortOnCancel(task.abort_handle()),))?;
    Ok(py_future)
}

/// Hands `result` to `target` on its loop's thread (`call_soon_threadsafe(_deliver, ...)`).
/// A loop closed meanwhile has nobody left to tell: the result is dropped.
fn deliver<T>(
    py: Python<'_>,
    event_loop: &Py<PyAny>,
    target: &Py<PyAny>,
    result: agentstate::Result<T>,
) where
    T: for<'a> IntoPyObject<'a>,
{
    let (ok, value): (bool, Py<PyAny>) = match result {
        Ok(v) => match v.into_py_any(py) {
            Ok(obj) => (true, obj),
            Err(e) => (false, e.value(py).clone().into_any().unbind()),
        },
        Err(e) => (
            false,
            errors::to_py(e).value(py).clone().into_any().unbind(),
        ),
    };
    let deliver = match wrap_pyfunction!(_deliver, py) {
        Ok(f) => f,
        Err(_) => return,
    };
    let _ = event_loop.call_method1(py, "call_soon_threadsafe", (deliver, target, ok, value));
}

/// Sets the result (or exception) of an asyncio future unless it was cancelled; runs on the
/// future's loop.
#[pyfunction]
fn _deliver(future: &Bound<'_, PyAny>, ok: bool, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if future.call_method0("cancelled")?.is_truthy()? {
        return Ok(());
    }
    if ok {
        future.call_method1("set_result", (value,))?;
    } else {
        future.call_method1("set_exception", (value,))?;
    }
    Ok(())
}

/// The done-callback of an awaitable: a cancelled asyncio future aborts its task.
#[pyclass(frozen)]
struct AbortOnCancel(AbortHandle);

#[pymethods]
impl AbortOnCancel {
    fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            self.0.abort();
        }
        Ok(())
    }
}

/// Registered with `atexit`: lets running deliveries finish (GIL released) and stops later
/// ones from entering Python, so no runtime thread is inside Python when the interpreter
/// finalizes. Calls still running then are abandoned with the process.
#[pyfunction]
pub fn quiesce(py: Python<'_>) {
    py.detach(|| *GATE.write().unwrap_or_else(|e| e.into_inner()) = true);
}
