//! What an empty Redis gets back besides sessions: user values, state rounds and open decisions, without resurrecting forgotten users or overwriting newer values.

use agentstate::*;
use serde_json::json;

use crate::support::count;
use crate::support::create;
use crate::support::on_both_backends;
use crate::support::TestEnv;
use crate::support::{wait_until, HANG};

on_both_backends!(user_values_and_state_rounds_come_back_after_redis_restarts_empty);
async fn user_values_and_state_rounds_come_back_after_redis_restarts_empty(mut t: TestEnv) {
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

on_both_backends!(after_redis_loss_a_forget_stays_forgotten_and_a_newer_value_wins);
async fn after_redis_loss_a_forget_stays_forgotten_and_a_newer_value_wins(mut t: TestEnv) {
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
    // Redis is lost; agents forget bob and write a newer value for ann while the daemon
    // comes back: their writes wait until it opened the partitions in the new Redis, then
    // land before or after its re-seed.
    t.lose_redis().await;
    let s = &t.store;
    let agent = {
        let (s, t_dan) = (s.clone(), s.keys().user_forgotten("dan"));
        let url = t.server.url();
        tokio::spawn(async move {
            s.forget_user("bob").await.unwrap();
            s.forget_user("dan").await.unwrap();
            // dan's tombstone expires at once: the flush before the re-seed is what keeps
            // him forgotten.
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let _: bool = redis::cmd("DEL").arg(t_dan).query(&mut c).unwrap();
            s.set_user_value("ann", "email", &json!("new@example.org"))
                .await
                .unwrap();
        })
    };
    let (stop, daemon) = t.start_daemon().await;
    agent.await.unwrap();
    // The re-seed and the flush of the agent's writes follow in the daemon's next passes.
    wait_until("the re-seed and the agents' writes are in both tiers", HANG, || {
        let seen = t.durable_rows(
            "SELECT user_id, key, value FROM user_values WHERE user_id IN (?1, 'bob', 'dan') ORDER BY user_id, key",
            "ann",
        );
        let tz: Option<String> = t.cmd(&["HGET", &s.keys().user("ann"), "tz"]);
        (seen
            == [
                vec!["ann".to_string(), "email".into(), "\"new@example.org\"".into()],
                vec!["ann".to_string(), "tz".into(), "\"UTC\"".into()],
            ]
            && tz.is_some())
        .then_some(())
        .ok_or(format!("{seen:?}, tz {tz:?}"))
    })
    .await;
    for user in ["bob", "dan"] {
        assert_eq!(s.user_value(user, "ssn").await.unwrap(), None);
        assert!(!t.cmd::<bool>(&["EXISTS", &s.keys().user(user)]));
    }
    assert_eq!(
        s.user_value("ann", "email").await.unwrap(),
        Some(json!("new@example.org"))
    );
    assert_eq!(s.user_value("ann", "tz").await.unwrap(), Some(json!("UTC")));
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

on_both_backends!(the_user_reseed_script_never_overwrites_or_resurrects);
/// `reseed_user_values.lua` on its own, at the moment between the daemon's flush (SQLite
/// still holds the values) and its re-seed: what agents did since is left alone.
async fn the_user_reseed_script_never_overwrites_or_resurrects(t: TestEnv) {
    let s = &t.store;
    let script = redis::Script::new(
        agentstate::test_support::scripts::text_of("reseed_user_values").unwrap(),
    );
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

on_both_backends!(open_decisions_come_back_after_redis_loss_for_crash_recovery);
async fn open_decisions_come_back_after_redis_loss_for_crash_recovery(mut t: TestEnv) {
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

on_both_backends!(memory_items_reach_the_durable_tier_and_come_back_after_redis_restarts_empty);
async fn memory_items_reach_the_durable_tier_and_come_back_after_redis_restarts_empty(
    mut t: TestEnv,
) {
    let (stop, daemon) = t.start_daemon().await;
    let durable = t.store.with_durability(Durability::Durable);
    let item = |v: serde_json::Value, ttl: Option<u64>| NewMemoryItem {
        value: v.as_object().unwrap().clone(),
        vectors: [("text".to_string(), vec![0.5f32, 0.5])].into(),
        ttl_minutes: ttl,
    };
    let ann = ["users", "ann", "facts"];
    durable
        .put_memory(&ann, "pet", &item(json!({"pet": "cat"}), None))
        .await
        .unwrap();
    durable
        .put_memory(&ann, "food", &item(json!({"food": "soup"}), Some(60)))
        .await
        .unwrap();
    durable
        .put_memory(&ann, "gone", &item(json!({"x": 1}), None))
        .await
        .unwrap();
    durable.delete_memory(&ann, "gone").await.unwrap();
    durable
        .put_memory(&["docs"], "readme", &item(json!({"title": "hi"}), None))
        .await
        .unwrap();
    // Exactly the three live items, each row the record Redis holds.
    let rows = t.durable_rows(
        "SELECT namespace, key, record FROM memory_items ORDER BY namespace, key",
        "",
    );
    let held =
        |ns: &str, key: &str| -> String { t.cmd(&["HGET", &t.store.keys().memory(ns), key]) };
    assert_eq!(
        rows,
        [
            vec!["docs".to_string(), "readme".into(), held("docs", "readme")],
            vec![
                "users.ann.facts".to_string(),
                "food".into(),
                held("users.ann.facts", "food")
            ],
            vec![
                "users.ann.facts".to_string(),
                "pet".into(),
                held("users.ann.facts", "pet")
            ],
        ]
    );
    let before = t
        .store
        .get_memory(&ann, "food", false)
        .await
        .unwrap()
        .unwrap();
    // The same running daemon re-takes the partitions of the empty Redis and re-seeds.
    t.lose_redis().await;
    t.wait_for_daemon().await;
    let s = &t.store;
    wait_until("the memory items are back", HANG, || {
        let n = s.keys().partitions();
        let listed: usize = (0..n)
            .map(|p| t.cmd::<usize>(&["SCARD", &s.keys().memory_namespaces(p)]))
            .sum();
        (listed == 2)
            .then_some(())
            .ok_or(format!("{listed} namespaces"))
    })
    .await;
    assert_eq!(
        s.get_memory(&ann, "food", false).await.unwrap(),
        Some(before)
    );
    assert_eq!(
        s.get_memory(&ann, "pet", false)
            .await
            .unwrap()
            .unwrap()
            .value,
        json!({"pet": "cat"}).as_object().unwrap().clone()
    );
    assert_eq!(s.get_memory(&ann, "gone", false).await.unwrap(), None);
    let ranked = s
        .search_memory(&MemorySearch {
            prefix: vec!["users".into()],
            query: Some(vec![1.0, 1.0]),
            ..MemorySearch::default()
        })
        .await
        .unwrap();
    assert_eq!(ranked.len(), 2);
    assert!(ranked.iter().all(|i| (i.score.unwrap() - 1.0).abs() < 1e-6));
    // The item with a TTL is back in the expiry index at its moment.
    let p = s.keys().memory_partition("users.ann.facts");
    let score: Option<f64> = t.cmd(&[
        "ZSCORE",
        &s.keys().memory_expiry(p),
        "users.ann.facts\nfood",
    ]);
    assert!(score.is_some());
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

/// A partition whose index re-seed after a Redis loss takes longer than the lease time (a
/// million sessions, or a slow Redis) is still taken: the daemon renews its lease while it
/// re-seeds, instead of losing it, starting over and never opening the partition.
#[tokio::test]
async fn a_reseed_longer_than_the_lease_time_completes_and_lists_every_session() {
    use futures_util::stream::{self, StreamExt, TryStreamExt};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let mut t = crate::support::env().await;
    let ids = t.ids_in_partition("many", 0, 20_000);
    let store = t.store.clone();
    stream::iter(ids.clone())
        .map(|sid| {
            let store = store.clone();
            async move { store.create_session(&NewSession::new().id(&sid)).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    // 20,000 creations take a loaded machine longer to flush than `flush`'s drain waits.
    let patient = t.spill_config().lease_ttl(Duration::from_secs(30));
    let flush = SpillDaemon::open(t.store.clone(), patient).await.unwrap();
    flush.run_once().await.unwrap();
    t.lose_redis().await;
    // A slow Redis: busy 20 ms of every 30, so the re-seed's 80 calls of 250 ids take
    // seconds, well past the 500 ms lease, while each call waits at most one busy spell.
    let slowing = Arc::new(AtomicBool::new(true));
    let slow = {
        let (slowing, mut conn) = (slowing.clone(), t.redis());
        std::thread::spawn(move || {
            while slowing.load(Ordering::Relaxed) {
                let _: () = redis::cmd("EVAL")
                    .arg("local s = redis.call('TIME') repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1000000 + n[2] - s[2] > 20000")
                    .arg(0)
                    .query(&mut conn)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let daemon = SpillDaemon::open(t.store.clone(), t.spill_config())
        .await
        .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(daemon.run(cancel.clone().cancelled_owned()));
    // Taken: the marker that opens the partition to agents' writes is published.
    let committed = t.store.keys().committed(0);
    crate::support::wait_until(
        "the daemon takes partition 0 (its marker published)",
        Duration::from_secs(60),
        || t.cmd::<bool>(&["HEXISTS", &committed, "seeded"]),
    )
    .await;
    slowing.store(false, Ordering::Relaxed);
    slow.join().unwrap();
    cancel.cancel();
    running.await.unwrap().unwrap();
    let mut listing = SessionListing::new(MAX_PAGE);
    let mut listed = Vec::new();
    loop {
        let page = t.store.list_sessions_page(&listing).await.unwrap();
        listed.extend(page.ids);
        match page.next {
            Some(next) => listing.after = Some(next),
            None => break,
        }
    }
    let mut expected = ids;
    expected.sort();
    assert_eq!(listed, expected);
}
