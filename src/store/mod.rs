//! [`Store`]: the handle agent processes share — the way to Redis ([`crate::connection`]: a
//! pool for one node, or a cluster connection), the namespace and the limits. Capability
//! methods live in their concept modules (`sessions`, `messages`, ...) as further
//! `impl Store` blocks, and call down into this floor: `group_commit` (concurrent writes share
//! round trips), `restore` (a call that finds its session gone asks the daemon for it) and
//! `admin` (the operators' handle, [`Admin`]).

use std::sync::Arc;

use redis::FromRedisValue;

use crate::backoff::Backoff;
use crate::config::{Config, Durability};
use crate::connection::{Backend, Connection};
use crate::error::{Error, Result};
use crate::keys::{Keys, SessionKeysCache};
use crate::scripts::ScriptCall;
use group_commit::lanes::Lanes;

mod admin;
pub(crate) mod group_commit;
mod restore;

pub use admin::Admin;
pub(crate) use restore::Want;

/// A cheap-to-clone handle on one agentstate namespace in one Redis.
///
/// All clones share one connection pool; hand clones to as many tasks as you like. Every
/// capability an agent uses is a method (sessions, messages, working state, checkpoints,
/// rounds, decisions, user data, graph logs, forks, consumers); what operators and tools call
/// is on [`Store::admin`].
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    /// When write calls return (see [`Durability`]).
    durability: Durability,
    /// The run lease token this handle's fenced writes carry (see [`Store::with_fence`]).
    fence: Option<u64>,
}

struct Inner {
    /// Shared by every task of the process; every connection is multiplexed.
    backend: Backend,
    /// Limits, TTLs and waits.
    config: Config,
    /// Key names of the namespace.
    keys: Keys,
    /// Group commit of hot-path writes: one lane per partition on a cluster, one on a node.
    lanes: Lanes,
    /// The keys of the sessions this store used lately.
    session_keys: SessionKeysCache,
    /// When a write of this store last looked for a running spill daemon
    /// ([`crate::durability`]): milliseconds since the process' first look, plus one (0:
    /// never).
    daemons_checked: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("namespace", &self.inner.config.namespace)
            .finish()
    }
}

/// Installs rustls' ring crypto provider once per process (redis-rs brings rustls without
/// one, and connecting to a `rediss://` URL without a provider panics).
fn install_tls_provider() {
    #[cfg(feature = "tls")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // Err means another provider is installed already: fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
    }
}

impl Store {
    /// Connects, checks Redis answers, and records or verifies the namespace in
    /// `<prefix>:config` (a different partition count is [`Error::NamespaceMismatch`]).
    ///
    /// ```no_run
    /// # async fn demo() -> agentstate::Result<()> {
    /// use agentstate::{Config, Store};
    /// let store = Store::connect(Config::new("redis://127.0.0.1:6379").prefix("myapp")).await?;
    /// let worker = store.clone(); // cheap: one pool shared by every clone
    /// # Ok(()) }
    /// ```
    pub async fn connect(config: Config) -> Result<Store> {
        if config.namespace.partitions == 0 {
            return Err(Error::InvalidInput("partitions must be at least 1".into()));
        }
        crate::keys::validate_id("prefix", &config.namespace.prefix)?;
        crate::config::check_ttl(config.session_ttl.as_secs())?;
        install_tls_provider();
        let backend = Backend::connect(&config).await?;
        let keys = Keys::new(&config.namespace.prefix, config.namespace.partitions);
        let lanes = Lanes::new(config.namespace.partitions, backend.is_cluster());
        let store = Store {
            inner: Arc::new(Inner {
                backend,
                config,
                keys,
                lanes,
                session_keys: SessionKeysCache::default(),
                daemons_checked: Default::default(),
            }),
            durability: Durability::Live,
            fence: None,
        };
        store.check_namespace().await?;
        Ok(store)
    }

    async fn check_namespace(&self) -> Result<()> {
        let mut conn = self.conn().await?;
        let key = self.keys().config();
        let wanted = self.keys().partitions();
        let (_, recorded): (i64, Option<u32>) = redis::pipe()
            .hset_nx(&key, "partitions", wanted)
            .hget(&key, "partitions")
            .query_async(&mut conn)
            .await?;
        match recorded {
            Some(p) if p != wanted => Err(Error::NamespaceMismatch(format!(
                "{key} records {p} partitions, this process is configured with {wanted}"
            ))),
            _ => Ok(()),
        }
    }

    /// Operator and tooling calls on this store (restore on request, the namespace's keys,
    /// wipes): see [`Admin`]. Agents do not need them.
    pub fn admin(&self) -> Admin<'_> {
        Admin { store: self }
    }

    /// When a write of this store last looked for a running spill daemon: milliseconds
    /// since the process' first look, plus one (0: never).
    pub(crate) fn daemons_checked(&self) -> &std::sync::atomic::AtomicU64 {
        &self.inner.daemons_checked
    }

    /// The namespace's key names (the key protocol of [`crate::keys`]).
    pub fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    /// The keys of the sessions this store used lately.
    pub(crate) fn session_keys_cache(&self) -> &SessionKeysCache {
        &self.inner.session_keys
    }

    /// The group-commit lanes of hot-path writes.
    pub(crate) fn lanes(&self) -> &Lanes {
        &self.inner.lanes
    }

    /// The durability level of this handle's writes.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// A handle on the same pool whose writes use `durability` (see [`Durability`]).
    pub fn with_durability(&self, durability: Durability) -> Store {
        Store {
            durability,
            ..self.clone()
        }
    }

    /// A handle on the same pool whose writes carry the run lease token `token` (from
    /// [`Store::acquire_lease`]): its writes to a session's transcript and state — appends
    /// ([`Store::append`], [`Store::append_many`], [`Store::append_checkpointed`]), history
    /// edits ([`Store::pop_message`], [`Store::replace_message`]), working-state writes,
    /// checkpoints ([`Store::checkpoint`], [`Store::put_checkpoint`]), compactions
    /// ([`Store::compact`]) and the tool-effect ledger ([`Store::effect_begin`],
    /// [`Store::effect_finish`]) — are refused with [`Error::Fenced`], writing nothing, once
    /// another process acquired the session's lease or its holder released it. `None`:
    /// unfenced. Session settings, usage, decisions, user values and graph logs are not
    /// fenced; the inbox's claim and deliver are fenced by the token they are given.
    pub fn with_fence(&self, token: Option<u64>) -> Store {
        Store {
            fence: token,
            ..self.clone()
        }
    }

    /// The run lease token this handle's writes carry, if any.
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }

    /// A store on the same namespace with its own connections, whose commands time out
    /// after `timeout` (the spill daemon's: a call that outlasts its lease is moot, and an
    /// outage must show within seconds). The namespace was checked by this store already.
    #[cfg(feature = "spill")]
    pub(crate) async fn with_response_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Store> {
        let mut config = self.inner.config.clone();
        config.response_timeout = timeout;
        let backend = Backend::connect(&config).await?;
        let lanes = Lanes::new(config.namespace.partitions, backend.is_cluster());
        Ok(Store {
            inner: Arc::new(Inner {
                backend,
                keys: self.inner.keys.clone(),
                lanes,
                session_keys: SessionKeysCache::default(),
                config,
                daemons_checked: Default::default(),
            }),
            durability: self.durability,
            fence: self.fence,
        })
    }

    /// The configuration this store was opened with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A pooled connection (multiplexed; fine to hold across awaits). Failing to get one
    /// means nothing was sent: the error is marked safe to retry.
    pub(crate) async fn conn(&self) -> Result<Connection> {
        self.inner.backend.get().await
    }

    /// Whether this store talks to a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.inner.backend.is_cluster()
    }

    /// Sends commands that each touch one partition's slot: one pipeline on a single node
    /// (one round trip), one request per command on a cluster (all in flight at once, each
    /// to the node holding its slot). Replies in the order of `cmds`.
    pub(crate) async fn fan_out<T: FromRedisValue>(&self, cmds: Vec<redis::Cmd>) -> Result<Vec<T>> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        match &self.inner.backend {
            Backend::Single { .. } => {
                let mut pipe = redis::pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                Ok(pipe.query_async(&mut self.conn().await?).await?)
            }
            Backend::Cluster { conn, .. } => {
                let requests = cmds.into_iter().map(|cmd| {
                    let mut conn = conn.clone();
                    async move { cmd.query_async::<T>(&mut conn).await }
                });
                futures_util::future::join_all(requests)
                    .await
                    .into_iter()
                    .map(|r| r.map_err(Error::from))
                    .collect()
            }
        }
    }

    /// Runs idempotent script calls that each touch one partition's slot, as
    /// [`Store::fan_out`] sends commands (one pipeline on a node, one request per call on a
    /// cluster). A pipeline does not load a script, so when it fails (NOSCRIPT: a Redis that
    /// lost its scripts; or a node out of reach) the calls go again one at a time through
    /// [`Store::invoke`], which does and retries. Replies in the order of `calls`.
    pub(crate) async fn invoke_all<T: FromRedisValue>(
        &self,
        calls: &[ScriptCall],
    ) -> Result<Vec<T>> {
        let cmds = calls.iter().map(|c| c.cmd().clone()).collect();
        match self.fan_out(cmds).await {
            Ok(replies) => Ok(replies),
            Err(err) => {
                tracing::debug!(error = %err, "script calls one at a time");
                let mut replies = Vec::with_capacity(calls.len());
                for call in calls {
                    replies.push(self.invoke(call).await?);
                }
                Ok(replies)
            }
        }
    }

    /// The URL of the node serving `key`: the one node's URL, or on a cluster the master
    /// that holds the key's slot now (same scheme and credentials as the seed).
    pub(crate) async fn node_url_for(&self, key: &str) -> Result<String> {
        self.inner.backend.node_url_for(key).await
    }

    /// A connection of its own (shared with no other call) to the node serving `key`,
    /// whose response timeout is `timeout`: for blocking reads, which would stall a shared
    /// multiplexed connection.
    pub(crate) async fn dedicated_connection(
        &self,
        key: &str,
        timeout: std::time::Duration,
    ) -> Result<redis::aio::MultiplexedConnection> {
        crate::connection::open_node(&self.node_url_for(key).await?, timeout).await
    }

    /// A connection to every master: the one node, or each master of the cluster (for
    /// SCAN, KEYS, INFO and wipes, which a cluster answers per node).
    pub(crate) async fn masters(&self) -> Result<Vec<Connection>> {
        if let Backend::Single { .. } = self.inner.backend {
            return Ok(vec![self.conn().await?]);
        }
        let own = self.own_master_connections().await?;
        Ok(own.into_iter().map(Connection::Node).collect())
    }

    /// A connection of its own to every master (the one node, or each master of the
    /// cluster), for commands that must not interleave with others: WATCH / MULTI / EXEC.
    pub(crate) async fn own_master_connections(
        &self,
    ) -> Result<Vec<redis::aio::MultiplexedConnection>> {
        let urls = self.inner.backend.master_urls().await?;
        let mut out = Vec::new();
        for url in urls {
            out.push(crate::connection::open_node(&url, self.config().response_timeout).await?);
        }
        Ok(out)
    }

    /// Runs one script call (one EVALSHA; see [`ScriptCall::run`]) and decodes its reply.
    /// While Redis is unreachable an idempotent call is retried (bounded by
    /// [`Config::retry_wait`]); any other fails at once, its error saying whether it may
    /// have been applied ([`Error::is_retry_safe`]). A write refused because no daemon has
    /// checked its partition in this Redis history waits for one ([`Store::awaiting_check`]).
    pub(crate) async fn invoke<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        self.awaiting_check(|| self.send_script(call, call.is_idempotent()))
            .await
    }

    /// Sends `call` once (one round trip; NOSCRIPT reloads), without the retries of
    /// [`Store::invoke`]: the group-commit lanes retry outside the lane.
    pub(crate) async fn invoke_once<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        self.send_script(call, false).await
    }

    /// Sends `call`, retried while Redis is unreachable when `retry`.
    async fn send_script<T: FromRedisValue>(&self, call: &ScriptCall, retry: bool) -> Result<T> {
        self.retrying(retry, || async {
            let mut conn = self.conn().await?;
            call.run(&mut conn).await
        })
        .await
    }

    /// Runs `attempt`; when it fails because Redis is unreachable and the work is
    /// `idempotent`, runs it again after a short pause (1 ms doubling to 20 ms) until it
    /// succeeds or [`Config::retry_wait`] is over (then the last error, marked safe to retry).
    pub(crate) async fn retrying<T, Fut>(
        &self,
        idempotent: bool,
        attempt: impl Fn() -> Fut,
    ) -> Result<T>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut backoff = None;
        loop {
            match attempt().await {
                Err(e) if idempotent && e.is_unavailable() => {
                    let wait = self.config().retry_wait;
                    if !backoff
                        .get_or_insert_with(|| Backoff::new(wait))
                        .pause()
                        .await
                    {
                        return Err(e.into_retry_safe());
                    }
                }
                other => return other,
            }
        }
    }

    /// Loads every script into Redis (SCRIPT LOAD), so pipelines of EVALSHA never meet
    /// NOSCRIPT.
    #[cfg(feature = "spill")]
    pub(crate) async fn preload_scripts(&self) -> Result<()> {
        let mut conn = self.conn().await?;
        Ok(crate::scripts::preload(&mut conn).await?)
    }
}
