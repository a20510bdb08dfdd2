//! Edited history and checkpoints after Redis loses everything: exactly what SQLite holds
//! comes back.

use agentstate::*;
use serde_json::json;

use crate::live::history::{contents, user};
use crate::support::*;

#[tokio::test]
async fn edited_history_reaches_sqlite_exactly_and_comes_back_after_redis_loss() {
    let mut t = env().await;
    let s = t.store.clone();
    create(&t, "s", None, None).await;
    let opts = AppendOptions::new().idempotency_key("k1");
    s.append_with("s", &user("m1"), &opts).await.unwrap();
    s.append_many("s", &[user("m2"), user("m3"), user("m4")], None)
        .await
        .unwrap();
    s.pop_message("s").await.unwrap();
    s.replace_message("s", 1, &user("m1 redacted"))
        .await
        .unwrap();
    s.put_checkpoint("s", "agent", &json!({"state": {"k": "v"}}))
        .await
        .unwrap();
    t.flush().await;
    assert_eq!(
        sqlite_messages(&t, "s"),
        [
            (1, "m1 redacted".to_string(), Some("k1".to_string())),
            (2, "m2".to_string(), None),
            (3, "m3".to_string(), None),
        ]
    );
    // A pop and a re-append of the same seq, in one batch, leave the new message.
    s.pop_message("s").await.unwrap();
    s.append("s", &user("m3 again")).await.unwrap();
    t.flush().await;
    assert_eq!(sqlite_messages(&t, "s")[2].1, "m3 again");

    let before = t.session_dump("s");
    t.lose_redis().await;
    let (stop, daemon) = t.start_daemon().await;
    let s = &t.store;
    assert_eq!(
        contents(&s.messages("s", MessageQuery::all()).await.unwrap()),
        ["m1 redacted", "m2", "m3 again"]
    );
    assert_eq!(t.session_dump("s"), before);
    assert_eq!(
        s.checkpoint_latest("s", "agent")
            .await
            .unwrap()
            .unwrap()
            .payload,
        json!({"state": {"k": "v"}})
    );
    assert_eq!(s.append("s", &user("m4")).await.unwrap(), 4);
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

#[tokio::test]
async fn checkpoints_of_many_sessions_are_read_at_once_and_restored_where_redis_lost_them() {
    let t = env().await;
    let s = &t.store;
    for sid in ["a", "b", "c"] {
        create(&t, sid, None, None).await;
    }
    s.put_checkpoint("a", "st", &json!({"v": "a"}))
        .await
        .unwrap();
    s.put_checkpoint("c", "st", &json!({"v": "c"}))
        .await
        .unwrap();
    t.flush().await;
    t.expire_session("c"); // not live: restored from SQLite by the fallback read
    let (stop, daemon) = t.start_daemon().await;
    let sids: Vec<String> = ["a", "b", "c", "never"].map(String::from).to_vec();
    let got = s.checkpoints_latest_of(&sids, "st").await.unwrap();
    let payloads: Vec<Option<serde_json::Value>> =
        got.into_iter().map(|c| c.map(|c| c.payload)).collect();
    assert_eq!(
        payloads,
        [Some(json!({"v": "a"})), None, Some(json!({"v": "c"})), None]
    );
    assert!(matches!(
        t.rejected(s.checkpoints_latest_of(&["bad id".to_string()], "st"))
            .await,
        Error::InvalidId { .. }
    ));
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

/// SQLite's messages of `sid`: (seq, content, idem_key).
fn sqlite_messages(t: &TestEnv, sid: &str) -> Vec<(i64, String, Option<String>)> {
    let db = t.sqlite();
    let mut stmt = db
        .prepare(
            "SELECT seq, json_extract(element, '$.content'), idem_key FROM messages
             WHERE session_id = ?1 ORDER BY seq",
        )
        .unwrap();
    stmt.query_map([sid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}
