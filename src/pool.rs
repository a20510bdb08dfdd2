//! The connection pool behind [`crate::Store`]: deadpool over multiplexed connections, like
//! deadpool-redis, but without a PING round trip on every checkout of a connection in
//! steady use.
//!
//! deadpool-redis checks a connection out by sending `UNWATCH` + `PING` and waiting for the
//! answer: one extra round trip per library call (an append was two round trips). Here a
//! connection is pinged only when it was last checked out more than [`FRESH`] ago. A request
//! that finds its connection closed already (Redis went away since; the connection's driver
//! task has ended, so the request fails before anything is sent) moves to the next
//! connection of the pool, and a connection whose command failed on I/O or timed out is
//! discarded at its next checkout. So after a Redis restart the calls that fail are those in
//! flight on the old connections, and — only when the runtime had no thread free to let a
//! driver see its socket close (a single-threaded runtime blocked during the restart) — one
//! call per stale connection, as `RedisUnavailable`.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::sentinel::{Locator, Node};
use deadpool::managed::{self, Metrics, Object, RecycleError, RecycleResult};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Client, Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value,
};

/// A connection checked out less than this long ago is handed out again without a PING.
pub const FRESH: Duration = Duration::from_millis(250);

/// Most closed connections one request skips before giving up.
const MAX_STALE: usize = 64;

/// Creates multiplexed connections and recycles them.
pub struct Manager {
    /// Where to connect.
    source: Source,
    /// Timeouts of every connection.
    config: AsyncConnectionConfig,
}

/// Where a new connection goes.
#[derive(Debug)]
enum Source {
    /// Always this node.
    Client(Box<Client>),
    /// The master the Sentinels name when the connection is made: after a failover, new
    /// connections reach the new master, and old ones are discarded as they fail.
    Sentinel(Arc<Locator>),
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("source", &self.source)
            .finish()
    }
}

impl Manager {
    /// A manager connecting to `node` with `config`.
    pub(crate) fn new(node: &Node, config: AsyncConnectionConfig) -> crate::error::Result<Self> {
        let source = match node {
            Node::Fixed(url) => Source::Client(Box::new(
                Client::open(url.as_str()).map_err(crate::error::Error::from_redis)?,
            )),
            Node::Sentinel(locator) => Source::Sentinel(locator.clone()),
        };
        Ok(Manager { source, config })
    }
}

/// A pooled multiplexed connection and whether it is known to be unusable.
pub struct Pooled {
    /// The connection.
    conn: MultiplexedConnection,
    /// Set when a command failed in a way that may have left the connection unusable.
    broken: bool,
}

impl Pooled {
    /// Marks the connection broken when `result` is an I/O failure, a dropped connection, a
    /// timeout (whose late answer must not reach the next caller), or `READONLY` (the node
    /// is a replica now: under Sentinel, the next connection goes to the new master).
    fn note<T>(&mut self, result: &RedisResult<T>) {
        if let Err(e) = result {
            if e.is_io_error()
                || e.is_connection_dropped()
                || e.is_timeout()
                || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
            {
                self.broken = true;
            }
        }
    }
}

impl managed::Manager for Manager {
    type Type = Pooled;
    type Error = RedisError;

    async fn create(&self) -> Result<Pooled, RedisError> {
        let conn = match &self.source {
            Source::Client(client) => {
                client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await?
            }
            Source::Sentinel(locator) => {
                let client = locator.master().await.map_err(|e| {
                    RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::NotConnected,
                        e.to_string(),
                    ))
                })?;
                client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await?
            }
        };
        Ok(Pooled {
            conn,
            broken: false,
        })
    }

    async fn recycle(&self, pooled: &mut Pooled, metrics: &Metrics) -> RecycleResult<RedisError> {
        if pooled.broken {
            return Err(RecycleError::message("the connection is closed"));
        }
        if metrics.last_used() < FRESH {
            return Ok(());
        }
        // As deadpool-redis does on every checkout: no WATCH left behind, and it answers.
        let (pong,): (String,) = redis::pipe()
            .cmd("UNWATCH")
            .ignore()
            .cmd("PING")
            .arg("recycle")
            .query_async(&mut pooled.conn)
            .await?;
        if pong == "recycle" {
            Ok(())
        } else {
            Err(RecycleError::message("unexpected PING answer"))
        }
    }
}

/// The pool.
pub type Pool = managed::Pool<Manager, Connection>;

/// A connection checked out of the [`Pool`]; returns to it when dropped.
pub struct Connection(Object<Manager>);

impl From<Object<Manager>> for Connection {
    fn from(conn: Object<Manager>) -> Self {
        Connection(conn)
    }
}

/// A request for `Connection::run`: one command, or a pipeline's packed commands.
#[derive(Clone, Copy)]
enum Request<'a> {
    One(&'a Cmd),
    Many(&'a Pipeline, usize, usize),
}

impl<'a> Request<'a> {
    /// Hands the request to `conn`; a pipeline's answers come back as one array.
    fn send<'c>(self, conn: &'c mut MultiplexedConnection) -> RedisFuture<'c, Value>
    where
        'a: 'c,
    {
        match self {
            Request::One(cmd) => conn.req_packed_command(cmd),
            Request::Many(pipeline, offset, count) => Box::pin(async move {
                conn.req_packed_commands(pipeline, offset, count)
                    .await
                    .map(Value::Array)
            }),
        }
    }
}

impl Connection {
    /// Runs `request` on this connection. When the connection turns out to be closed already
    /// (Redis went away since it was last used: the request fails on its first poll, before
    /// the connection's driver took it, so nothing was sent), it is marked broken and the
    /// request moves to the next connection of the pool — safe for scripts too, since they
    /// never reached Redis. A connection lost with the request in flight is an error, as ever.
    async fn run(&mut self, request: Request<'_>) -> RedisResult<Value> {
        let mut attempts = 0;
        loop {
            // Ok: the request's own outcome; Err: the connection was closed before it was sent.
            let first = {
                let mut sent = pin!(request.send(&mut self.0.conn));
                match std::future::poll_fn(|cx| Poll::Ready(sent.as_mut().poll(cx))).await {
                    Poll::Ready(Err(e)) if e.is_connection_dropped() => Err(e),
                    Poll::Ready(done) => Ok(done),
                    Poll::Pending => Ok(sent.await),
                }
            };
            let closed = match first {
                Ok(done) => return self.noted(done),
                Err(closed) => closed,
            };
            // Every pooled connection may be a stale one; broken ones are discarded, so the
            // pool soon opens a new connection (or fails to, when Redis is down).
            self.0.broken = true;
            attempts += 1;
            let pool = match Object::pool(&self.0) {
                Some(pool) if attempts <= MAX_STALE => pool,
                _ => return Err(closed),
            };
            self.0 = pool.get().await.map_err(|_| closed)?;
        }
    }

    /// Notes a failure on the connection and returns `result`.
    fn noted(&mut self, result: RedisResult<Value>) -> RedisResult<Value> {
        self.0.note(&result);
        result
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.run(Request::One(cmd)))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            match self.run(Request::Many(pipeline, offset, count)).await? {
                Value::Array(values) => Ok(values),
                other => Ok(vec![other]),
            }
        })
    }

    fn get_db(&self) -> i64 {
        self.0.conn.get_db()
    }
}
