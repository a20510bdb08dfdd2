//! The wording of an error for the person who hit it: what failed, then (after ` — `) the
//! next step. The library's errors say what happened; a [`Situation`] knows where the call
//! ran (the Redis address, the namespace, the SQLite file, whether it was a private
//! redis-server) and which front end made it ([`Front`]: the CLI names its flags, Python its
//! arguments), so the next step is one the reader can run as written. Always one line.

use std::path::PathBuf;

use crate::address::{address, redacted};
use crate::config::{DEFAULT_DB, DEFAULT_PREFIX, ONE_NAMESPACE};
use crate::error::{utc, Error};

/// Which front end made the call: decides how a next step names a setting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Front {
    /// The `agentstate` command line (`--redis`, `--prefix`, ...).
    #[default]
    Cli,
    /// The Python package (`Store(url, prefix=...)`, `SpillDaemon(...)`).
    Python,
    /// The Node package (`Store.connect({ url, prefix })`, `new SpillDaemon({ ... })`).
    Node,
}

/// Where the call ran, filled in as it gets there; read when it fails.
#[derive(Debug, Default)]
pub struct Situation {
    /// The front end that made the call.
    pub front: Front,
    /// The Redis URL the call uses (or was told to use), once known.
    pub url: Option<String>,
    /// True when the command runs on a private redis-server of its own.
    pub private: bool,
    /// The CLI's verb path, e.g. `msg append` (empty elsewhere).
    pub verb: String,
    /// The namespace's key prefix (empty: the default).
    pub prefix: String,
    /// The spill daemon's SQLite file (empty: the default).
    pub db: PathBuf,
}

impl Situation {
    /// The command that starts a spill daemon for this namespace, with the options that
    /// differ from the defaults (`--redis`, `--prefix`, `--db`).
    pub fn spill_command(&self) -> String {
        self.command("spill")
    }

    /// `agentstate <verb>` with this namespace's options that differ from the defaults.
    fn command(&self, verb: &str) -> String {
        let mut cmd = format!("agentstate {verb}");
        if let Some(url) = self.url.as_deref().filter(|_| !self.private) {
            cmd.push_str(&format!(" --redis {}", redacted(url)));
        }
        if !self.prefix.is_empty() && self.prefix != DEFAULT_PREFIX {
            cmd.push_str(&format!(" --prefix {}", self.prefix));
        }
        if !self.db.as_os_str().is_empty() && self.db != std::path::Path::new(DEFAULT_DB) {
            let db = crate::address::redacted_db(&self.db.to_string_lossy());
            cmd.push_str(&format!(" --db {db}"));
        }
        cmd
    }

    /// How to run a daemon: the command, and for Python the in-process way too.
    fn start_daemon(&self) -> String {
        match self.front {
            Front::Cli => format!("start one with `{}`", self.spill_command()),
            Front::Python => {
                let prefix = if self.prefix.is_empty() || self.prefix == DEFAULT_PREFIX {
                    String::new()
                } else {
                    format!(", prefix={:?}", self.prefix)
                };
                format!(
                    "start one with `{}` (the command this package installs), or in this process with `agentstate.SpillDaemon(url, db{prefix}).start()`",
                    self.spill_command()
                )
            }
            Front::Node => {
                let prefix = if self.prefix.is_empty() || self.prefix == DEFAULT_PREFIX {
                    String::new()
                } else {
                    format!(", prefix: {:?}", self.prefix)
                };
                format!(
                    "start one with `npx {}` (the command this package installs), or in this process with `await new SpillDaemon({{ url, db{prefix} }}).start()`",
                    self.spill_command()
                )
            }
        }
    }

    /// How this front end names a setting: `--prefix` or `prefix=`.
    fn setting(&self, name: &str) -> String {
        match self.front {
            Front::Cli => format!("--{name}"),
            Front::Python => format!("{name}="),
            Front::Node => format!("`{}` option", camel(name)),
        }
    }

    /// The Redis address, for messages (empty when unknown).
    fn addr(&self) -> String {
        self.url.as_deref().map(address).unwrap_or_default()
    }
}

/// The one line that says what failed and what to do for `err`, where it happened.
pub fn line(err: &Error, at: &Situation) -> String {
    let python = at.front == Front::Python;
    let node = at.front == Front::Node;
    let text = match err {
        Error::RedisUnavailable {
            message,
            retry_safe,
            ..
        } => match &at.url {
            _ if message.contains(" — ") => message.clone(),
            None => message.clone(),
            Some(url) => {
                let addr = address(url);
                let reason = reason(message);
                if reason.to_ascii_lowercase().contains("certificate") {
                    format!("Redis at {addr} presented a TLS certificate this machine does not trust: {reason} — for a private CA, set SSL_CERT_FILE=/path/to/ca.pem (PEM); `#insecure` at the end of a rediss:// URL skips verification (tests only)")
                } else if *retry_safe {
                    let start = match at.front {
                        Front::Cli => "start one with `agentstate server` (or `docker compose up -d redis`), or pass --redis URL".to_string(),
                        Front::Python => format!("start one with `agentstate server` (a command this package installs) or `docker compose up -d redis`, or connect elsewhere: Store(url) or {}", crate::config::env::REDIS_URL),
                        Front::Node => format!("start one with `npx agentstate server` (a command this package installs) or `docker compose up -d redis`, or connect elsewhere: Store.connect({{ url }}) or {}", crate::config::env::REDIS_URL),
                    };
                    format!("cannot reach Redis at {addr}: {reason} — {start}")
                } else {
                    format!("lost Redis at {addr} during the call: {reason}; the call may have been applied — check Redis answers (`redis-cli -u {} ping`), then repeat the call only if it is safe to repeat (an append with an idempotency key is)", redacted(url))
                }
            }
        },
        Error::Redis { message, .. } => redis_error(message, at),
        Error::UnknownSession(detail) => {
            let mut text = format!("unknown session {detail}");
            if at.private {
                text.push_str(" — this command ran on a fresh private redis-server that holds nothing from earlier commands; keep one running with `agentstate server` (or `docker compose up -d redis`)");
            } else if !detail.contains("(not in") {
                text.push_str(if python {
                    " — store.list_sessions() lists the sessions; store.create_session(id) makes one"
                } else if node {
                    " — await store.listSessions() lists the sessions; await store.createSession({ id }) makes one"
                } else {
                    " — `agentstate session list` lists the sessions; `agentstate session create --id ...` makes one"
                });
            }
            text
        }
        Error::NotLive {
            sid,
            no_daemon_yet: true,
            ..
        } => format!(
            "session {sid} is not live in Redis at {}, and the namespace has no spill daemon yet: none has bound it to a durable tier in this Redis (a new namespace, or a Redis that lost its data) and none is running — {}, then retry (the call is safe to repeat; a history the durable tier holds comes back through it)",
            at.addr(),
            at.start_daemon()
        ),
        Error::NotLive { sid, waited, .. } => format!(
            "session {sid} is not live in Redis at {} and no spill daemon answered for it within {waited:?} (the namespace's durable tier may hold its history, so it is neither restored nor created anew) — {} on the namespace's durable tier, then retry (the call is safe to repeat); or, where that tier is, restore it without a daemon: `{}`",
            at.addr(),
            at.start_daemon(),
            at.command(&format!("restore {sid}"))
        ),
        Error::DurabilityTimeout(waited) => format!(
            "durable write not confirmed by the durable tier within {waited:?}: Redis has it, but no spill daemon committed it in time — is one running for this namespace, and can it reach its SQLite file or PostgreSQL (its log says)? {}",
            at.start_daemon()
        ),
        Error::WriteLost(what) => format!(
            "Redis at {} lost {what} before a spill daemon committed it to SQLite (Redis was flushed, or restarted without its data): it is in neither — repeat the write; with an idempotency key a repeat cannot apply it twice",
            at.addr()
        ),
        Error::Conflict { expected, current } => format!(
            "conflict: expected {expected}, current is {current} — another writer got there first; read the current state and retry against {current}"
        ),
        Error::BadRange { from, to, detail } => format!(
            "bad seq range {from} to {to}: {detail} — {} shows the seqs",
            if python {
                "store.messages(sid, all=True)"
            } else if node {
                "store.loadMessages(sid, { all: true })"
            } else {
                "`agentstate msg list <session> --all`"
            }
        ),
        Error::AlreadyExists(what) => format!(
            "{what} already exists — choose another {id}, or leave {id} out for a generated one",
            id = if python || node { "id" } else { "--id" }
        ),
        Error::SpawnDepthExceeded { .. } => {
            format!("{err} — create the sub-agent under a shallower parent")
        }
        Error::TooLarge { what, .. } => match at.front {
            Front::Cli => format!(
                "{err} — keep large payloads elsewhere and store a reference (limits: message 1 MiB, working value 512 KiB, state 16 MiB; a program sets them: `Config::limits`, or `Store(max_message_bytes=...)` in Python)"
            ),
            Front::Python => format!(
                "{err} — keep large payloads elsewhere and store a reference, or raise the limit: Store(..., {}=N)",
                limit_setting(what)
            ),
            Front::Node => format!(
                "{err} — keep large payloads elsewhere and store a reference, or raise the limit: Store.connect({{ ..., {}: N }})",
                camel(limit_setting(what))
            ),
        },
        Error::MalformedJson { .. } if python => {
            format!("{err} — pass a value made of dict, list, str, int, float, bool and None")
        }
        Error::MalformedJson { .. } if node => {
            format!("{err} — pass a value made of objects, arrays, strings, finite numbers, booleans and null")
        }
        Error::MalformedJson { .. } => format!(
            "{err} — give one JSON value, e.g. '{{\"step\":1}}' or '\"text\"' (quoted for the shell), or `-` to read it from stdin, `@FILE` from a file"
        ),
        // The CLI's own checks already end with their next step: printed as they are.
        Error::InvalidInput(message) | Error::Io { message, .. } if message.contains(" — ") => {
            message.clone()
        }
        Error::InvalidInput(_) if !at.verb.is_empty() => {
            format!("{err} — see `agentstate {} --help`", at.verb)
        }
        // A binding refusal names its own next step.
        Error::NamespaceMismatch(message) if message.contains(" — ") => err.to_string(),
        Error::NamespaceMismatch(message) if message.contains(ONE_NAMESPACE) => format!(
            "{err} — give this namespace a durable tier of its own (another {}), or use the prefix and partition count that tier records ({}, {})",
            at.setting("db"),
            at.setting("prefix"),
            at.setting("partitions")
        ),
        Error::NamespaceMismatch(_) => format!(
            "{err} — a namespace's partition count is fixed: pass its {}, or use another {}",
            at.setting("partitions"),
            at.setting("prefix")
        ),
        Error::Leased {
            holder,
            token,
            expires_at,
            waited,
        } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let secs = ((expires_at - now).max(0) + 999) / 1000;
            let held = format!(
                "the session's run lease is held by {holder} (token {token}) until {} UTC (in {secs} s) unless renewed",
                utc(*expires_at)
            );
            let next = match (waited, &at.front) {
                (Some(w), _) => format!(
                    "; wait= ({} s) ran out while it was held — wait longer (a larger wait=), or check that {holder} still runs: it renews the lease while it works",
                    w.as_secs_f64()
                ),
                (None, Front::Python) => " (no wait= was given: asked once) — store.run_lease(sid, wait=SECONDS) keeps trying until it is free; or try again once its holder releases it or it expires".to_string(),
                (None, Front::Node) => " — try again once its holder releases it or it expires; await store.leaseHolder(sid) shows who holds it".to_string(),
                (None, Front::Cli) => " — try again once its holder releases it or it expires; `agentstate lease show <session>` shows who holds it".to_string(),
            };
            format!("{held}{next}")
        }
        Error::Fenced {
            holder: Some(holder),
            ..
        } => format!("{err} — stop this run: {holder} runs the session now"),
        Error::Fenced { holder: None, .. } => format!(
            "{err} — stop this run; to run again, acquire the lease anew ({}) and write with its token",
            match at.front {
                Front::Python => "store.run_lease(sid) or store.acquire_lease(sid, owner, ttl_ms)",
                Front::Node => "await store.acquireLease(sid, owner, ttlMs)",
                Front::Cli => "`agentstate lease acquire <session> --owner ... --ttl-ms ...`",
            }
        ),
        Error::Backpressure { .. } => format!(
            "backpressure: Redis at {} is full (maxmemory reached, noeviction) and refused the write; nothing was written — the spill daemon frees room by trimming what its durable tier or its spool holds: check `agentstate spill` runs, reaches its durable tier, and has disk for its spool (`agentstate stats` shows the wal it still holds and the spool), or raise maxmemory (`redis-cli CONFIG SET maxmemory ...`), then retry",
            at.addr()
        ),
        Error::DatabaseUnusable { .. } => format!(
            "{err} — the daemon stopped and committed nothing more; Redis still holds every entry SQLite has not committed (the streams are trimmed only below the last commit). Put the original file back (or restore it from a backup) and start `agentstate spill` again"
        ),
        Error::Sqlite { message, .. } => format!(
            "SQLite file {}: {message} — check {} (env {}) names a writable file",
            crate::address::redacted_db(&at.db.to_string_lossy()),
            at.setting("db"),
            crate::config::env::DB
        ),
        Error::Postgres { .. } => format!(
            "{err} — check {} (env {}): a postgres://user:password@host:port/database URL of a database this role may write; Redis keeps every entry PostgreSQL has not committed",
            at.setting("db"),
            crate::config::env::DB
        ),
        other => other.to_string(),
    };
    one_line(&text)
}

/// The Python `Store` option that sets the limit a [`Error::TooLarge`] names: messages and
/// compact notes have the message limit, working values theirs, and everything stored as
/// state (checkpoints, a graph's checkpoints and pending writes) the state limit. A refusal
/// inside a script does not say which payload it measured: the three are named.
fn limit_setting(what: &str) -> &'static str {
    match what {
        "message" | "compact note" => "max_message_bytes",
        "working value" => "max_working_value_bytes",
        "payload" => "max_message_bytes / max_working_value_bytes / max_state_bytes",
        _ => "max_state_bytes",
    }
}

/// A snake_case name as the Node package spells it (`max_message_bytes` ->
/// `maxMessageBytes`): its settings, and the keys of the objects it returns.
pub fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The transport's reason in lower case, without the OS error number.
fn reason(message: &str) -> String {
    let trimmed = match message.find(" (os error") {
        Some(i) => &message[..i],
        None => message,
    };
    let mut chars = trimmed.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Error replies and client-side failures that are not about reachability.
fn redis_error(message: &str, at: &Situation) -> String {
    let addr = at.addr();
    let upper = message.to_ascii_uppercase();
    if upper.contains("NOAUTH") {
        format!("Redis at {addr} requires a password — put it in the URL: redis://[user]:password@host:port")
    } else if upper.contains("WRONGPASS") || upper.contains("AUTHENTICATION") {
        format!("Redis at {addr} refused the user or password: {message} — check user:password in the URL (redis://user:password@host:port)")
    } else if upper.contains("NOPERM") {
        format!("Redis at {addr} refused a command to this user: {message} — grant the ACL user the namespace's keys and the commands agentstate sends (docs/security.md, \"Least privilege\", gives the `ACL SETUSER` line: `~<prefix>:*` and the command list)")
    } else if message.contains("did not parse") || message.contains("InvalidClientConfig") {
        format!(
            "{} is not a usable Redis URL: {message} — {URL_FORMS}",
            at.url.as_deref().map(redacted).unwrap_or_default()
        )
    } else {
        format!("Redis at {addr} answered with an error: {message}")
    }
}

/// The URL forms a Redis URL may take.
pub const URL_FORMS: &str = "use redis://[user:password@]host:port[/db], rediss://... for TLS, a cluster seed list (redis://h1:p1,redis://h2:p2), or Sentinels (redis+sentinel://h1:p1,h2:p2/SERVICE)";

/// `text` on one line: line breaks become `; `.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
