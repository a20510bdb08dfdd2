//! Working state: versions, compare-and-set conflicts, delete/clear, and checkpoints that
//! promote it.

use agentstate::*;
use serde_json::json;

use crate::support::env;

#[tokio::test]
async fn a_stale_version_conflicts_with_exact_numbers_and_changes_nothing() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("w")).await.unwrap();
    assert_eq!(s.set_working("w", "a", &json!(1)).await.unwrap(), 1);
    assert_eq!(s.set_working("w", "b", &json!("two")).await.unwrap(), 2);
    assert_eq!(
        s.set_working_if_version("w", "a", &json!(10), 2)
            .await
            .unwrap(),
        3
    );

    for stale in [0, 2, 4] {
        let err = t
            .rejected(s.set_working_if_version("w", "a", &json!(99), stale))
            .await;
        assert!(
            matches!(err, Error::Conflict { expected, current: 3 } if expected == stale),
            "{err:?}"
        );
    }
    let state = s.working("w").await.unwrap();
    assert_eq!(state.version, 3);
    assert_eq!(
        serde_json::Value::Object(state.values),
        json!({"a": 10, "b": "two"})
    );

    assert_eq!(s.delete_working("w", "a").await.unwrap(), 4);
    assert_eq!(s.get_working("w", "a").await.unwrap(), None);
    assert_eq!(
        s.delete_working("w", "a").await.unwrap(),
        5,
        "a no-op delete still bumps"
    );
    assert_eq!(s.clear_working("w").await.unwrap(), 6);
    let cleared = s.working("w").await.unwrap();
    assert_eq!((cleared.version, cleared.values.len()), (6, 0));
    assert_eq!(s.require_session("w").await.unwrap().version, 6);
    let wal: Vec<String> = t.wal_records().into_iter().map(|(op, _, _)| op).collect();
    assert_eq!(
        wal,
        ["session_create"],
        "working state never reaches the wal"
    );
}

#[tokio::test]
async fn checkpoints_promote_all_or_the_listed_keys() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("c")).await.unwrap();
    s.set_working("c", "plan", &json!({"step": 1}))
        .await
        .unwrap();
    s.set_working("c", "notes", &json!(["a"])).await.unwrap();
    let all = s.checkpoint("c", "full", None).await.unwrap();
    let some = s
        .checkpoint("c", "plan-only", Some(&["plan", "missing"]))
        .await
        .unwrap();
    assert!(all.starts_with("ckpt_") && all.len() == 29, "{all}");
    let full = s.checkpoint_latest("c", "full").await.unwrap().unwrap();
    assert_eq!(
        (full.id.as_str(), full.session_id.as_str()),
        (all.as_str(), "c")
    );
    assert_eq!(full.payload, json!({"plan": {"step": 1}, "notes": ["a"]}));
    let partial = s
        .checkpoint_latest("c", "plan-only")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (partial.id.as_str(), &partial.payload),
        (some.as_str(), &json!({"plan": {"step": 1}}))
    );

    s.set_working("c", "plan", &json!({"step": 2}))
        .await
        .unwrap();
    // Listing orders by creation time (ms): keep the two apart.
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    let newer = s.checkpoint("c", "full", None).await.unwrap();
    let labels: Vec<(String, String)> = s
        .checkpoints("c")
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.label, c.id))
        .collect();
    assert_eq!(
        labels,
        [("plan-only".to_string(), some), ("full".to_string(), newer)]
    );
    assert_eq!(s.checkpoint_latest("c", "none").await.unwrap(), None);
    assert_eq!(t.wal_ops("checkpoint").len(), 3);
}
