//! The wording of the CLI's `error: ...` line: what failed, then (after ` — `) the next step.
//! The library's errors say what happened; this module knows where the command ran (the
//! Redis address, whether it was a private redis-server, the verb) and says what to do.
//! Always one line.

use std::path::PathBuf;

use agentstate::Error;

/// Where the command ran, filled in as it gets there; read when it fails.
#[derive(Debug, Default)]
pub struct Situation {
    /// The Redis URL the command uses (or was told to use), once known.
    pub url: Option<String>,
    /// True when the command runs on a private redis-server of its own.
    pub private: bool,
    /// The verb path, e.g. `msg append`.
    pub verb: String,
    /// The SQLite file.
    pub db: PathBuf,
}

/// How to get a Redis, for lines that say none answers.
const START_ONE: &str =
    "start one with `agentstate server` (or `docker compose up -d redis`), or pass --redis URL";

/// The one line printed after `error: ` for `err`.
pub fn line(err: &Error, at: &Situation) -> String {
    let text = match err {
        Error::RedisUnavailable {
            message,
            retry_safe,
            ..
        } => match &at.url {
            _ if message == super::NO_REDIS_HELP => message.clone(),
            None => message.clone(),
            Some(url) => {
                let addr = agentstate::address::address(url);
                let reason = reason(message);
                if reason.to_ascii_lowercase().contains("certificate") {
                    format!("Redis at {addr} presented a TLS certificate this machine does not trust: {reason} — for a private CA, set SSL_CERT_FILE=/path/to/ca.pem (PEM); `#insecure` at the end of a rediss:// URL skips verification (tests only)")
                } else if *retry_safe {
                    format!("cannot reach Redis at {addr}: {reason} — {START_ONE}")
                } else {
                    format!("lost Redis at {addr} during the call: {reason}; the call may have been applied — check Redis answers (`redis-cli -u {} ping`), then repeat the call only if it is safe to repeat", agentstate::address::redacted(url))
                }
            }
        },
        Error::Redis { message, .. } => redis_error(message, at),
        Error::UnknownSession(detail) => {
            let mut text = format!("unknown session {detail}");
            if at.private {
                text.push_str(" — this command ran on a fresh private redis-server that holds nothing from earlier commands; keep one running with `agentstate server` (or `docker compose up -d redis`)");
            } else if !detail.contains("(not in") {
                text.push_str(" — `agentstate session list` lists the sessions; `agentstate session create --id ...` makes one");
            }
            text
        }
        Error::Conflict { expected, current } => format!(
            "conflict: expected {expected}, current is {current} — another writer got there first; read the current state and retry against {current}"
        ),
        Error::BadRange { from, to, detail } => format!(
            "bad seq range {from} to {to}: {detail} — `agentstate msg list <session> --all` shows the seqs"
        ),
        Error::AlreadyExists(what) => format!(
            "{what} already exists — choose another --id, or leave --id out for a generated one"
        ),
        Error::SpawnDepthExceeded { .. } => {
            format!("{err} — create the sub-agent under a shallower parent")
        }
        Error::TooLarge { .. } => format!(
            "{err} — keep large payloads elsewhere and store a reference (limits: message 1 MiB, working value 512 KiB, state 16 MiB)"
        ),
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
        Error::NamespaceMismatch(_) => format!(
            "{err} — a namespace's partition count is fixed: pass its --partitions, or use another --prefix"
        ),
        Error::OutOfMemory { .. } => format!(
            "Redis at {} is out of memory (maxmemory, noeviction) and refused the write; nothing was written — free memory (is `agentstate spill` running and trimming the streams?) or raise maxmemory (`redis-cli CONFIG SET maxmemory ...`), then retry",
            at.url.as_deref().map(agentstate::address::address).unwrap_or_default()
        ),
        Error::DatabaseUnusable { .. } => format!(
            "{err} — the daemon stopped and committed nothing more; Redis still holds every entry SQLite has not committed (the streams are trimmed only below the last commit). Put the original file back (or restore it from a backup) and start `agentstate spill` again"
        ),
        Error::Sqlite { message, .. } => format!(
            "SQLite file {}: {message} — check --db (env AGENTSTATE_DB) names a writable file",
            at.db.display()
        ),
        other => other.to_string(),
    };
    one_line(&text)
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
    let addr = at
        .url
        .as_deref()
        .map(agentstate::address::address)
        .unwrap_or_default();
    let upper = message.to_ascii_uppercase();
    if upper.contains("NOAUTH") {
        format!("Redis at {addr} requires a password — put it in the URL: redis://[user]:password@host:port")
    } else if upper.contains("WRONGPASS") || upper.contains("AUTHENTICATION") {
        format!("Redis at {addr} refused the user or password: {message} — check user:password in --redis (redis://user:password@host:port)")
    } else if upper.contains("NOPERM") {
        format!("Redis at {addr} refused a command to this user: {message} — grant the ACL user the namespace's keys and the commands agentstate sends (README \"Least privilege\" gives the `ACL SETUSER` line: `~<prefix>:*` and the command list)")
    } else if message.contains("did not parse") || message.contains("InvalidClientConfig") {
        format!(
            "{} is not a usable Redis URL: {message} — {URL_FORMS}",
            at.url
                .as_deref()
                .map(agentstate::address::redacted)
                .unwrap_or_default()
        )
    } else {
        format!("Redis at {addr} answered with an error: {message}")
    }
}

/// The URL forms --redis accepts.
pub const URL_FORMS: &str = "use redis://[user:password@]host:port[/db], rediss://... for TLS, or a cluster seed list (redis://h1:p1,redis://h2:p2)";

/// `text` on one line: line breaks become `; `.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
