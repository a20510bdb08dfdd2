//! The durable tier a test's daemons write: SQLite or a PostgreSQL database of the test's
//! own, reading its rows, and running a daemon pass on it.

use super::*;

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
            .spool(self.server.path("."))
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
        let keys = self.store.keys();
        let what = "the spill daemon takes its partitions";
        wait_until(what, std::time::Duration::from_secs(10), || {
            let mut c = self.redis();
            (0..keys.partitions()).all(|p| {
                redis::cmd("HEXISTS")
                    .arg(keys.committed(p))
                    .arg("seeded")
                    .query::<bool>(&mut c)
                    .unwrap()
            })
        })
        .await;
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
