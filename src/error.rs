//! The one error type of the library, and the mapping from Lua error codes to it.

use std::time::Duration;

/// Everything an agentstate call can fail with.
///
/// Lua scripts report failures as error replies whose first word is a stable code
/// (`NO_SESSION`, `CONFLICT`, ...); [`Error::from_redis`] is the one place that maps
/// those codes to variants, so business code never matches on strings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An id (session, user, agent, label, working-state key) is not 1–128 chars of
    /// `[A-Za-z0-9._@+-]`.
    #[error("invalid {what} id {id:?}: must be 1-128 characters of [A-Za-z0-9._@+-]")]
    InvalidId {
        /// Which kind of id was rejected ("session", "user", ...).
        what: &'static str,
        /// The rejected text (truncated to 200 chars).
        id: String,
    },
    /// The session does not exist in Redis (and, where rehydration applies, nowhere else).
    #[error("unknown session {0}")]
    UnknownSession(String),
    /// The session is not live in Redis and no spill daemon answered the restore request.
    #[error("session {sid} is not live in Redis and no spill daemon restored it within {waited:?}; start one with `agentstate spill`")]
    NotLive {
        /// The session that could not be restored.
        sid: String,
        /// How long the caller waited for a daemon.
        waited: Duration,
    },
    /// An optimistic-concurrency check failed: the version or seq moved.
    #[error("conflict: expected {expected}, current is {current}")]
    Conflict {
        /// What the caller expected.
        expected: u64,
        /// What the store holds now.
        current: u64,
    },
    /// A sub-agent would be deeper than the configured cap.
    #[error("spawn depth {depth} exceeds the maximum {max}")]
    SpawnDepthExceeded {
        /// The depth the new session would have.
        depth: u32,
        /// The configured cap.
        max: u32,
    },
    /// A payload is larger than its configured limit.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Which payload ("message", "working value", "state").
        what: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// Text that must be JSON is not.
    #[error("malformed JSON in {what}: {detail}")]
    MalformedJson {
        /// Which argument held it.
        what: &'static str,
        /// The parser's message.
        detail: String,
    },
    /// Any other rejected argument (bad seq range, unknown role, ...).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A seq range that does not lie within the session's messages.
    #[error("bad seq range {from}..={to}: {detail}")]
    BadRange {
        /// First seq of the range.
        from: u64,
        /// Last seq of the range.
        to: u64,
        /// Why it was rejected.
        detail: String,
    },
    /// The session or key already exists where a new one was required.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// Redis cannot be reached or answered with a transport error.
    #[error("redis unavailable: {0}")]
    RedisUnavailable(String),
    /// Any other error reply from Redis.
    #[error("redis error: {0}")]
    Redis(String),
    /// The namespace recorded in Redis or SQLite differs from the configured one.
    #[error("namespace mismatch: {0}")]
    NamespaceMismatch(String),
    /// A durable write was not committed to SQLite within the bounded wait.
    #[error("durable write not confirmed within {0:?}: is `agentstate spill` running?")]
    DurabilityTimeout(Duration),
    /// An error from the SQLite side (spill daemon, export).
    #[error("sqlite: {0}")]
    Sqlite(String),
    /// Local I/O failed (starting redis-server, files).
    #[error("io: {0}")]
    Io(String),
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Maps a redis-rs error to a typed error, decoding the stable codes our Lua scripts raise
    /// (`CODE detail...`).
    pub fn from_redis(err: redis::RedisError) -> Self {
        if let Some(code) = err.code() {
            let detail = err.detail().unwrap_or("").trim().to_string();
            let mut words = detail.split_whitespace();
            match code {
                "NO_SESSION" => return Error::UnknownSession(detail),
                "CONFLICT" => {
                    let expected = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    let current = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    return Error::Conflict { expected, current };
                }
                "SPAWN_DEPTH" => {
                    let depth = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    let max = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    return Error::SpawnDepthExceeded { depth, max };
                }
                "TOO_LARGE" => {
                    let size = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    let limit = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    return Error::TooLarge {
                        what: "payload",
                        size,
                        limit,
                    };
                }
                "BAD_RANGE" => {
                    let from = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    let to = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    let rest: Vec<&str> = words.collect();
                    return Error::BadRange {
                        from,
                        to,
                        detail: rest.join(" "),
                    };
                }
                "EXISTS" => return Error::AlreadyExists(detail),
                "BAD_INPUT" => return Error::InvalidInput(detail),
                _ => {}
            }
        }
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout()
        {
            Error::RedisUnavailable(err.to_string())
        } else {
            Error::Redis(err.to_string())
        }
    }

    /// True when the error means "the session is not in Redis", which rehydration can fix.
    pub fn is_unknown_session(&self) -> bool {
        matches!(self, Error::UnknownSession(_))
    }
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        Error::from_redis(err)
    }
}

impl From<deadpool_redis::PoolError> for Error {
    fn from(err: deadpool_redis::PoolError) -> Self {
        match err {
            deadpool_redis::PoolError::Backend(e) => Error::from_redis(e),
            other => Error::RedisUnavailable(other.to_string()),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Error::MalformedJson {
            what: "value",
            detail: err.to_string(),
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        Error::Sqlite(err.to_string())
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Error::Io(err.to_string())
    }
}
