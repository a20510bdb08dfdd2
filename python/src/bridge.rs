//! The runtime every call runs on, and the two ways a Rust future meets Python:
//! [`block`] (sync methods: the calling thread drives it with the GIL released) and
//! [`awaitable`] (async twins: spawned on the runtime; the result comes back to the caller's
//! event loop through that loop's [`LoopBridge`]). Both word a failure for where the call
//! ran (a [`Situation`]: the Redis address, the namespace).
//!
//! Runtime threads never take the GIL. A finished call pushes a [`Completion`] (the asyncio
//! future plus a closure that builds the Python result) onto its loop's queue and, when the
//! queue was empty, writes one byte to a socket the loop watches (`loop.add_reader`); the loop
//! thread then drains the queue and sets the results. So a busy event loop never makes a
//! runtime thread wait for the GIL (CPython hands it over only every switch interval, 5 ms),
//! completions that finish together cost one wake-up, and no runtime thread can be inside
//! Python while the interpreter finalizes.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use agentstate::test_support::advice::Situation;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::IntoPyObjectExt;
use tokio::task::AbortHandle;

use crate::errors;

/// This process's runtime (a forked child builds its own: see [`crate::fork`]).
pub use crate::fork::runtime;

/// Runs `fut` to completion on the calling thread with the GIL released (the sync methods);
/// an error is worded for where the call ran (`at`).
pub fn block<F, T>(py: Python<'_>, at: &Arc<Situation>, fut: F) -> PyResult<T>
where
    F: Future<Output = agentstate::Result<T>> + Send,
    T: Send,
{
    let out = py.detach(|| runtime().block_on(fut));
    log_warnings(py);
    out.map_err(|e| errors::to_py(e, at))
}

/// Logs what the core has to say once per process (no spill daemon runs, so writes are not
/// durable) as a warning of the `agentstate` logger: a log line, not a Python warning, so a
/// test suite that turns warnings into errors still runs.
fn log_warnings(py: Python<'_>) {
    if let Some(warning) = agentstate::take_durability_warning() {
        let _ = py
            .import("logging")
            .and_then(|logging| logging.call_method1("getLogger", ("agentstate",)))
            .and_then(|logger| logger.call_method1("warning", (warning,)));
    }
}

/// Builds a call's Python result (or exception) on the loop thread, with the GIL.
type Outcome = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// A finished call waiting for its loop: the asyncio future and how to build its outcome.
struct Completion {
    future: Py<PyAny>,
    outcome: Outcome,
}

/// One event loop's end of the bridge: a queue of completions and a socket pair whose read
/// end the loop watches.
#[pyclass(frozen)]
pub struct LoopBridge {
    queue: Mutex<Vec<Completion>>,
    wake_tx: UnixStream,
    wake_rx: UnixStream,
}

impl LoopBridge {
    fn new() -> std::io::Result<LoopBridge> {
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        Ok(LoopBridge {
            queue: Mutex::new(Vec::new()),
            wake_tx,
            wake_rx,
        })
    }

    /// Called on a runtime thread: queue the completion, wake the loop if it may be asleep.
    fn complete(&self, c: Completion) {
        let was_empty = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.push(c);
            q.len() == 1
        };
        if was_empty {
            // A full socket buffer means a wake-up is pending already.
            let _ = (&self.wake_tx).write(&[1]);
        }
    }
}

#[pymethods]
impl LoopBridge {
    /// The loop's reader callback: settles every queued future.
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        let mut buf = [0u8; 256];
        loop {
            match (&self.wake_rx).read(&mut buf) {
                Ok(n) if n == buf.len() => continue,
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break, // WouldBlock: drained
            }
        }
        let batch = std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()));
        for c in batch {
            let future = c.future.bind(py);
            if future.call_method0("cancelled")?.is_truthy()? {
                continue;
            }
            match (c.outcome)(py) {
                Ok(v) => future.call_method1("set_result", (v,))?,
                Err(e) => future.call_method1("set_exception", (e.value(py),))?,
            };
        }
        log_warnings(py);
        Ok(())
    }
}

/// The bridge of `event_loop`, created (and its socket registered with `add_reader`) on first
/// use; kept in a `WeakKeyDictionary`, so it goes with its loop.
fn bridge_of<'py>(event_loop: &Bound<'py, PyAny>) -> PyResult<Bound<'py, LoopBridge>> {
    static BRIDGES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = event_loop.py();
    let bridges = BRIDGES
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py
                .import("weakref")?
                .getattr("WeakKeyDictionary")?
                .call0()?
                .unbind())
        })?
        .bind(py);
    if let Ok(b) = bridges
        .call_method1("get", (event_loop,))?
        .cast_into::<LoopBridge>()
    {
        return Ok(b);
    }
    let bridge = Bound::new(
        py,
        LoopBridge::new().map_err(|e| {
            pyo3::exceptions::PyOSError::new_err(format!(
                "agentstate: cannot create the loop's wake-up socket: {e}"
            ))
        })?,
    )?;
    let fd = bridge.get().wake_rx.as_raw_fd();
    event_loop.call_method1("add_reader", (fd, bridge.getattr("drain")?))?;
    bridges.set_item(event_loop, &bridge)?;
    Ok(bridge)
}

/// Spawns `fut` on the runtime and returns an asyncio future of the caller's running loop
/// that gets its result (the async twins). Cancelling the asyncio future aborts the task.
pub fn awaitable<'py, F, T>(
    py: Python<'py>,
    at: &Arc<Situation>,
    fut: F,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = agentstate::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let event_loop = GET_RUNNING_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()?;
    let bridge = bridge_of(&event_loop)?.unbind();
    let py_future = event_loop.call_method0("create_future")?;
    let future = py_future.clone().unbind();
    let at = Arc::clone(at);
    let task = runtime().spawn(async move {
        let result = fut.await;
        bridge.get().complete(Completion {
            future,
            outcome: Box::new(move |py| match result {
                Ok(v) => v.into_py_any(py),
                Err(e) => Err(errors::to_py(e, &at)),
            }),
        });
    });
    py_future.call_method1("add_done_callback", (AbortOnCancel(task.abort_handle()),))?;
    Ok(py_future)
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
