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

/// A durable store env: a private Redis plus a SQLite path in the server's temp dir.
impl TestEnv {
    /// The test's SQLite file (inside the server's temp dir).
    pub fn db(&self) -> std::path::PathBuf {
        self.server.path("spill.db")
    }

    /// Spill daemon settings for this test: its SQLite file, short pauses and leases.
    pub fn spill_config(&self) -> agentstate::SpillConfig {
        agentstate::SpillConfig::new(self.db())
            .interval(std::time::Duration::from_millis(10))
            .lease_ttl(std::time::Duration::from_millis(500))
    }

    /// Drains every stream into SQLite once (`agentstate spill --once`).
    pub async fn flush(&self) -> agentstate::PassReport {
        agentstate::SpillDaemon::open(self.store.clone(), self.spill_config())
            .await
            .unwrap()
            .run_once()
            .await
            .unwrap()
    }

    /// Starts an embedded spill daemon; stop it with the returned token and await the handle.
    pub async fn start_daemon(
        &self,
    ) -> (
        tokio_util::sync::CancellationToken,
        tokio::task::JoinHandle<agentstate::Result<()>>,
    ) {
        let daemon = agentstate::SpillDaemon::open(self.store.clone(), self.spill_config())
            .await
            .unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        let handle = tokio::spawn(daemon.run(cancel.clone()));
        (cancel, handle)
    }

    /// Kills Redis and starts an empty one on the same port; reconnects the store.
    pub async fn lose_redis(&mut self) {
        self.server.restart_empty().unwrap();
        self.store = Store::connect(self.store.config().clone()).await.unwrap();
    }

    /// A read-only connection to the test's SQLite file.
    pub fn sqlite(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(self.db(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
    }

    /// Everything Redis holds for session `sid` but its working state, in a comparable form:
    /// key → its contents (sorted hash fields and values, list elements, sorted set members).
    pub fn session_dump(&self, sid: &str) -> Vec<(String, Vec<String>)> {
        let k = self.store.keys().session(sid);
        let mut c = self.redis();
        let mut out = Vec::new();
        // Field order of a hash is not kept once Redis converts it from listpack to a
        // hashtable (values over 64 bytes), so hashes compare as sorted field/value pairs.
        for key in [&k.meta, &k.ckpt, &k.idem, &k.usage] {
            let mut pairs: Vec<(String, String)> =
                redis::cmd("HGETALL").arg(key).query(&mut c).unwrap();
            pairs.sort();
            let flat = pairs.into_iter().flat_map(|(f, v)| [f, v]).collect();
            out.push((key.clone(), flat));
        }
        for key in [&k.msgs, &k.compactions] {
            out.push((
                key.clone(),
                redis::cmd("LRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .query(&mut c)
                    .unwrap(),
            ));
        }
        let mut kids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(&k.children)
            .query(&mut c)
            .unwrap();
        kids.sort();
        out.push((k.children.clone(), kids));
        out
    }

    /// Stream length.
    pub fn xlen(&self, key: &str) -> usize {
        redis::cmd("XLEN")
            .arg(key)
            .query(&mut self.redis())
            .unwrap()
    }
}
