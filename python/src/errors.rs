//! The Python exception hierarchy and the one function mapping `agentstate::Error` onto it.
//!
//! ```text
//! AgentStateError
//! ├── UnknownSession        the session exists nowhere (not in Redis, not restorable)
//! ├── NotLive               not in Redis and no spill daemon restored it in time (retryable)
//! ├── Conflict              a version / expected seq moved (.expected, .current)
//! ├── InvalidInput          bad id, JSON, role, seq range, spawn depth
//! │   └── TooLarge          a payload over its limit (.size, .limit)
//! ├── AlreadyExists         a create of something that exists
//! ├── Fenced                a write under a run lease token no longer the session's
//! │                         (.token, .current, .holder); nothing was written
//! ├── Leased                a session's run lease is another owner's (.holder, .token,
//! │                         .expires_at)
//! ├── RedisUnavailable      Redis cannot be reached (retryable)
//! ├── Backpressure          the live tier is full and refused the write; nothing was written
//! ├── NamespaceMismatch     prefix/partitions differ from what Redis or SQLite recorded
//! ├── DurabilityTimeout     a durable write not committed to SQLite in time
//! └── WriteLost             Redis lost a durable write before SQLite committed it
//! ```

use agentstate::test_support::advice::{Front, Situation};
use agentstate::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    agentstate,
    AgentStateError,
    PyException,
    "Base class of every agentstate error."
);
create_exception!(
    agentstate,
    UnknownSession,
    AgentStateError,
    "The session exists neither in Redis nor in the durable tier."
);
create_exception!(agentstate, NotLive, AgentStateError, "The session is not live in Redis and no spill daemon restored it within the wait (retry, or start `agentstate spill`).");
create_exception!(agentstate, Conflict, AgentStateError, "An optimistic-concurrency check failed: `expected` is what the caller passed, `current` what the store holds.");
create_exception!(
    agentstate,
    InvalidInput,
    AgentStateError,
    "A rejected argument (id, JSON, role, seq range, spawn depth); nothing was written."
);
create_exception!(
    agentstate,
    TooLarge,
    InvalidInput,
    "A payload over its configured limit (`size`, `limit` in bytes); nothing was written."
);
create_exception!(
    agentstate,
    AlreadyExists,
    AgentStateError,
    "The session (or other object) to create exists already."
);
create_exception!(
    agentstate,
    Fenced,
    AgentStateError,
    "A write carried a run lease token (`token`) that is no longer the session's (`current`, held by `holder` or None): another process took the session over; nothing was written, stop the run."
);
create_exception!(
    agentstate,
    Leased,
    AgentStateError,
    "The session's run lease is held by another owner (`holder`, `token`) until `expires_at` (ms since the epoch) unless renewed."
);
create_exception!(
    agentstate,
    RedisUnavailable,
    AgentStateError,
    "Redis cannot be reached or the connection failed (retryable)."
);
create_exception!(
    agentstate,
    Backpressure,
    AgentStateError,
    "Backpressure: the live tier is full (Redis at maxmemory with noeviction) and refused the write; nothing was written. Retry once the spill daemon has trimmed what the durable tier committed, or raise maxmemory."
);
create_exception!(
    agentstate,
    NamespaceMismatch,
    AgentStateError,
    "The configured namespace differs from the one Redis or SQLite recorded."
);
create_exception!(
    agentstate,
    DurabilityTimeout,
    AgentStateError,
    "A durable write was not committed to SQLite within the wait (is a spill daemon running?)."
);
create_exception!(
    agentstate,
    WriteLost,
    AgentStateError,
    "Redis lost a durable write before a spill daemon committed it: it is in neither tier; repeat it (an idempotency key makes the repeat safe)."
);

/// A situation that knows only the front end, for errors raised before a store exists.
pub fn python() -> Situation {
    Situation {
        front: Front::Python,
        ..Situation::default()
    }
}

/// Maps a core error to its Python exception, with the structured fields as attributes; its
/// text is the CLI's kind of line (`agentstate::test_support::advice`): what failed, the address, the next
/// step in Python's words.
pub fn to_py(err: Error, at: &Situation) -> PyErr {
    let msg = agentstate::test_support::advice::line(&err, at);
    match err {
        Error::UnknownSession(_) => UnknownSession::new_err(msg),
        // RunGone: a live session's inbox and ledger no daemon put back; retryable as NotLive.
        Error::NotLive { .. } | Error::RunGone(_) => NotLive::new_err(msg),
        Error::Conflict { expected, current } => Python::attach(|py| {
            let e = Conflict::new_err(msg);
            let v = e.value(py);
            let _ = v.setattr("expected", expected);
            let _ = v.setattr("current", current);
            e
        }),
        Error::TooLarge { size, limit, .. } => Python::attach(|py| {
            let e = TooLarge::new_err(msg);
            let v = e.value(py);
            let _ = v.setattr("size", size);
            let _ = v.setattr("limit", limit);
            e
        }),
        Error::InvalidId { .. }
        | Error::MalformedJson { .. }
        | Error::InvalidInput(_)
        | Error::BadRange { .. }
        | Error::SpawnDepthExceeded { .. } => InvalidInput::new_err(msg),
        Error::AlreadyExists(_) => AlreadyExists::new_err(msg),
        Error::Fenced {
            token,
            current,
            holder,
        } => Python::attach(|py| {
            let e = Fenced::new_err(msg);
            let v = e.value(py);
            let _ = v.setattr("token", token);
            let _ = v.setattr("current", current);
            let _ = v.setattr("holder", holder);
            e
        }),
        Error::Leased {
            holder,
            token,
            expires_at,
            ..
        } => Python::attach(|py| {
            let e = Leased::new_err(msg);
            let v = e.value(py);
            let _ = v.setattr("holder", holder);
            let _ = v.setattr("token", token);
            let _ = v.setattr("expires_at", expires_at);
            e
        }),
        Error::RedisUnavailable { .. } => RedisUnavailable::new_err(msg),
        Error::Backpressure { .. } => Backpressure::new_err(msg),
        Error::NamespaceMismatch(_) => NamespaceMismatch::new_err(msg),
        Error::DurabilityTimeout(_) => DurabilityTimeout::new_err(msg),
        Error::WriteLost(_) => WriteLost::new_err(msg),
        _ => AgentStateError::new_err(msg),
    }
}

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("AgentStateError", py.get_type::<AgentStateError>())?;
    m.add("UnknownSession", py.get_type::<UnknownSession>())?;
    m.add("NotLive", py.get_type::<NotLive>())?;
    m.add("Conflict", py.get_type::<Conflict>())?;
    m.add("InvalidInput", py.get_type::<InvalidInput>())?;
    m.add("TooLarge", py.get_type::<TooLarge>())?;
    m.add("AlreadyExists", py.get_type::<AlreadyExists>())?;
    m.add("Fenced", py.get_type::<Fenced>())?;
    m.add("Leased", py.get_type::<Leased>())?;
    m.add("RedisUnavailable", py.get_type::<RedisUnavailable>())?;
    m.add("Backpressure", py.get_type::<Backpressure>())?;
    m.add("NamespaceMismatch", py.get_type::<NamespaceMismatch>())?;
    m.add("DurabilityTimeout", py.get_type::<DurabilityTimeout>())?;
    m.add("WriteLost", py.get_type::<WriteLost>())?;
    Ok(())
}
