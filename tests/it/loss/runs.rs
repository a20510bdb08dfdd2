//! Runs through a Redis loss: inbox items and the tool-effect ledger come back from the
//! durable tier exactly (a claim, live only, comes back pending), leases are gone (live only)
//! and a token from before the loss writes nothing, a delivered item is never delivered
//! again and a finished tool call never starts again — on one Redis and on a cluster, on
//! SQLite and on PostgreSQL.

use std::time::Duration;

use agentstate::*;
use serde_json::json;

use crate::support::*;

/// What a run leaves in session `sid` before the loss: its lease token, and an inbox of four
/// items (two delivered, one claimed, one void) and a ledger of two tool calls (one done,
/// one unresolved).
async fn run_before_the_loss(store: &Store, sid: &str) -> u64 {
    let lease = store
        .acquire_lease(sid, "before", Duration::from_secs(60))
        .await
        .unwrap();
    let mail: Vec<NewMessage> = (1..=4)
        .map(|k| NewMessage::new("user").content(format!("{sid} mail {k}")))
        .collect();
    let ids = ["m1", "m2", "m3", "m4"];
    let items: Vec<(&str, &NewMessage)> = ids.iter().copied().zip(&mail).collect();
    assert_eq!(
        store.inbox_put(sid, &items).await.unwrap(),
        [true, true, true, true]
    );
    let claimed = store
        .inbox_claim(sid, "before", lease.token, 3)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    assert_eq!(
        store
            .inbox_deliver(sid, "before", lease.token, &["m1", "m2"])
            .await
            .unwrap(),
        [1, 2]
    );
    assert_eq!(store.inbox_void(sid, &["m4"]).await.unwrap(), 1);
    assert_eq!(
        store
            .effect_begin(sid, "paid", &json!({"amount": 5}))
            .await
            .unwrap(),
        EffectStart::Started
    );
    assert!(store
        .effect_finish(sid, "paid", &json!({"receipt": "r-1"}))
        .await
        .unwrap());
    assert_eq!(
        store
            .effect_begin(sid, "mailed", &json!({"to": "a"}))
            .await
            .unwrap(),
        EffectStart::Started
    );
    lease.token
}

/// What the run finds after the loss, and that it carries on exactly once.
async fn run_after_the_loss(store: &Store, sid: &str, token_before: u64) {
    assert_eq!(store.lease_holder(sid).await.unwrap(), None, "{sid}");
    // A writer still holding the old token writes nothing.
    let stale = store.with_fence(Some(token_before));
    let err = stale
        .append(sid, &NewMessage::new("assistant").content("stale"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced { holder: None, .. }), "{err:?}");
    let states: Vec<(String, InboxState, Option<u64>)> = store
        .inbox(sid)
        .await
        .unwrap()
        .into_iter()
        .map(|i| (i.item_id, i.state, i.seq))
        .collect();
    assert_eq!(
        states,
        [
            ("m1".to_string(), InboxState::Delivered, Some(1)),
            ("m2".to_string(), InboxState::Delivered, Some(2)),
            ("m3".to_string(), InboxState::Pending, None),
            ("m4".to_string(), InboxState::Void, None),
        ],
        "{sid}"
    );
    match store
        .effect_begin(sid, "paid", &json!({"amount": 5}))
        .await
        .unwrap()
    {
        EffectStart::Done(e) => assert_eq!(e.result, Some(json!({"receipt": "r-1"}))),
        other => panic!("{sid}: a finished call started again: {other:?}"),
    }
    let unresolved: Vec<String> = store
        .unresolved_effects(sid)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.call_id)
        .collect();
    assert_eq!(unresolved, ["mailed"], "{sid}");
    // The next run's token is larger than any before the loss; it delivers what is left.
    let lease = store
        .acquire_lease(sid, "after", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(lease.token > token_before, "{sid}");
    let claimed: Vec<String> = store
        .inbox_claim(sid, "after", lease.token, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.item_id)
        .collect();
    assert_eq!(claimed, ["m3"], "{sid}");
    assert_eq!(
        store
            .inbox_deliver(sid, "after", lease.token, &["m1", "m3"])
            .await
            .unwrap(),
        [1, 3]
    );
    let contents: Vec<String> = store
        .messages(sid, MessageQuery::all())
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content.unwrap_or_default())
        .collect();
    assert_eq!(
        contents,
        [1, 2, 3].map(|k| format!("{sid} mail {k}")),
        "{sid}: each item once, in one order"
    );
}

on_both!(inbox_and_effects_come_back_after_a_loss_and_leases_do_not);

async fn inbox_and_effects_come_back_after_a_loss_and_leases_do_not(d: Deployed) {
    let sids = d.sessions(4).await;
    let mut tokens = Vec::new();
    for sid in &sids {
        tokens.push(run_before_the_loss(&d.store, sid).await);
    }
    d.flush().await;
    d.lose_namespace().await;
    let (cancel, task) = d.start_daemon().await;
    for (sid, token) in sids.iter().zip(tokens) {
        run_after_the_loss(&d.store, sid, token).await;
    }
    cancel.cancel();
    task.await.unwrap().unwrap();
}

on_both_backends!(
    inbox_and_effects_are_rows_of_the_durable_tier_and_come_back_after_redis_restarts_empty,
    flavor = "multi_thread",
    worker_threads = 2
);

async fn inbox_and_effects_are_rows_of_the_durable_tier_and_come_back_after_redis_restarts_empty(
    mut t: TestEnv,
) {
    t.create_sessions(&["run".to_string()]).await;
    let token = run_before_the_loss(&t.store, "run").await;
    t.flush().await;
    // Each row is the item's or call's record as Redis holds it; a claim is live only, so
    // the claimed item's row says pending.
    let keys = t.store.keys().session("run");
    let live = |key: &str, field: &str| -> String { t.cmd(&["HGET", key, field]) };
    let inbox = t.durable_rows(
        "SELECT item_id, record FROM inbox WHERE session_id = ?1 ORDER BY item_id",
        "run",
    );
    assert_eq!(inbox.len(), 4, "{inbox:?}");
    for row in &inbox {
        let held = live(&keys.inbox, &row[0]);
        if row[0] == "m3" {
            assert!(held.contains(r#""state":"claimed""#), "{held}");
            assert_eq!(
                row[1],
                held.replacen(r#""state":"claimed""#, r#""state":"pending""#, 1)
                    .replacen(&format!(r#""token":{token}"#), r#""token":null"#, 1)
            );
        } else {
            assert_eq!(row[1], held);
        }
    }
    let effects = t.durable_rows(
        "SELECT call_id, record FROM effects WHERE session_id = ?1 ORDER BY call_id",
        "run",
    );
    assert_eq!(
        effects.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        ["mailed", "paid"]
    );
    for row in &effects {
        assert_eq!(row[1], live(&keys.effects, &row[0]));
    }
    t.lose_redis().await;
    let (cancel, task) = t.start_daemon().await;
    run_after_the_loss(&t.store, "run", token).await;
    cancel.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_and_ledger_that_expired_while_their_session_lived_come_back() {
    let t = env().await;
    let (cancel, task) = t.start_daemon().await;
    t.create_sessions(&["run".to_string()]).await;
    let durable = t.store.with_durability(Durability::Durable);
    let args = json!({"amount": 5});
    assert_eq!(
        durable.effect_begin("run", "paid", &args).await.unwrap(),
        EffectStart::Started
    );
    assert!(durable
        .effect_finish("run", "paid", &json!({"receipt": "r-1"}))
        .await
        .unwrap());
    let mail = NewMessage::new("user").content("later");
    durable.inbox_put("run", &[("m1", &mail)]).await.unwrap();
    // Appends keep the session alive while its inbox and ledger expire (they are refreshed
    // by run writes only): here, as their TTL would, the two keys go.
    durable
        .append("run", &NewMessage::new("user").content("hi"))
        .await
        .unwrap();
    let keys = t.store.keys().session("run");
    let gone: i64 = t.cmd(&["DEL", &keys.inbox, &keys.effects]);
    assert_eq!(gone, 2);
    // A resumed run asking the ledger is told the result, never to run the tool again.
    match t.store.effect_begin("run", "paid", &args).await.unwrap() {
        EffectStart::Done(e) => assert_eq!(e.result, Some(json!({"receipt": "r-1"}))),
        other => panic!("a finished tool call started again: {other:?}"),
    }
    let items: Vec<String> = t
        .store
        .inbox("run")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.item_id)
        .collect();
    assert_eq!(items, ["m1"]);
    assert_eq!(
        t.store.inbox_put("run", &[("m1", &mail)]).await.unwrap(),
        [false]
    );
    cancel.cancel();
    task.await.unwrap().unwrap();
}
