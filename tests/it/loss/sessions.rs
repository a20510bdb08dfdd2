//! Redis losing its state: a durable session is never called unknown, never replaced by a
//! create, comes back with or without a running daemon, and many openers at once all get it.
//! Everything runs the real binary against a private Redis and a real SQLite file.

use std::process::{Command, Stdio};
use std::time::Duration;

use agentstate::*;

use crate::support::{env, env_without_daemon, sqlite_messages, TestEnv};

fn flushall(t: &TestEnv) {
    let _: () = redis::cmd("FLUSHALL").query(&mut t.redis()).unwrap();
}

/// After FLUSHALL, `restore` without a daemon restores from the durable tier, a create of a
/// durable id is refused (already exists, or not live while no daemon has checked Redis), and
/// the durable history is never replaced.
#[tokio::test]
async fn a_lost_redis_never_calls_a_durable_session_unknown_nor_lets_a_create_replace_it() {
    let t = env_without_daemon().await;
    let db = t.server.dir().join("agentstate.db"); // the CLI's --db (AGENTSTATE_DB)
                                                   // The first daemon creates the durable tier and binds the namespace to it.
    t.cli_ok(&["spill", "--once"]);
    t.cli_ok(&["session", "create", "--id", "planner"]);
    for i in 0..3 {
        let content = format!("old{i}");
        t.cli_ok(&[
            "msg",
            "append",
            "planner",
            "--role",
            "user",
            "--content",
            &content,
        ]);
    }
    t.cli_ok(&["spill", "--once"]);
    let before = sqlite_messages(&db, "planner");
    assert_eq!(before.len(), 3);

    // No daemon runs: restore reads the SQLite file itself.
    flushall(&t);
    assert_eq!(t.cli_ok(&["restore", "planner"]).trim(), "restored");
    let created = t.cli(&["session", "create", "--id", "planner"]);
    assert!(
        created.runtime_error().contains("already exists"),
        "{created:?}"
    );
    t.cli_ok(&[
        "msg",
        "append",
        "planner",
        "--role",
        "user",
        "--content",
        "NEW",
    ]);
    t.cli_ok(&["spill", "--once"]);
    let after = sqlite_messages(&db, "planner");
    assert_eq!(
        after[..3],
        before[..],
        "the durable history is untouched, byte for byte"
    );
    assert_eq!(after.len(), 4);
    assert_eq!(after[3].0, 4);
    assert!(after[3].1.contains(r#""content":"NEW""#), "{}", after[3].1);

    // Lost again, and this time the first command is a create of the same id. Redis lost
    // the namespace's binding too, so no command binds it implicitly (only a daemon, or an
    // explicit `restore`, does): with no daemon running either, the create is refused as
    // not live at once.
    flushall(&t);
    let created = t.cli(&["session", "create", "--id", "planner"]);
    assert!(
        created.runtime_error().contains("is not live in Redis"),
        "{created:?}"
    );
    assert_eq!(sqlite_messages(&db, "planner"), after);
    // Without a daemon, the operator's way back is `restore` (the error of any other command
    // on the session says so); it reads the SQLite file itself.
    let listed = t.cli(&["msg", "list", "planner"]);
    assert!(
        listed
            .runtime_error()
            .contains("agentstate restore planner"),
        "{listed:?}"
    );
    assert_eq!(t.cli_ok(&["restore", "planner"]).trim(), "restored");
    let listed = t.cli_ok(&["msg", "list", "planner"]);
    assert_eq!(listed.lines().count(), 4, "{listed}");

    // `restore --all` without a daemon brings back every session SQLite holds.
    t.cli_ok(&["session", "create", "--id", "second"]);
    t.cli_ok(&["spill", "--once"]);
    flushall(&t);
    let restored = t.cli_ok(&["restore", "--all"]);
    let mut lines: Vec<&str> = restored.lines().collect();
    lines.sort();
    assert_eq!(lines, ["planner restored", "second restored"]);
}

/// On a namespace no daemon ever bound, with no daemon running, there is no daemon to wait
/// for: a create is refused at once with `NotLive` saying so and naming the command that
/// starts one. Once a daemon bound the namespace, a partition no daemon checked still waits.
#[tokio::test]
async fn a_namespace_no_daemon_ever_bound_says_so_at_once_and_a_bound_one_waits() {
    let t = env_without_daemon().await;
    let err = t
        .rejected(t.store.create_session(&NewSession::new().id("first")))
        .await;
    assert!(
        matches!(err, Error::NotLive { no_daemon_yet: true, ref sid, .. } if sid == "first"),
        "{err:?}"
    );
    let out = t.cli(&["session", "create", "--id", "first"]);
    let line = out.runtime_error();
    assert_eq!(
        line,
        format!(
            "error: session first is not live in Redis at {}, and the namespace has no spill \
             daemon yet: none has bound it to a durable tier in this Redis (a new namespace, or \
             a Redis that lost its data) and none is running — start one with `agentstate spill \
             --redis {} --db {}`, then retry (the call is safe to repeat; a history the \
             durable tier holds comes back through it)",
            t.server.url().trim_start_matches("redis://"),
            t.server.url(),
            t.db().with_file_name("agentstate.db").display()
        )
    );

    // Bound, and no daemon runs: the partition no daemon checked is waited for.
    t.flush().await;
    let p = t.store.keys().partition("second");
    let _: () = redis::cmd("DEL")
        .arg(t.store.keys().committed(p))
        .arg(t.store.keys().daemons())
        .query(&mut t.server.connection())
        .unwrap();
    let s = Store::connect(
        t.store
            .config()
            .clone()
            .daemon_wait(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let err = t
        .rejected(s.create_session(&NewSession::new().id("second")))
        .await;
    assert!(
        matches!(
            err,
            Error::NotLive {
                no_daemon_yet: false,
                ..
            }
        ),
        "{err:?}"
    );
}

/// With no daemon to ask, a library call on a session Redis lacks is the retryable
/// `NotLive` (SQLite may hold it), never `UnknownSession`; a create writes nothing.
#[tokio::test]
async fn without_a_daemon_an_unknown_id_is_not_live_and_a_create_writes_nothing() {
    let t = env_without_daemon().await;
    let config = t.store.config().clone();
    let s = Store::connect(config.daemon_wait(Duration::from_millis(200)))
        .await
        .unwrap();
    let err = s.messages("ghost", MessageQuery::all()).await.unwrap_err();
    assert!(
        matches!(err, Error::NotLive { ref sid, .. } if sid == "ghost"),
        "{err:?}"
    );
    let err = t
        .rejected(s.create_session(&NewSession::new().id("ghost")))
        .await;
    assert!(matches!(err, Error::NotLive { .. }), "{err:?}");
    // Once a daemon checked this Redis, unknown means unknown, at once.
    t.flush().await;
    let err = s.messages("ghost", MessageQuery::all()).await.unwrap_err();
    assert!(
        matches!(err, Error::UnknownSession(ref id) if id == "ghost"),
        "{err:?}"
    );
    s.create_session(&NewSession::new().id("ghost"))
        .await
        .unwrap();
}

/// The usual picture after Redis restarts: every agent of a session retries at once. With a
/// daemon running, 16 processes opening the lost session all get it whole, and it is
/// restored exactly once (counted in every process's log).
#[tokio::test]
async fn sixteen_processes_opening_a_lost_session_at_once_all_get_it_restored_once() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("shared"))
        .await
        .unwrap();
    for i in 0..20 {
        s.append("shared", &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    t.flush().await;
    let expected = t.cli_ok(&["--db", t.db().to_str().unwrap(), "msg", "list", "shared"]);
    assert_eq!(expected.lines().count(), 20);

    let log = |name: &str| std::fs::File::create(t.server.dir().join(name)).unwrap();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .args(["--redis", &t.server.url(), "--db", t.db().to_str().unwrap()])
        .args(["spill", "--lease-ms", "600"])
        .env("AGENTSTATE_LOG", "agentstate=info")
        .stdout(Stdio::null())
        .stderr(log("daemon.log"))
        .spawn()
        .unwrap();
    t.wait_for_daemon().await;
    flushall(&t);
    let openers: Vec<_> = (0..16)
        .map(|i| {
            t.cli_command()
                .args(["--db", t.db().to_str().unwrap(), "msg", "list", "shared"])
                .env("AGENTSTATE_LOG", "agentstate=info")
                .stdout(Stdio::piped())
                .stderr(log(&format!("opener{i}.log")))
                .spawn()
                .unwrap()
        })
        .collect();
    for opener in openers {
        let out = opener.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
    }
    unsafe {
        libc::kill(daemon.id() as i32, libc::SIGTERM);
    }
    assert!(daemon.wait().unwrap().success());
    let restores: usize = std::fs::read_dir(t.server.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "log") && p.file_name().unwrap() != "redis.log"
        })
        .map(|p| {
            std::fs::read_to_string(&p)
                .unwrap()
                .matches("restored session")
                .count()
        })
        .sum();
    assert_eq!(restores, 1);
}

/// `(created_at, metadata)` of session `sid` in SQLite, plus its messages.
fn sqlite_history(db: &std::path::Path, sid: &str) -> (String, Vec<(i64, String)>) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let head: String = conn
        .query_row(
            "SELECT created_at || ' ' || metadata || ' ' || updated_at FROM sessions WHERE id = ?1",
            [sid],
            |r| r.get(0),
        )
        .unwrap();
    (head, sqlite_messages(db, sid))
}

/// Creates of ids SQLite holds, racing two Redis losses while a daemon runs: every one is
/// refused (`AlreadyExists`, or the retryable `NotLive` while the daemon recovers), whatever
/// the timing; fresh ids go on being created; SQLite's rows of the durable sessions stay
/// byte for byte what they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_racing_a_redis_loss_never_replace_a_durable_history() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    let t = env().await;
    let s = t.store.clone();
    let ids: Vec<String> = (0..8).map(|i| format!("durable{i}")).collect();
    for id in &ids {
        s.create_session(
            &NewSession::new()
                .id(id)
                .metadata(serde_json::json!({"n": id})),
        )
        .await
        .unwrap();
        for i in 0..3 {
            s.append(id, &NewMessage::new("user").content(format!("{id}-{i}")))
                .await
                .unwrap();
        }
    }
    t.flush().await;
    let before: Vec<_> = ids.iter().map(|id| sqlite_history(&t.db(), id)).collect();

    let (stop_daemon, daemon) = t.start_daemon().await;
    let stop = Arc::new(AtomicBool::new(false));
    let fresh = Arc::new(AtomicUsize::new(0));
    let racers: Vec<_> = (0..4)
        .map(|w| {
            let (s, ids, stop, fresh) = (s.clone(), ids.clone(), stop.clone(), fresh.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    for id in &ids {
                        match s.create_session(&NewSession::new().id(id)).await {
                            Ok(_) => panic!("a create replaced durable session {id}"),
                            Err(Error::AlreadyExists(_) | Error::NotLive { .. }) => {}
                            // A call in flight while Redis goes away.
                            Err(Error::RedisUnavailable { .. }) => {}
                            Err(other) => panic!("{id}: {other:?}"),
                        }
                    }
                    n += 1;
                    let id = format!("fresh{w}x{n}");
                    if s.create_session(&NewSession::new().id(&id)).await.is_ok() {
                        fresh.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        flushall(&t);
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    stop.store(true, Ordering::Relaxed);
    for r in racers {
        r.await.unwrap();
    }
    stop_daemon.cancel();
    daemon.await.unwrap().unwrap();
    t.flush().await;
    assert!(
        fresh.load(Ordering::Relaxed) > 0,
        "fresh ids were created meanwhile"
    );
    let after: Vec<_> = ids.iter().map(|id| sqlite_history(&t.db(), id)).collect();
    assert_eq!(after, before);
}
