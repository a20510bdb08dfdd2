//! Redis down and Redis with a password: typed errors from the library, the error contract
//! from the CLI.

use agentstate::test_support::redis_server::{free_port, RedisServer};
use agentstate::*;

use std::sync::Arc;
use std::time::Duration;

use crate::support::{cli_at, env, env_with, TestEnv};

#[tokio::test]
async fn nothing_listening_is_redis_unavailable() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    let err = Store::connect(Config::new(&url)).await.unwrap_err();
    assert!(matches!(err, Error::RedisUnavailable { .. }), "{err:?}");

    let dir = tempfile::tempdir().unwrap();
    let out = cli_at(&url, dir.path(), &["session", "list"]);
    // The address that failed, why, and what to do next.
    assert_eq!(
        out.runtime_error(),
        format!(
            "error: cannot reach Redis at {}: connection refused — start one with \
             `agentstate server` (or `docker compose up -d redis`), or pass --redis URL",
            url.trim_start_matches("redis://")
        ),
    );
}

#[tokio::test]
async fn a_store_whose_redis_died_reports_it_and_recovers_after_a_restart() {
    let mut t = env_with(|c| c.retry_wait(Duration::from_millis(200))).await;
    t.store
        .create_session(&NewSession::new().id("s"))
        .await
        .unwrap();
    t.server.kill();
    // A read retries for `retry_wait`, then says it is safe to retry.
    let err = t.store.session("s").await.unwrap_err();
    assert!(matches!(err, Error::RedisUnavailable { .. }), "{err:?}");
    assert!(err.is_retry_safe(), "{err}");
    assert!(err.to_string().contains("safe to retry"), "{err}");
    t.server.restart_empty().unwrap();
    // The pool reconnects; the empty server knows no session.
    let mut answer = t.store.session("s").await;
    for _ in 0..20 {
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        answer = t.store.session("s").await;
    }
    assert_eq!(answer.unwrap(), None);
}

/// Connections used a moment ago are handed out without a PING; one the restart closed is
/// skipped before anything is sent on it, so the first call after the restart succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_call_after_a_restart_between_calls_succeeds() {
    let mut t = env().await;
    t.store
        .create_session(&NewSession::new().id("s"))
        .await
        .unwrap();
    t.server.restart_empty().unwrap();
    assert_eq!(t.store.session("s").await.unwrap(), None);
}

#[tokio::test]
async fn a_password_or_acl_protected_redis_works_with_credentials_in_the_url() {
    let server = RedisServer::start().unwrap();
    let mut admin = server.connection();
    let acl = ["SETUSER", "agent", "on", ">s3cret", "~*", "+@all"];
    let _: () = redis::cmd("ACL").arg(&acl[..]).query(&mut admin).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "pa55"][..])
        .query(&mut admin)
        .unwrap();
    let port = server.port();

    for (n, url) in [
        (1, format!("redis://:pa55@127.0.0.1:{port}")),
        (3, format!("redis://agent:s3cret@127.0.0.1:{port}")),
    ] {
        let store = Store::connect(Config::new(&url)).await.unwrap();
        if n == 1 {
            let db = tempfile::tempdir().unwrap();
            crate::support::daemon_pass(&store, SpillConfig::new(db.path().join("a.db"))).await;
            store
                .create_session(&NewSession::new().id("locked"))
                .await
                .unwrap();
        }
        assert_eq!(
            store
                .append("locked", &NewMessage::new("user").content("m"))
                .await
                .unwrap(),
            n
        );
        let out = cli_at(
            &url,
            server.dir(),
            &[
                "msg",
                "append",
                "locked",
                "--role",
                "user",
                "--content",
                "x",
            ],
        );
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, format!("{}\n", n + 1).as_str()),
            "{out:?}"
        );
    }

    let wrong = format!("redis://:nope@127.0.0.1:{port}");
    assert!(Store::connect(Config::new(&wrong)).await.is_err());
    cli_at(&wrong, server.dir(), &["session", "list"]).runtime_error();
    let anonymous = format!("redis://127.0.0.1:{port}");
    cli_at(&anonymous, server.dir(), &["session", "list"]).runtime_error();
}

/// A private Redis that persists every acknowledged write (AOF, fsync always), so a SIGKILL
/// and restart is "Redis restarted", not "Redis lost".
async fn persistent_env(tweak: impl FnOnce(Config) -> Config) -> TestEnv {
    let server =
        RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]).unwrap();
    let store = Store::connect(tweak(Config::new(server.url())))
        .await
        .unwrap();
    let t = TestEnv::new(server, store);
    t.flush().await;
    t
}

/// Appends `n` messages to `sid`, each with its own idempotency key, retrying what the
/// library says is safe to retry; returns how many calls had to be repeated.
async fn append_all(store: Store, sid: String, n: usize) -> usize {
    let mut repeated = 0;
    for i in 0..n {
        let message = NewMessage::new("user").content(format!("{sid}-{i}"));
        let options = AppendOptions::default().idempotency_key(format!("{sid}-k{i}"));
        loop {
            match store.append_with(&sid, &message, &options).await {
                Ok(seq) => {
                    assert!(seq as usize <= i + 1, "{sid}: seq {seq} for message {i}");
                    break;
                }
                // With an idempotency key a repeat can never append twice.
                Err(e) if e.is_unavailable() || e.is_retry_safe() => {
                    repeated += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("{sid} message {i}: {e:?}"),
            }
        }
    }
    repeated
}

/// Every message of `sid` in Redis, checked gapless with the contents `append_all` wrote,
/// and SQLite's rows, which must be those elements byte for byte.
fn assert_exact_history(t: &TestEnv, sid: &str, n: usize) {
    let elements: Vec<String> = t.cmd(&["LRANGE", &t.store.keys().session(sid).msgs, "0", "-1"]);
    assert_eq!(elements.len(), n, "{sid}");
    for (i, e) in elements.iter().enumerate() {
        // the element at index i is seq i + 1
        let m: serde_json::Value = serde_json::from_str(e).unwrap();
        assert_eq!(m["content"], format!("{sid}-{i}"), "{sid}");
    }
    let rows: Vec<String> = crate::support::sqlite_messages(&t.db(), sid)
        .into_iter()
        .map(|(_, element)| element)
        .collect();
    assert_eq!(rows, elements, "{sid}: SQLite holds what Redis holds");
}

/// Redis is killed and restarted (with its data) twice while four agents append and a spill
/// daemon flushes: every append lands exactly once (the library retries idempotent calls,
/// the agents repeat what it says is safe), seqs stay gapless, the daemon reconnects by
/// itself and SQLite ends up with exactly the messages Redis holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_under_load_loses_and_duplicates_nothing() {
    let mut t = persistent_env(|c| c.retry_wait(Duration::from_secs(10))).await;
    let sids: Vec<String> = (0..4).map(|i| format!("agent{i}")).collect();
    for sid in sids.iter().chain(["probe".to_string()].iter()) {
        t.store
            .create_session(&NewSession::new().id(sid))
            .await
            .unwrap();
    }
    let (stop, daemon) = t.start_daemon().await;
    let n = 1500;
    let writers: Vec<_> = sids
        .iter()
        .map(|sid| tokio::spawn(append_all(t.store.clone(), sid.clone(), n)))
        .collect();
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let written: usize = sids
            .iter()
            .map(|sid| t.cmd::<usize>(&["LLEN", &t.store.keys().session(sid).msgs]))
            .sum();
        assert!(written < sids.len() * n, "the restart comes under load");
        let server = &mut t.server;
        tokio::task::block_in_place(|| server.restart()).unwrap();
    }
    for w in writers {
        w.await.unwrap();
    }
    // The running daemon reconnected by itself: a durable write returns once it committed.
    let durable = t.store.with_durability(Durability::Durable);
    durable
        .append("probe", &NewMessage::new("user").content("after"))
        .await
        .unwrap();
    stop.cancel();
    daemon.await.unwrap().unwrap();
    t.flush().await;
    for sid in &sids {
        assert_exact_history(&t, sid, n);
    }
}

/// Redis stops answering for a while (a paused process, as behind a network partition):
/// calls time out after `response_timeout`. An idempotent append waits it out and lands
/// once; a decision (not idempotent) fails fast with an error that says it may have been
/// applied — and indeed Redis applies it when it resumes, so a blind retry would duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_times_out_calls_that_say_whether_a_retry_is_safe() {
    let t = persistent_env(|c| {
        let mut c = c.retry_wait(Duration::from_secs(10));
        c.response_timeout = Duration::from_millis(300);
        c
    })
    .await;
    let s = Arc::new(t.store.clone());
    s.create_session(&NewSession::new().id("p")).await.unwrap();
    t.server.pause();
    let appender = {
        let s = s.clone();
        tokio::spawn(async move {
            let options = AppendOptions::default().idempotency_key("once");
            s.append_with("p", &NewMessage::new("user").content("x"), &options)
                .await
        })
    };
    let err = s
        .record_decision("p", &NewDecision::new("d", "r"))
        .await
        .unwrap_err();
    // It fails without waiting for Redis: the idempotent append, which does wait, is still
    // out.
    assert!(
        !appender.is_finished(),
        "the decision failed while Redis was still paused"
    );
    assert!(matches!(err, Error::RedisUnavailable { .. }), "{err:?}");
    // Sent on a connection that then timed out, it may be applied (not safe to retry); with
    // group commit it can also come after the append's timed-out attempt and find no
    // connection within the response timeout (nothing sent: safe). Either way the flag must
    // tell the truth, checked below.
    let sent = !err.is_retry_safe();
    tokio::time::sleep(Duration::from_millis(700)).await;
    t.server.resume();
    assert_eq!(appender.await.unwrap().unwrap(), 1);
    let messages = s.messages("p", MessageQuery::all()).await.unwrap();
    assert_eq!(messages.len(), 1, "the append landed exactly once");
    // A timed-out decision that was sent was applied when Redis resumed; one that was not
    // sent (safe to retry) was not.
    let open = s.incomplete_decisions(Some("p")).await.unwrap();
    assert_eq!(open.len(), usize::from(sent), "{err}");
}

/// A consumer keeps going through a Redis restart (with its data): it reconnects by itself,
/// and every decision is delivered and acked in the end — nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_resumes_after_a_redis_restart_without_loss() {
    let mut t = persistent_env(|c| c.retry_wait(Duration::from_secs(10))).await;
    let s = t.store.clone();
    for i in 0..4 {
        s.create_session(&NewSession::new().id(format!("c{i}")))
            .await
            .unwrap();
    }
    let mut ids = std::collections::BTreeSet::new();
    for i in 0..400 {
        let d = NewDecision::new(format!("d{i}"), "r");
        ids.insert(s.record_decision(&format!("c{}", i % 4), &d).await.unwrap());
    }
    let options = ConsumerOptions::new()
        .start(StartFrom::Beginning)
        .count(5)
        .min_idle(Duration::from_millis(300))
        .block(Duration::from_millis(100));
    let mut consumer = s.consumer("svc", "c", options).await.unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut restarted = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (seen != ids || t.pending("svc") > 0) && std::time::Instant::now() < deadline {
        if !restarted && seen.len() >= 100 {
            let server = &mut t.server;
            tokio::task::block_in_place(|| server.restart()).unwrap();
            restarted = true;
        }
        match consumer.read().await {
            Ok(batch) => {
                for d in &batch {
                    if let DecisionEvent::Decision(dec) = &d.event {
                        seen.insert(dec.id.clone());
                    }
                }
                if let Err(e) = consumer.ack(&batch).await {
                    assert!(e.is_unavailable(), "{e:?}");
                }
            }
            // The read after the restart may meet the closed pool connection once.
            Err(e) => assert!(e.is_unavailable(), "{e:?}"),
        }
    }
    assert!(restarted);
    assert_eq!(seen, ids);
    assert_eq!(t.pending("svc"), 0);
}
