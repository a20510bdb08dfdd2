//! User-attributed data: set/get/delete, `forget_user` with its receipt, and no value in any
//! stream.

use agentstate::*;
use serde_json::json;

use crate::support::env;

const SECRET: &str = "s3cr3t-zebra-4711";

#[tokio::test]
async fn forgetting_a_user_erases_their_values_and_nothing_else() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("us").user("una"))
        .await
        .unwrap();
    s.set_working("us", "w", &json!(1)).await.unwrap();
    s.checkpoint("us", "cp", None).await.unwrap();
    let d = s
        .record_decision("us", &NewDecision::new("d", "r"))
        .await
        .unwrap();
    s.set_user_value("una", "email", &json!(SECRET))
        .await
        .unwrap();
    s.set_user_value("una", "prefs", &json!({"k": SECRET}))
        .await
        .unwrap();
    s.set_user_value("una", "gone", &json!(SECRET))
        .await
        .unwrap();
    s.set_user_value("other", "email", &json!("keep"))
        .await
        .unwrap();
    assert!(s.delete_user_value("una", "gone").await.unwrap());
    assert!(!s.delete_user_value("una", "gone").await.unwrap());
    assert_eq!(
        s.user_value("una", "email").await.unwrap(),
        Some(json!(SECRET))
    );
    assert_eq!(s.user_value("una", "gone").await.unwrap(), None);

    let receipt = s.forget_user("una").await.unwrap();
    assert_eq!(receipt.user_id, "una");
    assert_eq!(receipt.redis_key, s.keys().user("una"));
    assert_eq!(receipt.removed_keys, ["email", "prefs"]);
    let p = s.keys().partition("una");
    let entry: Vec<(String, std::collections::BTreeMap<String, String>)> = t.cmd(&[
        "XRANGE",
        &s.keys().wal(p),
        &receipt.wal_entry,
        &receipt.wal_entry,
    ]);
    assert_eq!(entry[0].1["op"], "user_forget");
    assert_eq!(entry[0].1["d"], r#"{"keys":2}"#);
    // The memory erasure follows it in the user's partition, with the rule it erases by.
    let last: Vec<(String, std::collections::BTreeMap<String, String>)> =
        t.cmd(&["XREVRANGE", &s.keys().wal(p), "+", "-", "COUNT", "1"]);
    assert_eq!(last[0].1["op"], "mem_forget");
    assert_eq!(last[0].1["d"], r#"{"label":1}"#);
    assert_eq!(receipt.memory_namespaces, Vec::<Vec<String>>::new());

    assert_eq!(t.cmd::<i64>(&["EXISTS", &receipt.redis_key]), 0);
    // A day-long tombstone keeps a re-seed after a Redis loss from putting the values back.
    let tombstone = s.keys().user_forgotten("una");
    assert_eq!(tombstone, format!("as:{{{p}}}:u:una:forgotten"));
    assert!((86_390..=86_400).contains(&t.ttl(&tombstone)));
    assert_eq!(s.user_value("una", "email").await.unwrap(), None);
    assert_eq!(
        s.user_value("other", "email").await.unwrap(),
        Some(json!("keep"))
    );
    assert_eq!(s.list_sessions(Some("una")).await.unwrap(), ["us"]);
    assert_eq!(s.get_working("us", "w").await.unwrap(), Some(json!(1)));
    assert!(s.checkpoint_latest("us", "cp").await.unwrap().is_some());
    assert_eq!(s.incomplete_decisions(Some("us")).await.unwrap()[0].id, d);

    // No stream entry anywhere carries the value.
    for key in t.all_keys() {
        if t.cmd::<String>(&["TYPE", &key]) == "stream" {
            let entries: Vec<(String, Vec<String>)> = t.cmd(&["XRANGE", &key, "-", "+"]);
            for (id, fields) in entries {
                assert!(
                    fields.iter().all(|f| !f.contains(SECRET)),
                    "{key} {id} carries the value: {fields:?}"
                );
            }
        }
    }
    let refs: Vec<(String, String)> = t
        .wal_records()
        .into_iter()
        .filter(|(op, id, _)| op.starts_with("user_") && id == "una")
        .map(|(op, _, d)| (op, d))
        .collect();
    let pair = |op: &str, d: &str| (op.to_string(), d.to_string());
    assert_eq!(
        refs,
        [
            pair("user_set", r#"{"key":"email"}"#),
            pair("user_set", r#"{"key":"prefs"}"#),
            pair("user_set", r#"{"key":"gone"}"#),
            pair("user_del", r#"{"key":"gone"}"#),
            pair("user_forget", r#"{"keys":2}"#),
        ]
    );

    let empty = s.forget_user("nobody").await.unwrap();
    assert_eq!(empty.removed_keys, Vec::<String>::new());
}
