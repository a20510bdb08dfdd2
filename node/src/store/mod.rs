//! `NativeStore`: the Node face of `agentstate::Store`, wrapped by `Store` in `index.js`.
//! Every capability is an async method resolved on napi's tokio runtime, so the event loop
//! never waits for Redis; a failure rejects with the error `errors::to_napi` words. Objects
//! come back with camelCase keys at the top level (`createdAt`, `toolCalls`); the values
//! callers stored (metadata, working values, payloads) come back as stored.

use std::sync::Arc;
use std::time::Duration;

use agentstate::config::{env, DEFAULT_DB, DEFAULT_PREFIX, DEFAULT_REDIS_URL};
use agentstate::test_support::advice::{Front, Situation};
use agentstate::{Config, Durability};
use napi::Result;
use napi_derive::napi;
use serde_json::Value;

use crate::errors;

mod checkpoints;
mod decisions;
mod effects;
mod graphs;
mod inbox;
mod leases;
mod memory;
mod messages;
mod rounds;
mod sessions;
mod users;
mod working;

/// `Store.connect`'s options (every one optional).
#[napi(object)]
#[derive(Default)]
pub struct ConnectOptions {
    /// Redis URL; default `AGENTSTATE_REDIS_URL`, else redis://127.0.0.1:6379.
    pub url: Option<String>,
    /// Namespace prefix; default `AGENTSTATE_PREFIX`, else "as".
    pub prefix: Option<String>,
    /// The namespace's partition count (16).
    pub partitions: Option<u32>,
    /// Writes resolve once SQLite committed them (a spill daemon must run), not once Redis has them.
    pub durable: Option<bool>,
    /// Idle TTL of new sessions, seconds.
    pub session_ttl: Option<f64>,
    /// Connections in the pool.
    pub pool_size: Option<u32>,
    /// How long a read waits for a spill daemon to restore a session Redis lost, seconds.
    pub daemon_wait: Option<f64>,
    /// Largest message, bytes (1 MiB).
    pub max_message_bytes: Option<u32>,
    /// Largest working-state value, bytes (512 KiB).
    pub max_working_value_bytes: Option<u32>,
    /// Largest saved state, bytes (16 MiB).
    pub max_state_bytes: Option<u32>,
    /// The label position naming a user in a long-term memory namespace, which `forgetUser`
    /// erases by (0: the first; default 1, as in `["users", userId, ...]`).
    pub memory_user_label: Option<u32>,
}

/// A client of one agentstate namespace in one Redis (one connection pool shared by every
/// call).
#[napi]
pub struct NativeStore {
    store: agentstate::Store,
    /// Where this store's calls run, for the wording of their errors.
    at: Arc<Situation>,
}

/// Seconds as a duration, refusing negative, infinite and NaN values.
pub(crate) fn secs(what: &str, s: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| errors::invalid(format!("{what} must be a non-negative number of seconds")))
}

/// What the core has to say once per process (no spill daemon runs, so writes are not
/// durable), or null: the package emits it as a process warning.
#[napi]
pub fn take_durability_warning() -> Option<String> {
    agentstate::take_durability_warning()
}

/// The Redis URL and prefix of the options, else the environment, else the defaults (the
/// CLI's precedence): what `resolved` answers and every constructor uses.
#[napi]
pub fn resolved(url: Option<String>, prefix: Option<String>) -> Vec<String> {
    vec![
        env::resolve(url, env::REDIS_URL, DEFAULT_REDIS_URL),
        env::resolve(prefix, env::PREFIX, DEFAULT_PREFIX),
    ]
}

/// The situation errors of a front end at `url`/`prefix` are worded for; refuses a URL
/// that is not a Redis URL, naming `source`.
pub(crate) fn situation(
    source: &str,
    url: &str,
    prefix: &str,
    db: std::path::PathBuf,
) -> Result<Arc<Situation>> {
    if let Err(why) = agentstate::test_support::address::check(url) {
        return Err(errors::invalid(format!(
            "{source} {} is not a Redis URL: {why} — {}",
            agentstate::test_support::address::redacted(url),
            agentstate::test_support::advice::URL_FORMS
        )));
    }
    Ok(Arc::new(Situation {
        front: Front::Node,
        url: Some(url.to_string()),
        prefix: prefix.to_string(),
        db,
        ..Situation::default()
    }))
}

fn config(o: ConnectOptions) -> Result<(Config, Arc<Situation>)> {
    let source = if o.url.is_some() {
        "Store url"
    } else {
        env::REDIS_URL
    };
    let url = env::resolve(o.url, env::REDIS_URL, DEFAULT_REDIS_URL);
    let prefix = env::resolve(o.prefix, env::PREFIX, DEFAULT_PREFIX);
    let db = env::resolve(None, env::DB, DEFAULT_DB).into();
    let at = situation(source, &url, &prefix, db)?;
    let mut c = Config::new(url)
        .prefix(prefix)
        .partitions(o.partitions.unwrap_or(16));
    if let Some(t) = o.session_ttl {
        c = c.session_ttl(secs("sessionTtl", t)?);
    }
    if let Some(n) = o.pool_size {
        c.pool_size = (n as usize).max(1);
    }
    if let Some(w) = o.daemon_wait {
        c = c.daemon_wait(secs("daemonWait", w)?);
    }
    if let Some(label) = o.memory_user_label {
        c = c.memory_user_label(label as usize);
    }
    let mut limits = c.limits;
    for (name, given, limit) in [
        ("maxMessageBytes", o.max_message_bytes, &mut limits.message),
        (
            "maxWorkingValueBytes",
            o.max_working_value_bytes,
            &mut limits.working_value,
        ),
        ("maxStateBytes", o.max_state_bytes, &mut limits.state),
    ] {
        match given {
            Some(0) => {
                return Err(errors::invalid(format!(
                    "{name} must be a positive number of bytes"
                )))
            }
            Some(n) => *limit = n as usize,
            None => {}
        }
    }
    Ok((c.limits(limits), at))
}

/// Connects to Redis and checks the namespace (`prefix`, `partitions`).
#[napi]
pub async fn connect(options: Option<ConnectOptions>) -> Result<NativeStore> {
    let o = options.unwrap_or_default();
    let durable = if o.durable.unwrap_or(false) {
        Durability::Durable
    } else {
        Durability::Live
    };
    let (c, at) = config(o)?;
    let store = agentstate::Store::connect(c)
        .await
        .map_err(|e| errors::to_napi(e, &at))?;
    Ok(NativeStore {
        store: store.with_durability(durable),
        at,
    })
}

impl NativeStore {
    /// The core error `e` worded for this store.
    fn fail(&self, e: agentstate::Error) -> napi::Error {
        errors::to_napi(e, &self.at)
    }
}

#[napi]
impl NativeStore {
    /// A store sharing this one's pool whose writes resolve once Redis has them
    /// (`durable` false) or once SQLite committed them (true).
    #[napi]
    pub fn with_durability(&self, durable: bool) -> NativeStore {
        NativeStore {
            store: self.store.with_durability(if durable {
                Durability::Durable
            } else {
                Durability::Live
            }),
            at: Arc::clone(&self.at),
        }
    }

    /// True when writes wait for SQLite.
    #[napi(getter)]
    pub fn durable(&self) -> bool {
        self.store.durability() == Durability::Durable
    }

    /// The namespace prefix.
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.store.keys().prefix().to_string()
    }

    /// The namespace's partition count.
    #[napi(getter)]
    pub fn partitions(&self) -> u32 {
        self.store.keys().partitions()
    }

    /// The Redis URL this store connected to (any password shown as `***`).
    #[napi(getter)]
    pub fn url(&self) -> String {
        agentstate::test_support::address::redacted(&self.store.config().redis_url)
    }

    /// The payload limits in bytes: `{ message, workingValue, state }`.
    #[napi(getter)]
    pub fn limits(&self) -> Value {
        let l = self.store.config().limits;
        serde_json::json!({"message": l.message, "workingValue": l.working_value, "state": l.state})
    }
}

/// `value` serialized, its top-level keys in camelCase (`created_at` -> `createdAt`).
pub(crate) fn js<T: serde::Serialize>(value: &T) -> Value {
    camel_keys(serde_json::to_value(value).unwrap_or(Value::Null))
}

/// An object's top-level keys in camelCase; any other value as it is.
pub(crate) fn camel_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (agentstate::test_support::advice::camel(&k), v))
                .collect(),
        ),
        other => other,
    }
}

/// A u64 from the core as a JS number (seqs, versions and counts stay far below 2^53).
pub(crate) fn num(n: u64) -> i64 {
    n as i64
}

/// A non-negative JS integer for the core, refusing fractions and negatives.
pub(crate) fn whole(what: &str, n: f64) -> Result<u64> {
    if n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0 {
        Ok(n as u64)
    } else {
        Err(errors::invalid(format!(
            "{what} must be a non-negative integer, not {n}"
        )))
    }
}
