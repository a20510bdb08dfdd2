//! The one mapping from `agentstate::Error` to a rejected promise. Its message is
//! `MARKER` followed by a JSON object — `kind` (the JS class: `UnknownSession`, `Conflict`,
//! ...), `message` (the CLI's kind of line: what failed, the address, the next step in the
//! Node package's words), `address` (the Redis address, when known) and the kind's fields
//! (`expected`/`current`, `size`/`limit`, `token`/`holder`, ...) — which `index.js`
//! (`fromNative`) turns into the JS `Error` subclass of that kind, `.code` its kind.

use agentstate::test_support::advice::{Front, Situation};
use agentstate::Error;
use serde_json::{json, Map, Value};

/// What starts the message of every error this addon rejects with.
pub const MARKER: &str = "agentstate-error:";

/// A situation that knows only the front end, for errors raised before a store exists.
pub fn node() -> Situation {
    Situation {
        front: Front::Node,
        ..Situation::default()
    }
}

/// A napi error of `kind` with `message` and the given fields.
pub fn typed(kind: &str, message: String, at: &Situation, fields: Value) -> napi::Error {
    let mut o = Map::new();
    o.insert("kind".into(), kind.into());
    o.insert("message".into(), message.into());
    if let Some(url) = &at.url {
        o.insert(
            "address".into(),
            agentstate::test_support::address::address(url).into(),
        );
    }
    if let Value::Object(f) = fields {
        o.extend(f);
    }
    napi::Error::from_reason(format!("{MARKER}{}", Value::Object(o)))
}

/// An argument this binding refuses before the core sees it (`InvalidInput`).
pub fn invalid(message: String) -> napi::Error {
    typed("InvalidInput", message, &node(), Value::Null)
}

/// Maps a core error to its kind, fields and worded line (`agentstate::test_support::advice`).
pub fn to_napi(err: Error, at: &Situation) -> napi::Error {
    let msg = agentstate::test_support::advice::line(&err, at);
    let (kind, fields) = match err {
        Error::UnknownSession(_) => ("UnknownSession", Value::Null),
        // RunGone: a live session's inbox and ledger no daemon put back; retryable as NotLive.
        Error::NotLive { .. } | Error::RunGone(_) => ("NotLive", Value::Null),
        Error::Conflict { expected, current } => (
            "Conflict",
            json!({"expected": expected, "current": current}),
        ),
        Error::TooLarge { size, limit, .. } => ("TooLarge", json!({"size": size, "limit": limit})),
        Error::InvalidId { .. }
        | Error::MalformedJson { .. }
        | Error::InvalidInput(_)
        | Error::BadRange { .. }
        | Error::SpawnDepthExceeded { .. } => ("InvalidInput", Value::Null),
        Error::AlreadyExists(_) => ("AlreadyExists", Value::Null),
        Error::Fenced {
            token,
            current,
            holder,
        } => (
            "Fenced",
            json!({"token": token, "current": current, "holder": holder}),
        ),
        Error::Leased {
            holder,
            token,
            expires_at,
            ..
        } => (
            "Leased",
            json!({"holder": holder, "token": token, "expiresAt": expires_at}),
        ),
        Error::RedisUnavailable { .. } => ("RedisUnavailable", Value::Null),
        Error::Backpressure { .. } => ("Backpressure", Value::Null),
        Error::NamespaceMismatch(_) => ("NamespaceMismatch", Value::Null),
        Error::DurabilityTimeout(_) => ("DurabilityTimeout", Value::Null),
        Error::WriteLost(_) => ("WriteLost", Value::Null),
        _ => ("AgentStateError", Value::Null),
    };
    typed(kind, msg, at, fields)
}
