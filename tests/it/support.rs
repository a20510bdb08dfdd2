//! Test support: a private redis-server per test and helpers that read like what they check.

use std::collections::BTreeSet;

use agentstate::redis_server::RedisServer;
use agentstate::{Config, Store};

/// A private Redis and a store connected to it. Dropping it kills the server.
pub struct TestEnv {
    pub server: RedisServer,
    pub store: Store,
}

/// Starts a private redis-server and connects a store with the default namespace.
pub async fn env() -> TestEnv {
    env_with(|c| c).await
}

/// Like [`env`], with a tweaked configuration.
pub async fn env_with(tweak: impl FnOnce(Config) -> Config) -> TestEnv {
    let server = RedisServer::start().expect("start redis-server");
    let store = Store::connect(tweak(Config::new(server.url())))
        .await
        .expect("connect");
    TestEnv { server, store }
}

impl TestEnv {
    /// A synchronous connection for plain-command inspection.
    pub fn redis(&self) -> redis::Connection {
        self.server.connection()
    }

    /// Every key in the server, sorted.
    pub fn all_keys(&self) -> BTreeSet<String> {
        let mut c = self.redis();
        redis::cmd("KEYS").arg("*").query(&mut c).unwrap()
    }

    /// Total entries over every partition's wal stream.
    pub fn wal_entries(&self) -> usize {
        let mut c = self.redis();
        (0..self.store.keys().partitions())
            .map(|p| {
                redis::cmd("XLEN")
                    .arg(self.store.keys().wal(p))
                    .query::<usize>(&mut c)
                    .unwrap()
            })
            .sum()
    }
}
