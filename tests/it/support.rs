//! Test support: a private redis-server per test and helpers that read like what they check.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::process::Command;

use agentstate::test_support::redis_server::RedisServer;
use agentstate::{
    Config, Error, Lifecycle, Message, MessageState, NewDecision, NewSession, Result, Store,
};

/// A private Redis and a store connected to it, and the durable tier its daemons write.
/// Dropping it kills the server (and drops the test's PostgreSQL database).
pub struct TestEnv {
    pub server: RedisServer,
    pub store: Store,
    /// SQLite (a file in the server's temp dir) unless the test runs on PostgreSQL.
    pub durable: Durable,
}

/// The durable tier a test's daemons write.
pub enum Durable {
    /// `spill.db` in the Redis server's temp dir.
    Sqlite,
    /// A database of the test's own on the test PostgreSQL server.
    Postgres(PgDatabase),
}

/// Which durable tier a parameterised test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
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

/// What one run of the CLI binary produced.
#[derive(Debug)]
pub struct CliOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Asserts the output contract of a runtime error: exit 1, nothing on stdout, one
    /// `error:` line on stderr. Returns that line.
    pub fn runtime_error(&self) -> &str {
        assert_eq!(self.code, 1, "{self:?}");
        assert_eq!(self.stdout, "", "{self:?}");
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{self:?}");
        assert!(lines[0].starts_with("error: "), "{self:?}");
        lines[0]
    }
}

/// The real `agentstate` binary pointed at the Redis at `url`, working in `dir`, not yet run
/// (spawn it for a long-running command such as `tail`).
pub fn cli_command_at(url: &str, dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentstate"));
    cmd.env_remove("AGENTSTATE_REDIS_URL")
        .env_remove("AGENTSTATE_LOG")
        .env_remove("AGENTSTATE_THREADS")
        .env("AGENTSTATE_DB", dir.join("agentstate.db"))
        .current_dir(dir)
        .args(["--redis", url]);
    cmd
}

/// Runs the real `agentstate` binary against the Redis at `url`.
pub fn cli_at(url: &str, dir: &std::path::Path, args: &[&str]) -> CliOutput {
    let out = cli_command_at(url, dir)
        .args(args)
        .output()
        .expect("run agentstate");
    CliOutput {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
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

/// A durable store env: a private Redis plus a SQLite path in the server's temp dir.
impl TestEnv {
    /// The test's `--db`: its SQLite file (inside the server's temp dir) or its PostgreSQL
    /// database's URL.
    pub fn db(&self) -> std::path::PathBuf {
        match &self.durable {
            Durable::Sqlite => self.server.path("spill.db"),
            Durable::Postgres(pg) => pg.url.clone().into(),
        }
    }

    /// The first row of `sql` on the durable tier, every column an integer (NULL as 0).
    /// `?1` is `arg` on either backend.
    pub fn durable_ints(&self, sql: &str, arg: &str) -> Vec<i64> {
        match &self.durable {
            Durable::Sqlite => self
                .sqlite()
                .query_row(
                    sql,
                    rusqlite::params_from_iter(sql.contains("?1").then_some(arg)),
                    |r| {
                        (0..r.as_ref().column_count())
                            .map(|i| Ok(r.get::<_, Option<i64>>(i)?.unwrap_or(0)))
                            .collect()
                    },
                )
                .unwrap(),
            Durable::Postgres(pg) => pg
                .rows(&bind_literal(sql, arg))
                .remove(0)
                .into_iter()
                .map(|v| v.map_or(0, |v| v.parse().unwrap()))
                .collect(),
        }
    }

    /// Every row of `sql` on the durable tier, each column as text (NULL as "", integers in
    /// decimal). `?1` is `arg` on either backend.
    pub fn durable_rows(&self, sql: &str, arg: &str) -> Vec<Vec<String>> {
        match &self.durable {
            Durable::Sqlite => {
                let db = self.sqlite();
                let mut stmt = db.prepare(sql).unwrap();
                let n = stmt.column_count();
                let rows = stmt
                    .query_map(
                        rusqlite::params_from_iter(sql.contains("?1").then_some(arg)),
                        |r| {
                            (0..n)
                                .map(|i| {
                                    Ok(match r.get::<_, rusqlite::types::Value>(i)? {
                                        rusqlite::types::Value::Null => String::new(),
                                        rusqlite::types::Value::Integer(n) => n.to_string(),
                                        rusqlite::types::Value::Text(t) => t,
                                        other => format!("{other:?}"),
                                    })
                                })
                                .collect()
                        },
                    )
                    .unwrap();
                rows.map(Result::unwrap).collect()
            }
            Durable::Postgres(pg) => pg.text_rows(&bind_literal(sql, arg)),
        }
    }

    /// Runs statements that change the durable tier (tests that move times back, say).
    pub fn durable_execute(&self, sql: &str) {
        match &self.durable {
            Durable::Sqlite => rusqlite::Connection::open(self.db())
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Durable::Postgres(pg) => {
                pg.rows(sql);
            }
        }
    }

    /// `(seq, stored element)` of every message the durable tier holds for `sid`.
    pub fn durable_messages(&self, sid: &str) -> Vec<(i64, String)> {
        match &self.durable {
            Durable::Sqlite => sqlite_messages(&self.db(), sid),
            Durable::Postgres(pg) => pg
                .rows(&bind_literal(
                    "SELECT seq, element FROM messages WHERE session_id = ?1 ORDER BY seq",
                    sid,
                ))
                .into_iter()
                .map(|r| {
                    (
                        r[0].as_ref().unwrap().parse().unwrap(),
                        r[1].clone().unwrap(),
                    )
                })
                .collect(),
        }
    }

    /// Spill daemon settings for this test: its SQLite file, short pauses and leases.
    pub fn spill_config(&self) -> agentstate::SpillConfig {
        agentstate::SpillConfig::new(self.db())
            .interval(std::time::Duration::from_millis(10))
            .lease_ttl(std::time::Duration::from_millis(500))
    }

    /// Drains every stream into SQLite once (`agentstate spill --once`).
    pub async fn flush(&self) -> agentstate::PassReport {
        daemon_pass(&self.store, self.spill_config()).await
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
        let handle = tokio::spawn(daemon.run(cancel.clone().cancelled_owned()));
        self.wait_for_daemon().await;
        (cancel, handle)
    }

    /// Waits until a daemon has taken every partition and re-seeded it (each `committed`
    /// hash has its `seeded` field), so a Redis that lost its state has its session indexes,
    /// user values and rounds back.
    pub async fn wait_for_daemon(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let keys = self.store.keys();
        loop {
            let mut c = self.redis();
            let ready = (0..keys.partitions()).all(|p| {
                redis::cmd("HEXISTS")
                    .arg(keys.committed(p))
                    .arg("seeded")
                    .query::<bool>(&mut c)
                    .unwrap()
            });
            if ready {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the spill daemon did not take its partitions"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Unbinds the namespace from its durable tier, as an operator does to move it to
    /// another one (`redis-cli HDEL as:config durable durable_at`): the next daemon binds it
    /// to its own.
    pub fn unbind(&self) {
        let _: () = redis::cmd("HDEL")
            .arg(self.store.keys().config())
            .arg("durable")
            .arg("durable_at")
            .query(&mut self.redis())
            .unwrap();
    }

    /// Kills Redis and starts an empty one on the same port; reconnects the store.
    pub async fn lose_redis(&mut self) {
        self.server.restart_empty().unwrap();
        self.store = Store::connect(self.store.config().clone()).await.unwrap();
    }

    /// Plays an idle expiry of session `sid`: deletes its own keys (its index entries stay,
    /// as after a real TTL expiry).
    pub fn expire_session(&self, sid: &str) {
        let mut del = redis::cmd("DEL");
        for key in self.store.keys().session(sid).own() {
            del.arg(key);
        }
        let _: () = del.query(&mut self.redis()).unwrap();
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
        for key in [&k.meta, &k.ckpt, &k.idem, &k.usage, &k.graph] {
            let mut pairs: Vec<(String, String)> =
                redis::cmd("HGETALL").arg(key).query(&mut c).unwrap();
            // Meta `ttl_at` is when this Redis refreshes the TTLs next, not session state.
            pairs.retain(|(f, _)| key != &k.meta || f != "ttl_at");
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
        let index: Vec<String> = redis::cmd("ZRANGE")
            .arg(&k.glog)
            .arg(0)
            .arg(-1)
            .query(&mut c)
            .unwrap();
        out.push((k.glog.clone(), index));
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

/// What a CLI run produced, from an output with exit status.
pub fn cli_output(out: std::process::Output) -> CliOutput {
    CliOutput {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

impl TestEnv {
    /// Runs the CLI with `stdin` as its standard input.
    pub fn cli_stdin(&self, args: &[&str], stdin: &[u8]) -> CliOutput {
        use std::io::Write;
        let mut child = self
            .cli_command()
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run agentstate");
        let mut input = child.stdin.take().unwrap();
        let data = stdin.to_vec();
        let writer = std::thread::spawn(move || input.write_all(&data));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        cli_output(out)
    }

    /// Runs the CLI on a pseudo-terminal (util-linux `script`), as a person at a terminal
    /// sees it: stdout and stderr together, line ends `\r\n`.
    pub fn cli_on_terminal(&self, args: &[&str]) -> String {
        on_terminal(self.cli_command().args(args))
    }
}

/// Runs `cmd` (program, arguments, env, directory) on a pseudo-terminal with `script` and
/// returns everything it wrote there.
pub fn on_terminal(cmd: &Command) -> String {
    let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
    let line: Vec<String> = std::iter::once(quote(cmd.get_program()))
        .chain(cmd.get_args().map(quote))
        .collect();
    let mut script = Command::new("script");
    script
        .args(["-q", "-e", "-c", &line.join(" "), "/dev/null"])
        .stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        script.current_dir(dir);
    }
    let out = script
        .output()
        .expect("script (util-linux) runs the CLI on a terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One spill-daemon pass of `store` on `config`'s SQLite file (`agentstate spill --once`):
/// drains the streams and checks this Redis against SQLite, as a deployment's daemon does
/// before agents create sessions.
pub async fn daemon_pass(store: &Store, config: agentstate::SpillConfig) -> agentstate::PassReport {
    agentstate::SpillDaemon::open(store.clone(), config)
        .await
        .unwrap()
        .run_once()
        .await
        .unwrap()
}

/// `(seq, stored element)` of every message SQLite at `db` holds for `sid`, in seq order.
pub fn sqlite_messages(db: &std::path::Path, sid: &str) -> Vec<(i64, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT seq, element FROM messages WHERE session_id = ?1 ORDER BY seq")
        .unwrap();
    let rows = stmt
        .query_map([sid], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

/// How long a test waits for a condition before it calls the wait a hang. Generous: it only
/// bounds a hang; what a test checks is the condition, never the time it took.
pub const HANG: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until `ready()` holds, polling every few milliseconds; panics naming `what` after
/// [`HANG`].
pub async fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + HANG;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// `redis-cli monitor` on a test's server, its feed in a file: every command Redis runs,
/// those a script runs included (client `lua`), in order.
pub struct Monitor {
    child: std::process::Child,
    feed: std::path::PathBuf,
    url: String,
}

/// One command of a [`Monitor`] feed: who sent it (`lua` for a script) and its words.
#[derive(Debug, Clone)]
pub struct Monitored {
    pub client: String,
    pub words: Vec<Vec<u8>>,
}

impl Monitored {
    /// The command name, upper case.
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.words[0]).to_uppercase()
    }

    /// True for a command a script ran.
    pub fn by_lua(&self) -> bool {
        self.client == "lua"
    }
}

impl Monitor {
    /// Starts watching the server at `t` (returns once the feed has begun).
    pub async fn start(t: &TestEnv, name: &str) -> Monitor {
        let feed = t.server.path(&format!("{name}.monitor"));
        let child = Command::new("redis-cli")
            .args(["-p", &t.server.port().to_string(), "monitor"])
            .stdout(std::fs::File::create(&feed).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-cli (redis-tools) runs MONITOR");
        wait_until("MONITOR starts", || {
            std::fs::read_to_string(&feed).is_ok_and(|f| f.starts_with("OK"))
        })
        .await;
        Monitor {
            child,
            feed,
            url: t.server.url(),
        }
    }

    /// Stops watching once every command sent before this call is in the feed; returns the
    /// feed.
    pub async fn stop(mut self) -> Vec<Monitored> {
        let marker = format!("monitor-end-{}", std::process::id());
        let mut c = redis::Client::open(self.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let _: String = redis::cmd("ECHO").arg(&marker).query(&mut c).unwrap();
        let feed = self.feed.clone();
        wait_until("MONITOR shows the end marker", || {
            std::fs::read_to_string(&feed).is_ok_and(|f| f.contains(&marker))
        })
        .await;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text = std::fs::read(&self.feed).unwrap();
        text.split(|b| *b == b'\n')
            .filter_map(parse_monitor_line)
            .filter(|m| m.words.get(1).is_none_or(|w| w != marker.as_bytes()))
            .collect()
    }
}

/// `1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"` → client and unquoted words.
fn parse_monitor_line(line: &[u8]) -> Option<Monitored> {
    let open = line.iter().position(|b| *b == b'[')?;
    let close = open + line[open..].iter().position(|b| *b == b']')?;
    let inside = String::from_utf8_lossy(&line[open + 1..close]).into_owned();
    let client = inside.split_once(' ')?.1.to_string();
    let mut words = Vec::new();
    let mut rest = &line[close + 1..];
    while let Some(start) = rest.iter().position(|b| *b == b'"') {
        let mut word = Vec::new();
        let mut i = start + 1;
        while rest[i] != b'"' {
            if rest[i] == b'\\' {
                i += 1;
                match rest[i] {
                    b'n' => word.push(b'\n'),
                    b'r' => word.push(b'\r'),
                    b't' => word.push(b'\t'),
                    b'a' => word.push(7),
                    b'b' => word.push(8),
                    b'x' => {
                        let hex = std::str::from_utf8(&rest[i + 1..i + 3]).unwrap();
                        word.push(u8::from_str_radix(hex, 16).unwrap());
                        i += 2;
                    }
                    other => word.push(other),
                }
            } else {
                word.push(rest[i]);
            }
            i += 1;
        }
        words.push(word);
        rest = &rest[i + 1..];
    }
    (!words.is_empty()).then_some(Monitored { client, words })
}

/// `sql` with `?1` replaced by `arg` as a quoted literal (tests only: PostgreSQL's simple
/// protocol takes no parameters, and an untyped literal fits text and integer columns).
fn bind_literal(sql: &str, arg: &str) -> String {
    sql.replace("?1", &format!("'{}'", arg.replace('\'', "''")))
}

/// A PostgreSQL database of one test's own on the test server (`AGENTSTATE_TEST_PG`, an
/// admin URL; default `postgres://postgres@127.0.0.1:5432/postgres`), created empty and
/// dropped with the test: no test uses an existing database as it is.
pub struct PgDatabase {
    /// The database's URL (the `--db` of the test's daemons).
    pub url: String,
    /// Its name.
    pub name: String,
    /// The admin URL it was created through.
    admin: String,
}

/// The test server's admin URL.
pub fn pg_admin_url() -> String {
    std::env::var("AGENTSTATE_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

impl PgDatabase {
    /// Creates an empty database named after this process and a random number.
    pub fn create() -> PgDatabase {
        PgDatabase::create_on(&pg_admin_url())
    }

    /// Creates an empty database on the server of `admin`.
    pub fn create_on(admin: &str) -> PgDatabase {
        let name = format!(
            "agentstate_it_{}_{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        let (base, _) = admin.rsplit_once('/').expect("a postgres://host/db URL");
        let url = format!("{base}/{name}");
        pg_batch(admin, &format!("CREATE DATABASE {name}"));
        PgDatabase {
            url,
            name,
            admin: admin.to_string(),
        }
    }

    /// Every row of `sql` (simple protocol), each column as text or NULL.
    pub fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        pg_rows(&self.url, sql)
    }

    /// Every row of `sql`, each column as text (NULL as "").
    pub fn text_rows(&self, sql: &str) -> Vec<Vec<String>> {
        self.rows(sql)
            .into_iter()
            .map(|r| r.into_iter().map(Option::unwrap_or_default).collect())
            .collect()
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        pg_batch(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// Runs `sql` on `url` on a thread of its own (callers are inside a test's runtime).
pub fn pg_batch(url: &str, sql: &str) {
    pg_rows(url, sql);
}

/// Every row of `sql` on `url` (simple protocol), each column as text or NULL.
pub fn pg_rows(url: &str, sql: &str) -> Vec<Vec<Option<String>>> {
    let (url, sql) = (url.to_string(), sql.to_string());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| panic!("connect to {url}: {e} (is AGENTSTATE_TEST_PG right?)"));
            let conn = tokio::spawn(conn);
            let rows = client
                .simple_query(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .into_iter()
                .filter_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => {
                        Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
                    }
                    _ => None,
                })
                .collect();
            drop(client);
            let _ = conn.await;
            rows
        })
    })
    .join()
    .unwrap()
}

/// `GET path` from a local HTTP server (the daemon's metrics, the console): the status and
/// the body, or `None` when nothing answers. `headers` are sent as they are.
pub fn http_get(port: u16, path: &str, headers: &[&str]) -> Option<(u16, String)> {
    http_get_as(port, "127.0.0.1", path, headers)
}

/// [`http_get`] with `host` as the `Host` header (what a browser sends for the name it
/// resolved to 127.0.0.1).
pub fn http_get_as(port: u16, host: &str, path: &str, headers: &[&str]) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    conn.write_all(request.as_bytes()).ok()?;
    let mut reply = String::new();
    conn.read_to_string(&mut reply).ok()?;
    let status = reply.split(' ').nth(1)?.parse().ok()?;
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((status, body.to_string()))
}

/// The value of the Prometheus series `series` (its name and labels exactly as rendered,
/// e.g. `agentstate_restores_total{result="restored"}`) in a `/metrics` body.
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The values of every series named `name` (any labels) in a `/metrics` body.
pub fn metric_values(body: &str, name: &str) -> Vec<f64> {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}
