//! Where Redis is, and the connections to it: one node (a pool of multiplexed connections,
//! [`crate::pool`]) or a Redis Cluster (redis-rs' async cluster connection: multiplexed, one
//! connection per node, routes every command by the slot of its first key and follows
//! MOVED/ASK while slots migrate). The URL chooses: a comma-separated list of node URLs, or
//! `redis+cluster://` / `rediss+cluster://` with a comma-separated list of `host:port`, is a
//! cluster; `redis+sentinel://` / `rediss+sentinel://` is one node found through Sentinels
//! ([`crate::sentinel`]); anything else is one node.
//!
//! Every script and every pipeline of the library touches the keys of one partition, and a
//! partition's keys share one hash tag, so each goes to one slot on a cluster. Work over all
//! partitions goes through [`crate::Store::fan_out`] (one pipeline on a node, one request per
//! partition on a cluster); scans go to every master ([`crate::Store::masters`]).

use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, Value};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::pool::{self, Manager, Pool};
use crate::sentinel::{node_url, Locator, Node, SentinelTarget};

/// The deployment a URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One Redis: its URL.
    Single(String),
    /// A Redis Cluster: the URLs of its seed nodes (any of them will do; the others are
    /// discovered).
    Cluster(Vec<String>),
    /// One Redis whose master Sentinels name.
    Sentinel(SentinelTarget),
}

impl Target {
    /// Reads a URL: `redis://a:7000,redis://b:7001` (a list of node URLs) or
    /// `redis+cluster://[user:pass@]a:7000,b:7001` (`rediss+cluster://` for TLS) is a
    /// cluster, `redis+sentinel://` / `rediss+sentinel://` a master found through
    /// Sentinels, anything else one node.
    pub fn parse(url: &str) -> Result<Target> {
        if let Some(target) = SentinelTarget::parse(url) {
            return target.map(Target::Sentinel);
        }
        let bad = |why: &str| Error::InvalidInput(format!("redis url {url:?}: {why}"));
        for (scheme, plain) in [
            ("redis+cluster://", "redis://"),
            ("rediss+cluster://", "rediss://"),
        ] {
            if let Some(rest) = url.strip_prefix(scheme) {
                let (auth, hosts) = match rest.rsplit_once('@') {
                    Some((auth, hosts)) => (format!("{auth}@"), hosts),
                    None => (String::new(), rest),
                };
                // A trailing path or fragment (`/0`, `#insecure`) applies to every node.
                let (hosts, tail) = match hosts.find(['/', '#']) {
                    Some(i) => hosts.split_at(i),
                    None => (hosts, ""),
                };
                let nodes: Vec<String> = hosts
                    .split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(|h| format!("{plain}{auth}{h}{tail}"))
                    .collect();
                if nodes.is_empty() {
                    return Err(bad("no cluster node given"));
                }
                return Ok(Target::Cluster(nodes));
            }
        }
        if url.contains(',') {
            let nodes: Vec<String> = url
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect();
            if nodes.iter().any(|n| !n.contains("://")) {
                return Err(bad(
                    "each node of a comma-separated list is a full URL (redis://host:port)",
                ));
            }
            return Ok(Target::Cluster(nodes));
        }
        Ok(Target::Single(url.to_string()))
    }
}

/// The store's way to Redis: a pool for one node, or the shared cluster connection.
#[derive(Clone)]
pub(crate) enum Backend {
    /// One node.
    Single {
        /// Its connections.
        pool: Pool,
        /// Where it is.
        node: Node,
    },
    /// A cluster.
    Cluster {
        /// The connection (clones share it).
        conn: ClusterConnection,
        /// The first seed node's URL: the scheme, credentials and options of every node.
        seed: String,
    },
}

impl Backend {
    /// Whether this is a Redis Cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Backend::Cluster { .. })
    }

    /// Connects as `config` says (the cluster connection is made at once; pooled
    /// connections when first used).
    pub(crate) async fn connect(config: &Config) -> Result<Backend> {
        match Target::parse(&config.redis_url)? {
            Target::Single(url) => {
                let node = Node::Fixed(url);
                Ok(Backend::Single {
                    pool: build_pool(config, &node)?,
                    node,
                })
            }
            Target::Sentinel(target) => {
                let node = Node::Sentinel(Locator::new(&target)?);
                Ok(Backend::Single {
                    pool: build_pool(config, &node)?,
                    node,
                })
            }
            Target::Cluster(nodes) => {
                let seed = nodes[0].clone();
                let client = redis::cluster::ClusterClient::builder(nodes)
                    .connection_timeout(CONNECT_TIMEOUT)
                    .response_timeout(config.response_timeout)
                    .build()
                    .map_err(Error::from_redis)?;
                let conn = client
                    .get_async_connection()
                    .await
                    .map_err(|e| Error::from_redis(e).into_retry_safe())?;
                Ok(Backend::Cluster { conn, seed })
            }
        }
    }

    /// The URL of the node serving `key`: the one node (on Sentinel, the master now), or
    /// the cluster master holding the key's slot now.
    pub(crate) async fn node_url_for(&self, key: &str) -> Result<String> {
        match self {
            Backend::Single { node, .. } => node.url().await,
            Backend::Cluster { conn, seed } => {
                let (host, port) = owner_of(&mut conn.clone(), key).await?;
                node_url(seed, &host, port)
            }
        }
    }

    /// The URL of every master: the one node, or each master of the cluster.
    pub(crate) async fn master_urls(&self) -> Result<Vec<String>> {
        match self {
            Backend::Single { node, .. } => Ok(vec![node.url().await?]),
            Backend::Cluster { conn, seed } => master_addresses(&mut conn.clone())
                .await?
                .iter()
                .map(|(host, port)| node_url(seed, host, *port))
                .collect(),
        }
    }

    /// A connection: a pooled one, or a clone of the cluster connection.
    pub(crate) async fn get(&self) -> Result<Connection> {
        match self {
            // Boxed: the checkout future holds a whole connect (TCP, TLS, HELLO) for when the
            // pool must create one, several KB that every call's future would otherwise
            // carry inline and move (memcpy) at each await of the call chain.
            Backend::Single { pool, .. } => Box::pin(pool.get())
                .await
                .map(Connection::Single)
                .map_err(|e| Error::from(e).into_retry_safe()),
            Backend::Cluster { conn, .. } => Ok(Connection::Cluster(conn.clone())),
        }
    }
}

/// The longest a new connection may take to be ready (the pool's: at most the response
/// timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection of its own to the node at `url` (shared with no other call), whose
/// response timeout is `timeout`.
pub(crate) async fn open_node(url: &str, timeout: Duration) -> Result<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_response_timeout(Some(timeout))
        .set_connection_timeout(Some(CONNECT_TIMEOUT));
    Ok(redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// Builds a pool of multiplexed connections to `node` whose response timeout is
/// `config.response_timeout` (redis-rs' own default of 500 ms would cut blocking stream
/// reads short).
fn build_pool(config: &Config, node: &Node) -> Result<Pool> {
    // Connecting (TCP, TLS, the HELLO handshake) is given no longer than a command: with
    // group commit a call can follow one that timed out on a paused Redis, and must not
    // wait 3 s for a new connection where the call itself would fail after the response
    // timeout.
    let connect = CONNECT_TIMEOUT.min(config.response_timeout);
    let conn_config = AsyncConnectionConfig::new()
        .set_response_timeout(Some(config.response_timeout))
        .set_connection_timeout(Some(connect));
    let manager = Manager::new(node, conn_config)?;
    // deadpool waits without end by default: for a free connection when every one is out
    // (on calls that hang on a cut network), and for a connect or a recycling PING. Each
    // wait is bounded as the call it stands for is, so a checkout fails as a call would.
    Pool::builder(manager)
        .max_size(config.pool_size)
        .wait_timeout(Some(config.response_timeout))
        .create_timeout(Some(connect))
        .recycle_timeout(Some(config.response_timeout))
        .runtime(deadpool_redis::Runtime::Tokio1)
        .build()
        .map_err(|e| Error::unavailable(e.to_string()))
}

/// A connection of the store: pooled (one node), the cluster connection, or a plain
/// connection to one node of a cluster (scans).
pub enum Connection {
    /// Checked out of the one-node pool.
    Single(pool::Connection),
    /// The cluster connection (routes by slot).
    Cluster(ClusterConnection),
    /// One cluster node, for commands that must reach each master (SCAN, KEYS, INFO).
    Node(MultiplexedConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
            Connection::Node(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Node(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
            Connection::Node(c) => c.get_db(),
        }
    }
}

/// A field of a `CLUSTER SLOTS` reply, decoded.
fn field<T: redis::FromRedisValue>(v: Option<&Value>) -> Option<T> {
    v.and_then(|v| redis::from_redis_value(v.clone()).ok())
}

/// The slot ranges of the cluster `conn` reaches and the `host:port` of the master serving
/// each (`CLUSTER SLOTS`).
async fn slot_ranges(conn: &mut ClusterConnection) -> Result<Vec<(u16, u16, (String, u16))>> {
    let slots: Vec<Value> = redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await?;
    let mut out = Vec::new();
    for range in slots {
        let Value::Array(parts) = range else { continue };
        let Some(Value::Array(node)) = parts.get(2) else {
            continue;
        };
        let host: Option<String> = field(node.first());
        let port: Option<u16> = field(node.get(1));
        let (lo, hi): (Option<u16>, Option<u16>) = (field(parts.first()), field(parts.get(1)));
        if let (Some(lo), Some(hi), Some(host), Some(port)) = (lo, hi, host, port) {
            out.push((lo, hi, (host, port)));
        }
    }
    Ok(out)
}

/// The `host:port` of every master of the cluster `conn` reaches.
async fn master_addresses(conn: &mut ClusterConnection) -> Result<Vec<(String, u16)>> {
    let mut masters: Vec<(String, u16)> =
        slot_ranges(conn).await?.into_iter().map(|r| r.2).collect();
    masters.sort();
    masters.dedup();
    Ok(masters)
}

/// The `host:port` of the master serving `key` now.
async fn owner_of(conn: &mut ClusterConnection, key: &str) -> Result<(String, u16)> {
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await?;
    slot_ranges(conn)
        .await?
        .into_iter()
        .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
        .map(|r| r.2)
        .ok_or_else(|| Error::redis(format!("no master serves slot {slot}")))
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn urls_choose_the_deployment() {
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379").unwrap(),
            Target::Single("redis://127.0.0.1:6379".into())
        );
        let cluster = Target::Cluster(vec![
            "redis://127.0.0.1:7000".into(),
            "redis://127.0.0.1:7001".into(),
        ]);
        assert_eq!(
            Target::parse("redis://127.0.0.1:7000,redis://127.0.0.1:7001").unwrap(),
            cluster
        );
        assert_eq!(
            Target::parse("redis+cluster://127.0.0.1:7000,127.0.0.1:7001").unwrap(),
            cluster
        );
        assert_eq!(
            Target::parse("rediss+cluster://u:p@a:1,b:2#insecure").unwrap(),
            Target::Cluster(vec![
                "rediss://u:p@a:1#insecure".into(),
                "rediss://u:p@b:2#insecure".into()
            ])
        );
        assert!(Target::parse("redis://a:1,b:2").is_err());
        assert!(Target::parse("redis+cluster://").is_err());
        assert_eq!(
            crate::sentinel::node_url("rediss://u:p@a:1/0#insecure", "10.0.0.2", 7002).unwrap(),
            "rediss://u:p@10.0.0.2:7002/0#insecure"
        );
    }
}
