//! The test's private Redis and the store on it: starting them, reading Redis as it is
//! (keys, wal, snapshots), and the data helpers most tests start from.

use super::*;

/// A private Redis and a store connected to it, and the durable tier its daemons write.
/// Dropping it kills the server (and drops the test's PostgreSQL database).
pub struct TestEnv {
    pub server: RedisServer,
    pub store: Store,
    /// SQLite (a file in the server's temp dir) unless the test runs on PostgreSQL.
    pub durable: Durable,
}

impl TestEnv {
    /// A test env on SQLite around an existing server and store.
    pub fn new(server: RedisServer, store: Store) -> TestEnv {
        TestEnv {
            server,
            store,
            durable: Durable::Sqlite,
        }
    }
}

/// Starts a private redis-server and connects a store with the default namespace.
pub async fn env() -> TestEnv {
    env_with(|c| c).await
}

/// Like [`env`], with its durable tier on `backend` (a fresh PostgreSQL database of its own).
pub async fn env_on(backend: Backend) -> TestEnv {
    env_on_with(backend, |c| c).await
}

/// Like [`env`], with a tweaked configuration.
pub async fn env_with(tweak: impl FnOnce(Config) -> Config) -> TestEnv {
    env_on_with(Backend::Sqlite, tweak).await
}

/// Like [`env_on`], with a tweaked configuration.
pub async fn env_on_with(backend: Backend, tweak: impl FnOnce(Config) -> Config) -> TestEnv {
    let durable = match backend {
        Backend::Sqlite => Durable::Sqlite,
        Backend::Postgres => Durable::Postgres(PgDatabase::create()),
    };
    env_in(durable, tweak).await
}

/// Like [`env`], with the durable tier given (e.g. a database on a private PostgreSQL server).
pub async fn env_in(durable: Durable, tweak: impl FnOnce(Config) -> Config) -> TestEnv {
    let server = RedisServer::start().expect("start redis-server");
    let store = Store::connect(tweak(Config::new(server.url())))
        .await
        .expect("connect");
    let t = TestEnv {
        server,
        store,
        durable,
    };
    // As in production, a spill daemon has checked this Redis against SQLite before agents
    // work on it (it publishes `<prefix>:{p}:committed`); tests of the moments before that
    // (a lost Redis, no daemon yet) use `env_without_daemon`.
    t.flush().await;
    t
}

/// Like [`env`], but no daemon has ever looked at this Redis: no session id can be called
/// unknown, and no session can be created, until one does.
pub async fn env_without_daemon() -> TestEnv {
    let server = RedisServer::start().expect("start redis-server");
    let store = Store::connect(Config::new(server.url()))
        .await
        .expect("connect");
    TestEnv::new(server, store)
}

/// Everything Redis holds: every key's serialized value (`DUMP`) and the total wal length.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub keys: BTreeMap<String, Vec<u8>>,
    pub wal_entries: usize,
}

impl TestEnv {
    /// A synchronous connection for plain-command inspection.
    pub fn redis(&self) -> redis::Connection {
        self.server.connection()
    }

    /// One plain Redis command, e.g. `t.cmd::<String>(&["TYPE", key])`.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = self.redis();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c).unwrap()
    }

    /// Every key in the server, sorted.
    pub fn all_keys(&self) -> BTreeSet<String> {
        self.cmd(&["KEYS", "*"])
    }

    /// Total entries over every partition's wal stream.
    pub fn wal_entries(&self) -> usize {
        self.per_partition(|k, p| k.wal(p), |key| self.cmd::<usize>(&["XLEN", key]))
    }

    /// Entries pending (delivered, not acked) in consumer group `group`, over all partitions.
    pub fn pending(&self, group: &str) -> usize {
        self.per_partition(
            |k, p| k.decisions(p),
            |key| {
                self.cmd::<redis::streams::StreamPendingReply>(&["XPENDING", key, group])
                    .count()
            },
        )
    }

    /// Sum of `count(key)` over one key per partition, named by `key_of`.
    fn per_partition(
        &self,
        key_of: impl Fn(&agentstate::keys::Keys, u32) -> String,
        count: impl Fn(&str) -> usize,
    ) -> usize {
        (0..self.store.keys().partitions())
            .map(|p| count(&key_of(self.store.keys(), p)))
            .sum()
    }

    /// The CLI binary pointed at this test's Redis, not yet run.
    pub fn cli_command(&self) -> Command {
        cli_command_at(&self.server.url(), self.server.dir())
    }

    /// The first `n` ids `<stem>0`, `<stem>1`, ... that live in partition `p`.
    pub fn ids_in_partition(&self, stem: &str, p: u32, n: usize) -> Vec<String> {
        (0..)
            .map(|i| format!("{stem}{i}"))
            .filter(|id| self.store.keys().partition(id) == p)
            .take(n)
            .collect()
    }

    /// Creates a session with each of `ids`.
    pub async fn create_sessions(&self, ids: &[String]) {
        for sid in ids {
            self.store
                .create_session(&NewSession::new().id(sid))
                .await
                .unwrap();
        }
    }

    /// Every wal record `(op, id, d)` of every partition, each partition in stream order (a
    /// batch entry's records in field order: field `<op> <id> <seq> [<key>]`, value `d`).
    pub fn wal_records(&self) -> Vec<(String, String, String)> {
        (0..self.store.keys().partitions())
            .flat_map(|p| self.wal_records_of(p))
            .collect()
    }

    /// The wal records `(op, id, d)` of partition `p`, in stream order (see `wal_records`).
    pub fn wal_records_of(&self, p: u32) -> Vec<(String, String, String)> {
        let entries: Vec<(String, Vec<(String, String)>)> =
            self.cmd(&["XRANGE", &self.store.keys().wal(p), "-", "+"]);
        let mut out = Vec::new();
        for (_, fields) in entries {
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(f, _)| f == name)
                    .map(|(_, v)| v.clone())
            };
            if field("op").as_deref() != Some("batch") {
                out.push((
                    field("op").unwrap(),
                    field("id").unwrap(),
                    field("d").unwrap(),
                ));
                continue;
            }
            for (name, d) in fields.iter().filter(|(f, _)| f != "op") {
                let words: Vec<&str> = name.split(' ').collect();
                out.push((words[0].to_string(), words[1].to_string(), d.clone()));
            }
        }
        out
    }

    /// The wal records with operation `op`, as `(id, d)`.
    pub fn wal_ops(&self, op: &str) -> Vec<(String, String)> {
        self.wal_records()
            .into_iter()
            .filter(|(o, _, _)| o == op)
            .map(|(_, id, d)| (id, d))
            .collect()
    }

    /// The full content of Redis, for "writes nothing" checks.
    pub fn snapshot(&self) -> Snapshot {
        let mut c = self.redis();
        let keys = self
            .all_keys()
            .into_iter()
            .map(|k| {
                let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query(&mut c).unwrap();
                (k, dump)
            })
            .collect();
        Snapshot {
            keys,
            wal_entries: self.wal_entries(),
        }
    }

    /// Awaits a call that must be rejected, asserts Redis is byte-for-byte unchanged by it,
    /// and returns the error.
    pub async fn rejected<T: Debug>(&self, call: impl Future<Output = Result<T>>) -> Error {
        let before = self.snapshot();
        let err = call.await.unwrap_err();
        assert_eq!(
            self.snapshot(),
            before,
            "rejected call wrote to Redis: {err:?}"
        );
        err
    }

    /// Runs the CLI binary against this test's Redis.
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        cli_at(&self.server.url(), self.server.dir(), args)
    }

    /// Runs the CLI, asserts exit 0, and returns stdout.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert_eq!(out.code, 0, "agentstate {args:?}: {out:?}");
        out.stdout
    }

    /// A CLI run that must fail at run time and leave Redis unchanged; returns the error line.
    pub fn cli_rejected(&self, args: &[&str]) -> String {
        let before = self.snapshot();
        let out = self.cli(args);
        let line = out.runtime_error().to_string();
        assert_eq!(
            self.snapshot(),
            before,
            "agentstate {args:?} wrote to Redis"
        );
        line
    }

    /// Remaining TTL of `key`, seconds (-1 none, -2 missing).
    pub fn ttl(&self, key: &str) -> i64 {
        self.cmd(&["TTL", key])
    }

    /// The field → value map of a hash, read with HGETALL.
    pub fn hash(&self, key: &str) -> BTreeMap<String, String> {
        self.cmd(&["HGETALL", key])
    }
}

/// The seqs of `messages`, in order.
pub fn seqs(messages: &[Message]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

/// The seqs of `messages` whose state is `state`.
pub fn seqs_in(messages: &[Message], state: MessageState) -> Vec<u64> {
    messages
        .iter()
        .filter(|m| m.state == state)
        .map(|m| m.seq)
        .collect()
}

/// JSON lines printed by the CLI, parsed.
pub fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
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

/// Creates session `id` (with a user and a parent when given) and checks the id it got.
pub async fn create(t: &TestEnv, id: &str, user: Option<&str>, parent: Option<(&str, Lifecycle)>) {
    let mut new = NewSession::new().id(id);
    if let Some(u) = user {
        new = new.user(u);
    }
    if let Some((p, lifecycle)) = parent {
        new = new.parent(p, lifecycle);
    }
    assert_eq!(t.store.create_session(&new).await.unwrap(), id);
}
