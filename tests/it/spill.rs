//! The spill daemon against a real redis-server and a real SQLite file: flushing exactly
//! once, restoring after Redis loss or expiry, durable writes, trimming, erasure.

use std::time::Duration;

use agentstate::*;
use serde_json::json;

use crate::support::{create, env, env_with, json_lines, TestEnv};

/// Builds a session with every kind of durable state; returns its id and its child's.
async fn rich_session(s: &Store, sid: &str) -> (String, String) {
    s.create_session(
        &NewSession::new()
            .id(sid)
            .user("alice")
            .model("m1")
            .system_prompt("be brief")
            .metadata(json!({"b": 2, "a": [1, "x/y"]})),
    )
    .await
    .unwrap();
    let kid = s
        .create_session(
            &NewSession::new()
                .id(format!("{sid}.kid"))
                .parent(sid, Lifecycle::Linked),
        )
        .await
        .unwrap();
    for i in 1..=6 {
        let opts = AppendOptions::new().idempotency_key(format!("k{i}"));
        s.append_with(
            sid,
            &NewMessage::new("user").content(format!("m{i} \u{e9}\"q\"")),
            &opts,
        )
        .await
        .unwrap();
    }
    s.compact(
        sid,
        &Compaction::new(2, 3, "sum").tokens(50, 5).round_index(1),
    )
    .await
    .unwrap();
    s.compact(sid, &Compaction::new(4, 4, "sum2"))
        .await
        .unwrap();
    s.record_usage(sid, &Usage::new(1, 10, 20).model("m1"))
        .await
        .unwrap();
    s.record_usage(sid, &Usage::new(1, 11, 21)).await.unwrap();
    s.checkpoint(sid, "a", None).await.unwrap();
    s.checkpoint(sid, "a", None).await.unwrap();
    s.checkpoint(sid, "b", None).await.unwrap();
    s.set_pending(sid, Some(&json!([{"id": "call1"}])))
        .await
        .unwrap();
    s.set_round_index(sid, 3).await.unwrap();
    let done = s
        .record_decision(sid, &NewDecision::new("d1", "r1"))
        .await
        .unwrap();
    s.record_outcome(&done, "ok").await.unwrap();
    s.record_decision(
        sid,
        &NewDecision::new("d2 a/b", "r2")
            .action("act")
            .meta(json!({"z": 1})),
    )
    .await
    .unwrap();
    s.save_state("alice", &json!({"r": 1}), Some(sid), None)
        .await
        .unwrap();
    s.save_state("alice", &json!({"r": 5}), Some(sid), Some(5))
        .await
        .unwrap();
    (sid.to_string(), kid)
}

fn count(t: &TestEnv, sql: &str, sid: &str) -> i64 {
    t.sqlite().query_row(sql, [sid], |r| r.get(0)).unwrap()
}

#[tokio::test]
async fn flush_lands_every_entry_once_and_publishes_the_committed_ids() {
    let t = env().await;
    let s = &t.store;
    let (sid, kid) = rich_session(s, "rich1").await;
    let p = s.keys().partition(&sid);
    let wal_before = t.xlen(&s.keys().wal(p));
    assert!(wal_before > 10);
    let report = t.flush().await;
    assert_eq!(report.partitions, 16);
    assert!(report.wal >= wal_before as u64, "{report:?}");
    assert_eq!(report.decisions, 3);

    let db = t.sqlite();
    let seqs: Vec<(i64, String)> = db
        .prepare("SELECT seq, element FROM messages WHERE session_id = ?1 ORDER BY seq")
        .unwrap()
        .query_map([&sid], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        seqs.iter().map(|x| x.0).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    let live: Vec<String> = redis::cmd("LRANGE")
        .arg(s.keys().session(&sid).msgs)
        .arg(0)
        .arg(-1)
        .query(&mut t.redis())
        .unwrap();
    assert_eq!(seqs.iter().map(|x| x.1.clone()).collect::<Vec<_>>(), live);
    assert!(seqs[1].1.starts_with(r#"{"seq":2,"state":"compacted_out""#));
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM compactions WHERE session_id = ?1",
            &sid
        ),
        2
    );
    assert_eq!(
        count(&t, "SELECT count(*) FROM usage WHERE session_id = ?1", &sid),
        1
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM checkpoints WHERE session_id = ?1",
            &sid
        ),
        3
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE session_id = ?1 AND outcome IS NULL",
            &sid
        ),
        1
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE session_id = ?1 AND outcome = 'ok'",
            &sid
        ),
        1
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM rounds WHERE session_id = ?1",
            &sid
        ),
        2
    );
    assert_eq!(
        count(&t, "SELECT round_index FROM sessions WHERE id = ?1", &sid),
        3
    );
    assert_eq!(
        count(&t, "SELECT count(*) FROM sessions WHERE parent = ?1", &sid),
        1
    );
    assert_eq!(
        count(&t, "SELECT spawn_depth FROM sessions WHERE id = ?1", &kid),
        1
    );

    // The committed hash names the last entry of each stream, which the trimmer kept.
    let mut c = t.redis();
    let last_wal: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
        .arg(s.keys().wal(p))
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let committed: Option<String> = redis::cmd("HGET")
        .arg(s.keys().committed(p))
        .arg("wal")
        .query(&mut c)
        .unwrap();
    assert_eq!(committed.as_deref(), Some(last_wal[0].0.as_str()));
    assert_eq!(t.xlen(&s.keys().wal(p)), 1);

    // A second pass finds nothing to do.
    assert_eq!(t.flush().await.wal, 0);
}

#[tokio::test]
async fn redis_lost_after_a_flush_restores_every_session_exactly() {
    let mut t = env().await;
    let (sid, kid) = rich_session(&t.store, "rich2").await;
    let open_before = t.store.incomplete_decisions(Some(&sid)).await.unwrap();
    let before = (t.session_dump(&sid), t.session_dump(&kid));
    let listed = t.store.list_sessions(Some("alice")).await.unwrap();
    // Several daemons in turn commit to this partition, so SQLite records a fencing token
    // above 1: the lease counter Redis loses must not fence the next daemon out.
    let p = t.store.keys().partition(&sid);
    let neighbour = (0..)
        .map(|i| format!("u{i}"))
        .find(|u| t.store.keys().partition(u) == p)
        .unwrap();
    for i in 0..3 {
        let value = json!(i);
        t.store
            .set_user_value(&neighbour, "n", &value)
            .await
            .unwrap();
        t.flush().await;
    }
    assert_eq!(
        count(
            &t,
            "SELECT token FROM cursors WHERE partition = ?1",
            &p.to_string()
        ),
        3
    );

    t.lose_redis().await;
    assert!(t.store.session(&sid).await.unwrap().is_none());
    let (stop, daemon) = t.start_daemon().await;
    let s = &t.store;
    assert_eq!(s.require_session(&sid).await.unwrap().next_seq, 9);
    assert_eq!(s.require_session(&kid).await.unwrap().spawn_depth, 1);
    assert_eq!((t.session_dump(&sid), t.session_dump(&kid)), before);
    assert_eq!(
        s.incomplete_decisions(Some(&sid)).await.unwrap(),
        open_before
    );
    assert_eq!(s.list_sessions(Some("alice")).await.unwrap(), listed);
    assert_eq!(
        s.export_state("alice", Some(&sid), None).await.unwrap(),
        Some(json!({"r": 5}))
    );
    assert_eq!(
        s.export_state("alice", Some(&sid), Some(1)).await.unwrap(),
        Some(json!({"r": 1}))
    );
    // Seqs continue where they stopped; an old idempotency key still answers.
    assert_eq!(
        s.with_durability(Durability::Durable)
            .append(&sid, &NewMessage::new("user").content("next"))
            .await
            .unwrap(),
        9
    );
    let again = AppendOptions::new().idempotency_key("k2");
    assert_eq!(
        s.append_with(&sid, &NewMessage::new("user"), &again)
            .await
            .unwrap(),
        2
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_session_that_expired_rehydrates_on_the_next_call_with_empty_working_state() {
    let t = env().await;
    let s = &t.store;
    let sid = s
        .create_session(&NewSession::new().ttl(Duration::from_secs(1)))
        .await
        .unwrap();
    for i in 1..=3 {
        s.append(&sid, &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    s.set_working(&sid, "scratch", &json!(1)).await.unwrap();
    let ckpt = s.checkpoint(&sid, "c1", None).await.unwrap();
    let (stop, daemon) = t.start_daemon().await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let mut c = t.redis();
    let live: bool = redis::cmd("EXISTS")
        .arg(s.keys().session(&sid).meta)
        .query(&mut c)
        .unwrap();
    assert!(!live, "the session should have expired");
    // A plain read restores it too (checkpoints keep their payload; working state does not).
    let latest = s.checkpoint_latest(&sid, "c1").await.unwrap().unwrap();
    assert_eq!((latest.id, latest.payload), (ckpt, json!({"scratch": 1})));
    assert_eq!(
        s.append(&sid, &NewMessage::new("user").content("m4"))
            .await
            .unwrap(),
        4
    );
    let seqs: Vec<u64> = s
        .messages(&sid, MessageQuery::all())
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    assert!(s.working(&sid).await.unwrap().values.is_empty());
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn without_a_daemon_restores_and_durable_writes_fail_clearly_after_a_bounded_wait() {
    let t = env_with(|c| c.daemon_wait(Duration::from_millis(300))).await;
    let s = &t.store;
    // An id the session index never held is unknown at once, with or without a daemon.
    let err = s
        .append("nobody", &NewMessage::new("user"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::UnknownSession(ref sid) if sid == "nobody"),
        "{err:?}"
    );
    // A session that expired needs a daemon: without one, a bounded wait, then NotLive.
    let gone = s
        .create_session(&NewSession::new().ttl(Duration::from_secs(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let started = std::time::Instant::now();
    let err = s.append(&gone, &NewMessage::new("user")).await.unwrap_err();
    assert!(
        matches!(err, Error::NotLive { ref sid, .. } if *sid == gone),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    let sid = s.create_session(&NewSession::new()).await.unwrap();
    let durable = s.with_durability(Durability::Durable);
    let err = durable
        .append(&sid, &NewMessage::new("user"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DurabilityTimeout(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // Every durable write waits, deletions and outcomes too.
    s.set_user_value("u1", "k", &json!(1)).await.unwrap();
    let err = durable.delete_user_value("u1", "k").await.unwrap_err();
    assert!(matches!(err, Error::DurabilityTimeout(_)), "{err:?}");
    let d = s
        .record_decision(&sid, &NewDecision::new("d", "r"))
        .await
        .unwrap();
    let err = durable.record_outcome(&d, "o").await.unwrap_err();
    assert!(matches!(err, Error::DurabilityTimeout(_)), "{err:?}");
    // With a daemon, an indexed session SQLite does not know is answered `unknown`.
    let (stop, daemon) = t.start_daemon().await;
    let patient = Store::connect(s.config().clone().daemon_wait(Duration::from_secs(10)))
        .await
        .unwrap();
    let phantom = "phantom";
    let _: i64 = redis::cmd("SADD")
        .arg(s.keys().sessions_index(s.keys().partition(phantom)))
        .arg(phantom)
        .query(&mut t.redis())
        .unwrap();
    let err = patient.require_session(phantom).await.unwrap_err();
    assert!(
        matches!(err, Error::UnknownSession(ref id) if id == phantom),
        "{err:?}"
    );
    let reply: Option<String> = redis::cmd("GET")
        .arg(s.keys().restore_reply(phantom))
        .query(&mut t.redis())
        .unwrap();
    assert_eq!(reply.as_deref(), Some("unknown"));
    assert!(
        !s.restore_session(&sid).await.unwrap(),
        "live sessions need no restore"
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_durable_write_survives_redis_loss_right_after_it_returns() {
    let mut t = env().await;
    let (stop, daemon) = t.start_daemon().await;
    let durable = t.store.with_durability(Durability::Durable);
    let sid = durable.create_session(&NewSession::new()).await.unwrap();
    let seq = durable
        .append(&sid, &NewMessage::new("user").content("keep me"))
        .await
        .unwrap();
    assert_eq!(seq, 1);
    stop.cancel();
    daemon.await.unwrap().unwrap();
    t.lose_redis().await;
    let (stop, daemon) = t.start_daemon().await;
    let msgs = t.store.messages(&sid, MessageQuery::all()).await.unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].content.as_deref(), Some("keep me"));
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn streams_shrink_only_below_what_sqlite_committed_and_keep_undelivered_decisions() {
    let t = env().await;
    let s = &t.store;
    let sid = s
        .create_session(&NewSession::new().id("trim1"))
        .await
        .unwrap();
    let p = s.keys().partition(&sid);
    for _ in 0..10 {
        s.append(&sid, &NewMessage::new("user")).await.unwrap();
    }
    let dkey = s.keys().decisions(p);
    let mut c = t.redis();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&dkey)
        .arg("g")
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    for i in 0..3 {
        s.record_decision(&sid, &NewDecision::new(format!("d{i}"), "r"))
            .await
            .unwrap();
    }
    // No daemon: nothing is committed, nothing is trimmed.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(t.xlen(&s.keys().wal(p)), 11);
    assert_eq!(t.wal_entries(), 11);
    // One decision delivered and still pending, two undelivered: all three stay.
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("c")
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg(&dkey)
        .arg(">")
        .query(&mut c)
        .unwrap();
    t.flush().await;
    assert_eq!(t.xlen(&s.keys().wal(p)), 1);
    assert_eq!(t.xlen(&dkey), 3);
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE session_id = ?1",
            &sid
        ),
        3
    );
    // Acknowledging the first lets it go.
    let first: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(&dkey)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("XACK")
        .arg(&dkey)
        .arg("g")
        .arg(&first[0].0)
        .query(&mut c)
        .unwrap();
    s.append(&sid, &NewMessage::new("user")).await.unwrap();
    t.flush().await;
    assert_eq!(t.xlen(&dkey), 2);
    // The hard cap trims undelivered decisions too, but only what SQLite holds.
    let capped = agentstate::SpillDaemon::open(t.store.clone(), t.spill_config().decisions_cap(1))
        .await
        .unwrap();
    s.append(&sid, &NewMessage::new("user")).await.unwrap();
    capped.run_once().await.unwrap();
    assert_eq!(t.xlen(&dkey), 1);
}

/// True when `needle` occurs in the SQLite file or its -wal file.
fn db_files_contain(t: &TestEnv, needle: &[u8]) -> bool {
    let mut files = vec![t.db()];
    files.push(t.db().with_extension("db-wal"));
    files.iter().any(|f| {
        std::fs::read(f)
            .map(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
            .unwrap_or(false)
    })
}

#[tokio::test]
async fn a_forgotten_users_values_are_gone_from_the_sqlite_files() {
    let t = env().await;
    let s = &t.store;
    let secret = "SECRET-7f3a9c-value-of-bob";
    s.set_user_value("bob", "ssn", &json!(secret))
        .await
        .unwrap();
    s.set_user_value("bob", "tz", &json!("UTC+1"))
        .await
        .unwrap();
    s.set_user_value("carol", "tz", &json!("carol-keeps-this"))
        .await
        .unwrap();
    t.flush().await;
    assert!(
        db_files_contain(&t, secret.as_bytes()),
        "the value should be in SQLite first"
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM user_values WHERE user_id = ?1",
            "bob"
        ),
        2
    );
    // The wal carries only references.
    let p = s.keys().partition("bob");
    let wal: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(s.keys().wal(p))
        .arg("-")
        .arg("+")
        .query(&mut t.redis())
        .unwrap();
    assert!(!format!("{wal:?}").contains(secret));

    s.forget_user("bob").await.unwrap();
    // Only the tombstone is left, and it holds no value of bob's.
    let tombstone = s.keys().user_forgotten("bob");
    let left: Vec<String> = t
        .all_keys()
        .into_iter()
        .filter(|k| k.contains(":u:bob"))
        .collect();
    assert_eq!(left, std::slice::from_ref(&tombstone));
    assert!(!t.cmd::<String>(&["GET", &tombstone]).contains(secret));
    t.flush().await;
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM user_values WHERE user_id = ?1",
            "bob"
        ),
        0
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM user_values WHERE user_id = ?1",
            "carol"
        ),
        1
    );
    assert!(
        !db_files_contain(&t, secret.as_bytes()),
        "erased bytes remain in the SQLite files"
    );
    assert!(!db_files_contain(&t, b"UTC+1"));
    assert!(db_files_contain(&t, b"carol-keeps-this"));
}

#[tokio::test]
async fn closing_a_session_removes_its_tree_from_sqlite() {
    let t = env().await;
    let s = &t.store;
    let (root, linked, grandkid, detached) = ("croot", "clinked", "cgrand", "cdet");
    create(&t, root, None, None).await;
    create(&t, linked, None, Some((root, Lifecycle::Linked))).await;
    create(&t, grandkid, None, Some((linked, Lifecycle::Ephemeral))).await;
    create(&t, detached, None, Some((root, Lifecycle::Detached))).await;
    for sid in [root, linked, grandkid] {
        s.append(sid, &NewMessage::new("user")).await.unwrap();
        s.record_decision(sid, &NewDecision::new("d", "r"))
            .await
            .unwrap();
    }
    t.flush().await;
    assert_eq!(
        t.sqlite()
            .query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        4
    );
    assert_eq!(s.close_session(root, true).await.unwrap(), 3);
    t.flush().await;
    let db = t.sqlite();
    let left: Vec<(String, String)> = db
        .prepare("SELECT id, parent FROM sessions ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(left, vec![(detached.to_string(), String::new())]);
    for table in ["messages", "decisions"] {
        let n: i64 = db
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
}

#[tokio::test]
async fn concurrent_openers_restore_a_session_once() {
    let mut t = env().await;
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    for _ in 0..20 {
        t.store
            .append(&sid, &NewMessage::new("user"))
            .await
            .unwrap();
    }
    t.flush().await;
    t.lose_redis().await;
    let (stop, daemon) = t.start_daemon().await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = t.store.clone();
        let sid = sid.clone();
        tasks.push(tokio::spawn(async move {
            s.append(&sid, &NewMessage::new("user").content(format!("c{i}")))
                .await
                .unwrap()
        }));
    }
    let mut seqs = Vec::new();
    for task in tasks {
        seqs.push(task.await.unwrap());
    }
    seqs.sort();
    assert_eq!(seqs, (21..=28).collect::<Vec<u64>>());
    let all = t.store.messages(&sid, MessageQuery::all()).await.unwrap();
    assert_eq!(
        all.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=28).collect::<Vec<u64>>()
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_standby_takes_over_when_the_owner_dies_and_nothing_is_lost_or_doubled() {
    let t = env().await;
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    let writer = {
        let s = t.store.clone();
        let sid = sid.clone();
        tokio::spawn(async move {
            for _ in 0..400 {
                s.append(&sid, &NewMessage::new("user")).await.unwrap();
            }
        })
    };
    // Owners die abruptly (task aborted at any await) while the writer runs.
    for _ in 0..6 {
        let (_stop, daemon) = t.start_daemon().await;
        tokio::time::sleep(Duration::from_millis(60)).await;
        daemon.abort();
        let _ = daemon.await;
    }
    writer.await.unwrap();
    let (stop, daemon) = t.start_daemon().await;
    let durable = t.store.with_durability(Durability::Durable);
    assert_eq!(
        durable
            .append(&sid, &NewMessage::new("user"))
            .await
            .unwrap(),
        401
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
    let db = t.sqlite();
    let (n, lo, hi): (i64, i64, i64) = db
        .query_row(
            "SELECT count(*), min(seq), max(seq) FROM messages WHERE session_id = ?1",
            [&sid],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((n, lo, hi), (401, 1, 401));
}

/// Flusher throughput and rehydration time. Run in release mode:
/// `cargo test --release --test it spill_bench -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn spill_bench() {
    let t = env().await;
    let figures = agentstate::bench::spill::run(&t.store, &t.db(), 200_000, 10_000)
        .await
        .unwrap();
    println!("{}", serde_json::to_string_pretty(&figures).unwrap());
    assert_eq!(figures.rehydrate.messages, 10_000);
}

/// `agentstate spill` as a child process of this test, against the test's Redis and SQLite.
fn spill_process(t: &TestEnv, extra: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agentstate"));
    cmd.arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(t.db())
        .arg("spill")
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    cmd
}

#[tokio::test]
async fn repeated_sigkill_of_the_daemon_process_under_a_concurrent_writer_loses_and_duplicates_nothing(
) {
    let t = env().await;
    let sids: Vec<String> = (0..3).map(|i| format!("kill{i}")).collect();
    for sid in &sids {
        t.store
            .create_session(&NewSession::new().id(sid))
            .await
            .unwrap();
    }
    let per_session = 300;
    let writer = {
        let s = t.store.clone();
        let sids = sids.clone();
        tokio::spawn(async move {
            for i in 0..per_session {
                for sid in &sids {
                    s.append(sid, &NewMessage::new("user").content(format!("{i}")))
                        .await
                        .unwrap();
                }
                if i % 20 == 0 {
                    s.record_decision(&sids[0], &NewDecision::new(format!("d{i}"), "r"))
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let mut kills = 0;
    while !writer.is_finished() || kills < 3 {
        let mut child = spill_process(&t, &["--interval-ms", "5", "--lease-ms", "200"])
            .spawn()
            .unwrap();
        // Long enough to take over the lapsed leases and flush; killed at a varying instant.
        tokio::time::sleep(Duration::from_millis(250 + 37 * (kills % 5))).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
    }
    writer.await.unwrap();
    let flushed_by_killed = count(
        &t,
        "SELECT count(*) FROM messages WHERE session_id = ?1",
        &sids[2],
    );
    assert!(flushed_by_killed > 0, "the killed daemons flushed nothing");
    tokio::time::sleep(Duration::from_millis(250)).await; // the last lease lapses
    let out = spill_process(&t, &["--once"]).output().unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["partitions"], 16, "{report}");
    let db = t.sqlite();
    for sid in &sids {
        let (n, lo, hi): (i64, i64, i64) = db
            .query_row(
                "SELECT count(*), min(seq), max(seq) FROM messages WHERE session_id = ?1",
                [sid],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(
            (n, lo, hi),
            (per_session, 1, per_session),
            "{sid} after {kills} kills"
        );
    }
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE session_id = ?1",
            &sids[0]
        ),
        15
    );
}

#[tokio::test]
async fn sigterm_drains_commits_and_exits_zero() {
    let t = env().await;
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    let mut child = spill_process(&t, &["--interval-ms", "5"]).spawn().unwrap();
    for _ in 0..50 {
        t.store
            .append(&sid, &NewMessage::new("user"))
            .await
            .unwrap();
    }
    let durable = t.store.with_durability(Durability::Durable);
    assert_eq!(
        durable
            .append(&sid, &NewMessage::new("user"))
            .await
            .unwrap(),
        51
    );
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM messages WHERE session_id = ?1",
            &sid
        ),
        51
    );
    // The leases were released: a new daemon takes over at once.
    let mut c = t.redis();
    let lease: Option<String> = redis::cmd("GET")
        .arg(t.store.keys().lease(t.store.keys().partition(&sid)))
        .query(&mut c)
        .unwrap();
    assert_eq!(lease, None);
}

/// Runs `agentstate <args>` against the test's Redis and SQLite; returns (exit code, stdout).
fn cli(t: &TestEnv, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(t.db())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[tokio::test]
async fn cli_export_stats_and_restore() {
    let mut t = env().await;
    let (sid, _) = rich_session(&t.store, "cli1").await;
    let (code, stats) = cli(&t, &["--json", "stats"]);
    assert_eq!(code, 0);
    let p = t.store.keys().partition(&sid) as usize;
    let row: serde_json::Value = serde_json::from_str(stats.lines().nth(p).unwrap()).unwrap();
    assert_eq!(row["wal_pending"], t.xlen(&t.store.keys().wal(p as u32)));
    assert_eq!(row["wal_committed"], serde_json::Value::Null);

    assert_eq!(cli(&t, &["spill", "--once"]).0, 0);
    let (_, stats) = cli(&t, &["--json", "stats"]);
    let row: serde_json::Value = serde_json::from_str(stats.lines().nth(p).unwrap()).unwrap();
    assert_eq!(
        (row["wal_pending"].as_u64(), row["lag_ms"].as_u64()),
        (Some(0), Some(0))
    );

    let (code, export) = cli(&t, &["export", &sid]);
    assert_eq!(code, 0);
    let kinds: Vec<String> = export
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let n = |k: &str| kinds.iter().filter(|x| *x == k).count();
    assert_eq!(kinds[0], "session");
    assert_eq!(
        (
            n("message"),
            n("compaction"),
            n("usage"),
            n("checkpoint"),
            n("decision"),
            n("round")
        ),
        (8, 2, 1, 3, 2, 2)
    );
    assert_eq!(cli(&t, &["export", "nosuch"]).0, 1);

    t.lose_redis().await;
    let mut daemon = spill_process(&t, &["--interval-ms", "5"]).spawn().unwrap();
    t.wait_for_daemon().await;
    assert_eq!(cli(&t, &["restore", &sid]), (0, "restored\n".into()));
    assert_eq!(cli(&t, &["restore", &sid]), (0, "live\n".into()));
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}

#[tokio::test]
async fn after_redis_loss_new_entries_flush_even_when_their_ids_sort_below_the_cursor() {
    let mut t = env().await;
    t.store
        .create_session(&NewSession::new().id("before"))
        .await
        .unwrap();
    t.flush().await;
    t.lose_redis().await;
    // A Redis whose clock runs behind: its first wal entry gets a tiny id.
    let p = t.store.keys().partition("before");
    let late = (0..)
        .map(|i| format!("late{i}"))
        .find(|s| t.store.keys().partition(s) == p)
        .unwrap();
    let record = r#"{"user_id":null,"kind":"root","parent":null,"spawn_depth":0,"lifecycle":"ephemeral","status":"active","model":null,"system_prompt":null,"config":{},"metadata":{},"ttl":60,"created_at":5}"#;
    let _: String = redis::cmd("XADD")
        .arg(t.store.keys().wal(p))
        .arg("1-1")
        .arg("op")
        .arg("session_create")
        .arg("id")
        .arg(&late)
        .arg("d")
        .arg(record)
        .query(&mut t.redis())
        .unwrap();
    assert_eq!(t.flush().await.wal, 1);
    assert_eq!(
        count(&t, "SELECT count(*) FROM sessions WHERE id = ?1", &late),
        1
    );
    assert_eq!(
        count(&t, "SELECT count(*) FROM sessions WHERE id = ?1", "before"),
        1
    );
    let committed: Option<String> = redis::cmd("HGET")
        .arg(t.store.keys().committed(p))
        .arg("wal")
        .query(&mut t.redis())
        .unwrap();
    assert_eq!(committed.as_deref(), Some("1-1"));
}

/// Multi-threaded, as agent processes run: a connection's driver sees the restart close its
/// socket while the test thread is blocked restarting Redis (see `src/pool.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn right_after_redis_restarts_empty_an_opener_waits_for_the_running_daemon() {
    let mut t = env().await;
    t.store
        .create_session(&NewSession::new().id("kept").user("alice"))
        .await
        .unwrap();
    for i in 0..5 {
        t.store
            .append("kept", &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    let (stop, daemon) = t.start_daemon().await;
    let durable = t.store.with_durability(agentstate::Durability::Durable);
    assert_eq!(
        durable
            .append("kept", &NewMessage::new("user"))
            .await
            .unwrap(),
        6
    );
    // The same long-lived store (no reconnect: `<prefix>:config` is gone with Redis) and the
    // same running daemon, which has not re-taken the partition yet.
    t.server.restart_empty().unwrap();
    let restored = t.store.require_session("kept").await.unwrap();
    assert_eq!(restored.next_seq, 7);
    assert_eq!(
        t.store.list_sessions(Some("alice")).await.unwrap(),
        vec!["kept"]
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn user_values_and_state_rounds_come_back_after_redis_restarts_empty() {
    let mut t = env().await;
    let (stop, daemon) = t.start_daemon().await;
    let durable = t.store.with_durability(Durability::Durable);
    durable
        .set_user_value("ann", "email", &json!("ann@example.org"))
        .await
        .unwrap();
    durable
        .set_user_value("ann", "prefs", &json!({"tz": "UTC"}))
        .await
        .unwrap();
    durable
        .set_user_value("ben", "email", &json!("ben@example.org"))
        .await
        .unwrap();
    for r in 1..=2 {
        durable
            .save_state("ann", &json!({"r": r}), None, None)
            .await
            .unwrap();
    }
    durable
        .save_state("ben", &json!({"x": 1}), Some("chat"), Some(7))
        .await
        .unwrap();
    // The same running daemon re-takes the partitions of the empty Redis.
    t.lose_redis().await;
    t.wait_for_daemon().await;
    let s = &t.store;
    assert_eq!(
        s.user_value("ann", "email").await.unwrap(),
        Some(json!("ann@example.org"))
    );
    assert_eq!(
        s.user_value("ann", "prefs").await.unwrap(),
        Some(json!({"tz": "UTC"}))
    );
    assert_eq!(
        s.user_value("ben", "email").await.unwrap(),
        Some(json!("ben@example.org"))
    );
    assert_eq!(
        s.export_state("ann", None, None).await.unwrap(),
        Some(json!({"r": 2}))
    );
    assert_eq!(
        s.export_state("ann", None, Some(1)).await.unwrap(),
        Some(json!({"r": 1}))
    );
    assert_eq!(
        s.export_state("ben", Some("chat"), None).await.unwrap(),
        Some(json!({"x": 1}))
    );
    assert_eq!(t.ttl(&s.keys().rounds("ann", "default")), -1);
    // The round counter came back too: the next append continues after 2.
    assert_eq!(
        s.save_state("ann", &json!({"r": 3}), None, None)
            .await
            .unwrap(),
        3
    );
    // Through the CLI as well.
    assert_eq!(
        t.cli_ok(&["user", "get", "ben", "email"]),
        "\"ben@example.org\"\n"
    );
    assert_eq!(
        t.cli_ok(&["state", "export", "ben", "--session", "chat"]),
        "{\"x\":1}\n"
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn after_redis_loss_a_forget_stays_forgotten_and_a_newer_value_wins() {
    let mut t = env().await;
    let (stop, daemon) = t.start_daemon().await;
    let durable = t.store.with_durability(Durability::Durable);
    durable
        .set_user_value("ann", "email", &json!("old@example.org"))
        .await
        .unwrap();
    durable
        .set_user_value("ann", "tz", &json!("UTC"))
        .await
        .unwrap();
    for user in ["bob", "dan"] {
        durable
            .set_user_value(user, "ssn", &json!(format!("{user}-secret")))
            .await
            .unwrap();
    }
    stop.cancel();
    daemon.await.unwrap().unwrap();
    // Redis is lost; before any daemon re-takes the partitions, agents forget bob and write
    // a newer value for ann.
    t.lose_redis().await;
    let s = &t.store;
    assert_eq!(s.forget_user("bob").await.unwrap().removed_keys.len(), 0);
    assert_eq!(s.forget_user("dan").await.unwrap().removed_keys.len(), 0);
    // dan's daemon comes back after his tombstone expired: the flush before the re-seed is
    // what keeps him forgotten.
    assert!(t.cmd::<bool>(&["DEL", &s.keys().user_forgotten("dan")]));
    s.set_user_value("ann", "email", &json!("new@example.org"))
        .await
        .unwrap();
    let (stop, daemon) = t.start_daemon().await;
    for user in ["bob", "dan"] {
        assert_eq!(s.user_value(user, "ssn").await.unwrap(), None);
        assert!(!t.cmd::<bool>(&["EXISTS", &s.keys().user(user)]));
    }
    assert_eq!(
        s.user_value("ann", "email").await.unwrap(),
        Some(json!("new@example.org"))
    );
    assert_eq!(s.user_value("ann", "tz").await.unwrap(), Some(json!("UTC")));
    let rows = |user: &str| -> Vec<(String, String)> {
        let db = t.sqlite();
        let mut stmt = db
            .prepare("SELECT key, value FROM user_values WHERE user_id = ?1 ORDER BY key")
            .unwrap();
        let rows = stmt
            .query_map([user], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    };
    assert_eq!(rows("bob"), []);
    assert_eq!(rows("dan"), []);
    assert_eq!(
        rows("ann"),
        [
            ("email".to_string(), "\"new@example.org\"".to_string()),
            ("tz".to_string(), "\"UTC\"".to_string()),
        ]
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

/// `reseed_user_values.lua` on its own, at the moment between the daemon's flush (SQLite
/// still holds the values) and its re-seed: what agents did since is left alone.
#[tokio::test]
async fn the_user_reseed_script_never_overwrites_or_resurrects() {
    let t = env().await;
    let s = &t.store;
    let script = redis::Script::new(concat!(
        include_str!("../../lua/_prelude.lua"),
        include_str!("../../lua/reseed_user_values.lua")
    ));
    // The caller holds every partition's lease as "me 7".
    for p in 0..s.keys().partitions() {
        let _: () = t.cmd(&["SET", &s.keys().lease(p), "me 7"]);
    }
    let reseed_as = |lease: &str, user: &str, cursor: &str, pairs: &[(&str, &str)]| -> i64 {
        let p = s.keys().partition(user);
        let mut inv = script.prepare_invoke();
        inv.key(s.keys().user(user))
            .key(s.keys().user_forgotten(user))
            .key(s.keys().wal(p))
            .key(s.keys().lease(p))
            .arg(user)
            .arg(cursor)
            .arg(lease);
        for (k, v) in pairs {
            inv.arg(*k).arg(*v);
        }
        inv.invoke(&mut t.redis()).unwrap()
    };
    let reseed =
        |user: &str, cursor: &str, pairs: &[(&str, &str)]| reseed_as("me 7", user, cursor, pairs);
    s.set_user_value("ann", "email", &json!("new"))
        .await
        .unwrap();
    s.set_user_value("ann", "tz", &json!("CET")).await.unwrap();
    s.set_user_value("bob", "ssn", &json!("x")).await.unwrap();
    // Everything up to here is "flushed"; then ann deletes tz and bob is forgotten.
    let p = s.keys().partition("ann");
    let last: Vec<(String, Vec<String>)> =
        t.cmd(&["XREVRANGE", &s.keys().wal(p), "+", "-", "COUNT", "1"]);
    let cursor = last[0].0.clone();
    assert!(s.delete_user_value("ann", "tz").await.unwrap());
    s.forget_user("bob").await.unwrap();
    let sqlite_ann = [("email", "\"old\""), ("tz", "\"UTC\""), ("lang", "\"en\"")];
    assert_eq!(reseed("ann", &cursor, &sqlite_ann), 1);
    assert_eq!(
        t.hash(&s.keys().user("ann")),
        [
            ("email".to_string(), "\"new\"".to_string()),
            ("lang".to_string(), "\"en\"".to_string()),
        ]
        .into_iter()
        .collect()
    );
    assert_eq!(reseed("bob", &cursor, &[("ssn", "\"x\"")]), 0);
    assert!(!t.cmd::<bool>(&["EXISTS", &s.keys().user("bob")]));
    // Without a tombstone and with nothing after the cursor, a user comes back whole.
    let now: Vec<(String, Vec<String>)> = t.cmd(&[
        "XREVRANGE",
        &s.keys().wal(s.keys().partition("cy")),
        "+",
        "-",
        "COUNT",
        "1",
    ]);
    let at = now.first().map_or("0-0".to_string(), |e| e.0.clone());
    // A daemon whose lease lapsed (another owner took the partition) writes nothing.
    assert_eq!(reseed_as("me 6", "cy", &at, &[("a", "1")]), -1);
    assert!(!t.cmd::<bool>(&["EXISTS", &s.keys().user("cy")]));
    assert_eq!(reseed("cy", &at, &[("a", "1"), ("b", "2")]), 2);
}

#[tokio::test]
async fn cli_checkpoint_list_shows_the_full_history_and_what_is_not_flushed_yet() {
    let t = env().await;
    let s = &t.store;
    create(&t, "hist", None, None).await;
    // One checkpoint per millisecond at least, so created_at alone orders them.
    let checkpoint = |label: &'static str| async move {
        tokio::time::sleep(Duration::from_millis(2)).await;
        s.checkpoint("hist", label, None).await.unwrap()
    };
    s.set_working("hist", "plan", &json!("p1")).await.unwrap();
    let a1 = checkpoint("a").await;
    s.set_working("hist", "plan", &json!("p2")).await.unwrap();
    let a2 = checkpoint("a").await;
    let b1 = checkpoint("b").await;
    t.flush().await;
    let db = t.db();
    let db = db.to_str().unwrap();
    let list = |db: &str| -> Vec<(String, String)> {
        let lines = json_lines(&t.cli_ok(&["--db", db, "checkpoint", "list", "hist"]));
        let mut created = Vec::new();
        let listed = lines
            .iter()
            .map(|l| {
                let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["created_at", "id", "label"], "{l}");
                created.push(l["created_at"].as_i64().unwrap());
                (
                    l["id"].as_str().unwrap().to_string(),
                    l["label"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert!(
            created.is_sorted(),
            "not ordered by created_at: {created:?}"
        );
        listed
    };
    let pair = |id: &str, label: &str| (id.to_string(), label.to_string());
    assert_eq!(list(db), [pair(&a1, "a"), pair(&a2, "a"), pair(&b1, "b")]);
    // One more, not flushed: listed from Redis.
    let c1 = checkpoint("c").await;
    assert_eq!(
        list(db),
        [
            pair(&a1, "a"),
            pair(&a2, "a"),
            pair(&b1, "b"),
            pair(&c1, "c")
        ]
    );
    // Without a SQLite file: the latest per label, from Redis.
    let missing = t.server.path("missing.db");
    assert_eq!(
        list(missing.to_str().unwrap()),
        [pair(&a2, "a"), pair(&b1, "b"), pair(&c1, "c")]
    );
    assert!(!missing.exists(), "the CLI created the SQLite file");
    // Get by id reaches the whole history: a1 was replaced in Redis by a2, SQLite has it.
    let get = |args: &[&str]| {
        let mut all = vec!["--db", db, "checkpoint", "get", "hist"];
        all.extend_from_slice(args);
        t.cli_ok(&all)
    };
    assert_eq!(get(&["--id", &a1]), "{\"plan\":\"p1\"}\n");
    assert_eq!(get(&["--id", &c1]), "{\"plan\":\"p2\"}\n");
    assert_eq!(get(&["a"]), "{\"plan\":\"p2\"}\n");
    assert_eq!(get(&["--id", "ckpt_nosuch"]), "null\n");
}

/// Multi-threaded: the in-process daemon serves the restores while the test thread waits for
/// the CLI process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_restore_all_brings_every_indexed_session_back() {
    let mut t = env().await;
    for sid in ["r1", "r2"] {
        create(&t, sid, Some("ann"), None).await;
        t.store
            .append(sid, &NewMessage::new("user").content(sid))
            .await
            .unwrap();
    }
    t.flush().await;
    t.lose_redis().await;
    let (stop, daemon) = t.start_daemon().await;
    assert_eq!(
        cli(&t, &["restore", "--all"]),
        (0, "r1 restored\nr2 restored\n".into())
    );
    assert_eq!(
        cli(&t, &["restore", "r1", "r2"]),
        (0, "r1 live\nr2 live\n".into())
    );
    assert_eq!(cli(&t, &["restore"]).0, 1);
    assert_eq!(
        t.store.messages("r2", MessageQuery::all()).await.unwrap()[0]
            .content
            .as_deref(),
        Some("r2")
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn closing_a_parent_restores_and_closes_a_child_that_expired_from_redis() {
    let t = env().await;
    create(&t, "boss", Some("ann"), None).await;
    create(&t, "kid", Some("ann"), Some(("boss", Lifecycle::Linked))).await;
    t.flush().await;
    // The child idled out of Redis; its index entries remain (they last until close).
    t.expire_session("kid");
    let (stop, daemon) = t.start_daemon().await;
    assert_eq!(t.store.close_session("boss", true).await.unwrap(), 2);
    assert!(t.store.list_sessions(None).await.unwrap().is_empty());
    assert!(t.store.list_sessions(Some("ann")).await.unwrap().is_empty());
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_sub_agent_can_be_spawned_under_a_parent_that_expired_from_redis() {
    let t = env().await;
    create(&t, "elder", None, None).await;
    t.flush().await;
    t.expire_session("elder");
    let (stop, daemon) = t.start_daemon().await;
    create(&t, "young", None, Some(("elder", Lifecycle::Linked))).await;
    assert_eq!(
        t.store.require_session("young").await.unwrap().spawn_depth,
        1
    );
    assert_eq!(t.store.children("elder").await.unwrap(), vec!["young"]);
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_expired_session_id_cannot_be_created_anew_over_its_durable_history() {
    let t = env().await;
    create(&t, "once", None, None).await;
    t.store
        .append("once", &NewMessage::new("user").content("keep me"))
        .await
        .unwrap();
    t.flush().await;
    t.expire_session("once");
    let err = t
        .rejected(t.store.create_session(&NewSession::new().id("once")))
        .await;
    assert!(matches!(err, Error::AlreadyExists(_)), "{err:?}");
    t.flush().await;
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM messages WHERE session_id = ?1",
            "once"
        ),
        1
    );
}

#[tokio::test]
async fn a_decision_applied_before_its_sessions_create_survives_the_create() {
    let t = env().await;
    create(&t, "busy", None, None).await;
    for i in 0..10 {
        t.store
            .append("busy", &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    // "late" lands in busy's partition: its wal entries queue behind busy's ten messages.
    let late = (0..)
        .map(|i| format!("late{i}"))
        .find(|s| t.store.keys().partition(s) == t.store.keys().partition("busy"))
        .unwrap();
    create(&t, &late, None, None).await;
    let d = t
        .store
        .record_decision(&late, &NewDecision::new("go", "now"))
        .await
        .unwrap();
    // Batches of 4: the decision is applied in the first batch, its session's create later.
    agentstate::SpillDaemon::open(t.store.clone(), t.spill_config().batch_size(4))
        .await
        .unwrap()
        .run_once()
        .await
        .unwrap();
    assert_eq!(
        count(&t, "SELECT count(*) FROM decisions WHERE id = ?1", &d),
        1
    );
    assert_eq!(
        count(&t, "SELECT count(*) FROM sessions WHERE id = ?1", &late),
        1
    );
}

#[tokio::test]
async fn open_decisions_come_back_after_redis_loss_for_crash_recovery() {
    let mut t = env().await;
    create(&t, "dec", None, None).await;
    let open = t
        .store
        .record_decision("dec", &NewDecision::new("open", "pending").action("act"))
        .await
        .unwrap();
    let done = t
        .store
        .record_decision("dec", &NewDecision::new("done", "finished"))
        .await
        .unwrap();
    assert!(t.store.record_outcome(&done, "ok").await.unwrap());
    t.flush().await;
    t.lose_redis().await;
    let (stop, daemon) = t.start_daemon().await;
    let incomplete = t.store.incomplete_decisions(None).await.unwrap();
    assert_eq!(incomplete.len(), 1, "{incomplete:?}");
    assert_eq!(incomplete[0].id, open);
    assert_eq!(incomplete[0].planned_action.as_deref(), Some("act"));
    assert_eq!(
        t.store.incomplete_decisions(Some("dec")).await.unwrap(),
        incomplete
    );
    assert!(t
        .store
        .record_outcome(&open, "late but recorded")
        .await
        .unwrap());
    assert!(t.store.incomplete_decisions(None).await.unwrap().is_empty());
    stop.cancel();
    daemon.await.unwrap().unwrap();
    t.flush().await;
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE id = ?1 AND outcome = 'late but recorded'",
            &open
        ),
        1
    );
}

#[tokio::test]
async fn a_partition_with_an_entry_sqlite_rejects_does_not_hold_the_others_back() {
    let t = env().await;
    let p_bad = t.store.keys().partition("sick");
    let well = (0..)
        .map(|i| format!("well{i}"))
        .find(|s| t.store.keys().partition(s) != p_bad)
        .unwrap();
    create(&t, &well, None, None).await;
    t.store
        .append(&well, &NewMessage::new("user").content("fine"))
        .await
        .unwrap();
    // A wal entry no flusher can apply (not JSON), in another partition.
    let _: String = t.cmd(&[
        "XADD",
        &t.store.keys().wal(p_bad),
        "*",
        "op",
        "msg",
        "id",
        "sick",
        "d",
        "not json",
    ]);
    let report = agentstate::SpillDaemon::open(t.store.clone(), t.spill_config())
        .await
        .unwrap()
        .pass()
        .await
        .unwrap();
    assert!(report.wal >= 2, "{report:?}");
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM messages WHERE session_id = ?1",
            &well
        ),
        1
    );
}

#[tokio::test]
async fn a_seq_handed_out_again_by_a_redis_behind_sqlite_replaces_the_old_message() {
    let t = env().await;
    create(&t, "rewound", None, None).await;
    for c in ["one", "two", "three"] {
        t.store
            .append("rewound", &NewMessage::new("user").content(c))
            .await
            .unwrap();
    }
    t.flush().await;
    // Redis comes back with an older state: message 3 never happened there.
    let k = t.store.keys().session("rewound");
    let _: String = t.cmd(&["RPOP", &k.msgs]);
    let _: i64 = t.cmd(&["HSET", &k.meta, "next_seq", "3"]);
    let seq = t
        .store
        .append("rewound", &NewMessage::new("user").content("three again"))
        .await
        .unwrap();
    assert_eq!(seq, 3);
    t.flush().await;
    let element: String = t
        .sqlite()
        .query_row(
            "SELECT element FROM messages WHERE session_id = 'rewound' AND seq = 3",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(element.contains("three again"), "{element}");
}
