//! Test support: a private redis-server per test and helpers that read like what they check.

use std::collections::BTreeSet;

use agentstate::redis_server::RedisServer;
use agentstate::{Config, NewDecision, NewSession, Store};

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
        self.entries_per_partition(|k, p| k.wal(p))
    }

    /// Total entries over every partition's decisions stream.
    pub fn decision_entries(&self) -> usize {
        self.entries_per_partition(|k, p| k.decisions(p))
    }

    /// Sum of XLEN of one stream per partition, named by `key`.
    fn entries_per_partition(&self, key: impl Fn(&agentstate::keys::Keys, u32) -> String) -> usize {
        let mut c = self.redis();
        (0..self.store.keys().partitions())
            .map(|p| {
                redis::cmd("XLEN")
                    .arg(key(self.store.keys(), p))
                    .query::<usize>(&mut c)
                    .unwrap()
            })
            .sum()
    }
}

/// Creates sessions `s0..s<n-1>` and returns their ids.
pub async fn sessions(store: &Store, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let sid = store
            .create_session(&NewSession::new().id(format!("s{i}")))
            .await
            .unwrap();
        out.push(sid);
    }
    out
}

/// Records `n` decisions `d0..` round-robin over `sids`; returns their ids in order.
pub async fn record_decisions(store: &Store, sids: &[String], n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let d = NewDecision::new(format!("d{i}"), "because");
        out.push(
            store
                .record_decision(&sids[i % sids.len()], &d)
                .await
                .unwrap(),
        );
    }
    out
}

impl TestEnv {
    /// The `agentstate` binary, pointed at this test's Redis.
    pub fn cli(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agentstate"));
        cmd.arg("--redis").arg(self.server.url());
        cmd
    }

    /// Entries pending (delivered, not acked) in consumer group `group`, over all partitions.
    pub fn pending(&self, group: &str) -> usize {
        let mut c = self.redis();
        (0..self.store.keys().partitions())
            .map(|p| {
                redis::cmd("XPENDING")
                    .arg(self.store.keys().decisions(p))
                    .arg(group)
                    .query::<redis::streams::StreamPendingReply>(&mut c)
                    .unwrap()
                    .count()
            })
            .sum()
    }
}
