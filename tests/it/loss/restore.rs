//! Restoring sessions from SQLite after Redis loss or expiry: rehydration, restore requests, durable writes, and what happens without a daemon.

use std::time::Duration;

use agentstate::*;
use serde_json::json;

use crate::support::on_both_backends;
use crate::support::TestEnv;
use crate::support::{count, rich_session};
use crate::support::{create, env, env_with, seqs, wait_until, HANG};

on_both_backends!(redis_lost_after_a_flush_restores_every_session_exactly);
async fn redis_lost_after_a_flush_restores_every_session_exactly(mut t: TestEnv) {
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
        4,
        "env()'s daemon pass, then three more"
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
        s.append_with(&sid, &NewMessage::new("user").content("m"), &again)
            .await
            .unwrap(),
        2
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

on_both_backends!(a_session_that_expired_rehydrates_on_the_next_call_with_empty_working_state);
async fn a_session_that_expired_rehydrates_on_the_next_call_with_empty_working_state(t: TestEnv) {
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
    let meta = s.keys().session(&sid).meta;
    wait_until("the session expires", HANG, || {
        t.cmd::<i64>(&["EXISTS", &meta]) == 0
    })
    .await;
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
        .append("nobody", &NewMessage::new("user").content("m"))
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
    let meta = s.keys().session(&gone).meta;
    wait_until("the session expires", HANG, || {
        t.cmd::<i64>(&["EXISTS", &meta]) == 0
    })
    .await;
    // The waits are bounded: each call below returns its error (a hang fails the test
    // after support::HANG); how long they take is not asserted (a loaded machine is slow).
    let err = s
        .append(&gone, &NewMessage::new("user").content("m"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::NotLive { ref sid, .. } if *sid == gone),
        "{err:?}"
    );
    let sid = s.create_session(&NewSession::new()).await.unwrap();
    let durable = s.with_durability(Durability::Durable);
    let err = durable
        .append(&sid, &NewMessage::new("user").content("m"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DurabilityTimeout(_)), "{err:?}");
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
    let p = s.keys().partition(phantom);
    let index = agentstate::test_support::scripts::index_sessions(
        s.keys(),
        &s.keys().sessions_index(p),
        p,
        &[(phantom.to_string(), String::new())],
    );
    let mut conn = agentstate::test_support::connection(s).await.unwrap();
    let added: usize = index.run(&mut conn).await.unwrap();
    assert_eq!(added, 1);
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
        !s.admin().restore_session(&sid).await.unwrap(),
        "live sessions need no restore"
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

on_both_backends!(a_durable_write_survives_redis_loss_right_after_it_returns);
async fn a_durable_write_survives_redis_loss_right_after_it_returns(mut t: TestEnv) {
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

on_both_backends!(concurrent_openers_restore_a_session_once);
async fn concurrent_openers_restore_a_session_once(mut t: TestEnv) {
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    for _ in 0..20 {
        t.store
            .append(&sid, &NewMessage::new("user").content("m"))
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
            .append("kept", &NewMessage::new("user").content("m"))
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

on_both_backends!(closing_a_parent_restores_and_closes_a_child_that_expired_from_redis);
async fn closing_a_parent_restores_and_closes_a_child_that_expired_from_redis(t: TestEnv) {
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

on_both_backends!(a_sub_agent_can_be_spawned_under_a_parent_that_expired_from_redis);
async fn a_sub_agent_can_be_spawned_under_a_parent_that_expired_from_redis(t: TestEnv) {
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

on_both_backends!(an_expired_session_id_cannot_be_created_anew_over_its_durable_history);
async fn an_expired_session_id_cannot_be_created_anew_over_its_durable_history(t: TestEnv) {
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

on_both_backends!(compacted_ranges_merge_the_same_when_compacting_and_restoring);
/// Compacted ranges have one implementation, the prelude's `merge_compacted`: compact.lua
/// adds each range as it goes, restore_session.lua folds the audit records SQLite kept. Fed
/// the same ranges (out of order, overlapping, adjacent) through a real Redis, both give the
/// same meta, and active loads skip exactly those seqs.
async fn compacted_ranges_merge_the_same_when_compacting_and_restoring(t: TestEnv) {
    let s = &t.store;
    create(&t, "cr", None, None).await;
    for i in 0..30 {
        s.append("cr", &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    for (from, to) in [(10, 12), (3, 5), (6, 8), (20, 25), (11, 21), (28, 28)] {
        s.compact("cr", &Compaction::new(from, to, "note"))
            .await
            .unwrap();
    }
    let meta = t.hash(&s.keys().session("cr").meta);
    assert_eq!(meta["compacted"], "3-8,10-25,28-28");
    let active_before = seqs(&s.messages("cr", MessageQuery::active()).await.unwrap());
    let expected: Vec<u64> = (1..=36)
        .filter(|q| !(3..=8).contains(q) && !(10..=25).contains(q) && *q != 28)
        .collect();
    assert_eq!(active_before, expected);
    t.flush().await;
    t.expire_session("cr");
    let (cancel, handle) = t.start_daemon().await;
    assert!(s.admin().restore_session("cr").await.unwrap());
    let restored = t.hash(&s.keys().session("cr").meta);
    assert_eq!(restored["compacted"], meta["compacted"]);
    assert_eq!(restored["last_compact_seq"], "6");
    let active_after = seqs(&s.messages("cr", MessageQuery::active()).await.unwrap());
    assert_eq!(active_after, active_before);
    cancel.cancel();
    handle.await.unwrap().unwrap();
}
