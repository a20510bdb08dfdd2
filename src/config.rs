//! Configuration: the namespace (prefix, partitions), TTLs, payload limits and waits.

use std::time::Duration;

/// The longest idle TTL a session may have (10 years): far beyond any idle time, and well
/// inside what Redis' EXPIRE accepts.
pub const MAX_TTL_SECS: u64 = 10 * 365 * 24 * 3600;

/// Checks an idle TTL in seconds is within 1..=[`MAX_TTL_SECS`].
pub fn check_ttl(secs: u64) -> crate::error::Result<()> {
    if (1..=MAX_TTL_SECS).contains(&secs) {
        Ok(())
    } else {
        Err(crate::error::Error::InvalidInput(format!(
            "session ttl {secs} s: expected 1 to {MAX_TTL_SECS} s"
        )))
    }
}

/// When a write call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// As soon as Redis holds the write (and its wal record).
    #[default]
    Live,
    /// Only once the spill daemon has committed the write to SQLite; fails with
    /// [`crate::Error::DurabilityTimeout`] after [`Config::durable_wait`].
    Durable,
}

/// Default Redis URL when neither `--redis` nor `AGENTSTATE_REDIS_URL` is given.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Default key prefix when neither `--prefix` nor `AGENTSTATE_PREFIX` is given.
pub const DEFAULT_PREFIX: &str = "as";
/// Default SQLite file of the spill daemon when neither `--db` nor `AGENTSTATE_DB` is given.
pub const DEFAULT_DB: &str = "./agentstate.db";

/// The environment variables every front end (the CLI, the Python package and its
/// adapters) reads, with one precedence: an explicit argument, else the variable, else the
/// default above.
pub mod env {
    /// The Redis URL (`--redis`, `Store(url)`).
    pub const REDIS_URL: &str = "AGENTSTATE_REDIS_URL";
    /// The spill daemon's SQLite file (`--db`, `SpillDaemon(db=...)`).
    pub const DB: &str = "AGENTSTATE_DB";
    /// The namespace's key prefix (`--prefix`, `prefix=`).
    pub const PREFIX: &str = "AGENTSTATE_PREFIX";
    /// Worker threads of the CLI's async runtime (`--threads`; the Python package does not
    /// read it: its runtime keeps one thread per core).
    pub const THREADS: &str = "AGENTSTATE_THREADS";

    /// The variable's value; an empty variable counts as unset.
    pub fn var(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    /// `given`, else the variable `name`, else `default`.
    pub fn resolve(given: Option<String>, name: &str, default: &str) -> String {
        given
            .or_else(|| var(name))
            .unwrap_or_else(|| default.to_string())
    }
}

/// Where keys live: every key starts with `prefix`, ids are spread over `partitions`.
///
/// Both are fixed for the life of a namespace and recorded in `<prefix>:config`; connecting
/// with a different partition count is a [`crate::Error::NamespaceMismatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Key prefix, default `as`.
    pub prefix: String,
    /// Number of partitions (hash-tag slots), default 16.
    pub partitions: u32,
}

impl Namespace {
    /// A new identity for the durable tier a namespace is first bound to: 128 random bits in
    /// hex, recorded once in the tier and in `<prefix>:config` (`crate::spill::binding`).
    #[cfg(feature = "spill")]
    pub(crate) fn new_identity() -> String {
        format!("{:032x}", rand::random::<u128>())
    }

    /// The refusal of a durable tier that records namespace `recorded` to a process of this
    /// one: what differs (the prefix, the partition count, or both) and the rule, whose fix
    /// the front end words (`src/advice.rs`).
    #[cfg(feature = "spill")]
    pub(crate) fn tier_mismatch(&self, recorded: &Namespace) -> crate::Error {
        let differs = match (
            self.prefix != recorded.prefix,
            self.partitions != recorded.partitions,
        ) {
            (true, true) => "the prefix and the partition count differ",
            (true, false) => "the prefix differs",
            _ => "the partition count differs",
        };
        crate::Error::NamespaceMismatch(format!(
            "the durable tier records namespace {:?} with {} partitions, this process's is {:?} with {}: {differs}; {ONE_NAMESPACE}",
            recorded.prefix, recorded.partitions, self.prefix, self.partitions
        ))
    }
}

/// The rule a durable tier's [`Namespace::tier_mismatch`] states, and how the advice knows
/// the refusal for one.
#[cfg(any(feature = "spill", feature = "test-support"))]
pub(crate) const ONE_NAMESPACE: &str =
    "a durable tier (a SQLite file, a PostgreSQL database) holds the history of one namespace";

impl Default for Namespace {
    fn default() -> Self {
        Namespace {
            prefix: DEFAULT_PREFIX.into(),
            partitions: 16,
        }
    }
}

/// Size limits on payloads, checked in Rust before Redis is touched and again in Lua.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest message JSON, bytes (default 1 MiB).
    pub message: usize,
    /// Largest working-state value JSON, bytes (default 512 KiB).
    pub working_value: usize,
    /// Largest state snapshot (round state, checkpoint payload, user value), bytes (default 16 MiB).
    pub state: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            message: 1 << 20,
            working_value: 512 << 10,
            state: 16 << 20,
        }
    }
}

/// The default label position that names a user in a memory namespace (`("users", user_id,
/// ...)`), which [`crate::Store::forget_user`] erases by ([`Config::memory_user_label`]).
pub const MEMORY_USER_LABEL: usize = 1;

/// Everything a [`crate::Store`] needs to know besides the Redis connection itself.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Redis URL (`redis://`, `rediss://`, with user and password if ACLs are used).
    pub redis_url: String,
    /// Prefix and partition count.
    pub namespace: Namespace,
    /// Idle TTL given to new sessions (refreshed by every write), default 3600 s.
    pub session_ttl: Duration,
    /// Payload limits.
    pub limits: Limits,
    /// Deepest sub-agent allowed (root is 0), default 3.
    pub max_spawn_depth: u32,
    /// Connections in the shared pool.
    pub pool_size: usize,
    /// How long a command may take before the connection reports a timeout. Blocking stream
    /// reads add their own block time to this.
    pub response_timeout: Duration,
    /// How long a caller waits for a spill daemon to restore a session that is not live.
    pub restore_wait: Duration,
    /// How long a `Durable` write waits for SQLite to commit it.
    pub durable_wait: Duration,
    /// How long a call that is safe to repeat (reads, appends with an idempotency key)
    /// retries while Redis is unreachable (restarting, failing over) before it fails with
    /// [`crate::Error::RedisUnavailable`]; other calls fail at once.
    pub retry_wait: Duration,
    /// The label position that names a user in a long-term memory namespace (0: the first),
    /// which [`crate::Store::forget_user`] erases by; default
    /// [`MEMORY_USER_LABEL`], as in `("users", user_id, ...)`.
    pub memory_user_label: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            redis_url: DEFAULT_REDIS_URL.into(),
            namespace: Namespace::default(),
            session_ttl: Duration::from_secs(3600),
            limits: Limits::default(),
            max_spawn_depth: 3,
            pool_size: 16,
            response_timeout: Duration::from_secs(10),
            restore_wait: Duration::from_secs(5),
            durable_wait: Duration::from_secs(5),
            retry_wait: Duration::from_secs(5),
            memory_user_label: MEMORY_USER_LABEL,
        }
    }
}

impl Config {
    /// A default configuration pointing at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Config {
            redis_url: url.into(),
            ..Config::default()
        }
    }

    /// Sets the namespace prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.namespace.prefix = prefix.into();
        self
    }

    /// Sets the partition count.
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.namespace.partitions = partitions;
        self
    }

    /// Sets the default idle TTL of new sessions.
    pub fn session_ttl(mut self, ttl: Duration) -> Self {
        self.session_ttl = ttl;
        self
    }

    /// Sets the payload limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets how long calls that are safe to repeat retry while Redis is unreachable.
    pub fn retry_wait(mut self, wait: Duration) -> Self {
        self.retry_wait = wait;
        self
    }

    /// Sets the label position that names a user in a memory namespace.
    pub fn memory_user_label(mut self, label: usize) -> Self {
        self.memory_user_label = label;
        self
    }

    /// Sets how long callers wait for a daemon (restore and durable writes).
    pub fn daemon_wait(mut self, wait: Duration) -> Self {
        self.restore_wait = wait;
        self.durable_wait = wait;
        self
    }
}
