//! Least privilege: the exact `ACL SETUSER` line of docs/security.md, run as that user
//! through the library and the real binary — sessions, messages, working state, checkpoints,
//! decisions with a consumer group, user values and forget, the daemon's flush, trim and
//! restore, gc — and the same user refused keys and commands outside `~as:*`.

use std::time::Duration;

use agentstate::test_support::redis_server::RedisServer;
use agentstate::*;
use serde_json::json;

use crate::support::{cli_at, daemon_pass, CliOutput};

pub(crate) const PASSWORD: &str = "s3cret-acl";

/// docs/security.md's `ACL SETUSER agentstate ...` line with the password filled in.
pub(crate) fn readme_acl_line() -> Vec<String> {
    let readme = include_str!("../../../docs/security.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("ACL SETUSER agentstate "))
        .expect("docs/security.md gives the ACL SETUSER line");
    line.replace("CHANGE-ME", PASSWORD)
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// A private Redis with docs/security.md's user created; the user's URL.
fn server_with_acl_user() -> (RedisServer, String) {
    server_with_user(readme_acl_line())
}

/// A private Redis with the user `words` (an `ACL SETUSER` line) creates; the user's URL.
fn server_with_user(words: Vec<String>) -> (RedisServer, String) {
    let server = RedisServer::start().unwrap();
    let mut admin = server.connection();
    let _: () = redis::cmd(&words[0])
        .arg(&words[1..])
        .query(&mut admin)
        .unwrap();
    let url = format!("redis://agentstate:{PASSWORD}@127.0.0.1:{}", server.port());
    (server, url)
}

fn ok(out: CliOutput) -> String {
    assert_eq!(out.code, 0, "{out:?}");
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_acl_user_runs_every_flow_and_nothing_outside_the_namespace() {
    let (server, url) = server_with_acl_user();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("acl.db");
    let store = Store::connect(Config::new(&url)).await.unwrap();
    let spill = || SpillConfig::new(&db).lease_ttl(Duration::from_millis(500));
    daemon_pass(&store, spill()).await;

    // Library: sessions, messages, working state, checkpoints, user values.
    store
        .create_session(&NewSession::new().id("acl").user("ann"))
        .await
        .unwrap();
    for i in 1..=3 {
        let m = NewMessage::new("user").content(format!("m{i}"));
        assert_eq!(store.append("acl", &m).await.unwrap(), i);
    }
    store.set_working("acl", "plan", &json!(1)).await.unwrap();
    store.checkpoint("acl", "cp", None).await.unwrap();
    // A graph thread (the LangGraph saver's storage): put, writes, reads, runs, fork, prune.
    let mut put = GraphPut::new("", "01");
    put.metadata = json!({"run_id": "r1"});
    put.channels = vec![("c".into(), "1".into())];
    put.blobs = vec![("c".into(), "1".into(), "json:1".into())];
    store.graph_put("acl-graph", &put).await.unwrap();
    store
        .graph_put_writes(
            "acl-graph",
            "",
            "01",
            "t",
            "",
            &[(0, "c".into(), "json:2".into())],
        )
        .await
        .unwrap();
    let graph = store
        .graph_get("acl-graph", "", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(graph.writes.len(), 1);
    assert_eq!(
        store
            .graph_list("acl-graph", None, None, None, None)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(store.graph_copy("acl-graph", "acl-fork").await.unwrap(), 1);
    assert_eq!(store.graph_prune("acl-fork", false).await.unwrap(), 1);
    assert_eq!(store.graph_delete_runs(&["r1"]).await.unwrap(), 1);
    store
        .set_user_value("ann", "tz", &json!("UTC"))
        .await
        .unwrap();
    // Decisions through a consumer group.
    let mut consumer = store
        .consumer(
            "billing",
            "c1",
            ConsumerOptions::new().start(StartFrom::Beginning),
        )
        .await
        .unwrap();
    let d = store
        .record_decision("acl", &NewDecision::new("ship", "green"))
        .await
        .unwrap();
    let got = consumer.read_up_to(1).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(consumer.ack(&got).await.unwrap(), 1);
    assert!(store.record_outcome(&d, "shipped").await.unwrap());
    let got = consumer.read_up_to(1).await.unwrap();
    assert_eq!(consumer.ack(&got).await.unwrap(), 1);
    // The daemon as this user: flush, then trim both streams (the decisions stream only
    // once the group has them, which needs XINFO GROUPS and XPENDING).
    let report = daemon_pass(&store, spill()).await;
    assert!(report.wal >= 6 && report.decisions == 2, "{report:?}");
    let p = store.keys().partition("acl");
    let mut admin = server.connection();
    let xlen = |key: String, c: &mut redis::Connection| -> usize {
        redis::cmd("XLEN").arg(key).query(c).unwrap()
    };
    assert_eq!(
        xlen(store.keys().decisions(p), &mut admin),
        1,
        "decisions trimmed"
    );
    assert_eq!(xlen(store.keys().wal(p), &mut admin), 1, "wal trimmed");
    // Restore: the session's keys expire; a running daemon (this user) brings it back.
    let mut del = redis::cmd("DEL");
    for key in store.keys().session("acl").own() {
        del.arg(key);
    }
    let _: () = del.query(&mut admin).unwrap();
    let daemon = SpillDaemon::open(store.clone(), spill()).await.unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(daemon.run(cancel.clone().cancelled_owned()));
    let back = store.messages("acl", MessageQuery::all()).await.unwrap();
    assert_eq!(crate::support::seqs(&back), [1, 2, 3]);
    // A durable write: the daemon wakes on it (XREAD BLOCK) and the caller on the commit bell.
    let durable = store.with_durability(Durability::Durable);
    let m = NewMessage::new("user").content("kept");
    assert_eq!(durable.append("acl", &m).await.unwrap(), 4);
    cancel.cancel();
    running.await.unwrap().unwrap();

    // The real binary as this user.
    let cli = |args: &[&str]| {
        let db = db.to_str().unwrap();
        cli_at(&url, dir.path(), &[&["--db", db][..], args].concat())
    };
    ok(cli(&["session", "create", "--id", "c1", "--user", "bo"]));
    assert_eq!(
        ok(cli(&[
            "msg",
            "append",
            "c1",
            "--role",
            "user",
            "--content",
            "hi"
        ])),
        "1\n"
    );
    ok(cli(&["work", "set", "c1", "k", "2"]));
    assert_eq!(ok(cli(&["work", "get", "c1", "k"])), "2\n");
    ok(cli(&["user", "set", "bo", "tz", "\"UTC\""]));
    let decision = ok(cli(&[
        "decide",
        "c1",
        "--decision",
        "go",
        "--rationale",
        "ok",
    ]));
    let tail = ok(cli(&[
        "tail",
        "--group",
        "audit",
        "--consumer",
        "a1",
        "--from-start",
        "--count",
        "1",
    ]));
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert_eq!(
        ok(cli(&["outcome", decision.trim(), "--outcome", "done"])),
        "true\n"
    );
    ok(cli(&["spill", "--once"]));
    ok(cli(&["user", "forget", "bo"]));
    assert!(ok(cli(&["export", "c1"])).contains("\"hi\""));
    ok(cli(&["stats"]));
    ok(cli(&["keys", "c1"]));
    ok(cli(&["session", "show", "c1"]));
    ok(cli(&["gc", "--dry-run", "--keep-checkpoints", "1"]));
    ok(cli(&["session", "close", "c1"]));
    ok(cli(&["restore", "acl"]));
    store.forget_user("ann").await.unwrap();
    store.close_session("acl", false).await.unwrap();

    // Outside the namespace: refused.
    let _: () = redis::cmd("SET")
        .arg("secret:key")
        .arg("x")
        .query(&mut admin)
        .unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut agent = client.get_connection().unwrap();
    for cmd in [
        redis::cmd("GET").arg("secret:key").clone(),
        redis::cmd("SET").arg("secret:key").arg("y").clone(),
        redis::cmd("KEYS").arg("*").clone(),
        redis::cmd("SCAN").arg("0").clone(),
        redis::cmd("CONFIG").arg("GET").arg("*").clone(),
        redis::cmd("FLUSHALL").clone(),
    ] {
        let err = cmd.query::<redis::Value>(&mut agent).unwrap_err();
        assert_eq!(err.code(), Some("NOPERM"), "{cmd:?}: {err}");
    }
    // A namespace under another prefix is refused too (the library says so).
    let other = Store::connect(Config::new(&url).prefix("other")).await;
    let err = match other {
        Err(e) => e,
        Ok(s) => s
            .create_session(&NewSession::new().id("x"))
            .await
            .unwrap_err(),
    };
    assert!(err.to_string().to_uppercase().contains("NOPERM"), "{err}");
    let out = cli_at(&url, dir.path(), &["--prefix", "other", "session", "list"]);
    assert!(
        out.runtime_error()
            .contains("refused a command to this user"),
        "{out:?}"
    );
}

/// A user created with the ACL line of a build before the daemon and durable callers blocked
/// on streams (no `+xread`): the daemon polls instead of waking and a durable write still
/// returns once committed, rather than failing on NOPERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_xread_still_gets_every_write_committed() {
    let without_xread = readme_acl_line()
        .into_iter()
        .filter(|w| w != "+xread")
        .collect();
    let (_server, url) = server_with_user(without_xread);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old-acl.db");
    let store = Store::connect(Config::new(&url)).await.unwrap();
    let daemon = SpillDaemon::open(store.clone(), SpillConfig::new(&db))
        .await
        .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(daemon.run(cancel.clone().cancelled_owned()));
    let durable = store.with_durability(Durability::Durable);
    let sid = durable.create_session(&NewSession::new()).await.unwrap();
    for i in 1..=5 {
        let m = NewMessage::new("user").content(format!("m{i}"));
        assert_eq!(durable.append(&sid, &m).await.unwrap(), i);
    }
    let rows: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM messages WHERE session_id = ?1",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 5);
    cancel.cancel();
    running.await.unwrap().unwrap();
}
