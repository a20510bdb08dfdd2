//! Erasure that reaches SQLite: a forgotten user's values and a closed session tree leave the database files.

use agentstate::*;
use serde_json::json;

use crate::support::count;
use crate::support::on_both_backends;
use crate::support::{create, env, TestEnv};

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
    // The wal carries only references: checked before a flush trims it, on the records
    // of both of bob's values.
    let p = s.keys().partition("bob");
    let wal: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(s.keys().wal(p))
        .arg("-")
        .arg("+")
        .query(&mut t.redis())
        .unwrap();
    let bobs: Vec<&Vec<(String, String)>> = wal
        .iter()
        .map(|(_, fields)| fields)
        .filter(|f| {
            f.contains(&("op".into(), "user_set".into()))
                && f.contains(&("id".into(), "bob".into()))
        })
        .collect();
    assert_eq!(bobs.len(), 2, "{wal:?}");
    assert!(!format!("{wal:?}").contains(secret), "{wal:?}");
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

on_both_backends!(closing_a_session_removes_its_tree_from_sqlite);
async fn closing_a_session_removes_its_tree_from_sqlite(t: TestEnv) {
    let s = &t.store;
    let (root, linked, grandkid, detached) = ("croot", "clinked", "cgrand", "cdet");
    create(&t, root, None, None).await;
    create(&t, linked, None, Some((root, Lifecycle::Linked))).await;
    create(&t, grandkid, None, Some((linked, Lifecycle::Ephemeral))).await;
    create(&t, detached, None, Some((root, Lifecycle::Detached))).await;
    for sid in [root, linked, grandkid] {
        s.append(sid, &NewMessage::new("user").content("m"))
            .await
            .unwrap();
        s.record_decision(sid, &NewDecision::new("d", "r"))
            .await
            .unwrap();
    }
    t.flush().await;
    assert_eq!(t.durable_ints("SELECT count(*) FROM sessions", "")[0], 4);
    assert_eq!(s.close_session(root, true).await.unwrap(), 3);
    t.flush().await;
    let left = t.durable_rows("SELECT id, parent FROM sessions ORDER BY id", "");
    assert_eq!(left, vec![vec![detached.to_string(), String::new()]]);
    for table in ["messages", "decisions"] {
        let n = t.durable_ints(&format!("SELECT count(*) FROM {table}"), "")[0];
        assert_eq!(n, 0, "{table}");
    }
}

on_both_backends!(forgetting_a_user_erases_the_memory_namespaces_that_name_them_in_both_tiers);
async fn forgetting_a_user_erases_the_memory_namespaces_that_name_them_in_both_tiers(t: TestEnv) {
    let s = &t.store;
    let secret = "SECRET-memory-of-ann-51c0";
    let item = NewMemoryItem {
        value: json!({"fact": secret}).as_object().unwrap().clone(),
        ..NewMemoryItem::default()
    };
    let namespaces: [&[&str]; 5] = [
        &["users", "ann", "facts"],
        &["users", "ann", "prefs"],
        &["docs", "ann"],
        &["users", "annie", "facts"],
        &["users", "bob", "facts"],
    ];
    for ns in namespaces {
        s.put_memory(ns, "k", &item).await.unwrap();
    }
    // One of ann's namespaces only the durable tier holds (Redis lost it): the durable
    // erasure goes by the rule, not by what Redis held.
    t.flush().await;
    let _: i64 = t.cmd(&["DEL", &s.keys().memory("users.ann.prefs")]);
    let _: i64 = t.cmd(&[
        "SREM",
        &s.keys()
            .memory_namespaces(s.keys().memory_partition("users.ann.prefs")),
        "users.ann.prefs",
    ]);
    let receipt = s.forget_user("ann").await.unwrap();
    let l = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        receipt.memory_namespaces,
        [l(&["docs", "ann"]), l(&["users", "ann", "facts"])]
    );
    assert_eq!(
        s.get_memory(&["users", "ann", "facts"], "k", false)
            .await
            .unwrap(),
        None
    );
    assert!(s
        .get_memory(&["users", "annie", "facts"], "k", false)
        .await
        .unwrap()
        .is_some());
    t.flush().await;
    assert_eq!(
        t.durable_rows("SELECT namespace FROM memory_items ORDER BY namespace", ""),
        [
            vec!["users.annie.facts".to_string()],
            vec!["users.bob.facts".to_string()]
        ]
    );
}

#[tokio::test]
async fn the_user_label_position_is_configurable() {
    let t = crate::support::env_with(|c| c.memory_user_label(2)).await;
    let s = &t.store;
    let item = NewMemoryItem {
        value: json!({"fact": "x"}).as_object().unwrap().clone(),
        ..NewMemoryItem::default()
    };
    s.put_memory(&["tenants", "acme", "ann"], "k", &item)
        .await
        .unwrap();
    s.put_memory(&["users", "ann", "facts"], "k", &item)
        .await
        .unwrap();
    let receipt = s.forget_user("ann").await.unwrap();
    assert_eq!(receipt.memory_namespaces, [["tenants", "acme", "ann"]]);
    t.flush().await;
    assert_eq!(
        t.durable_rows("SELECT namespace FROM memory_items", ""),
        [["users.ann.facts"]]
    );
}
