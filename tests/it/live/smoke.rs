//! A first pass over every capability against a real Redis.

use agentstate::*;
use serde_json::json;

use crate::support::env;

#[tokio::test]
async fn every_capability_round_trips() {
    let t = env().await;
    let s = &t.store;
    let sid = s
        .create_session(&NewSession::new().id("root1").user("alice"))
        .await
        .unwrap();
    assert_eq!(sid, "root1");
    let kid = s
        .create_session(&NewSession::new().parent("root1", Lifecycle::Linked))
        .await
        .unwrap();
    let meta = s.require_session(&kid).await.unwrap();
    assert_eq!(meta.spawn_depth, 1);
    assert_eq!(meta.parent.as_deref(), Some("root1"));
    assert_eq!(s.children("root1").await.unwrap(), vec![kid.clone()]);

    for i in 1..=5 {
        let seq = s
            .append(&sid, &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
        assert_eq!(seq, i);
    }
    let (c, note) = s
        .compact(&sid, &Compaction::new(2, 3, "summary").tokens(100, 10))
        .await
        .unwrap();
    assert_eq!((c, note), (1, 6));
    let active: Vec<u64> = s
        .messages(&sid, MessageQuery::active())
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(active, vec![1, 4, 5, 6]);
    let last2: Vec<u64> = s
        .messages(&sid, MessageQuery::active().last(3))
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(last2, vec![4, 5, 6]);
    let all = s.messages(&sid, MessageQuery::all()).await.unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all[1].state, MessageState::CompactedOut);

    let v1 = s
        .set_working(&sid, "plan", &json!({"step": 1}))
        .await
        .unwrap();
    assert_eq!(v1, 1);
    let err = s
        .set_working_if_version(&sid, "plan", &json!({"step": 2}), 0)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 0,
                current: 1
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        s.get_working(&sid, "plan").await.unwrap(),
        Some(json!({"step": 1}))
    );
    let ck = s.checkpoint(&sid, "after-plan", None).await.unwrap();
    let latest = s
        .checkpoint_latest(&sid, "after-plan")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.id, ck);
    assert_eq!(latest.payload, json!({"plan": {"step": 1}}));

    assert_eq!(
        s.save_state("alice", &json!({"a": 1}), None, None)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        s.save_state("alice", &json!({"a": 2}), None, None)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        s.save_state("alice", &json!({"a": 7}), None, Some(7))
            .await
            .unwrap(),
        7
    );
    assert_eq!(
        s.export_state("alice", None, None).await.unwrap(),
        Some(json!({"a": 7}))
    );
    assert_eq!(s.export_state("alice", None, Some(3)).await.unwrap(), None);

    let d = s
        .record_decision(
            &sid,
            &NewDecision::new("ship it", "tests pass").action("deploy"),
        )
        .await
        .unwrap();
    assert_eq!(s.incomplete_decisions(Some(&sid)).await.unwrap().len(), 1);
    assert!(s.record_outcome(&d, "deployed").await.unwrap());
    assert!(!s.record_outcome(&d, "deployed").await.unwrap());
    assert!(s.incomplete_decisions(None).await.unwrap().is_empty());

    s.set_user_value("alice", "tz", &json!("UTC"))
        .await
        .unwrap();
    assert_eq!(
        s.user_value("alice", "tz").await.unwrap(),
        Some(json!("UTC"))
    );
    let receipt = s.forget_user("alice").await.unwrap();
    assert_eq!(receipt.removed_keys, vec!["tz".to_string()]);
    assert_eq!(s.user_value("alice", "tz").await.unwrap(), None);

    assert_eq!(
        s.list_sessions(Some("alice")).await.unwrap(),
        vec!["root1".to_string()]
    );
    assert_eq!(s.close_session("root1", true).await.unwrap(), 2);
    assert!(s.session(&kid).await.unwrap().is_none());
    assert!(s.list_sessions(None).await.unwrap().is_empty());
}
