//! `agentstate._agentstate.RedisServer`: a private `redis-server` on a free loopback port
//! (no persistence), the one the Rust tests use; `agentstate.testing` builds its fixtures on
//! it.

use agentstate::test_support::redis_server::RedisServer;
use pyo3::prelude::*;
use std::sync::Mutex;

use crate::errors;

/// A private `redis-server` child on a free loopback port, killed by `stop()` or when the
/// object goes.
#[pyclass(frozen, name = "RedisServer", module = "agentstate.testing")]
pub struct PyRedisServer {
    server: Mutex<Option<RedisServer>>,
    url: String,
}

#[pymethods]
impl PyRedisServer {
    /// Starts one (`redis-server` must be on PATH); returns once it answers.
    #[new]
    fn new(py: Python<'_>) -> PyResult<Self> {
        let server = py
            .detach(RedisServer::start)
            .map_err(|e| errors::to_py(e, &errors::python()))?;
        Ok(PyRedisServer {
            url: server.url(),
            server: Mutex::new(Some(server)),
        })
    }

    /// Its URL, `redis://127.0.0.1:PORT`.
    #[getter]
    fn url(&self) -> String {
        self.url.clone()
    }

    /// Kills it (its data go with it). Idempotent.
    fn stop(&self, py: Python<'_>) {
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner()).take();
        py.detach(move || drop(server));
    }

    fn __repr__(&self) -> String {
        format!("RedisServer(url='{}')", self.url)
    }
}
