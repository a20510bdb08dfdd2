//! Decisions: ids that carry the partition, outcomes (once), and incomplete decisions for
//! crash recovery.

use agentstate::*;
use serde_json::json;

use crate::support::env;

/// Ids of the decisions without an outcome (all sessions, or one).
async fn open_ids(s: &Store, sid: Option<&str>) -> Vec<String> {
    let open = s.incomplete_decisions(sid).await.unwrap();
    open.into_iter().map(|d| d.id).collect()
}

#[tokio::test]
async fn incomplete_decisions_are_those_without_an_outcome() {
    let t = env().await;
    let s = &t.store;
    for sid in ["da", "db"] {
        s.create_session(&NewSession::new().id(sid)).await.unwrap();
    }
    let d1 = s
        .record_decision(
            "da",
            &NewDecision::new("retry", "flaky")
                .action("rerun")
                .meta(json!({"n": 1})),
        )
        .await
        .unwrap();
    let d2 = s
        .record_decision("da", &NewDecision::new("stop", "done"))
        .await
        .unwrap();
    // Listing orders by creation time (ms): keep the sessions' decisions apart.
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    let d3 = s
        .record_decision("db", &NewDecision::new("go", "ok"))
        .await
        .unwrap();
    let parsed = DecisionId::parse(&d1, 16).unwrap();
    assert_eq!(parsed.partition, s.keys().partition("da"));

    let open = s.incomplete_decisions(None).await.unwrap();
    let ids: Vec<&str> = open.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, [d1.as_str(), d2.as_str(), d3.as_str()]);
    let first = &open[0];
    assert_eq!(
        (
            first.session_id.as_str(),
            first.decision.as_str(),
            first.rationale.as_str()
        ),
        ("da", "retry", "flaky")
    );
    assert_eq!(first.planned_action.as_deref(), Some("rerun"));
    assert_eq!((&first.meta, &first.outcome), (&json!({"n": 1}), &None));
    assert_eq!(open[1].planned_action, None);
    assert_eq!(open_ids(s, Some("da")).await, [d1.clone(), d2.clone()]);

    assert!(s.record_outcome(&d1, "rerun passed").await.unwrap());
    let before = t.snapshot();
    assert!(!s.record_outcome(&d1, "again").await.unwrap());
    assert_eq!(t.snapshot(), before, "a second outcome writes nothing");
    let left = open_ids(s, None).await;
    assert_eq!(left, [d2.clone(), d3.clone()]);

    let stream = s.keys().decisions(parsed.partition);
    let entries: Vec<(String, std::collections::BTreeMap<String, String>)> =
        t.cmd(&["XRANGE", &stream, "-", "+"]);
    let outcome = entries
        .iter()
        .find(|(_, f)| f["type"] == "outcome")
        .unwrap();
    assert_eq!(outcome.1["decision_id"], d1);
    assert_eq!(outcome.1["outcome"], "rerun passed");
    assert_eq!(outcome.1["session_id"], "da");

    // Closing a session drops its open decisions.
    s.close_session("da", true).await.unwrap();
    let left = open_ids(s, None).await;
    assert_eq!(left, [d3]);
}

#[tokio::test]
async fn closing_a_session_keeps_open_decisions_of_others_whose_meta_names_it() {
    let t = env().await;
    let s = &t.store;
    let a = "alpha";
    // A second session in the same partition (one open-decisions hash).
    let b = (0..)
        .map(|i| format!("b{i}"))
        .find(|b| s.keys().partition(b) == s.keys().partition(a))
        .unwrap();
    for sid in [a, b.as_str()] {
        s.create_session(&NewSession::new().id(sid)).await.unwrap();
    }
    let d = s
        .record_decision(
            a,
            &NewDecision::new("d", "r").meta(json!({"session_id": b})),
        )
        .await
        .unwrap();
    s.close_session(&b, true).await.unwrap();
    assert_eq!(open_ids(s, Some(a)).await, vec![d.clone()]);
    assert!(s.record_outcome(&d, "done").await.unwrap());
}
