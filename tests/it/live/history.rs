//! Editing a session's history (what framework adapters need): appending several messages in
//! one step, removing the newest message, replacing one message, and checkpoints with a given
//! payload — exact seqs and wal records in Redis, exact rows in SQLite after a flush (the same
//! history back after Redis loses everything is in `loss::history`).

use agentstate::*;
use serde_json::json;

use crate::support::{create, env, seqs};

pub(crate) fn user(text: &str) -> NewMessage {
    NewMessage::new("user").content(text)
}

pub(crate) fn contents(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.content.clone().unwrap_or_default())
        .collect()
}

/// A test env with session `s` holding user messages of `contents`, seqs 1.. in order.
async fn session_of(contents: &[&str]) -> crate::support::TestEnv {
    let t = env().await;
    create(&t, "s", None, None).await;
    let messages: Vec<NewMessage> = contents.iter().map(|c| user(c)).collect();
    t.store.append_many("s", &messages, None).await.unwrap();
    t
}

#[tokio::test]
async fn append_many_takes_consecutive_seqs_in_one_step() {
    let t = env().await;
    let s = &t.store;
    create(&t, "s", None, None).await;
    s.append("s", &user("m1")).await.unwrap();
    let seqs = s
        .append_many("s", &[user("a"), user("b"), user("c")], Some(2))
        .await
        .unwrap();
    assert_eq!(seqs, [2, 3, 4]);
    assert_eq!(
        contents(&s.messages("s", MessageQuery::active()).await.unwrap()),
        ["m1", "a", "b", "c"]
    );
    // One wal `msg` record per message, with the stored element; the record's field holds
    // the seq.
    let msgs = t.wal_ops("msg");
    assert_eq!(msgs.len(), 4);
    assert!(
        msgs[3].1.starts_with(r#"{"at":"#) && msgs[3].1.ends_with(r#""content":"c"}"#),
        "{}",
        msgs[3].1
    );
    let p = t.store.keys().partition("s");
    let entries: Vec<(String, Vec<(String, String)>)> =
        t.cmd(&["XRANGE", &t.store.keys().wal(p), "-", "+"]);
    let fields: Vec<&str> = entries
        .iter()
        .flat_map(|(_, f)| f.iter().map(|(name, _)| name.as_str()))
        .filter(|name| name.starts_with("msg "))
        .collect();
    assert_eq!(fields, ["msg s 1", "msg s 2", "msg s 3", "msg s 4"]);

    // A stale first seq, a bad body among good ones, an unknown session: nothing written.
    let err = t
        .rejected(s.append_many("s", &[user("x"), user("y")], Some(2)))
        .await;
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 2,
                current: 5
            }
        ),
        "{err:?}"
    );
    let err = t
        .rejected(s.append_many("s", &[user("x"), NewMessage::new("Bad")], None))
        .await;
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(s.append_many("s", &[], None).await.unwrap().is_empty());
    let err = t
        .rejected(s.append_many("nobody", &[user("x")], None))
        .await;
    assert!(err.is_unknown_session(), "{err:?}");
}

#[tokio::test]
async fn pop_removes_the_newest_message_and_its_seq_is_handed_out_again() {
    let t = env().await;
    let s = &t.store;
    create(&t, "s", None, None).await;
    assert_eq!(s.pop_message("s").await.unwrap(), None); // empty: nothing written
    assert_eq!(t.wal_ops("msg_pop").len(), 0);
    for i in 1..=3 {
        let opts = AppendOptions::new().idempotency_key(format!("k{i}"));
        s.append_with("s", &user(&format!("m{i}")), &opts)
            .await
            .unwrap();
    }
    let popped = s.pop_message("s").await.unwrap().unwrap();
    assert_eq!((popped.seq, popped.content.as_deref()), (3, Some("m3")));
    assert_eq!(s.require_session("s").await.unwrap().next_seq, 3);
    assert_eq!(
        seqs(&s.messages("s", MessageQuery::all()).await.unwrap()),
        [1, 2]
    );
    let pops = t.wal_ops("msg_pop");
    assert_eq!(pops.len(), 1);
    assert!(
        pops[0].1.starts_with(r#"{"seq":3,"updated_at":"#),
        "{}",
        pops[0].1
    );
    // The popped message's idempotency key is gone: a retry appends again (seq 3), while the
    // key of a message still there still answers with its seq.
    let again = AppendOptions::new().idempotency_key("k3");
    assert_eq!(s.append_with("s", &user("m3'"), &again).await.unwrap(), 3);
    let old = AppendOptions::new().idempotency_key("k2");
    assert_eq!(s.append_with("s", &user("dup"), &old).await.unwrap(), 2);
    assert_eq!(t.hash(&s.keys().session("s").idem).len(), 3);
    // Writers that expect the next seq see the pop.
    s.pop_message("s").await.unwrap();
    assert_eq!(
        s.append_with("s", &user("m3''"), &AppendOptions::new().expect_seq(3))
            .await
            .unwrap(),
        3
    );
}

#[tokio::test]
async fn pop_refuses_the_note_of_the_latest_compaction() {
    let t = session_of(&["a", "b", "c"]).await;
    let s = &t.store;
    assert_eq!(
        s.compact("s", &Compaction::new(1, 2, "sum")).await.unwrap(),
        (1, 4)
    );
    let err = t.rejected(s.pop_message("s")).await;
    assert!(
        matches!(err, Error::BadRange { from: 4, to: 4, .. }),
        "{err:?}"
    );
    s.append("s", &user("d")).await.unwrap();
    assert_eq!(s.pop_message("s").await.unwrap().unwrap().seq, 5);
}

#[tokio::test]
async fn replace_changes_one_message_and_keeps_its_seq_and_time() {
    let t = session_of(&["secret", "b", "c"]).await;
    let s = &t.store;
    let before = s.message("s", 1).await.unwrap().unwrap();
    let redacted = NewMessage::new("user")
        .content("[redacted]")
        .meta(json!({"r": 1}));
    s.replace_message("s", 1, &redacted).await.unwrap();
    let after = s.message("s", 1).await.unwrap().unwrap();
    assert_eq!(
        (
            after.seq,
            after.created_at,
            after.content.as_deref(),
            after.meta
        ),
        (
            1,
            before.created_at,
            Some("[redacted]"),
            Some(json!({"r": 1}))
        )
    );
    assert_eq!(
        contents(&s.messages("s", MessageQuery::active()).await.unwrap()),
        ["[redacted]", "b", "c"]
    );
    let replaced = t.wal_ops("msg_replace");
    assert_eq!(replaced.len(), 1);
    let mut logged: Message = serde_json::from_str(&replaced[0].1).unwrap();
    logged.seq = 1;
    assert_eq!(logged, s.message("s", 1).await.unwrap().unwrap());
    // No such seq, a compacted message, a bad role: rejected, nothing written.
    for seq in [0, 4] {
        let err = t.rejected(s.replace_message("s", seq, &user("x"))).await;
        assert!(matches!(err, Error::BadRange { .. }), "{err:?}");
    }
    s.compact("s", &Compaction::new(2, 2, "sum")).await.unwrap();
    let err = t.rejected(s.replace_message("s", 2, &user("x"))).await;
    assert!(matches!(err, Error::BadRange { .. }), "{err:?}");
    let err = t
        .rejected(s.replace_message("s", 1, &NewMessage::new("NO")))
        .await;
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
}

/// Elements an earlier build stored (`{"seq":..,"state":..,"created_at":..,...}`, still in
/// durable tiers and restored from them as they are) read as this build's do, with the
/// state the compactions give rather than their own text; replacing one keeps its time and
/// writes this build's form, whose row the flush replaces.
#[tokio::test]
async fn elements_an_earlier_build_stored_read_replace_and_compact_as_this_builds() {
    let t = session_of(&["a", "b", "c"]).await;
    let s = &t.store;
    let msgs = s.keys().session("s").msgs;
    for seq in 1..=3u64 {
        let old = format!(
            r#"{{"seq":{seq},"state":"active","created_at":170000000{seq}000,"role":"user","content":"old {seq}"}}"#
        );
        let _: String = t.cmd(&["LSET", &msgs, &(seq - 1).to_string(), &old]);
    }
    let read = s.messages("s", MessageQuery::all()).await.unwrap();
    assert_eq!(
        read.iter()
            .map(|m| (m.seq, m.state, m.created_at))
            .collect::<Vec<_>>(),
        (1..=3)
            .map(|seq| (
                seq,
                MessageState::Active,
                1_700_000_000_000 + seq as i64 * 1000
            ))
            .collect::<Vec<_>>()
    );
    assert_eq!(contents(&read), ["old 1", "old 2", "old 3"]);

    s.replace_message("s", 2, &user("new 2")).await.unwrap();
    let two: String = t.cmd(&["LINDEX", &msgs, "1"]);
    assert_eq!(
        two,
        r#"{"at":1700000002000,"role":"user","content":"new 2"}"#
    );
    s.compact("s", &Compaction::new(1, 1, "sum")).await.unwrap();
    let one = s.message("s", 1).await.unwrap().unwrap();
    assert_eq!((one.seq, one.state), (1, MessageState::CompactedOut));
    assert!(t
        .cmd::<String>(&["LINDEX", &msgs, "0"])
        .contains(r#""state":"active""#));
    assert_eq!(
        seqs(&s.messages("s", MessageQuery::active()).await.unwrap()),
        [2, 3, 4]
    );
    t.flush().await;
    let rows = t.durable_messages("s");
    assert_eq!((rows[1].0, rows[1].1.as_str()), (2, two.as_str()));
}

#[tokio::test]
async fn put_checkpoint_stores_the_given_payload_as_the_latest() {
    let t = env().await;
    let s = &t.store;
    create(&t, "s", None, None).await;
    let first = s
        .put_checkpoint("s", "agent", &json!({"v": 1}))
        .await
        .unwrap();
    let second = s
        .put_checkpoint("s", "agent", &json!({"v": 2}))
        .await
        .unwrap();
    assert_ne!(first, second);
    let latest = s.checkpoint_latest("s", "agent").await.unwrap().unwrap();
    assert_eq!((latest.id, latest.payload), (second, json!({"v": 2})));
    assert_eq!(t.wal_ops("checkpoint").len(), 2);
    assert!(s.working("s").await.unwrap().values.is_empty()); // working state untouched
    let err = t
        .rejected(s.put_checkpoint("s", "agent", &json!([1])))
        .await;
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    let err = t
        .rejected(s.put_checkpoint("nobody", "agent", &json!({})))
        .await;
    assert!(err.is_unknown_session(), "{err:?}");
}

#[tokio::test]
async fn append_checkpointed_writes_the_message_and_the_state_together_or_nothing() {
    let mut t = env().await;
    let s = t.store.clone();
    create(&t, "s", None, None).await;
    let (seq, first) = s
        .append_checkpointed("s", &user("e1"), Some(1), "state", &json!({"n": 1}))
        .await
        .unwrap();
    assert_eq!(seq, 1);
    let (seq, second) = s
        .append_checkpointed("s", &user("e2"), None, "state", &json!({"n": 2}))
        .await
        .unwrap();
    assert_eq!(seq, 2);
    // The wal holds each message just before its checkpoint.
    let ops: Vec<String> = t
        .wal_records()
        .into_iter()
        .map(|(op, _, _)| op)
        .filter(|op| op != "session_create")
        .collect();
    assert_eq!(ops, ["msg", "checkpoint", "msg", "checkpoint"]);
    assert_ne!(first, second);
    let latest = s.checkpoint_latest("s", "state").await.unwrap().unwrap();
    assert_eq!((latest.id, latest.payload), (second, json!({"n": 2})));
    // A writer whose view is stale (it expects seq 2, the next is 3) writes nothing.
    let err = t
        .rejected(s.append_checkpointed("s", &user("late"), Some(2), "state", &json!({"n": 9})))
        .await;
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 2,
                current: 3
            }
        ),
        "{err:?}"
    );
    for (msg, payload) in [(user("x"), json!([1])), (NewMessage::new("Bad"), json!({}))] {
        let err = t
            .rejected(s.append_checkpointed("s", &msg, None, "state", &payload))
            .await;
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    }
    let err = t
        .rejected(s.append_checkpointed("nobody", &user("x"), None, "state", &json!({})))
        .await;
    assert!(err.is_unknown_session(), "{err:?}");
    // Both reach SQLite and come back together after Redis loses everything.
    t.flush().await;
    t.lose_redis().await;
    let (stop, daemon) = t.start_daemon().await;
    let s = &t.store;
    assert_eq!(
        contents(&s.messages("s", MessageQuery::all()).await.unwrap()),
        ["e1", "e2"]
    );
    assert_eq!(
        s.checkpoint_latest("s", "state")
            .await
            .unwrap()
            .unwrap()
            .payload,
        json!({"n": 2})
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}
