//! `agentstate._agentstate`: the PyO3 extension module behind the Python package
//! `agentstate` — one binding over the Rust core (`agentstate::Store`), so Python speaks the
//! same key protocol, Lua scripts and validation as every other agentstate process.
//!
//! # Layout
//! - `fork`: fork safety: a generation per forked process, its own runtime, and values of
//!   older generations leaked instead of dropped.
//! - `bridge`: the process's tokio runtime; `block` (sync calls, GIL released around the I/O)
//!   and `awaitable` (async twins: results queued for the caller's event loop, which a
//!   socket wakes; runtime threads never take the GIL).
//! - `store`: `Store`, every capability as a sync method and an async twin (`a` prefix);
//!   `RunLease`, a held run lease as a context manager.
//! - `consumer`: `Consumer`, consumer groups over the decisions streams.
//! - `daemon`: `SpillDaemon`, the spill daemon in a background task of this process.
//! - `cli`: `run_cli`, the `agentstate` command line (the wheel's console script).
//! - `server`: `RedisServer`, a private redis-server (for `agentstate.testing`).
//! - `errors`: the exception hierarchy (`AgentStateError` > ...) and the mapping from
//!   `agentstate::Error`.
//! - `convert`: Python objects <-> JSON values and stored messages; `plain_json` (module
//!   function: the JSON text of a value of exact JSON types, or None).

#[macro_use]
mod twins;
mod args;
mod bridge;
mod cli;
mod consumer;
mod convert;
mod daemon;
mod errors;
mod fork;
mod graph;
mod server;
mod store;

use pyo3::prelude::*;

/// The extension module; `agentstate/__init__.py` re-exports it.
#[pymodule]
fn _agentstate(m: &Bound<'_, PyModule>) -> PyResult<()> {
    fork::install();
    m.add_class::<store::PyStore>()?;
    m.add_class::<store::PyRunLease>()?;
    m.add_class::<consumer::PyConsumer>()?;
    m.add_class::<daemon::PySpillDaemon>()?;
    m.add_class::<server::PyRedisServer>()?;
    m.add_function(wrap_pyfunction!(cli::run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(store::resolved, m)?)?;
    m.add_function(wrap_pyfunction!(convert::plain_json, m)?)?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
