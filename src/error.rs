//! The one error type of the library, and the mapping from Lua error codes to it.

use std::time::Duration;

/// Everything an agentstate call can fail with.
///
/// Lua scripts report failures as error replies whose first word is a stable code
/// (`NO_SESSION`, `CONFLICT`, ...); `Error::from_redis` is the one place that maps
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
    /// The session is not live in Redis and no spill daemon answered for it: SQLite may hold
    /// its history (after Redis lost its state, or before any daemon checked this Redis), so
    /// it is neither restored nor created anew. Retry once a daemon runs.
    #[error("{}", not_live(sid, waited, *no_daemon_yet))]
    NotLive {
        /// The session that could not be restored.
        sid: String,
        /// How long the caller waited for a daemon.
        waited: Duration,
        /// No daemon ever bound the namespace to a durable tier and none runs: the caller
        /// did not wait.
        no_daemon_yet: bool,
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
    /// A fenced write (see `Store::with_fence`) whose run lease token is no longer the
    /// session's: another process acquired the lease since (`holder`), or nobody holds it
    /// (released, or lost with Redis' data). Nothing was written; the run must stop.
    #[error("fenced: run lease token {token} is no longer the session's: {}; nothing was written", match holder { Some(h) => format!("taken over by {h} (token {current})"), None => "released, or lost with Redis (nobody holds the lease)".to_string() })]
    Fenced {
        /// The token the write carried.
        token: u64,
        /// The session's current token (0 when none was ever taken).
        current: u64,
        /// Who holds the lease now, if anyone.
        holder: Option<String>,
    },
    /// The inbox and tool-effect ledger of a live session expired from Redis (appends alone
    /// kept the session alive past their idle TTL) and no spill daemon put them back from
    /// the durable tier. A call meeting this asks the daemon first and runs again, so a
    /// caller sees it only when no daemon answered.
    #[error("the inbox and tool-effect ledger of session {0} expired from Redis while the session lived, and no spill daemon put them back from the durable tier; start one with `agentstate spill`, then retry (nothing was written)")]
    RunGone(String),
    /// A session's run lease is held by another owner until it expires or is released.
    #[error("the session's run lease is held by {holder} (token {token}) until {} UTC unless renewed{}", utc(*expires_at), match waited { Some(w) => format!("; still held when the wait of {w:?} ran out"), None => String::new() })]
    Leased {
        /// The owner holding it.
        holder: String,
        /// Its token.
        token: u64,
        /// When it expires unless renewed, ms since the epoch (Redis clock).
        expires_at: i64,
        /// How long the caller kept trying before giving up; `None`: it asked once.
        waited: Option<Duration>,
    },
    /// The session or key already exists where a new one was required.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// Redis cannot be reached or answered with a transport error. `retry_safe` says whether
    /// the call can simply be sent again: true when nothing reached Redis (or the call is
    /// safe to repeat and its retries ran out), false when a write may have been applied
    /// (repeat it only if it is idempotent, e.g. an append with an idempotency key).
    #[error("redis unavailable: {message}{}", if *retry_safe { " (nothing was applied; safe to retry)" } else { " (the call may have been applied)" })]
    RedisUnavailable {
        /// What failed.
        message: String,
        /// Whether sending the same call again cannot apply it twice.
        retry_safe: bool,
        /// The underlying error, when there was one.
        #[source]
        source: Option<BoxError>,
    },
    /// Any other error reply from Redis.
    #[error("redis error: {message}")]
    Redis {
        /// What failed.
        message: String,
        /// The underlying error, when there was one.
        #[source]
        source: Option<BoxError>,
    },
    /// Backpressure: the live tier is full and refused the write. Redis is at `maxmemory` with
    /// the `noeviction` policy (error reply `OOM`, from a call, a pipeline or a group commit
    /// alike). Nothing was written: Redis refuses a script only at its first write, so a
    /// script either wrote nothing or ran to its end. Retry once memory is freed (the spill
    /// daemon trims what the durable tier committed, sessions expire) or `maxmemory` is raised.
    #[error("backpressure: Redis is full (maxmemory reached, noeviction) and refused the write; nothing was written")]
    Backpressure {
        /// Redis' reply.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
    /// The namespace recorded in Redis or SQLite differs from the configured one.
    #[error("namespace mismatch: {0}")]
    NamespaceMismatch(String),
    /// `spill --once` could not commit every partition's entries that existed when it
    /// started: another daemon holds their leases and did not commit them in time.
    #[error("{0}")]
    NotDrained(String),
    /// A durable write was not committed to the durable tier within the bounded wait.
    #[error("durable write not confirmed within {0:?}: is `agentstate spill` running, and reaching its durable tier?")]
    DurabilityTimeout(Duration),
    /// Redis lost a durable write before the spill daemon committed it (flushed, or
    /// restarted without its data): the write is in neither tier. Repeating it is safe
    /// with an idempotency key.
    #[error(
        "redis lost {0} before the spill daemon committed it; it is in neither Redis nor SQLite"
    )]
    WriteLost(String),
    /// A flush met a message the durable tier holds at the same (session, seq) with other
    /// content: Redis handed the seq out again. The durable row is kept and nothing of the
    /// partition's batch is committed; the daemon logs it and retries the partition.
    #[error("session {session} seq {seq}: the durable tier holds another message at this seq; kept it and committed nothing of the batch")]
    SeqConflict {
        /// The session.
        session: String,
        /// The seq both messages carry.
        seq: i64,
    },
    /// An error from the SQLite side (spill daemon, export).
    #[error("sqlite: {message}")]
    Sqlite {
        /// What failed.
        message: String,
        /// The underlying error, when there was one.
        #[source]
        source: Option<BoxError>,
    },
    /// The spill daemon's SQLite file can no longer be written safely: it was removed or
    /// replaced while the daemon ran, or it is corrupt. The daemon stops (it commits and
    /// trims nothing more); Redis keeps every entry SQLite has not committed.
    #[error("sqlite file {path} {detail}")]
    DatabaseUnusable {
        /// The configured path.
        path: String,
        /// What is wrong with it.
        detail: String,
    },
    /// An error from the PostgreSQL durable tier (a `postgres://` `--db`).
    #[error("postgres: {message}")]
    Postgres {
        /// What failed, with the server (password redacted) when it is about connecting.
        message: String,
        /// The underlying error, when there was one.
        #[source]
        source: Option<BoxError>,
    },
    /// Local I/O failed (starting redis-server, files).
    #[error("io: {message}")]
    Io {
        /// What failed.
        message: String,
        /// The underlying error, when there was one.
        #[source]
        source: Option<BoxError>,
    },
}

/// The underlying error kept as the `source` of [`Error::Redis`], [`Error::RedisUnavailable`],
/// [`Error::Sqlite`] and [`Error::Io`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds the variant of one Lua error code from the error's detail text.
type MakeError = fn(&str) -> Error;

/// The codes our Lua scripts raise (`fail('CODE', detail)` in `lua/`), each with the
/// variant it becomes; [`Error::from_redis`] looks codes up here, so business code never
/// matches strings. A unit test checks this table against the scripts both ways.
const LUA_CODES: [(&str, MakeError); 12] = [
    ("NO_SESSION", |d| Error::UnknownSession(d.to_string())),
    ("NO_DECISION", |d| {
        Error::InvalidInput(format!("unknown decision {d}"))
    }),
    ("CONFLICT", |d| {
        let [expected, current] = numbers(d);
        Error::Conflict { expected, current }
    }),
    ("TOO_LARGE", |d| {
        let [size, limit] = numbers(d);
        Error::TooLarge {
            what: "payload",
            size: size as usize,
            limit: limit as usize,
        }
    }),
    ("BAD_RANGE", |d| {
        let [from, to] = numbers(d);
        let detail = d.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
        Error::BadRange { from, to, detail }
    }),
    ("EXISTS", |d| Error::AlreadyExists(d.to_string())),
    ("NOT_DECIDED", |d| Error::NotLive {
        sid: d.to_string(),
        waited: Duration::ZERO,
        no_daemon_yet: false,
    }),
    ("BAD_INPUT", |d| Error::InvalidInput(d.to_string())),
    ("FENCED", |d| {
        let [token, current] = numbers(d);
        let holder = d.split_whitespace().nth(2).filter(|h| *h != "-");
        Error::Fenced {
            token,
            current,
            holder: holder.map(str::to_string),
        }
    }),
    ("LEASED", |d| {
        let mut words = d.split_whitespace();
        let holder = words.next().unwrap_or_default().to_string();
        let token = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        let expires_at = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        Error::Leased {
            holder,
            token,
            expires_at,
            waited: None,
        }
    }),
    ("RUN_GONE", |d| Error::RunGone(d.to_string())),
    ("ARGS_DIFFER", |d| {
        let mut words = d.split_whitespace();
        let call = words.next().unwrap_or_default();
        let digest = words.next().unwrap_or_default();
        Error::InvalidInput(format!(
            "tool call {call} was begun with other arguments (digest {digest}); use a new tool call id for new arguments"
        ))
    }),
];

/// True when Redis answered `OOM` (also as one command of a pipeline, or from inside a
/// script, whose error keeps the code).
fn is_oom(err: &redis::RedisError) -> bool {
    err.code() == Some("OOM")
        || err
            .clone()
            .into_server_errors()
            .is_some_and(|errs| errs.iter().any(|(_, e)| e.code() == "OOM"))
}

/// The typed error for a Lua error `code` with its `detail`; `None` for a code no script raises.
fn lua_code(code: &str, detail: &str) -> Option<Error> {
    LUA_CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, make)| make(detail.trim()))
}

/// The first two words of a Lua error's detail as numbers (0 when absent).
fn numbers(detail: &str) -> [u64; 2] {
    let mut words = detail.split_whitespace().map(|w| w.parse().unwrap_or(0));
    [words.next().unwrap_or(0), words.next().unwrap_or(0)]
}

/// [`Error::TooLarge`] naming `what` when `size` passes `limit`: the one size check every
/// payload goes through before Redis is touched.
pub(crate) fn within_limit(what: &'static str, size: usize, limit: usize) -> Result<()> {
    if size > limit {
        return Err(Error::TooLarge { what, size, limit });
    }
    Ok(())
}
impl Error {
    /// [`Error::Redis`] with a message and no underlying error.
    pub fn redis(message: impl Into<String>) -> Error {
        Error::Redis {
            message: message.into(),
            source: None,
        }
    }

    /// [`Error::RedisUnavailable`] with a message and no underlying error.
    pub fn unavailable(message: impl Into<String>) -> Error {
        Error::RedisUnavailable {
            message: message.into(),
            retry_safe: true,
            source: None,
        }
    }

    /// [`Error::Postgres`] with a message and no underlying error.
    pub fn postgres(message: impl Into<String>) -> Error {
        Error::Postgres {
            message: message.into(),
            source: None,
        }
    }

    /// [`Error::Sqlite`] with a message and no underlying error.
    pub fn sqlite(message: impl Into<String>) -> Error {
        Error::Sqlite {
            message: message.into(),
            source: None,
        }
    }

    /// [`Error::Io`] with a message and no underlying error.
    pub fn io(message: impl Into<String>) -> Error {
        Error::Io {
            message: message.into(),
            source: None,
        }
    }

    /// Maps a redis-rs error to a typed error, decoding the stable codes our Lua scripts raise
    /// (`CODE detail...`).
    pub(crate) fn from_redis(err: redis::RedisError) -> Self {
        if let Some(code) = err.code() {
            if let Some(typed) = lua_code(code, err.detail().unwrap_or("")) {
                return typed;
            }
        }
        if is_oom(&err) {
            return Error::Backpressure {
                message: err.to_string(),
                source: Some(Box::new(err)),
            };
        }
        // Refused before running anything: loading its data after a restart, a cluster
        // that cannot serve the slot now, a node that became a replica (a failover; a
        // replica writes nothing), or a blocking read its node ended when it became a
        // replica (UNBLOCKED). Safe to send again.
        let refused = err.code() == Some("UNBLOCKED")
            || matches!(
                err.kind(),
                redis::ErrorKind::Server(
                    redis::ServerErrorKind::BusyLoading
                        | redis::ServerErrorKind::TryAgain
                        | redis::ServerErrorKind::ClusterDown
                        | redis::ServerErrorKind::MasterDown
                        | redis::ServerErrorKind::ReadOnly
                )
            );
        if refused
            || err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout()
        {
            Error::RedisUnavailable {
                message: err.to_string(),
                // A transport failure may come after the command reached Redis.
                retry_safe: refused,
                source: Some(Box::new(err)),
            }
        } else {
            Error::Redis {
                message: err.to_string(),
                source: Some(Box::new(err)),
            }
        }
    }

    /// The code of the error Redis answered with (`NOGROUP`, `BUSYGROUP`, ...), also when it
    /// came from one command of a pipeline; `None` for other errors.
    pub fn server_code(&self) -> Option<String> {
        let Error::Redis {
            source: Some(source),
            ..
        } = self
        else {
            return None;
        };
        let err = source.downcast_ref::<redis::RedisError>()?;
        err.code().map(String::from).or_else(|| {
            err.clone()
                .into_server_errors()
                .and_then(|errs| errs.first().map(|(_, e)| e.code().to_string()))
        })
    }

    /// True when the live tier is full and refused the write ([`Error::Backpressure`]).
    pub fn is_backpressure(&self) -> bool {
        matches!(self, Error::Backpressure { .. })
    }

    /// True when the spill daemon's SQLite file can no longer be used
    /// ([`Error::DatabaseUnusable`]): the daemon stops rather than retrying.
    pub fn is_database_unusable(&self) -> bool {
        matches!(self, Error::DatabaseUnusable { .. })
    }

    /// Maps the text `CODE detail` a batch script returns for one failed item (the same
    /// codes the scripts raise) to a typed error.
    pub(crate) fn from_script_reply(text: &str) -> Error {
        let (code, detail) = text.split_once(' ').unwrap_or((text, ""));
        lua_code(code, detail).unwrap_or_else(|| Error::redis(text))
    }

    /// This error as handed to each caller of a batch that failed as a whole: the same
    /// kind for `RedisUnavailable` (with its retry safety) and `Backpressure`, otherwise a
    /// [`Error::Redis`] with the same message; the source stays with none of them.
    pub(crate) fn for_each_caller(&self) -> Error {
        match self {
            Error::RedisUnavailable {
                message,
                retry_safe,
                ..
            } => Error::RedisUnavailable {
                message: message.clone(),
                retry_safe: *retry_safe,
                source: None,
            },
            Error::Backpressure { message, .. } => Error::Backpressure {
                message: message.clone(),
                source: None,
            },
            other => Error::redis(other.to_string()),
        }
    }

    /// True when a transport failure or timeout talking to Redis caused it.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::RedisUnavailable { .. })
    }

    /// Whether this is the PostgreSQL durable tier out of reach (refused, closed, shutting
    /// down or starting up: SQLSTATE classes 08 and 57P) rather than a statement it
    /// rejected: not about one partition, so the daemon's pass fails as a whole and backs off.
    #[cfg(feature = "spill")]
    pub(crate) fn is_durable_unreachable(&self) -> bool {
        let Error::Postgres {
            source: Some(source),
            ..
        } = self
        else {
            return false;
        };
        let unreachable = |e: &tokio_postgres::Error| match e.code() {
            Some(code) => code.code().starts_with("08") || code.code().starts_with("57P"),
            None => true,
        };
        if let Some(e) = source.downcast_ref::<tokio_postgres::Error>() {
            return unreachable(e);
        }
        match source.downcast_ref::<deadpool_postgres::PoolError>() {
            Some(deadpool_postgres::PoolError::Backend(e)) => unreachable(e),
            Some(_) => true,
            None => false,
        }
    }

    /// Whether the same call can be sent again without being applied twice: a Redis that
    /// could not be reached before anything was sent, and the retryable wait for a daemon
    /// ([`Error::NotLive`]: nothing was written).
    pub fn is_retry_safe(&self) -> bool {
        match self {
            Error::RedisUnavailable { retry_safe, .. } => *retry_safe,
            Error::NotLive { .. } => true,
            _ => false,
        }
    }

    /// The same error marked safe to retry (nothing reached Redis, or the call is idempotent).
    pub(crate) fn into_retry_safe(self) -> Error {
        match self {
            Error::RedisUnavailable {
                message, source, ..
            } => Error::RedisUnavailable {
                message,
                retry_safe: true,
                source,
            },
            other => other,
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
            other => Error::RedisUnavailable {
                message: other.to_string(),
                retry_safe: true, // no connection: nothing was sent
                source: Some(Box::new(other)),
            },
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

#[cfg(feature = "spill")]
impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        Error::Sqlite {
            message: err.to_string(),
            source: Some(Box::new(err)),
        }
    }
}

#[cfg(feature = "spill")]
impl From<tokio_postgres::Error> for Error {
    fn from(err: tokio_postgres::Error) -> Self {
        Error::Postgres {
            message: postgres_detail(&err),
            source: Some(Box::new(err)),
        }
    }
}

/// What a PostgreSQL error says, in one line: the server's own text with its SQLSTATE
/// (`as_db_error` says more than "db error"), else the client's with its cause ("error
/// connecting to server: Connection refused (os error 111)").
#[cfg(feature = "spill")]
pub(crate) fn postgres_detail(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return format!("{}: {}", db.code().code(), db.message());
    }
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(err);
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Error::Io {
            message: err.to_string(),
            source: Some(Box::new(err)),
        }
    }
}

/// [`Error::NotLive`]'s message.
fn not_live(sid: &str, waited: &Duration, no_daemon_yet: bool) -> String {
    if no_daemon_yet {
        format!("session {sid} is not live in Redis and the namespace has no spill daemon yet (none bound it to a durable tier in this Redis, none runs); start one with `agentstate spill`, then retry")
    } else {
        format!("session {sid} is not live in Redis and no spill daemon answered for it within {waited:?} (SQLite may hold its history); start one with `agentstate spill`, or run `agentstate restore {sid}`")
    }
}

/// `ms` since the epoch as `YYYY-MM-DD HH:MM:SS` UTC: how errors and the console show a time.
pub(crate) fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// Every code a script in `lua/` can raise has a mapping, and every mapping is raised by
    /// some script (no dead arms).
    #[test]
    fn lua_codes_and_mappings_agree() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lua");
        let mut raised = BTreeSet::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for part in text.split("fail('").skip(1) {
                raised.insert(part.split('\'').next().unwrap().to_string());
            }
        }
        let mapped: BTreeSet<String> = super::LUA_CODES
            .iter()
            .map(|(c, _)| c.to_string())
            .collect();
        assert_eq!(raised, mapped);
        for (code, make) in super::LUA_CODES {
            let err = make("7 9 why");
            assert!(
                !matches!(err, super::Error::Redis { .. }),
                "{code} maps to a generic error"
            );
        }
    }
}
